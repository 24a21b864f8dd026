"""GRPO pieces as plain functions (reused by the PPO variant): group advantages and filtering, token log-probs,
the clipped surrogate loss, micro-batch gradient accumulation with the two-batch noise inputs, and the optimizer step.

Sources: GRPO (Shao et al. 2024, DeepSeekMath, eq. 3 and sec. 4.1.2: group-normalised outcome advantages); PPO's
clipped surrogate (Schulman et al. 2017, eq. 7); token-level mean over the whole batch (Yu et al. 2025, DAPO, eq. 8);
filtering of groups whose rewards are all equal (DAPO's dynamic sampling; they carry zero advantage); k3 KL
estimator (Schulman 2020, "Approximating KL divergence"); noise inputs (McCandlish et al. 2018, app. A).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from rlbatch import faults
from rlbatch.train.rollout import Rollout, positions


class NonFiniteError(ArithmeticError):
    """A loss or gradient norm is NaN or Inf: the update must not be applied (the trainer stops the run)."""


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-normalised advantages and the groups to keep.

    ``rewards``: [P, G] (P prompts, G responses each). Returns ``(adv [P, G], keep [P] bool)`` with
    ``adv = (r - mean_g r) / (std_g r + eps)`` (std with Bessel's correction, as verl) and ``keep`` False for groups
    whose rewards are all equal (their advantages are all 0: no learning signal). Source: DeepSeekMath eq. 3/sec. 4.1.2.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [P, G], got shape {tuple(rewards.shape)}")
    r = rewards.float()
    mean = r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True) if r.shape[1] > 1 else torch.zeros_like(mean)
    adv = (r - mean) / (std + eps)
    keep = r.max(dim=1).values != r.min(dim=1).values
    return adv, keep


def micro_batches(n: int, micro_batch_size: int) -> list[np.ndarray]:
    """Split ``n`` retained responses into ``ceil(n / micro_batch_size)`` contiguous micro-batches of near-equal
    size (sizes differ by at most 1; none exceeds ``micro_batch_size``).

    The nominal batch B = P x G must be a multiple of the micro-batch size (checked by the trainer); after group
    filtering the retained B can be any multiple of G, so the split is balanced rather than fixed-size. Because the
    loss is normalised by the token count of the whole retained batch, the accumulated gradient is exactly the
    full-batch gradient whatever the split.
    """
    if n <= 0:
        return []
    k = math.ceil(n / micro_batch_size)
    return [a for a in np.array_split(np.arange(n), k)]


def token_logprobs(model, rollout: Rollout) -> torch.Tensor:
    """Log-probabilities [N, T] of the response tokens under ``model`` (one forward over prompt + response).

    The last response token is never context for a scored token, so it is not fed; the LM head runs only on the T
    positions that predict response tokens (``logits_to_keep``), and ``log p = logit[token] - logsumexp(logits)``
    avoids materialising the [N, T, V] log-softmax."""
    ids, mask = rollout.input_ids[:, :-1], rollout.attention_mask[:, :-1]
    T = rollout.response_ids.shape[1]
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=False, logits_to_keep=T)
    logits = out.logits[:, -T:, :].float()
    return logits.gather(-1, rollout.response_ids[..., None]).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def trim(rollout: Rollout) -> Rollout:
    """Drop prompt columns that are padding in every row (left) and response columns after every row's EOS
    (right): the padding waste of a micro-batch whose sequences are shorter than the longest of the step. Positions
    come from the mask, so the scored tokens see exactly the same context."""
    keep_p = rollout.prompt_mask.any(0).nonzero()
    lo = int(keep_p[0]) if keep_p.numel() else 0
    keep_r = rollout.response_mask.any(0).nonzero()
    hi = int(keep_r[-1]) + 1 if keep_r.numel() else 1
    if lo == 0 and hi == rollout.response_ids.shape[1]:
        return rollout
    return Rollout(rollout.prompt_ids[:, lo:], rollout.prompt_mask[:, lo:], rollout.response_ids[:, :hi],
                   rollout.response_mask[:, :hi], rollout.texts)


def clipped_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                      clip_eps: float, n_tokens: int, ref_logp: torch.Tensor | None = None,
                      kl_coef: float = 0.0) -> tuple[torch.Tensor, dict]:
    """PPO clipped surrogate with token-level normalisation.

    ``logp``, ``old_logp``, ``mask``: [n, T]; ``adv``: [n] (one advantage per response, broadcast over its
    tokens: GRPO) or [n, T] (one per token: PPO's GAE, Schulman et al. 2017 eq. 7). Per token ``l = -min(rho A, clip(rho, 1-eps, 1+eps) A) + kl_coef * k3`` with ``rho = exp(logp -
    old_logp)`` and ``k3 = exp(ref - logp) - (ref - logp) - 1``. Returns ``(sum of l over masked tokens / n_tokens,
    stats)``, where ``n_tokens`` is the token count of the *whole* batch, so summing the micro-batch losses gives the
    token-level mean of the full batch (DAPO eq. 8). ``stats``: summed ``clipped`` and ``kl`` over tokens.
    """
    m = mask.float()
    ratio = torch.exp(logp - old_logp)
    a = (adv[:, None] if adv.dim() == 1 else adv).float()
    s1 = ratio * a
    s2 = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * a
    per_tok = -torch.minimum(s1, s2)
    stats = {"clipped": float(((s2 < s1).float() * m).sum())}
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        k3 = torch.exp(d) - d - 1.0
        per_tok = per_tok + kl_coef * k3
        stats["kl"] = float((k3.detach() * m).sum())
    return (per_tok * m).sum() / max(n_tokens, 1), stats


@dataclass
class GradResult:
    """Outcome of :func:`accumulate_gradients`: summed loss, noise inputs, tokens and loss stats."""

    loss: float
    grad_sq_small: float  # mean over micro-batches of |g_i|^2 (g_i: micro-batch token-mean gradient)
    grad_sq_big: float  # |G|^2 of the full-batch token-mean gradient
    b_small: float  # mean micro-batch size, responses
    n_micro: int
    n_tokens: int
    stats: dict


def accumulate(module, n_rows: int, micro_batch_size: int, loss_of) -> GradResult:
    """Forward/backward ``loss_of(idx) -> (loss, n_tokens_i, stats)`` over balanced micro-batches of ``n_rows``
    responses (:func:`micro_batches`), leaving the full-batch gradient in ``p.grad`` of ``module``. Shared by GRPO
    (:func:`accumulate_gradients`) and PPO's actor and critic (:mod:`rlbatch.train.ppo`).

    Each loss must be normalised by the whole batch's token count, so the contributions sum to the full-batch
    token-mean gradient G. The micro-batch's own mean gradient g_i is its contribution x ``n_tokens / n_tokens_i``,
    giving the McCandlish et al. (2018, app. A) two-batch noise inputs ``grad_sq_small`` = mean_i |g_i|^2 and
    ``grad_sq_big`` = |G|^2. ``n_tokens`` of the result is the sum of the ``n_tokens_i``; ``b_small`` the mean
    micro-batch size in responses. Raises nothing itself; fault-injection points ``nan_loss``, ``inf_grad`` and
    ``update`` (:mod:`rlbatch.faults`) are checked per micro-batch.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    acc: list[torch.Tensor] | None = None
    parts = micro_batches(n_rows, micro_batch_size)
    contribs, n_toks, loss_total, stats = [], [], 0.0, {}
    for idx in parts:
        for p in params:
            p.grad = None
        loss, n_i, st = loss_of(idx)
        if faults.armed("nan_loss"):
            loss = loss * float("nan")
        loss.backward()
        if faults.armed("inf_grad"):
            next(p for p in params if p.grad is not None).grad.view(-1)[0] = float("inf")
        faults.fault("update")
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        contribs.append(float(torch.stack(torch._foreach_norm(grads)).pow(2).sum()))
        if acc is None:
            acc = grads  # the first micro-batch's gradient becomes the accumulator (no zero-filled copy)
        else:
            torch._foreach_add_(acc, grads)
        n_toks.append(int(n_i))
        loss_total += float(loss.detach())
        for k, v in st.items():
            stats[k] = stats.get(k, 0.0) + v
    n_tokens = int(sum(n_toks))
    sq_small = [sq * (n_tokens / max(n_i, 1)) ** 2 for sq, n_i in zip(contribs, n_toks)]
    big = 0.0
    if acc is not None:
        for a, p in zip(acc, params):
            p.grad = a
        big = float(torch.stack(torch._foreach_norm(acc)).pow(2).sum())
    return GradResult(loss=loss_total, grad_sq_small=float(np.mean(sq_small)) if sq_small else float("nan"),
                      grad_sq_big=big, b_small=n_rows / max(len(parts), 1), n_micro=len(parts), n_tokens=n_tokens,
                      stats=stats)


def accumulate_gradients(model, rollout: Rollout, adv: torch.Tensor, micro_batch_size: int, clip_eps: float,
                         ref_model=None, kl_coef: float = 0.0) -> GradResult:
    """Forward/backward over micro-batches of the retained ``rollout`` ([B, ...], advantages ``adv`` [B]); leaves
    the full-batch gradient (token-level mean loss) in ``p.grad`` (:func:`accumulate`).

    One update per rollout batch: the old policy is the current one, so ``old_logp = logp.detach()`` and the ratio
    is 1 (the clip is inactive; it matters for extra PPO epochs). Noise inputs as in :func:`accumulate`.
    """
    adv = adv.to(rollout.response_ids.device)
    n_tokens = int(rollout.response_mask.sum())

    def loss_of(idx):
        mb = trim(rollout.select(idx))
        logp = token_logprobs(model, mb)
        ref_logp = None
        if ref_model is not None and kl_coef > 0:
            with torch.no_grad():
                ref_logp = token_logprobs(ref_model, mb)
        loss, st = clipped_surrogate(logp, logp.detach(), adv[torch.as_tensor(idx, device=adv.device)],
                                     mb.response_mask, clip_eps, n_tokens, ref_logp, kl_coef)
        return loss, int(mb.response_mask.sum()), st

    res = accumulate(model, rollout.response_ids.shape[0], micro_batch_size, loss_of)
    res.stats = {"clipped": 0.0, "kl": 0.0, **res.stats}
    return res


def make_adamw(params, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
    """``torch.optim.AdamW`` with the fused kernel where torch has one for these parameters (CPU and CUDA, fp32/bf16):
    the same update rule (Loshchilov & Hutter 2019) as one kernel per parameter instead of a dozen Python-level
    tensor ops; 3.8x faster optimizer step on SmolLM2-135M on one CPU thread (0.65 -> 0.17 s). Falls back to the
    default implementation where fused is unsupported."""
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


def optimizer_step(model, optimizer: torch.optim.Optimizer, lr: float, max_grad_norm: float | None) -> float:
    """Set ``lr`` on every parameter group, clip the gradient to ``max_grad_norm`` (None or <= 0: no clipping) and
    take one optimizer step. Returns the L2 norm of the gradient *before* clipping (``grad_norm/actor``).
    Raises :class:`NonFiniteError` (parameters and optimizer state untouched) if that norm is NaN or Inf."""
    params = [p for p in model.parameters() if p.grad is not None]
    for g in optimizer.param_groups:
        g["lr"] = lr
    if max_grad_norm is not None and max_grad_norm > 0:
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    else:
        norm = float(torch.sqrt(sum(p.grad.pow(2).sum() for p in params)))
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteError(f"non-finite gradient norm ({norm})")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm
