"""Calibration of rlbatch's decisions on synthetic studies with a known truth (issue 43; the model:
:mod:`rlbatch.study.calibration`).

    .venv/bin/python benchmarks/calibration.py --studies 200 > benchmarks/results/calibration.md

Each study is written as run-store directories and analysed as ``rlbatch analyze DIR --target 0.37`` analyses it
(the same reader and Study, in process). Per scenario it prints: the per-comparison and familywise false-call rates
(a "faster", "slower" or "not reached" where the truth is equal), how often the headline calls a pick faster when
nothing is, the coverage of the rN, relative-throughput and relative-time intervals (mean over comparisons / the
worst batch size), the median rN / true rN per B, power (a truly faster configuration called faster), and how often
the 'may be fastest' set holds the truly fastest. The last line is one summary against the issue's bars.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

from rlbatch.study.calibration import run_one, scenarios, summarize


def _job(args):
    sc, seed = args
    return sc.name, run_one(sc, seed)


def fmt(v, spec=".2f") -> str:
    if v is None:
        return "—"
    if isinstance(v, tuple):
        return "/".join(fmt(x, spec) for x in v)
    return format(v, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=200, help="studies per scenario")
    ap.add_argument("--only", default=None, help="semicolon-separated substrings (or =exact names): run only those scenarios")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0, help="first study seed")
    ap.add_argument("--one-seed-factor", type=int, default=4,
                    help="studies of one-seed scenarios = this x --studies (they are cheap, and their median rN per B "
                         "is the noisiest: one run per configuration)")
    a = ap.parse_args(argv)
    keys = [k.strip() for k in a.only.split(";")] if a.only else []
    scs = [s for s in scenarios() if not keys or any(s.name == k[1:] if k.startswith("=") else k in s.name
                                                     for k in keys)]
    n_of = {s.name: a.studies * (a.one_seed_factor if s.seeds == 1 else 1) for s in scs}
    jobs = [(s, a.seed + i) for s in scs for i in range(n_of[s.name])]
    t0 = time.time()
    results: dict[str, list] = {s.name: [] for s in scs}
    with mp.get_context("fork").Pool(a.workers) as pool:
        for n, (name, res) in enumerate(pool.imap_unordered(_job, jobs, chunksize=2), 1):
            results[name].append(res)
            if n % 20 == 0 or n == len(jobs):
                print(f"calibration: {n}/{len(jobs)} studies, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    print(f"# Calibration: {a.studies} studies per scenario, {a.studies * a.one_seed_factor} for one seed per "
          f"configuration (study seeds from {a.seed})\n")
    print(f"Command: `.venv/bin/python benchmarks/calibration.py --studies {a.studies} --one-seed-factor "
          f"{a.one_seed_factor}`. Coverage: mean over comparisons / the worst batch size's. Familywise false: the share "
          "of studies with any false \"faster\", \"slower\" (or, on the old code, \"not reached\") among the "
          "configurations equal to the reference, with its Monte Carlo standard error.\n")
    print("| scenario | studies | per-comparison false | familywise false (se) | headline false faster | cover rN | "
          "cover gain | cover time | median rN / truth by B | power | best set holds fastest (size) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sums = []
    for s in scs:
        m = summarize(s, results[s.name])
        sums.append(m)
        med = " ".join(f"{v:.2f}" if v is not None else "—" for v in m["median_rN_by_B"].values())
        fw, n = m["familywise_false"], m["studies"]
        se = (fw * (1 - fw) / n) ** 0.5 if fw is not None else None
        print(f"| {s.name} | {n} | {fmt(m['per_comparison_false'])} | {fmt(fw, '.3f')} ({fmt(se, '.3f')}) | "
              f"{fmt(m['headline_false_faster'])} | {fmt(m['cover_rN'])} | {fmt(m['cover_gain'])} | "
              f"{fmt(m['cover_time'])} | {med} | {fmt(m['power'])} | {fmt(m['best_set_coverage'])} "
              f"({fmt(m['best_set_size'], '.1f')}) |")
    nulls = [m for m in sums if m["null"]]
    worst_fw = max(m["familywise_false"] for m in nulls) if nulls else None
    worst_head = max(m["headline_false_faster"] for m in nulls) if nulls else None
    covs = [c for m in sums for k in ("cover_rN", "cover_time") for c in m[k] if c is not None]
    meds = [v for m in nulls for v in m["median_rN_by_B"].values() if v is not None]
    pw = next((m["power"] for m in sums if m["scenario"] == "B=256 2x faster, 3 seeds"), None)
    print(f"\nsummary: worst familywise false {fmt(worst_fw)} (bar 0.07), worst headline false faster "
          f"{fmt(worst_head)} (bar 0.05), lowest coverage rN/time {fmt(min(covs) if covs else None)} (bar 0.92), "
          f"median rN {fmt(min(meds) if meds else None)}-{fmt(max(meds) if meds else None)} (bar 0.95-1.05), "
          f"power 2x/3 seeds {fmt(pw)} (bar 0.70); {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
