"""rlbatch.analysis.study: one analysis pass. The report bootstraps each configuration once and runs the
accounting once, and its plan section, asynchronous section and G x P rN read those same estimates."""

import sys
import tarfile
from pathlib import Path

import pytest

import rlbatch.analysis.accounting as accounting
from rlbatch.analysis.study import Study
from rlbatch.readers.collect import load_all
from rlbatch.report import build_report

DEMO = Path(__file__).resolve().parent / "data" / "demo_sweep_cpu" / "trials.tar.gz"


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo_cpu")
    with tarfile.open(DEMO) as tf:
        tf.extractall(root, filter="data")
    runs, _ = load_all([root / "trials"])
    return runs


def count_calls(monkeypatch, name):
    """Replace ``rlbatch.analysis.accounting.<name>`` in every rlbatch module that holds it; return the list of
    the targets it was called with."""
    orig = getattr(accounting, name)
    seen = []

    def counted(*args, **kwargs):
        seen.append(args[1] if len(args) > 1 else kwargs.get("target"))
        return orig(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("rlbatch") and getattr(mod, name, None) is orig:
            monkeypatch.setattr(mod, name, counted)
    return seen


def test_report_runs_the_accounting_once_and_bootstraps_each_configuration_once(demo_runs, tmp_path, monkeypatch):
    accounted = count_calls(monkeypatch, "account_runs")
    estimated = count_calls(monkeypatch, "estimate_configuration")
    res = build_report(demo_runs, tmp_path, target=0.45)
    n_configs = len(Study.of(demo_runs, 0.45).groups)
    assert n_configs == 5  # B = 16, 32, 64, 128 on the square-root rule and the fixed-LR control at B = 128
    assert len(accounted) == 1
    assert sum(t is not None for t in estimated) == n_configs  # at the target: once per configuration
    # the plan section reads the same accounting: its measured candidates carry the accounting's numbers
    rows = {r["run"]: r for r in res["accounting"]}
    for c in res["plan"]["candidates"]:
        if c["run"] in rows and c["rN_source"] == "measured":
            assert c["rN"] == rows[c["run"]]["rN"] and c["rN_ci"] == rows[c["run"]]["rN_ci"]


def test_study_estimate_is_the_accounting_estimate_computed_once(demo_runs, monkeypatch):
    study = Study.of(demo_runs, 0.45)
    name, rs = next(iter(study.groups.items()))
    fresh = accounting.estimate_configuration(rs, 0.45, clock=study.basis, name=name)
    estimated = count_calls(monkeypatch, "estimate_configuration")
    a = study.configuration_estimate(rs)
    b = study.configuration_estimate(rs)
    assert a is b and len(estimated) == 1
    assert a["samples_to_target"] == fresh["samples_to_target"] and a["samples_to_target_ci"] == fresh[
        "samples_to_target_ci"]
    assert study.accounting is study.accounting
    assert len(estimated) == len(study.groups)  # the accounting reused the one already made
