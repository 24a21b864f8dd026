"""GRPO trainer: advantages and filtering, gradient accumulation, LR rule, counts, resume (tiny random model)."""

import copy
import json
import math

import pytest

torch = pytest.importorskip("torch")

from rlbatch.errors import UserError  # noqa: E402
from rlbatch.train.grpo import accumulate_gradients, group_advantages, micro_batches, optimizer_step  # noqa: E402
from rlbatch.runstore import TIME_KEYS  # noqa: E402
from rlbatch.train.config import make_config  # noqa: E402
from rlbatch.train.trainer import train  # noqa: E402

from _train_helpers import Kill as _Kill, coin_task, fresh, killing_task  # noqa: E402

torch.set_num_threads(1)

# --------------------------------------------------------------------------------------------------- advantages
def test_group_advantages_and_filtering_hand_made():
    r = torch.tensor([[1.0, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0]])
    adv, keep = group_advantages(r, eps=0.0)
    assert keep.tolist() == [True, False, False, True]
    # row 0: mean 0.5, unbiased std sqrt(1/3) -> +-sqrt(3)/2
    assert adv[0].tolist() == pytest.approx([math.sqrt(3) / 2, -math.sqrt(3) / 2, -math.sqrt(3) / 2,
                                             math.sqrt(3) / 2])
    # row 3: mean 0.25, unbiased std 0.5 -> [1.5, -0.5, -0.5, -0.5]
    assert adv[3].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])
    # all-equal groups carry zero advantage (with the default eps there is no division by zero)
    adv2, _ = group_advantages(r)
    assert adv2[1].abs().sum() == 0 and adv2[2].abs().sum() == 0


def test_micro_batches_balanced_split():
    assert [len(x) for x in micro_batches(24, 8)] == [8, 8, 8]
    assert [len(x) for x in micro_batches(20, 8)] == [7, 7, 6]  # retained B after filtering: balanced, <= 8
    assert [len(x) for x in micro_batches(8, 8)] == [8]
    assert micro_batches(0, 8) == []


# --------------------------------------------------------------------------------------------------- accumulation
def test_accumulated_update_equals_full_batch_update(tiny):
    from rlbatch.train.rollout import generate, render_prompt

    m1, tok = fresh(tiny)
    m2 = copy.deepcopy(m1)
    task = coin_task()
    items = task.train[:4]
    ids = [render_prompt(it, tok) for it in items for _ in range(4)]
    ro = generate(m1, tok, ids, 6, generator=torch.Generator().manual_seed(1))
    adv = torch.linspace(-1.5, 1.5, 16)

    full = accumulate_gradients(m1, ro, adv, micro_batch_size=16, clip_eps=0.2)
    g1 = [p.grad.clone() for p in m1.parameters()]
    acc = accumulate_gradients(m2, ro, adv, micro_batch_size=4, clip_eps=0.2)
    g2 = [p.grad.clone() for p in m2.parameters()]
    assert acc.n_micro == 4 and full.n_micro == 1
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert acc.grad_sq_big == pytest.approx(sum(float(g.pow(2).sum()) for g in g1), rel=1e-5)
    assert full.grad_sq_small == pytest.approx(full.grad_sq_big, rel=1e-6)  # one micro-batch: small == big
    assert acc.grad_sq_small > acc.grad_sq_big  # micro-batch gradients are noisier than their mean

    o1 = torch.optim.AdamW(m1.parameters(), lr=1.0, weight_decay=0.0)
    o2 = torch.optim.AdamW(m2.parameters(), lr=1.0, weight_decay=0.0)
    n1 = optimizer_step(m1, o1, 1e-3, max_grad_norm=0.5)
    n2 = optimizer_step(m2, o2, 1e-3, max_grad_norm=0.5)
    assert n1 == pytest.approx(n2, rel=1e-5) and n1 == pytest.approx(math.sqrt(full.grad_sq_big), rel=1e-5)
    assert o1.param_groups[0]["lr"] == 1e-3
    # Adam's first step is ~lr * sign(g): float rounding on near-zero gradient entries moves them by at most ~lr
    for a, b in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=5e-5)
    assert max(float((a - b).detach().abs().max()) for a, b in zip(m1.parameters(), m2.parameters())) < 0.05 * 1e-3


# --------------------------------------------------------------------------------------------------- runs
def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_lr_rule_and_retained_vs_generated_counts(tiny, tmp_path):
    from rlbatch.scaling import scaled_lr

    cfg = make_config(model="tiny-random", prompts_per_step=4, group_size=8, base_batch=8, base_lr=1e-3,
                      lr_rule="sqrt", samples=10_000, max_steps=6, max_new_tokens=4, eval_every=64)
    out = train(cfg, tmp_path / "run", model_tok=fresh(tiny), task=coin_task())
    rows = _lines(out / "metrics.jsonl")
    assert len(rows) == 6
    want = scaled_lr(32, 8, 1e-3, "sqrt")
    assert want == pytest.approx(2e-3)
    assert all(r["lr"] == pytest.approx(want) for r in rows)
    meta = json.loads((out / "run.json").read_text())
    assert meta["lr"] == pytest.approx(want) and meta["lr_rule"] == "sqrt" and meta["batch_size"] == 32
    ret = gen = 0
    filtered_any = False
    for i, r in enumerate(rows, start=1):
        assert r["step"] == i
        assert r["batch/generated"] == 32 and r["groups/generated"] == 4
        assert r["batch/retained"] == 8 * r["groups/retained"]
        ret += r["batch/retained"]
        gen += 32
        assert r["samples/retained"] == ret and r["samples/generated"] == gen
        filtered_any |= r["groups/retained"] < 4
        if r["batch/retained"]:
            assert r["noise/b_big"] == r["batch/retained"] and r["noise/b_small"] <= 8
            assert r["grad_norm/actor"] > 0 and math.isfinite(r["noise/grad_sq_big"])
        for k in ("time/gen_s", "time/reward_s", "time/train_s", "time/step_s", "time/wall_s", "reward/mean",
                  "reward/std", "tokens/generated", "tokens/trained"):
            assert k in r
    assert ret < gen or not filtered_any
    evals = _lines(out / "eval.jsonl")
    assert evals[0]["step"] == 0 and evals[-1]["step"] == 6 and all(0 <= e["eval/score"] <= 1 for e in evals)
    assert meta["status"] == "finished"


def _strip(rows):
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in rows]


def test_resume_after_kill_gives_identical_metrics(tiny, tmp_path):
    kw = dict(model="tiny-random", prompts_per_step=2, group_size=8, lr=3e-3, samples=10_000, max_steps=9,
              max_new_tokens=4, eval_every=40, checkpoint_every=3)
    full = train(make_config(**kw), tmp_path / "full", model_tok=fresh(tiny), task=coin_task())
    # killed during step 8 (after the checkpoint of step 6, with steps 7 and part of 8 done)
    with pytest.raises(_Kill):
        train(make_config(**kw), tmp_path / "killed", model_tok=fresh(tiny), task=killing_task(7 * 16 + 5))
    killed = tmp_path / "killed"
    assert json.loads((killed / "run.json").read_text())["status"] == "failed"
    assert len(_lines(killed / "metrics.jsonl")) == 7
    with pytest.raises(UserError):  # an existing run needs --resume
        train(make_config(**kw), killed, model_tok=fresh(tiny), task=coin_task())
    train(make_config(**kw), killed, resume=True, model_tok=fresh(tiny), task=coin_task())
    a, b = _lines(full / "metrics.jsonl"), _lines(killed / "metrics.jsonl")
    assert len(a) == len(b) == 9
    assert _strip(a) == _strip(b)
    assert _strip(_lines(full / "eval.jsonl")) == _strip(_lines(killed / "eval.jsonl"))
    assert json.loads((killed / "run.json").read_text())["status"] == "finished"


def test_kl_to_reference_is_logged_when_on(tiny, tmp_path):
    cfg = make_config(model="tiny-random", prompts_per_step=2, group_size=8, lr=1e-2, samples=10_000, max_steps=3,
                      max_new_tokens=4, eval_every=1000, kl_coef=0.1)
    out = train(cfg, tmp_path / "kl", model_tok=fresh(tiny), task=coin_task())
    rows = [r for r in _lines(out / "metrics.jsonl") if r["batch/retained"]]
    assert rows and all(r["kl"] >= 0 for r in rows)
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # first update: policy == reference
    assert any(r["kl"] > 0 for r in rows[1:]) or len(rows) == 1


def test_stop_at_target_once_held(tiny, tmp_path):
    cfg = make_config(model="tiny-random", prompts_per_step=2, group_size=8, lr=1e-3, samples=10_000, max_steps=50,
                      max_new_tokens=4, eval_every=16, stop_at_target=0.0, stop_hold=2)
    out = train(cfg, tmp_path / "stop", model_tok=fresh(tiny), task=coin_task())
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "finished" and "reached and held" in meta["stop_reason"]
    evals = _lines(out / "eval.jsonl")
    assert len(evals) == 2  # step 0 and the first eval after 16 retained samples: held twice -> stop
    assert len(_lines(out / "metrics.jsonl")) == evals[-1]["step"] < 50
