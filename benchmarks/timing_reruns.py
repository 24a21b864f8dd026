"""Compare the demo's throughput gains between runs of the same study (issue 44): for each pair of report.json
files, how many configurations have a relative-throughput interval that contains the other run's estimate, and
whether any verdict flips between "faster" and "slower". Samples-to-target are identical between runs with the
same seeds; only the machine's timing differs.

    python benchmarks/timing_reruns.py runs/t44-a runs/t44-b runs/t44-c

Prints a markdown table per pair and one summary line; exit 1 when a pair has fewer than all-but-one intervals
containing the other's estimate or a faster/slower flip."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path


def rows(d: Path) -> dict[str, dict]:
    rep = json.loads((d / "report.json").read_text())
    return {r["run"]: r for r in rep["accounting"] if r["run"] != rep["reference"]}


def inside(ci, x) -> bool:
    return ci is not None and x is not None and ci[0] is not None and ci[0] <= x <= (ci[1] if ci[1] is not None
                                                                                     else float("inf"))


def fmt(r: dict) -> str:
    ci = r.get("relative_throughput_ci")
    g = r.get("relative_throughput")
    return "—" if g is None else f"{g:.2f} ({ci[0]:.2f}-{ci[1]:.2f})" if ci else f"{g:.2f}"


def rt(r: dict) -> str:
    v, ci = r.get("relative_time"), r.get("relative_time_ci")
    if v is None:
        lo = r.get("relative_time_at_least")
        return f"> {lo:.2f}" if lo else "—"
    return f"{v:.2f} ({ci[0]:.2f}-{ci[1]:.2f})" if ci and ci[0] is not None and ci[1] is not None else f"{v:.2f}"


def main(argv: list[str]) -> int:
    dirs = [Path(a) for a in argv]
    bad = 0
    for a, b in itertools.combinations(dirs, 2):
        ra, rb = rows(a), rows(b)
        print(f"\n### {a.name} vs {b.name}\n")
        print("| configuration | gain A (95%) | gain B (95%) | A's interval holds B's | B's holds A's | verdicts | "
              "rel. time A / B (95% simultaneous) |")
        print("|---|---|---|---|---|---|---|")
        held = flips = 0
        names = [n for n in ra if n in rb]
        for n in names:
            x, y = ra[n], rb[n]
            h1 = inside(x.get("relative_throughput_ci"), y.get("relative_throughput"))
            h2 = inside(y.get("relative_throughput_ci"), x.get("relative_throughput"))
            held += h1 and h2
            flip = {x["verdict"], y["verdict"]} == {"faster", "slower"}
            flips += flip
            print(f"| {n} | {fmt(x)} | {fmt(y)} | {'yes' if h1 else 'no'} | {'yes' if h2 else 'no'} | "
                  f"{x['verdict']} / {y['verdict']}{' (flip)' if flip else ''} | {rt(x)} / {rt(y)} |")
        ok = held >= len(names) - 1 and flips == 0
        bad += not ok
        print(f"\n{held} of {len(names)} configurations with each interval holding the other's estimate; "
              f"{flips} faster/slower flips: {'pass' if ok else 'FAIL'}")
    print(f"\nsummary: {len(list(itertools.combinations(dirs, 2))) - bad} of "
          f"{len(list(itertools.combinations(dirs, 2)))} pairs pass")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
