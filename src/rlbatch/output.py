"""Render rows (list of dicts) as a rich table, Markdown or JSON: the three ``--format`` choices of every command."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rlbatch.analysis.interval import format_interval

FORMATS = ("table", "json", "markdown")


def fmt_value(v: Any, spec: str | None = None, none: str = "—") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    if isinstance(v, bool):
        return "yes" if v else "no"
    if spec and isinstance(v, (int, float)):
        return format(v, spec)
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


Column = tuple[str, str, "str | Callable[[Any], str] | None"]  # (key, header, format spec or function)


def fmt_rate(v: Any, ci: Any = None) -> str:
    """A rate (retained samples per second) for a table, with its 95% interval when given: ``746 (721–774)``,
    ``1,070 (1,010–1,230)``, ``2.35 (2.1–2.6)``; ``—`` when unknown. The one format of throughput on the page."""
    def one(x: float) -> str:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"

    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "—"
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(c, (int, float)) and math.isfinite(c)
                                                              for c in ci):
        return f"{one(v)} ({format_interval(ci, one)})"
    return one(v)


def _cell(row: dict, col: Column, none: str) -> str:
    key, _, spec = col
    v = row.get(key)
    if callable(spec):
        return spec(v)
    return fmt_value(v, spec, none)


def markdown_table(rows: Sequence[dict], columns: Sequence[Column], none: str = "—") -> str:
    head = "| " + " | ".join(c[1] for c in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_cell(r, c, none) for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def rich_table(rows: Sequence[dict], columns: Sequence[Column], title: str | None = None,
               none: str = "—") -> "FittedTable":
    """A rich table that never cuts or splits a value: on a console wide enough for it, a table; narrower (an
    80-column terminal and the accounting's eight columns), each row printed as a block of ``header: value`` lines
    instead, so no name or interval breaks mid-word."""
    cells = [[_cell(r, c, none) for c in columns] for r in rows]
    return FittedTable([h for _, h, _ in columns], cells, title)


class FittedTable:
    """The renderable of :func:`rich_table`: a :class:`rich.table.Table` when it fits the console, else one block of
    ``header: value`` lines per row."""

    def __init__(self, headers: list[str], cells: list[list[str]], title: str | None):
        self.headers, self.cells, self.title = headers, cells, title

    def _longest(self) -> list[int]:
        return [max([len(w) for w in h.split()] + [len(w) for row in self.cells for w in row[i].split()] + [1])
                for i, h in enumerate(self.headers)]

    def table(self) -> Table:
        t = Table(title=self.title)
        for h, n in zip(self.headers, self._longest()):
            t.add_column(h, overflow="fold", min_width=n)
        for row in self.cells:
            t.add_row(*row)
        return t

    def __rich_console__(self, console, options):
        table = self.table()
        # rich's own measure of the table's natural width: a table that must wrap is shown as blocks instead (rich
        # shrinks columns below their longest word, and crops a last column, rather than wrap between words)
        if Measurement.get(console, options.update(max_width=10**6), table).maximum <= options.max_width:
            yield table
            return
        if self.title:
            yield Text(self.title, style="italic")
        width = max(len(h) for h in self.headers)
        for row in self.cells:
            grid = Table.grid(padding=(0, 1))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column(overflow="fold")
            for h, v in zip(self.headers, row):
                grid.add_row(f"{h}:".ljust(width + 1), v)
            yield grid
            yield Text("")


def to_json(obj: Any) -> str:
    def default(o: Any) -> Any:
        if hasattr(o, "item"):
            return o.item()
        return str(o)

    def clean(o: Any) -> Any:
        if isinstance(o, float) and not math.isfinite(o):
            return None
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if hasattr(o, "item") and not isinstance(o, (str, bytes)):
            return clean(o.item())
        return o

    return json.dumps(clean(obj), indent=2, default=default)


def print_json(obj: Any) -> None:
    print(to_json(obj))


#: Width of the console when stdout is not a terminal (a file or a pipe): wide enough for every table of the CLI,
#: so ``rlbatch demo > log`` keeps whole cells instead of wrapping them to rich's default of 80 columns.
PIPE_WIDTH = 200


def console() -> Console:
    """The stdout console: the terminal's width on a terminal; :data:`PIPE_WIDTH` columns (or ``$COLUMNS``) and no
    soft wrapping of text when stdout is a file or a pipe."""
    if sys.stdout.isatty():
        return Console()
    width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else PIPE_WIDTH
    return Console(width=width, soft_wrap=True)


def markdown_text(md: str):
    """Inline Markdown of a paragraph (``**bold**``, `` `code` ``) as a :class:`rich.text.Text`: bold shown as bold
    on a terminal and as plain text in a file, never as literal asterisks; no rich markup is interpreted (the text
    holds brackets such as ``[1.02, 1.26]``)."""
    out = Text()
    for i, part in enumerate(re.split(r"\*\*(.+?)\*\*", md or "")):
        part = re.sub(r"`([^`]*)`", r"\1", part)
        out.append(part, style="bold" if i % 2 else None)
    return out


class Stages:
    """Progress of a command in stages, on stderr, shown only once it has taken ``delay`` seconds (a quick command
    prints nothing; a long one says within ``delay`` seconds what it is doing, then every later stage with the
    seconds so far, and the stage under way again every ``every`` seconds, so a long stage is never silent:
    researcher tryout, finding 10): ``with Stages("analyze") as st: st("reading 3 paths"); ...``. Works piped too
    (plain lines)."""

    def __init__(self, name: str, delay: float = 2.0, stream: Any = None, every: float = 10.0):
        import threading
        import time

        self.name, self.delay, self.every, self.stream = name, delay, every, stream or sys.stderr
        self._time = time.monotonic
        self._t0 = self._time()
        self._label = "starting"
        self._shown = False
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _print(self, still: bool = False) -> None:
        print(f"{self.name}: {'still ' if still else ''}{self._label} ({self._time() - self._t0:.0f} s)",
              file=self.stream, flush=True)

    def _watch(self) -> None:
        wait = self.delay
        while not self._done.wait(wait):
            with self._lock:
                self._print(still=self._shown)
                self._shown = True
            wait = self.every

    def __call__(self, label: str) -> None:
        with self._lock:
            self._label = label
            if self._shown:
                self._print()

    def __enter__(self) -> "Stages":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1)  # a line being printed ends before the command's own output
