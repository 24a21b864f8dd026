"""The training configuration: every setting of a run once, with its type, default and help text.

:class:`TrainConfig` is the one definition that ``rlbatch train``, ``sweep``, ``demo`` and the TRL entry point
(:mod:`rlbatch.integrations.trl_train`) build their options from, as ``transformers.HfArgumentParser`` does from a
dataclass: :func:`option_spec` gives a field's flag, type, default and help (the field's ``description``), which
:mod:`rlbatch.cli_options` turns into Typer options and the TRL entry point into argparse arguments. The rest of this
module is how command-line values become fields: :func:`make_config` (validation errors as one
:class:`~rlbatch.errors.UserError` naming the field), the LR settings with a preset's calibrated base
(:func:`lr_fields`), the per-task token cap, PPO and asynchronous-rollout groups (:func:`trainer_fields`), the
stop-at-target pair (:func:`stop_fields`) and the study budget rule (:func:`trial_budget`).
"""

from __future__ import annotations

import argparse
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr


class TrainConfig(BaseModel):
    """Everything a GRPO run needs. B = ``prompts_per_step`` x ``group_size`` (nominal, before filtering) is the
    rollout batch; M = ``mini_batch_size`` (default B) the responses per optimizer update, the batch of the LR rule:
    ``lr`` wins when given, else ``scaled_lr(M, base_batch, base_lr, lr_rule)``; each step makes ``ppo_epochs``
    passes of B / M updates. The rule and its base are recorded in run.json whenever given (a sweep passes the
    scaled ``lr`` together with them). Each field's ``description`` is its command-line help."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field("tiny", description="Preset (tiny, tiny-random, smollm2-135m, gpu-small, gpu-small-toy) or "
                       "a local Hugging Face model directory.")
    task: str = Field("arithmetic", description="arithmetic, gsm8k, a reasoning-gym name (chain_sum, "
                      "basic_arithmetic, countdown, ...) or a verl-schema parquet/jsonl path.")
    prompts_per_step: int = Field(16, ge=1, description="P: prompts per step.")
    group_size: int = Field(8, ge=1, description="G: responses per prompt.")
    samples: int = Field(4096, ge=1, description="Retained-sample budget (training responses kept after "
                         "filtering).")
    lr: float | None = Field(None, gt=0, description="Learning rate (else from --base-batch / --base-lr / --rule).")
    lr_rule: Literal["sqrt", "linear", "none"] | None = Field(None, description="LR rule of base_batch / base_lr "
                                                              "(recorded in run.json).")
    base_batch: int | None = Field(None, ge=1, description="B0: responses per update (P x G) of the tuned run, "
                                   "the LR rule's base.")
    base_lr: float | None = Field(None, gt=0, description="lr0: the learning rate tuned at B0 (train, with neither "
                                  "--lr nor a base: the preset's demo calibration, tiny: B0 16, lr0 5e-5).")
    seed: int = Field(0, description="Seed (prompt order, sampling).")
    run_id: str | None = Field(None, description="Run id (default: the output directory's name).")
    micro_batch_size: int | None = Field(None, ge=1, description="Responses per micro-batch (must divide P x G; "
                                         "default gcd(P x G, 8)). GRPO lays them out by prompt: whole groups, or "
                                         "one group split over several.")
    micro_batch_tokens: int | None = Field(None, ge=1, description="Token budget of a micro-batch (padded prompt + "
                                           "response tokens): fewer responses per pass when sequences are long "
                                           "(default: no budget).")
    max_concurrent_sequences: int | None = Field(None, ge=1, description="Sequences generated at once; the KV "
                                                 "cache never holds more (default: fitted to memory).")
    filter_groups: bool = Field(True, description="GRPO: drop groups whose rewards are all equal before the update "
                                "(DAPO dynamic sampling); --no-filter-groups trains every response, as TRL.")
    mini_batch_size: int | None = Field(None, ge=1, description="Responses per optimizer update M (divides P x G; "
                                        "GRPO: a multiple of G; verl's ppo_mini_batch_size x rollout.n); the LR "
                                        "rule applies to M. Default: the whole batch, one update per step.")
    ppo_epochs: int = Field(1, ge=1, description="Passes over each rollout batch (P x G / M updates each).")
    share_prompts: bool = Field(True, description="Update: run each prompt once per micro-batch with its responses "
                                "packed after it (block attention mask; same loss and gradient up to float "
                                "rounding, fewer FLOPs) where that is cheaper; --no-share-prompts: one padded row "
                                "per response, as TRL.")
    noise_split_groups: int = Field(1, ge=0, description="GRPO, micro-batches of whole groups: groups per step also "
                                    "taken as two half-groups (one extra backward each) for the within/between-"
                                    "prompt noise split; 0 = off.")
    max_new_tokens: int = Field(8, ge=1, description="Cap on generated tokens per response (default per task: "
                                "arithmetic 5, reasoning-gym 256, gsm8k and verl files 512).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature (the loss's log-probabilities use it "
                               "too).")
    clip_eps: float = Field(0.2, gt=0, description="Clip range of the surrogate objective.")
    kl_coef: float = Field(0.0, ge=0, description="KL-to-reference weight (0: off, no reference model).")
    max_grad_norm: float | None = Field(1.0, description="Gradient clipping threshold (0: off).")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="Adam betas.")
    adam_eps: float = Field(1e-8, description="Adam epsilon.")
    weight_decay: float = Field(0.0, description="AdamW weight decay.")
    eval_every: int = Field(2048, ge=1, description="Retained samples between greedy evaluations.")
    eval_size: int | None = Field(None, ge=1, description="Held-out items (default: 512 arithmetic, 256 "
                                  "otherwise).")
    eval_batch_size: int = Field(256, ge=1, description="Sequences per evaluation batch.")
    split_seed: int = Field(0, description="Seed of the train / held-out split.")
    checkpoint_every: int = Field(10, ge=1, description="Steps between checkpoints.")
    stop_at_target: float | None = Field(None, description="Stop once eval/score >= this for stop_hold "
                                         "consecutive evaluations (the command line: --target with "
                                         "--stop-on-target).")
    stop_hold: int = Field(2, ge=1, description="Consecutive evaluations at or above the target before stopping.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many steps.")
    max_time_s: float | None = Field(None, gt=0, description="Stop after this many seconds.")
    max_empty_steps: int = Field(200, ge=1, description="Stop after this many consecutive all-filtered steps.")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$", description="cpu, cuda or cuda:N.")
    precision: Literal["fp32", "bf16"] = Field("fp32", description="fp32, or bf16: generation, evaluation and the "
                                               "update's forward passes under bfloat16 autocast (weights, gradients "
                                               "and Adam state stay float32, so small updates are not rounded away; "
                                               "the KV cache is bfloat16; for GPUs).")
    threads: int | None = Field(None, ge=1, description="Torch threads of the trainer (default: torch's, all cores, "
                                "less the generation process's with asynchronous rollouts).")
    # PPO (algo="ppo"; rlbatch.train.ppo): value model, GAE, critic optimizer
    algo: Literal["grpo", "ppo"] = Field("grpo", description="grpo, or ppo (value model + GAE; use -G 1).")
    critic_model: str | None = Field(None, description="PPO: separate critic model (preset or directory, same "
                                     "vocabulary); default a copy of the policy.")
    critic_lr: float | None = Field(None, gt=0, description="PPO: critic learning rate (else from --critic-base-lr "
                                    "under --rule, else the actor's lr).")
    critic_base_lr: float | None = Field(None, gt=0, description="PPO: critic lr0 at --base-batch, scaled by --rule "
                                         "like the actor's.")
    gamma: float = Field(1.0, ge=0, le=1, description="PPO: GAE discount.")
    lam: float = Field(1.0, ge=0, le=1, description="PPO: GAE lambda.")
    value_clip: float | None = Field(0.2, description="PPO: value-loss clip range (0: off).")
    critic_warmup_steps: int = Field(0, ge=0, description="PPO: critic-only steps first.")
    # asynchronous rollouts (rlbatch.train.async_rollout): generation in its own process, K versions ahead
    async_rollouts: int = Field(0, ge=0, description="K: generation runs in its own process up to K policy versions "
                                "ahead of the update (0: synchronous). GRPO.")
    partial_rollout_tokens: int | None = Field(None, ge=1, description="T: each round decodes at most T new tokens "
                                               "per response; unfinished ones continue under the next version.")
    rollout_threads: int = Field(1, ge=1, description="Torch threads of the generation process (with "
                                 "--async-rollouts / --partial-rollout-tokens).")
    # the online batch controller (rlbatch.train.auto, issue 55)
    batch: Literal["fixed", "auto"] = Field("fixed", description="auto: the batch is chosen while training (the "
                                            "online controller: P changes, G stays, the LR follows the square-root "
                                            "rule; decisions in DIR/controller.jsonl). Synchronous rollouts.")
    batch_min: int | None = Field(None, ge=2, description="--batch auto: the smallest P x G (default 2 G).")
    batch_max: int | None = Field(None, ge=2, description="--batch auto: the largest P x G (default 64 x the start).")
    auto_window: int = Field(20, ge=2, description="--batch auto: steps between the controller's decisions.")

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


def check_score_target(target: float | None) -> None:
    """Raise one :class:`UserError` (field ``target``) for a target score outside ``eval/score``'s range: the share
    of held-out items answered right, 0 to 1 (a percentage such as 45 is 0.45)."""
    if target is not None and not 0.0 <= target <= 1.0:
        raise UserError(f"--target {target:g} is outside eval/score's range 0 to 1 (the share of held-out items "
                        f"answered right{'; for ' + format(target, 'g') + '% give ' + format(target / 100, 'g') if 1 < target <= 100 else ''})",
                        field="target")


def check_device(device: str) -> None:
    """Raise one :class:`UserError` (field ``device``) when ``device`` (``cpu``, ``cuda`` or ``cuda:N``) cannot run
    here: CUDA asked for on a machine or a torch build without it, or a device index it does not have. Called
    before anything is written (train, demo, a sweep on this machine)."""
    if not str(device).startswith("cuda"):
        return
    import torch  # lazy: rlbatch --help loads no torch

    if not torch.cuda.is_available():
        why = "this torch build has no CUDA (a CPU build)" if torch.version.cuda is None else \
            "no CUDA device is visible (driver, CUDA_VISIBLE_DEVICES)"
        raise UserError(f"--device {device}: {why}; use --device cpu here, or run on a machine with a GPU",
                        field="device")
    idx = int(device.split(":", 1)[1]) if ":" in device else 0
    if idx >= torch.cuda.device_count():
        raise UserError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s), "
                        f"cuda:0 to cuda:{torch.cuda.device_count() - 1}", field="device")


def make_config(**fields: Any) -> TrainConfig:
    """Build a :class:`TrainConfig`; validation errors become one :class:`UserError` naming the field."""
    try:
        return TrainConfig(**fields)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ())) or "config"
        msg = first.get("msg")
        if loc == "device":
            msg = "must be cpu, cuda or cuda:N"
        flag = loc
        if loc in TrainConfig.model_fields:  # the option as the user typed it (-P / --prompts-per-step)
            flag = "/".join(([SHORT_FLAGS[loc]] if loc in SHORT_FLAGS else []) + ["--" + loc.replace("_", "-")])
        raise UserError(f"{flag}: {msg} (got {first.get('input')!r})", field=flag) from None


# --------------------------------------------------------------------------------------------------- options
#: Short flags of fields; every other field's flag is ``--`` and its name with dashes (a bool: ``--x/--no-x``).
SHORT_FLAGS = {"prompts_per_step": "-P", "group_size": "-G"}
#: Fields whose command-line default is not the library default: ``max_new_tokens`` None = the task's cap
#: (:func:`trainer_fields`); code that builds a config directly keeps the fixed default.
COMMAND_LINE_DEFAULTS: dict[str, Any] = {"max_new_tokens": None}


@dataclass(frozen=True)
class OptionSpec:
    """One :class:`TrainConfig` field as a command-line option: ``flags`` (long first, e.g. ``("--group-size",
    "-G")``; a bool: ``("--filter-groups/--no-filter-groups",)``), the value ``type`` (int, float, str or bool; a
    ``Literal`` is a str the config validates), ``default`` (the field's, or :data:`COMMAND_LINE_DEFAULTS`) and
    ``help`` (the field's description)."""

    field: str
    flags: tuple[str, ...]
    type: type
    default: Any
    help: str


def option_spec(name: str) -> OptionSpec:
    """The command-line option of :class:`TrainConfig` field ``name``. Raises ``KeyError`` for an unknown field and
    ``TypeError`` for a field with no scalar command-line form (``adam_betas``)."""
    info = TrainConfig.model_fields[name]
    ann = info.annotation
    if typing.get_origin(ann) in (Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    if typing.get_origin(ann) is Literal:
        ann = str
    if ann not in (int, float, str, bool):
        raise TypeError(f"TrainConfig.{name} ({info.annotation}) has no command-line form")
    long = "--" + name.replace("_", "-")
    flags = (f"{long}/--no-{long[2:]}",) if ann is bool else (long, *([SHORT_FLAGS[name]] if name in SHORT_FLAGS
                                                                   else []))
    return OptionSpec(name, flags, ann, COMMAND_LINE_DEFAULTS.get(name, info.default), info.description or "")


def add_config_arguments(parser: argparse.ArgumentParser, names: Iterable[str]) -> None:
    """Add the options of :class:`TrainConfig` fields ``names`` to an argparse ``parser`` (dest = the field's name),
    from :func:`option_spec`: the same flags, types, defaults and help as the Typer commands (a bool field as
    ``--x/--no-x``)."""
    for name in names:
        spec = option_spec(name)
        text = spec.help.replace("%", "%%")
        if spec.type is bool:
            parser.add_argument(spec.flags[0].split("/")[0], dest=name, action=argparse.BooleanOptionalAction,
                                default=spec.default, help=text)
        else:
            parser.add_argument(*spec.flags, dest=name, type=spec.type, default=spec.default, help=text)


# --------------------------------------------------------------------------------------------------- values -> fields
def lr_fields(*, model: str, task: str, algo: str, lr: float | None, rule: str, base_batch: int | None,
              base_lr: float | None, calibration: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], str | None]:
    """The learning-rate fields of one run (``lr``, ``lr_rule``, ``base_batch``, ``base_lr``) and a note for the
    user, or None. ``lr`` wins (no rule recorded); else the rule from the given base; with neither and GRPO, the
    preset's calibrated base (``calibration``: its demo study, a mapping with ``task``, ``base_batch``,
    ``base_lr``; ``rlbatch.study.demo.DEMOS[model]``) when it was calibrated on this task. Rule:
    ``lr(M) = lr0 * sqrt(M / B0)`` (:func:`rlbatch.scaling.scaled_lr`)."""
    note = None
    if lr is None and base_batch is None and base_lr is None and algo == "grpo" and calibration is not None \
            and calibration["task"] == task:
        base_batch, base_lr = calibration["base_batch"], calibration["base_lr"]
        note = (f"lr: the {rule} rule from the {model} demo's base B0={base_batch}, lr0={base_lr:g} (give --lr, or "
                "--base-batch and --base-lr, to choose)")
    return dict(lr=lr, lr_rule=rule if lr is None else None, base_batch=base_batch, base_lr=base_lr), note


def _ppo_fields(algo: str, critic_model: str | None, critic_lr: float | None, critic_base_lr: float | None,
               gamma: float, lam: float, value_clip: float | None, critic_warmup_steps: int) -> dict[str, Any]:
    """The PPO fields of the command-line flags (none for GRPO, so GRPO configs stay as they were); a value clip
    of 0 is off (None). :class:`UserError` (field ``algo``) unless ``algo`` is grpo or ppo."""
    if algo not in ("grpo", "ppo"):
        raise UserError(f"--algo must be grpo or ppo, got {algo!r}", field="algo")
    if algo == "grpo":
        return {}
    return dict(algo=algo, critic_model=critic_model, critic_lr=critic_lr, critic_base_lr=critic_base_lr,
                gamma=gamma, lam=lam, value_clip=value_clip or None, critic_warmup_steps=critic_warmup_steps)


def _async_fields(async_rollouts: int, partial_rollout_tokens: int | None, rollout_threads: int) -> dict[str, Any]:
    """The asynchronous-rollout fields of the flags (none when they are off, so configs stay as they were)."""
    if not async_rollouts and partial_rollout_tokens is None:
        return {}
    return dict(async_rollouts=async_rollouts, partial_rollout_tokens=partial_rollout_tokens,
                rollout_threads=rollout_threads)


#: The PPO and the asynchronous-rollout settings: recorded only when PPO / asynchronous rollouts are on.
PPO_SETTINGS = ("critic_model", "critic_lr", "critic_base_lr", "gamma", "lam", "value_clip", "critic_warmup_steps")
ASYNC_SETTINGS = ("async_rollouts", "partial_rollout_tokens", "rollout_threads")
#: Trial options a sweep always records (its manifest's options before it took every trainer setting).
SWEEP_ALWAYS = ("micro_batch_size", "max_new_tokens", "eval_every", "eval_size", "device")


def trainer_fields(task: str, algo: str, settings: Mapping[str, Any], *, changed_only: bool = False) -> dict[str, Any]:
    """The :class:`TrainConfig` fields of a command's trainer settings (field -> command-line value, as
    :func:`rlbatch.cli_options.with_config_options` gathers them): ``max_new_tokens`` None -> the task's cap
    (:func:`rlbatch.train.tasks.default_max_new_tokens`: arithmetic 5, reasoning-gym 256, gsm8k and verl files 512),
    ``max_grad_norm`` 0 -> None (no clipping), the PPO fields only for PPO (with ``algo``; :class:`UserError`
    unless grpo or ppo), the asynchronous-rollout fields only when on, the rest
    as given. ``changed_only`` (a sweep's trial options): of the rest, only :data:`SWEEP_ALWAYS` and what differs
    from the field's default, so a study's manifest names what was set."""
    rest = dict(settings)

    def take(name: str) -> Any:
        return rest.pop(name, TrainConfig.model_fields[name].default)

    ppo = _ppo_fields(algo, *(take(n) for n in PPO_SETTINGS))
    asynchronous = _async_fields(*(take(n) for n in ASYNC_SETTINGS))
    if "max_new_tokens" in rest:
        from rlbatch.train.tasks import default_max_new_tokens  # on use: tasks loads numpy, the CLI's options must not

        rest["max_new_tokens"] = rest["max_new_tokens"] or default_max_new_tokens(task)
    if "max_grad_norm" in rest:
        rest["max_grad_norm"] = rest["max_grad_norm"] or None
    if changed_only:
        rest = {k: v for k, v in rest.items() if k in SWEEP_ALWAYS or v != TrainConfig.model_fields[k].default}
    return {**rest, **ppo, **asynchronous}


def stop_fields(target: float | None, stop_on_target: bool, stop_hold: int) -> dict[str, Any]:
    """``stop_at_target`` / ``stop_hold`` of ``--target T --stop-on-target [--stop-hold N]`` (none without
    ``--stop-on-target``). :class:`UserError` (field ``target``) for ``--stop-on-target`` without a target."""
    if not stop_on_target:
        return {}
    if target is None:
        raise UserError("--stop-on-target needs --target (the held-out score to stop at)", field="target")
    return dict(stop_at_target=target, stop_hold=stop_hold)


def trial_budget(backend: str, samples: int | None, generated_samples: int | None, *, launched: bool) -> int:
    """The trial budget of a study: ``samples`` (retained responses) for the backends that train and stop at a
    retained count (local, ray, and trl, which trains with TRL's GRPOTrainer), ``generated_samples`` (generated
    responses; steps = ceil(N / B)) when the study is launched on a framework (verl, openrlhf, trl with
    --dry-run/--submit); the other one is a :class:`UserError`, and so is neither."""
    if launched:
        if samples is not None:
            raise UserError(f"--samples counts retained responses, which {backend} cannot stop at; give "
                            "--generated-samples N (generated responses per trial; steps = ceil(N / B))",
                            field="samples")
        if generated_samples is None:
            raise UserError(f"--backend {backend} needs --generated-samples N (generated responses per trial)",
                            field="generated_samples")
        return generated_samples
    if generated_samples is not None:
        raise UserError(f"--generated-samples applies to launched studies (--backend verl, openrlhf, or trl with "
                        f"--dry-run/--submit); --backend {backend} trains to --samples retained responses",
                        field="generated_samples")
    if samples is None:
        raise UserError("--samples N (retained responses per trial) is required", field="samples")
    return samples
