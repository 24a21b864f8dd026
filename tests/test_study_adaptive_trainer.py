"""The adaptive sweep with the real trainer (rlbatch.backends.local.run_trial) on a tiny random model, and the trainer
behaviour it relies on: a run that stopped on its budget continues when called again with a larger one."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _train_helpers import coin_task  # noqa: E402

from rlbatch.runstore import TIME_KEYS  # noqa: E402

from rlbatch.backends.local import run_trial  # noqa: E402
from rlbatch.study.ladder import TrialSpec  # noqa: E402

OPTS = dict(max_new_tokens=2, eval_every=32, micro_batch_size=8, checkpoint_every=1000)


def _lines(p):
    return [json.loads(x) for x in Path(p).read_text().splitlines()]


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in rows]


@pytest.fixture
def coin(monkeypatch):
    import rlbatch.train.tasks as tasks

    monkeypatch.setattr(tasks, "get_task", lambda *a, **k: coin_task())


def _spec(samples, run_id="P2-G8-sqrt-s0", p=2):
    return TrialSpec(run_id=run_id, model="tiny-random", task="arithmetic", prompts_per_step=p, group_size=8,
                     lr=1e-2, lr_rule="sqrt", base_batch=16, base_lr=1e-2, samples=samples, options=OPTS)


def test_finished_run_continues_with_a_larger_budget(coin, tmp_path):
    straight = run_trial(_spec(96), tmp_path / "straight")
    part = run_trial(_spec(40), tmp_path / "grown")
    n_part = len(_lines(part / "metrics.jsonl"))
    assert json.loads((part / "run.json").read_text())["status"] == "finished"
    run_trial(_spec(40), part)  # the same budget again: nothing to do
    assert len(_lines(part / "metrics.jsonl")) == n_part
    run_trial(_spec(96), part)  # a larger budget: continues from the final checkpoint
    a, b = _lines(straight / "metrics.jsonl"), _lines(part / "metrics.jsonl")
    assert len(b) > n_part and [r["step"] for r in b] == list(range(1, len(b) + 1))
    assert _strip(a) == _strip(b)  # identical to an uninterrupted run with the larger budget (timing aside)
    meta = json.loads((part / "run.json").read_text())
    assert meta["status"] == "finished" and meta["samples_retained"] >= 96


def test_adaptive_sweep_with_the_real_trainer(coin, tmp_path):
    from rlbatch.study.run import adaptive_sweep

    res = adaptive_sweep(run_trial, _spec(512), tmp_path, target=0.8, max_doublings=2, min_eval_points=4, n_boot=50)
    ids = [t.run_id for t in res.trials]
    assert ids == ["B16-G8-sqrt-s0", "B32-G8-sqrt-s0", "B64-G8-sqrt-s0"]  # the doubling ladder from the base
    ran = [t.run_id for t in res.trials if t.state != "skipped"]
    assert ran[:2] == ids[:2] and res.reference in ran
    assert res.recommended_batch_size in (16, 32, 64)
    for rid in ran:  # every trial grew in chunks without repeating a step
        rows = _lines(tmp_path / rid / "metrics.jsonl")
        assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
        assert json.loads((tmp_path / rid / "run.json").read_text())["lr"] == pytest.approx(
            1e-2 * (rows[0]["batch/generated"] / 16) ** 0.5)
