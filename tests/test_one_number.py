"""One number per quantity everywhere (issue 56, item 2; researcher findings 2, 7, 8, 11): a study rendered by analyze
(table, Markdown, JSON), its report (HTML, Markdown, JSON), the plan (table, JSON) and watch (JSON) shows, for every
configuration, the same rN, relative throughput, relative time (each value and 95% interval) and verdict as analyze's
JSON, rounded as printed (values to 2 decimals, interval ends outward). Studies: the stored demo sweep (3 seeds, B =
16..128 and the fixed-LR control; tests/data/demo_sweep) and its first seed alone (a 1-seed sweep)."""

import json
import re
import shutil
from pathlib import Path

import pytest

from _cli import run_in_process
from _page_check import _Tables, numbers
from _stored_sweeps import unpack
from rlbatch.analyze import analyze, print_analysis
from rlbatch.plan import make_plan, print_plan

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"
TARGET = 0.45

#: a table header naming one of the quantities: header -> (quantity, the cell holds "value (lo–hi)")
HEADERS = {"rN (95% simult.)": ("rN", True), "rN (95% simultaneous)": ("rN", True), "rN": ("rN", False),
           "rN 95% simult.": ("rN interval", False), "rN interval": ("rN interval", False),
           "rel. throughput (95% simult.)": ("relative throughput", True),
           "rel. throughput (95% simultaneous)": ("relative throughput", True),
           "rel. throughput": ("relative throughput", False),
           "rel. thr. 95% simult.": ("relative throughput interval", False),
           "rel. time (95% simult.)": ("relative time", True),
           "rel. time-to-target (95% simultaneous)": ("relative time", True),
           "rel. time-to-target": ("relative time", False), "pred. rel. time": ("relative time", False),
           "rel. time 95% simult.": ("relative time interval", False), "interval": ("relative time interval", False),
           "verdict": ("verdict", None), "verdict vs the reference": ("verdict", None)}


@pytest.fixture(scope="module", params=["3 seeds", "1 seed"])
def study(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("one_number")
    trials = unpack(DATA / "trials.tar.gz", root)
    if request.param == "1 seed":
        for d in trials.iterdir():
            if not d.name.endswith("-s0"):
                shutil.rmtree(d)
    return trials


def expected(rows: list[dict]) -> dict[str, dict]:
    """Per configuration, analyze's JSON numbers: (value, lo, hi) per quantity and the verdict."""
    out = {}
    for r in rows:
        q = {"verdict": r["verdict"]}
        for name, v, ci in (("rN", "rN", "rN_ci"), ("relative throughput", "relative_throughput",
                                                    "relative_throughput_ci"),
                            ("relative time", "relative_time", "relative_time_ci")):
            if r.get(v) is not None:
                q[name] = (r[v], *(r.get(ci) or (None, None)))
        out[r["run"]] = q
    return out


def same(shown: tuple, value: float | None, lo: float | None = None, hi: float | None = None) -> bool:
    """Whether printed numbers are the value (to 2 decimals) and the interval rounded outward (or to 2 decimals)."""
    want = [x for x in (value, lo, hi) if x is not None]
    if len(shown) != len(want):
        return False
    ok = abs(shown[0] - value) <= 0.0051
    if lo is not None and len(shown) > 1:
        ok &= lo - 0.0101 <= shown[1] <= lo + 0.0051
    if hi is not None and len(shown) > 2:
        ok &= hi - 0.0051 <= shown[2] <= hi + 0.0101
    return bool(ok)


def check_tables(tables: list[list[list[str]]], exp: dict[str, dict], where: str) -> int:
    """Every row of ``tables`` (header row first) naming a configuration of ``exp``: its cells for the quantities
    of :data:`HEADERS` agree with ``exp``. Returns the number of cells checked."""
    n = 0
    for table in tables:
        if len(table) < 2:
            continue
        head = table[0]
        for row in table[1:]:
            name = re.sub(r"\*|\(pick\)", "", row[0]).strip()
            if name not in exp:
                continue
            for h, cell in zip(head, row):
                if h not in HEADERS or h == head[0]:
                    continue
                q, with_ci = HEADERS[h]
                if q == "verdict":
                    assert cell.replace("(pick)", "").strip() == exp[name]["verdict"], (where, name, h, cell)
                    n += 1
                    continue
                base = q.replace(" interval", "")
                if base not in exp[name]:
                    continue
                v, lo, hi = exp[name][base]
                got = numbers(cell)
                if q.endswith("interval"):
                    assert same((v, *got), v, lo, hi), (where, name, h, cell, (v, lo, hi))
                elif with_ci:
                    assert same(got, v, lo, hi), (where, name, h, cell, (v, lo, hi))
                else:
                    assert same(got[:1], v), (where, name, h, cell, v)
                n += 1
    return n


def markdown_tables(md: str) -> list[list[list[str]]]:
    tables, cur = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            if cur is None:
                cur = []
                tables.append(cur)
            cur.append(cells)
        else:
            cur = None
    return tables


def rich_tables(text: str) -> list[list[list[str]]]:
    """The rows of rich's box tables (one line per row: the test's console is wide enough)."""
    tables, cur = [], None
    for line in text.splitlines():
        if line.startswith(("┃", "│")):
            cells = [c.strip() for c in line.strip().strip("┃│").replace("┃", "│").split("│")]
            if cur is None:
                cur = []
                tables.append(cur)
            cur.append(cells)
        elif line.startswith(("┏", "┌")):
            cur = None
    return tables


def test_one_number_per_quantity_on_every_page(study, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "400")
    result = analyze([study], target=TARGET, out=tmp_path / "report")
    print_analysis(result, "json")
    rows = json.loads(capsys.readouterr().out)["accounting"]
    exp = expected(rows)
    assert len(exp) == 5 and sum("rN" in q for q in exp.values()) >= 1
    checked = {}
    print_analysis(result, "table")
    checked["analyze table"] = check_tables(rich_tables(capsys.readouterr().out), exp, "analyze table")
    print_analysis(result, "markdown")
    checked["analyze markdown"] = check_tables(markdown_tables(capsys.readouterr().out), exp, "analyze markdown")
    report = tmp_path / "report"
    p = _Tables()
    p.feed((report / "report.html").read_text())
    checked["report html"] = check_tables(p.tables, exp, "report.html")
    checked["report md"] = check_tables(markdown_tables((report / "report.md").read_text()), exp, "report.md")
    rep = json.loads((report / "report.json").read_text())
    acc = {r["run"]: r for r in rep["accounting"]}
    for r in rows:  # the report's JSON holds analyze's numbers, as they are
        for k in ("rN", "rN_ci", "relative_throughput", "relative_throughput_ci", "relative_time",
                  "relative_time_ci", "verdict"):
            assert acc[r["run"]][k] == r[k], (r["run"], k)
    # the headline's sentences: each configuration's verdict and rN as the tables
    for line in result["headline"]["bullets"]:
        name = line.split(" ")[0]
        if name in exp and "rN" in exp[name]:
            v, lo, hi = exp[name]["rN"]
            m = re.search(r"rN=(\d+\.\d+) \(95% CI (\d+\.\d+)–(\d+\.\d+)\)", line)
            assert m and same(tuple(map(float, m.groups())), v, lo, hi), line
            assert f" is {exp[name]['verdict']}" in line or exp[name]["verdict"] in line, line

    plan = make_plan([study], target=TARGET)
    print_plan(plan, "json")
    cands = {c["run"]: c for c in json.loads(capsys.readouterr().out)["candidates"] if c["run"]}
    for name, q in exp.items():
        c = cands[name]
        assert c["verdict"] == q["verdict"], (name, c["verdict"], q["verdict"])
        row = next(r for r in rows if r["run"] == name)
        if row.get("alignment") and row.get("lr_rule") != "none":  # one grade of rN (researcher finding 7)
            assert c["alignment"] == row["alignment"], (name, c["alignment"], row["alignment"])
        for key, v, ci in (("rN", "rN", "rN_ci"), ("relative throughput", "relative_throughput",
                                                   "relative_throughput_ci"),
                           ("relative time", "predicted_relative_time", "interval")):
            if key in q:
                assert (c[v], *(c[ci] or (None, None))) == pytest.approx(q[key]), (name, key)
    print_plan(plan, "table")
    checked["plan table"] = check_tables(rich_tables(capsys.readouterr().out), exp, "plan table")

    code, out, err = run_in_process(monkeypatch, capsys, "watch", study, "--target", TARGET, "--once",
                                    "--format", "json")
    assert code == 0, err
    up = json.loads(out.splitlines()[-1])
    for r in up["ranking"]:
        q = exp.get(r["config"])
        if q and "relative time" in q:
            assert (r["predicted_relative_time"], *r["interval"]) == pytest.approx(q["relative time"]), r
            assert r["rN"] == pytest.approx(q["rN"][0]) and r["relative_throughput"] == pytest.approx(
                q["relative throughput"][0]), r
        if q and r.get("why", "").startswith("finished: "):
            assert re.sub(r" \((the pick|may be the fastest too)\)$", "", r["why"]) == f"finished: {q['verdict']}", r
    thr = {r["run"]: r["throughput_samples_per_s"] for r in rows if r.get("reached")}
    for v in up["configs"]:  # a configuration at the target: the accounting's throughput (not the whole run's)
        if v["config"] in thr:
            assert v["throughput_samples_per_s"] == pytest.approx(thr[v["config"]]), v["config"]
    assert all(n > 0 for n in checked.values()), checked


#: sentences that define a term -> the one definition they must be part of (rlbatch.analysis.terms)
def _triggers():
    from rlbatch.analysis import terms
    return [(re.compile(r"rN = samples"), terms.RN), (re.compile(r"relative time = ", re.I), terms.RELATIVE_TIME),
            (re.compile(r"faster iff"), terms.RELATIVE_TIME),
            (re.compile(r"\"faster\" or \"slower\" only when"), terms.VERDICTS),
            (re.compile(r"E/E_min = "), terms.RN_FROM_NOISE)]


def definitions_found(text: str, page: str) -> int:
    """Every place ``text`` defines a term lies inside that term's one definition; returns how many it holds."""
    import html as _html
    text = re.sub(r"\s+", " ", _html.unescape(re.sub(r"<[^>]+>", " ", text)))
    found = 0
    for pat, canon in _triggers():
        spans = [(m.start(), m.start() + len(canon)) for m in re.finditer(re.escape(canon), text)]
        for m in pat.finditer(text):
            assert any(a <= m.start() < b for a, b in spans), (page, text[max(0, m.start() - 80): m.start() + 160])
            found += 1
    return found


def test_one_definition_per_term_on_every_page(study, tmp_path, monkeypatch, capsys):
    """Issue 56, item 2: the report (Markdown and HTML, with its figure captions) and the plan (table and Markdown)
    define rN, the relative time, the verdicts and rN from the noise scale in the same words (a page that rewords one
    fails here); each page defines at least one."""
    monkeypatch.setenv("COLUMNS", "400")
    analyze([study], target=TARGET, out=tmp_path / "report")
    report = tmp_path / "report"
    counts = {"report.md": definitions_found((report / "report.md").read_text(), "report.md"),
              "report.html": definitions_found((report / "report.html").read_text(), "report.html")}
    plan = make_plan([study], target=TARGET)
    for fmt in ("table", "markdown"):
        print_plan(plan, fmt)
        counts[f"plan {fmt}"] = definitions_found(capsys.readouterr().out, f"plan {fmt}")
    assert all(n >= 1 for n in counts.values()) and counts["report.md"] >= 4, counts
