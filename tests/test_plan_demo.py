"""The plan on a real sweep: the stored demo sweep (``rlbatch demo``, tiny preset, B = 16..128 on the square-root LR
rule plus a fixed-LR control at B = 128, 3 seeds each; tests/data/demo_sweep). The plan made from the first 30% of
every trial's samples must pick a batch whose measured time-to-target (from the full sweep, seed-averaged curves, as
the report's accounting) is within 10% of the best measured."""

import json
from pathlib import Path

import pytest

from _stored_sweeps import unpack
from rlbatch.plan import plan_runs, truncate_runs
from rlbatch.readers import load
from rlbatch.analysis.accounting import account_runs

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo_sweep")
    unpack(DATA / "trials.tar.gz", root)
    settings = json.loads((DATA / "settings.json").read_text())
    return load(root / "trials", "rlbatch"), settings


def measured_relative_time(runs, target):
    acc = account_runs(runs, target)
    rows, ref = acc["rows"], acc["reference"]
    return {r["run"]: r["relative_time"] for r in rows if r["relative_time"] is not None}, ref


def test_stored_demo_sweep_is_complete(demo):
    runs, settings = demo
    assert len(runs) == 15 and {r.meta.status for r in runs} == {"finished"}
    assert sorted({r.meta.batch_size for r in runs}) == [16, 32, 64, 128]
    assert sum(r.meta.lr_rule == "none" for r in runs) == 3
    rel, ref = measured_relative_time(runs, settings["target"])
    assert ref == "B16-G8-sqrt" and rel[ref] == 1.0 and len(rel) >= 3


def test_plan_from_30_percent_is_provisional_and_no_rn_interval_starts_at_0(demo):
    # issue 37 (3): at 30% of the samples the reference (B16) has not reached 0.45 and its fitted samples-to-target
    # is open above: the pick is provisional and says why, and every ratio to it is open below (never "0.00")
    runs, settings = demo
    plan = plan_runs(truncate_runs(runs, 0.3), settings["target"], extend=False, n_boot=100)
    assert plan["provisional"] and "open above" in plan["provisional"]
    assert all(c["rN_ci"] is None or c["rN_ci"][0] is None or c["rN_ci"][0] > 0 for c in plan["candidates"])
    assert all(c["interval"] is None or c["interval"][0] is None or c["interval"][0] > 0
               for c in plan["candidates"])


def test_plan_at_a_target_no_fit_reaches_picks_nothing(demo):
    # issue 37 (3): at a target above what any probe reaches, the reference's fit does not reach it: no pick
    runs, _ = demo
    plan = plan_runs(truncate_runs(runs, 0.3), 0.9, extend=False, n_boot=100)
    assert plan["recommended"] is None and plan["no_pick"]


def test_plan_from_first_30_percent_of_the_demo_picks_a_batch_within_10_percent(demo):
    runs, settings = demo
    target = settings["target"]
    rel, _ = measured_relative_time(runs, target)
    short = truncate_runs(runs, 0.3)
    plan = plan_runs(short, target, extend=False, n_boot=100)
    pick = plan["recommended"]
    assert pick in rel, (pick, rel)
    assert rel[pick] <= 1.10 * min(rel.values()), (pick, rel)
