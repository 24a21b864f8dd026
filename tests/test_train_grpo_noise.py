"""GRPO micro-batches laid out by prompt and the unbiased simple noise scale with its between/within-prompt split:
a planted noise model through the real ``accumulate``, the layout, gradient equality, trainer metrics."""

import json
import math

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from rlbatch.analysis import noise  # noqa: E402
from rlbatch.train.grpo import accumulate, accumulate_gradients, grpo_noise_metrics, prompt_layout  # noqa: E402
from rlbatch.train.config import make_config  # noqa: E402
from rlbatch.train.trainer import train  # noqa: E402

from _train_helpers import coin_task, fresh  # noqa: E402

torch.set_num_threads(1)


# --------------------------------------------------------------------------------------------------- layout
def _sizes(layout):
    return [(len(rows), prompt) for rows, prompt in layout]


def test_prompt_layout_parts_whole_groups_and_split():
    # m < G: each group in ceil(G/m) consecutive parts of one prompt (near-equal when m does not divide G)
    assert _sizes(prompt_layout(2, 16, 4)) == [(4, 0)] * 4 + [(4, 1)] * 4
    assert _sizes(prompt_layout(1, 16, 6)) == [(6, 0), (5, 0), (5, 0)]
    # m >= G: whole groups, floor(m/G) per micro-batch; the first split_groups groups as two half-groups
    assert _sizes(prompt_layout(3, 8, 8)) == [(4, 0), (4, 0), (8, -1), (8, -1)]
    assert _sizes(prompt_layout(3, 8, 8, split_groups=0)) == [(8, -1)] * 3
    assert _sizes(prompt_layout(6, 8, 20, split_groups=2)) == [(4, 0), (4, 0), (4, 1), (4, 1), (16, -1), (16, -1)]
    assert _sizes(prompt_layout(5, 8, 16)) == [(4, 0), (4, 0), (16, -1), (16, -1)]
    assert _sizes(prompt_layout(3, 1, 8)) == [(3, -1)]  # G = 1: nothing to split
    assert prompt_layout(0, 8, 8) == []
    # every row exactly once, in order, no pass over m, parts never mix prompts
    for n, G, m, k in [(5, 16, 6, 1), (7, 8, 24, 3), (4, 3, 2, 1), (9, 12, 8, 2)]:
        lay = prompt_layout(n, G, m, k)
        assert np.array_equal(np.concatenate([r for r, _ in lay]), np.arange(n * G))
        assert max(len(r) for r, _ in lay) <= m
        assert all(len(set(r // G)) == 1 and r[0] // G == p for r, p in lay if p >= 0)


# --------------------------------------------------------------------------------------------------- planted model
class _Planted(torch.nn.Module):
    """One parameter vector w; the loss of response i is <w, g_i> / N, so its gradient is the planted g_i / N."""

    def __init__(self, d):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(d))


D, P, G = 64, 8, 16
TR_B, TR_W = 4.0, 64.0  # tr(Sigma_b), tr(Sigma_w); |G_true|^2 = 1
TRUE_B_SIMPLE = (G * TR_B + TR_W) / 1.0  # 128 responses


def _planted_steps(micro, steps, group_size=G, seed=0):
    """Per-step noise metrics of ``accumulate`` on planted gradients g_pi = G_true + u_p + e_pi (u_p ~ N(0,
    TR_B/D I), e_pi ~ N(0, TR_W/D I), |G_true| = 1), P prompts x G responses, one token per response.
    ``group_size=None`` is the contiguous layout of independent responses (PPO's)."""
    gen = torch.Generator().manual_seed(seed)
    g_true = torch.ones(D) / math.sqrt(D)
    m = _Planted(D)
    n = P * G
    rows = []
    for step in range(1, steps + 1):
        u = torch.randn(P, 1, D, generator=gen) * math.sqrt(TR_B / D)
        e = torch.randn(P, G, D, generator=gen) * math.sqrt(TR_W / D)
        g = (g_true + u + e).reshape(n, D)

        def loss_of(idx):
            return (g[torch.as_tensor(idx)] @ m.w).sum() / n, len(idx), {}

        res = accumulate(m, n, micro, loss_of, group_size=group_size)
        torch.testing.assert_close(m.w.grad, g.mean(0))  # the accumulated gradient is the full-batch mean
        if group_size is None:
            rec = {"noise/grad_sq_small": res.grad_sq_small, "noise/grad_sq_big": res.grad_sq_big,
                   "noise/b_small": res.b_small, "noise/b_big": n}
        else:
            rec = grpo_noise_metrics(res, n)
        rows.append({"step": step, "samples/retained": step * n, **rec})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("micro", [4, 8, 16])
def test_planted_grpo_noise_unbiased_at_every_micro_size(micro):
    """B_simple (estimates averaged over 400 steps, then divided) within 10% of (G tr Sigma_b + tr Sigma_w) /
    |G|^2 = 128, and tr Sigma_b = 4, tr Sigma_w = 64 within 10%. Measured (seed 0): B_simple 127.7 at micro
    4 / 8 / 16; tr_b 3.99 / 4.00 / 3.99; tr_w 64.1 / 63.8 / 64.1.

    Today's contiguous estimator (micro-batches of m consecutive responses treated as independent, what GRPO logged
    before) gives 56.6 / 73.9 / 127.7 on the same data: E B_simple_old = (tr_b (1 - 1/P) / (1/m - 1/B) + tr_w) /
    (|G|^2 + tr_b (G - m) / (B - m)) = 56.6 / 74.1 / 128 at m = 4 / 8 / 16, so it fails this test at 4 and 8 (at
    m = G a contiguous micro-batch is one whole group and it was already unbiased)."""
    df = _planted_steps(micro, 400)
    assert noise.b_simple_overall(df) == pytest.approx(TRUE_B_SIMPLE, rel=0.10)
    assert df["noise/between_prompt"].mean() == pytest.approx(TR_B, rel=0.10)
    assert df["noise/within_prompt"].mean() == pytest.approx(TR_W, rel=0.10)
    assert df["noise/group_size"].eq(G).all() and df["noise/b_small"].eq(G).all()
    assert df["noise/b_micro"].eq(micro if micro < G else G / 2).all()
    # per step, the two-batch B_simple equals the three-level estimate (G tr_b + tr_w) / |G|^2
    r = df.iloc[0]
    sp = noise.grpo_noise_split(r["noise/grad_sq_micro"], r["noise/grad_sq_prompt"], r["noise/grad_sq_big"],
                                r["noise/b_micro"], G, P, sq_small=r["noise/grad_sq_small"],
                                prompts_per_small=r["noise/b_small"] / G)
    assert sp["trace"] == pytest.approx(G * r["noise/between_prompt"] + r["noise/within_prompt"], rel=1e-9)
    if sp["g2"] > 0:
        assert r["noise/b_simple"] == pytest.approx(sp["b_simple_responses"], rel=1e-9)
    # the analysis smooths |G|^2 and the traces separately and reports the split
    sm = noise.b_simple_smoothed(df, alpha=0.02)
    assert sm["b_simple"].iloc[-1] == pytest.approx(TRUE_B_SIMPLE, rel=0.25)
    assert sm["between_prompt"].iloc[-1] == pytest.approx(TR_B, rel=0.25)
    assert sm["within_prompt"].iloc[-1] == pytest.approx(TR_W, rel=0.25)


@pytest.mark.parametrize("micro, old_want", [(4, 56.6), (8, 74.1)])
def test_planted_contiguous_estimator_is_biased(micro, old_want):
    """The old layout on the same planted data: B_simple far below the truth (the predicted biased value)."""
    old = noise.b_simple_overall(_planted_steps(micro, 400, group_size=None))
    assert old == pytest.approx(old_want, rel=0.05)
    assert old < 0.6 * TRUE_B_SIMPLE


@pytest.mark.parametrize("micro", [6, 32])
def test_planted_unequal_parts_and_multi_group_micro_batches(micro):
    """m = 6 (groups in parts 6, 5, 5; harmonic-mean part size) and m = 32 (two groups per micro-batch, one group
    split for the norm only): the total and the split stay unbiased. Measured: 127.7 and 128.8."""
    df = _planted_steps(micro, 400)
    assert noise.b_simple_overall(df) == pytest.approx(TRUE_B_SIMPLE, rel=0.10)
    assert df["noise/between_prompt"].mean() == pytest.approx(TR_B, rel=0.10)
    assert df["noise/within_prompt"].mean() == pytest.approx(TR_W, rel=0.10)


def test_grpo_noise_split_whole_group_units_need_two_units():
    with pytest.raises(Exception):
        noise.grpo_noise_split(1.0, 1.0, 1.0, 4, 8, 2, sq_small=1.0, prompts_per_small=2.0)


def test_b_simple_smoothed_old_logs_have_no_split():
    df = pd.DataFrame({"step": [1, 2], "noise/grad_sq_small": [3.0, 3.0], "noise/grad_sq_big": [1.5, 1.5],
                       "noise/b_small": [4, 4], "noise/b_big": [16, 16]})
    sm = noise.b_simple_smoothed(df)
    assert sm["between_prompt"].isna().all() and sm["within_prompt"].isna().all()
    # g2 = (16 * 1.5 - 4 * 3) / 12 = 1, trace = 1.5 / (1/4 - 1/16) = 8
    assert sm["b_simple"].tolist() == pytest.approx([8.0, 8.0])
    foreign = noise.b_simple_smoothed(pd.DataFrame({"step": [1, 2], "noise/b_simple": [10.0, 20.0]}))
    assert foreign["between_prompt"].isna().all() and foreign["b_simple"].tolist() == [10.0, 15.0]


# --------------------------------------------------------------------------------------------------- real model
def test_full_batch_gradient_unchanged_by_the_layout(tiny):
    from rlbatch.train.rollout import generate, render_prompt

    model, tok = fresh(tiny)
    task = coin_task()
    ids = [render_prompt(it, tok) for it in task.train[:4] for _ in range(4)]  # P = 4 prompts x G = 4
    ro = generate(model, tok, ids, 6, generator=torch.Generator().manual_seed(3))
    adv = torch.linspace(-1.5, 1.5, 16)

    def grads(micro, group_size, split=1):
        res = accumulate_gradients(model, ro, adv, micro_batch_size=micro, clip_eps=0.2, group_size=group_size,
                                   split_groups=split)
        out = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        return out, res

    ref, big = grads(16, None)  # one big batch
    assert big.n_micro == 1
    for micro, split, n_passes in [(1, 1, 16), (2, 1, 8), (3, 1, 8), (4, 1, 5), (4, 0, 4), (8, 1, 4), (16, 2, 5)]:
        g, res = grads(micro, 4, split)
        assert res.n_micro == n_passes, (micro, split)
        for a, b in zip(ref, g):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
        assert res.grad_sq_big == pytest.approx(big.grad_sq_big, rel=1e-5)
        assert res.prompts == 4 and res.group_size == 4
        assert res.n_tokens == big.n_tokens
    # a part is noisier than its prompt, and a prompt than the batch
    _, res = grads(2, 4)
    assert res.grad_sq_micro > res.grad_sq_prompt > res.grad_sq_big and res.b_micro == 2 and res.b_small == 4


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.parametrize("micro", [4, 8])
def test_trainer_logs_unbiased_noise_and_split(tiny, tmp_path, micro):
    """micro 4 < G = 8 (groups in two parts) and micro 8 = G (whole groups + one norm-only split group)."""
    cfg = make_config(model="tiny-random", prompts_per_step=4, group_size=8, lr=3e-3, samples=10_000, max_steps=6,
                      max_new_tokens=4, eval_every=10_000, micro_batch_size=micro)
    out = train(cfg, tmp_path / f"m{micro}", model_tok=fresh(tiny), task=coin_task())
    rows = _lines(out / "metrics.jsonl")
    multi = [r for r in rows if r["groups/retained"] >= 2]
    assert len(multi) >= 3
    for r in rows:
        assert r["time/cpu_s"] > 0 and r["time/step_s"] > 0
    for r in multi:
        n_groups = r["groups/retained"]
        for k in ("noise/between_prompt", "noise/within_prompt", "noise/grad_sq_micro", "noise/grad_sq_prompt",
                  "noise/grad_sq_small", "noise/grad_sq_big"):
            assert r[k] is not None and math.isfinite(r[k]), (k, r)
        assert r["noise/group_size"] == 8 and r["noise/b_big"] == 8 * n_groups
        assert r["noise/b_small"] == 8 and r["noise/b_micro"] == 4
        assert r["train/micro_batches"] == (2 * n_groups if micro == 4 else n_groups + 1)
        g2, trace = noise.noise_estimates(r["noise/grad_sq_small"], r["noise/grad_sq_big"], 8, r["noise/b_big"])
        assert trace == pytest.approx(8 * r["noise/between_prompt"] + r["noise/within_prompt"], rel=1e-6)
        if g2 > 0:  # a single step's |G|^2 estimate can be negative: then the per-step ratio is undefined
            assert r["noise/b_simple"] == pytest.approx(trace / g2, rel=1e-9)
        else:
            assert r["noise/b_simple"] is None
        assert r["noise/within_prompt"] > 0  # parts of a prompt are noisier than the prompt: tr Sigma_w > 0
    assert sum(r["noise/b_simple"] is not None for r in multi) >= len(multi) // 2
    sm = noise.b_simple_smoothed(pd.DataFrame(rows).astype({"noise/b_simple": float}))
    assert sm["within_prompt"].notna().all() and sm["between_prompt"].notna().all()
