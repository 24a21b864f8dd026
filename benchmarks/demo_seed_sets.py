"""The demo's four findings on several seed sets, as one Markdown table (benchmarks/results/demo_seed_sets.md).

    rlbatch demo --out runs/demo-s0   --seed-offset 0
    rlbatch demo --out runs/demo-s100 --seed-offset 100
    rlbatch demo --out runs/demo-s200 --seed-offset 200
    .venv/bin/python benchmarks/demo_seed_sets.py runs/demo-s0 runs/demo-s100 runs/demo-s200 > benchmarks/results/demo_seed_sets.md
    .venv/bin/python benchmarks/demo_seed_sets.py --readme runs/demo-s0 runs/demo-s100 runs/demo-s200   # the README's table

Reads each directory's report.json (what the report itself computed; nothing is re-estimated here) and checks:

1. no penalty shown at the first doubling: on the square-root rule the first doubling above the reference (2 B0;
   ``--doublings N`` for the first N) is not shown to pay more samples (the equivalence grade of its rN is
   "aligned" or "not distinguishable from 1", never "penalised"; its 90% interval is printed, and "aligned" only
   where that interval lies within 10% of 1);
2. control: the fixed-LR control's rN 95% (simultaneous) interval lies wholly above 1 (the sample penalty of not
   retuning lr);
3. generation is sublinear in B: the fitted exponent k of generation time per step ~ B^k has its 95% interval
   below 1 (the point estimate when the fit gives no interval);
4. rejection: some batch on the rule above the range where rN is not shown above 1 is rejected by the decision
   rule (verdict "slower": its simultaneous relative time-to-target interval lies wholly above 1, or a censored
   configuration's lower bound does).

It also checks that each seed set's pick lies in the "may be fastest" set of every other seed set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlbatch.study.demo import demo_cost


def _ci(ci) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" ({ci[0]:.2f}-{'inf' if ci[1] is None else f'{ci[1]:.2f}'})"


def _x(v, fmt=".2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def findings(rep: dict, doublings: int = 1) -> dict:
    """The four findings of one demo report (the report.json object); finding 1 on the first ``doublings``
    doublings above the reference. Returns a dict of strings and booleans."""
    rows = rep["accounting"]
    ref = next(r for r in rows if r["run"] == rep["reference"])
    b0 = ref["batch_size"]
    rule = [r for r in rows if r.get("lr_rule") == ref.get("lr_rule")]
    by_b = {r["batch_size"]: r for r in rule}
    first = [by_b[b0 * 2 ** i] for i in range(1, doublings + 1) if b0 * 2 ** i in by_b]
    shown = first + ([by_b[b0 * 2 ** (doublings + 1)]] if b0 * 2 ** (doublings + 1) in by_b else [])
    overlay = bool(first) and all(r.get("reached") and r.get("alignment") in ("aligned", "not distinguishable from 1",
                                                                            "below 1") for r in first)
    ctrl = next((r for r in rows if r.get("lr_rule") == "none"), None)
    control = bool(ctrl and (not ctrl["reached"] or (ctrl["rN_ci"] and ctrl["rN_ci"][0] is not None
                                                        and ctrl["rN_ci"][0] > 1.0)))
    gen = ((rep.get("throughput") or {}).get("model") or {}).get("gen") or {}
    k, kci = gen.get("exponent"), gen.get("exponent_ci")
    sublinear = k is not None and ((kci[1] < 1.0) if kci and kci[1] is not None else k < 1.0)
    fam = rep.get("aligned_family") or {}
    upper = (fam.get("undistinguished") or [fam.get("upper", b0)])[-1]
    rej = [r for r in rep.get("rejected", []) if r.get("lr_rule") == ref.get("lr_rule") and r["batch_size"] > upper]
    reached = [r for r in rows if r["reached"] and r.get("relative_time") is not None]
    # the page's pick (the report's headline: the safe pick among those shown faster, else the best estimate), not
    # the smallest point estimate, which another rule would name
    pick = rep.get("headline", {}).get("pick")
    best = next((r for r in reached if r["run"] == pick), None)
    end = fam.get("end") or {}
    return {
        "reference": f"{ref['run']}: {ref['samples_to_target']:,.0f} samples" if ref.get("samples_to_target") else ref["run"],
        "headline": (f"B = {best['batch_size']}{' (fixed lr)' if best.get('lr_rule') == 'none' else ''}: "
                     f"{best['relative_time']:.2f}x time{_ci(best.get('relative_time_ci'))}, {best['verdict']}; may be "
                     "fastest: " + ", ".join(str(r["batch_size"]) + (" (fixed lr)" if r.get("lr_rule") == "none" else "")
                                            for r in rows if r.get("may_be_fastest"))
                     if best else "n/a"),
        "pick": rep.get("headline", {}).get("pick"),
        "best_set": rep.get("headline", {}).get("best_set") or [],
        "ladder": ", ".join(f"{b}: {_x(by_b[b]['rN'])}{_ci(by_b[b]['rN_ci'])}" for b in sorted(by_b) if b != b0),
        "overlay": overlay,
        "overlay_text": "; ".join(f"B = {r['batch_size']}: {_x(r['rN'])} ("
                                  + (f"90% CI {_ci(r['rN_test']).strip(' ()')}: " if r.get("rN_test") else "")
                                  + f"{r.get('alignment') or 'not measured'})" for r in shown),
        "control": control,
        "control_text": (f"B = {ctrl['batch_size']}: " + (f"{ctrl['rN']:.2f}{_ci(ctrl['rN_ci'])}" if ctrl["reached"]
                                                          else "not reached") if ctrl else "no control"),
        "sublinear": sublinear,
        "sublinear_text": f"k = {_x(k)}{_ci(kci)}",
        "family": (f"aligned (equivalence) B = {fam.get('lower')}-{fam.get('upper')}; rN not shown above 1 up to "
                   f"B = {upper}; first rN above 1: B = {end.get('batch_size', '-')}"),
        "rejected": bool(rej),
        "rejected_text": ", ".join(f"B = {r['batch_size']}: {r['verdict']}"
                                   + (f" {r['relative_time']:.2f}x{_ci(r.get('relative_time_ci'))}"
                                      if r.get("relative_time") is not None else "") for r in rej) or "none",
    }


def _span(vals, fmt=".2f", suffix="") -> str:
    """The seed sets' values as one cell: ``a`` when they agree to the format, else ``lo-hi``."""
    v = sorted(x for x in vals if x is not None)
    if not v:
        return "—"
    lo, hi = format(v[0], fmt), format(v[-1], fmt)
    return f"{lo}{suffix}" if lo == hi else f"{lo}-{hi}{suffix}"


def readme_table(reps: list[dict]) -> str:
    """One row per configuration over the seed sets' reports: B, lr, rN, throughput gain, speed-up (1 / relative
    time-to-target) as the range of the sets' values (each a mean over its 3 seeds), and the verdicts with how many
    sets gave each. A configuration that did not reach the target shows the least rN it must have (its samples so
    far over the reference's)."""
    names = []
    for rep in reps:
        for r in rep["accounting"]:
            if r["run"] not in names:
                names.append(r["run"])
    rows = ["| B | lr | rN | throughput gain | speed-up | verdict (seed sets) |", "|---|---|---|---|---|---|"]
    for name in sorted(names, key=lambda n: (next(r for rep in reps for r in rep["accounting"] if r["run"] == n)
                                               .get("lr_rule") == "none", int(n[1:].split("-")[0]))):
        rs = [r for rep in reps for r in rep["accounting"] if r["run"] == name]
        r0 = rs[0]
        label = f"{r0['batch_size']}" + (" (fixed lr)" if r0.get("lr_rule") == "none" else "")
        if all(r["verdict"] == "reference" for r in rs):
            rows.append(f"| {label} (B0) | {r0['lr']:.2g} | 1 | 1 | 1 | reference |")
            continue
        reached = [r for r in rs if r.get("rN") is not None]
        rn = _span([r["rN"] for r in reached])
        if len(reached) < len(rs):
            least = [r["rN_at_least"] for r in rs if r.get("rN") is None and r.get("rN_at_least")]
            rn = (rn + "; " if reached else "") + (f"> {_span(least)}" if least else "not reached")
        speed = _span([1 / r["relative_time"] for r in rs if r.get("relative_time")], suffix="x")
        gain = _span([r["relative_throughput"] for r in rs if r.get("relative_throughput")], suffix="x")
        verdicts: dict[str, int] = {}
        for r in rs:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
        vtxt = ", ".join(f"{v} {n}/{len(rs)}" for v, n in sorted(verdicts.items(), key=lambda kv: -kv[1]))
        rows.append(f"| {label} | {r0['lr']:.2g} | {rn} | {gain} | {speed} | {vtxt} |")
    return "\n".join(rows)


def yes(v: bool) -> str:
    return "**yes**" if v else "**NO**"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="demo output directories (each with report.json)")
    ap.add_argument("--doublings", type=int, default=1, help="finding 1 on the first N doublings above B0")
    ap.add_argument("--readme", action="store_true",
                    help="print the README's table instead: one row per configuration over the seed sets")
    args = ap.parse_args(argv)
    cols = []
    reps = [json.loads((d / "report.json").read_text(encoding="utf-8")) for d in args.dirs]
    if args.readme:
        print(readme_table(reps))
    for d, rep in zip(args.dirs, reps):
        settings = {}
        if (d / "sweep.json").is_file():
            settings = json.loads((d / "sweep.json").read_text(encoding="utf-8")).get("settings") or {}
        f = findings(rep, args.doublings)
        off = settings.get("seed_offset", 0)
        f["name"] = f"seeds {off}-{off + settings.get('seeds', 1) - 1}" if settings else d.name
        seq = d / "sequential.json"
        if seq.is_file():  # the sequential study (the demo's default): its looks, runs, stop and answer
            s = json.loads(seq.read_text(encoding="utf-8"))
            f["name"] = f"seed set {off} (sequential)"
            said = (f"decided: {', '.join(f'{c} (look {j + 1})' for c, j in s['faster'].items())} faster; pick "
                    f"{s['pick']}" if s["decided"] else f"undecided (best estimate {s['pick']})")
            f["sequential"] = f"{len(s['looks'])} look(s), {s['runs']} runs; {said}; stopped: {s['stop']}"
        cost = rep.get("demo_cost") or demo_cost(d)
        f["cost"] = (f"{cost['trials']} trials: {cost['train_cpu_s']:.0f} CPU-s of training steps, {cost['eval_s']:.0f} s "
                     "of evaluation" if cost.get("trials") else "")
        cols.append(f)
    lines = ["| | " + " | ".join(c["name"] for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    if any("sequential" in c for c in cols):
        lines.append("| sequential study | " + " | ".join(c.get("sequential", "fixed design") for c in cols) + " |")
    for label, key in (("reference samples-to-target", "reference"), ("headline (the pick)", "headline"),
                       ("rN on the sqrt rule (95% simultaneous CI)", "ladder"), ("aligned family", "family")):
        lines.append(f"| {label} | " + " | ".join(c[key] for c in cols) + " |")
    first = "first doubling" if args.doublings == 1 else f"first {args.doublings} doublings"
    for label, key in ((f"(1) {first} on the sqrt rule: no sample penalty shown (rN's equivalence grade)", "overlay"),
                       ("(2) fixed-LR control pays (rN CI above 1)", "control"),
                       ("(3) generation sublinear in B", "sublinear"),
                       ("(4) past where rN is not shown above 1, a larger B is rejected", "rejected")):
        lines.append(f"| {label} | " + " | ".join(f"{yes(c[key])}: {c[key + '_text']}" for c in cols) + " |")
    if any(c["cost"] for c in cols):
        lines.append("| cost | " + " | ".join(c["cost"] for c in cols) + " |")
    cross = [(a["name"], b["name"], a["pick"] in b["best_set"]) for a in cols for b in cols if a is not b]
    if cross:
        held = sum(ok for *_, ok in cross)
        lines.append(f"| each set's pick in the others' 'may be fastest' set | {held} of {len(cross)} pairs"
                     + "".join(f"; {p} not in {q}'s" for p, q, ok in cross if not ok) + " |"
                     + " |" * (len(cols) - 1))
    if not args.readme:
        print("\n".join(lines))
    return 0 if all(c[k] for c in cols for k in ("overlay", "control", "sublinear", "rejected")) else 1


if __name__ == "__main__":
    sys.exit(main())
