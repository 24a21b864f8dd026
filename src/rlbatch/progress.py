"""Elapsed and remaining time of the long commands (``rlbatch sweep``, ``rlbatch demo``), each labelled as what it is
(researcher tryout finding 10: the sweep's bar showed the elapsed time under the word "left"), the remaining time
covering the whole command: the items of the stage under way (trials, timing blocks) at the mean time per item so
far, then what follows that stage (:class:`After`: the timing pass's blocks, the report), measured where it can be and
a stated rough guess where it cannot.

Nothing here reads the clock by itself: :class:`Eta` takes it as an argument, so tests pass a fake one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from rich.progress import ProgressColumn
from rich.text import Text

#: a timing-pass block's seconds before one is measured (rough): the tiny demo's 30 blocks took ~70 s on 2 quiet cores
#: (README), 243 s at a load of 3-5 (researcher tryout finding 10)
ROUGH_BLOCK_S = 3.0
#: the report's seconds (rough): this plus :data:`ROUGH_REPORT_S_PER_RUN` per run; 15 stored demo runs took 7 s on
#: 2 cores, the 30-run demo's report ~40 s at a load of 3-5
ROUGH_REPORT_S = 5.0
ROUGH_REPORT_S_PER_RUN = 0.5


def hms(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (rounded to the second; negative as 0)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclass(frozen=True)
class After:
    """What the command still does once the stage under way ends: ``blocks`` timing-pass blocks (``block_s``
    seconds each as measured, or None: :data:`ROUGH_BLOCK_S`, a rough guess), then, with ``report``, the report over
    ``runs`` runs (a rough guess: :func:`report_guess`). ``note``: said after the estimate (what it cannot include,
    e.g. a sequential study's further looks)."""

    blocks: int = 0
    block_s: float | None = None
    report: bool = True
    runs: int | None = None
    note: str | None = None

    def parts(self) -> list[tuple[str, float, str | None]]:
        """``(what, seconds, why rough or None)`` of each part still to come."""
        out: list[tuple[str, float, str | None]] = []
        if self.blocks > 0:
            per = self.block_s if self.block_s is not None else ROUGH_BLOCK_S
            out.append(("timing pass", self.blocks * per,
                        None if self.block_s is not None else f"{self.blocks} blocks at a rough {per:g} s"))
        if self.report:
            out.append(("report", report_guess(self.runs), "rough"))
        return out

    def seconds(self) -> float:
        """The seconds of :meth:`parts`, summed."""
        return sum(s for _, s, _ in self.parts())


def report_guess(runs: int | None) -> float:
    """A rough guess of the report's seconds over ``runs`` runs (unknown: none counted)."""
    return ROUGH_REPORT_S + ROUGH_REPORT_S_PER_RUN * max(0, int(runs or 0))


class Eta:
    """The clock of one stage of ``total`` items (``name``: ``trials``, ``timing pass``; ``unit``: what an item is
    called in the plural, default ``name``) followed by ``after`` (default: nothing).
    Started at construction; :meth:`advance` records items done. The stage's own remaining time is the mean time per
    item so far times the items left, counting down between items; ``clock`` (seconds, monotonic) is read on every
    call, never elsewhere."""

    def __init__(self, total: int, *, name: str = "trials", unit: str | None = None, after: After | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.total, self.name, self.unit, self.clock = int(total), name, unit or name, clock
        self.after = after if after is not None else After(report=False)
        self.t0 = clock()
        self.done = 0
        self.t_done = self.t0  # the clock when the last item ended

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.t_done = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def stage_left(self) -> float | None:
        """Seconds left of this stage's items; None before the first item ends (0 once all have)."""
        if self.done >= self.total:
            return 0.0
        if self.done <= 0:
            return None
        whole = (self.t_done - self.t0) / self.done * self.total  # the stage's projected length
        return max(0.0, whole - self.elapsed())

    def left(self) -> float | None:
        """Seconds left of the whole command: this stage's and :attr:`after`'s; None while this stage's is unknown."""
        stage = self.stage_left()
        return None if stage is None else stage + self.after.seconds()

    def text(self, short: bool = False) -> str:
        """``0:19:10 elapsed, ~0:02:41 left: trials 0:00:41, timing pass ~0:01:30 (30 blocks at a rough 3 s),
        report ~0:00:20 (rough)``, then :attr:`After.note`; ``short`` (the live bar): only what the parts are, no note."""
        head = f"{hms(self.elapsed())} elapsed, "
        stage = self.stage_left()
        later = self.after.parts()
        if stage is None:
            head += f"time left known once the first of {self.total} {self.unit} ends"
            if short:
                return head
            return head + (" (then " + ", ".join(what for what, _, _ in later) + ")" if later else "") + self._note()
        head += f"~{hms(stage + self.after.seconds())} left"
        if short:
            return head + (f" (incl. {' and '.join(what for what, _, _ in later)})" if later else "")
        parts = ([f"{self.name} {hms(stage)}"] if stage > 0 or not later else []) + [
            f"{what} ~{hms(s)}" + (f" ({why})" if why else "") for what, s, why in later]
        return head + (": " + ", ".join(parts) if later else "") + self._note()

    def _note(self) -> str:
        return f"; {self.after.note}" if self.after.note else ""


class EtaColumn(ProgressColumn):
    """A rich progress column showing :meth:`Eta.text` (short) of ``eta``: elapsed and left, each labelled."""

    def __init__(self, eta: Eta):
        super().__init__()
        self.eta = eta

    def render(self, task) -> Text:
        return Text(self.eta.text(short=True), style="progress.remaining")
