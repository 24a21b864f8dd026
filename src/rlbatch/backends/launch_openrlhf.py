"""One trial of the study as an OpenRLHF command: ``python3 -m openrlhf.cli.train_ppo_ray`` with the trial's P, G,
scaled lr and sample budget.

OpenRLHF renamed its flags in 0.10.2 (``--rollout_batch_size`` -> ``--rollout.batch_size``, ...). Both dialects are
supported (:data:`FLAGS`): ``dotted`` (OpenRLHF >= 0.10.2; checked against 0.11.2 from PyPI) and ``flat``
(<= 0.10.1; checked against 0.10.0 and github.com/OpenRLHF/OpenRLHF openrlhf/cli/train_ppo_ray.py @ 021d1b09).
Meanings (openrlhf/cli/train_ppo_ray.py): rollout batch = prompts per rollout (P); samples per prompt (G); train
batch = global training batch in samples (P x G, so one rollout is one optimizer update with max_epochs 1); actor /
critic Adam lr; num_episodes x max_samples / rollout batch = steps (max_samples counts prompts); the TensorBoard
writer logs to ``<tensorboard dir>/<wandb run name>`` (openrlhf/trainer/ppo_trainer.py, utils/logging_utils.py);
checkpoint path + load switch let a re-launch resume; advantage estimator ``group_norm`` is GRPO.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rlbatch.batchspec import OPENRLHF_FLAGS
from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr
from rlbatch.backends.launch_config import Entry, check_conflicts

#: role -> (dotted flag for OpenRLHF >= 0.10.2, flat flag for <= 0.10.1), without the leading ``--``: the one table
#: that reading a launch (:mod:`rlbatch.batchspec`) and writing one share.
FLAGS = OPENRLHF_FLAGS
DIALECTS = ("dotted", "flat")


def flag(role: str, dialect: str = "dotted") -> str:
    """The OpenRLHF flag (without ``--``) for ``role`` in ``dialect`` (``dotted`` or ``flat``)."""
    if dialect not in DIALECTS:
        raise UserError(f"unknown OpenRLHF flag dialect {dialect!r}; choose dotted (>= 0.10.2) or flat (<= 0.10.1)",
                        field="openrlhf_flags")
    return FLAGS[role][DIALECTS.index(dialect)]


_REASONS = {
    "rollout_batch": "P, prompts per step = B / G",
    "n_samples": "G, responses per prompt",
    "actor_lr": "lr from the scaling rule",
    "num_episodes": "the sample budget (1 pass over max_samples prompts)",
    "max_samples": "the sample budget: steps x P prompts",
    "tensorboard": "the trial's log directory",
    "run_name": "the trial's run id, names the TensorBoard directory",
    "ckpt_path": "the trial's checkpoint directory under the sweep",
    "seed": "the trial's seed",
}


def controlled_flags(dialect: str = "dotted") -> dict[str, str]:
    """Flags rlbatch sets per trial (flag -> reason); a base config may not set them."""
    return {flag(role, dialect): why for role, why in _REASONS.items()}


def openrlhf_plan(plan: dict, out_dir: Path | str, base: list[Entry] | None = None, *,
                  base_path: Path | str | None = None, base_critic_lr: float | None = None,
                  dialect: str = "dotted") -> dict:
    """Complete one trial's common ``plan`` (:func:`rlbatch.backends.launch_plan.base_plan`) for OpenRLHF (see the
    module doc for the flags), in flag ``dialect``.

    ``base`` are the user's flags (model, data, GPU layout, ...). The train batch flag may be set there to take
    several updates per rollout (it must divide P x G); otherwise it is P x G (one update per step). The critic lr in
    the base (or ``base_critic_lr``) is the critic's lr0 at B0 and is scaled by the same rule. Raises
    :class:`UserError` when the base sets a flag of :func:`controlled_flags` (naming file and line).
    """
    base = base or []
    f = lambda role: flag(role, dialect)  # noqa: E731
    check_conflicts(base, controlled_flags(dialect), base_path)
    where = str(base_path) if base_path else None
    out = Path(out_dir).expanduser().resolve()
    rid, p, g, b = plan["run_id"], plan["prompts_per_step"], plan["group_size"], plan["batch_size"]
    ckpt = plan["checkpoint_dir"]
    flags: dict[str, object] = {
        f("estimator"): "group_norm",
        f("train_batch"): b,
        f("max_epochs"): 1,
        f("logging_steps"): 1,
        f("save_steps"): plan["checkpoint_every"],
        f("load_ckpt"): None,
        f("save_path"): str(out / "models" / rid),
    }
    for e in base:
        flags[e.key] = e.value
    critic_lr0 = base_critic_lr
    if f("critic_lr") in flags:
        try:
            critic_lr0 = float(flags[f("critic_lr")])  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UserError(f"--{f('critic_lr')} must be a number", path=where) from None
    if critic_lr0 is not None:
        flags[f("critic_lr")] = repr(scaled_lr(b, plan["base_batch"], critic_lr0, plan["lr_rule"]))
    try:
        tbs = int(flags[f("train_batch")])  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"--{f('train_batch')} must be an integer", path=where) from None
    if tbs < 1 or b % tbs:
        raise UserError(f"--{f('train_batch')}={tbs} must divide B = P x G = {b} (trial {rid})", path=where)
    log = Path(plan["log_path"])
    flags.update({
        f("rollout_batch"): p,
        f("n_samples"): g,
        f("actor_lr"): repr(float(plan["lr"])),
        f("num_episodes"): 1,
        f("max_samples"): plan["steps"] * p,
        f("tensorboard"): str(log.parent),
        f("run_name"): rid,
        f("ckpt_path"): ckpt,
        f("seed"): plan["seed"],
    })
    cmd = ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    for k, v in flags.items():
        cmd.append(f"--{k}")
        if isinstance(v, list):
            cmd.extend(str(x) for x in v)
        elif v is not None:
            cmd.append(str(v))
    plan.update(command=cmd, log_path=str(log), log_format="tensorboard", updates_per_step=b // tbs,
                experiment_name=rid, checkpoint_dir=ckpt, openrlhf_flags=dialect,
                prepare=[f"mkdir -p {shlex.quote(str(log.parent))}"])
    return plan
