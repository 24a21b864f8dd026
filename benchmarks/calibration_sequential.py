"""Calibration of the sequential study (issue 52) on synthetic studies with a known truth: the whole procedure of
:func:`rlbatch.study.sequential.run_sequential` (looks at 2, 4, 6 seeds, O'Brien-Fleming efficacy boundary,
futility 1 se, "cannot be the fastest" drops, 20% indifference zone), each look analysed as ``rlbatch analyze``
analyses the runs so far, on :mod:`rlbatch.study.calibration`'s simulator, beside the fixed 3- and 5-seed designs
(the same analysis of one look at 3 or 5 seeds, studies drawn from the same streams).

    .venv/bin/python benchmarks/calibration_sequential.py --studies 200 > benchmarks/results/calibration_sequential.md

Per scenario and design: familywise false "faster" (any configuration equal to or slower than the reference called
faster), headline false "faster" (the pick called faster while not truly faster), power (the truly fastest called
faster), the share of studies whose pick is within the indifference zone of the truly fastest, whether "may be the
fastest" holds the truly fastest, and the cost in runs (mean, 90th percentile) and retained samples (mean).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
import warnings
from dataclasses import replace

import numpy as np

from rlbatch.errors import UserError
from rlbatch.study.calibration import Scenario, SimulatedRunner, run_sequential_one

ZONE = 0.2


def scenarios() -> list[Scenario]:
    base = Scenario("null, 3 seeds")
    paper = {16: 1.0, 32: 1 / 0.8, 64: 1 / 0.65, 128: 1 / 0.55, 256: 1 / 0.5, 512: 1 / 0.6, 1024: 1 / 0.8,
             2048: 1 / 1.2}
    return [
        replace(base, name="null"),
        replace(base, name="null, seed log-sd 0.1", seed_sd=0.1),
        replace(base, name="B=256 2x faster", gain={256: 2.0}, null=False),
        replace(base, name="B=256 2x faster, seed log-sd 0.1", gain={256: 2.0}, seed_sd=0.1, null=False),
        replace(base, name="paper-shaped ladder", gain=paper, null=False,
                note="relative times 1, 0.8, 0.65, 0.55, 0.5, 0.6, 0.8, 1.2"),
        replace(base, name="near-ties (B=128 0.55x, B=256 0.5x)", gain={128: 1 / 0.55, 256: 2.0}, null=False),
        replace(base, name="censoring (budget 1.3x S)", budget=3584),
        replace(base, name="crossing before the first evaluation (every 4 steps, B=2048 3x faster)", eval_steps=4,
                gain={2048: 3.0}, null=False),
        replace(base, name="null, every 4 steps (crossing before the first evaluation at B >= 1024)", eval_steps=4),
    ]


def fixed_one(sc: Scenario, seed: int, seeds: int) -> dict:
    """The fixed design on the same streams: every configuration ``seeds`` seeds, one analysis."""
    from rlbatch.analysis.accounting import account_runs

    runner = SimulatedRunner(sc, seed)
    runner.ensure({n: seeds for n in runner.names})
    names = list(runner.names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            acc = account_runs(runner.runs(), sc.target, reference=names[0], n_boot=2000)
        except UserError:  # the reference did not reach the target in every seed: no comparison, no claim
            acc = None
    truth = {n: sc.truth(b)["relative_time"] for n, b in runner.names.items()}
    ft = min(truth.values())
    fastest = [n for n, t in truth.items() if t <= ft * (1 + 1e-9)]
    if acc is None:
        return {"false_faster": False, "headline_false_faster": False, "fastest_called": False if ft < 1 else None,
                "pick_in_zone": truth[names[0]] <= ft * (1 + ZONE) + 1e-9, "best_set_has_fastest": True,
                "runs": seeds * len(names), "retained": runner.retained(), "no_comparison": True}
    dec = acc["decision"]
    called = [n for n, v in dec.verdicts.items() if v.label == "faster"]
    pick = dec.pick or names[0]  # the safe pick among the faster, else the set's best estimate
    return {"false_faster": any(truth[n] >= 1 - 1e-9 for n in called),
            "headline_false_faster": dec.beats_reference and truth[dec.pick] >= 1 - 1e-9,
            "fastest_called": any(n in called for n in fastest) if ft < 1 else None,
            "pick_in_zone": truth[pick] <= ft * (1 + ZONE) + 1e-9,
            "best_set_has_fastest": any(n in dec.may_be_fastest for n in fastest),
            "runs": seeds * len(names), "retained": runner.retained()}


def _job(args):
    design, sc, seed = args
    if design == "sequential":
        return design, sc.name, seed, _plain(run_sequential_one(sc, seed, zone=ZONE))
    return design, sc.name, seed, _plain(fixed_one(sc, seed, int(design.split()[1])))


def _plain(r: dict) -> dict:
    """A study's result as JSON values (numpy scalars as Python ones)."""
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}


def fmt(v, spec=".2f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--only", default=None, help="semicolon-separated substrings of the scenarios to run")
    ap.add_argument("--designs", default="sequential;fixed 3;fixed 5")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", default=None, help="a JSON-lines file of finished studies: read, skipped, appended to")
    a = ap.parse_args(argv)
    keys = [k for k in (a.only or "").split(";") if k]
    scs = [s for s in scenarios() if not keys or any(k in s.name for k in keys)]
    designs = a.designs.split(";")
    jobs = [(d, s, a.seed + i) for i in range(a.studies) for s in scs for d in designs]  # every scenario grows together
    t0 = time.time()
    res: dict[tuple, list] = {}
    done: set[tuple] = set()
    if a.resume and os.path.exists(a.resume):  # a killed run goes on where it stopped (one JSON line per study)
        for line in open(a.resume):
            try:
                d, name, seed, r = json.loads(line)
            except ValueError:
                continue  # a line cut short by the kill
            res.setdefault((name, d), []).append(r)
            done.add((d, name, seed))
    jobs = [j for j in jobs if (j[0], j[1].name, j[2]) not in done]
    sink = open(a.resume, "a") if a.resume else None
    with mp.get_context("fork").Pool(a.workers) as pool:
        for n, (d, name, seed, r) in enumerate(pool.imap_unordered(_job, jobs, chunksize=1), 1):
            res.setdefault((name, d), []).append(r)
            if sink:
                sink.write(json.dumps([d, name, seed, r]) + "\n")
                sink.flush()
            if n % 20 == 0 or n == len(jobs):
                print(f"calibration_sequential: {n}/{len(jobs)} studies, {time.time() - t0:.0f} s", file=sys.stderr,
                      flush=True)
    print(f"# Calibration of the sequential study: {a.studies} studies per scenario and design (study seeds from "
          f"{a.seed})\n")
    print(f"Command: `.venv/bin/python benchmarks/calibration_sequential.py --studies {a.studies}`. Sequential: looks "
          f"at 2, 4, 6 seeds, futility 1 se, indifference zone {ZONE:.0%}. Fixed N: N seeds everywhere, one "
          "analysis. Familywise false: any configuration not truly faster called faster (Monte Carlo se in "
          "brackets). Pick: the safe pick among those called faster, else the set's best estimate.\n")
    print("| scenario | design | familywise false faster (se) | headline false faster | power (fastest called "
          "faster) | pick within zone | set holds fastest | runs mean (p90) | retained samples mean | no comparison |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in scs:
        for d in designs:
            rs = res.get((s.name, d), [])
            if not rs:
                continue
            fw = float(np.mean([r["false_faster"] for r in rs]))
            pw = [r["fastest_called"] for r in rs if r["fastest_called"] is not None]
            runs = [r["runs"] for r in rs]
            print(f"| {s.name} | {d} | {fw:.3f} ({math.sqrt(fw * (1 - fw) / len(rs)):.3f}) | "
                  f"{np.mean([r['headline_false_faster'] for r in rs]):.3f} | {fmt(np.mean(pw) if pw else None)} | "
                  f"{np.mean([r['pick_in_zone'] for r in rs]):.2f} | {np.mean([r['best_set_has_fastest'] for r in rs]):.2f}"
                  f" | {np.mean(runs):.1f} ({np.percentile(runs, 90):.0f}) | "
                  f"{np.mean([r['retained'] for r in rs]):,.0f} | "
                  f"{np.mean([bool(r.get('no_comparison')) or str(r.get('stop', '')).startswith('no comparison') for r in rs]):.2f} |")
    print(f"\n{time.time() - t0:.0f} s on {a.workers} workers.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
