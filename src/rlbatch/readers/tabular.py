"""CSV logs: W&B history exports and generic CSV (one row per logged record, one column per metric).

W&B exports come in two shapes, both read here:
- ``run.history()`` / "Export as CSV" of a run's history: columns ``_step``, ``_runtime``, ``_timestamp`` and the
  metric names as logged (``train/reward``, ``actor/grad_norm``...). ``_runtime`` is used for wall-clock only when
  the log has no per-step timer (it includes evaluation; noted).
- a chart panel's CSV: ``Step`` and ``<run name> - <metric>`` columns (with ``__MIN``/``__MAX`` companions, dropped);
  each run name becomes one run.
- a long export, one row per point (``run_name,metric,step,value``, as ``pandas.melt`` of ``run.history()`` or the
  W&B API writes it): pivoted into one row per step and metric columns, one run per run name.

Any CSV that holds several runs (a run-name column, or a step counter that starts over) is split into runs
(:func:`rlbatch.readers.extract.split_records`).

Foreign names go through :mod:`rlbatch.readers.names`; ``--map foreign=canonical`` adds or overrides mappings.
The column that numbers the steps (``step``, ``global_step``, ``_step``, a panel's ``Step``:
:func:`rlbatch.readers.names.step_column`) is the run's ``step_source``, which ``rlbatch inspect`` names (field
report finding 16).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from rlbatch.errors import UserError
from rlbatch.readers import extract as X
from rlbatch.readers import names as N
from rlbatch.readers.common import build_run, finalize, meta_from, sniff_encoding, warn
from rlbatch.runstore import Run

PANEL_COL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")
WANDB_COLS = ("_step", "_runtime", "_timestamp")


#: a long export's columns (case-insensitive), most specific first
LONG_METRIC = ("metric", "metric_name", "key", "tag", "series", "name")
LONG_VALUE = ("value", "metric_value", "val", "y")
LONG_STEP = ("step", "_step", "global_step", "iteration", "iter", "x", "epoch")


def is_wandb_header(cols: list[str]) -> bool:
    if any(c in WANDB_COLS for c in cols):
        return True
    if long_columns(cols) is not None:
        return True
    return "Step" in cols and any(PANEL_COL.match(c) for c in cols if c != "Step")


def chart_columns(df: pd.DataFrame, user_map: dict[str, str] | None = None) -> list[str]:
    """The run columns of a W&B chart export of one metric (``Step`` then one numeric column per run, named by the
    run, none a metric's name: ``Step,14b,8b,4b,1.7b``), or [] for any other table. Two run columns at least."""
    cols = [c for c in df.columns if c != "Step"]
    if "Step" not in df.columns or len(cols) < 2 or " - " in " ".join(cols):
        return []
    for c in cols:
        if "/" in c or N.canonical_for(c, user_map) is not None or N.step_column([c], user_map) is not None:
            return []
        if not pd.api.types.is_numeric_dtype(df[c]):
            return []
    return cols


def long_columns(cols: list[str]) -> tuple[str, str, str, str | None] | None:
    """``(metric, value, step, run or None)`` column names of a long export (one row per point), or None."""
    low = {c.strip().lower(): c for c in cols}

    def pick(names: tuple[str, ...], skip: tuple[str, ...] = ()) -> str | None:
        return next((low[n] for n in names if n in low and low[n] not in skip), None)

    value = pick(LONG_VALUE)
    step = pick(LONG_STEP)
    metric = pick(LONG_METRIC, (value or "", step or ""))
    if not (value and step and metric) or len(cols) > 8:
        return None
    run = pick(tuple(f for f in X.RUN_FIELDS if f != "name") + ("run name", "run_display_name"),
               (metric, value, step))
    return metric, value, step, run


def _pivot_long(df: pd.DataFrame, cols: tuple[str, str, str, str | None]) -> pd.DataFrame:
    """A long export -> one row per (run, step) with one column per metric (the last value of a repeated point)."""
    metric, value, step, run = cols
    keys = [run, step] if run else [step]
    d = df.copy()
    d[value] = pd.to_numeric(d[value], errors="coerce")
    wide = d.pivot_table(index=keys, columns=metric, values=value, aggfunc="last").reset_index()
    wide.columns = [str(c) for c in wide.columns]
    wide = wide.rename(columns={step: "step"})
    if run:
        # keep the runs in file order, steps ascending within each
        order = {r: i for i, r in enumerate(dict.fromkeys(df[run].astype(str)))}
        wide["__order"] = wide[run].astype(str).map(order)
        wide = wide.sort_values(["__order", "step"], kind="stable").drop(columns="__order")
        wide = wide.rename(columns={run: "run_name"})
    return wide


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        with open(path, "rb") as fh:
            enc = sniff_encoding(fh.read(4096))
        df = pd.read_csv(path, on_bad_lines="warn", skipinitialspace=True, encoding=enc, encoding_errors="replace")
    except OSError as err:
        raise UserError(f"cannot read ({err.strerror})", path=str(path)) from None
    except pd.errors.EmptyDataError:
        raise UserError("empty file: expected a header line and one row per logged step", path=str(path)) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise UserError(f"not a readable CSV ({str(err).splitlines()[0]})", path=str(path)) from None
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        raise UserError("no rows after the header", path=str(path))
    return df


def read(path: str | Path, *, fmt: str = "csv", run_id: str | None = None, user_map: dict[str, str] | None = None,
         meta: dict[str, Any] | None = None) -> list[Run]:
    """Read a CSV log (``fmt`` = ``wandb-csv`` or ``csv``) into one run (or one per run of a W&B panel export).

    Raises :class:`UserError` naming the file for an empty or unreadable CSV or one without training rows.
    """
    path = Path(path)
    df = _read_csv(path)
    rid = run_id or path.stem
    groups: dict[str, pd.DataFrame] = {}
    notes = []
    own_notes = {}
    long = long_columns(list(df.columns))
    if long is not None:
        df = _pivot_long(df, long)
        notes.append(f"a long export (one row per point: {', '.join(c for c in long if c)}) pivoted into one row "
                     "per step")
    panel = fmt == "wandb-csv" and "Step" in df.columns and not any(c in df.columns for c in WANDB_COLS)
    wide = long is None and not panel and chart_columns(df, user_map)
    if wide:  # a W&B chart export of one metric, one run per column (Step,14b,8b,...): the metric is not named
        for c in wide:
            g = df[["Step", c]].dropna(subset=[c])
            # the value is also the row's record (raw/chart/<run>): its steps are the steps the run logged
            groups[c] = pd.DataFrame({"step": g["Step"], "eval/score": g[c], f"raw/chart/{c}": g[c]})
            own_notes[c] = (f"run {c!r}: column {c!r} of a chart export (Step plus one column per run); the chart's "
                            "metric is not named in the file: read as the evaluation score (eval/score), also kept "
                            f"as raw/chart/{c}")
        panel = True
    elif panel:
        by_run: dict[str, dict[str, str]] = {}
        for c in df.columns:
            m = PANEL_COL.match(c)
            if c == "Step" or not m or m.group("agg"):
                continue
            by_run.setdefault(m.group("run"), {})[c] = m.group("metric")
        for name, cols in by_run.items():
            g = df[["Step", *cols]].rename(columns={"Step": "step", **cols})
            groups[name] = g.dropna(subset=list(cols.values()), how="all")
    else:
        records = [X.Record(i + 2, {k: v for k, v in r.items() if v == v}, "csv")
                   for i, r in enumerate(df.to_dict(orient="records"))]
        parts = X.split_records(records)
        if len(parts) == 1:
            groups[rid] = df
        else:
            for k, part in enumerate(parts, 1):
                name = part.name or f"{rid}-run{k}"
                groups[name] = pd.DataFrame.from_records([r.values for r in part.records])
                own_notes[name] = f"run {k} of {len(parts)} in {path.name}: {part.why}"
    if fmt == "wandb-csv" and "_runtime" in df.columns:
        notes.append("W&B _runtime kept as raw/_runtime; wall-clock from per-step timers when present")
    runs = []
    for name, g in groups.items():
        rows = [{k: v for k, v in r.items() if v == v} for r in g.to_dict(orient="records")]  # empty cell: absent
        lines = list(range(2, len(g) + 2)) if not panel and len(groups) == 1 and long is None else None
        fields = meta_from(name, **(meta or {}))
        own = notes + ([own_notes[name]] if name in own_notes else [])
        named = N.lr_in_name(name) if "lr" not in fields else None
        if named and not any((N.canonical_for(str(c), user_map) or ("",))[0] == "lr" for c in g.columns):
            fields.update(lr=named[0], config_sources={"lr": f"run name {name!r}"})
            own = own + [f"lr: {named[0]:g} from the run name {name!r} ({named[1]}); the file logs no learning rate"]
        step_col = N.step_column(list(g.columns), user_map)
        if step_col is not None:  # the column that numbers the steps, by its name in the file (inspect says it)
            label = "Step" if panel else long[2] if long is not None and step_col == "step" else step_col
            fields.setdefault("step_source", label)
            own = own + [f"steps from the column {label!r} of each row"]
        try:
            run = build_run(rows, path=path, source_format=fmt, meta_fields=fields, notes=own, lines=lines,
                            user_map=user_map)
        except UserError as err:
            if len(groups) > 1:
                warn(f"run {name!r}: {err}")
                continue
            raise
        if fmt == "wandb-csv" and "time/wall_s" not in run.metrics.columns and "raw/_runtime" in run.metrics:
            run.metrics["time/wall_s"] = run.metrics["raw/_runtime"]
            run.notes.append("time/wall_s from W&B _runtime (includes evaluation time)")
            finalize(run)
        runs.append(run)
    if not runs:
        raise UserError("no run with training rows (no column holds a training metric)", path=str(path))
    return runs
