"""The GPU presets' model: the ``tiny`` preset's recipe (a GPT-2-style character model on the ``arithmetic`` task,
:func:`rlbatch.train.models.char_tokenizer`) widened to tens of millions of parameters, warm-started by our own code
on the device it is loaded on (no hub download), then cached under ``$RLBATCH_CACHE``.

Presets (:data:`GPU_ARCHS`):

- ``gpu-small``: 8 layers, width 512, 8 heads, 32 positions: 25.3 M parameters (:func:`param_count`). Meant for one
  GPU (the study of ``benchmarks/gpu_study.sh``); on 2 CPU cores its warm start alone takes many minutes.
- ``gpu-small-toy``: the same recipe at width 64 and 2 layers (0.1 M parameters): the CPU rehearsal of the GPU
  study (``gpu_study.sh --tiny``) and the test suite.

Warm start (:func:`warm_start_to_score`): AdamW at a constant lr on the supervised loss of the answer tokens + EOS
(as :func:`rlbatch.train.models.warm_start`), but stopped at the first check (every ``check_every`` steps) where the
greedy score on a fixed probe of 256 *training* problems reaches ``start_score``, so that GRPO starts from the same
score whatever the width and the device's floating-point reduction order (a fixed step count, calibrated for
``tiny`` on 2 CPU threads, would leave a 200x wider model somewhere unknown). The held-out evaluation items are never
seen. The weights are a function of the recipe and of the device type that built them (CUDA and CPU kernels round
differently), so the cache key holds both; unlike ``tiny``'s, this warm start is not bit-identical across machines.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from rlbatch.runstore import atomic_write_text
from rlbatch.train.model_base import cache_root, char_tokenizer, save_pretrained_atomic, sft_batch
from rlbatch.train.rollout import evaluate
from rlbatch.train.tasks import Task, arithmetic_task

#: Architecture of each GPU preset (GPT-2 config fields); part of the cache key.
GPU_ARCHS: dict[str, dict[str, int]] = {
    "gpu-small": dict(n_layer=8, n_embd=512, n_head=8, n_positions=32),
    "gpu-small-toy": dict(n_layer=2, n_embd=64, n_head=4, n_positions=32),
}
#: Warm-start recipe of each GPU preset (:func:`warm_start_to_score`); part of the cache key. ``start_score`` ~ the
#: ``tiny`` preset's held-out score after its warm start (0.24), so the GPU study starts where the CPU one does. The
#: score can jump between checks (the toy went from under 0.2 to 0.37 in 20 steps at lr 1e-2), and a start above
#: the study's target (0.45) would end every trial at its first evaluation: ``gpu-small`` checks every 5 steps (a
#: greedy pass over 256 probe items, milliseconds on a GPU) at a lr 1/width-scaled from tiny's 3e-3 (not run yet).
GPU_WARM: dict[str, dict[str, Any]] = {
    "gpu-small": dict(batch=256, lr=5e-4, seed=0, start_score=0.25, check_every=5, max_steps=3000),
    "gpu-small-toy": dict(batch=64, lr=3e-3, seed=0, start_score=0.2, check_every=20, max_steps=1500),
}
GPU_VERSION = "v1"
#: Training problems the warm start checks its score on (drawn once with this seed; never the held-out items).
PROBE_SIZE, PROBE_SEED = 256, 12345


def gpu_config(name: str, tokenizer=None):
    """The ``GPT2Config`` of preset ``name`` (dropout off) for :func:`rlbatch.train.models.char_tokenizer`.
    Raises ``KeyError`` for a name not in :data:`GPU_ARCHS`."""
    arch = GPU_ARCHS[name]
    tokenizer = tokenizer or char_tokenizer()
    return GPT2Config(vocab_size=len(tokenizer), resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                      bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, **arch)


def param_count(name: str) -> int:
    """Parameters of preset ``name``, counted on a model built on the ``meta`` device (no memory allocated; the
    LM head is tied to the token embedding and counted once)."""
    with torch.device("meta"):
        model = GPT2LMHeadModel(gpu_config(name))
    return sum(p.numel() for p in model.parameters())


def gpu_model(name: str, seed: int = 0, tokenizer=None):
    """A randomly initialised model of preset ``name`` (seeded), on the CPU."""
    tokenizer = tokenizer or char_tokenizer()
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(gpu_config(name, tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def warm_start_to_score(model, tokenizer, *, batch: int, lr: float, seed: int, start_score: float,
                        check_every: int, max_steps: int) -> dict[str, float]:
    """Supervised warm start on the ``arithmetic`` training pool (module docstring), on the model's device, until
    the greedy probe score reaches ``start_score`` (checked every ``check_every`` steps) or ``max_steps``.
    Returns ``{"steps", "probe_score", "loss", "seconds"}``. The model is left in eval mode."""
    task = arithmetic_task(seed=0)
    probe_idx = np.random.default_rng(PROBE_SEED).choice(task.train_size, PROBE_SIZE, replace=False)
    probe = Task("arithmetic-probe", train=task.train, eval_items=[task.train[i] for i in probe_idx],
                 scorer=task.scorer)
    device = next(model.parameters()).device
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    t0 = time.perf_counter()
    steps, score, loss = 0, 0.0, float("nan")
    while steps < max_steps:
        model.train()
        for _ in range(min(check_every, max_steps - steps)):
            x, y = sft_batch(task.sample(rng, batch), tokenizer, device)
            out = model(input_ids=x, attention_mask=(y != -100) | (x != tokenizer.pad_token_id), labels=y).loss
            opt.zero_grad(set_to_none=True)
            out.backward()
            opt.step()
            steps += 1
        loss = float(out.detach())
        model.eval()
        score = evaluate(model, tokenizer, probe, max_new_tokens=5, batch_size=PROBE_SIZE)[0]
        if score >= start_score:
            break
    model.eval()
    return {"steps": steps, "probe_score": score, "loss": loss, "seconds": time.perf_counter() - t0}


def cache_key(name: str, device_type: str) -> str:
    """Cache directory name of preset ``name`` warm-started on ``device_type`` (``cpu``, ``cuda``)."""
    parts = {**GPU_ARCHS[name], **GPU_WARM[name]}
    return f"{name}-{GPU_VERSION}-{device_type}-" + "-".join(f"{k}{v}" for k, v in parts.items())


def load_gpu_preset(name: str, device: str = "cpu"):
    """``(model, tokenizer)`` of GPU preset ``name``: warm-started on ``device`` the first time
    (:func:`warm_start_to_score`; its result is saved beside the weights as ``warm_start.json``), then read from the
    cache. The model is returned on the CPU in float32 (``load_model`` moves it)."""

    dev = torch.device(device)
    target = cache_root() / cache_key(name, dev.type)
    if not (target / "model.safetensors").exists():
        tok = char_tokenizer()
        model = gpu_model(name, GPU_WARM[name]["seed"], tok).to(dev)
        info = warm_start_to_score(model, tok, **GPU_WARM[name])
        model.to("cpu")
        save_pretrained_atomic(model, tok, target)
        atomic_write_text(target / "warm_start.json", json.dumps({**info, "device": str(dev)}) + "\n")
    model = AutoModelForCausalLM.from_pretrained(target)
    tok = PreTrainedTokenizerFast.from_pretrained(target)
    tok.padding_side = "left"
    return model, tok


def warm_start_info(name: str, device_type: str) -> dict | None:
    """The saved result of preset ``name``'s warm start on ``device_type`` (steps, probe score, loss, seconds), or
    None when it has not been built."""

    path = cache_root() / cache_key(name, device_type) / "warm_start.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
