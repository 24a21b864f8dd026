"""PPO with a value model on the GRPO trainer loop, as plain functions: the critic (a copy of the policy backbone
with a scalar head, or a separate model), token-level GAE, advantage whitening, the clipped value loss, and one
critic and one actor optimizer step per rollout batch, each with its own Adam, learning rate and noise inputs.

Batch unit: B_train = responses per update = P x G (G = 1 unless ``--group-size`` > 1); no group filtering (a PPO
response carries a learning signal through its per-token advantage even when its group's rewards are all equal).

Outcome reward: the verifier's reward is put on the last response token (its EOS, or the last generated token when
the response was cut at ``max_new_tokens``); every other token's reward is 0. With the defaults gamma = lambda = 1,
GAE's advantage of token t is ``R - V_t`` and its return ``R``.

Advantage whitening: the GAE advantages are normalised over all response tokens of the batch, ``(A - mean) /
(std + 1e-8)`` (masked mean/std, as verl's ``masked_whiten`` and the usual PPO implementations); the critic's
targets (returns) are not whitened.

One optimizer step per rollout batch (as GRPO here): the old policy/value are the current ones, so the ratio is 1
and the value clip is inactive at that step; both are computed exactly so extra epochs would only need a loop.

Sources: PPO (Schulman et al. 2017, eq. 7 clipped surrogate, eq. 11-12 GAE in truncated form); GAE (Schulman et al.
2016, eq. 16: A_t = sum_l (gamma lambda)^l delta_{t+l}, delta_t = r_t + gamma V_{t+1} - V_t); clipped value loss
(OpenAI baselines ppo2, ``vf_loss = 0.5 max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2)``; verl
``compute_value_loss``); explained variance 1 - Var(R - V)/Var(R) (baselines); noise inputs (McCandlish et al.
2018, app. A), as for the actor in :mod:`rlbatch.train.grpo`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlbatch.analysis.noise import b_simple
from rlbatch.errors import UserError
from rlbatch.train.grpo import (NonFiniteError, accumulate, clipped_surrogate, make_adamw, micro_batches,
                                mini_batches, old_logprobs, optimizer_step, token_logprobs, was_clipped)
from rlbatch.train.models import load_model
from rlbatch.train.rollout import Batch, Rollout, positions
from rlbatch.train.state import Learner, UpdateResult


# --------------------------------------------------------------------------------------------------- the critic
class ValueModel(torch.nn.Module):
    """A transformer backbone (the ``base_model`` of a causal LM: GPT-2's ``transformer``, Llama's ``model``) with a
    scalar head on its last hidden state. ``forward(input_ids, attention_mask, position_ids)`` -> values [N, S]."""

    def __init__(self, lm, seed: int = 0):
        super().__init__()
        self.backbone = lm.base_model
        hidden = int(getattr(lm.config, "hidden_size", 0) or getattr(lm.config, "n_embd"))
        self.head = torch.nn.Linear(hidden, 1)
        g = torch.Generator().manual_seed(int(seed) * 7919 + 17)
        with torch.no_grad():  # as a token-classification head: N(0, 0.02), zero bias (verl's critic)
            self.head.weight.copy_(torch.randn(self.head.weight.shape, generator=g) * 0.02)
            self.head.bias.zero_()
        self.head.to(next(self.backbone.parameters()).device)

    def forward(self, input_ids, attention_mask, position_ids):
        h = self.backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=False).last_hidden_state
        return self.head(h.float()).squeeze(-1)


def build_critic(policy, tokenizer, critic_model: str | None = None, device: str = "cpu", seed: int = 0):
    """The value model: a deep copy of ``policy``'s backbone with a fresh scalar head (``critic_model`` None), or
    the backbone of ``load_model(critic_model)`` (a preset or model directory; it must share the policy's
    vocabulary, since it reads the same token ids). Raises :class:`UserError` for an incompatible vocabulary."""
    if critic_model is None:
        lm = copy.deepcopy(policy)
    else:
        lm, ctok = load_model(critic_model, device)
        if ctok.get_vocab() != tokenizer.get_vocab():
            raise UserError(f"critic model {critic_model!r} has a different vocabulary from the policy; the critic "
                            "reads the policy's token ids, so it needs the same tokenizer", field="critic_model")
    critic = ValueModel(lm, seed)
    critic.to(device)
    critic.train(False)
    critic.requires_grad_(True)
    return critic


def token_values(critic: ValueModel, rollout: Rollout) -> torch.Tensor:
    """Values [N, T] of the states before each response token: V_t sits at position L - 1 + t of prompt + response,
    where the policy's logits for token t are read (L: padded prompt length, T: response length)."""
    mask = rollout.attention_mask
    v = critic(rollout.input_ids, mask, positions(mask))
    L, T = rollout.prompt_ids.shape[1], rollout.response_ids.shape[1]
    return v[:, L - 1:L - 1 + T]


# --------------------------------------------------------------------------------------------------- GAE, losses
def outcome_token_rewards(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token rewards [N, T]: ``rewards`` [N] on each response's last unmasked token, 0 elsewhere (and 0 for an
    empty response)."""
    m = mask.float()
    out = torch.zeros_like(m)
    n_tok = m.sum(dim=1).long()
    rows = torch.nonzero(n_tok > 0, as_tuple=False).squeeze(1)
    out[rows, n_tok[rows] - 1] = rewards.float().to(m.device)[rows]
    return out


def gae(token_rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0,
        lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over response tokens.

    ``token_rewards``, ``values``, ``mask``: [N, T] (mask 1 on response tokens, a contiguous prefix). With values
    and rewards zeroed outside the mask (the state after the last token is terminal, V = 0):
    ``delta_t = r_t + gamma V_{t+1} - V_t``, ``A_t = delta_t + gamma lambda A_{t+1}``, ``R_t = A_t + V_t``.
    Returns ``(advantages [N, T], returns [N, T])``, both 0 outside the mask. Source: Schulman et al. 2016, eq. 16.
    """
    m = mask.float()
    v = values.float() * m
    r = token_rewards.float() * m
    T = r.shape[1]
    adv = torch.zeros_like(r)
    last = torch.zeros(r.shape[0], dtype=r.dtype, device=r.device)
    for t in range(T - 1, -1, -1):
        nxt = v[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        delta = r[:, t] + gamma * nxt - v[:, t]
        last = (delta + gamma * lam * last) * m[:, t]
        adv[:, t] = last
    return adv, (adv + v) * m


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` over the masked entries of ``x`` [N, T] (population std); 0 outside the mask."""
    m = mask.float()
    n = m.sum().clamp(min=1.0)
    mean = (x * m).sum() / n
    var = (((x - mean) * m) ** 2).sum() / n
    return (x - mean) / (var.sqrt() + eps) * m


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
                       value_clip: float | None, n_tokens: int) -> tuple[torch.Tensor, dict]:
    """PPO's clipped value loss, token-level: per token ``0.5 max((V - R)^2, (V_old + clip(V - V_old, -c, c) -
    R)^2)`` (plain ``0.5 (V - R)^2`` when ``value_clip`` is None or <= 0), summed over masked tokens and divided by
    ``n_tokens`` (the whole batch's token count, so micro-batch losses add up to the batch mean).

    Shapes [n, T]. Returns ``(loss, stats)`` with ``stats["clipped"]`` = number of masked tokens where the clipped
    term was the larger (verl's ``vf_clipfrac`` numerator). Source: baselines ppo2; verl ``compute_value_loss``.
    """
    m = mask.float()
    l1 = (values - returns) ** 2
    if value_clip is not None and value_clip > 0:
        vc = old_values + torch.clamp(values - old_values, -value_clip, value_clip)
        l2 = (vc - returns) ** 2
        per = torch.maximum(l1, l2)
        clipped = float(((l2 > l1).float() * m).sum())
    else:
        per, clipped = l1, 0.0
    return 0.5 * (per * m).sum() / max(n_tokens, 1), {"clipped": clipped}


def token_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                    clip_eps: float, n_tokens: int, ref_logp: torch.Tensor | None = None,
                    kl_coef: float = 0.0) -> tuple[torch.Tensor, dict]:
    """The clipped surrogate with per-token advantages ``adv`` [n, T] (GAE): :func:`rlbatch.train.grpo.clipped_surrogate`
    takes both shapes; same normalisation (sum / ``n_tokens``) and stats. Source: PPO (Schulman et al. 2017) eq. 7."""
    return clipped_surrogate(logp, old_logp, adv, mask, clip_eps, n_tokens, ref_logp=ref_logp, kl_coef=kl_coef)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """``1 - Var(R - V) / Var(R)`` over masked tokens (NaN when Var(R) = 0). 1: perfect critic; 0: no better than a
    constant; negative: worse. NaN also when Var(R) < 1e-12 (all returns equal, up to rounding).
    Source: OpenAI baselines ``explained_variance``."""
    m = mask.bool()
    r, v = returns[m].double(), values[m].double()
    if r.numel() < 2:
        return float("nan")
    vr = float(r.var(unbiased=False))
    return float("nan") if vr < 1e-12 else 1.0 - float((r - v).var(unbiased=False)) / vr


# --------------------------------------------------------------------------------------------------- accumulation
@dataclass
class PPOParts:
    """The critic and its optimizer beside the policy, plus the resolved critic learning rate."""

    critic: Any
    optimizer: Any
    lr: float


def setup(cfg, policy, tokenizer) -> PPOParts:
    """Build the critic (:func:`build_critic`) and its own AdamW (same betas/eps/weight decay as the actor) at
    ``cfg.resolved_critic_lr()``."""
    critic = build_critic(policy, tokenizer, cfg.critic_model, cfg.device, cfg.seed)
    lr = cfg.resolved_critic_lr()
    opt = make_adamw(critic.parameters(), lr=lr, betas=cfg.adam_betas, eps=cfg.adam_eps,
                     weight_decay=cfg.weight_decay)
    return PPOParts(critic, opt, lr)


def ppo_step(model, actor_opt, actor_lr: float, parts: PPOParts, ro: Rollout, rewards: torch.Tensor, cfg,
             micro: int, step: int, ref_model=None, backward=None) -> tuple[dict, int]:
    """One PPO update on the rollout batch ``ro`` ([B, ...]) with rewards [B]: critic forward (values), GAE and
    whitened advantages, one critic step (clipped value loss), then — after ``cfg.critic_warmup_steps`` steps —
    one actor step (clipped surrogate with per-token advantages, optional k3 KL to ``ref_model``).

    Returns ``(metrics, tokens trained)``: ``grad_norm/critic`` (pre-clip), ``losses/value_loss``,
    ``value/mean``, ``value/explained_variance``, ``returns/mean``, ``noise/critic_*`` and, when the actor
    updated, every actor metric the GRPO step logs (``grad_norm/actor``, ``loss``, ``noise/*``, ``clip_frac``...).
    """
    if cfg.ppo_epochs > 1 or cfg.update_batch < ro.response_ids.shape[0]:
        return ppo_step_minibatches(model, actor_opt, actor_lr, parts, ro, rewards, cfg, micro, step, ref_model,
                                    backward)
    B = ro.response_ids.shape[0]
    mask = ro.response_mask
    n_tokens = int(mask.sum())
    tok_r = outcome_token_rewards(rewards, mask)
    # critic: one forward per micro-batch with grad; its detached values are V_old for GAE (per-row, so each
    # micro-batch's returns are known at once) and for the value clip.
    vals = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    rets = torch.zeros_like(vals)
    advs = torch.zeros_like(vals)
    critic = parts.critic

    def value_loss_of(idx):
        mb = ro.select(idx)
        v = token_values(critic, mb).float()
        old = v.detach()
        i = torch.as_tensor(idx, device=mask.device)
        a, ret = gae(tok_r[i], old, mb.response_mask, cfg.gamma, cfg.lam)
        vals[i], rets[i], advs[i] = old * mb.response_mask, ret, a
        loss, st = clipped_value_loss(v, old, ret, mb.response_mask, cfg.value_clip, n_tokens)
        return loss, int(mb.response_mask.sum()), st

    cr = accumulate(critic, B, micro, value_loss_of, backward=backward)
    if not math.isfinite(cr.loss):
        raise NonFiniteError(f"non-finite value loss ({cr.loss})")
    cnorm = optimizer_step(critic, parts.optimizer, parts.lr, cfg.max_grad_norm)
    m = mask.bool()
    rec: dict[str, Any] = {
        "grad_norm/critic": cnorm, "losses/value_loss": cr.loss, "value/mean": float(vals[m].mean()),
        "value/explained_variance": explained_variance(vals, rets, mask), "returns/mean": float(rets[m].mean()),
        "value/clip_frac": cr.stats["clipped"] / max(n_tokens, 1), "lr/critic": parts.lr,
        "noise/critic_grad_sq_small": cr.grad_sq_small, "noise/critic_grad_sq_big": cr.grad_sq_big,
        "noise/b_small": cr.b_small, "noise/b_big": B,
        "noise/critic_b_simple": (b_simple(cr.grad_sq_small, cr.grad_sq_big, cr.b_small, B)
                                  if cr.b_small < B else float("nan")),
        "critic_grad_clipped": was_clipped(cnorm, cfg.max_grad_norm)}
    if step <= cfg.critic_warmup_steps:
        rec["actor_updated"] = False
        return rec, n_tokens
    adv_w = whiten(advs, mask)

    def actor_loss_of(idx):
        mb = ro.select(idx)
        logp = token_logprobs(model, mb, cfg.temperature, cfg.share_prompts)
        ref_logp = None
        if ref_model is not None and cfg.kl_coef > 0:
            with torch.no_grad():
                ref_logp = token_logprobs(ref_model, mb, cfg.temperature, cfg.share_prompts)
        i = torch.as_tensor(idx, device=mask.device)
        loss, st = token_surrogate(logp, logp.detach(), adv_w[i], mb.response_mask, cfg.clip_eps, n_tokens,
                                   ref_logp, cfg.kl_coef)
        return loss, int(mb.response_mask.sum()), st

    ar = accumulate(model, B, micro, actor_loss_of, backward=backward)
    if not math.isfinite(ar.loss):
        raise NonFiniteError(f"non-finite loss ({ar.loss})")
    gnorm = optimizer_step(model, actor_opt, actor_lr, cfg.max_grad_norm)
    rec.update({"grad_norm/actor": gnorm, "loss": ar.loss, "noise/grad_sq_small": ar.grad_sq_small,
                "noise/grad_sq_big": ar.grad_sq_big,
                "noise/b_simple": (b_simple(ar.grad_sq_small, ar.grad_sq_big, ar.b_small, B)
                                   if ar.b_small < B else float("nan")),
                "train/micro_batches": ar.n_micro, "clip_frac": ar.stats["clipped"] / max(n_tokens, 1),
                "grad_clipped": was_clipped(gnorm, cfg.max_grad_norm), "actor_updated": True})
    if cfg.kl_coef > 0:
        rec["kl"] = ar.stats.get("kl", 0.0) / max(n_tokens, 1)
    return rec, n_tokens


def ppo_step_minibatches(model, actor_opt, actor_lr: float, parts: PPOParts, ro: Rollout, rewards: torch.Tensor,
                         cfg, micro: int, step: int, ref_model=None, backward=None) -> tuple[dict, int]:
    """PPO as verl and baselines run it: the old values (no gradient), GAE, whitened advantages (over the whole
    rollout) and old log-probabilities are computed once; then ``cfg.ppo_epochs`` passes over mini-batches of
    ``cfg.update_batch`` responses (in order), each one critic step (clipped value loss against the old values)
    and, after the warm-up, one actor step (clipped surrogate against the old log-probabilities), every loss a
    token mean over its mini-batch. Metrics as :func:`ppo_step`; norms and ``noise/*`` of the first update (batch
    M), ``clip_frac`` and ``value/clip_frac`` over all updates' tokens, ``train/updates``."""
    B = ro.response_ids.shape[0]
    mask = ro.response_mask
    n_tokens = int(mask.sum())
    tok_r = outcome_token_rewards(rewards, mask)
    critic = parts.critic
    vals = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    with torch.no_grad():
        for idx in micro_batches(B, micro):
            i = torch.as_tensor(idx, device=mask.device)
            vals[i] = token_values(critic, ro.select(idx)).float() * mask[i]
    advs, rets = gae(tok_r, vals, mask, cfg.gamma, cfg.lam)
    adv_w = whiten(advs, mask)
    actor = step > cfg.critic_warmup_steps
    old_lp = old_logprobs(model, ro, micro, cfg.temperature, cfg.share_prompts) if actor else None
    M = cfg.update_batch
    minis = mini_batches(B, M)
    rec: dict[str, Any] = {}
    vclip = clip = kl = 0.0
    toks = updates = passes = 0
    vlosses, losses, any_c, any_a = [], [], False, False
    for _ in range(cfg.ppo_epochs):
        for idx in minis:
            i = torch.as_tensor(idx, device=mask.device)
            sub = ro.select(idx)
            n_sub = int(sub.response_mask.sum())

            def value_loss_of(j, sub=sub, i=i, n_sub=n_sub):
                mb = sub.select(j)
                r = i[torch.as_tensor(j, device=i.device)]
                v = token_values(critic, mb).float()
                loss, st = clipped_value_loss(v, vals[r], rets[r], mb.response_mask, cfg.value_clip, n_sub)
                return loss, int(mb.response_mask.sum()), st

            cr = accumulate(critic, len(idx), micro, value_loss_of, backward=backward)
            if not math.isfinite(cr.loss):
                raise NonFiniteError(f"non-finite value loss ({cr.loss})")
            cnorm = optimizer_step(critic, parts.optimizer, parts.lr, cfg.max_grad_norm)
            vlosses.append(cr.loss)
            vclip += cr.stats["clipped"]
            toks += n_sub
            updates += 1
            any_c = any_c or was_clipped(cnorm, cfg.max_grad_norm)
            if not rec:
                rec = {"grad_norm/critic": cnorm, "noise/critic_grad_sq_small": cr.grad_sq_small,
                       "noise/critic_grad_sq_big": cr.grad_sq_big, "noise/b_small": cr.b_small,
                       "noise/b_big": len(idx),
                       "noise/critic_b_simple": (b_simple(cr.grad_sq_small, cr.grad_sq_big, cr.b_small, len(idx))
                                                 if cr.b_small < len(idx) else float("nan"))}
            if not actor:
                continue

            def actor_loss_of(j, sub=sub, i=i, n_sub=n_sub):
                mb = sub.select(j)
                r = i[torch.as_tensor(j, device=i.device)]
                logp = token_logprobs(model, mb, cfg.temperature, cfg.share_prompts)
                ref_logp = None
                if ref_model is not None and cfg.kl_coef > 0:
                    with torch.no_grad():
                        ref_logp = token_logprobs(ref_model, mb, cfg.temperature, cfg.share_prompts)
                loss, st = token_surrogate(logp, old_lp[r], adv_w[r], mb.response_mask, cfg.clip_eps, n_sub,
                                           ref_logp, cfg.kl_coef)
                return loss, int(mb.response_mask.sum()), st

            ar = accumulate(model, len(idx), micro, actor_loss_of, backward=backward)
            if not math.isfinite(ar.loss):
                raise NonFiniteError(f"non-finite loss ({ar.loss})")
            gnorm = optimizer_step(model, actor_opt, actor_lr, cfg.max_grad_norm)
            losses.append(ar.loss)
            clip += ar.stats["clipped"]
            kl += ar.stats.get("kl", 0.0)
            passes += ar.n_micro
            any_a = any_a or was_clipped(gnorm, cfg.max_grad_norm)
            if "grad_norm/actor" not in rec:
                rec.update({"grad_norm/actor": gnorm, "noise/grad_sq_small": ar.grad_sq_small,
                            "noise/grad_sq_big": ar.grad_sq_big,
                            "noise/b_simple": (b_simple(ar.grad_sq_small, ar.grad_sq_big, ar.b_small, len(idx))
                                               if ar.b_small < len(idx) else float("nan"))})
    m = mask.bool()
    rec.update({"losses/value_loss": float(np.mean(vlosses)), "value/mean": float(vals[m].mean()),
                "value/explained_variance": explained_variance(vals, rets, mask),
                "returns/mean": float(rets[m].mean()), "value/clip_frac": vclip / max(toks, 1),
                "lr/critic": parts.lr, "critic_grad_clipped": any_c, "train/updates": updates,
                "actor_updated": actor})
    if actor:
        rec.update({"loss": float(np.mean(losses)), "train/micro_batches": passes, "clip_frac": clip / max(toks, 1),
                    "grad_clipped": any_a})
        if cfg.kl_coef > 0:
            rec["kl"] = kl / max(toks, 1)
    return rec, n_tokens


def ppo_update(learner: Learner, batch: Batch, step: int) -> UpdateResult:
    """PPO's update of one step (:func:`ppo_step` with ``learner.critic``): every response is kept (no group
    filtering), so all P prompts count as retained."""
    cfg = learner.cfg
    rec, n_tok = ppo_step(learner.model, learner.optimizer, learner.lr, learner.critic, batch.rollout, batch.rewards,
                          cfg, learner.micro, step, learner.ref_model, learner.backward)
    return UpdateResult(rec, len(batch.items), cfg.prompts_per_step, cfg.prompts_per_step, n_tok)


def state_dict(parts: PPOParts) -> dict:
    """What the checkpoint keeps for PPO: the critic's and its optimizer's state dicts."""
    return {"critic": parts.critic.state_dict(), "critic_optimizer": parts.optimizer.state_dict()}


def load_state_dict(parts: PPOParts, ck: dict) -> None:
    """Restore :func:`state_dict` from a checkpoint ``ck``; :class:`UserError` if it holds no critic (a GRPO
    checkpoint resumed with ``--algo ppo``)."""
    if "critic" not in ck:
        raise UserError("checkpoint has no critic (was this run trained with --algo grpo?)", field="algo")
    parts.critic.load_state_dict(ck["critic"])
    parts.optimizer.load_state_dict(ck["critic_optimizer"])


__all__ = ["ValueModel", "build_critic", "token_values", "outcome_token_rewards", "gae", "whiten",
           "clipped_value_loss", "token_surrogate", "explained_variance", "accumulate", "PPOParts", "setup",
           "ppo_step", "ppo_update", "state_dict", "load_state_dict"]
