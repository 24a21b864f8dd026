"""Scale of the embedded trainer's generation: chunks of at most ``max_concurrent`` rows (the KV cache never holds
the whole batch), each prompt prefilled once and its cache expanded to its samples, finished rows dropped from the
batch; none of it changes what greedy decoding produces."""

import pytest

torch = pytest.importorskip("torch")

from rlbatch.train.rollout import GenStats, generate, kv_bytes_per_sequence, render_prompt  # noqa: E402

from _train_helpers import coin_task  # noqa: E402

torch.set_num_threads(1)


def test_chunked_prefill_once_greedy_equals_one_row_at_a_time(tiny):
    model, tok = tiny
    items = coin_task().train[:6]
    prompts = [render_prompt(it, tok) for it in items]
    prompts[1] = prompts[1][1:]  # unequal lengths: left padding differs between chunks
    whole = generate(model, tok, prompts, 6, greedy=True, num_samples=3)
    rows = [p for p in prompts for _ in range(3)]
    single = [generate(model, tok, [p], 6, greedy=True) for p in rows]
    chunked = generate(model, tok, prompts, 6, greedy=True, num_samples=3, max_concurrent=4)
    assert whole.texts == [s.texts[0] for s in single] == chunked.texts
    assert torch.equal(whole.response_mask, chunked.response_mask)
    assert torch.equal(whole.response_ids, chunked.response_ids)
    assert torch.equal(whole.prompt_mask, chunked.prompt_mask) and torch.equal(whole.prompt_ids, chunked.prompt_ids)
    for i, s in enumerate(single):  # each row's tokens, whatever the batch it ran in
        n = int(s.response_mask.sum())
        assert whole.response_ids[i, :n].tolist() == s.response_ids[0, :n].tolist()


def test_sampling_with_chunks_is_reproducible_and_grouped(tiny):
    model, tok = tiny
    prompts = [render_prompt(it, tok) for it in coin_task().train[:4]]
    a = generate(model, tok, prompts, 5, num_samples=4, max_concurrent=8, generator=torch.Generator().manual_seed(3))
    b = generate(model, tok, prompts, 5, num_samples=4, max_concurrent=8, generator=torch.Generator().manual_seed(3))
    assert a.texts == b.texts and a.response_ids.shape[0] == 16
    for p in range(4):  # rows p*G .. p*G+G-1 carry prompt p
        assert all(a.prompt_ids[p * 4 + j][a.prompt_mask[p * 4 + j].bool()].tolist() == prompts[p] for j in range(4))


def _long_context_model():
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlbatch.train.model_base import char_tokenizer

    tok = char_tokenizer()
    cfg = GPT2Config(vocab_size=len(tok), n_layer=1, n_embd=32, n_head=2, n_positions=512, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg).eval(), tok


def test_peak_generation_memory_is_flat_in_batch_beyond_max_concurrent():
    """A random model with a 512-token context (508-token prompts + 4 new tokens), G = 8: the KV cache held at once
    is the same at B = 256 and B = 2048 under ``max_concurrent=256`` (measured on the cache tensors), and equals
    256 sequences' worth; without the cap it grows with B."""
    model, tok = _long_context_model()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, len(tok), (508,), generator=g).tolist() for _ in range(256)]
    peaks = {}
    for B in (256, 2048):
        st = GenStats()
        ro = generate(model, tok, prompts[:B // 8], 4, num_samples=8, max_concurrent=256, stats=st,
                      generator=torch.Generator().manual_seed(1))
        assert ro.response_ids.shape[0] == B and st.chunks == B // 256 and st.peak_sequences == 256
        peaks[B] = st.peak_kv_bytes
    assert peaks[2048] == peaks[256]
    kv = kv_bytes_per_sequence(model, 508 + 3)  # the cache at the last step holds 508 + 3 positions
    assert 256 * kv_bytes_per_sequence(model, 508) <= peaks[256] <= 256 * kv + 3 * 256 * len(tok) * 4
    st = GenStats()
    generate(model, tok, prompts[:64], 4, num_samples=8, stats=st, generator=torch.Generator().manual_seed(1))
    assert st.peak_sequences == 512 and st.peak_kv_bytes > 1.9 * peaks[256]  # uncapped: grows with B


def test_trainer_records_peak_memory_and_chunking(tiny, tmp_path):
    import json

    from rlbatch.train.config import make_config
    from rlbatch.train.trainer import train

    from _train_helpers import fresh

    cfg = make_config(model="tiny-random", prompts_per_step=4, group_size=4, lr=1e-3, samples=10**6, max_steps=2,
                      max_new_tokens=4, eval_size=4, micro_batch_size=4, max_concurrent_sequences=4,
                      micro_batch_tokens=24, threads=1)
    out = train(cfg, tmp_path / "run", model_tok=fresh(tiny), task=coin_task())
    meta = json.loads((out / "run.json").read_text())
    assert meta["max_concurrent_sequences"] == 4 and meta["peak_concurrent_sequences"] == 4
    assert meta["peak_memory_bytes"] > 2**20 and meta["peak_kv_cache_bytes"] > 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    # 24-token budget: prompts of 6 chars + <= 4 response tokens -> at most 2 responses per micro-batch
    assert all(r["train/micro_batches"] >= r["batch/retained"] // 2 for r in lines if r["batch/retained"])
