"""Cross-check of our GRPO trainer against TRL's ``GRPOTrainer``: the same batch-size study run by both, then
samples-to-target per configuration from each, their ratio, and each one's report.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/trainer_vs_trl_curves.py [--batches 16,32,64] [--seeds 2] [--samples 8192]
        [--target 0.35] [--workers 2] [--out runs/trainer_vs_trl] [--json benchmarks/results/trainer_vs_trl_curves.json]

Both sweeps are :func:`rlbatch.study.ladder.build_ladder` + :func:`rlbatch.backends.local.run_sweep` with the same trial
specs (model ``tiny``, task ``arithmetic``, P, G, the sqrt rule's lr from B0 = 16 / lr0 = 1e-4, grad clip 1.0,
clip_eps 0.2, no KL, token-level mean loss, micro-batch 8, new-token cap, the same prompts per step and seeds, the
same greedy held-out evaluation every ``--eval-every`` retained samples): ``runner="local"`` trains with our
trainer, ``runner="trl"`` with TRL through :mod:`rlbatch.integrations.trl_train`. Samples-to-target is
:func:`rlbatch.analysis.accounting.accounting_summary`'s (per-seed first crossing, mean over seeds, bootstrap 95%
interval over seeds); "within noise" means the two intervals overlap
(:func:`rlbatch.analysis.accounting.intervals_overlap`). Reports: ``OUT/ours/report.md`` and ``OUT/trl/report.md``.

Known differences between the two implementations that the same settings cannot remove (trl 1.16):
- TRL keeps zero-std groups in the batch with advantage 0 and normalises the loss by the tokens of *all* completions
  (``num_items_in_batch``), ours drops them and normalises by the retained tokens: TRL's gradient is ours times the
  retained-token fraction of the step (0.4-0.7 here), so it is clipped less often at max_grad_norm 1.0 and Adam sees
  a per-step rescaled gradient;
- advantage epsilon 1e-4 (TRL) vs 1e-6 (ours); sampling random streams differ (same prompts, different draws), so
  seeds are not paired across trainers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def run_both(a) -> dict:
    from rlbatch.backends.local import run_sweep
    from rlbatch.study.ladder import build_ladder

    opts = dict(eval_every=a.eval_every, eval_size=a.eval_size, eval_batch_size=256, max_new_tokens=a.max_new_tokens,
                micro_batch_size=8, max_grad_norm=1.0, clip_eps=0.2, kl_coef=0.0, checkpoint_every=200)
    specs = build_ladder(base_batch=16, base_lr=1e-4, batches=a.batches, rule="sqrt", group_sizes=[8], seeds=a.seeds,
                        samples=a.samples, model="tiny", task="arithmetic", options=opts)
    secs = {}
    for runner in ("local", "trl"):
        t = time.perf_counter()
        run_sweep(specs, a.out / ("ours" if runner == "local" else "trl"), workers=a.workers, threads=1,
                  settings={"runner": runner, "samples": a.samples, "target": a.target}, progress=False,
                  runner=runner)
        secs[runner] = time.perf_counter() - t
    return secs


def compare(a, secs: dict) -> dict:
    from rlbatch.analysis.accounting import accounting_summary, intervals_overlap
    from rlbatch.readers.collect import load_all
    from rlbatch.study.report import report_sweep

    acc = {}
    for name in ("ours", "trl"):
        d = a.out / name
        try:
            report_sweep(d, target=a.target, title=f"trainer vs TRL: {name}")
        except ValueError as err:  # rlbatch.plan on short noisy runs (B_noise interval <= 0): keep the comparison
            print(f"report of {name} failed: {type(err).__name__}: {err}", file=sys.stderr)
        runs, _ = load_all([d / "trials"])
        acc[name] = {r["batch_size"]: r for r in accounting_summary(runs, a.target)["accounting"]}
    rows = []
    for b in sorted(acc["ours"]):
        o, t = acc["ours"][b], acc["trl"].get(b, {})
        so, st = o.get("samples_to_target"), t.get("samples_to_target")
        rows.append({"batch_size": b, "ours": so, "ours_ci": o.get("samples_to_target_ci"),
                     "ours_per_seed": o.get("samples_to_target_per_seed"), "trl": st,
                     "trl_ci": t.get("samples_to_target_ci"), "trl_per_seed": t.get("samples_to_target_per_seed"),
                     "ratio_ours_over_trl": so / st if so and st else None,
                     "within_noise": (intervals_overlap(o.get("samples_to_target_ci"), t.get("samples_to_target_ci"),
                                                        so, st) if so and st else None),
                     "rN_ours": o.get("rN"), "rN_trl": t.get("rN"),
                     "throughput_ours": o.get("throughput_samples_per_s"),
                     "throughput_trl": t.get("throughput_samples_per_s")})
    return {"target": a.target, "samples": a.samples, "seeds": a.seeds, "batches": a.batches, "seconds": secs,
            "rows": rows, "reports": {n: str(a.out / n / "report.md") for n in ("ours", "trl")}}


def fmt(x, spec=",.0f"):
    return "never" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="16,32,64", help="comma-separated B = P x G (B0 = 16 is always run)")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per configuration, both trainers")
    ap.add_argument("--samples", type=int, default=8192, help="retained-sample budget per trial")
    ap.add_argument("--target", type=float, default=0.35, help="held-out score of samples-to-target")
    ap.add_argument("--eval-every", type=int, default=512, help="retained samples between evaluations")
    ap.add_argument("--eval-size", type=int, default=512, help="held-out items")
    ap.add_argument("--max-new-tokens", type=int, default=5, help="completion length cap")
    ap.add_argument("--workers", type=int, default=2, help="trial processes in parallel (1 thread each)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "trainer_vs_trl", help="sweep directories")
    ap.add_argument("--json", type=Path, default=None, help="write the comparison here")
    ap.add_argument("--compare-only", action="store_true", help="skip training: compare existing sweeps in --out")
    a = ap.parse_args()
    a.batches = [int(x) for x in a.batches.split(",")]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    secs = {} if a.compare_only else run_both(a)
    res = compare(a, secs)
    print(f"same study by both trainers: tiny / arithmetic, G=8, sqrt rule from B0=16 lr0=1e-4, {a.seeds} seed(s), "
          f"{a.samples} retained samples, target {a.target}; wall s: "
          + ", ".join(f"{k} {v:.0f}" for k, v in secs.items()))
    for r in res["rows"]:
        ci = lambda c: f"[{fmt(c[0])}, {fmt(c[1])}]" if c else "[-]"  # noqa: E731
        print(f"B={r['batch_size']:>4}: samples-to-target ours {fmt(r['ours'])} {ci(r['ours_ci'])} "
              f"(seeds {', '.join(fmt(x) for x in r['ours_per_seed'] or [])}) | trl {fmt(r['trl'])} "
              f"{ci(r['trl_ci'])} (seeds {', '.join(fmt(x) for x in r['trl_per_seed'] or [])}) | ratio ours/trl "
              f"{fmt(r['ratio_ours_over_trl'], '.2f')} | within noise: {r['within_noise']} | rN ours "
              f"{fmt(r['rN_ours'], '.2f')} trl {fmt(r['rN_trl'], '.2f')}")
    print(f"reports: {res['reports']['ours']}, {res['reports']['trl']}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
