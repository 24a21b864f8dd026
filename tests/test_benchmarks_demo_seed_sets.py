"""benchmarks/demo_seed_sets.py: the demo's four findings read off a report.json (values set by hand below)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("demo_seed_sets", Path(__file__).resolve().parents[1] / "benchmarks" /
                                               "demo_seed_sets.py")
dss = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dss)


def _row(run, b, rule, rn, ci, rel=None, rel_ci=None, verdict="within noise", reached=True, test=None, grade=None):
    return {"run": run, "batch_size": b, "lr_rule": rule, "rN": rn, "rN_ci": ci, "relative_time": rel,
            "relative_time_ci": rel_ci, "verdict": verdict, "reached": reached, "samples_to_target": 2000 * (rn or 1),
            "rN_test": test, "alignment": grade, "may_be_fastest": verdict in ("reference", "faster")}


def report(control_ci=(1.8, 4.1), b32=((0.8, 1.3), "not distinguishable from 1"), k_ci=(0.3, 0.6)):
    rows = [_row("B16-G8-sqrt", 16, "sqrt", 1.0, [1.0, 1.0], 1.0, [1.0, 1.0], "reference", test=[1, 1],
                 grade="aligned"),
            _row("B32-G8-sqrt", 32, "sqrt", 1.05, [0.7, 1.4], 0.8, [0.6, 1.1], test=list(b32[0]), grade=b32[1]),
            _row("B64-G8-sqrt", 64, "sqrt", 0.9, [0.6, 1.2], 0.5, [0.35, 0.7], "faster", test=[0.7, 1.1],
                 grade="not distinguishable from 1"),
            _row("B1024-G8-sqrt", 1024, "sqrt", None, None, None, None, "slower", reached=False),
            _row("B256-G8-fixed", 256, "none", 2.9, list(control_ci), 1.3, [0.8, 1.9], test=[2.0, 3.9],
                 grade="penalised")]
    return {"reference": "B16-G8-sqrt", "accounting": rows,
            "headline": {"pick": "B64-G8-sqrt", "best_set": ["B16-G8-sqrt", "B64-G8-sqrt"]},
            "throughput": {"model": {"gen": {"exponent": 0.45, "exponent_ci": list(k_ci)}}},
            "aligned_family": {"lower": 16, "upper": 16, "undistinguished": [16, 32, 64],
                               "end": {"batch_size": 1024}},
            "rejected": [{k: rows[3][k] for k in ("run", "batch_size", "lr_rule", "verdict", "rN", "rN_ci",
                                                   "relative_time", "relative_time_ci")}]}


def test_all_four_findings():
    f = dss.findings(report())
    assert (f["overlay"], f["control"], f["sublinear"], f["rejected"]) == (True, True, True, True)
    assert f["headline"] == "B = 64: 0.50x time (0.35-0.70), faster; may be fastest: 16, 64"
    assert f["control_text"] == "B = 256: 2.90 (1.80-4.10)"
    assert f["rejected_text"] == "B = 1024: slower"


def test_each_finding_can_fail():
    assert dss.findings(report(control_ci=(0.49, 1.29)))["control"] is False  # the fresh machine's control (issue 23)
    assert dss.findings(report(b32=((1.05, 1.6), "penalised")))["overlay"] is False
    assert dss.findings(report())["overlay_text"] == ("B = 32: 1.05 (90% CI 0.80-1.30: not distinguishable from 1); "
                                                      "B = 64: 0.90 (90% CI 0.70-1.10: not distinguishable from 1)")
    two = dss.findings(report(), doublings=2)
    assert two["overlay"] is True and two["overlay_text"].startswith("B = 32")
    assert dss.findings(report(k_ci=(0.8, 1.1)))["sublinear"] is False
    rep = report()
    rep["rejected"] = []
    assert dss.findings(rep)["rejected"] is False
