import math
from pathlib import Path

import pytest

from _stored_sweeps import unpack
from rlbatch.errors import UserError
from rlbatch.scaling import lr_table, parse_int_list, scaled_lr


def test_sqrt_rule_paper_values():
    # shared/paper/README.md: P=128 at 1e-6 gives P=256 at 1.414e-6, P=1024 at 2.828e-6, P=2048 at 4e-6 (G=8)
    assert scaled_lr(2048, 1024, 1e-6, "sqrt") == pytest.approx(1.41421356e-6, rel=1e-8)
    assert scaled_lr(256 * 8, 128 * 8, 1e-6) == pytest.approx(1.414e-6, rel=1e-3)
    assert scaled_lr(1024 * 8, 128 * 8, 1e-6) == pytest.approx(2.828e-6, rel=1e-3)
    assert scaled_lr(2048 * 8, 128 * 8, 1e-6) == pytest.approx(4e-6, rel=1e-12)


def test_linear_and_none_rules():
    assert scaled_lr(4096, 1024, 1e-6, "linear") == pytest.approx(4e-6)
    assert scaled_lr(512, 1024, 1e-6, "linear") == pytest.approx(5e-7)
    assert scaled_lr(4096, 1024, 1e-6, "none") == 1e-6
    assert scaled_lr(256, 1024, 2e-6, "sqrt") == pytest.approx(1e-6)


def test_rules_agree_at_base_and_are_monotone():
    for rule in ("sqrt", "linear", "none"):
        assert scaled_lr(64, 64, 3e-5, rule) == 3e-5
    lrs = [scaled_lr(b, 16, 1e-5, "sqrt") for b in (16, 32, 64, 128)]
    ratios = [b / a for a, b in zip(lrs, lrs[1:])]
    assert all(math.isclose(r, math.sqrt(2)) for r in ratios)


def test_bad_inputs():
    with pytest.raises(UserError, match="unknown learning-rate rule"):
        scaled_lr(2, 1, 1e-6, "cubic")
    with pytest.raises(UserError, match="base_lr"):
        scaled_lr(2, 1, -1e-6)
    with pytest.raises(UserError, match="batch_size"):
        scaled_lr(0, 1, 1e-6)
    with pytest.raises(UserError, match="not an integer"):
        parse_int_list("1,x")


def test_lr_table():
    rows = lr_table(1024, 1e-6, [2048, 8192, 16384], "sqrt")
    assert [r["batch_size"] for r in rows] == [2048, 8192, 16384]
    assert [round(r["lr"] * 1e6, 3) for r in rows] == [1.414, 2.828, 4.0]


# ----------------------------------------------------------------------------------------- detect_lr_rule
from rlbatch.scaling import detect_lr_rule  # noqa: E402


def test_detect_fixed_lr_ladder():
    # four update batches at one lr: the paper's fixed-LR control
    r = detect_lr_rule([(256, 1e-6), (512, 1e-6), (1024, 1e-6), (2048, 1e-6)])
    assert r.rule == "none" and r.label == "fixed LR (not retuned)"
    assert (r.base_batch, r.base_lr) == (256, 1e-6)
    assert r.exponent == pytest.approx(0.0, abs=1e-12)
    assert "control" in r.sentence() and "not the batch" in r.sentence()


def test_detect_sqrt_ladder_rounded_as_users_write_it():
    # the paper's ladder as written in configs: 1e-6, 1.4e-6 (sqrt 2 = 1.414: 1.0% off), 2e-6, 2.8e-6 (2.828: 1.0%)
    r = detect_lr_rule([(1024, 1e-6), (2048, 1.4e-6), (4096, 2e-6), (8192, 2.8e-6)])
    assert r.rule == "sqrt" and r.label == "square-root rule" and not r.ambiguous
    assert r.deviation["sqrt"] == pytest.approx(1 - 1.4 / math.sqrt(2), rel=1e-9)  # 0.0101, the largest
    assert r.deviation["none"] == pytest.approx(1.8)  # 2.8e-6 vs 1e-6
    # slope of log lr on log B: hand-computed from the four points, close to 0.5
    xs = [0, math.log(2), math.log(4), math.log(8)]
    ys = [0, math.log(1.4), math.log(2), math.log(2.8)]
    mx, my = sum(xs) / 4, sum(ys) / 4
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert r.exponent == pytest.approx(slope) and 0.48 < r.exponent < 0.5


def test_detect_linear_and_unknown_and_too_few():
    assert detect_lr_rule([(64, 1e-5), (128, 2e-5), (256, 4e-5)]).rule == "linear"
    # lr grows like B^0.25: 1, 1.19, 1.41 -- neither fixed (41% off), sqrt (29%) nor linear
    other = detect_lr_rule([(64, 1e-5), (128, 1.19e-5), (256, 1.41e-5)])
    assert other.rule == "other" and other.label == "not by a known rule"
    assert other.exponent == pytest.approx(0.248, abs=0.01)
    # seeds repeat a point; an lr missing for a run is ignored
    one = detect_lr_rule([(64, 1e-5), (64, 1e-5), (128, None)])
    assert one.rule is None and "one batch size" in one.label
    assert detect_lr_rule([]).rule is None
    # two learning rates at one batch (an LR sweep): no rule
    assert detect_lr_rule([(64, 1e-5), (64, 3e-5), (128, 1e-5)]).rule == "other"


def test_detect_tolerance_boundary():
    # 2048 at 1.5e-6 against 1024 at 1e-6: 6.1% above sqrt's 1.414e-6 -> no rule at 5%, sqrt at 10%
    pts = [(1024, 1e-6), (2048, 1.5e-6)]
    assert detect_lr_rule(pts).rule == "other"
    assert detect_lr_rule(pts, tolerance=0.1).rule == "sqrt"


def test_accounting_judges_a_sweep_ladder_without_its_fixed_lr_control():
    # an rlbatch sweep: B 16/32/64 on the sqrt rule plus the fixed-LR control at B 64 (declared lr_rule "none");
    # judged within the reference's declared rule, the control's second lr at B 64 does not make it "other"
    from rlbatch.analysis.accounting import lr_retuning, retuning_json

    rows = [{"run": f"B{b}", "batch_size": b, "lr": 1e-5 * math.sqrt(b / 16), "lr_rule": "sqrt"} for b in (16, 32, 64)]
    rows.append({"run": "B64-fixed", "batch_size": 64, "lr": 1e-5, "lr_rule": "none"})
    r = lr_retuning(rows, "B16")
    assert r.rule == "sqrt" and [b for b, _ in r.points] == [16, 32, 64]
    # logs declare no rule: all rows together; two lrs at B 64 -> no known rule
    plain = [{**row, "lr_rule": None} for row in rows]
    assert lr_retuning(plain, "B16").rule == "other"
    js = retuning_json(r)
    assert js["label"] == "square-root rule" and js["points"][0] == [16, 1e-5] and js["sentence"] == r.sentence()
    # the control is named beside the rule, not left out silently; logs declare nothing apart
    from rlbatch.analysis.accounting import lr_rule_apart

    assert [x["run"] for x in lr_rule_apart(rows, "B16")] == ["B64-fixed"] and lr_rule_apart(plain, "B16") == []


def test_headline_lr_note_names_the_fixed_lr_control(tmp_path):
    # the stored demo sweep (tests/data/demo_sweep: B16..B128 on the sqrt rule + the fixed-LR control at B128)
    import json

    from rlbatch.analyze import analyze

    data = Path(__file__).parent / "data" / "demo_sweep"
    unpack(data / "trials.tar.gz", tmp_path)
    out = analyze([tmp_path / "trials"], target=json.loads((data / "settings.json").read_text())["target"])
    note = out["headline"]["lr_note"]
    assert note.endswith("Not on it: B128-G8-fixed (B=128, fixed LR), whose rN measures its learning-rate setting "
                         "as well as the batch (the fixed-LR control).")
    assert note.startswith("Learning rate: retuned by the square-root rule (lr = 0.0001 x sqrt(B / 16) over B=16 "
                           "to B=128")
