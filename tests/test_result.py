"""The study result (issue 54): the report renders the StudyResult it is given (the study and its plan) and
computes no plan of its own."""

import dataclasses
import warnings
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    from _stored_sweeps import unpack
    from rlbatch.readers.collect import load_all

    trials = unpack(Path(__file__).resolve().parent / "data" / "demo_sweep" / "trials.tar.gz",
                    tmp_path_factory.mktemp("sweep"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([trials])
    return runs


def test_the_report_renders_the_plan_it_is_given(stored, tmp_path, monkeypatch):
    """A StudyResult whose plan is marked: the report's plan JSON is that object's (the report calls no planner:
    plan_runs is made to fail while the report is written)."""
    import rlbatch.plan
    import rlbatch.result
    from rlbatch.report import build_report
    from rlbatch.result import StudyResult

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = StudyResult.of(stored, 0.45)
        assert res.plan is not None and res.plan_error is None and res.study.target == 0.45
        marked = dataclasses.replace(res, plan={**res.plan, "marker": "from the result"})

        def no_planning(*a, **k):
            raise AssertionError("the report planned")

        monkeypatch.setattr(rlbatch.plan, "plan_runs", no_planning)
        monkeypatch.setattr(rlbatch.result, "plan_runs", no_planning)
        rep = build_report(stored, tmp_path, study_result=marked)
    assert rep["plan"]["marker"] == "from the result"
    assert rep["plan"]["recommended"] == res.plan["recommended"]
    assert rep["target"] == 0.45 and rep["headline"]["pick"] == res.study.accounting["headline"]["pick"]


def test_a_study_without_a_plan_says_why(stored, tmp_path):
    """No target: no plan and no reason needed; a plan that cannot be made: its error is the section's text."""
    from rlbatch.report import build_report
    from rlbatch.result import StudyResult
    from rlbatch.analysis.study import Study

    assert StudyResult.of(stored, None).plan is None
    study = Study.of(stored, 0.45)
    res = StudyResult(study, None, "the reason")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = build_report(stored, tmp_path, study_result=res)
    assert rep["plan"] is None
    assert "No plan: the reason" in (tmp_path / "report.md").read_text()
