"""TensorBoard event directories (verl's ``tensorboard`` logger, OpenRLHF's ``--use_tensorboard``, TRL's
``report_to=tensorboard``), read with the tensorboard package's own reader (``EventAccumulator``).

Each directory holding ``events.out.tfevents.*`` files is one run. Scalars stored either as ``simple_value``
(PyTorch's ``SummaryWriter``) or as scalar tensors (TF2 summaries) are read. Tag names go through
:mod:`rlbatch.readers.names` (OpenRLHF's ``train/reward``, ``train/actor_lr``, ``eval/<dataset>_pass1``; TRL's
``train/reward``, ``train/grad_norm``; verl's own names). When the log has no per-step timer, wall-clock comes from
the events' timestamps (which include evaluation; noted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlbatch.errors import UserError
from rlbatch.readers.common import build_run, finalize, meta_from
from rlbatch.runstore import Run

EVENT_GLOB = "events.out.tfevents*"


def event_dirs(root: Path) -> list[Path]:
    """Directories at or below ``root`` that hold event files, sorted."""
    root = Path(root)
    if root.is_file():
        return [root.parent]
    return sorted({p.parent for p in root.rglob(EVENT_GLOB) if p.is_file()})


def _scalars(directory: Path) -> dict[str, list[tuple[float, int, float]]]:
    # imported here, not at the top: tensorboard's reader takes about a second to import and only event files need it
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(directory), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    try:
        acc.Reload()
    except Exception as err:  # the reader raises assorted errors for corrupt files
        raise UserError(f"cannot read TensorBoard events ({type(err).__name__}: {err})", path=str(directory)) from None
    tags = acc.Tags()
    out: dict[str, list[tuple[float, int, float]]] = {}
    for tag in tags.get("scalars", []):
        out[tag] = [(e.wall_time, e.step, e.value) for e in acc.Scalars(tag)]
    if tags.get("tensors"):
        from tensorboard.util import tensor_util  # as above: only for event files with tensor summaries

        for tag in tags["tensors"]:
            if tag in out:
                continue
            vals = []
            for e in acc.Tensors(tag):
                arr = tensor_util.make_ndarray(e.tensor_proto)
                if arr.size == 1 and np.issubdtype(arr.dtype, np.number):
                    vals.append((e.wall_time, e.step, float(arr.reshape(()))))
            if vals:
                out[tag] = vals
    return out


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None,
         meta: dict[str, Any] | None = None) -> Run:
    """Read one event directory (or the directory of one event file) into a :class:`Run`.

    Raises :class:`UserError` naming the directory when it holds no scalars.
    """
    directory = Path(path)
    if directory.is_file():
        directory = directory.parent
    series = _scalars(directory)
    if not series:
        raise UserError("no scalar summaries in the TensorBoard events", path=str(directory))
    by_step: dict[int, dict[str, Any]] = {}
    first_wall: dict[int, float] = {}
    for tag, events in series.items():
        for wall, step, value in events:
            rec = by_step.setdefault(int(step), {"step": int(step)})
            rec[tag] = value
            first_wall[int(step)] = max(first_wall.get(int(step), wall), wall)
    steps = sorted(by_step)
    rows = [by_step[s] for s in steps]
    fields = meta_from(run_id or directory.name, **(meta or {}))
    run = build_run(rows, path=directory, source_format="tensorboard", meta_fields=fields, user_map=user_map)
    m = run.metrics
    if "time/wall_s" not in m.columns and len(steps) > 1:
        t0 = min(first_wall.values())
        # the logger's step -> canonical step: same order, so align by position of training rows
        walls = {s: first_wall[s] - t0 for s in steps}
        renumbered = any(n.startswith("the log counts steps from 0") for n in run.notes)
        logged = m["step"].to_numpy() - (1 if renumbered else 0)
        m["time/wall_s"] = [walls.get(int(s), np.nan) for s in logged]
        run.notes.append("time/wall_s from event timestamps (includes evaluation and start-up)")
        finalize(run)
    return run
