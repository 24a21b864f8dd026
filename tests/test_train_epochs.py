"""PPO-style updates per rollout: ``--mini-batch-size M`` responses per optimizer update and ``--ppo-epochs E``
passes; the ratio clip binds from the second update on, the LR rule applies to M, run.json records both batches."""

import json
import math

import pytest

torch = pytest.importorskip("torch")

from rlbatch.errors import UserError  # noqa: E402
from rlbatch.scaling import scaled_lr  # noqa: E402
from rlbatch.train.config import make_config  # noqa: E402
from rlbatch.train.trainer import train  # noqa: E402

from _train_helpers import coin_task, fresh  # noqa: E402

torch.set_num_threads(1)
BASE = dict(model="tiny-random", prompts_per_step=4, group_size=4, samples=10**6, max_steps=3, max_new_tokens=4,
            eval_size=4, micro_batch_size=4, base_batch=4, base_lr=2e-2, lr_rule="sqrt", threads=1)


def _lines(out):
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def test_two_epochs_half_batch_clip_and_lr_rule_on_M(tiny, tmp_path):
    cfg = make_config(**BASE, mini_batch_size=8, ppo_epochs=2)
    out = train(cfg, tmp_path / "mb", model_tok=fresh(tiny), task=coin_task())
    meta = json.loads((out / "run.json").read_text())
    lr_m = scaled_lr(8, 4, 2e-2, "sqrt")
    assert meta["lr"] == pytest.approx(lr_m) and lr_m == pytest.approx(2e-2 * math.sqrt(2))
    assert meta["lr"] != pytest.approx(scaled_lr(16, 4, 2e-2, "sqrt"))  # not the rollout batch B = 16
    assert meta["batch_size"] == 8 and meta["rollout_batch_size"] == 16 and meta["ppo_epochs"] == 2
    rows = _lines(out)
    assert all(r["lr"] == pytest.approx(lr_m) for r in rows)
    # retained groups of 4 in mini-batches of 2 groups, two epochs: updates = 2 x ceil(groups / 2)
    for r in rows:
        if r["batch/retained"]:
            assert r["train/updates"] == 2 * math.ceil(r["groups/retained"] / 2)
    assert max(r.get("clip_frac", 0.0) for r in rows) > 0  # later updates move off-policy: the clip binds
    from rlbatch.runstore import read_run

    assert read_run(out).meta.batch_size == 8  # the update batch is what the analysis reads


def test_default_is_one_on_policy_update(tiny, tmp_path):
    out = train(make_config(**BASE), tmp_path / "one", model_tok=fresh(tiny), task=coin_task())
    meta = json.loads((out / "run.json").read_text())
    assert meta["batch_size"] == meta["rollout_batch_size"] == 16 and meta["lr"] == pytest.approx(4e-2)
    rows = [r for r in _lines(out) if r["batch/retained"]]
    assert rows and all(r["train/updates"] == 1 and r["clip_frac"] == 0.0 for r in rows)


def test_mini_batch_must_divide_the_batch_and_hold_whole_groups(tiny, tmp_path):
    for m, word in ((6, "divide"), (2, "multiple of the group size")):
        with pytest.raises(UserError, match=word):
            train(make_config(**BASE, mini_batch_size=m), tmp_path / f"bad{m}", model_tok=fresh(tiny),
                  task=coin_task())


def test_runstore_accepts_an_update_batch_dividing_the_rollout():
    from rlbatch.runstore import RunMeta

    m = RunMeta(run_id="r", prompts_per_step=4, group_size=4, batch_size=8, rollout_batch_size=16)
    assert m.batch_size == 8
    with pytest.raises(ValueError):
        RunMeta(run_id="r", prompts_per_step=4, group_size=4, batch_size=8)  # no rollout batch: must be P x G
    with pytest.raises(ValueError):
        RunMeta(run_id="r", prompts_per_step=4, group_size=4, batch_size=6, rollout_batch_size=16)


def test_ppo_two_epochs_mini_batches_clip_binds(tiny, tmp_path):
    cfg = make_config(**{**BASE, "group_size": 1, "prompts_per_step": 16, "base_batch": 8}, algo="ppo",
                      mini_batch_size=8, ppo_epochs=2)
    out = train(cfg, tmp_path / "ppo", model_tok=fresh(tiny), task=coin_task())
    meta = json.loads((out / "run.json").read_text())
    assert meta["batch_size"] == 8 and meta["rollout_batch_size"] == 16
    assert meta["lr"] == pytest.approx(2e-2) and meta["critic_lr"] == pytest.approx(2e-2)  # sqrt rule at M = B0
    rows = _lines(out)
    assert all(r["train/updates"] == 4 for r in rows)
    assert max(r["clip_frac"] for r in rows) > 0 and max(r["value/clip_frac"] for r in rows) > 0


def test_no_filter_trains_every_response(tiny, tmp_path):
    """``filter_groups=False`` (the equal-work benchmark, as TRL): every response of every step is trained, the
    token mean is over all B responses' tokens, all-equal groups included (zero advantage)."""
    out = train(make_config(**BASE, filter_groups=False), tmp_path / "nf", model_tok=fresh(tiny), task=coin_task())
    rows = _lines(out)
    assert all(r["batch/retained"] == r["batch/generated"] == 16 and r["groups/retained"] == 4 for r in rows)
    assert rows[-1]["tokens/trained"] == rows[-1]["tokens/generated"]
