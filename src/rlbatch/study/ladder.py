"""The ladder of a batch-size study: one trial per (batch size B, group size G, seed), each with its scaled learning
rate and its budget. Every backend (local trainer, Ray, TRL here, the verl / OpenRLHF / TRL launches, the adaptive
loop, the demo) runs the trials :func:`build_ladder` makes, so they all run the same study under the same run ids.

One id scheme, :func:`trial_id`: ``B{B}-G{G}-{rule}{variant}-s{seed}``, e.g. ``B64-G8-sqrt-s0``; the fixed-LR control
is ``B{B}-G{G}-fixed-s{seed}``; ``variant`` is the asynchronous-rollout tag
(:func:`rlbatch.train.async_rollout.sweep_variants`).
One budget per trial with an explicit kind (:data:`BudgetKind`): ``retained`` responses (what rlbatch's own trainer
and TRL here stop at; the paper's x-axis) or ``generated`` responses (what a launched framework can be told:
``steps = ceil(samples / B)``).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlbatch.errors import UserError
from rlbatch.scaling import parse_int_list, scaled_lr
from rlbatch.train.async_rollout import sweep_variants

#: What a trial's ``samples`` counts: retained training responses (after filtering) or generated responses.
BudgetKind = Literal["retained", "generated"]


def trial_id(batch_size: int, group_size: int, rule: str, seed: int, variant: str = "") -> str:
    """Run id of a trial: ``B{B}-G{G}-{rule}{variant}-s{seed}`` (rule ``none``, the fixed-LR control, reads
    ``fixed``), e.g. ``B64-G8-sqrt-s0``: stable, filesystem- and Hydra-safe (letters, digits, ``-``)."""
    tag = "fixed" if rule == "none" else rule
    return f"B{batch_size}-G{group_size}-{tag}{variant}-s{seed}"


def config_id(run_id: str) -> str:
    """The configuration of a run id without its seed: ``B64-G8-sqrt-s2`` -> ``B64-G8-sqrt`` (trials of one
    configuration differ only in seed; an id without a ``-s<N>`` tail is its own configuration)."""
    head, _, tail = run_id.rpartition("-s")
    return head if head and tail.isdigit() else run_id


def steps_for_budget(samples: int, batch_size: int) -> int:
    """Optimizer steps to spend a budget of ``samples`` responses at ``batch_size`` responses per step:
    ``ceil(samples / B)`` (one update per rollout batch, DESIGN.md "Trainer"). Raises :class:`UserError` if either
    is not positive."""
    if samples < 1 or batch_size < 1:
        raise UserError(f"samples ({samples}) and batch size ({batch_size}) must be >= 1", field="samples")
    return math.ceil(samples / batch_size)


class TrialSpec(BaseModel):
    """One trial of a study. ``lr`` is the learning rate actually used (``scaled_lr`` of B = P x G from
    ``base_batch``/``base_lr`` under ``lr_rule``; ``none`` for the fixed-LR control). ``samples`` is the budget, in
    responses of kind ``budget`` (retained or generated). ``options`` are further
    :class:`rlbatch.train.config.TrainConfig` fields (eval_every, eval_size, max_new_tokens, micro_batch_size,
    stop_at_target, stop_hold, max_grad_norm, max_steps, ...) for the trainers that run here."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    model: str = "tiny"
    task: str = "arithmetic"
    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    lr_rule: Literal["sqrt", "linear", "none"]
    base_batch: int = Field(ge=1)
    base_lr: float = Field(gt=0)
    samples: int = Field(ge=1)
    budget: BudgetKind = "retained"
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        """B = P x G, responses per optimizer update."""
        return self.prompts_per_step * self.group_size

    @property
    def config_id(self) -> str:
        """The trial's configuration without the seed (:func:`config_id`)."""
        return config_id(self.run_id)

    @property
    def steps(self) -> int:
        """Optimizer steps that spend the budget at one update per rollout batch, ``ceil(samples / B)``: exact for a
        generated budget, a lower bound for a retained one (filtered groups need more rollouts)."""
        return steps_for_budget(self.samples, self.batch_size)

    def row(self) -> dict[str, Any]:
        """The trial's study fields as a plain dict (``run_id, prompts_per_step, group_size, batch_size, lr, lr_rule,
        base_batch, base_lr, samples, budget, steps, seed``): what a launch plan carries over."""
        return {"run_id": self.run_id, "prompts_per_step": self.prompts_per_step, "group_size": self.group_size,
                "batch_size": self.batch_size, "lr": self.lr, "lr_rule": self.lr_rule, "base_batch": self.base_batch,
                "base_lr": self.base_lr, "samples": self.samples, "budget": self.budget, "steps": self.steps,
                "seed": self.seed}

    def train_config(self):
        """The trainer's configuration of this trial (:func:`rlbatch.train.config.make_config`); raises
        :class:`UserError` for an option the trainer does not take."""
        # lazy: the trainer imports torch, which `rlbatch --help` and the launch backends must not pay for
        from rlbatch.train.config import make_config

        return make_config(model=self.model, task=self.task, prompts_per_step=self.prompts_per_step,
                           group_size=self.group_size, lr=self.lr, lr_rule=self.lr_rule, base_batch=self.base_batch,
                           base_lr=self.base_lr, samples=self.samples, seed=self.seed,
                           run_id=self.run_id, **self.options)


def build_ladder(*, base_batch: int, base_lr: float, batches: Iterable[int] | str, rule: str = "sqrt",
                 group_sizes: Iterable[int] | str = (8,), seeds: int = 1, seed_offset: int = 0,
                 fixed_lr_control: int | None = None, samples: int, budget: BudgetKind = "retained",
                 model: str = "tiny", task: str = "arithmetic",
                 options: dict[str, Any] | None = None) -> list[TrialSpec]:
    """The trials of a study, in order variant, configuration (B ascending, then G), seed.

    For every B in ``batches`` plus B0 = ``base_batch`` (the reference, added when missing) and every G in
    ``group_sizes`` that divides B: P = B / G and lr = ``scaled_lr(B, B0, lr0, rule)`` (square-root rule by
    default; Malladi et al. 2022, the paper's eta(B)); plus, if asked, the paper's fixed-LR control at
    B = ``fixed_lr_control`` with lr = lr0 (rule ``none``: the rule, not the batch, aligns the curves). Each
    configuration is repeated for seeds ``seed_offset .. seed_offset + seeds - 1`` (another offset: another seed
    set). Every trial gets the same budget: ``samples`` responses of kind ``budget`` (units: responses; responses
    per update; optimizer steps). Asynchronous settings in ``options`` add the asynchronous ladder
    (:func:`rlbatch.train.async_rollout.sweep_variants`). Run ids: :func:`trial_id`.

    ``batches`` and ``group_sizes`` may be the command line's comma-separated text (``"16,32,64"``,
    :func:`rlbatch.scaling.parse_int_list`): the ladder is where the options become trials.

    Raises :class:`UserError` (naming the option) when a batch size is divisible by none of the group sizes, a
    number is not positive, or the rule is unknown.
    """
    if isinstance(batches, str):
        batches = parse_int_list(batches)
    group_sizes = parse_int_list(group_sizes, "group-sizes") if isinstance(group_sizes, str) else \
        [int(g) for g in group_sizes]
    if not group_sizes or min(group_sizes) < 1:
        raise UserError(f"--group-sizes must be >= 1, got {group_sizes}", field="group_sizes")
    if seeds < 1:
        raise UserError(f"--seeds must be >= 1, got {seeds}", field="seeds")
    if seed_offset < 0:
        raise UserError(f"--seed-offset must be >= 0, got {seed_offset}", field="seed_offset")
    if samples < 1:
        raise UserError(f"--samples must be >= 1, got {samples}", field="samples")
    scaled_lr(base_batch, base_batch, base_lr, rule)  # validates the base point and the rule
    rungs = [(int(b), rule) for b in sorted({int(base_batch), *(int(b) for b in batches)})]
    if fixed_lr_control is not None:
        rungs.append((int(fixed_lr_control), "none"))
    configs: list[tuple[int, int, str, float]] = []
    for b, r in rungs:
        fits = [g for g in group_sizes if b >= 1 and b % g == 0]
        if not fits:
            raise UserError(f"--batches: batch size {b} is not a positive multiple of the group size "
                            f"{' or '.join(map(str, group_sizes))} (B = P x G)", field="batches")
        configs += [(b, g, r, scaled_lr(b, base_batch, base_lr, r)) for g in fits]
    return [TrialSpec(run_id=trial_id(b, g, r, s, variant), model=model, task=task, prompts_per_step=b // g,
                      group_size=g, lr=lr, lr_rule=r, base_batch=base_batch, base_lr=base_lr, samples=samples,
                      budget=budget, seed=s, options=opts)
            for variant, opts in sweep_variants(options)
            for b, g, r, lr in configs
            for s in range(seed_offset, seed_offset + seeds)]


def trial_order(specs: Iterable[Any], seed: int = 0) -> list[Any]:
    """The order trials run in: seed-major rounds (every configuration's first seed, then every second seed, ...),
    each round in a random order drawn from ``seed`` (a fixed seed: the same order on every run of the sweep). So a
    change of machine load (another job starting, a neighbour on the cores) lands on several configurations, not on
    all seeds of one batch size, and no batch size is always first or last in its round (issue 44; statistics
    review finding 7: a configuration-major queue confounded load with B). ``specs``: trial specs (objects or
    dicts) with ``seed`` and ``run_id``. Returns them reordered."""
    import random

    def get(s: Any, key: str) -> Any:
        return s.get(key) if isinstance(s, dict) else getattr(s, key, None)

    specs = list(specs)
    rounds: dict[Any, list[Any]] = {}
    for s in sorted(specs, key=lambda s: (get(s, "seed") or 0, str(get(s, "run_id")))):
        rounds.setdefault(get(s, "seed") or 0, []).append(s)
    rng = random.Random(seed)
    out: list[Any] = []
    for key in sorted(rounds):
        r = list(rounds[key])
        rng.shuffle(r)
        out += r
    return out
