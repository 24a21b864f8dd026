"""Prompt sharing in the update: the responses of one prompt packed after a single copy of it under a
block attention mask give the same log-probabilities and the same gradient as one padded row per response, for
GPT-2 (learned positions) and Llama (rotary positions), with the sdpa and eager attention paths, unequal prompt
lengths, one-token responses and groups split over micro-batches; and the layout is only used where it pays."""

import copy

import pytest

torch = pytest.importorskip("torch")

from rlbatch.train.grpo import accumulate_gradients, packing_plan, token_logprobs, trim  # noqa: E402
from rlbatch.train.rollout import Rollout, generate, positions  # noqa: E402

torch.set_num_threads(1)


def _reference(model, ro: Rollout, temperature: float) -> torch.Tensor:
    """log softmax(logits / T) over the whole padded prompt + response, read at the response tokens."""
    ids, mask = ro.input_ids, ro.attention_mask
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.float()
    L, T = ro.prompt_ids.shape[1], ro.response_ids.shape[1]
    lp = torch.log_softmax(logits[:, L - 1:L - 1 + T] / temperature, -1)
    return lp.gather(-1, ro.response_ids[..., None]).squeeze(-1)


def _gpt2(attn: str):
    from rlbatch.train.models import load_model

    model, tok = load_model("tiny-random")
    model.config._attn_implementation = attn
    return model, tok


def _llama(attn: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    from rlbatch.train.model_base import char_tokenizer

    tok = char_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, attn_implementation=attn)
    return LlamaForCausalLM(cfg).eval(), tok


def _rollout(model, tok, group: int = 4):
    prompts = [[3, 4, 5, 6, 7, 8], [9, 10], [11, 12, 3, 4]]  # unequal lengths: left padding inside the batch
    return generate(model, tok, prompts, 6, num_samples=group, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_log_probs_equal_the_padded_rows(make, attn):
    model, tok = make(attn)
    ro = _rollout(model, tok)
    lens = ro.response_mask.sum(1)
    assert int(lens.min()) < int(lens.max())  # responses of several lengths in one group
    assert packing_plan(model, ro) is not None
    m = ro.response_mask.bool()
    with torch.no_grad():
        for t in (1.0, 0.6):
            ref = _reference(model, ro, t)
            torch.testing.assert_close(token_logprobs(model, ro, t, share_prompts=True)[m], ref[m],
                                       rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(token_logprobs(model, ro, t, share_prompts=False)[m], ref[m],
                                       rtol=1e-5, atol=1e-5)
        packed = token_logprobs(model, ro, 1.0, share_prompts=True)
        assert bool(torch.isfinite(packed).all())  # masked columns too: the loss multiplies them by 0


def test_one_token_responses_and_a_single_row_per_prompt():
    model, tok = _gpt2("sdpa")
    ro = _rollout(model, tok)
    # every response cut to its first token: nothing after the prompt is context, token 0 comes from the prompt
    one = Rollout(ro.prompt_ids, ro.prompt_mask, ro.response_ids[:, :1], ro.response_mask[:, :1], ro.texts)
    m = one.response_mask.bool()
    with torch.no_grad():
        torch.testing.assert_close(token_logprobs(model, one, share_prompts=True)[m], _reference(model, one, 1.0)[m],
                                   rtol=1e-5, atol=1e-5)
    # one row per prompt: nothing is shared, the padded layout is used
    assert packing_plan(model, ro.select([0, 4, 8])) is None


@pytest.mark.parametrize("micro", [2, 4, 8])
def test_update_gradient_is_the_same_with_and_without_sharing(micro):
    """Whole groups (micro 4, 8) and groups split in parts (micro 2), with the within-prompt noise split: the
    accumulated gradient and the noise inputs agree."""
    model, tok = _gpt2("sdpa")
    ro = _rollout(model, tok)
    adv = torch.linspace(-1.5, 1.5, ro.response_ids.shape[0])
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    ra = accumulate_gradients(a, ro, adv, micro, 0.2, group_size=4, split_groups=1, temperature=0.7,
                              share_prompts=True)
    rb = accumulate_gradients(b, ro, adv, micro, 0.2, group_size=4, split_groups=1, temperature=0.7,
                              share_prompts=False)
    ga = torch.cat([p.grad.flatten() for p in a.parameters()])
    gb = torch.cat([p.grad.flatten() for p in b.parameters()])
    assert float(gb.norm()) > 0
    torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6)
    assert ra.n_micro == rb.n_micro and ra.n_tokens == rb.n_tokens
    for f in ("grad_sq_small", "grad_sq_big", "grad_sq_micro", "grad_sq_prompt"):
        x, y = getattr(ra, f), getattr(rb, f)
        assert (x != x and y != y) or x == pytest.approx(y, rel=1e-4), f


def test_packing_is_chosen_only_where_it_is_cheaper():
    """Long responses after a short prompt: one row per response costs less attention than one packed sequence of
    all of them, so the padded layout stays; a long prompt with short responses packs."""
    model, tok = _gpt2("sdpa")
    n, T = 8, 24
    short_prompt = Rollout(torch.full((n, 2), 5), torch.ones(n, 2, dtype=torch.long),
                           torch.full((n, T), 6), torch.ones(n, T, dtype=torch.long), [""] * n)
    long_prompt = Rollout(torch.full((n, 24), 5), torch.ones(n, 24, dtype=torch.long),
                          torch.full((n, 2), 6), torch.ones(n, 2, dtype=torch.long), [""] * n)
    assert packing_plan(model, trim(long_prompt)) is not None
    # hidden size 128: padded 8 x 25 tokens (81 M units) vs one packed row of 2 + 8 x 23 = 186 (91 M, attention)
    assert packing_plan(model, trim(short_prompt)) is None
    model.config._attn_implementation = "flash_attention_2"  # no custom masks there
    assert packing_plan(model, trim(long_prompt)) is None
