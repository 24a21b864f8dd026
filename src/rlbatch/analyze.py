"""``rlbatch analyze``: read logs of any supported format, summarise each run, account for time-to-target when a
target is given, and write the report (``--out``). The CLI command in ``cli.py`` only parses flags and calls
:func:`analyze` and :func:`print_analysis`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from rlbatch.analysis.accounting import check_target, check_target_below_start
from rlbatch.analysis.curves import check_ema, check_ema_spacing
from rlbatch.analysis.study import Study
from rlbatch.output import console, markdown_table, print_json, rich_table
from rlbatch.readers.collect import load_all
from rlbatch.readers.generic import missing_fields
from rlbatch.report import accounting_columns, batch_cell, build_report, summary_columns, with_ci_cells
from rlbatch.runstore import Run, sequential_of
from rlbatch.result import StudyResult


def analyze(paths: list[Path], *, target: float | None = None, metric: str = "eval/score",
            reference: str | None = None, out: Path | None = None, log_format: str | None = None,
            mapping: list[str] | None = None, sets: list[str] | None = None, prompts_per_step: int | None = None,
            group_size: int | None = None, title: str = "rlbatch analyze", ema: float | None = None,
            sustained: bool = False, clock: str = "auto",
            stage: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Read ``paths``, summarise, account (with a target) and write the report into ``out`` when given.

    ``ema`` (smoothing weight in [0, 1)) and ``sustained`` (the score must stay at or above the target after the
    crossing) apply to samples-to-target (:func:`rlbatch.analysis.curves.samples_to_target`). ``clock``: ``auto``,
    ``wall`` or ``cpu`` (:func:`rlbatch.analysis.throughput.clock_basis`).

    Returns ``{"runs": [...], "accounting": [...] (with a target), "recommendation": str | None,
    "warnings": [...], "report": {"html", "markdown", "json"} (with ``out``)}``.
    """
    check_target(target)
    if ema is not None:  # the options first, before any data is read or judged
        check_ema(ema)
    stage = stage or (lambda _label: None)
    stage(f"reading {len(paths)} path{'s' if len(paths) != 1 else ''}")
    runs, msgs = load_all(paths, log_format=log_format, mapping=mapping, prompts_per_step=prompts_per_step,
                          group_size=group_size, sets=sets)
    check_target_below_start(runs, target, metric)
    if ema is not None and target is not None:
        check_ema_spacing(runs, metric)
    # a sweep run by the sequential study: its decision is the study's last look (as its own report), not a fixed
    # design's re-analysis of data that stopped on what it showed
    study = Study.of(runs, target, metric, reference, ema=ema, sustained=sustained, clock=clock,
                     sequential=sequential_of(paths))
    if study.sequential is not None:
        msgs = list(msgs) + [f"{paths[0]}: these runs are a sequential study's (its sequential.json); the verdicts "
                             "are its last look's (that look's boundary, only its claims called faster, its pick)"]
    stage(f"{len(runs)} run{'s' if len(runs) != 1 else ''} read; "
          + ("computing the accounting and writing the report" if out is not None else "computing the summary"))
    if out is not None:
        result = build_report(runs, Path(out), title=title, study_result=StudyResult.of_study(study))
        result["report"] = {k: str(Path(out) / f) for k, f in
                            (("html", "report.html"), ("markdown", "report.md"), ("json", "report.json"))}
    else:
        result = {"metric": metric, "target": target, "reference": reference,
                  "runs": study.run_summaries, "recommendation": None}
        if target is not None:  # as the report: one accounting core, seeds of a configuration together
            result.update(study.accounting)
    result["warnings"] = msgs
    result["missing"] = missing_by_run(runs)
    return result


def _no_reference(result: dict[str, Any]) -> str:
    """The accounting title's parenthesis: the reference, or why there is none."""
    if result.get("reference"):
        return f"reference {result['reference']}"
    rows = result.get("accounting") or []
    if rows and all(r.get("batch_size") is None for r in rows):
        return "no batch size in the logs: no samples-to-target"
    return "no reference reached the target"


def missing_by_run(runs: list[Run]) -> list[dict[str, str]]:
    """Fields the analysis needs that a run's log lacks, each with the ``--set`` that supplies it:
    ``[{"run", "field", "flag"}]`` (:func:`rlbatch.readers.generic.missing_fields`)."""
    return [{"run": r.run_id, "field": f, "flag": flag} for r in runs for f, flag in missing_fields(r).items()]


def _print_missing(result: dict[str, Any]) -> None:
    for m in result.get("missing", []):
        print(f"rlbatch: {m['run']}: no {m['field']} in the log; supply it with {m['flag']}", file=sys.stderr)


def print_analysis(result: dict[str, Any], fmt: str) -> None:
    """Print :func:`analyze`'s result as ``table`` (rich), ``markdown`` or ``json``; warnings go to stderr."""
    for w in result.get("warnings", []):
        print(f"rlbatch: warning: {w}", file=sys.stderr)
    _print_missing(result)
    if fmt == "json":
        print_json(result)
        return
    cols = summary_columns()
    acc_cols = accounting_columns()
    if result.get("comparisons"):
        acc_cols = [("comparison", "model / task / algorithm", None)] + acc_cols
    target = result.get("target")
    if fmt == "markdown":
        print(markdown_table(result["runs"], cols))
        if "accounting" in result:
            print(f"\n**Accounting at {result['metric']} ≥ {target:g}** ({_no_reference(result)})\n")
            print(markdown_table(with_ci_cells(result["accounting"]), acc_cols, none="—"))
        if result.get("recommendation"):
            print("\n**Recommendation**\n\n" + result["recommendation"])
        if result.get("report"):
            print(f"\nReport: {result['report']['html']}")
        return
    con = console()
    clock = {"cpu": "process-CPU", "wall": "wall"}.get((result["runs"] or [{}])[0].get("clock"), "logged")
    con.print(rich_table(result["runs"], summary_columns(compact=True), title=f"Runs (time and throughput on the "
                         f"{clock} clock; --format markdown or json for all columns)"))
    if "accounting" in result:
        rows = with_ci_cells(result["accounting"])
        compact = [("run", "configuration", None), ("batch_size", "B", batch_cell),
                   ("samples_to_target_cell", "samples-to-target", None), ("rN_cell", "rN (95% simult.)", None),
                   ("relative_throughput_cell", "rel. throughput (95% simult.)", None),
                   ("relative_time_cell", "rel. time (95% simult.)", None), ("verdict", "verdict", None)]
        if result.get("comparisons"):
            compact = [("comparison", "model / task / alg.", None)] + compact
        con.print(rich_table(rows, compact, none="not reached",
                             title=f"Accounting at {result['metric']} ≥ {target:g} ({_no_reference(result)}; "
                             "--format markdown or json for every column)"))
    if result.get("recommendation"):
        con.print(result["recommendation"].replace("**", "").replace("  \n", "\n"), markup=False)
    if result.get("report"):
        con.print(f"Report: {result['report']['html']}", markup=False)

