"""`rlbatch train --batch auto` on the demo task against the demo's ladder (issue 55, item 4).

The ladder: a fixed-design `rlbatch demo --seeds 3` output folder (tiny preset, arithmetic, B = 16 ... 4096 on the
square-root rule, target 0.37, process-CPU clock). The auto runs: the same model, task, options, budget and LR base
(B0 = 16, lr0 = 5e-5, sqrt rule), started at ``--start`` (default B0) with ``--batch auto``, one per seed, two at a
time with one torch thread each (as the demo runs its trials). Each run stops at the target as the ladder's trials do.

The comparison is the decision module's own (:func:`rlbatch.analysis.decision.decide`: samples-to-target and
time-to-target per seed at the crossing, on the process-CPU clock, the seed spread moderated across the
configurations, simultaneous 95% intervals): the auto configuration's relative time-to-target against B0 and
against the ladder's best configuration (smallest estimated time), and the training compute each spent (CPU
seconds of the training steps, summed over runs): the auto runs against the whole ladder.

    .venv/bin/python benchmarks/auto_batch_demo.py --ladder runs/demo-fixed --out runs/auto-eval --seeds 0,1,2,3,4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TARGET = 0.37


def train_auto(out: Path, seed: int, start: int, window: int) -> Path:
    """One auto run (a subprocess of the CLI, so that its process-CPU clock is its own); skipped when finished."""
    run = out / f"auto-s{seed}"
    if (run / "run.json").exists() and json.loads((run / "run.json").read_text()).get("status") == "finished":
        return run
    from rlbatch.study.demo import DEMOS

    d = DEMOS["tiny"]
    o = d["options"]
    cmd = [str(Path(sys.executable).parent / "rlbatch"), "train", "--model", d["model"], "--task", d["task"],
           "-P", str(start // 8), "-G", "8", "--base-batch", str(d["base_batch"]), "--base-lr", str(d["base_lr"]),
           "--rule", "sqrt", "--samples", str(d["samples"]), "--seed", str(seed), "--batch", "auto",
           "--auto-window", str(window), "--eval-every", str(o["eval_every"]), "--eval-size", str(o["eval_size"]),
           "--max-new-tokens", str(o["max_new_tokens"]), "--micro-batch-size", str(o["micro_batch_size"]),
           "--max-grad-norm", str(o["max_grad_norm"]), "--target", str(TARGET), "--stop-on-target",
           "--stop-hold", str(o["stop_hold"]), "--out", str(run), "--format", "json"]
    if run.exists():
        cmd.append("--resume")
    # one torch thread per run, as the demo's trials (one per core): process-CPU seconds then count one core's work
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ladder", required=True, type=Path, help="a `rlbatch demo --seeds 3` output folder")
    ap.add_argument("--out", required=True, type=Path, help="where the auto runs go (resumable)")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--start", type=int, default=16, help="the auto runs' first batch P x G (G = 8)")
    ap.add_argument("--window", type=int, default=10, help="steps between decisions")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    from rlbatch.analysis.curves import group_seeds
    from rlbatch.analysis.decision import decide
    from rlbatch.analysis.estimate import comparison_spread, estimate_configuration
    from rlbatch.readers.collect import load_all
    from rlbatch.runstore import read_run

    seeds = [int(s) for s in args.seeds.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with ThreadPoolExecutor(args.workers) as pool:
        dirs = list(pool.map(lambda s: train_auto(args.out, s, args.start, args.window), seeds))
    print(f"{len(dirs)} auto runs in {time.time() - t0:.0f} s", flush=True)
    ladder, _ = load_all([args.ladder])
    ladder = [r for r in ladder if r.meta.lr_rule == "sqrt"]
    auto = [read_run(d) for d in dirs]
    groups = {**group_seeds(ladder), "auto": auto}
    spread = comparison_spread(groups, TARGET, clock="cpu")
    ests = {n: estimate_configuration(rs, TARGET, clock="cpu", name=n, spread=spread) for n, rs in groups.items()}
    ref = next(n for n, rs in groups.items() if rs[0].meta.batch_size == 16 and n != "auto")
    fixed = {n: e for n, e in ests.items() if n != "auto" and e["reached"] and e["time_to_target_s"]}
    best = min(fixed, key=lambda n: fixed[n]["time_to_target_s"])

    def cpu(rs):
        return sum(float(r.metrics["time/cpu_s"].sum()) for r in rs if "time/cpu_s" in r.metrics.columns)

    print(f"\n| comparison | auto's relative time-to-target (95% simultaneous) | verdict |\n|---|---|---|")
    for against in (ref, best):
        dec = decide({against: ests[against], **{n: e for n, e in ests.items() if n != against}}, against)
        v = dec.verdicts["auto"]
        iv = v.relative_time
        print(f"| against {against} ({'B0' if against == ref else 'the ladder best'}) | "
              + (f"{iv.value:.2f}x ({iv.lo:.2f}-{iv.hi:.2f})" if iv.value is not None and iv.lo is not None
                 else "—") + f" | {v.label} ({v.why}) |")
    a = ests["auto"]
    print(f"\nauto: {a['n_reached']} of {a['n_seeds']} seeds reached {TARGET}; samples-to-target "
          f"{a['samples_to_target'] or float('nan'):,.0f}, time-to-target {a['time_to_target_s'] or float('nan'):.1f} "
          f"CPU-s; ladder best {best}: {fixed[best]['samples_to_target']:,.0f} samples, "
          f"{fixed[best]['time_to_target_s']:.1f} CPU-s; B0: {ests[ref]['time_to_target_s']:.1f} CPU-s")
    for d, r in zip(dirs, auto):
        dec = [json.loads(x) for x in (d / "controller.jsonl").read_text().splitlines()]
        b = r.metrics["batch/generated"].astype(int).tolist()
        print(f"  {r.run_id}: {len(b)} steps, batches {sorted(set(b))}, last {b[-1]}, {sum(x['moved'] for x in dec)} "
              f"moves in {len(dec)} decisions")
    print(f"\ncompute (CPU-s of training steps): auto {cpu(auto):.0f} over {len(auto)} runs; the ladder "
          f"{cpu(ladder):.0f} over {len(ladder)} runs (ratio {cpu(auto) / max(cpu(ladder), 1e-9):.2f})")


if __name__ == "__main__":
    main()
