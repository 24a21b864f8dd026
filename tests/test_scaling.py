import math

import pytest

from rlbatch.errors import UserError
from rlbatch.scaling import batch_ladder, lr_table, parse_int_list, scaled_lr


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


def test_ladder_and_table():
    assert batch_ladder(16, 3) == [16, 32, 64, 128]
    rows = lr_table(1024, 1e-6, [2048, 8192, 16384], "sqrt")
    assert [r["batch_size"] for r in rows] == [2048, 8192, 16384]
    assert [round(r["lr"] * 1e6, 3) for r in rows] == [1.414, 2.828, 4.0]
