"""Shared by the experiment-tracker readers (:mod:`.wandb_dir`, :mod:`.mlflow_store`): a run's configuration
-> the run-store batch fields (:func:`config_fields`), and the clock from a tracker's time stamps
(:func:`wall_from_runtime`).

Trackers keep a run's hyperparameters as a flat or nested mapping whose names depend on the trainer. This module
reads from it what the analysis needs: P (prompts per rollout step), G (responses per prompt), the update batch
(responses per optimizer update, when a rollout is split into several updates), the peak learning rate and the
model, and says which key each came from. Names are looked up by full dotted path first (verl's Hydra keys), then
by the last component of a key (``trainer.lr`` -> ``lr``); values may be numbers or numeric strings (MLflow keeps
params as text). Nothing is evaluated.

| field | keys (first present wins) |
|---|---|
| P | ``data.train_batch_size`` (verl), ``prompts_per_step``, ``num_prompts``, ``n_prompts``, ``prompts_per_rollout``, ``P``; OpenRLHF's ``rollout_batch_size`` when ``n_samples_per_prompt`` is there; TRL's ``generation_batch_size`` / ``num_generations`` (one update per generation) |
| G | ``actor_rollout_ref.rollout.n`` (verl), ``group_size``, ``n_samples_per_prompt`` (OpenRLHF), ``num_generations`` (TRL), ``responses_per_prompt``, ``num_samples_per_prompt``, ``G`` |
| update batch | ``actor_rollout_ref.actor.ppo_mini_batch_size`` x G (verl: in prompts), OpenRLHF's ``train_batch_size`` (responses), ``responses_per_update``, ``update_batch_size``, ``mini_batch_size``, ``batch_size`` (responses; used only when it divides P x G, and for the last two not equal to P) |
| lr | ``actor_rollout_ref.actor.optim.lr`` (verl), ``lr``, ``learning_rate``, ``actor_learning_rate``, ``actor_lr`` (not a critic's) |
| model | ``actor_rollout_ref.model.path`` (verl), ``model_name_or_path``, ``model_name``, ``model``, ``pretrain``, ``base_model`` |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlbatch.batchspec import flatten
from rlbatch.readers import names as N
from rlbatch.readers.common import build_run, finalize, to_count, to_float
from rlbatch.runstore import Run

P_EXACT = ("data.train_batch_size",)
P_LEAF = ("prompts_per_step", "num_prompts", "n_prompts", "prompts_per_rollout", "P")
G_EXACT = ("actor_rollout_ref.rollout.n",)
G_LEAF = ("group_size", "n_samples_per_prompt", "num_generations", "responses_per_prompt", "num_samples_per_prompt",
          "G")
UPDATE_PROMPTS_EXACT = ("actor_rollout_ref.actor.ppo_mini_batch_size",)
UPDATE_LEAF = ("responses_per_update", "update_batch_size", "mini_batch_size", "batch_size")
#: names that count prompts in some trainers and responses in others: equal to P, read as prompts
AMBIGUOUS_UNIT = ("mini_batch_size", "batch_size")
LR_EXACT = ("actor_rollout_ref.actor.optim.lr",)
LR_LEAF = ("lr", "learning_rate", "actor_learning_rate", "actor_lr")
MODEL_EXACT = ("actor_rollout_ref.model.path",)
MODEL_LEAF = ("model_name_or_path", "model_name", "model", "pretrain", "base_model", "_name_or_path")


@dataclass
class ConfigFields:
    """What :func:`config_fields` read: ``fields`` (run-store metadata: ``prompts_per_step``, ``group_size``,
    ``batch_size``, ``rollout_batch_size``, ``lr``, ``model``; only those found) and ``notes`` (where each came
    from, and what was ignored and why)."""

    fields: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _find(flat: dict[str, Any], exact: tuple[str, ...], leaf: tuple[str, ...],
          skip: tuple[str, ...] = ()) -> tuple[str, Any] | None:
    for k in exact:
        if k in flat and flat[k] is not None:
            return k, flat[k]
    for name in leaf:
        if name in flat and flat[name] is not None:
            return name, flat[name]
        for k, v in flat.items():
            parts = k.split(".")
            if parts[-1] == name and v is not None and not any(s in parts for s in skip):
                return k, v
    return None


def _trl_prompts(flat: dict[str, Any], g_key: tuple[str, Any], notes: list[str], source: str) -> int | None:
    """P of a TRL GRPO run (its TrainingArguments as W&B / MLflow keep them): ``generation_batch_size`` (global
    completions per generation, TRL >= 0.18) / ``num_generations``, when each generation feeds one optimizer step
    (``steps_per_generation`` = ``gradient_accumulation_steps``, TRL's default, and ``num_iterations`` 1): then a
    logged step is one rollout of P x G. Otherwise None with a note (the logged step is an optimizer step over
    part of a generation, so steps x P x G would overcount the samples)."""
    gen = _find(flat, (), ("generation_batch_size",))
    if gen is None or g_key[0].split(".")[-1] != "num_generations":
        return None
    total, g = to_count(gen[1]), to_count(g_key[1])
    spg = to_count((_find(flat, (), ("steps_per_generation",)) or (None, None))[1])
    acc = to_count((_find(flat, (), ("gradient_accumulation_steps",)) or (None, 1))[1])
    iters = to_count((_find(flat, (), ("num_iterations",)) or (None, 1))[1])
    if not total or not g or total % g:
        return None
    if spg is not None and (spg != acc or iters != 1):
        notes.append(f"{source}: TRL generates {total} completions every {spg} micro-steps and updates every {acc} "
                     f"({iters} iteration(s) per generation): a logged step is not one rollout; P and G left unknown "
                     "(--set RUN:prompts_per_step=... --set RUN:group_size=... with --set RUN:batch_size=...)")
        return None
    return total // g


def config_fields(config: dict[str, Any], source: str) -> ConfigFields:
    """P, G, the update batch, lr and model from a run's configuration ``config`` (nested or flat; keys in the
    module table), with one note per field naming the key and ``source`` (e.g. ``"W&B config.yaml"``).

    The update batch is kept only when it is a divisor of P x G smaller than it (several updates per rollout: then
    ``batch_size`` is the update batch and ``rollout_batch_size`` P x G, DESIGN.md); otherwise B = P x G. Values
    that are not positive whole numbers (P, G, batch) or positive finite numbers (lr) are ignored with a note.
    Never raises for a malformed config: what cannot be read is left out.
    """
    flat = flatten(config)
    out = ConfigFields()

    def count(found: tuple[str, Any] | None, what: str) -> int | None:
        if found is None:
            return None
        v = to_count(found[1])
        if not v:
            out.notes.append(f"{what}: {source} key {found[0]!r} = {found[1]!r} is not a positive whole number; "
                             "ignored")
            return None
        return v

    openrlhf = _find(flat, (), ("n_samples_per_prompt",)) is not None
    p_key = _find(flat, P_EXACT, P_LEAF + (("rollout_batch_size",) if openrlhf else ()))
    g_key = _find(flat, G_EXACT, G_LEAF)
    p, g = count(p_key, "P"), count(g_key, "G")
    n_notes = len(out.notes)
    trl = _trl_prompts(flat, g_key, out.notes, source) if p_key is None and g else None
    trl_explained = len(out.notes) > n_notes
    if trl is not None:
        p, p_key = trl, ("generation_batch_size / num_generations", None)
    if p and g:
        out.fields.update(prompts_per_step=p, group_size=g)
        out.notes.append(f"P = {p} and G = {g} from {source} ({p_key[0]!r}, {g_key[0]!r})")
        upd = None
        mini = _find(flat, UPDATE_PROMPTS_EXACT, ())
        if mini is not None and count(mini, "update batch"):
            upd = (mini[0], to_count(mini[1]) * g, f"{mini[0]} x G = {to_count(mini[1])} x {g}")
        else:
            key = _find(flat, (), (("train_batch_size",) if openrlhf else ()) + UPDATE_LEAF)
            ambiguous = key is not None and key[0].split(".")[-1] in AMBIGUOUS_UNIT
            if ambiguous and key[0] != p_key[0] and to_count(key[1]) == p and p != p * g:
                out.notes.append(f"{source} {key[0]!r} = {p} equals P: read as prompts per step, not as responses "
                                 "per update")
            elif key is not None and key[0] != p_key[0] and to_count(key[1]):
                upd = (key[0], to_count(key[1]), f"{key[0]!r}")
        if upd is not None:
            b = upd[1]
            if b < p * g and (p * g) % b == 0:
                out.fields.update(batch_size=b, rollout_batch_size=p * g)
                out.notes.append(f"update batch B = {b} responses per optimizer update from {source} ({upd[2]}): "
                                 f"{p * g // b} updates per rollout of P x G = {p * g}; the LR rule applies to B")
            elif b != p * g:
                out.notes.append(f"{source} {upd[2]} = {b} is not a divisor of P x G = {p * g} (not responses per "
                                 "update, or another unit): update batch taken as P x G")
    elif (p_key or g_key) and not trl_explained:
        out.notes.append(f"{source} gives only {'P' if p else 'G'} ({(p_key or g_key)[0]!r}); P x G unknown (give "
                         "the other with --set RUN:prompts_per_step=... / --set RUN:group_size=...)")
    lr_key = _find(flat, LR_EXACT, LR_LEAF, skip=("critic", "value", "reward_model", "ref"))
    if lr_key is not None:
        lr = to_float(lr_key[1])
        if lr is not None and math.isfinite(lr) and lr > 0:
            out.fields["lr"] = lr
            out.notes.append(f"lr {lr:.3g} from {source} ({lr_key[0]!r})")
        else:
            out.notes.append(f"lr: {source} key {lr_key[0]!r} = {lr_key[1]!r} is not a positive number; ignored")
    model = _find(flat, MODEL_EXACT, MODEL_LEAF, skip=("critic", "reward_model", "ref"))
    if model is not None and isinstance(model[1], str) and model[1].strip():
        out.fields["model"] = model[1].strip()
    return out


def wall_from_runtime(steps: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """Cumulative training seconds at each logged step from a tracker's seconds since start (W&B ``_runtime``,
    MLflow metric timestamps): the time before the first logged step (start-up: model loading, compilation) is
    replaced by the median seconds per step times the first step's number. Shapes: (n,) -> (n,); all NaN when
    fewer than two steps."""
    t = np.asarray(runtime, dtype=float)
    s = np.asarray(steps, dtype=float)
    if len(t) < 2:
        return np.full(len(t), np.nan)
    dt = np.diff(t) / np.maximum(np.diff(s), 1.0)
    per_step = float(np.nanmedian(dt)) if np.isfinite(dt).any() else np.nan
    return t - t[0] + per_step * max(s[0], 1.0)


def tracker_run(rows: list[dict[str, Any]], *, path: Path, source_format: str, fields: dict[str, Any],
                notes: list[str], user_map: dict[str, str] | None, clock: str, clock_note: str,
                extra_evals: Any = ()) -> Run:
    """The run of a tracker's history ``rows`` (:func:`rlbatch.readers.common.build_run`), with ``time/wall_s``
    from the tracker's seconds-since-start column ``clock`` (W&B ``_runtime``, MLflow's ``_time_s``) through
    :func:`wall_from_runtime` when the history has no wall clock of its own and more than one step; ``clock_note``
    says where it came from."""
    run = build_run(rows, path=path, source_format=source_format, meta_fields=fields, notes=notes,
                    user_map=user_map, extra_evals=extra_evals)
    m = run.metrics
    if "time/wall_s" not in m.columns and f"raw/{clock}" in m.columns and len(m) > 1:
        m["time/wall_s"] = wall_from_runtime(m["step"].to_numpy(float), m[f"raw/{clock}"].to_numpy(float))
        run.notes.append(clock_note)
        finalize(run)
    return run


def clock_only_on_training(rows: list[dict[str, Any]], clock_keys: tuple[str, ...],
                           user_map: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Drop a tracker's bookkeeping clock (``clock_keys``: W&B ``_runtime`` / ``_timestamp``, MLflow's timestamp
    column) from rows that hold nothing but evaluation values, so that an evaluation logged at its own step stays an
    evaluation point and does not become a training step (:func:`rlbatch.readers.common.build_run` counts a row
    with any non-evaluation value as a training step). Returns ``rows`` (changed in place)."""
    steps = set(N.FOREIGN_NAMES["step"]) | {"_step"}
    for row in rows:
        named = [k for k in row if k not in clock_keys and k not in steps]
        if named and all(N.is_eval_name(k, user_map) or N.is_validation_side(k, user_map) for k in named):
            for k in clock_keys:
                row.pop(k, None)
    return rows
