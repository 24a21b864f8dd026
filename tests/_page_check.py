"""The page checker of the report tests (issue 26): every quantity a table of the report shows, per configuration,
and the quantities shown with two different values. Used on the report's HTML (tests/test_report_page.py) and on
the DOM Chromium renders (tests/test_report.py)."""

import re
from html.parser import HTMLParser


class _Tables(HTMLParser):
    """Every <table> of a page as (header cells, rows of cells), text only."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self._row = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join(self._cell.replace("\u2060", "").split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].append(self._row)
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


#: Table headers naming one quantity of a configuration: header -> (quantity, the cell holds "value (lo–hi)").
QUANTITY = {"B": ("B", False), "samples-to-target": ("samples-to-target", False),
            "time-to-target": ("time-to-target", False),
            "rN (95% CI)": ("rN", True), "rN": ("rN", False), "rN interval": ("rN interval", False),
            "rN (95% simultaneous)": ("rN", True),
            "rel. throughput (95% CI)": ("relative throughput", True), "rel. throughput": ("relative throughput", False),
            "rel. throughput (95% simultaneous)": ("relative throughput", True),
            "rel. time-to-target (95% CI)": ("relative time", True), "pred. rel. time": ("relative time", False),
            "rel. time-to-target (95% simultaneous)": ("relative time", True),
            "throughput, whole run (95% CI)": ("whole-run throughput", True),
            "time (CPU seconds)": ("whole-run time", False), "time (seconds)": ("whole-run time", False),
            "step": ("seconds per step", False), "steps": ("steps", False)}


def numbers(cell: str) -> tuple[float, ...]:
    """The numbers of a cell: ``1.05 (0.73–1.34)`` -> (1.05, 0.73, 1.34); ``10,155`` -> (10155,); ``∞`` -> inf."""
    out = []
    for t in re.findall(r"∞|(?<![\d.])-?\d[\d,]*\.?\d*(?:e[+-]?\d+)?", cell):  # "0.73-1.34": a range
        out.append(float("inf") if t == "∞" else float(t.replace(",", "")))
    return tuple(out)


def page_values(html: str) -> dict[tuple[str, str], list[tuple[str, tuple]]]:
    """``(configuration, quantity) -> [(where, numbers)]`` for every cell of the page's tables whose header names a
    quantity (:data:`QUANTITY`); a cell "value (lo–hi)" gives the value and, as "<quantity> interval", the
    interval. Rows are keyed by their first cell (the configuration; "(pick)" and emphasis dropped); rows of
    candidates without runs ("—") are skipped."""
    p = _Tables()
    p.feed(html)
    found: dict[tuple[str, str], list[tuple[str, tuple]]] = {}
    for ti, table in enumerate(p.tables):
        if len(table) < 2:
            continue
        head = table[0]
        for row in table[1:]:
            name = row[0].replace("(pick)", "").strip()
            if name in ("—", ""):
                continue
            for h, cell in zip(head, row):
                if h not in QUANTITY or h == head[0]:
                    continue
                q, with_ci = QUANTITY[h]
                v = numbers(cell)
                if not v:
                    continue
                if with_ci and len(v) == 3:
                    found.setdefault((name, q), []).append((f"table {ti + 1} '{h}'", v[:1]))
                    found.setdefault((name, f"{q} interval"), []).append((f"table {ti + 1} '{h}'", v[1:]))
                else:
                    key = q if q != "rN interval" else "rN interval"
                    found.setdefault((name, key), []).append((f"table {ti + 1} '{h}'", v))
    return found


def conflicts(found: dict[tuple[str, str], list[tuple[str, tuple]]]) -> list[str]:
    """The quantities shown with two different values (rounded as printed: equal to the shown digits)."""
    out = []
    for (name, q), vals in found.items():
        if len({v for _, v in vals}) > 1:
            out.append(f"{name} / {q}: " + "; ".join(f"{w}: {v}" for w, v in vals))
    return out
