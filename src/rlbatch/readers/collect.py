"""Reading many paths at once: every log format, warnings collected per file, ``--set`` overrides applied (the one
loader of ``rlbatch analyze``, ``rlbatch plan`` and the sweeps)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.readers import apply_overrides, load, parse_mapping
from rlbatch.readers.common import unique_ids
from rlbatch.runstore import Run, run_order

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
    return sorted(runs, key=run_order), msgs
