"""Two decision rules rlbatch does not use, measured on the calibration benchmark's own studies, for the planners'
choice in issue 43 (power 0.70 at 3 seeds is out of reach with the familywise control the issue also asks for).

Each study is simulated and analysed exactly as ``benchmarks/calibration.py`` does (in memory); the estimates the
accounting hands to :func:`rlbatch.analysis.decision.decide` are captured (a wrapper that only records its
arguments) and decided again under:

- **now**: rlbatch's rule (95% simultaneous two-sided intervals over the ladder);
- **A, pick vs reference**: the same pick, its relative time tested alone at full 95% (one comparison), every
  other verdict as now;
- **B, one-sided simultaneous**: "faster" claims only, at 95% simultaneous one-sided over the ladder ("slower" not
  claimed).

Prints per scenario the false-"faster" rate (null) or the power (B = 256 truly faster called faster), and for the
null the familywise false "faster"/"slower" rate with A.

    .venv/bin/python benchmarks/calibration_alternatives.py --studies 200 --only "null, 3 seeds;B=256 2x faster, 3 seeds"
"""

from __future__ import annotations

import argparse

import numpy as np

import rlbatch.analysis.accounting as accounting
from rlbatch.analysis import decision as D
from rlbatch.study import calibration as C

_captured: dict = {}
_decide = accounting.decide


def _spy(ests, ref, **kw):
    _captured["ests"], _captured["ref"] = ests, ref
    return _decide(ests, ref, **kw)


def decision_inputs(runs, target: float) -> tuple[dict, str | None]:
    """``(estimates, reference)``: what the accounting hands to :func:`rlbatch.analysis.decision.decide` when it
    analyses ``runs`` at ``target`` as ``benchmarks/calibration.py`` does (in memory), captured by a wrapper that
    only records its arguments. Also used by ``benchmarks/power_bound.py``."""
    accounting.decide = _spy
    try:
        C.analyze_runs(runs, target)
    finally:
        accounting.decide = _decide
    return _captured["ests"], _captured["ref"]


def one_study(sc: C.Scenario, seed: int) -> dict | None:
    """The three rules' calls on one simulated study: batch sizes called faster (now, B), the pick's batch and A's
    call on it, and whether anything is called slower now."""
    ests, ref = decision_inputs(C.simulate_study(sc, seed), sc.target)
    if ref is None:
        return None
    b_of = {n: e.get("batch_size") for n, e in ests.items()}
    full = _decide(ests, ref)
    pick = full.pick
    a = bool(pick and pick != ref and
             _decide({ref: ests[ref], pick: ests[pick]}, ref).verdicts[pick].label == D.FASTER)
    rt = (ests[ref].get("_replicates") or {}).get("T")
    diffs = {}
    for n, e in ests.items():
        t = (e.get("_replicates") or {}).get("T")
        if n != ref and e["reached"] and e.get("time_to_target_s") is not None and t is not None and rt is not None \
                and len(t) == len(rt):
            diffs[n] = np.log(rt) - np.log(t)  # > 0: faster than the reference
    tail = D.simultaneous_tail(list(diffs.values()), D.LEVEL, two_sided=False) if diffs else None
    return {"now_faster": sorted(b_of[n] for n, v in full.verdicts.items() if v.label == D.FASTER),
            "now_slower": any(v.label == D.SLOWER for v in full.verdicts.values()),
            "pick": b_of.get(pick), "A": a,
            "B_faster": sorted(b_of[n] for n, d in diffs.items() if np.quantile(d, tail) > 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=200, help="studies per scenario")
    ap.add_argument("--seed", type=int, default=0, help="first study seed")
    ap.add_argument("--only", default="null, 3 seeds;B=256 2x faster, 3 seeds;B=256 1.4x faster, 3 seeds",
                    help="semicolon-separated scenario names (benchmarks/calibration.py's)")
    args = ap.parse_args()
    scs = {s.name: s for s in C.scenarios()}
    for name in args.only.split(";"):
        sc = scs[name]
        res = [r for r in (one_study(sc, s) for s in range(args.seed, args.seed + args.studies)) if r]
        if sc.null:
            print(f"{name} ({len(res)} studies): false 'faster': now {np.mean([bool(r['now_faster']) for r in res]):.3f}"
                  f", A {np.mean([r['A'] for r in res]):.3f}, B {np.mean([bool(r['B_faster']) for r in res]):.3f}; "
                  f"familywise false faster/slower: now "
                  f"{np.mean([bool(r['now_faster']) or r['now_slower'] for r in res]):.3f}, with A "
                  f"{np.mean([bool(r['now_faster']) or r['now_slower'] or r['A'] for r in res]):.3f}", flush=True)
        else:
            print(f"{name} ({len(res)} studies): power (B = 256 called faster): now "
                  f"{np.mean([256 in r['now_faster'] for r in res]):.3f}, A "
                  f"{np.mean([r['A'] and r['pick'] == 256 for r in res]):.3f}, B "
                  f"{np.mean([256 in r['B_faster'] for r in res]):.3f}", flush=True)


if __name__ == "__main__":
    main()
