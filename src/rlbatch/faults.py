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

The trainer installs the step counter and the ``gen``, ``nan_loss``, ``inf_grad``, ``update`` and ``optim`` points
at set-up (:func:`counting_steps`, :func:`before` around the samplers of the decode loop, :func:`around_backward`
around each micro-batch's backward pass, :func:`then` around the update): when ``RLBATCH_FAULT`` is unset they
return the wrapped function itself, so the training, update and decode loops pay nothing. The write points
(checkpoint, metrics and eval lines) are checked where the writes happen; there, when unset, one environment lookup
per write.
"""

from __future__ import annotations

import errno
import os
import signal
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

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


def configured() -> bool:
    """True when ``RLBATCH_FAULT`` names at least one fault."""
    return bool(os.environ.get(ENV))


def counting_steps(get: F, run: str | None) -> F:
    """``get(step, ...)`` that first starts the hit counters of optimizer step ``step`` of run ``run``
    (:func:`set_step`); ``get`` itself when no fault is configured."""
    if not configured():
        return get

    def counted(step: int, *args, **kwargs):
        set_step(step, run)
        return get(step, *args, **kwargs)

    return counted  # type: ignore[return-value]


def before(point: str, fn: F) -> F:
    """The kill point ``point`` (:func:`fault`), then ``fn``; ``fn`` itself when no fault is configured."""
    if not configured():
        return fn

    def wrapped(*args, **kwargs):
        fault(point)
        return fn(*args, **kwargs)

    return wrapped  # type: ignore[return-value]


def around_backward(backward: F) -> F:
    """``backward(loss, params) -> loss`` (a micro-batch's backward pass) with the update's fault points:
    ``nan_loss`` (the loss becomes NaN before it; the NaN loss is returned), ``inf_grad`` (the first parameter
    gradient's first entry becomes +Inf after it) and the kill point ``update`` (after it); ``backward`` itself when
    no fault is configured."""
    if not configured():
        return backward

    def faulty(loss, params):
        if armed("nan_loss"):
            loss = loss * float("nan")
        loss = backward(loss, params)
        if armed("inf_grad"):
            next(p for p in params if p.grad is not None).grad.view(-1)[0] = float("inf")
        fault("update")
        return loss

    return faulty  # type: ignore[return-value]


def then(point: str, fn: F) -> F:
    """``fn`` followed by the kill point ``point`` (:func:`fault`); ``fn`` itself when no fault is configured."""
    if not configured():
        return fn

    def wrapped(*args, **kwargs):
        out = fn(*args, **kwargs)
        fault(point)
        return out

    return wrapped  # type: ignore[return-value]
