"""Clocks in a log: a cumulative wall clock read as ``time/wall_s``, step times derived from it, and a check that a
column read as seconds per step is not a cumulative clock.

Field report finding 3 (a custom loop's ``wall_time_s`` mapped with ``--map wall_time_s=time/step_s`` gave a run of
2.77 h as 694 h, silently). The canonical clocks (DESIGN.md, :data:`rlbatch.runstore.CANONICAL_METRICS`):

- ``time/step_s``: seconds the step took (one value per step);
- ``time/wall_s``: cumulative wall-clock seconds at the step since the run started.

Rules, in the order :func:`add_clock_times` applies them (after the step timers of the name table):

1. a column named like a cumulative clock (:data:`rlbatch.readers.names.WALL_CLOCK`: ``wall_time_s``, ``elapsed_s``,
   ``elapsed``, ``time_elapsed``...) that the table and ``--map`` leave unmapped is read as ``time/wall_s``, its
   values as logged (seconds; start-up and any evaluation the loop counted are included), when the log has no step
   timer and no ``time/wall_s`` of its own and the values never decrease (:func:`is_cumulative`); else it is kept as
   ``raw/<name>`` with a note saying why;
2. ms-swift's ``elapsed_time`` (:data:`rlbatch.readers.names.ELAPSED_NAMES`, text such as ``"1m 35s"``) gives
   ``time/step_s`` from its differences (``time/wall_s`` is then their running sum, in :mod:`.common`);
3. a ``time/wall_s`` without a step timer gives ``time/step_s`` as its growth per step between consecutive records
   (seconds per step; the first record's is left unknown: it includes start-up, as in rule 2).

:func:`check_step_time` looks at the column a step time was read from (by the table or by ``--map``): one that grows
at every logged record is warned about, one that is clearly a clock is refused (:class:`rlbatch.errors.UserError`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rlbatch.errors import UserError
from rlbatch.readers import names as N

#: records a step-time column must have before growing at every one of them is taken as a sign of a clock (a noisy
#: per-step time rises at each of 5 records by chance with probability 1/5! < 1 %)
MIN_RECORDS = 5
#: growth (last / first value) over the run beyond which an ever-growing "step time" is refused as a clock: a step
#: time never grows tenfold at every logged record, a clock read from near the run's start does
CLOCK_GROWTH = 10.0
#: ... when, read as seconds per step, it also sums to more than this many times its own last value (the run's
#: length if it is a clock): the implied total time is implausible
CLOCK_TOTAL = 3.0


def clock_names(cols: list[str], user_map: dict[str, str] | None = None) -> list[str]:
    """The columns named like a cumulative wall clock (:data:`rlbatch.readers.names.WALL_CLOCK`) that neither the
    name table nor ``--map`` (nor a timer's words) place, in ``cols`` order; ms-swift's ``elapsed_time`` is left to
    its own rule."""
    return [c for c in cols if N.WALL_CLOCK.match(str(c)) and str(c) not in N.ELAPSED_NAMES
            and N.canonical_for(str(c), user_map) is None]


def is_cumulative(values: np.ndarray) -> bool:
    """True when the finite values (seconds, in step order) can be a clock since the start: at least two, none
    negative, none below the one before, the last above the first."""
    x = values[np.isfinite(values)]
    return len(x) >= 2 and x.min() >= 0 and bool(np.all(np.diff(x) >= 0)) and x[-1] > x[0]


def grows_every_record(values: np.ndarray) -> bool:
    """True when the finite values are at least :data:`MIN_RECORDS`, none negative, each above the one before: the
    sign of a clock since the start in a column of seconds (a noisy step time does so by chance with probability
    below 1/5!)."""
    x = values[np.isfinite(values)].astype(float)
    return len(x) >= MIN_RECORDS and x.min() >= 0 and bool(np.all(np.diff(x) > 0))


def add_clock_times(train: pd.DataFrame, steps: np.ndarray, cols: list[str], user_map: dict[str, str] | None,
                    out: dict[str, np.ndarray], notes: list[str], name_map: dict[str, str] | None,
                    used: set[str]) -> None:
    """Rules 1-3 of the module docstring on the canonical columns ``out`` (name -> values, one per training row of
    ``train``, ``steps`` their canonical steps): adds ``time/wall_s`` and ``time/step_s`` where the log lacks them,
    marks a clock column read as ``used`` (not kept as raw), and says so in ``notes`` / ``name_map``."""
    for c in clock_names(cols, user_map):
        v = train[c].to_numpy(dtype=float)
        if "time/wall_s" in out or "time/step_s" in out:
            own = (name_map or {}).get("time/step_s") or (name_map or {}).get("time/wall_s") or "its own timer"
            notes.append(f"{c!r} (a cumulative clock) kept as raw/{c}: time/wall_s comes from {own!r}")
        elif not is_cumulative(v):
            notes.append(f"{c!r} is named like a cumulative clock but its values do not grow (or go back): kept as "
                         f"raw/{c} (--map {c}=time/step_s if it is seconds per step)")
        else:
            out["time/wall_s"] = v.copy()
            used.add(c)
            notes.append(f"time/wall_s: {c!r} (a cumulative clock: seconds since the run started, as logged; "
                         "includes start-up and any evaluation the loop counted)")
            if name_map is not None:
                name_map["time/wall_s"] = c
    elapsed = next((c for c in N.ELAPSED_NAMES if c in train.columns and train[c].notna().sum() >= 2), None)
    if "time/step_s" not in out and "time/wall_s" not in out and elapsed is not None:
        e = train[elapsed].to_numpy(dtype=float)
        out["time/step_s"] = _growth_per_step(e, steps)
        notes.append(f"time/step_s: differences of {elapsed!r} (the cumulative wall time the log prints) between "
                     "records, over the steps between them; the first record's includes start-up and is left unknown")
        if name_map is not None:
            name_map["time/step_s"] = f"differences of {elapsed}"
    if "time/step_s" not in out and "time/wall_s" in out and np.isfinite(out["time/wall_s"]).sum() >= 2:
        out["time/step_s"] = _growth_per_step(out["time/wall_s"], steps)
        src = (name_map or {}).get("time/wall_s", "time/wall_s")
        notes.append(f"time/step_s: growth of {src!r} (time/wall_s) per step between records; the first record's "
                     "includes start-up and is left unknown")
        if name_map is not None:
            name_map["time/step_s"] = f"differences of {src}"


def _growth_per_step(clock: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Seconds per step from a cumulative clock (seconds) at ``steps``: its growth since the previous record with a
    value, over the steps between them; NaN for the first record, a missing value and a growth that is not
    positive."""
    out = np.full(len(clock), np.nan)
    ok = np.flatnonzero(np.isfinite(clock))
    if len(ok) >= 2:
        dt = np.diff(clock[ok]) / np.diff(steps[ok].astype(float))
        out[ok[1:]] = np.where(dt > 0, dt, np.nan)
    return out


def check_step_time(values: np.ndarray, steps: np.ndarray, name: str, path: str | Path | None,
                    by_user: bool = False) -> None:
    """Check that ``values`` (seconds per step, column ``name`` of the log at ``path``, in step order at canonical
    ``steps``) are not a cumulative clock. Field report finding 3.

    Over at least :data:`MIN_RECORDS` records, growing at every one: a :class:`rlbatch.readers.common.ReadWarning`
    naming the file and column with ``--map NAME=time/wall_s``; when it also grows :data:`CLOCK_GROWTH`-fold and,
    read as seconds per step, sums to over :data:`CLOCK_TOTAL` times its own last value (the run's length were it a
    clock), :class:`UserError` (exit 2) naming both."""
    from rlbatch.readers.common import warn  # common imports this module

    if not grows_every_record(values):
        return
    ok = np.isfinite(values)
    x, s = values[ok].astype(float), steps[ok].astype(float)
    how = "mapped by --map" if by_user else "read"
    fix = f"--map {name}=time/wall_s"
    span = f"{x[0]:g} s at step {s[0]:g} to {x[-1]:g} s at step {s[-1]:g}"
    growth = x[-1] / x[0] if x[0] > 0 else math.inf
    total = float(np.sum(x * np.diff(np.concatenate([[0.0], s]))))  # a record stands for the steps since the last
    if growth >= CLOCK_GROWTH and total > CLOCK_TOTAL * x[-1]:
        raise UserError(f"column {name!r} {how} as time/step_s (seconds per step) is a cumulative clock: it grows at "
                        f"every one of its {len(x)} records, {span}; as seconds per step the run would have taken "
                        f"{total / 3600:.3g} h, its last value says {x[-1] / 3600:.3g} h; use {fix}",
                        path=None if path is None else str(path))
    warn(f"column {name!r} {how} as time/step_s (seconds per step) grows at every one of its {len(x)} records "
         f"({span}): if it is a cumulative clock, use {fix}", path)
