"""The numeric precision of the trainer's forward passes (the update's and generation's, in both processes)."""

from __future__ import annotations

import contextlib

import torch

from rlbatch.errors import UserError


def precision_context(precision: str, device: str):
    """The context the trainer's forward passes run in: ``torch.autocast(device type, torch.bfloat16)`` for
    ``precision="bf16"`` (matmuls and attention in bfloat16, softmax / log-softmax / norms in float32, parameters
    untouched: mixed precision as in Micikevicius et al. 2018, without a loss scale, which bfloat16's float32
    exponent range makes unnecessary; the weights are cast afresh in every forward), a no-op context for ``"fp32"``.
    Raises :class:`UserError` for another value. The asynchronous generation process enters the same context
    (:mod:`rlbatch.train.async_rollout`)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise UserError(f"--precision must be fp32 or bf16, got {precision!r}", field="precision")
    # cache_enabled=False: the loop runs in one autocast region, and autocast's cache of bfloat16 weight copies lives
    # until the region exits, so it would keep serving the weights of before the first optimizer step
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False)
