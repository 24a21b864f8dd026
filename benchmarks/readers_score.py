"""Score the log readers on real files against ground truth read by hand: one line per folder.

By default every folder of ``../shared/logs`` (the third-party corpus beside the repository; never copied into it):
a folder's truth is its own ``expected.json`` when it has one (cases3), else ``benchmarks/readers_truth/<folder>.json``
(transcribed by hand from the folder's CASES.md / README.md). Other folders can be given on the command line, each
with an ``expected.json`` in this schema or in the older ``{"files": {name: {...}}}`` schema of the held-out sets.

Per file, each hand-written field is checked (the log's own step numbering; a log that counts from 0 is compared in
its own numbers):

- ``error_expected``: reading must fail with one clear :class:`rlbatch.errors.UserError`;
- ``runs``: how many runs the file holds (1 unless given); list values give one value per run, in file order;
  with ``run_name`` (cases4's convention) the other fields describe the last run in file order only;
- ``steps`` (training steps read), ``first_step``, ``last_step``: exactly;
- ``prompts_per_step``, ``group_size``, ``responses_per_optimizer_step`` (the update batch B), ``lr`` (within 1%):
  null means the file does not state it and the reader must say "unknown";
- ``last_eval_score`` (within 1e-3) and ``last_eval_step``; null: no evaluation in the file (a null step with a
  score: printed once after training, which the reader places at the last step and notes);
- ``gen_at_step`` / ``step_time_at_step`` = ``[step, seconds]``: ``time/gen_s`` / ``time/step_s`` there within 1%;
  null: the file has none, and none may be invented.

A file is **right** when every field is; **right or unknown** when the only misses are values the reader left
unknown (P, G, B, lr, a timing) rather than got wrong, which the corpus README counts as right ("says plainly what it
could not find"). Anything other than ``UserError`` raised is a traceback, counted apart.

Usage::

    .venv/bin/python benchmarks/readers_score.py                     # every folder of ../shared/logs
    .venv/bin/python benchmarks/readers_score.py -v                  # and one line per file that is not right
    .venv/bin/python benchmarks/readers_score.py /path/to/set --format json
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

from rlbatch.errors import UserError
from rlbatch.readers import load

REPO = Path(__file__).resolve().parents[1]
SHARED_LOGS = REPO.parent / "shared" / "logs"
TRUTH = Path(__file__).resolve().parent / "readers_truth"
#: fields whose "unknown" (None) is an honest answer when the truth has a value
MAY_BE_UNKNOWN = ("prompts_per_step", "group_size", "responses_per_optimizer_step", "lr", "gen_at_step",
                  "step_time_at_step")
UNKNOWN = object()
#: folders whose truth counts ``steps`` as the training steps the run took (its last step counted from 1: "20 steps.
#: Only 4 log entries exist") and ``first_step`` as the log's first record, training or evaluation ("400 steps
#: (records 0-400)"), where the older folders count the rows read and the first training row (cases5's CASES.md)
STEPS_TAKEN = {"cases5"}


@dataclass
class FileScore:
    """One file: ``right`` (every field), ``right_or_unknown`` (misses only where the reader said unknown);
    ``wrong`` lists ``field: got X, expected Y``; ``unknown`` the fields left unknown."""

    file: str
    right: bool
    right_or_unknown: bool
    traceback: bool = False
    wrong: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    error: str | None = None


def truth_for(folder: Path) -> list[dict[str, Any]]:
    """The truth entries ``[{"file", "expect"}, ...]`` of ``folder``: its ``expected.json``, else
    ``benchmarks/readers_truth/<name>.json``. Raises FileNotFoundError when neither exists."""
    own = folder / "expected.json"
    path = own if own.exists() else TRUTH / f"{folder.name}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("files"), dict):  # the held-out sets' older schema
        return [{"file": name, "expect": _from_old(want)} for name, want in data["files"].items()]
    return data["files"] if isinstance(data, dict) else data


def _from_old(want: dict[str, Any]) -> dict[str, Any]:
    if want.get("error"):
        return {"error_expected": True}
    out = {k: want[k] for k in ("prompts_per_step", "group_size", "lr", "last_eval_score", "last_eval_step")
           if k in want}
    if "steps" in want:
        out["last_step_canonical"] = want["steps"]  # that schema's "steps": the last step, 1-based
    if "batch_size" in want:
        out["responses_per_optimizer_step"] = want["batch_size"]
    if "n_runs" in want:
        out["runs_at_least"] = want["n_runs"]
    probe = want.get("probe")
    if probe:
        if "gen_s" in probe:
            out["gen_at_step"] = None if probe["gen_s"] is None else [probe["step"], probe["gen_s"]]
        if "step_s" in probe:
            out["step_time_at_step"] = None if probe["step_s"] is None else [probe["step"], probe["step_s"]]
    return out


def _per_run(name: str, value: Any, k: int, n_runs: int) -> Any:
    """The value of field ``name`` for run ``k`` of ``n_runs``: a list of one value per run is indexed (for the
    ``[step, seconds]`` fields, a list of such pairs); anything else holds for every run."""
    if n_runs < 2 or not isinstance(value, list) or len(value) != n_runs:
        return value
    if name.endswith("_at_step") and not all(v is None or isinstance(v, list) for v in value):
        return value
    return value[k]


def _at(run, col: str, step: int, offset: int) -> Any:
    m = run.metrics
    if col not in m.columns:
        return None
    row = m[m["step"] == step + offset]
    if not len(row):
        return None
    v = float(row[col].iloc[0])
    return None if math.isnan(v) else v


def run_mismatches(run, want: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(wrong, unknown) of one run against one expectation."""
    meta, m, ev = run.meta, run.metrics, run.evals
    offset = int(getattr(meta, "step_offset", 0) or 0)
    wrong: list[str] = []
    unknown: list[str] = []

    def check(name: str, got: Any, exp: Any, ok: bool) -> None:
        if ok:
            return
        if got is None and exp is not None and name in MAY_BE_UNKNOWN:
            unknown.append(name)
        else:
            wrong.append(f"{name}: got {got!r}, expected {exp!r}")

    steps = m["step"].astype(int).tolist() if "step" in m.columns else []
    if "steps" in want:
        check("steps", len(steps), want["steps"], len(steps) == want["steps"])
    if "steps_taken" in want:  # STEPS_TAKEN folders
        n = steps[-1] if steps else 0
        check("steps", n, want["steps_taken"], n == want["steps_taken"])
    if "first_record_step" in want and steps:
        ev_steps = [int(s) for s in ev["step"]] if "step" in ev.columns else []
        first = min(steps[:1] + ev_steps[:1]) - offset
        check("first_step", first, want["first_record_step"], first == want["first_record_step"])
    if "first_step" in want and steps:
        check("first_step", steps[0] - offset, want["first_step"], steps[0] - offset == want["first_step"])
    if "last_step" in want and steps:
        check("last_step", steps[-1] - offset, want["last_step"], steps[-1] - offset == want["last_step"])
    if "last_step_canonical" in want and steps:
        check("last_step", steps[-1], want["last_step_canonical"], steps[-1] == want["last_step_canonical"])
    for f, attr in (("prompts_per_step", "prompts_per_step"), ("group_size", "group_size"),
                    ("responses_per_optimizer_step", "batch_size")):
        if f in want:
            got = getattr(meta, attr)
            check(f, got, want[f], got == want[f])
    if "lr" in want:
        got, exp = meta.lr, want["lr"]
        ok = (got is None) if exp is None else (got is not None and abs(got - exp) <= 0.01 * exp)
        check("lr", got, exp, ok)
    scores = ev[ev["eval/score"].notna()] if len(ev) and "eval/score" in ev.columns else ev.iloc[0:0]
    if "last_eval_score" in want:
        exp = want["last_eval_score"]
        got = float(scores["eval/score"].iloc[-1]) if len(scores) else None
        ok = (got is None) if exp is None else (got is not None and abs(got - exp) <= 1e-3)
        check("last_eval_score", got, exp, ok)
    if "last_eval_step" in want:
        exp = want["last_eval_step"]
        got = int(scores["step"].iloc[-1]) - offset if len(scores) else None
        if got is not None and got < 0:
            got = 0
        if exp is None and want.get("last_eval_score") is not None and steps and \
                got == steps[-1] - offset and any("printed after training" in n for n in run.notes):
            got = None  # a score printed once after training, with no step: placed at the last step and said so
        check("last_eval_step", got, exp, got == exp)
    for f, col in (("gen_at_step", "time/gen_s"), ("step_time_at_step", "time/step_s")):
        if f not in want:
            continue
        exp = want[f]
        if exp is None:
            has = col in m.columns and m[col].notna().any()
            check(f, "values" if has else None, None, not has)
            continue
        s, v = exp
        got = _at(run, col, int(s), offset)
        check(f, got, exp, got is not None and abs(got - v) <= 0.01 * abs(v))
    return wrong, unknown


def score_file(path: Path, want: dict[str, Any]) -> FileScore:
    """Read ``path`` with :func:`rlbatch.readers.load` and compare with the hand-written ``want``."""
    name = path.name
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = load(path)
    except UserError as err:
        if want.get("error_expected"):
            return FileScore(name, True, True, error=str(err))
        return FileScore(name, False, False, wrong=["refused: " + str(err)[:300]], error=str(err))
    except Exception:  # noqa: BLE001 - a traceback is what is being counted
        return FileScore(name, False, False, traceback=True, error=traceback.format_exc(limit=4))
    if want.get("error_expected"):
        return FileScore(name, False, False, wrong=[f"read {len(runs)} run(s) with "
                                                    f"{sum(len(r.metrics) for r in runs)} step(s) from a file with "
                                                    "no training step"])
    n_want = want.get("runs", 1)
    wrong: list[str] = []
    unknown: list[str] = []
    try:
        if "runs_at_least" in want:  # old schema: the named run is one of them; the best match is scored
            if len(runs) < want["runs_at_least"]:
                wrong.append(f"runs: got {len(runs)}, expected {want['runs_at_least']}")
            best = min((run_mismatches(r, want) for r in runs), key=lambda wu: (len(wu[0]), len(wu[1])))
            wrong += best[0]
            unknown += best[1]
        elif len(runs) != n_want:
            wrong.append(f"runs: got {len(runs)}, expected {n_want}")
            if n_want == 1:  # say how the best of them fares
                best = min((run_mismatches(r, want) for r in runs), key=lambda wu: (len(wu[0]), len(wu[1])))
                wrong += best[0]
        elif "run_name" in want and n_want > 1:  # cases4: the fields describe one run, the last in file order
            rw, ru = run_mismatches(runs[-1], want)
            wrong += [f"run {n_want} (last): " + x for x in rw]
            unknown += [f"run {n_want} (last): " + x for x in ru]
        else:
            for k, run in enumerate(runs):
                w = {f: _per_run(f, v, k, n_want) for f, v in want.items()}
                rw, ru = run_mismatches(run, w)
                pre = f"run {k + 1}: " if n_want > 1 else ""
                wrong += [pre + x for x in rw]
                unknown += [pre + x for x in ru]
    except Exception:  # noqa: BLE001
        return FileScore(name, False, False, traceback=True, error=traceback.format_exc(limit=4))
    return FileScore(name, not wrong and not unknown, not wrong, wrong=wrong, unknown=unknown)


def score_folder(folder: Path) -> dict[str, Any]:
    """Score every file named in the folder's truth. Returns ``{"folder", "files", "right", "right_or_unknown",
    "total", "tracebacks"}``."""
    folder = Path(folder)
    entries = truth_for(folder)
    if folder.name in STEPS_TAKEN:
        ren = {"steps": "steps_taken", "first_step": "first_record_step"}
        entries = [{**e, "expect": {ren.get(k, k): v for k, v in e["expect"].items()}} for e in entries]
    scores = [score_file(folder / e["file"], e["expect"]) for e in entries]
    return {"folder": folder.name, "files": [asdict(s) for s in scores], "right": sum(s.right for s in scores),
            "right_or_unknown": sum(s.right_or_unknown for s in scores), "total": len(scores),
            "tracebacks": sum(s.traceback for s in scores)}


def default_folders(root: Path = SHARED_LOGS) -> list[Path]:
    """Every folder of ``root`` that has ground truth (its own expected.json or one in benchmarks/readers_truth)."""
    return [d for d in sorted(root.iterdir()) if d.is_dir() and ((d / "expected.json").exists()
                                                                  or (TRUTH / f"{d.name}.json").exists())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="*", type=Path, help="folders to score (default: every folder of ../shared/logs)")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per file that is not right")
    ap.add_argument("--format", choices=("text", "json"), default="text")
    args = ap.parse_args(argv)
    folders = args.folders
    if not folders:
        if not SHARED_LOGS.is_dir():
            print(f"readers_score: {SHARED_LOGS} is absent (the third-party log corpus lives beside the repository, "
                  "never in it); give folders to score", file=sys.stderr)
            return 2
        folders = default_folders()
    results = [score_folder(f) for f in folders]
    if args.format == "json":
        print(json.dumps(results, indent=1))
        return 0
    for res in results:
        print(f"{res['folder']:<12} right {res['right']:>2}/{res['total']:<2}  right or unknown "
              f"{res['right_or_unknown']:>2}/{res['total']:<2}  tracebacks {res['tracebacks']}")
        if args.verbose:
            for f in res["files"]:
                if f["right"]:
                    continue
                mark = "TB" if f["traceback"] else ("~ " if f["right_or_unknown"] else "--")
                detail = "; ".join(f["wrong"] + [f"{u}: unknown" for u in f["unknown"]])
                print(f"   {mark} {f['file']}: {detail[:400]}")
                if f["traceback"]:
                    print("      " + (f["error"] or "").strip().replace("\n", "\n      "))
    tot = {k: sum(r[k] for r in results) for k in ("right", "right_or_unknown", "total", "tracebacks")}
    print(f"all          right {tot['right']}/{tot['total']}  right or unknown {tot['right_or_unknown']}/"
          f"{tot['total']}  tracebacks {tot['tracebacks']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
