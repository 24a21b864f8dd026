import json

import pytest

from rlbatch import profile as prof
from rlbatch.errors import UserError


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    """A tiny randomly initialised GPT-2 with a character-level WordLevel tokenizer, saved offline."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    chars = list("abcdefghijklmnopqrstuvwxyz0123456789 +-=")
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(chars)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(vocab), n_positions=64, n_embd=64, n_layer=2, n_head=4,
                     pad_token_id=0, eos_token_id=1, bos_token_id=1)
    model = GPT2LMHeadModel(cfg)
    d = tmp_path_factory.mktemp("tiny-gpt2")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_roofline_formula_by_hand():
    shape = {"param_bytes": 1_000_000, "n_params": 250_000, "kv_bytes_per_token": 1000, "n_layers": 2,
             "n_heads": 4, "head_dim": 16}
    # batch 4, context 100: bytes = 1e6 + 4*100*1000 = 1.4e6 -> 1.4e-3 s at 1 GB/s; flops tiny at 1 TFLOP/s
    tps, bound = prof.roofline_tokens_per_s(4, 100, shape, bandwidth_gbs=1.0, peak_tflops=1.0)
    assert bound == "memory" and tps == pytest.approx(4 / 1.4e-3)
    # compute bound when peak is tiny: flops = 2*250000*4 + 4*2*64*100*4 = 2_204_800 at 1e9 FLOP/s
    tps, bound = prof.roofline_tokens_per_s(4, 100, shape, bandwidth_gbs=1000.0, peak_tflops=1e-3)
    assert bound == "compute" and tps == pytest.approx(4 / 2.2048e-3)


def test_model_shape_tiny(tiny_gpt2):
    m = prof.resolve_model(str(tiny_gpt2))
    s = prof.model_shape(m)
    assert s["n_layers"] == 2 and s["n_heads"] == 4 and s["head_dim"] == 16
    assert s["kv_bytes_per_token"] == 2 * 2 * 4 * 16 * 4
    assert s["param_bytes"] == 4 * s["n_params"]


def test_profile_command_json(tiny_gpt2, tmp_path):
    from typer.testing import CliRunner

    from rlbatch.cli import app

    out = tmp_path / "prof"
    res = CliRunner().invoke(app, ["profile", "--model", str(tiny_gpt2), "--sequences", "1,2,4", "--new-tokens", "8",
                                   "--prompt-tokens", "8", "--device", "cpu", "--out", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["batch_size"] for r in rows] == [1, 2, 4]
    for r in rows:
        assert r["decode_tokens_per_s"] > 0 and r["roofline_tokens_per_s"] > 0
        assert r["roofline_fraction"] == pytest.approx(r["decode_tokens_per_s"] / r["roofline_tokens_per_s"])
        assert r["update_s"] > 0 and r["prefill_s"] > 0
    saved = json.loads((out / f"{tiny_gpt2.name}.json").read_text())
    assert saved["bandwidth_source"] == "measured" and saved["bandwidth_gbs"] > 0 and saved["peak_tflops"] > 0
    assert (out / f"{tiny_gpt2.name}.png").stat().st_size > 1000
    sec = prof.profile_section(out / f"{tiny_gpt2.name}.json")
    assert sec["json_key"] == "profile" and "profile" in sec["figures"] and "| B |" in sec["markdown"]
    assert prof.profile_section(rows)["json"]["batches"][0]["batch_size"] == 1


def test_profile_given_bandwidth_table(tiny_gpt2, tmp_path):
    p = prof.run_profile(str(tiny_gpt2), [2, 1], new_tokens=4, prompt_tokens=4, device="cpu", bandwidth_gbs=10.0,
                         peak_tflops=0.1, update=False)
    assert p["bandwidth_source"] == "given" and p["bandwidth_gbs"] == 10.0
    assert [r["batch_size"] for r in p["batches"]] == [1, 2]
    assert p["batches"][1]["gen_time_ratio"] == pytest.approx(p["batches"][1]["gen_s"] / p["batches"][0]["gen_s"])
    s = p["shape"]
    tps, _ = prof.roofline_tokens_per_s(1, 4 + 2.5, s, 10.0, 0.1)
    assert p["batches"][0]["roofline_tokens_per_s"] == pytest.approx(tps)


def test_profile_errors(tiny_gpt2, tmp_path):
    from typer.testing import CliRunner

    from rlbatch.cli import app

    with pytest.raises(UserError):
        prof.run_profile(str(tmp_path / "nope"), [1], device="cpu")
    with pytest.raises(UserError, match="positions"):
        prof.run_profile(str(tiny_gpt2), [1], new_tokens=60, prompt_tokens=10, device="cpu", bandwidth_gbs=1,
                         peak_tflops=1)
    res = CliRunner().invoke(app, ["profile", "--model", str(tiny_gpt2), "--sequences", "0"])
    assert res.exit_code != 0


def test_cached_decode_matches_full_forward(tiny_gpt2):
    """The manual KV-cache loop must be a real decode: same greedy tokens as recomputing the whole sequence."""
    import torch

    m = prof.resolve_model(str(tiny_gpt2)).eval()
    ids = torch.randint(0, m.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(1))
    seq = ids
    with torch.inference_mode():
        for _ in range(4):
            nxt = m(input_ids=seq).logits[:, -1:].argmax(-1)
            seq = torch.cat([seq, nxt], 1)
        out = m(input_ids=ids, use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        got = [tok]
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        kw = "cache" if "cache" in __import__("inspect").signature(m.forward).parameters else "past_key_values"
        for _ in range(3):
            out = m(input_ids=tok, use_cache=True, **{kw: cache})
            cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
            got.append(tok)
    assert torch.equal(torch.cat(got, 1), seq[:, 5:])


def test_profile_tiny_preset(tmp_path):
    p = prof.run_profile("tiny", [1, 2], new_tokens=4, prompt_tokens=4, device="cpu", bandwidth_gbs=10.0,
                         peak_tflops=0.1)
    assert [r["batch_size"] for r in p["batches"]] == [1, 2]
    assert all(r["roofline_fraction"] > 0 for r in p["batches"])
