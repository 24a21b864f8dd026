"""The adaptive sweep's promise, measured (issue 36): on every ladder it picks the full sweep's best (or one within 10%
of its time-to-target) at no more than the ideal race's fraction of the full sweep's samples + 0.05.

The full sweep runs every trial to its target (not to the largest budget): its cost is, per trial, the retained
samples and clock seconds up to its first evaluation at or above the target (the demo's stopping rule; its whole
run when it never reaches it), summed over trials; its best time-to-target is the accounting's (rlbatch analyze) over the full runs. The adaptive sweep
(rlbatch.study.adaptive.decide, the loop of `rlbatch sweep --adaptive` on every backend) watches the same trials as
live jobs and stops them when the plan decides (rlbatch.study.replay: the stored run store's lines written in the
order of the trials' own clocks, all trials launched together). The ideal race is the least any policy spends that
watches the logs, stops nothing on a prediction and never stops the reference: every trial stopped at its first
logged step that ends at or after the first evaluation at or above the target logged by any trial, the reference
(the ladder's smallest batch, against which every rN is measured) run to its own crossing.

A ladder is one seed of a sweep's square-root-rule configurations (the fixed-LR control is a diagnostic, not a
candidate), or one set of runs of a fixed-LR ladder (--logs, as the cs336 update-batch sets). Per ladder the
benchmark prints the race's fraction of the full sweep's samples, the ideal race's, their difference, and whether the
pick is the full sweep's best (within 10% of its time); the last line reads
``adaptive: picks best on N/N ladders; fraction <= ideal + 0.05 on N/N``.

    .venv/bin/python benchmarks/adaptive.py [--sweep DIR:TARGET ...] [--logs DIR:TARGET:GLOB ...] [--seeds 0,1,2]
        [--n-boot 50]

``--sweep`` takes a finished sweep (a directory of run directories, ``DIR/trials``, or a stored ``trials.tar.gz``)
and makes one ladder per seed; ``--logs`` takes logs of any format rlbatch reads (GLOB picks the files) as one
fixed-LR ladder. Default (neither given): the three stored sweeps (tests/data), seeds 0-2.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from rlbatch.analysis.accounting import account_runs
from rlbatch.analysis.curves import curve
from rlbatch.analysis.samples import X
from rlbatch.analysis.throughput import clock_basis, run_clock
from rlbatch.readers.collect import load_all
from rlbatch.study.adaptive import run_samples, run_seconds
from rlbatch.study.replay import ladder_runs, replay_sweep

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [f"{ROOT}/tests/data/demo_sweep:0.45", f"{ROOT}/tests/data/demo_sweep_cpu:0.45",
           f"{ROOT}/tests/data/demo_sweep_v1cache:0.3"]
#: the promise: the race spends at most the ideal race's fraction + this
SLACK = 0.05


def observed_crossing(run, target: float, metric: str, clock: str) -> tuple[float, float] | None:
    """(retained samples, seconds on ``clock``) at the run's first evaluation at or above the target: where a trial
    watched through its logs is first seen to have reached it (the accounting's samples-to-target interpolates
    between evaluations and lies below). None when it never does."""
    c = curve(run, metric)
    hit = c[c[metric] >= target]
    if not len(hit):
        return None
    xs, ts = run_clock(run, clock)
    x = float(hit[X].iloc[0])
    return x, float(np.interp(x, xs, ts))


def full_cost(runs, target: float, metric: str, clock: str) -> tuple[float, float]:
    """(samples, seconds) of the full sweep with every trial stopped at its first evaluation at or above the target
    (the demo's stopping rule; its whole run when it never reaches it), summed over trials."""
    s_tot = t_tot = 0.0
    for r in runs:
        hit = observed_crossing(r, target, metric, clock)
        s, t = hit if hit is not None else (run_samples(r), run_seconds(r, clock))
        s_tot += s
        t_tot += t
    return s_tot, t_tot


def race_bound(runs, target: float, metric: str, clock: str) -> float:
    """Retained samples of the ideal race that watches the logs: every trial launched together; the first
    evaluation at or above the target logged by any trial sets the best time on ``clock``; every other trial is
    stopped at its first logged step that ends at or after that time (or at its own crossing when earlier); nothing
    is stopped on a prediction, and the reference (``runs[0]``'s batch, the ladder's smallest: every rN is measured
    against it) runs to its own crossing. What the adaptive loop's race rule costs with instant reactions and
    without confirming a crossing."""
    hits = [observed_crossing(r, target, metric, clock) for r in runs]
    best = min(h[1] for h in hits if h is not None)
    b_ref = runs[0].meta.batch_size
    total = 0.0
    for r, h in zip(runs, hits):
        xs, ts = run_clock(r, clock)
        if h is not None and (r.meta.batch_size == b_ref or h[1] <= best):
            total += h[0]  # stopped at its own crossing
            continue
        # stopped at the first logged step that ends at or after the best's crossing: a watcher of the logs learns
        # that a trial's clock passed it from that step's line (mid-step there is nothing to read, and a half-done
        # step retains no sample); the whole run when it ends before
        i = int(np.searchsorted(ts, best, side="left"))
        total += float(xs[min(i, len(xs) - 1)])
    return total


def compare(name: str, runs, target: float, metric: str, n_boot: int, rules=("sqrt",)) -> dict:
    runs = ladder_runs(runs, rules=rules)
    clock = clock_basis(runs)
    acc = account_runs(runs, target, metric, n_boot=200, allow_unreached_reference=True)
    times = {r["run"]: r["time_to_target_s"] for r in acc["rows"] if r["time_to_target_s"] is not None}
    best = min(times, key=times.get)
    s_full, t_full = full_cost(runs, target, metric, clock)
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        res = replay_sweep(runs, tmp, target=target, fmt="rlbatch", metric=metric, n_boot=n_boot)
    cpu = time.process_time() - t0
    pick = res.recommended
    # the pick as a configuration of the full accounting (the plan names a configuration, or a run of one)
    pick_cfg = next((r["run"] for r in acc["rows"] if r["run"] == pick or pick in r["runs"]), pick)
    t_pick = times.get(pick_cfg)
    within = t_pick is not None and t_pick <= 1.1 * times[best]
    frac = res.samples_spent / s_full
    ideal = race_bound(runs, target, metric, clock) / s_full
    ok = frac <= ideal + SLACK
    print(f"## {name}: {len(runs)} trials, target {target:g}, clock {clock}")
    print(f"full sweep (each trial to its target): {s_full:.0f} samples, {t_full:.1f} s; measured time-to-target "
          + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(times.items(), key=lambda kv: kv[1])))
    for c in dict.fromkeys(t.config for t in res.trials):
        ts = [t for t in res.trials if t.config == c]
        print(f"  {c}: {ts[0].state} after {sum(t.samples for t in ts):.0f} samples ({ts[0].decided_by})")
    print(f"adaptive: {res.samples_spent:.0f} samples, {res.time_spent_s:.1f} s ({res.time_spent_s / t_full:.3f} of "
          f"full); {res.replans} re-plans, {cpu:.0f} CPU s; picks {pick} (measured "
          f"{t_pick if t_pick is None else round(t_pick, 1)} s vs best {best} {times[best]:.1f} s)")
    print(f"ladder={name} race_fraction={frac:.3f} ideal_fraction={ideal:.3f} difference={frac - ideal:+.3f} "
          f"within_promise={'yes' if ok else 'no'} picks_best={'yes' if within else 'no'}", flush=True)
    return {"name": name, "fraction": frac, "ideal": ideal, "ok": ok, "within": within}


def sweep_ladders(path: Path, seeds: list[int] | None):
    """One ladder per seed of a finished sweep."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from plan_accuracy import load_sweep

    runs = load_sweep(path)
    for s in sorted({r.meta.seed or 0 for r in runs}):
        if seeds is None or s in seeds:
            yield f"{path.name}[seed {s}]", [r for r in runs if (r.meta.seed or 0) == s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", action="append", help="DIR:TARGET of a finished sweep, one ladder per seed "
                    "(repeatable; default: the three stored sweeps in tests/data)")
    ap.add_argument("--logs", action="append", default=[],
                    help="DIR:TARGET:GLOB: the logs matching GLOB in DIR as one fixed-LR ladder (repeatable)")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds of each sweep (default all)")
    ap.add_argument("--metric", default="eval/score")
    ap.add_argument("--n-boot", type=int, default=50)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    seeds = [int(x) for x in a.seeds.split(",")] if a.seeds else None
    out = []
    for item in (a.sweep or ([] if a.logs else DEFAULT)):
        path, _, target = item.rpartition(":")
        for name, runs in sweep_ladders(Path(path), seeds):
            out.append(compare(name, runs, float(target), a.metric, a.n_boot))
    for item in a.logs:
        path, target, pattern = item.split(":")
        files = sorted(Path(path).glob(pattern))
        runs, _ = load_all(files)
        out.append(compare(f"{Path(path).name}/{pattern}", runs, float(target), a.metric, a.n_boot,
                           rules=("sqrt", "none", None)))
    n = len(out)
    print("summary: " + "; ".join(f"{o['name']} {o['fraction']:.3f} (ideal {o['ideal']:.3f}) "
                                  f"{'best' if o['within'] else 'NOT best'}" for o in out))
    print(f"adaptive: picks best on {sum(o['within'] for o in out)}/{n} ladders; fraction <= ideal + {SLACK:g} on "
          f"{sum(o['ok'] for o in out)}/{n}")


if __name__ == "__main__":
    main()
