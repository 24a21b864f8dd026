"""Speed changes of the trainer keep its numbers: padding trim, LM head on scored positions only, fused GELU and
fused AdamW (tiny random model; seconds)."""

import copy

import pytest

torch = pytest.importorskip("torch")

from rlbatch.train.grpo import make_adamw, token_logprobs, trim  # noqa: E402
from rlbatch.train.rollout import Rollout, generate  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny():
    from rlbatch.train.models import load_model

    return load_model("tiny-random")


def _full_logprobs(model, ro: Rollout) -> torch.Tensor:
    """Reference: log-softmax over every position of prompt + response (the pre-optimisation computation)."""
    from rlbatch.train.rollout import positions

    ids, mask = ro.input_ids, ro.attention_mask
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    L, T = ro.prompt_ids.shape[1], ro.response_ids.shape[1]
    lp = torch.log_softmax(logits[:, L - 1:L - 1 + T].float(), -1)
    return lp.gather(-1, ro.response_ids[..., None]).squeeze(-1)


def test_trim_and_scored_positions_keep_log_probs(tiny):
    model, tok = tiny
    prompts = [[3, 4, 5, 6], [7, 8], [9, 10, 11]]  # unequal: left padding
    ro = generate(model, tok, prompts, 6, generator=torch.Generator().manual_seed(0))
    # rows 1-2 only, with their own widths: the all-pad prompt column and all-pad response columns go
    sub = ro.select([1, 2])
    t = trim(sub)
    assert t.prompt_ids.shape[1] == 3 and bool(t.prompt_mask.any(0).all())
    assert t.response_ids.shape[1] == int(sub.response_mask.sum(1).max())
    with torch.no_grad():
        ref = _full_logprobs(model, sub) * sub.response_mask
        got = token_logprobs(model, t) * t.response_mask
    torch.testing.assert_close(got, ref[:, :got.shape[1]], rtol=1e-5, atol=1e-5)
    assert float(ref[:, got.shape[1]:].abs().sum()) == 0.0  # only padding was cut


def test_fast_gelu_matches_new_gelu():
    from transformers.activations import GELUTanh, NewGELUActivation

    from rlbatch.train.model_base import char_tokenizer
    from rlbatch.train.models import fast_activations, tiny_model

    m = tiny_model(0, char_tokenizer())
    slow = copy.deepcopy(m)
    assert fast_activations(m) == 2 and not any(isinstance(x, NewGELUActivation) for x in m.modules())
    assert sum(isinstance(x, GELUTanh) for x in m.modules()) == 2
    x = torch.randint(3, 15, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(m(input_ids=x).logits, slow(input_ids=x).logits, rtol=1e-5, atol=1e-5)


def test_fused_adamw_takes_the_same_steps():
    torch.manual_seed(0)
    a = torch.nn.Linear(5, 3)
    b = copy.deepcopy(a)
    oa = make_adamw(a.parameters(), lr=1e-2, weight_decay=0.1)
    ob = torch.optim.AdamW(b.parameters(), lr=1e-2, weight_decay=0.1, foreach=False)
    x = torch.randn(7, 5)
    for _ in range(3):
        for m, o in ((a, oa), (b, ob)):
            o.zero_grad()
            m(x).pow(2).sum().backward()
            o.step()
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
