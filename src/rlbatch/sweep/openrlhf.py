"""One trial of the study as an OpenRLHF command: ``python3 -m openrlhf.cli.train_ppo_ray`` with the trial's P, G,
scaled lr and sample budget.

Flag names and meanings follow ``openrlhf/cli/train_ppo_ray.py`` (github.com/OpenRLHF/OpenRLHF):
``--rollout_batch_size`` (prompts per rollout = P), ``--n_samples_per_prompt`` (G), ``--train_batch_size`` (global
training batch in samples = P x G, so one rollout is one optimizer update with ``--max_epochs 1``),
``--actor_learning_rate`` / ``--critic_learning_rate``, ``--num_episodes`` and ``--max_samples`` (prompts used;
steps = num_episodes x max_samples / rollout_batch_size), ``--use_tensorboard`` (log directory; the writer uses
``<use_tensorboard>/<wandb_run_name>``, openrlhf/trainer/ppo_trainer.py), ``--ckpt_path``, ``--load_checkpoint``,
``--save_steps``, ``--logging_steps``, ``--seed``, ``--advantage_estimator`` (``group_norm`` is GRPO).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr
from rlbatch.sweep.baseconfig import Entry, check_conflicts
from rlbatch.sweep.verl import _base_plan, expected_log_path

OPENRLHF_CONTROLLED = {
    "rollout_batch_size": "P, prompts per step = B / G",
    "n_samples_per_prompt": "G, responses per prompt",
    "actor_learning_rate": "lr from the scaling rule",
    "num_episodes": "the sample budget (1 pass over max_samples prompts)",
    "max_samples": "the sample budget: steps x P prompts",
    "use_tensorboard": "the trial's log directory",
    "wandb_run_name": "the trial's run id, names the TensorBoard directory",
    "ckpt_path": "the trial's checkpoint directory under the sweep",
    "seed": "the trial's seed",
}


def openrlhf_plan(trial: dict, out_dir: Path | str, base: list[Entry] | None = None, *,
                  base_path: Path | str | None = None, base_critic_lr: float | None = None) -> dict:
    """The plan of one trial on OpenRLHF (see the module doc for the flags).

    ``base`` are the user's flags (``--pretrain``, ``--prompt_data``, GPU layout, ...). ``--train_batch_size`` may be
    set there to take several updates per rollout (it must divide P x G); otherwise it is P x G (one update per
    step). ``--critic_learning_rate`` in the base (or ``base_critic_lr``) is the critic's lr0 at B0 and is scaled
    by the same rule. Raises :class:`UserError` on a conflict with :data:`OPENRLHF_CONTROLLED`.
    """
    base = base or []
    check_conflicts(base, OPENRLHF_CONTROLLED, base_path)
    out = Path(out_dir).expanduser().resolve()
    rid, p, g, b = trial["run_id"], trial["prompts_per_step"], trial["group_size"], trial["batch_size"]
    plan = _base_plan(trial, "openrlhf", out)
    flags: dict[str, object] = {
        "advantage_estimator": "group_norm",
        "train_batch_size": b,
        "max_epochs": 1,
        "logging_steps": 1,
        "save_steps": max(1, math.ceil(trial["steps"] / 10)),
        "load_checkpoint": None,
        "save_path": str(out / "models" / rid),
    }
    base_vals = {e.key: e.value for e in base}
    for e in base:
        flags[e.key] = e.value
    critic_lr0 = base_critic_lr
    if "critic_learning_rate" in base_vals:
        try:
            critic_lr0 = float(base_vals["critic_learning_rate"])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UserError("--critic_learning_rate must be a number", path=str(base_path) if base_path else None)
    if critic_lr0 is not None:
        flags["critic_learning_rate"] = repr(scaled_lr(b, trial["base_batch"], critic_lr0, trial["lr_rule"]))
    try:
        tbs = int(flags["train_batch_size"])  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError("--train_batch_size must be an integer", path=str(base_path) if base_path else None) from None
    if tbs < 1 or b % tbs:
        raise UserError(f"--train_batch_size={tbs} must divide B = P x G = {b} (trial {rid})",
                        path=str(base_path) if base_path else None)
    log = expected_log_path(trial, out, "openrlhf")
    flags.update({
        "rollout_batch_size": p,
        "n_samples_per_prompt": g,
        "actor_learning_rate": repr(float(trial["lr"])),
        "num_episodes": 1,
        "max_samples": trial["steps"] * p,
        "use_tensorboard": str(log.parent),
        "wandb_run_name": rid,
        "ckpt_path": str(out / "checkpoints" / rid),
        "seed": trial.get("seed", 0),
    })
    cmd = ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    for k, v in flags.items():
        cmd.append(f"--{k}")
        if isinstance(v, list):
            cmd.extend(str(x) for x in v)
        elif v is not None:
            cmd.append(str(v))
    plan.update(command=cmd, log_path=str(log), log_format="tensorboard", updates_per_step=b // tbs,
                experiment_name=rid, checkpoint_dir=str(out / "checkpoints" / rid),
                prepare=[f"mkdir -p {shlex.quote(str(log.parent))}"])
    return plan
