"""`rlbatch train --batch auto` (issue 55): the online controller inside the trainer, on the tiny-random model and
the coin task of the fault tests (tests/_fault_run.py: P = 2, G = 4, so B = 8, 16 or 32; a decision every 3 steps).
The controller's moves themselves are tested on the synthetic environment (tests/test_auto_batch.py); here: the
trainer applies its batch and the square-root learning rate at every step, records every decision, and a killed run
resumes with the controller's state."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fault_run as fr  # noqa: E402

from rlbatch.errors import UserError  # noqa: E402

LR0, B0 = fr.TRAIN["lr"], fr.TRAIN["prompts_per_step"] * fr.TRAIN["group_size"]


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def check_schedule(run: Path) -> tuple[list[int], list[dict]]:
    """Each step's batch is the probe's (steps 1-3: the next candidate up, 16) or the last decision's before it, and
    its learning rate lr0 x sqrt(B / B0); every decision is one line with its evidence, in step order."""
    m, d = lines(run / "metrics.jsonl"), lines(run / "controller.jsonl")
    assert [r["step"] for r in m] == list(range(1, len(m) + 1))
    steps = [x["step"] for x in d]
    assert steps == sorted(set(steps)) and all(4 <= s <= len(m) for s in steps)
    batch, k, got = B0, 0, []
    for r in m:
        s = r["step"]
        want = 16 if s <= 3 else batch
        assert r["batch/generated"] == want, (s, r["batch/generated"], want)
        assert r["lr"] == pytest.approx(LR0 * math.sqrt(want / B0), rel=1e-9)
        got.append(want)
        while k < len(d) and d[k]["step"] == s:  # a decision after step s applies from step s + 1
            assert d[k]["current"] == batch and d[k]["batch"] in (8, 16, 32)
            assert d[k]["lr"] == pytest.approx(LR0 * math.sqrt(d[k]["batch"] / B0))
            assert set(d[k]["relative_time"]) >= {str(batch)} and len(d[k]["time"]) == 2
            assert d[k]["b_noise"] is None or d[k]["b_noise"] > 0  # null: not bounded above (strict JSON)
            batch = d[k]["batch"]
            k += 1
    assert k == len(d)
    return got, d


def test_batch_auto_applies_the_controllers_batch_and_the_sqrt_lr(tmp_path):
    run = fr.run_train(tmp_path / "run", auto=True)
    got, d = check_schedule(run)
    assert len(d) >= 1  # 16 steps, probes for 3: at least one window of 3 with gradient statistics
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished" and meta["config"]["batch"] == "auto"
    # inspect shows the batch over the run (spans of steps) and the decisions, as the record holds them
    from rlbatch.explain import inspect_path

    c = inspect_path(run)["runs"][0]["controller"]
    assert c["decisions"] == len(d) and c["moves"] == sum(x["moved"] for x in d)
    assert [b for b, a, z in c["spans"] for _ in range(a, z + 1)] == got
    assert c["spans"][0] == [16, 1, 3]
    assert "auto_batch" in torch.load(run / "checkpoint.pt", weights_only=False)


def test_batch_auto_killed_resumes_with_its_controller(tmp_path):
    """kill -9 after the optimizer step of step 9 (checkpoint at step 8), then --resume: no step or decision lost or
    duplicated, and the resumed steps follow the decisions the controller had made before the kill."""
    out = tmp_path / "run"
    env = {**os.environ, "RLBATCH_FAULT": "optim:9", "PYTHONPATH": str(Path(fr.__file__).parents[1] / "src"),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, fr.__file__, "train-auto", str(out)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]
    before = lines(out / "controller.jsonl")
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    assert state["state"]["step"] == 8 and len(state["auto_batch"]["schedule"]) == 8
    kept = [x for x in before if x["step"] <= 8]
    fr.run_train(out, resume=True, auto=True)
    _, d = check_schedule(out)
    assert d[:len(kept)] == kept  # the decisions up to the checkpoint are the killed run's own


def test_batch_auto_refuses_what_it_cannot_honour(tmp_path):
    from rlbatch.train.auto import candidates, check
    from rlbatch.train.config import make_config

    base = dict(fr.TRAIN, batch="auto")
    assert candidates(make_config(**base)) == [8, 16, 32, 64, 128, 256, 512]  # 2 G .. 64 x the start, x micro 4
    for extra, words in ((dict(async_rollouts=1), "synchronous rollouts"),
                         (dict(mini_batch_size=4), "leave --mini-batch-size out"),
                         (dict(batch_min=16), "outside --batch-min 16"),
                         (dict(batch_max=8), "only one batch size fits")):
        with pytest.raises(UserError, match=words):
            check(make_config(**{**base, **extra}))
