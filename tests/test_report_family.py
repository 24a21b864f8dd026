"""The aligned family, graded by an equivalence test of rN, and the rejected configurations
(rlbatch.analysis.decision.aligned_family, rendered by rlbatch.report.family), from accounting rows and through
build_report into report.json."""

import numpy as np
import pandas as pd
import pytest

from rlbatch.report import build_report
from rlbatch.analysis.decision import TOLERANCE, aligned_family as family_of
from rlbatch.report.family import aligned_family, family_markdown, rejected
from rlbatch.runstore import Run, RunMeta


def _family(rows, reference, tolerance=TOLERANCE):
    """The study's family (the decision's) with the report's words, as build_report renders it."""
    return aligned_family(family_of(rows, reference, tolerance), tolerance)


def row(run, b, rn, test, grade, rule="sqrt", verdict="within noise", reached=True, **kw):
    return {"run": run, "batch_size": b, "lr_rule": rule, "rN": rn, "rN_ci": kw.get("ci"), "rN_test": test,
            "alignment": grade, "reached": reached, "verdict": verdict, "relative_throughput": kw.get("g"),
            "relative_throughput_ci": None, "relative_time": kw.get("t"), "relative_time_ci": kw.get("t_ci"),
            "n_seeds": 3, "n_reached": 3}


ROWS = [row("B16", 16, 1.0, [1.0, 1.0], "aligned", verdict="reference"),
        row("B32", 32, 1.02, [0.95, 1.08], "aligned"),
        row("B64", 64, 1.05, [0.93, 1.09], "aligned"),
        row("B128", 128, 1.37, [1.2, 1.55], "penalised", verdict="faster", g=1.7, t=0.81, t_ci=[0.7, 0.95]),
        row("B256", 256, 2.9, [2.4, 3.5], "penalised", verdict="slower", g=1.9, t=1.53, t_ci=[1.25, 1.85],
            ci=[2.2, 3.8]),
        row("B128-fixed", 128, 1.8, [1.5, 2.2], "penalised", rule="none", verdict="slower", g=1.7, t=1.06,
            t_ci=[1.01, 1.3])]


def test_family_is_what_the_equivalence_test_shows_and_ends_where_rn_is_above_1():
    fam = _family(ROWS, "B16", tolerance=0.1)
    assert fam["batches"] == [16, 32, 64] and (fam["lower"], fam["upper"]) == (16, 64)
    assert fam["undistinguished"] == [16, 32, 64]
    assert fam["end"]["batch_size"] == 128 and fam["end"]["rN_test"] == [1.2, 1.55] and fam["end"]["reached"]
    assert fam["largest_measured"] == 256 and fam["rule"] == "sqrt"  # the fixed-LR control is not on the ladder
    st = fam["statement"]
    assert "rN is shown within 10% of the reference's" in st and "B = 32 (90% CI 0.95–1.08, unadjusted" in st
    assert "the aligned family is B = 16 to 64" in st
    assert "The first batch size whose rN is above 1 beyond noise is B = 128" in st
    assert "between B = 64 and B = 128" in st


def test_a_wide_interval_is_not_distinguishable_not_aligned():
    rows = [dict(r) for r in ROWS[:4]]
    rows[2].update(rN=1.08, rN_test=[0.9, 1.3], alignment="not distinguishable from 1")
    fam = _family(rows, "B16")
    # B64's interval is too wide to show alignment (absence of evidence is not evidence): it is not in the family,
    # and not shown penalised either
    assert fam["batches"] == [16, 32] and fam["undistinguished"] == [16, 32, 64] and fam["end"]["batch_size"] == 128
    assert "Not distinguishable from 1" in fam["statement"] and "B = 64: rN 1.08 (90% CI 0.90–1.30, unadjusted" in fam["statement"]
    # no rung shown above 1: where the family ends is not measured
    fam = _family(rows[:3], "B16")
    assert fam["end"] is None and "is not measured by this ladder" in fam["statement"]
    # a rung some of whose seeds did not reach the target ends the range (its rN is not measured)
    rows[3].update(rN=None, rN_test=None, alignment=None, reached=False, verdict="undetermined", rN_at_least=1.6)
    fam = _family(rows, "B16")
    assert fam["end"]["batch_size"] == 128 and not fam["end"]["reached"]
    assert "did not reach the target within its run" in fam["statement"] and "rN > 1.60" in fam["statement"]
    # a lower bound is rounded down, as in the table and the headline (tryout rerun: "rN > 0.51" beside "> 0.50")
    rows[3].update(rN_at_least=0.5051)
    assert "rN > 0.50)" in _family(rows, "B16")["statement"]
    assert _family(ROWS, None) is None


def test_rejected_and_markdown():
    rej = rejected(ROWS, "B16")
    assert [r["run"] for r in rej] == ["B256", "B128-fixed"]
    assert rej[0]["reason"].startswith("B256 is slower (throughput gain 1.90x")
    md = family_markdown(_family(ROWS, "B16"), rej)
    assert "rejects the larger batch even with the learning rate retuned" in md
    assert md.index("- B256") < md.index("- B128-fixed")  # the rule's ladder first, then the control


def ladder_run(b, reach, per_step_s, seed=0, rule="sqrt"):
    """Score linear in retained samples, 0.8 at ``reach`` samples; fixed seconds per step."""
    steps = max(8, int(2 * reach / b))
    meta = RunMeta(run_id=f"B{b}-{rule}-s{seed}", prompts_per_step=b // 4, group_size=4, lr=1e-6 * (b / 16) ** 0.5,
                   lr_rule=rule, base_batch=16, base_lr=1e-6, seed=seed)
    s = np.arange(1, steps + 1)
    metrics = pd.DataFrame({"step": s, "samples/retained": s * b, "time/step_s": per_step_s,
                            "time/wall_s": s * per_step_s})
    evals = pd.DataFrame({"step": s, "samples/retained": s * b, "time/wall_s": s * per_step_s,
                          "eval/score": np.minimum(0.8, s * b / reach * 0.8)})
    return Run(meta=meta, metrics=metrics, evals=evals)


def test_report_json_states_family_end_and_rejected(tmp_path):
    # samples-to-target at 0.4 = reach / 2: 1000, 1040, 1600, 4000 (x 0.97, 1, 1.03 over three seeds) -> rN 1.04,
    # 1.6, 4.0; throughput 1, 1.9, 2, 2.1 (seconds per step = B / (16 x gain)) -> relative time 0.55, 0.8, 1.9
    runs = [ladder_run(b, reach * f, b / 16 / g, seed=i)
            for b, reach, g in ((16, 2000, 1.0), (32, 2080, 1.9), (64, 3200, 2.0), (128, 8000, 2.1))
            for i, f in enumerate((0.97, 1.0, 1.03))]
    res = build_report(runs, tmp_path, target=0.4)
    fam = res["aligned_family"]
    # B32's rN 1.04 is shown within 10% (the seeds agree to 3%); B64's 1.6 is above 1 beyond noise
    assert fam["batches"] == [16, 32] and fam["end"]["batch_size"] == 64
    assert fam["end"]["rN"] == pytest.approx(1.6, rel=0.01)
    assert [r["run"] for r in res["rejected"]] == ["B128-sqrt"]
    assert res["rejected"][0]["relative_time"] == pytest.approx(4.0 / 2.1, rel=0.01)
    md = (tmp_path / "report.md").read_text()
    assert "### Where the aligned family ends" in md and "between B = 32 and B = 64" in md
