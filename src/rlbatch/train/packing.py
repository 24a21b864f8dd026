"""Sequence packing for the update's log-probs: the plan that lays a batch's responses after one copy of each shared
prompt (a group's G responses share its prompt), and the packed forward pass it drives (:func:`packed_logprobs`), with
the log-prob of the sampled tokens (:func:`_logp`). The GRPO update that uses it: :mod:`rlbatch.train.grpo`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlbatch.train.rollout import Rollout


def _logp(logits: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    return logits.gather(-1, tokens[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


@dataclass
class PackingPlan:
    """Where every token of a packed micro-batch comes from (:func:`packing_plan`): ``src_row``/``src_col`` [R, S]
    index ``rollout.input_ids`` (prompt columns, then response columns), ``pos`` [R, S] position ids, ``seg`` [R, S]
    the segment of each packed token (0: the shared prompt, j >= 1: the j-th response of that prompt, -1: padding),
    ``row`` [N] and ``col`` [N, T] the packed position whose logits predict response token t of rollout row n,
    ``keep`` the number of trailing packed positions the LM head must run on; ``ids`` [R, S] and ``mask``
    [R, 1, S, S] (bool) the packed tokens and attention mask when computed ahead (:func:`packed_inputs`)."""

    src_row: torch.Tensor
    src_col: torch.Tensor
    pos: torch.Tensor
    seg: torch.Tensor
    row: torch.Tensor
    col: torch.Tensor
    keep: int
    ids: torch.Tensor | None = None
    mask: torch.Tensor | None = None


#: Packing is used when its estimated forward cost is below this fraction of the padded-row layout's.
PACK_GAIN = 0.8
#: ... and its block attention mask (packed rows x length^2 booleans) stays below this many elements.
PACK_MAX_MASK = 2 ** 26


def packing_plan(model, rollout: Rollout) -> PackingPlan | None:
    """The packed layout of ``rollout`` ([N, ...], rows that share a prompt consecutive) or None when it would not
    pay: no prompt is shared, the model's attention takes no custom mask (only ``sdpa`` and ``eager`` do), the mask
    would exceed :data:`PACK_MAX_MASK` elements, or the estimated forward cost (per layer ``24 d^2`` per token for
    the projections and MLP, ``4 d`` per attended query-key pair, ``d`` the hidden size) is above
    :data:`PACK_GAIN` x that of one padded row per response. Packed row r holds prompt r's real tokens (positions
    0..lp-1), then for each of its responses the tokens that are context for a scored token (all but the last,
    positions lp..), padded on the right to the longest packed row."""
    impl = getattr(model.config, "_attn_implementation", None) or "eager"
    if impl not in ("sdpa", "eager"):
        return None
    N, L = rollout.prompt_ids.shape
    T = rollout.response_ids.shape[1]
    if N < 2:
        return None
    pi, pm = rollout.prompt_ids, rollout.prompt_mask
    new = torch.ones(N, dtype=torch.bool, device=pi.device)
    new[1:] = ((pi[1:] != pi[:-1]) | (pm[1:] != pm[:-1])).any(1)
    starts = new.nonzero().squeeze(1).cpu().numpy()
    R = len(starts)
    if R == N:
        return None
    pm_np = pm.bool().cpu().numpy()
    ctx = np.maximum(rollout.response_mask.sum(1).cpu().numpy().astype(np.int64) - 1, 0)  # context tokens per row
    lp = pm_np[starts].sum(1)  # [R] prompt lengths
    if not (pm_np[starts] == (np.arange(L)[None, :] >= L - lp[:, None])).all():
        return None  # not left-padded (every rollout here is): keep the padded layout
    S = int((lp + np.add.reduceat(ctx, starts)).max())
    d = int(getattr(model.config, "hidden_size", None) or getattr(model.config, "n_embd", 0) or 1)
    W = L + T - 1
    plain = N * W * 24 * d * d + N * W * W * 4 * d
    packed = R * S * 24 * d * d + R * S * S * 4 * d
    if packed > PACK_GAIN * plain or R * S * S > PACK_MAX_MASK:
        return None
    # vectorised layout (rows of one prompt are consecutive; prompts are left-padded, so a prompt's real tokens are
    # its last lp columns)
    run = np.cumsum(new.cpu().numpy()) - 1  # [N] packed row of every rollout row
    lp_row = lp[run]
    c_start = np.cumsum(ctx) - ctx  # exclusive prefix sums of the context tokens, over rows ...
    first_c = c_start[starts]  # ... and where each run's begin
    off = lp_row + c_start - first_c[run]  # [N] packed position of each row's first context token
    cols = np.arange(S)[None, :]
    in_prompt = cols < lp[:, None]  # [R, S]
    src_row = np.where(in_prompt, starts[:, None], 0)
    src_col = np.where(in_prompt, L - lp[:, None] + cols, 0)
    pos = np.where(in_prompt, cols, 0)
    seg = np.where(in_prompt, 0, -1)
    tot = int(ctx.sum())
    tok_row = np.repeat(np.arange(N), ctx)  # every context token's rollout row ...
    k = np.arange(tot) - np.repeat(c_start, ctx)  # ... and its index within that response
    r_of, at = run[tok_row], off[tok_row] + k
    src_row[r_of, at], src_col[r_of, at] = tok_row, L + k
    pos[r_of, at], seg[r_of, at] = lp_row[tok_row] + k, tok_row - starts[r_of] + 1
    row = run
    col = np.repeat(np.maximum(lp_row - 1, 0)[:, None], T, axis=1)  # token 0 (and masked columns): last prompt token
    col[tok_row, k + 1] = at
    min_lp = int(lp.min())
    keep = S - max(min_lp - 1, 0)
    dev = pi.device
    t = lambda x: torch.from_numpy(x).to(dev)  # noqa: E731
    return PackingPlan(t(src_row), t(src_col), t(pos), t(seg), t(row), t(col), keep)


def packed_logprobs(model, rollout: Rollout, plan: PackingPlan, temperature: float = 1.0) -> torch.Tensor:
    """:func:`token_logprobs` in the packed layout of ``plan`` (:func:`packing_plan`): one forward over [R, S]
    packed rows under the block-causal mask (a token sees the earlier tokens of its own segment and, for a
    response, its prompt; padding sees only itself), logits taken at ``plan.col``. Returns [N, T] like the padded
    layout; equal to it up to float rounding (the same prompt and response context, the same positions)."""
    ids, mask = (plan.ids, plan.mask) if plan.ids is not None else packed_inputs(rollout, plan)
    S = ids.shape[1]
    if (getattr(model.config, "_attn_implementation", None) or "eager") == "eager":  # additive float mask
        dtype = next(model.parameters()).dtype
        mask = torch.zeros(mask.shape, dtype=dtype, device=ids.device).masked_fill(~mask, torch.finfo(dtype).min)
    out = model(input_ids=ids, attention_mask=mask, position_ids=plan.pos, use_cache=False,
                logits_to_keep=plan.keep)
    logits = out.logits[plan.row[:, None], plan.col - (S - plan.keep)]
    return _logp(logits, rollout.response_ids, temperature)


def packed_inputs(rollout: Rollout, plan: PackingPlan) -> tuple[torch.Tensor, torch.Tensor]:
    """The packed token ids [R, S] of ``rollout`` under ``plan`` and the block-causal attention mask [R, 1, S, S]
    (True: attend): a token sees the earlier tokens of its own segment and, for a response, its prompt; padding
    sees only itself (no query without a key)."""
    ids = rollout.input_ids[plan.src_row, plan.src_col]
    S = ids.shape[1]
    q, k = plan.seg[:, :, None], plan.seg[:, None, :]
    causal = torch.ones(S, S, dtype=torch.bool, device=ids.device).tril()
    mask = causal & (k >= 0) & ((k == 0) | (k == q))
    mask |= torch.eye(S, dtype=torch.bool, device=ids.device)
    return ids, mask[:, None]
