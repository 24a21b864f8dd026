"""The training configuration: every setting of a run once, with its type, default and help text.

:class:`TrainConfig` is the one definition that the command line (``rlbatch train``, ``sweep``, ``demo``) and the
TRL entry point build their options from; :func:`make_config` turns a validation error into one
:class:`~rlbatch.errors.UserError` naming the field.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr


class TrainConfig(BaseModel):
    """Everything a GRPO run needs. B = ``prompts_per_step`` x ``group_size`` (nominal, before filtering) is the
    rollout batch; M = ``mini_batch_size`` (default B) the responses per optimizer update, the batch of the LR rule:
    ``lr`` wins when given, else ``scaled_lr(M, base_batch, base_lr, lr_rule)``; each step makes ``ppo_epochs``
    passes of B / M updates. The rule and
    its base are recorded in run.json whenever given (a sweep passes the scaled ``lr`` together with them)."""

    model_config = ConfigDict(extra="forbid")

    model: str = "tiny"
    task: str = "arithmetic"
    prompts_per_step: int = Field(16, ge=1)
    group_size: int = Field(8, ge=1)
    samples: int = Field(4096, ge=1, description="retained-sample budget")
    lr: float | None = Field(None, gt=0)
    lr_rule: Literal["sqrt", "linear", "none"] | None = None
    base_batch: int | None = Field(None, ge=1)
    base_lr: float | None = Field(None, gt=0)
    seed: int = 0
    run_id: str | None = None
    micro_batch_size: int | None = Field(None, ge=1, description="responses per micro-batch; default gcd(B, 8)")
    micro_batch_tokens: int | None = Field(None, ge=1, description="token budget of a micro-batch (padded prompt + "
                                           "response tokens): fewer responses per pass when the step's sequences "
                                           "are long; None = response count only")
    max_concurrent_sequences: int | None = Field(None, ge=1, description="rows generated at once (the KV cache "
                                                 "never holds more); None = fitted to memory")
    filter_groups: bool = Field(True, description="GRPO: drop groups whose rewards are all equal before the update "
                                "(DAPO dynamic sampling); False trains every response, as TRL does")
    mini_batch_size: int | None = Field(None, ge=1, description="responses per optimizer update M (verl's "
                                        "ppo_mini_batch_size x rollout.n); default the whole rollout batch B")
    ppo_epochs: int = Field(1, ge=1, description="passes over the rollout batch per step (each pass: B / M updates)")
    share_prompts: bool = Field(True, description="update: the responses of one prompt are packed after a single "
                                "copy of it (block attention mask) where that is cheaper: the same loss and "
                                "gradient up to float rounding; False = one padded row per response, as TRL")
    noise_split_groups: int = Field(1, ge=0, description="GRPO, micro-batches of whole groups: groups per step also "
                                    "taken as two half-groups (one extra backward each) for the within/between-"
                                    "prompt noise split; 0 = off")
    max_new_tokens: int = Field(8, ge=1)
    temperature: float = Field(1.0, gt=0)
    clip_eps: float = Field(0.2, gt=0)
    kl_coef: float = Field(0.0, ge=0)
    max_grad_norm: float | None = Field(1.0, description="clip threshold; None or 0 = no clipping")
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    weight_decay: float = 0.0
    eval_every: int = Field(2048, ge=1, description="retained samples between evaluations")
    eval_size: int | None = Field(None, ge=1)
    eval_batch_size: int = Field(256, ge=1)
    split_seed: int = 0
    checkpoint_every: int = Field(10, ge=1, description="steps between checkpoints")
    stop_at_target: float | None = None
    stop_hold: int = Field(2, ge=1, description="consecutive evals at or above the target before stopping")
    max_steps: int | None = Field(None, ge=1)
    max_time_s: float | None = Field(None, gt=0)
    max_empty_steps: int = Field(200, ge=1, description="stop after this many consecutive all-filtered steps")
    device: str = "cpu"
    precision: Literal["fp32", "bf16"] = Field("fp32", description="bf16: generation, evaluation and the update's "
                                               "forward passes under bfloat16 autocast (weights, gradients and Adam "
                                               "state stay float32, so small updates are not rounded away; the KV "
                                               "cache is bfloat16); fp32: everything in float32")
    threads: int | None = Field(None, ge=1, description="torch threads of the trainer; None = torch's default (all "
                                "cores), less the generation process's with asynchronous rollouts")
    # PPO (algo="ppo"; rlbatch.train.ppo): value model, GAE, critic optimizer
    algo: Literal["grpo", "ppo"] = "grpo"
    critic_model: str | None = Field(None, description="separate critic model (preset/dir); default: copy of policy")
    critic_lr: float | None = Field(None, gt=0)
    critic_base_lr: float | None = Field(None, gt=0, description="critic lr0 at base_batch under lr_rule")
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(1.0, ge=0, le=1)
    value_clip: float | None = Field(0.2, description="value-loss clip range; None or 0 = off")
    critic_warmup_steps: int = Field(0, ge=0, description="critic-only steps before the actor starts")
    # asynchronous rollouts (rlbatch.train.async_rollout): generation in its own process, K versions ahead
    async_rollouts: int = Field(0, ge=0, description="K: policy versions generation runs ahead of the update "
                                "(0 = synchronous)")
    partial_rollout_tokens: int | None = Field(None, ge=1, description="T: new tokens per response per round; "
                                               "unfinished responses continue under the next version")
    rollout_threads: int = Field(1, ge=1, description="torch threads of the asynchronous generation process")

    @property
    def batch_size(self) -> int:
        """Rollout batch B = P x G (responses generated per step)."""
        return self.prompts_per_step * self.group_size

    @property
    def update_batch(self) -> int:
        """Responses per optimizer update M: ``mini_batch_size``, or the whole rollout batch B (one update per
        step). The batch of the LR rule and of the noise inputs (the paper's unit: responses per update)."""
        return self.mini_batch_size or self.batch_size

    def check_updates(self) -> None:
        """:class:`UserError` (field ``mini_batch_size``) unless M divides B and, for GRPO, holds whole groups."""
        m, b = self.update_batch, self.batch_size
        if b % m:
            raise UserError(f"--mini-batch-size {m} must divide the rollout batch B = P x G = {b}",
                            field="mini_batch_size")
        if self.algo == "grpo" and m % self.group_size:
            raise UserError(f"--mini-batch-size {m} must be a multiple of the group size G = {self.group_size} "
                            "(GRPO updates on whole groups)", field="mini_batch_size")

    def resolved_lr(self) -> float:
        if self.lr is not None:
            return self.lr
        if self.lr_rule is None or self.base_batch is None or self.base_lr is None:
            raise UserError("give --lr, or --base-batch, --base-lr and --rule", field="lr")
        return scaled_lr(self.update_batch, self.base_batch, self.base_lr, self.lr_rule)

    def resolved_critic_lr(self) -> float:
        """PPO critic learning rate: ``critic_lr`` when given; else ``scaled_lr(B, base_batch, critic_base_lr,
        lr_rule)`` (the LR rule with the critic's own base lr0 at the same base batch) when a rule and
        ``critic_base_lr`` are given; else the actor's resolved lr."""
        if self.critic_lr is not None:
            return self.critic_lr
        if self.critic_base_lr is not None:
            if self.lr_rule is None or self.base_batch is None:
                raise UserError("--critic-base-lr needs --base-batch and --rule (or give --critic-lr)",
                                field="critic_base_lr")
            return scaled_lr(self.update_batch, self.base_batch, self.critic_base_lr, self.lr_rule)
        return self.resolved_lr()

    def resolved_micro(self) -> int:
        """Responses per micro-batch m: ``micro_batch_size`` (B when it is B or more, so one setting serves a whole
        ladder of B), or gcd(B, 8) by default; :class:`UserError` (field ``micro_batch_size``) unless m divides
        B = P x G. GRPO lays the retained batch out by prompt with it
        (:func:`rlbatch.train.grpo.prompt_layout`): m < G splits each group into ceil(G / m) near-equal parts,
        m >= G packs floor(m / G) whole groups per micro-batch, so an m that neither divides nor is a multiple of G
        is used as is (no pass exceeds m responses)."""
        b = self.batch_size
        if self.micro_batch_size is None:
            return math.gcd(b, 8)
        if self.micro_batch_size >= b:  # a cap above the batch: the whole batch in one pass (a ladder's one setting)
            return b
        if b % self.micro_batch_size:
            raise UserError(f"batch B = P x G = {self.prompts_per_step} x {self.group_size} = {b} is not divisible "
                            f"into micro-batches of {self.micro_batch_size}", field="micro_batch_size")
        return self.micro_batch_size


def make_config(**fields: Any) -> TrainConfig:
    """Build a :class:`TrainConfig`; validation errors become one :class:`UserError` naming the field."""
    try:
        return TrainConfig(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ())) or "config"
        raise UserError(f"{loc}: {first.get('msg')} (got {first.get('input')!r})", field=loc) from None
