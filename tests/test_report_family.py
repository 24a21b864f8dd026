"""The aligned family's end and the rejected configurations (rlbatch.report.family), from accounting rows and
through build_report into report.json."""

import numpy as np
import pandas as pd
import pytest

from rlbatch.report import build_report
from rlbatch.report.family import aligned_family, family_markdown, rejected
from rlbatch.runstore import Run, RunMeta


def row(run, b, rn, ci, rule="sqrt", verdict="within noise", reached=True, **kw):
    return {"run": run, "batch_size": b, "lr_rule": rule, "rN": rn, "rN_ci": ci, "reached": reached,
            "verdict": verdict, "relative_throughput": kw.get("g"), "relative_throughput_ci": None,
            "relative_time": kw.get("t"), "relative_time_ci": kw.get("t_ci"), "n_seeds": 3, "n_reached": 3}


ROWS = [row("B16", 16, 1.0, [1.0, 1.0], verdict="reference"),
        row("B32", 32, 1.04, [0.9, 1.2]),
        row("B64", 64, 1.08, [0.95, 1.25]),
        row("B128", 128, 1.37, [1.2, 1.55], verdict="faster", g=1.7, t=0.81, t_ci=[0.7, 0.95]),
        row("B256", 256, 2.9, [2.4, 3.5], verdict="slower", g=1.9, t=1.53, t_ci=[1.25, 1.85]),
        row("B128-fixed", 128, 1.8, [1.5, 2.2], rule="none", verdict="slower", g=1.7, t=1.06, t_ci=[1.01, 1.3])]


def test_family_ends_at_first_rn_above_tolerance():
    fam = aligned_family(ROWS, "B16", tolerance=0.1)
    assert fam["batches"] == [16, 32, 64] and (fam["lower"], fam["upper"]) == (16, 64)
    # B128: rN 1.37 > 1.10 and its whole interval (1.20-1.55) lies above it: a clear end
    assert fam["end"] == {"run": "B128", "batch_size": 128, "rN": 1.37, "rN_ci": [1.2, 1.55], "reached": True,
                          "clear": True}
    assert fam["clear_end"]["batch_size"] == 128
    assert fam["largest_measured"] == 256 and fam["rule"] == "sqrt"  # the fixed-LR control is not on the ladder
    assert "ends at B = 128" in fam["statement"] and "1.37 (95% CI 1.20–1.55)" in fam["statement"]
    # a looser tolerance keeps B128 in the family: the end moves to B256
    wide = aligned_family(ROWS, "B16", tolerance=0.5)
    assert wide["upper"] == 128 and wide["end"]["batch_size"] == 256


def test_uncertain_end_unreached_end_and_no_end():
    rows = [dict(r) for r in ROWS[:4]]
    rows[3]["rN_ci"] = [1.05, 1.6]  # the interval reaches below 1.10: an end, but not a certain one
    fam = aligned_family(rows, "B16")
    assert fam["end"]["batch_size"] == 128 and not fam["end"]["clear"] and "not yet certain" in fam["statement"]
    assert fam["clear_end"] is None and "No batch size up to B = 128" in fam["statement"]
    rows.append(row("B256", 256, 2.9, [2.4, 3.5], verdict="slower"))
    fam = aligned_family(rows, "B16")  # the certain end lies one doubling higher
    assert fam["clear_end"]["batch_size"] == 256 and "ends between B = 64 and B = 256" in fam["statement"]
    rows.pop()
    rows[3].update(rN=None, rN_ci=None, reached=False, verdict="not reached")
    fam = aligned_family(rows, "B16")
    assert fam["end"]["batch_size"] == 128 and fam["end"]["clear"] and "did not reach" in fam["statement"]
    fam = aligned_family(ROWS[:3], "B16")
    assert fam["end"] is None and fam["upper"] == 64 and "does not end within this ladder" in fam["statement"]
    assert aligned_family(ROWS, None) is None


def test_rejected_and_markdown():
    rej = rejected(ROWS, "B16")
    assert [r["run"] for r in rej] == ["B256", "B128-fixed"]
    assert rej[0]["reason"].startswith("B256 is slower (throughput gain 1.90x vs sample penalty rN=2.90")
    md = family_markdown(aligned_family(ROWS, "B16"), rej)
    assert "rejects the larger batch even with the learning rate retuned" in md
    assert md.index("- B256") < md.index("- B128-fixed")  # the rule's ladder first, then the control


def ladder_run(b, reach, per_step_s, rule="sqrt"):
    """Score linear in retained samples, 0.8 at ``reach`` samples; fixed seconds per step."""
    steps = max(8, int(2 * reach / b))
    meta = RunMeta(run_id=f"B{b}-{rule}", prompts_per_step=b // 4, group_size=4, lr=1e-6 * (b / 16) ** 0.5,
                   lr_rule=rule, base_batch=16, base_lr=1e-6)
    s = np.arange(1, steps + 1)
    metrics = pd.DataFrame({"step": s, "samples/retained": s * b, "time/step_s": per_step_s,
                            "time/wall_s": s * per_step_s})
    evals = pd.DataFrame({"step": s, "samples/retained": s * b, "time/wall_s": s * per_step_s,
                          "eval/score": np.minimum(0.8, s * b / reach * 0.8)})
    return Run(meta=meta, metrics=metrics, evals=evals)


def test_report_json_states_family_end_and_rejected(tmp_path):
    # samples-to-target at 0.4 = reach / 2: 1000, 1040, 1600, 4000 -> rN 1.04, 1.6, 4.0; throughput 1, 1.9,
    # 2, 2.1 (seconds per step = B / (16 x gain)) -> relative time 0.55, 0.8, 1.9 (B=128: slower)
    runs = [ladder_run(16, 2000, 1.0), ladder_run(32, 2080, 32 / 16 / 1.9), ladder_run(64, 3200, 64 / 16 / 2.0),
            ladder_run(128, 8000, 128 / 16 / 2.1)]
    res = build_report(runs, tmp_path, target=0.4)
    fam = res["aligned_family"]
    assert fam["batches"] == [16, 32] and fam["end"]["batch_size"] == 64
    assert fam["end"]["rN"] == pytest.approx(1.6)
    assert [r["run"] for r in res["rejected"]] == ["B128-sqrt"]
    assert res["rejected"][0]["relative_time"] == pytest.approx(4.0 / 2.1)
    md = (tmp_path / "report.md").read_text()
    assert "### Where the aligned family ends" in md and "ends at B = 64" in md
