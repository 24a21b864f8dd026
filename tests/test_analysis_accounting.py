import pandas as pd
import pytest

from rlbatch.analysis.table import account, fastest, read_accounting_csv, to_json_rows
from rlbatch.errors import UserError

from conftest import PAPER_CSV


def test_paper_table_reproduced_to_two_decimals():
    rows = account(read_accounting_csv(PAPER_CSV), "P128")
    got = rows.set_index("run")
    order = ["P128", "P256", "P1024", "P2048", "P256-fixed-lr"]
    assert [round(got.loc[r, "rN"], 2) for r in order] == [1.00, 1.00, 1.00, 1.60, 1.67]
    assert [round(got.loc[r, "relative_throughput"], 2) for r in order] == [1.00, 1.25, 1.41, 1.30, 1.17]
    assert [round(got.loc[r, "relative_time"], 2) for r in order] == [1.00, 0.80, 0.71, 1.23, 1.42]
    assert [bool(got.loc[r, "faster_than_reference"]) for r in order] == [False, True, True, False, False]
    assert fastest(rows) == "P1024"
    assert list(got["batch_size"]) == [1024, 2048, 8192, 16384, 2048]


def test_decision_rule_is_throughput_gain_over_rn():
    df = pd.DataFrame([
        {"run": "ref", "batch_size": 16, "samples_to_target": 1000, "time_to_target_s": 100.0},
        # 1.2x throughput, 1.5x samples: slower (the paper's example)
        {"run": "big", "batch_size": 32, "samples_to_target": 1500, "time_to_target_s": 1500 / 12.0},
        {"run": "ok", "batch_size": 64, "samples_to_target": 1100, "throughput_samples_per_s": 20.0},
    ])
    rows = account(df, "ref").set_index("run")
    assert rows.loc["big", "relative_throughput"] == pytest.approx(1.2)
    assert rows.loc["big", "rN"] == pytest.approx(1.5)
    assert rows.loc["big", "relative_time"] == pytest.approx(1.25)
    assert not rows.loc["big", "faster_than_reference"]
    assert rows.loc["ok", "relative_time"] == pytest.approx(1.1 / 2.0)
    assert rows.loc["ok", "faster_than_reference"]


def test_not_reached_is_never_a_number():
    df = pd.DataFrame([
        {"run": "ref", "batch_size": 16, "samples_to_target": 1000, "time_to_target_s": 100.0},
        {"run": "never", "batch_size": 32, "samples_to_target": None, "throughput_samples_per_s": 30.0},
    ])
    rows = to_json_rows(account(df, "ref"))
    never = rows[1]
    assert never["rN"] is None and never["relative_time"] is None and never["samples_to_target"] is None
    assert never["faster_than_reference"] is False and never["reached"] is False
    assert never["relative_throughput"] == pytest.approx(3.0)


def test_reference_must_exist_and_reach():
    df = pd.DataFrame([{"run": "a", "batch_size": 1, "samples_to_target": None, "time_to_target_s": None},
                       {"run": "b", "batch_size": 2, "samples_to_target": 10, "time_to_target_s": 1.0}])
    with pytest.raises(UserError, match="unknown reference"):
        account(df, "zzz")
    with pytest.raises(UserError, match="never reached"):
        account(df, "a")


def test_aligned_is_shown_by_an_interval_inside_the_band_never_by_an_open_one():
    """The aligned family (issue 43's equivalence test; newcomer finding 19: one family on every page): rN's interval
    inside [1/1.1, 1.1]; an interval open at an end shows nothing (the plan's noise-model rN from a B_noise that is
    only a lower bound); a point value without any interval (an accounting table) by rN <= 1.1."""
    from rlbatch.analysis.accounting import aligned

    assert aligned(1.0, True, 0.1, [0.95, 1.05])
    assert not aligned(1.0, True, 0.1, [0.80, 1.05]) and not aligned(1.0, True, 0.1, [0.95, 1.20])
    assert not aligned(1.0, True, 0.1, [1.0, None]) and not aligned(1.0, True, 0.1, [None, 1.05])
    assert aligned(1.05, True, 0.1) and not aligned(1.15, True, 0.1)
    assert not aligned(1.0, False, 0.1, [0.99, 1.01]) and not aligned(None, True, 0.1)
