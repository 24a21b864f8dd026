"""The accounting of a table of point values (``rlbatch account``: one row per run, as the paper's table), its JSON,
and the reader of such a table from CSV. The formulas are :mod:`rlbatch.analysis.accounting`'s; no intervals (a
table of point values has no seeds), so the verdicts say "(point estimate)".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from rlbatch.analysis.accounting import JSON_KEYS, ratios, relative_throughput
from rlbatch.analysis.decision import verdict_label
from rlbatch.analysis.throughput import throughput_to_target
from rlbatch.errors import UserError

_NOT_REACHED_TOKENS = {"", "none", "null", "nan", "not reached", "not_reached", "-", "na", "n/a"}


def _finite_pos(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def account(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Accounting rows against ``reference``.

    ``runs`` columns: ``run`` (str, unique), ``batch_size`` (responses per update), ``samples_to_target``
    (retained responses, NaN/None = not reached), and ``time_to_target_s`` (seconds) and/or
    ``throughput_samples_per_s`` (retained responses per second). When both are given, ``time_to_target_s`` wins.

    Returns one row per run with columns ``run, batch_size, samples_to_target, time_to_target_s,
    throughput_samples_per_s, rN, relative_throughput, relative_time, faster_than_reference, reached``; unknown
    quantities are None. Raises :class:`UserError` if the reference is unknown or did not reach the target.
    """
    runs = runs.reset_index(drop=True)
    names = list(runs["run"].astype(str))
    if reference not in names:
        raise UserError(f"unknown reference run {reference!r}; runs are: {', '.join(names)}", field="reference")
    rows = []
    for rec in runs.to_dict(orient="records"):
        s = rec.get("samples_to_target")
        s = float(s) if _finite_pos(s) else None
        t = rec.get("time_to_target_s")
        t = float(t) if _finite_pos(t) else None
        x = rec.get("throughput_samples_per_s")
        x = float(x) if _finite_pos(x) else None
        if s is not None and t is not None:
            x = throughput_to_target(s, t)
        elif s is not None and x is not None:
            t = s / x  # T = S / X, the time the throughput column implies
        b = rec.get("batch_size")
        rows.append({"run": str(rec["run"]), "batch_size": int(b) if _finite_pos(b) else None,
                     "samples_to_target": s, "time_to_target_s": t if s is not None else None,
                     "throughput_samples_per_s": x, "reached": s is not None})
    ref = rows[names.index(reference)]
    if not ref["reached"]:
        raise UserError(f"reference run {reference!r} never reached the target; choose another --reference",
                        field="reference")
    if ref["throughput_samples_per_s"] is None:
        raise UserError(f"reference run {reference!r} has neither time-to-target nor throughput", field="reference")
    for r in rows:
        r.update(ratios(r["samples_to_target"], r["time_to_target_s"], ref["samples_to_target"],
                        ref["time_to_target_s"]))
        x = r["throughput_samples_per_s"]
        if r["relative_throughput"] is None and x is not None:
            r["relative_throughput"] = relative_throughput(x, ref["throughput_samples_per_s"])
        label = verdict_label(r["relative_time"], None, is_reference=r["run"] == reference, reached=r["reached"])
        # a table of point values: the verdict says so ("faster (point estimate)"); the flag follows its word
        r["faster_than_reference"], r["verdict"] = label.startswith("faster"), label
    return pd.DataFrame(rows)


def fastest(rows: pd.DataFrame) -> str | None:
    """The run with the smallest relative time-to-target among those that reached the target (None if none)."""
    ok = rows[rows["relative_time"].notna()]
    if ok.empty:
        return None
    return str(ok.loc[ok["relative_time"].astype(float).idxmin(), "run"])


def to_json_rows(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts with :data:`JSON_KEYS` (None where not reached or unknown)."""
    out = []
    for rec in rows.to_dict(orient="records"):
        d = {}
        for k in JSON_KEYS:
            v = rec.get(k)
            if isinstance(v, float) and math.isnan(v):
                v = None
            d[k] = v
        d["reached"] = bool(rec.get("reached"))
        out.append(d)
    return out


# --------------------------------------------------------------------------------------------------- CSV input
def read_accounting_csv(path: Path | str) -> pd.DataFrame:
    """Read an accounting table (as ``shared/paper/hunyuan_grpo_accounting.csv``) into :func:`account`'s input.

    Columns: ``run, prompts_per_step, group_size, lr, samples_to_target`` and one of ``wall_clock_h``,
    ``wall_clock_s`` or ``throughput_samples_per_s``; an optional ``batch_size`` overrides P x G.
    ``samples_to_target`` may be empty or "not reached". Raises :class:`UserError` naming the file, line and column
    for a missing column, a non-numeric or negative cell, a duplicate run, or an empty file.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError("no such file", path=str(path))
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise UserError("empty file: expected a header line and one row per run", path=str(path)) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise UserError(f"not a readable CSV ({str(err).splitlines()[0]})", path=str(path)) from None
    df.columns = [c.strip() for c in df.columns]
    if df.empty:
        raise UserError("no rows: expected one row per run after the header", path=str(path))
    required = ["run", "prompts_per_step", "group_size", "samples_to_target"]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise UserError(f"missing column {missing[0]!r} (have: {', '.join(df.columns)})", path=str(path))
    time_cols = [c for c in ("wall_clock_h", "wall_clock_s", "throughput_samples_per_s") if c in df.columns]
    if not time_cols:
        raise UserError("missing column 'wall_clock_h' (or 'wall_clock_s' / 'throughput_samples_per_s')",
                        path=str(path))

    def num(value: str, col: str, line: int, *, allow_empty: bool, integer: bool = False) -> float | None:
        v = value.strip()
        if v.lower() in _NOT_REACHED_TOKENS:
            if allow_empty:
                return None
            raise UserError(f"column {col!r} is empty", path=str(path), line=line)
        try:
            x = float(v)
        except ValueError:
            raise UserError(f"column {col!r}: {v!r} is not a number", path=str(path), line=line) from None
        if not math.isfinite(x):
            raise UserError(f"column {col!r}: {v!r} is not finite", path=str(path), line=line)
        if x < 0 or (x == 0 and col != "samples_to_target"):
            raise UserError(f"column {col!r}: {v} must be positive", path=str(path), line=line)
        if x == 0:
            raise UserError(f"column {col!r}: 0 samples cannot reach a target", path=str(path), line=line)
        if integer and x != int(x):
            raise UserError(f"column {col!r}: {v} must be an integer", path=str(path), line=line)
        return x

    rows, seen = [], set()
    for i, rec in enumerate(df.to_dict(orient="records")):
        line = i + 2  # header is line 1
        run = rec["run"].strip()
        if not run:
            raise UserError("column 'run' is empty", path=str(path), line=line)
        if run in seen:
            raise UserError(f"duplicate run {run!r}", path=str(path), line=line)
        seen.add(run)
        p = num(rec["prompts_per_step"], "prompts_per_step", line, allow_empty=False, integer=True)
        g = num(rec["group_size"], "group_size", line, allow_empty=False, integer=True)
        b = p * g
        if "batch_size" in rec and rec["batch_size"].strip():
            b = num(rec["batch_size"], "batch_size", line, allow_empty=False, integer=True)
        lr = num(rec["lr"], "lr", line, allow_empty=True) if "lr" in rec else None
        s = num(rec["samples_to_target"], "samples_to_target", line, allow_empty=True)
        row = {"run": run, "prompts_per_step": int(p), "group_size": int(g), "batch_size": int(b), "lr": lr,
               "samples_to_target": s, "time_to_target_s": None, "throughput_samples_per_s": None}
        if "wall_clock_h" in rec:
            h = num(rec["wall_clock_h"], "wall_clock_h", line, allow_empty=True)
            row["time_to_target_s"] = h * 3600.0 if h is not None else None
        if row["time_to_target_s"] is None and "wall_clock_s" in rec:
            row["time_to_target_s"] = num(rec["wall_clock_s"], "wall_clock_s", line, allow_empty=True)
        if "throughput_samples_per_s" in rec:
            row["throughput_samples_per_s"] = num(rec["throughput_samples_per_s"], "throughput_samples_per_s",
                                                  line, allow_empty=True)
        if s is not None and row["time_to_target_s"] is None and row["throughput_samples_per_s"] is None:
            raise UserError(f"run {run!r} reached the target but has no wall-clock or throughput value",
                            path=str(path), line=line)
        rows.append(row)
    return pd.DataFrame(rows)
