"""The adaptive sweep (rlbatch.study.adaptive.decide) against the full sweep, on the same ladder and seeds.

The full sweep runs every trial to its target (not to the largest budget): its cost is, per trial, the retained
samples and clock seconds up to its first crossing of the target (its whole run when it never reaches it), summed
over trials; its best time-to-target is the accounting's (rlbatch analyze) over the full runs. The adaptive sweep
watches the same trials as live jobs and stops them when the plan decides (rlbatch.study.replay: the stored run
store's lines written in the order of the trials' own clocks, all trials launched together). Reported per ladder:
the samples and seconds the adaptive sweep let run, as fractions of the full sweep's, and whether its pick's measured
time-to-target (full runs) is within 10% of the best's.

Ladders: every stored sweep given (default tests/data/demo_sweep and demo_sweep_cpu at target 0.45, demo_sweep_v1cache
at 0.3: the square-root LR ladder, 3 seeds; the fixed-LR control is a diagnostic, not a candidate), and the synthetic
model of rlbatch.backends.synthetic (known answer; the doubling ladder from B = 128). Each stored ladder also prints
the ideal race (race_bound): every trial stopped exactly when the fastest reaches the target, the least any policy
spends that stops nothing on a prediction. ``--max-active K`` runs K configurations at once (the next in ladder
order when a slot frees) and ``--skip-after N`` skips larger batches once N above the best lost (opt-in: it picks
wrong where one-seed time-to-target is not unimodal in B; benchmarks/results/adaptive_vs_full.md).

    PYTHONPATH=src python benchmarks/adaptive_vs_full.py [--sweep DIR:TARGET ...] [--seeds N] [--seed K ...] [--n-boot 100]
        [--no-synthetic] [--max-active K [--skip-after N]]

Each ladder ends with ``adaptive_sample_fraction=X adaptive_pick_within_10pct=yes|no``.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

from rlbatch.analysis.accounting import account_runs, estimate_configuration, seed_estimate
from rlbatch.analysis.throughput import clock_basis, run_clock
from rlbatch.backends.synthetic import SyntheticModel, synthetic_trial
from rlbatch.study.adaptive import run_samples, run_seconds
from rlbatch.study.replay import ladder_runs, replay_sweep
from rlbatch.study.run import adaptive_sweep

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [f"{ROOT}/tests/data/demo_sweep:0.45", f"{ROOT}/tests/data/demo_sweep_cpu:0.45",
           f"{ROOT}/tests/data/demo_sweep_v1cache:0.3"]


def full_cost(runs, target: float, metric: str, clock: str) -> tuple[float, float]:
    """(samples, seconds) of the full sweep with every trial run to its target (its whole run if never)."""
    s_tot = t_tot = 0.0
    for r in runs:
        e = estimate_configuration([r], target, metric, n_boot=0, clock=clock)
        if e["samples_to_target"] is not None and e["time_to_target_s"] is not None:
            s_tot += e["samples_to_target"]
            t_tot += e["time_to_target_s"]
        else:
            s_tot += run_samples(r)
            t_tot += run_seconds(r, clock)
    return s_tot, t_tot


def race_bound(runs, target: float, metric: str, clock: str) -> float:
    """Retained samples of the ideal race: every trial launched together and stopped exactly when the fastest one
    reaches the target on ``clock`` (its own time-to-target when it is earlier), nothing stopped on a prediction.
    What the adaptive loop's race rule costs with instant stops; the loop spends more where the logs arrive in
    another clock's order than the accounting's (the CPU demo sweeps: wall order, CPU-clock accounting)."""
    est = [seed_estimate(r, target, metric, clock=clock) for r in runs]
    best = min(e["time_to_target_s"] for e in est if e["time_to_target_s"] is not None)
    total = 0.0
    for r, e in zip(runs, est):
        xs, ts = run_clock(r, clock)
        t = min(best, e["time_to_target_s"] if e["time_to_target_s"] is not None else math.inf)
        total += float(np.interp(t, ts, xs))
    return total


def compare(name: str, runs, target: float, metric: str, n_boot: int, **kw) -> dict:
    runs = ladder_runs(runs)
    clock = clock_basis(runs)
    acc = account_runs(runs, target, metric, n_boot=200)
    times = {r["run"]: r["time_to_target_s"] for r in acc["rows"] if r["time_to_target_s"] is not None}
    best = min(times, key=times.get)
    s_full, t_full = full_cost(runs, target, metric, clock)
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        res = replay_sweep(runs, tmp, target=target, fmt="rlbatch", metric=metric, n_boot=n_boot, **kw)
    cpu = time.process_time() - t0
    pick = res.recommended
    # the pick as a configuration of the full accounting (the plan names a configuration, or a run of one)
    pick_cfg = next((r["run"] for r in acc["rows"] if r["run"] == pick or pick in r["runs"]), pick)
    t_pick = times.get(pick_cfg)
    within = t_pick is not None and t_pick <= 1.1 * times[best]
    frac = res.samples_spent / s_full
    bound = race_bound(runs, target, metric, clock) / s_full
    print(f"## {name}: {len(runs)} trials, target {target:g}, clock {clock}")
    print(f"full sweep (each trial to its target): {s_full:.0f} samples, {t_full:.1f} s; measured time-to-target "
          + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(times.items(), key=lambda kv: kv[1])))
    for c in dict.fromkeys(t.config for t in res.trials):
        ts = [t for t in res.trials if t.config == c]
        print(f"  {c}: {ts[0].state} after {sum(t.samples for t in ts):.0f} samples ({ts[0].decided_by})")
    print(f"adaptive: {res.samples_spent:.0f} samples ({frac:.3f} of full), {res.time_spent_s:.1f} s "
          f"({res.time_spent_s / t_full:.3f} of full); {res.replans} re-plans, {cpu:.0f} CPU s; picks {pick} "
          f"(measured {t_pick if t_pick is None else round(t_pick, 1)} s vs best {best} {times[best]:.1f} s)")
    print(f"ideal race (every trial stopped exactly at the best's time-to-target): {bound:.3f} of the full sweep's "
          "samples")
    print(f"ladder={name} adaptive_sample_fraction={frac:.3f} adaptive_time_fraction={res.time_spent_s / t_full:.3f} "
          f"adaptive_pick_within_10pct={'yes' if within else 'no'}", flush=True)
    return {"name": name, "fraction": frac, "within": within}


def synthetic(n_boot: int, target: float = 0.7) -> dict:
    """The doubling ladder B = 128 .. 8192 on the synthetic model, all trials launched together (chunks here)."""
    m = SyntheticModel()
    ladder = [128 * 2 ** k for k in range(7)]
    best = min(ladder, key=lambda b: m.time_to_target(b, target))
    s_full = sum(math.ceil(m.samples_to_target(b, target) / b) * b for b in ladder)
    budget = int(1.15 * m.samples_to_target(ladder[-1], target))
    with tempfile.TemporaryDirectory() as tmp:
        res = adaptive_sweep(partial(synthetic_trial, model=m),
                             {"prompts_per_step": 16, "group_size": 8, "lr": 1e-6, "samples": budget, "seed": 0},
                             Path(tmp), target=target, max_doublings=len(ladder) - 1, max_active=None,
                             n_boot=n_boot)
    pick = res.recommended_batch_size
    within = m.time_to_target(pick, target) <= 1.1 * m.time_to_target(best, target)
    frac = res.samples_spent / s_full
    print(f"## synthetic: ladder {ladder}, target {target:g}; best by hand B={best}")
    for t in res.trials:
        print(f"  B={t.batch_size}: {t.state} after {t.samples:.0f} samples ({t.decided_by})")
    print(f"full sweep (each trial to its target, noise-free): {s_full} samples; adaptive {res.samples_spent:.0f}; "
          f"picks B={pick}")
    print(f"ladder=synthetic adaptive_sample_fraction={frac:.3f} adaptive_pick_within_10pct={'yes' if within else 'no'}",
          flush=True)
    return {"name": "synthetic", "fraction": frac, "within": within}


def main() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from plan_accuracy import load_sweep

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", help="DIR:TARGET of a finished sweep (repeatable)")
    ap.add_argument("--metric", default="eval/score")
    ap.add_argument("--n-boot", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=None, help="use the first N seeds of each stored sweep (default all)")
    ap.add_argument("--seed", type=int, action="append", default=None,
                    help="use only this seed of each stored sweep (repeatable; with --seeds, both must hold)")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--max-active", type=int, default=None,
                    help="configurations running at once (default all: the whole ladder launched together; k: the "
                         "first k in ladder order, the next one when a slot frees)")
    ap.add_argument("--skip-after", type=int, default=None,
                    help="with --max-active: skip larger batches once this many batches above the best lost "
                         "(default: never)")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    out = []
    for item in a.sweep or DEFAULT:
        path, _, target = item.rpartition(":")
        runs = [r for r in load_sweep(Path(path)) if (a.seeds is None or (r.meta.seed or 0) < a.seeds)
                and (a.seed is None or (r.meta.seed or 0) in a.seed)]
        name = (Path(path).name + (f"[seeds<{a.seeds}]" if a.seeds is not None else "")
                + (f"[seed={','.join(map(str, a.seed))}]" if a.seed is not None else ""))
        out.append(compare(name + (f"[max_active={a.max_active}]" if a.max_active else "")
                           + (f"[skip_after={a.skip_after}]" if a.skip_after else ""), runs, float(target),
                           a.metric, a.n_boot, max_active=a.max_active, skip_after=a.skip_after))
    if not a.no_synthetic:
        out.append(synthetic(a.n_boot))
    print("summary: " + "; ".join(f"{o['name']} {o['fraction']:.3f} {'yes' if o['within'] else 'no'}" for o in out))


if __name__ == "__main__":
    main()
