"""The house: no source file outgrows 700 lines (the readers' own rule, tests/test_readers_house.py, for all of src/)."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rlbatch"


def test_no_source_file_is_over_700_lines():
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n > 700} == {}


#: the modules that estimate, fit, decide or plan (issue 54: the report renders what they computed)
ESTIMATORS = {"rlbatch.analysis.accounting", "rlbatch.analysis.estimate", "rlbatch.analysis.noise",
              "rlbatch.analysis.noise_model", "rlbatch.analysis.throughput", "rlbatch.analysis.fit",
              "rlbatch.analysis.shape", "rlbatch.analysis.sequential", "rlbatch.analysis.would_decide",
              "rlbatch.analysis.crossing", "rlbatch.analysis.asynchrony", "rlbatch.analysis.noise_summary",
              "rlbatch.analysis.throughput_summary", "rlbatch.analysis.goodput", "rlbatch.analysis.decision",
              "rlbatch.analysis.summaries", "rlbatch.plan",
              "rlbatch.plan_finish"}
#: what report/ still calls in them (issue 54): empty since the plan moved into rlbatch.result.StudyResult; it may not grow
DEBT: set[tuple[str, str, str]] = set()


def report_calls_into_estimators() -> set[tuple[str, str, str]]:
    """(file under src/rlbatch, module, name) for every non-constant name report/ imports from an estimator."""
    import ast
    out = set()
    for p in (SRC / "report").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in ESTIMATORS:
                out |= {(p.relative_to(SRC).as_posix(), node.module, a.name) for a in node.names
                        if not a.name.isupper()}  # constants (N_BOOT, TOLERANCE) are definitions, not computation
            elif isinstance(node, ast.Import):
                out |= {(p.relative_to(SRC).as_posix(), a.name, "*") for a in node.names if a.name in ESTIMATORS}
    return out


def test_the_report_calls_no_new_estimator():
    """Issue 54, item 3, as a ratchet: the report package imports nothing from the estimators beyond the calls it
    still makes today (DEBT, each to be moved into the study result); a new one fails here, and a moved one must be
    struck from DEBT (so the list says what is left)."""
    found = report_calls_into_estimators()
    assert found - DEBT == set(), f"new estimator calls in report/: {sorted(found - DEBT)}"
    assert DEBT - found == set(), f"no longer called (strike from DEBT): {sorted(DEBT - found)}"
