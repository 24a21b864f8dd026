"""One trial of the study as a verl command, with the scaled learning rate.

For a trial of :func:`rlbatch.study.ladder.make_trials` :func:`verl_plan` builds the full
``python3 -m verl.trainer.main_ppo`` command with Hydra overrides:

- ``data.train_batch_size`` = P (verl counts prompts per step),
- ``actor_rollout_ref.rollout.n`` = G,
- ``actor_rollout_ref.actor.optim.lr`` = lr(B) from the rule (``rlbatch.scaling.scaled_lr``),
- ``actor_rollout_ref.actor.ppo_mini_batch_size`` = P (also in prompts; verl multiplies it by ``rollout.n``), so one
  step is one optimizer update, unless the base configuration sets it (then ``updates_per_step`` = P / mini),
- ``trainer.total_training_steps`` = ceil(samples / (P x G)) (the sample budget),
- ``trainer.logger=[console,file]`` and ``VERL_FILE_LOGGER_PATH`` so verl's ``FileLogger`` writes one JSON line
  ``{"step": N, "data": {...}}`` per step to :func:`expected_log_path`,
- ``trainer.project_name`` / ``trainer.experiment_name`` (= the trial's run id), ``trainer.default_local_dir``
  (checkpoints, under the sweep directory) and ``trainer.resume_mode=auto`` so a re-launch resumes.

The option names follow verl's ``verl/trainer/config/_generated_ppo_trainer.yaml`` and ``verl/utils/tracking.py``
(``FileLogger``: ``VERL_FILE_LOGGER_PATH``, else ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``) in
github.com/verl-project/verl (formerly volcengine/verl).

The plan's common fields and the sweep directory's layout are :mod:`rlbatch.backends.launch_plan`'s; planning all trials
on any backend and writing, printing or submitting the plans is :mod:`rlbatch.backends.launch`'s.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rlbatch.errors import UserError
from rlbatch.backends.launch_config import Entry, check_conflicts
from rlbatch.backends.launch_plan import DEFAULT_PROJECT

#: Hydra keys rlbatch sets for every trial; a base config that sets one is an error (it would silently break P, G,
#: the LR rule or the budget).
VERL_CONTROLLED = {
    "data.train_batch_size": "P, prompts per step = B / G",
    "actor_rollout_ref.rollout.n": "G, responses per prompt",
    "actor_rollout_ref.actor.optim.lr": "lr from the scaling rule",
    "trainer.total_training_steps": "ceil(samples / B), the sample budget",
    "trainer.project_name": "used to find the log",
    "trainer.experiment_name": "the trial's run id, used to find the log",
    "trainer.default_local_dir": "the trial's checkpoint directory under the sweep",
}


def _parse_logger_list(value: str) -> list[str]:
    inner = value.strip().strip("[]")
    return [x.strip().strip("'\"") for x in inner.split(",") if x.strip()]


def verl_plan(plan: dict, out_dir: Path | str, base: list[Entry] | None = None, *,
              project: str = DEFAULT_PROJECT, base_path: Path | str | None = None) -> dict:
    """Complete one trial's common ``plan`` (:func:`rlbatch.backends.launch_plan.base_plan`) for verl: command,
    environment and log format; see the module doc for the overrides.

    ``base`` are the user's Hydra overrides (:func:`rlbatch.backends.launch_config.read_base_config`); they come first
    and may replace rlbatch's defaults (``algorithm.adv_estimator=grpo``, ``trainer.resume_mode=auto``,
    ``trainer.save_freq``, ``hydra.run.dir``) but not the per-trial keys in :data:`VERL_CONTROLLED`.
    ``trainer.logger`` from the base is kept and ``file`` added to it. Raises :class:`UserError` on a conflict or
    when the base's ``ppo_mini_batch_size`` does not divide P.
    """
    base = base or []
    check_conflicts(base, VERL_CONTROLLED, base_path)
    out = Path(out_dir).expanduser().resolve()
    rid, p, g = plan["run_id"], plan["prompts_per_step"], plan["group_size"]
    where = str(base_path) if base_path else None
    log = Path(plan["log_path"])
    ckpt = plan["checkpoint_dir"]

    defaults: dict[str, str] = {
        "algorithm.adv_estimator": "grpo",
        "actor_rollout_ref.actor.ppo_mini_batch_size": str(p),
        "trainer.logger": "[console,file]",
        "trainer.resume_mode": "auto",
        "trainer.save_freq": str(plan["checkpoint_every"]),
        "++data.seed": str(plan["seed"]),
        "hydra.run.dir": str(out / "hydra" / rid),
    }
    merged: dict[str, str] = dict(defaults)
    for e in base:
        key = e.key
        if key.lstrip("+") in ("data.seed",):
            merged.pop("++data.seed", None)
        if key == "trainer.logger":
            loggers = _parse_logger_list(str(e.value))
            for name in ("console", "file"):
                if name not in loggers:
                    loggers.append(name)
            merged[key] = "[" + ",".join(loggers) + "]"
            continue
        merged[key] = "" if e.value is None else str(e.value)
    mini = merged["actor_rollout_ref.actor.ppo_mini_batch_size"]
    try:
        mini_i = int(mini)
    except ValueError:
        raise UserError(f"actor_rollout_ref.actor.ppo_mini_batch_size={mini!r} is not an integer",
                        path=where) from None
    if mini_i < 1 or p % mini_i:
        raise UserError(f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_i} must divide P={p} (prompts per step "
                        f"of trial {rid})", path=where)
    controlled = {
        "data.train_batch_size": str(p),
        "actor_rollout_ref.rollout.n": str(g),
        "actor_rollout_ref.actor.optim.lr": repr(float(plan["lr"])),
        "trainer.total_training_steps": str(plan["steps"]),
        "trainer.project_name": project,
        "trainer.experiment_name": rid,
        "trainer.default_local_dir": ckpt,
        # the file logger runs in verl's TaskRunner (a Ray actor): pass the path through the job's runtime env too
        "++ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH": str(log),
    }
    final = {**controlled, **{k: v for k, v in merged.items() if k not in controlled}}
    plan["command"] = ["python3", "-m", "verl.trainer.main_ppo", *(f"{k}={v}" for k, v in final.items())]
    plan["env"] = {"VERL_FILE_LOGGER_PATH": str(log), "VERL_FILE_LOGGER_ROOT": str(out / "logs")}
    plan["updates_per_step"] = p // mini_i
    plan["log_path"] = str(log)
    plan["log_format"] = "verl-file"
    plan["experiment_name"] = rid
    plan["project_name"] = project
    plan["checkpoint_dir"] = ckpt
    # verl's FileLogger opens its file with mode "wb": keep an earlier attempt's log instead of losing it
    plan["prepare"] = [f"mkdir -p {shlex.quote(str(log.parent))}",
                       f"if [ -s {shlex.quote(str(log))} ]; then mv {shlex.quote(str(log))} "
                       f"{shlex.quote(str(log))}.$(date +%Y%m%dT%H%M%S); fi"]
    return plan


