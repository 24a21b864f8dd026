"""Fault injection for the fault tests (``tests/test_faults.py``, ``benchmarks/fault_soak.py``); off by default.

Set ``RLBATCH_FAULT=point:step[:nth][@run]`` (several comma-separated) to make the trainer fail at a named point of
optimizer step ``step`` (0 = before the first step, e.g. the initial evaluation), on the ``nth`` hit of that point
within the step (default 1), in any run or only in the run with id ``run`` (e.g. one trial of a sweep). Kill points
end the process with ``SIGKILL`` (as ``kill -9`` would):

- ``gen``         during generation, before decoding token ``nth`` (training rollouts and evaluations);
- ``update``      during the update, after the backward pass of micro-batch ``nth``;
- ``optim``       after the optimizer step, before the step's metrics line;
- ``metrics``     while appending a ``metrics.jsonl`` line (half of the line is on disk);
- ``eval``        while appending an ``eval.jsonl`` line (half of the line is on disk);
- ``ckpt_write``  while writing a checkpoint (part of the temp file is on disk);
- ``ckpt_done``   just after a checkpoint was renamed into place.

Error points: ``nan_loss`` (the loss of micro-batch ``nth`` becomes NaN), ``inf_grad`` (one gradient entry becomes
+Inf), ``enospc_metrics`` / ``enospc_eval`` / ``enospc_checkpoint`` (the write fails half-way with
``OSError(ENOSPC)``, as on a full disk).

Cost when unset: one environment lookup per call.
"""

from __future__ import annotations

import errno
import os
import signal

ENV = "RLBATCH_FAULT"
_step = 0
_run: str | None = None
_hits: dict[str, int] = {}
_parsed: tuple[str | None, list[tuple[str, int, int, str | None]]] = (None, [])


def _specs() -> list[tuple[str, int, int, str | None]]:
    global _parsed
    raw = os.environ.get(ENV)
    if not raw:
        return []
    if _parsed[0] != raw:
        specs = []
        for part in raw.split(","):
            where, _, run = part.strip().partition("@")
            bits = where.split(":")
            if len(bits) not in (2, 3):
                raise ValueError(f"{ENV}={raw!r}: expected point:step[:nth][@run], got {part!r}")
            specs.append((bits[0], int(bits[1]), int(bits[2]) if len(bits) == 3 else 1, run or None))
        _parsed = (raw, specs)
    return _parsed[1]


def set_step(step: int, run: str | None = None) -> None:
    """Called by the trainer at the start of each step (and with 0 before the first) of run ``run``: resets the
    hit counters."""
    global _step, _run
    _step, _run = step, run
    _hits.clear()


def armed(point: str) -> bool:
    """Count a hit of ``point`` in the current step; True if a configured fault fires on this hit."""
    specs = _specs()
    if not specs:
        return False
    n = _hits[point] = _hits.get(point, 0) + 1
    return any(p == point and s == _step and k == n and r in (None, _run) for p, s, k, r in specs)


def kill() -> None:
    """End this process at once with SIGKILL (no cleanup, no ``finally``), as ``kill -9`` does."""
    os.kill(os.getpid(), signal.SIGKILL)


def fault(point: str) -> None:
    """A kill point: SIGKILL this process if ``point`` is armed for this hit."""
    if armed(point):
        kill()


def enospc(path: str | os.PathLike | None = None) -> OSError:
    """The error a full disk raises."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), None if path is None else str(path))
