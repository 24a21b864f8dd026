"""How well does the plan predict from short probes? Validation on a finished sweep's real learning curves.

    .venv/bin/python benchmarks/plan_accuracy.py SWEEP_DIR --target T [--fractions 0.2,0.3,0.5] [--n-boot 200]

SWEEP_DIR: a finished sweep (a directory of run directories, a sweep tree with ``trials/``, or a stored one with
``trials.tar.gz`` such as tests/data/demo_sweep). For every fraction f, each trial is cut to the first f of its
retained samples (:func:`rlbatch.plan.truncate_runs`), the plan is made from the cut runs
(:func:`rlbatch.plan.plan_runs`, no extra batches), and compared with the full sweep's own accounting
(:func:`rlbatch.analysis.accounting.account_runs`):

- per configuration: the predicted samples-to-target (mean over seeds) with its interval and where it comes from
  (``measured``: already reached within f; ``fit``: the saturating fit, 95% interval; ``never``: predicted never to
  reach), the measured one from the full runs, and whether the measured value lies in the predicted interval
  (``never`` covers a configuration that did not reach the target in the full sweep either);
- whether the plan's pick has a measured time-to-target within 10% of the best measured.

Each fraction ends with ``fraction=F plan_coverage=X.XX plan_picks_best=yes|no|none``
(none: the plan picked nothing, saying why); plan_coverage is over the
configurations whose samples-to-target had to be predicted (source ``fit``, ``open`` or ``never``; over all
configurations when none had to be).
"""

from __future__ import annotations

import argparse
import math
import sys
import tarfile
import tempfile
from pathlib import Path


def load_sweep(path: Path):
    from rlbatch.readers.collect import load_all

    if (path / "trials.tar.gz").is_file():
        tmp = Path(tempfile.mkdtemp(prefix="plan_accuracy_"))
        with tarfile.open(path / "trials.tar.gz") as tar:
            tar.extractall(tmp, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        path = tmp / "trials"
    elif (path / "trials").is_dir():
        path = path / "trials"
    runs, msgs = load_all([path])
    for m in msgs:
        print(f"# warning: {m}", file=sys.stderr)
    return runs


def _fmt(v) -> str:
    if v is None:
        return "-"
    return "inf" if not math.isfinite(v) else f"{v:.0f}"


def evaluate(runs, target: float, fractions, n_boot: int = 200, out=print) -> list[dict]:
    """The comparison for each fraction; returns one summary dict per fraction (coverage, picks_best, rows)."""
    from rlbatch.analysis.accounting import account_runs
    from rlbatch.errors import UserError
    from rlbatch.plan import plan_runs, truncate_runs

    full = account_runs(runs, target, n_boot=200)
    meas = {r["run"]: r for r in full["rows"]}
    rel = {n: r["relative_time"] for n, r in meas.items() if r["relative_time"] is not None}
    best = min(rel.values()) if rel else None
    out(f"# full sweep: {len(runs)} runs, reference {full['reference']}, target {target:g}; measured relative "
        "time-to-target " + ", ".join(f"{n} {v:.2f}" for n, v in rel.items()))
    summaries = []
    for f in fractions:
        try:
            plan = plan_runs(truncate_runs(runs, f), target, extend=False, n_boot=n_boot)
        except UserError as err:  # too little to plan from at this fraction: no pick, nothing covered
            out(f"## fraction {f:g}: no plan ({err})")
            out(f"fraction={f:g} plan_coverage=nan plan_picks_best=no")
            summaries.append({"fraction": f, "coverage": float("nan"), "picks_best": False, "pick": None,
                              "rows": [], "n_predicted": 0})
            continue
        out(f"## fraction {f:g}: recommended {plan['recommended']} (reference {plan['reference']})")
        out(f"{'configuration':<18} {'source':<9} {'predicted S':>11} {'interval':>17} {'measured S':>10} "
            f"{'in':>4} {'pred rN':>7} {'meas rN':>7}")
        rows = []
        for c in plan["candidates"]:
            name = c["run"]
            if name not in meas:
                continue
            m = meas[name]
            src = "never" if c.get("never_reaches") else "open" if c.get("undetermined") else c["rN_source"]
            s, ci = c.get("predicted_samples_to_target"), c.get("predicted_samples_to_target_ci")
            ms = m["samples_to_target"]
            if src == "never":
                lo, hi = math.inf, math.inf
                inside = ms is None
            else:
                lo = ci[0] if ci and ci[0] is not None else s
                hi = (ci[1] if ci[1] is not None else math.inf) if ci else s
                inside = None if s is None and not ci else (ms is None and hi == math.inf) or (
                    ms is not None and lo is not None and lo <= ms <= hi)
            rows.append({"config": name, "source": src, "predicted": s, "interval": [lo, hi], "measured": ms,
                         "inside": inside})
            iv = f"[{_fmt(lo)}, {_fmt(hi)}]"
            prn = f"{c['rN']:.2f}" if c.get("rN") is not None else "-"
            mrn = f"{m['rN']:.2f}" if m.get("rN") is not None else "-"
            out(f"{name:<18} {src:<9} {_fmt(s):>11} {iv:>17} {_fmt(ms):>10} "
                f"{'yes' if inside else 'no' if inside is not None else '-':>4} {prn:>7} {mrn:>7}")
        pred = [r for r in rows if r["source"] in ("fit", "never", "open") and r["inside"] is not None]
        pool = pred or [r for r in rows if r["inside"] is not None]
        cov = sum(bool(r["inside"]) for r in pool) / len(pool) if pool else float("nan")
        pick = plan["recommended"]
        ok = best is not None and pick in rel and rel[pick] <= 1.10 * best
        if pick is None:  # the plan said it cannot tell yet (the reference's fit open or short of the target)
            out(f"# no pick: {plan.get('no_pick') or 'no configuration reaches the target'}; "
                f"{len(pred)} of {len(rows)} configurations predicted")
        else:
            out(f"# picked {pick}: measured relative time {rel.get(pick, float('nan')):.2f} vs best {best:.2f}"
                + ("; provisional" if plan.get("provisional") else "")
                + f"; {len(pred)} of {len(rows)} configurations predicted")
        out(f"fraction={f:g} plan_coverage={cov:.2f} plan_picks_best={'none' if pick is None else 'yes' if ok else 'no'}")
        summaries.append({"fraction": f, "coverage": cov, "picks_best": ok, "pick": pick, "rows": rows,
                          "n_predicted": len(pred)})
    return summaries


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--fractions", default="0.2,0.3,0.5")
    ap.add_argument("--n-boot", type=int, default=200)
    a = ap.parse_args(argv)
    fr = [float(x) for x in a.fractions.split(",") if x.strip()]
    evaluate(load_sweep(a.sweep), a.target, fr, n_boot=a.n_boot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
