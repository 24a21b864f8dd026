"""Samples spent by the adaptive sweep (rlbatch.sweep.adaptive) versus the full sweep, and whether both pick the same
batch.

1. On the synthetic model of rlbatch.sweep.synthetic (rN(B) = (1 + B/b_noise)/(1 + B0/b_noise), step time
   gen_s + c*B; best ladder batch known by hand): the full sweep runs every ladder batch B0..B0*2^6 for the budget
   the largest needs to reach the target; the adaptive sweep doubles from B0 until the plan can decide.
2. With --sweep DIR (a finished sweep of run directories, one seed, square-root rule): the adaptive sweep is
   replayed on it (each trial is the stored run cut to the samples the adaptive sweep asks for), against the samples
   the stored sweep actually spent.

    PYTHONPATH=src python benchmarks/adaptive_vs_full.py [--sweep runs/demo/sweep --target 0.6] [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import shutil
import tempfile
from functools import partial
from pathlib import Path


def synthetic(seeds: int, target: float) -> None:
    from rlbatch.sweep.adaptive import adaptive_sweep
    from rlbatch.sweep.synthetic import SyntheticModel, synthetic_trial

    m = SyntheticModel()
    b0, ladder = 128, [128 * 2 ** k for k in range(7)]
    best = min(ladder, key=lambda b: m.time_to_target(b, target))
    budget = int(1.15 * m.samples_to_target(ladder[-1], target))
    full = sum(math.ceil(budget / b) * b for b in ladder)
    print(f"synthetic model: b_noise={m.b_noise:g}, step time {m.gen_s:g} s + {m.train_s_per_response:g} s x B, "
          f"target {target:g}; best ladder batch by hand: B={best}")
    print(f"full sweep: {len(ladder)} trials x {budget} samples = {full} samples")
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            res = adaptive_sweep(partial(synthetic_trial, model=m),
                                 {"prompts_per_step": b0 // 8, "group_size": 8, "lr": 1e-6, "samples": budget,
                                  "seed": seed}, Path(tmp), target=target, max_doublings=len(ladder) - 1)
        print(f"  seed {seed}: adaptive spent {res['samples_spent']:.0f} samples = "
              f"{res['samples_spent'] / full:.3f} of the full sweep; trials B={[t['batch_size'] for t in res['trials']]}; "
              f"recommends B={res['recommended_batch_size']} ({'right' if res['recommended_batch_size'] == best else 'WRONG'})"
              f"; stopped: {res['stopped_because']}")


def replay(sweep: Path, target: float, metric: str) -> None:
    from rlbatch.analysis.accounting import fastest
    from rlbatch.plan import truncate_runs
    from rlbatch.readers import load
    from rlbatch.analysis.accounting import accounting_for_runs
    from rlbatch.runstore import write_run
    from rlbatch.sweep.adaptive import adaptive_sweep

    runs = load(sweep)
    by_b = {}
    for r in sorted(runs, key=lambda r: (r.meta.seed or 0)):
        if r.meta.lr_rule in ("none", "linear"):
            continue
        by_b.setdefault(int(r.meta.batch_size), r)
    ladder = sorted(by_b)
    full = sum(float(r.metrics["samples/retained"].max()) for r in by_b.values())

    def trial(spec, run_dir):
        b = int(spec["prompts_per_step"]) * int(spec["group_size"])
        if b not in by_b:
            raise SystemExit(f"the stored sweep has no B={b}")
        r = by_b[b]
        total = float(r.metrics["samples/retained"].max())
        cut = truncate_runs([r], min(1.0, spec["samples"] / total))[0]
        cut.meta = cut.meta.model_copy(update={"run_id": spec["run_id"]})
        write_run(run_dir, cut)

    b0 = ladder[0]
    r0 = by_b[b0]
    base = {"prompts_per_step": r0.meta.prompts_per_step, "group_size": r0.meta.group_size, "lr": r0.meta.lr,
            "samples": float(r0.metrics["samples/retained"].max())}
    rows, ref, _ = accounting_for_runs(list(by_b.values()), target, metric, by_b[b0].run_id)
    import pandas as pd

    best_run = fastest(pd.DataFrame(rows)) if rows else None
    with tempfile.TemporaryDirectory() as tmp:
        res = adaptive_sweep(trial, base, Path(tmp), target=target, metric=metric,
                             max_doublings=max(1, int(math.log2(ladder[-1] / b0))))
    print(f"stored sweep {sweep}: {len(by_b)} batch sizes {ladder}, {full:.0f} samples; fastest measured: {best_run}")
    print(f"  adaptive replay spent {res['samples_spent']:.0f} samples = {res['samples_spent'] / full:.3f} of it; "
          f"recommends B={res['recommended_batch_size']}; stopped: {res['stopped_because']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", type=Path, help="a finished sweep directory to replay")
    ap.add_argument("--target", type=float, default=0.7)
    ap.add_argument("--metric", default="eval/score")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    synthetic(a.seeds, 0.7)
    if a.sweep:
        replay(a.sweep, a.target, a.metric)


if __name__ == "__main__":
    main()
