"""The trial list of a batch-size study: one trial per (batch size, seed), each with its scaled learning rate.

Shared by every backend (local trainer, Ray, verl / OpenRLHF / TRL launchers) so that they all run the same study.
"""

from __future__ import annotations

import math
from typing import Iterable

from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr


def trial_id(prompts_per_step: int, group_size: int, rule: str, seed: int) -> str:
    """Run id of a trial, e.g. ``P64-G8-sqrt-s0``: stable, filesystem- and Hydra-safe (letters, digits, ``-``)."""
    return f"P{prompts_per_step}-G{group_size}-{rule}-s{seed}"


def steps_for_budget(samples: int, batch_size: int) -> int:
    """Optimizer steps to spend a budget of ``samples`` responses at ``batch_size`` responses per step:
    ``ceil(samples / B)`` (one update per rollout batch, DESIGN.md "Trainer"). Raises :class:`UserError` if either
    is not positive."""
    if samples < 1 or batch_size < 1:
        raise UserError(f"samples ({samples}) and batch size ({batch_size}) must be >= 1", field="samples")
    return math.ceil(samples / batch_size)


def make_trials(base_batch: int, base_lr: float, batches: Iterable[int], rule: str, group_size: int, samples: int,
                fixed_lr_control: int | None = None, seeds: int = 1) -> list[dict]:
    """The trials of a study: for every batch size B in ``batches`` and every seed, one trial with
    P = B / G prompts per step, G = ``group_size`` responses per prompt, lr = ``scaled_lr(B, B0, lr0, rule)``
    (square-root rule by default; Malladi et al. 2022, the paper's eta(B)), and ``steps = ceil(samples / B)`` so
    that every trial spends the same budget of generated responses.

    ``fixed_lr_control`` (a batch size) adds the paper's control: the same batch trained with the *unscaled* lr0
    (rule ``none``) to show that the rule, not the batch, aligns the curves. ``seeds`` repeats every trial with
    seeds ``0..seeds-1``.

    Returns a list of dicts with keys ``run_id, prompts_per_step, group_size, batch_size, lr, lr_rule, base_batch,
    base_lr, samples, steps, seed`` (units: responses, responses per update, optimizer steps).

    Raises :class:`UserError` when a batch is not a multiple of G, a number is not positive, or the rule is unknown.
    """
    if group_size < 1:
        raise UserError(f"--group-size must be >= 1, got {group_size}", field="group_size")
    if seeds < 1:
        raise UserError(f"--seeds must be >= 1, got {seeds}", field="seeds")
    scaled_lr(base_batch, base_batch, base_lr, rule)  # validates base point and rule
    ladder = [int(b) for b in batches]
    if not ladder:
        raise UserError("--batches: give at least one batch size", field="batches")
    specs: list[tuple[int, str]] = [(b, rule) for b in ladder]
    if fixed_lr_control is not None:
        specs.append((int(fixed_lr_control), "none"))
    trials: list[dict] = []
    seen: set[str] = set()
    for b, r in specs:
        if b < 1 or b % group_size:
            raise UserError(f"--batches: batch size {b} is not a positive multiple of the group size G={group_size} "
                            f"(B = P x G)", field="batches")
        p = b // group_size
        for seed in range(seeds):
            rid = trial_id(p, group_size, r, seed)
            if rid in seen:
                continue
            seen.add(rid)
            trials.append({
                "run_id": rid,
                "prompts_per_step": p,
                "group_size": group_size,
                "batch_size": b,
                "lr": scaled_lr(b, base_batch, base_lr, r),
                "lr_rule": r,
                "base_batch": base_batch,
                "base_lr": base_lr,
                "samples": samples,
                "steps": steps_for_budget(samples, b),
                "seed": seed,
            })
    return trials
