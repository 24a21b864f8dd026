"""The loss's log-probabilities are taken at the sampling temperature (verl's ``logits.div_(temperature)``, TRL's
``logits / self.temperature``): the ratio is against the distribution the tokens were drawn from."""

import copy

import pytest

torch = pytest.importorskip("torch")

from rlbatch.train.grpo import accumulate_gradients, token_logprobs  # noqa: E402
from rlbatch.train.rollout import generate, positions, render_prompt  # noqa: E402

from _train_helpers import coin_task, fresh  # noqa: E402

torch.set_num_threads(1)


def _reference_logprobs(model, ro, temperature):
    """log softmax(logits / T) over prompt + response, read at the response tokens (no shortcut)."""
    ids, mask = ro.input_ids, ro.attention_mask
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.float()
    L, T = ro.prompt_ids.shape[1], ro.response_ids.shape[1]
    lp = torch.log_softmax(logits[:, L - 1:L - 1 + T] / temperature, -1)
    return lp.gather(-1, ro.response_ids[..., None]).squeeze(-1)


def _rollout(model, tok):
    items = coin_task().train[:3]
    return generate(model, tok, [render_prompt(it, tok) for it in items], 5, temperature=0.5, num_samples=2,
                    generator=torch.Generator().manual_seed(0))


def test_token_logprobs_divide_the_logits_by_the_temperature(tiny):
    model, tok = fresh(tiny)
    ro = _rollout(model, tok)
    m = ro.response_mask.bool()
    with torch.no_grad():
        for t in (0.5, 1.0, 2.0):
            torch.testing.assert_close(token_logprobs(model, ro, t)[m], _reference_logprobs(model, ro, t)[m],
                                       rtol=1e-5, atol=1e-5)
        assert float((token_logprobs(model, ro, 0.5) - token_logprobs(model, ro, 1.0))[m].abs().max()) > 0.1


def test_loss_gradient_uses_the_temperature(tiny):
    """One on-policy update (ratio 1): the surrogate's gradient is that of -sum(A logp_T) / tokens at T = 0.5."""
    m1, tok = fresh(tiny)
    m2, m3 = copy.deepcopy(m1), copy.deepcopy(m1)
    ro = _rollout(m1, tok)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    accumulate_gradients(m1, ro, adv, micro_batch_size=2, clip_eps=0.2, temperature=0.5)
    lp = _reference_logprobs(m2, ro, 0.5)
    (-(adv[:, None] * lp * ro.response_mask).sum() / ro.response_mask.sum()).backward()
    accumulate_gradients(m3, ro, adv, micro_batch_size=2, clip_eps=0.2, temperature=1.0)
    g1, g2, g3 = (torch.cat([p.grad.flatten() for p in m.parameters()]) for m in (m1, m2, m3))
    torch.testing.assert_close(g1, g2, rtol=1e-4, atol=1e-6)
    assert float((g1 - g3).norm()) > 0.05 * float(g1.norm())  # raw logits give another gradient


def test_trainer_passes_its_temperature_to_the_loss(tiny, tmp_path, monkeypatch):
    import rlbatch.train.grpo as grpo
    from rlbatch.train.config import make_config
    from rlbatch.train.trainer import train

    seen = []
    real = grpo.token_logprobs

    def spy(model, ro, temperature=1.0, *rest):
        seen.append(temperature)
        return real(model, ro, temperature, *rest)

    monkeypatch.setattr(grpo, "token_logprobs", spy)
    cfg = make_config(model="tiny-random", prompts_per_step=4, group_size=4, lr=1e-3, samples=10**6, max_steps=2,
                      max_new_tokens=4, temperature=0.7, eval_size=4, micro_batch_size=4, mini_batch_size=8,
                      ppo_epochs=2, threads=1)
    train(cfg, tmp_path / "run", model_tok=fresh(tiny), task=coin_task())
    assert seen and set(seen) == {0.7}  # old log-probs and every update's log-probs
