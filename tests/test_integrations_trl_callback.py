"""The TRL callback joins the adaptive loop: with a target it logs the live prediction after each evaluation and,
opted in (stop_when_cannot_win=True), sets control.should_training_stop when the plan says the run cannot win
against the study's other configurations (stored demo sweep runs stand in for them)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers", reason="transformers is not installed (pip install 'rlbatch[trl]')")

from _stored_sweeps import unpack
from rlbatch.errors import UserError  # noqa: E402
from rlbatch.integrations.trl_callback import RlbatchCallback  # noqa: E402
from rlbatch.plan import truncate_runs  # noqa: E402
from rlbatch.readers import load  # noqa: E402
from rlbatch.runstore import write_run  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    unpack(DATA / "trials.tar.gz", root)
    return root / "trials"


def _half(trials: Path, rid: str, out: Path) -> Path:
    (run,) = truncate_runs(load(trials / rid), 0.5)
    return write_run(out / rid, run)


@pytest.mark.parametrize("mine, others, stops", [
    # stored sweep (analyze): B=16 relative time 1.00, B=32 0.72, B=128 0.44 of it: B=32 cannot win, B=128 can;
    # B=16, the reference (the smallest batch), is never stopped (issue 37: every rN is measured against it)
    ("B32-G8-sqrt-s0", [f"B{b}-G8-sqrt-s{s}" for b in (16, 128) for s in range(3)], True),
    ("B128-G8-sqrt-s0", ["B16-G8-sqrt-s0", "B16-G8-sqrt-s1", "B16-G8-sqrt-s2"], False),
    ("B16-G8-sqrt-s0", ["B128-G8-sqrt-s0", "B128-G8-sqrt-s1", "B128-G8-sqrt-s2"], False),
])
def test_callback_stops_a_run_that_cannot_win(trials, tmp_path, mine, others, stops):
    out = _half(trials, mine, tmp_path)
    logged: list[str] = []
    cb = RlbatchCallback(out, run_id=mine, target=0.45, compare_with=[trials / o for o in others],
                         stop_when_cannot_win=True, log=logged.append, n_boot=30)
    control = SimpleNamespace(should_training_stop=False)
    up = cb.check_plan(control)
    view = next(v for v in up.configs if mine in v.runs)
    assert view.samples_to_target is not None and view.time_to_target_s is not None  # the live prediction
    assert logged[0].startswith("rlbatch: update 0: ") and mine in logged[0]
    assert control.should_training_stop is stops
    if stops:
        assert cb.stop_reason.startswith("adaptive: cannot win") and "stopping" in logged[-1]
    # without the opt-in the prediction is logged but the trainer is never stopped
    cb2 = RlbatchCallback(out, run_id=mine, target=0.45, compare_with=[trials / o for o in others],
                          log=logged.append, n_boot=30)
    control2 = SimpleNamespace(should_training_stop=False)
    cb2.check_plan(control2)
    assert control2.should_training_stop is False


def test_stop_needs_something_to_lose_to(tmp_path):
    with pytest.raises(UserError, match="compare_with"):
        RlbatchCallback(tmp_path, target=0.5, stop_when_cannot_win=True)
