"""Process helpers shared by the trainer's generation process and the sweep's workers: tie a child's life to its
parent's, and the torch-thread default when two processes share the machine's cores."""

from __future__ import annotations

import ctypes
import os
import signal


def die_with_parent(parent_pid: int) -> None:
    """Linux: have the kernel SIGKILL this process when its parent dies (even by ``kill -9``: ``prctl
    PR_SET_PDEATHSIG``), so no orphan keeps writing a run that a re-run resumes. Exits at once (status 1) if the
    parent ``parent_pid`` is already gone. Elsewhere only the second check applies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:
        os._exit(1)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity on Linux, else ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def threads_beside(other_threads: int) -> int:
    """Torch threads for a process that shares the machine with another using ``other_threads``: the usable cores
    less those (at least 1), so the two do not oversubscribe it."""
    return max(1, usable_cores() - int(other_threads or 1))
