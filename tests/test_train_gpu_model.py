"""The GPU presets (rlbatch.train.gpu_model, rlbatch.study.gpu_preset), the trainer's bf16 precision, and the CPU
rehearsal of benchmarks/gpu_study.sh: every code path of the GPU study runs here at toy size on CPU."""

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from rlbatch.errors import UserError
from rlbatch.study.demo import DEMOS
from rlbatch.study.ladder import build_ladder
from rlbatch.train.config import make_config
from rlbatch.train.gpu_model import GPU_ARCHS, GPU_WARM, cache_key, param_count, warm_start_info
from rlbatch.train.model_base import char_tokenizer, sft_batch
from rlbatch.train.models import load_model
from rlbatch.train.precision import precision_context
from rlbatch.train.tasks import Item
from rlbatch.train.trainer import train

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def toy_cache(tmp_path_factory):
    """A model cache holding the ``gpu-small-toy`` preset, warm-started once for this module (~12 CPU-s)."""
    cache = tmp_path_factory.mktemp("rlbatch_cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLBATCH_CACHE", str(cache))
        load_model("gpu-small-toy")
        yield cache


def gpt2_params(n_layer: int, d: int, vocab: int, positions: int) -> int:
    """GPT-2 parameters by hand: per layer 2 LayerNorms (4d), c_attn (3d^2 + 3d), attn c_proj (d^2 + d), c_fc (4d^2 +
    4d), mlp c_proj (4d^2 + d) = 12 d^2 + 13 d; token and position embeddings; the final LayerNorm; the LM head is
    tied to the token embedding."""
    return n_layer * (12 * d * d + 13 * d) + vocab * d + positions * d + 2 * d


def test_param_count_of_the_gpu_presets_by_hand():
    vocab = len(char_tokenizer())  # <pad> <eos> <unk> 0-9 + =
    assert vocab == 15
    assert param_count("gpu-small") == gpt2_params(8, 512, 15, 32) == 25_244_160  # tens of millions
    assert param_count("gpu-small-toy") == gpt2_params(2, 64, 15, 32) == 103_104


def test_sft_batch_labels_only_the_answer_and_eos():
    tok = char_tokenizer()
    x, y = sft_batch([Item("12+34=", "64"), Item("9+9=", "81")], tok, "cpu")
    ids = {c: tok.convert_tokens_to_ids(c) for c in "0123456789+="}
    eos, pad = tok.eos_token_id, tok.pad_token_id
    row0 = [ids[c] for c in "12+34=64"] + [eos]
    assert x.tolist() == [row0, [ids[c] for c in "9+9=81"] + [eos, pad, pad]]
    assert y.tolist() == [[-100] * 6 + [ids["6"], ids["4"], eos], [-100] * 4 + [ids["8"], ids["1"], eos, -100, -100]]


def test_toy_preset_warm_starts_to_its_probe_score_and_is_cached(toy_cache, monkeypatch):
    monkeypatch.setenv("RLBATCH_CACHE", str(toy_cache))
    info = warm_start_info("gpu-small-toy", "cpu")
    assert info is not None and info["device"] == "cpu"
    assert info["probe_score"] >= GPU_WARM["gpu-small-toy"]["start_score"]
    assert 0 < info["steps"] <= GPU_WARM["gpu-small-toy"]["max_steps"]
    assert info["steps"] % GPU_WARM["gpu-small-toy"]["check_every"] == 0  # stopped at a check
    assert (toy_cache / cache_key("gpu-small-toy", "cpu") / "model.safetensors").is_file()
    assert warm_start_info("gpu-small-toy", "cuda") is None  # the device type is part of the key
    a, tok = load_model("gpu-small-toy")
    b, _ = load_model("gpu-small-toy")  # from the cache: the same weights
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert a.config.n_embd == GPU_ARCHS["gpu-small-toy"]["n_embd"] and tok.padding_side == "left"
    assert next(a.parameters()).dtype == torch.float32


def test_bf16_precision_context_casts_matmuls_and_never_serves_stale_weights():
    lin = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with precision_context("bf16", "cpu"):
        y1 = lin(x)
        with torch.no_grad():
            lin.weight.add_(1.0)  # an optimizer step inside the same autocast region
        y2 = lin(x)
    assert y1.dtype == torch.bfloat16 and lin.weight.dtype == torch.float32
    assert not torch.equal(y1, y2)  # autocast's weight cache would return the pre-step copy
    with precision_context("fp32", "cpu"):
        assert lin(x).dtype == torch.float32
    with pytest.raises(UserError, match="precision"):
        precision_context("fp16", "cpu")


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_training_steps_on_the_toy_preset_in_each_precision(toy_cache, monkeypatch, tmp_path, precision):
    monkeypatch.setenv("RLBATCH_CACHE", str(toy_cache))
    model, tok = load_model("gpu-small-toy")
    before = [p.detach().clone() for p in model.parameters()]
    cfg = make_config(model="gpu-small-toy", prompts_per_step=4, group_size=8, lr=1e-3, samples=10**6, max_steps=2,
                      max_new_tokens=5, eval_every=10**6, eval_size=16, micro_batch_size=2048, checkpoint_every=100,
                      precision=precision, threads=1, noise_split_groups=0)
    out = train(cfg, tmp_path / precision, model_tok=(model, tok))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert json.loads((out / "run.json").read_text())["config"]["precision"] == precision
    trained = [r for r in rows if r["batch/retained"] > 0]
    assert trained, "every group was filtered in both steps"
    for r in trained:
        assert r["train/micro_batches"] == 1  # the cap 2048 above B = 32: the whole batch in one pass
        assert torch.isfinite(torch.tensor([r["loss"], r["grad_norm/actor"]])).all()
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay float32
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), before))


def test_cli_rejects_an_unknown_precision(tmp_path):
    res = subprocess.run([sys.executable, "-m", "rlbatch.cli", "train", "--model", "tiny-random", "-P", "2", "-G",
                          "2", "--max-steps", "1", "--precision", "fp16", "--out", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "precision" in res.stderr and "Traceback" not in res.stderr


def test_micro_batch_size_is_a_cap_above_the_batch():
    cfg = make_config(prompts_per_step=2, group_size=8, micro_batch_size=2048)
    assert cfg.resolved_micro() == 16
    assert make_config(prompts_per_step=512, group_size=8, micro_batch_size=2048).resolved_micro() == 2048
    with pytest.raises(UserError, match="micro-batches"):
        make_config(prompts_per_step=3, group_size=2, micro_batch_size=4).resolved_micro()


def test_gpu_study_preset_reaches_past_the_critical_batch_with_a_control():
    d = DEMOS["gpu-small"]
    assert d["model"] == "gpu-small" and max(d["batches"]) >= 8192 and d["seeds"] >= 2
    assert d["options"]["precision"] == "bf16" and d["fixed_lr_control"] in d["batches"]
    specs = build_ladder(base_batch=d["base_batch"], base_lr=d["base_lr"], batches=d["batches"], rule=d["rule"],
                        group_sizes=d["group_sizes"], seeds=d["seeds"], fixed_lr_control=d["fixed_lr_control"],
                        samples=d["samples"], model=d["model"], task=d["task"], options=d["options"])
    assert len(specs) == (len(d["batches"]) + 1) * d["seeds"]  # the ladder and the control, every seed
    top = max(specs, key=lambda s: s.batch_size)
    assert top.lr == pytest.approx(d["base_lr"] * (top.batch_size / d["base_batch"]) ** 0.5)  # the sqrt rule
    toy = DEMOS["gpu-small-toy"]
    assert toy["options"] == {**d["options"], **{k: toy["options"][k] for k in
                                                 ("eval_every", "eval_size", "eval_batch_size", "stop_at_target",
                                                  "max_time_s")}}  # the rehearsal differs only in its sizes


def _fill_script():
    spec = importlib.util.spec_from_file_location("gpu_study_report", REPO / "benchmarks" / "gpu_study_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_results_page_names_every_missing_file(tmp_path):
    page = _fill_script().build_page(tmp_path)
    for name in ("machine.json", "profile.json", "report.md / report.json", "async.json"):
        assert f"`{name}` is missing" in page
    assert page.count("## ") >= 6


def test_gpu_study_script_rehearses_every_phase_on_cpu(toy_cache, tmp_path):
    """``bash benchmarks/gpu_study.sh --tiny`` end to end (~60-80 CPU-s with the cached toy model): every phase
    succeeds and the eight files the device tool brings back are written, the run stores packed without checkpoints."""
    out = tmp_path / "out"
    env = {**os.environ, "PY": sys.executable, "RLBATCH_CACHE": str(toy_cache), "GPU_STUDY_WORK": str(tmp_path / "w"),
           "OMP_NUM_THREADS": "1"}
    res = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_study.sh"), "--tiny", "--out", str(out)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["async.json", "gpu_h200.md", "gpu_study.log", "machine.json", "profile.json", "report.json",
                     "report.md", "runs.tar.gz"]  # at most 8 files come back from the device
    machine = json.loads((out / "machine.json").read_text())
    assert machine["device"] == "cpu" and machine["warm_start"]["preset"] == "gpu-small-toy"
    prof = json.loads((out / "profile.json").read_text())
    assert [r["batch_size"] for r in prof["batches"]] == [1, 4, 16, 64]
    assert all(0 < r["roofline_fraction"] for r in prof["batches"])
    rep = json.loads((out / "report.json").read_text())
    assert sorted(r["batch_size"] for r in rep["accounting"]) == [16, 64, 64, 256]  # the ladder + the control
    assert {t["state"] for t in rep["sweep"]["trials"]} == {"finished"}
    assert json.loads((out / "async.json").read_text())["async_speedup"]["median"] > 0
    with tarfile.open(out / "runs.tar.gz") as tar:
        names = tar.getnames()
    assert not [n for n in names if n.endswith("checkpoint.pt")]
    assert sum(n.endswith("metrics.jsonl") for n in names) == 4 and "study/sweep.json" in names
    page = (out / "gpu_h200.md").read_text()
    assert "is missing" not in page and "#### Accounting" in page and "2.29x" in page
    assert all(os.path.getsize(out / f) < 16 * 2**20 for f in files)
