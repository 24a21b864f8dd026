"""CSV logs: W&B history exports and generic CSV (one row per logged record, one column per metric).

W&B exports come in two shapes, both read here:
- ``run.history()`` / "Export as CSV" of a run's history: columns ``_step``, ``_runtime``, ``_timestamp`` and the
  metric names as logged (``train/reward``, ``actor/grad_norm``...). ``_runtime`` is used for wall-clock only when
  the log has no per-step timer (it includes evaluation; noted).
- a chart panel's CSV: ``Step`` and ``<run name> - <metric>`` columns (with ``__MIN``/``__MAX`` companions, dropped);
  each run name becomes one run.

Foreign names go through :mod:`rlbatch.readers.names`; ``--map foreign=canonical`` adds or overrides mappings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from rlbatch.errors import UserError
from rlbatch.readers.common import build_run, finalize, meta_from, sniff_encoding, warn
from rlbatch.runstore import Run

PANEL_COL = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")
WANDB_COLS = ("_step", "_runtime", "_timestamp")


def is_wandb_header(cols: list[str]) -> bool:
    if any(c in WANDB_COLS for c in cols):
        return True
    return "Step" in cols and any(PANEL_COL.match(c) for c in cols if c != "Step")


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
    panel = fmt == "wandb-csv" and "Step" in df.columns and not any(c in df.columns for c in WANDB_COLS)
    if panel:
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
        groups[rid] = df
    notes = []
    if fmt == "wandb-csv" and "_runtime" in df.columns:
        notes.append("W&B _runtime kept as raw/_runtime; wall-clock from per-step timers when present")
    runs = []
    for name, g in groups.items():
        rows = [{k: v for k, v in r.items() if v == v} for r in g.to_dict(orient="records")]  # empty cell: absent
        lines = list(range(2, len(g) + 2)) if not panel else None
        fields = meta_from(name, **(meta or {}))
        try:
            run = build_run(rows, path=path, source_format=fmt, meta_fields=fields, notes=notes, lines=lines,
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
