"""``rlbatch analyze``: read logs of any supported format, summarise each run, account for time-to-target when a
target is given, and write the report (``--out``). The CLI command in ``cli.py`` only parses flags and calls
:func:`analyze` and :func:`print_analysis`.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.runstore import Run

SETTABLE = {"prompts_per_step": int, "group_size": int, "batch_size": int, "lr": float, "algorithm": str,
            "model": str, "task": str}


def parse_sets(items: list[str] | None) -> list[tuple[str | None, str, Any]]:
    """``["RUN:prompts_per_step=256", "group_size=8"]`` -> ``[(run or None for all, field, value)]``.

    Raises :class:`UserError` naming the item for a bad form, an unknown field or a value of the wrong type.
    """
    out = []
    for item in items or []:
        target, _, kv = item.rpartition(":") if ":" in item.split("=", 1)[0] else ("", "", item)
        key, sep, value = kv.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"--set {item!r}: expected RUN:field=value (e.g. run1:prompts_per_step=256)",
                            field="set")
        if key not in SETTABLE:
            raise UserError(f"--set {item!r}: unknown field {key!r}; one of {', '.join(SETTABLE)}", field="set")
        cast = SETTABLE[key]
        try:
            val = cast(float(value)) if cast is int else cast(value)
        except ValueError:
            raise UserError(f"--set {item!r}: {value!r} is not a valid {key}", field="set") from None
        if cast is int and float(value) != int(float(value)):
            raise UserError(f"--set {item!r}: {key} must be an integer", field="set")
        out.append((target.strip() or None, key, val))
    return out


def load_all(paths: list[Path], *, log_format: str | None = None, mapping: list[str] | None = None,
             prompts_per_step: int | None = None, group_size: int | None = None,
             sets: list[str] | None = None) -> tuple[list[Run], list[str]]:
    """Read every path; a path that fails gives a warning and the others are still read.

    Returns ``(runs, warnings)``: warnings are one line each (file and line where known). Raises
    :class:`UserError` when nothing usable was read or a ``--set`` names an unknown run.
    """
    from rlbatch.readers import apply_overrides, load, parse_mapping
    from rlbatch.readers.common import unique_ids

    overrides = parse_sets(sets)
    user_map = parse_mapping(mapping)
    runs: list[Run] = []
    msgs: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    for p in paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                runs.extend(load(p, log_format, prompts_per_step=prompts_per_step, group_size=group_size,
                                 mapping=user_map))
            except UserError as err:  # one line for a file that could not be read, not its partial warnings too
                failed.append(str(p))
                skipped.append(f"skipped: {err}")
                continue
        msgs.extend(str(w.message) for w in caught if issubclass(w.category, UserWarning))
    msgs += skipped
    if not runs:
        detail = "; ".join(msgs[-3:]) if msgs else ""
        raise UserError(f"nothing usable read from {', '.join(map(str, paths))}" + (f" ({detail})" if detail else ""))
    runs = unique_ids(runs)
    ids = [r.run_id for r in runs]
    per_run: dict[str, dict[str, Any]] = {}
    for target, key, val in overrides:
        if target is None:
            for rid in ids:
                per_run.setdefault(rid, {})[key] = val
        elif target not in ids:
            raise UserError(f"--set: unknown run {target!r}; runs are: {', '.join(ids)}", field="set")
        else:
            per_run.setdefault(target, {})[key] = val
    runs = [apply_overrides(r, per_run[r.run_id]) if r.run_id in per_run else r for r in runs]
    return runs, msgs


def analyze(paths: list[Path], *, target: float | None = None, metric: str = "eval/score",
            reference: str | None = None, out: Path | None = None, log_format: str | None = None,
            mapping: list[str] | None = None, sets: list[str] | None = None, prompts_per_step: int | None = None,
            group_size: int | None = None, title: str = "rlbatch analyze", ema: float | None = None,
            sustained: bool = False) -> dict[str, Any]:
    """Read ``paths``, summarise, account (with a target) and write the report into ``out`` when given.

    ``ema`` (smoothing weight in [0, 1)) and ``sustained`` (the score must stay at or above the target after the
    crossing) apply to samples-to-target (:func:`rlbatch.analysis.curves.samples_to_target`).

    Returns ``{"runs": [...], "accounting": [...] (with a target), "recommendation": str | None,
    "warnings": [...], "report": {"html", "markdown", "json"} (with ``out``)}``.
    """
    from rlbatch.analysis.curves import summarize_run
    from rlbatch.report import accounting_for_runs, build_report, configurations

    runs, msgs = load_all(paths, log_format=log_format, mapping=mapping, prompts_per_step=prompts_per_step,
                          group_size=group_size, sets=sets)
    if reference is not None and reference not in [r.run_id for r in runs]:
        raise UserError(f"unknown reference run {reference!r}; runs are: {', '.join(r.run_id for r in runs)}",
                        field="reference")
    if out is not None:
        result = build_report(runs, Path(out), target=target, metric=metric, reference=reference, title=title,
                              ema=ema, sustained=sustained)
        result["report"] = {k: str(Path(out) / f) for k, f in
                            (("html", "report.html"), ("markdown", "report.md"), ("json", "report.json"))}
    else:
        result = {"metric": metric, "target": target, "reference": reference,
                  "runs": [summarize_run(r) for r in runs]}
        result["recommendation"] = None
        if target is not None:  # as the report: seeds of one configuration are accounted together
            _groups, _seeded, configs = configurations(runs, metric)
            rows, ref, text = accounting_for_runs(configs, target, metric, reference, ema=ema, sustained=sustained)
            result.update(accounting=rows, reference=ref, recommendation=text)
    result["warnings"] = msgs
    return result


def print_analysis(result: dict[str, Any], fmt: str) -> None:
    """Print :func:`analyze`'s result as ``table`` (rich), ``markdown`` or ``json``; warnings go to stderr."""
    from rlbatch.output import console, markdown_table, print_json, rich_table
    from rlbatch.report import samples_cell, summary_columns

    for w in result.get("warnings", []):
        print(f"rlbatch: warning: {w}", file=sys.stderr)
    if fmt == "json":
        print_json(result)
        return
    cols = summary_columns()
    acc_cols = [("run", "run", None), ("batch_size", "B", None), ("samples_to_target", "samples-to-target", samples_cell),
                ("rN", "rN", ".2f"), ("relative_throughput", "rel. throughput", ".2f"),
                ("relative_time", "rel. time-to-target", ".2f"), ("faster_than_reference", "faster", None)]
    target = result.get("target")
    if fmt == "markdown":
        print(markdown_table(result["runs"], cols))
        if "accounting" in result:
            print(f"\n**Accounting at {result['metric']} ≥ {target:g}** (reference {result.get('reference')})\n")
            print(markdown_table(result["accounting"], acc_cols, none="not reached"))
        if result.get("recommendation"):
            print("\n" + result["recommendation"])
        if result.get("report"):
            print(f"\nReport: {result['report']['html']}")
        return
    con = console()
    con.print(rich_table(result["runs"], summary_columns(compact=True), title="Runs (--format markdown or json for "
                         "all columns)"))
    if "accounting" in result:
        con.print(rich_table(result["accounting"], acc_cols, none="not reached",
                             title=f"Accounting at {result['metric']} ≥ {target:g} (reference {result.get('reference')})"))
    if result.get("recommendation"):
        con.print(result["recommendation"].replace("**", ""), markup=False)
    if result.get("report"):
        con.print(f"Report: {result['report']['html']}", markup=False)
