"""The readers on real public logs nobody here wrote, scored against values read by hand before any reader
ran on them (tests/data/readers_wild/*/expected.json; sources in tests/data/readers_wild/SOURCES.md).

The dev half was used while building the general extraction layer; the held-out half was not looked at beyond
writing its expectations, and is scored here so that its score cannot regress (before the work: 2 of 10 fully
right; benchmarks/results/readers_heldout_before.txt, _after.txt, _posthoc.txt). heldout2 was collected after the
work and measured once cleanly (benchmarks/results/readers_heldout2.txt).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WILD = Path(__file__).parent / "data" / "readers_wild"
#: fully right on the held-out half now: 7 on its first clean run after the reader work (readers_heldout_after.txt),
#: 9 after three general fixes made once its failures had been seen (readers_heldout_posthoc.txt)
HELDOUT_FLOOR = 9
#: fully right on heldout2 (collected after the reader work): 8 of 9 on its first, clean run; 9 after one general fix
#: (benchmarks/results/readers_heldout2.txt)
HELDOUT2_FLOOR = 9


def scorer():
    spec = importlib.util.spec_from_file_location("readers_heldout", ROOT / "benchmarks" / "readers_heldout.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_dev_half_fully_right_without_tracebacks():
    res = scorer().score_set(WILD / "dev")
    wrong = [f"{f['file']}: {f['wrong']}" for f in res["files"] if not f["ok"]]
    assert res["tracebacks"] == 0
    assert res["fully_right"] == res["total"] == 10, wrong


def test_heldout_half_does_not_regress():
    res = scorer().score_set(WILD / "heldout")
    assert res["tracebacks"] == 0
    assert res["total"] == 10
    assert res["fully_right"] >= HELDOUT_FLOOR, [f"{f['file']}: {f['wrong']}" for f in res["files"] if not f["ok"]]


def test_second_heldout_set_does_not_regress():
    res = scorer().score_set(WILD / "heldout2")
    assert res["tracebacks"] == 0 and res["total"] == 9
    assert res["fully_right"] >= HELDOUT2_FLOOR, [f"{f['file']}: {f['wrong']}" for f in res["files"] if not f["ok"]]


def test_scorer_can_fail(tmp_path):
    # a wrong hand-written value is reported as wrong (the check is not vacuous)
    src = WILD / "dev" / "verifier_training_log_augment_seed7.jsonl"
    (tmp_path / src.name).write_bytes(src.read_bytes())
    (tmp_path / "expected.json").write_text('{"files": {"%s": {"steps": 499, "lr": 2e-05}}}' % src.name)
    res = scorer().score_set(tmp_path)
    assert res["fully_right"] == 0 and "steps: got 500, expected 499" in res["files"][0]["wrong"][0]


def test_third_heldout_set():
    # heldout3 (review of issues 24/26; benchmarks/results/readers_review.md): a resumed verl PPO console, one that
    # stopped before its first step, one that logged to W&B only, a W&B export with no history rows, and a TRL
    # console under nohup whose G the script printed in its own words (the one miss: G without P is not kept)
    res = scorer().score_set(WILD / "heldout3")
    assert res["tracebacks"] == 0 and res["total"] == 5
    assert res["fully_right"] >= 4, [f"{f['file']}: {f['wrong']}" for f in res["files"] if not f["ok"]]


@pytest.mark.parametrize("half", ["dev", "heldout", "heldout2", "heldout3"])
def test_every_file_has_a_source_and_an_expectation(half):
    import json

    spec = json.loads((WILD / half / "expected.json").read_text())["files"]
    files = sorted(p.name for p in (WILD / half).iterdir() if p.name != "expected.json")
    assert sorted(spec) == files
    sources = (WILD / "SOURCES.md").read_text()
    assert all(f"| {half} | {name} |" in sources for name in files)
