"""Score the log readers on real files against values read by hand (issue 24's held-out discipline).

A set is a folder of log files with an ``expected.json`` written before any reader ran on them
(tests/data/readers_wild/dev, tests/data/readers_wild/heldout). Per file, every hand-written field must come out right:

- ``error: true``: reading must fail with one clear :class:`rlbatch.errors.UserError` (the file has no training
  metrics);
- otherwise ``rlbatch.readers.load`` must return runs (``n_runs`` of them where given) of which one has all of:
  ``steps``, ``prompts_per_step``, ``group_size``, ``batch_size`` (when written) exactly; ``lr`` within 0.1%
  (None must be None); ``last_eval_step`` exactly and ``last_eval_score`` within 1e-6 (both None when the file has no
  evaluation); ``probe``: at that step, ``time/gen_s`` and ``time/step_s`` within 1% (None: absent or missing there).

Any exception other than ``UserError`` is a traceback and counted apart. Prints one line per file and the score;
``--format json`` prints the same as JSON. Usage::

    python benchmarks/readers_heldout.py tests/data/readers_wild/heldout [--format json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlbatch.analysis.curves import summarize_run
from rlbatch.errors import UserError
from rlbatch.readers import load

FIELDS = ("steps", "prompts_per_step", "group_size", "batch_size", "lr", "last_eval_step", "last_eval_score")


@dataclass
class FileScore:
    """One file: ``ok`` when every hand-written field came out right; ``wrong`` lists field: got vs expected."""

    file: str
    ok: bool
    traceback: bool = False
    wrong: list[str] = field(default_factory=list)
    error: str | None = None


def _close(got: Any, want: Any, rel: float = 0.0, abs_: float = 0.0) -> bool:
    if want is None or got is None:
        return want is None and (got is None or (isinstance(got, float) and math.isnan(got)))
    if isinstance(want, float) or rel or abs_:
        g = float(got)
        return math.isfinite(g) and abs(g - want) <= max(abs_, rel * abs(want))
    return got == want


def _run_mismatches(run, want: dict[str, Any]) -> list[str]:
    s = summarize_run(run)
    out = []
    for f in FIELDS:
        if f not in want:
            continue
        got, exp = s.get(f), want[f]
        ok = (_close(got, exp, rel=1e-3) if f == "lr" else _close(got, exp, abs_=1e-6) if f == "last_eval_score"
              else got == exp)
        if not ok:
            out.append(f"{f}: got {got!r}, expected {exp!r}")
    probe = want.get("probe")
    if probe:
        m = run.metrics
        row = m[m["step"] == probe["step"]] if "step" in m.columns else m.iloc[0:0]
        for col, key in (("time/gen_s", "gen_s"), ("time/step_s", "step_s")):
            exp = probe.get(key)
            got = float(row[col].iloc[0]) if len(row) and col in row.columns else None
            if got is not None and math.isnan(got):
                got = None
            if not _close(got, exp, rel=1e-2):
                out.append(f"{col} at step {probe['step']}: got {got!r}, expected {exp!r}")
    return out


def score_file(path: Path, want: dict[str, Any]) -> FileScore:
    """Read ``path`` with :func:`rlbatch.readers.load` and compare with the hand-written ``want``."""
    name = path.name
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = load(path)
    except UserError as err:
        if want.get("error"):
            return FileScore(name, True, error=str(err))
        return FileScore(name, False, wrong=["refused: " + str(err)[:200]], error=str(err))
    except Exception:  # noqa: BLE001 - a traceback is what is being counted
        return FileScore(name, False, traceback=True, error=traceback.format_exc(limit=3))
    if want.get("error"):
        return FileScore(name, False, wrong=[f"read {len(runs)} run(s) from a file with no training metrics"])
    wrong: list[str] = []
    if "n_runs" in want and len(runs) != want["n_runs"]:
        wrong.append(f"n_runs: got {len(runs)}, expected {want['n_runs']}")
    best: list[str] | None = None
    for run in runs:
        try:
            mism = _run_mismatches(run, want)
        except Exception:  # noqa: BLE001
            return FileScore(name, False, traceback=True, error=traceback.format_exc(limit=3))
        if best is None or len(mism) < len(best):
            best = mism
    wrong += best or []
    return FileScore(name, not wrong, wrong=wrong)


def score_set(folder: Path) -> dict[str, Any]:
    """Score every file named in ``folder/expected.json``. Returns ``{"set", "files", "fully_right", "total",
    "score", "tracebacks"}`` (score = fully right / total)."""
    folder = Path(folder)
    spec = json.loads((folder / "expected.json").read_text(encoding="utf-8"))["files"]
    scores = [score_file(folder / name, want) for name, want in sorted(spec.items())]
    n_ok = sum(s.ok for s in scores)
    return {"set": str(folder), "files": [asdict(s) for s in scores], "fully_right": n_ok, "total": len(scores),
            "score": n_ok / len(scores) if scores else 0.0, "tracebacks": sum(s.traceback for s in scores)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--format", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    results = [score_set(f) for f in args.folders]
    if args.format == "json":
        print(json.dumps(results, indent=1))
        return 0
    for res in results:
        print(f"== {res['set']}")
        for f in res["files"]:
            mark = "ok " if f["ok"] else ("TB " if f["traceback"] else "-- ")
            print(f"{mark} {f['file']}" + ("" if f["ok"] else ": " + "; ".join(f["wrong"])[:400]))
            if f["traceback"]:
                print("    " + (f["error"] or "").strip().replace("\n", "\n    "))
        print(f"fully right: {res['fully_right']}/{res['total']} ({res['score']:.0%}), tracebacks: {res['tracebacks']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
