"""Launch the study on verl (and, through the same plan machinery, OpenRLHF and TRL) with the scaled learning rate.

For every trial of :func:`rlbatch.sweep.trials.make_trials` this module builds the full
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

A *plan* is one dict per trial: the trial's fields plus ``backend``, ``command`` (argv list), ``env`` (variables to
export), ``files`` (config files to write, path -> text), ``log_path`` / ``log_format`` (where the trial's log will
appear and in which format), ``script`` (the trial's shell script) and ``done_marker``. :func:`plan_trials` builds
plans for any of the three backends; :func:`write_launch` writes ``launch.sh`` + one script per trial + ``plan.json``;
:func:`submit_plans` submits them with Ray's job submission API; :func:`format_dry_run` prints them.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.runstore import atomic_write_text
from rlbatch.sweep.baseconfig import Entry, check_conflicts, read_base_config

BACKENDS = ("verl", "openrlhf", "trl")
DEFAULT_PROJECT = "rlbatch"

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


def expected_log_path(trial: dict, out_dir: Path | str, backend: str = "verl",
                      project: str = DEFAULT_PROJECT) -> Path:
    """Where the trial's training log will appear (absolute path), for ``backend``:

    - ``verl``: ``OUT/logs/<project>/<run_id>.jsonl``, verl's file logger (JSONL ``{"step": N, "data": {...}}``;
      the same layout as ``FileLogger``'s ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl`` with
      ``VERL_FILE_LOGGER_ROOT=OUT/logs``),
    - ``openrlhf``: ``OUT/logs/openrlhf/<run_id>`` (TensorBoard event directory: ``--use_tensorboard`` joined with
      ``--wandb_run_name``, openrlhf/trainer/ppo_trainer.py),
    - ``trl``: ``OUT/logs/trl/<run_id>`` (TensorBoard event directory, ``TENSORBOARD_LOGGING_DIR``).

    This is the contract with the reader side: ``rlbatch analyze OUT/logs`` (or the path itself) reads it back.
    """
    out = Path(out_dir).expanduser().resolve()
    rid = trial["run_id"]
    if backend == "verl":
        return out / "logs" / project / f"{rid}.jsonl"
    if backend in ("openrlhf", "trl"):
        return out / "logs" / backend / rid
    raise UserError(f"unknown launch backend {backend!r}; choose one of {', '.join(BACKENDS)}", field="backend")


def _base_plan(trial: dict, backend: str, out: Path) -> dict:
    keys = ("run_id", "prompts_per_step", "group_size", "batch_size", "lr", "lr_rule", "base_batch", "base_lr",
            "samples", "steps", "seed")
    plan = {k: trial[k] for k in keys if k in trial}
    plan.update(backend=backend, env={}, files={}, prepare=[],
                script=str(out / "trials" / f"{trial['run_id']}.sh"),
                done_marker=str(out / "trials" / f"{trial['run_id']}.done"))
    return plan


def _parse_logger_list(value: str) -> list[str]:
    inner = value.strip().strip("[]")
    return [x.strip().strip("'\"") for x in inner.split(",") if x.strip()]


def verl_plan(trial: dict, out_dir: Path | str, base: list[Entry] | None = None, *,
              project: str = DEFAULT_PROJECT, base_path: Path | str | None = None) -> dict:
    """The plan (command, environment, log path) of one trial on verl; see the module doc for the overrides.

    ``base`` are the user's Hydra overrides (:func:`rlbatch.sweep.baseconfig.read_base_config`); they come first
    and may replace rlbatch's defaults (``algorithm.adv_estimator=grpo``, ``trainer.resume_mode=auto``,
    ``trainer.save_freq``, ``hydra.run.dir``) but not the per-trial keys in :data:`VERL_CONTROLLED`.
    ``trainer.logger`` from the base is kept and ``file`` added to it. Raises :class:`UserError` on a conflict or
    when the base's ``ppo_mini_batch_size`` does not divide P.
    """
    base = base or []
    check_conflicts(base, VERL_CONTROLLED, base_path)
    out = Path(out_dir).expanduser().resolve()
    rid, p, g = trial["run_id"], trial["prompts_per_step"], trial["group_size"]
    log = expected_log_path(trial, out, "verl", project)
    plan = _base_plan(trial, "verl", out)

    defaults: dict[str, str] = {
        "algorithm.adv_estimator": "grpo",
        "actor_rollout_ref.actor.ppo_mini_batch_size": str(p),
        "trainer.logger": "[console,file]",
        "trainer.resume_mode": "auto",
        "trainer.save_freq": str(max(1, math.ceil(trial["steps"] / 10))),
        "++data.seed": str(trial.get("seed", 0)),
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
                        path=str(base_path) if base_path else None) from None
    if mini_i < 1 or p % mini_i:
        raise UserError(f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_i} must divide P={p} (prompts per step "
                        f"of trial {rid})", path=str(base_path) if base_path else None)
    controlled = {
        "data.train_batch_size": str(p),
        "actor_rollout_ref.rollout.n": str(g),
        "actor_rollout_ref.actor.optim.lr": repr(float(trial["lr"])),
        "trainer.total_training_steps": str(trial["steps"]),
        "trainer.project_name": project,
        "trainer.experiment_name": rid,
        "trainer.default_local_dir": str(out / "checkpoints" / rid),
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
    plan["checkpoint_dir"] = str(out / "checkpoints" / rid)
    # verl's FileLogger opens its file with mode "wb": keep an earlier attempt's log instead of losing it
    plan["prepare"] = [f"mkdir -p {shlex.quote(str(log.parent))}",
                       f"if [ -s {shlex.quote(str(log))} ]; then mv {shlex.quote(str(log))} "
                       f"{shlex.quote(str(log))}.$(date +%Y%m%dT%H%M%S); fi"]
    return plan


def plan_trials(trials: list[dict], backend: str, out_dir: Path | str, *, base_config: Path | str | None = None,
                project: str = DEFAULT_PROJECT, num_processes: int = 1, trl_script: str = "train_grpo.py",
                base_critic_lr: float | None = None, openrlhf_flags: str = "dotted") -> list[dict]:
    """Plans for all ``trials`` on ``backend`` (``verl``, ``openrlhf`` or ``trl``), reading ``base_config`` once.

    Backend options: ``project`` (verl project name), ``num_processes`` (TRL: GPUs in ``accelerate launch``),
    ``trl_script`` (TRL: the user's GRPO training script taking ``--config``), ``base_critic_lr`` (OpenRLHF PPO:
    the critic's lr0 at B0, scaled by the same rule), ``openrlhf_flags`` (``dotted`` for OpenRLHF >= 0.10.2,
    ``flat`` for older releases). Nothing is written. Raises :class:`UserError` for an unknown
    backend or a bad base configuration (naming file and line).
    """
    if backend == "verl":
        base = read_base_config(base_config, "hydra")
        return [verl_plan(t, out_dir, base, project=project, base_path=base_config) for t in trials]
    if backend == "openrlhf":
        from rlbatch.sweep.openrlhf import openrlhf_plan

        base = read_base_config(base_config, "flags")
        return [openrlhf_plan(t, out_dir, base, base_path=base_config, base_critic_lr=base_critic_lr,
                              dialect=openrlhf_flags) for t in trials]
    if backend == "trl":
        from rlbatch.sweep.trl import trl_plan

        base = read_base_config(base_config, "mapping")
        return [trl_plan(t, out_dir, base, base_path=base_config, num_processes=num_processes, script=trl_script)
                for t in trials]
    raise UserError(f"unknown launch backend {backend!r}; choose one of {', '.join(BACKENDS)}", field="backend")


# --------------------------------------------------------------------------------------------------- rendering
def command_line(plan: dict, multiline: bool = True) -> str:
    """The plan's command as a shell line (each argument quoted; one per line with ``\\`` when ``multiline``)."""
    args = [str(a) for a in plan["command"]]
    if not multiline:
        return " ".join(shlex.quote(a) for a in args)
    head = 2 if args[:2] == ["accelerate", "launch"] else 3
    lines = [" ".join(shlex.quote(a) for a in args[:head])]
    i = head
    while i < len(args):  # one argument per line; a flag and its value(s) share a line
        group = [args[i]]
        i += 1
        limit = 2 if args[0] == "accelerate" else len(args)  # accelerate: a flag takes one value, then the script
        while group[0].startswith("--") and i < len(args) and not args[i].startswith("--") and len(group) < limit:
            group.append(args[i])
            i += 1
        lines.append("  " + " ".join(shlex.quote(a) for a in group))
    return " \\\n".join(lines)


def trial_script(plan: dict) -> str:
    """The shell script of one trial: exports, config files already written, the command, then a done marker."""
    out = ["#!/usr/bin/env bash",
           f"# rlbatch trial {plan['run_id']} on {plan['backend']}: P={plan['prompts_per_step']} "
           f"G={plan['group_size']} B={plan['batch_size']} lr={plan['lr']!r} ({plan['lr_rule']} rule) "
           f"steps={plan['steps']}",
           f"# log: {plan['log_path']} ({plan['log_format']})",
           "set -euo pipefail"]
    out += [f"export {k}={shlex.quote(str(v))}" for k, v in plan["env"].items()]
    out += plan.get("prepare", [])
    out.append(command_line(plan))
    out.append(f"touch {shlex.quote(plan['done_marker'])}")
    return "\n".join(out) + "\n"


def launch_script(plans: list[dict]) -> str:
    """``launch.sh``: runs the trials one after the other (each uses the whole cluster), skips trials already done
    (their ``.done`` marker exists, so a re-run resumes), keeps going past a failure and exits 1 if any failed."""
    lines = ["#!/usr/bin/env bash",
             "# rlbatch launch script: one trial after the other; re-run to resume (finished trials are skipped).",
             "set -uo pipefail", "failed=0"]
    for p in plans:
        s, d = shlex.quote(p["script"]), shlex.quote(p["done_marker"])
        lines.append(f"if [ -e {d} ]; then echo 'skip {p['run_id']} (done)'; "
                     f"else echo 'run {p['run_id']}'; bash {s} || {{ echo 'FAILED {p['run_id']}'; failed=1; }}; fi")
    lines.append("exit $failed")
    return "\n".join(lines) + "\n"


def write_launch(plans: list[dict], out_dir: Path | str) -> Path:
    """Write ``OUT/launch.sh``, ``OUT/trials/<run_id>.sh``, each plan's config files and ``OUT/plan.json`` (the
    plans, including each trial's ``log_path``). Returns the path of ``launch.sh``."""
    out = Path(out_dir).expanduser().resolve()
    for p in plans:
        for path, text in p.get("files", {}).items():
            atomic_write_text(path, text)
        atomic_write_text(p["script"], trial_script(p))
        Path(p["script"]).chmod(0o755)
    launch = out / "launch.sh"
    atomic_write_text(launch, launch_script(plans))
    launch.chmod(0o755)
    atomic_write_text(out / "plan.json", json.dumps({"trials": plans}, indent=2) + "\n")
    return launch


def format_dry_run(plans: list[dict]) -> str:
    """Human-readable dry run: per trial a comment line (P, G, B, lr, steps, log) and its full command."""
    blocks = []
    for p in plans:
        head = (f"# {p['run_id']}: P={p['prompts_per_step']} G={p['group_size']} B={p['batch_size']} "
                f"lr={p['lr']:.6g} ({p['lr_rule']}) steps={p['steps']} log={p['log_path']}")
        env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in p["env"].items())
        files = "".join(f"# --- {path}\n{text}" for path, text in p.get("files", {}).items())
        blocks.append(head + "\n" + files + (f"{env} \\\n" if env else "") + command_line(p))
    return "\n\n".join(blocks) + "\n"


def submit_plans(plans: list[dict], address: str, out_dir: Path | str) -> list[dict]:
    """Submit every trial as a Ray job to the dashboard at ``address`` (e.g. ``http://HEAD:8265``) with
    ``ray.job_submission.JobSubmissionClient``. The scripts are written first (:func:`write_launch`); the sweep
    directory must be on a filesystem the cluster shares. Each job runs ``bash OUT/trials/<run_id>.sh`` with the
    plan's environment in its runtime env. Returns ``[{run_id, job_id, log_path}]`` and writes it to
    ``OUT/jobs.json``. Raises :class:`UserError` when Ray is missing or the address cannot be reached.
    """
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError:
        raise UserError("--submit needs Ray's job submission client: pip install 'rlbatch[ray]'") from None
    write_launch(plans, out_dir)
    try:
        client = JobSubmissionClient(address)
    except Exception as err:  # connection refused, bad URL, version mismatch
        raise UserError(f"--address {address}: cannot reach the Ray dashboard ({err})", field="address") from None
    jobs = []
    for p in plans:
        job_id = client.submit_job(entrypoint=f"bash {shlex.quote(p['script'])}",
                                   runtime_env={"env_vars": {k: str(v) for k, v in p["env"].items()}},
                                   metadata={"rlbatch_run_id": p["run_id"], "rlbatch_backend": p["backend"]})
        jobs.append({"run_id": p["run_id"], "job_id": job_id, "log_path": p["log_path"]})
    atomic_write_text(Path(out_dir).expanduser().resolve() / "jobs.json", json.dumps(jobs, indent=2) + "\n")
    return jobs


def launch(*, backend: str, base_batch: int, base_lr: float, batches: list[int], rule: str, group_size: int,
           samples: int, out: Path | str, base_config: Path | str | None = None, fixed_lr_control: int | None = None,
           seeds: int = 1, dry_run: bool = False, submit: bool = False, address: str | None = None,
           project: str = DEFAULT_PROJECT, num_processes: int = 1, trl_script: str = "train_grpo.py",
           base_critic_lr: float | None = None, openrlhf_flags: str = "dotted") -> dict[str, Any]:
    """Everything ``rlbatch launch`` does: trials -> plans -> print (``dry_run``), write scripts (default) or
    submit (``submit`` with ``address``). Returns ``{"plans": [...], "launch_script": path|None, "jobs": [...]}``.
    Raises :class:`UserError` for bad options (e.g. ``--submit`` without ``--address``)."""
    from rlbatch.sweep.trials import make_trials

    if submit and not address:
        raise UserError("--submit needs --address http://HEAD:8265 (the Ray dashboard of the cluster)",
                        field="address")
    if dry_run and submit:
        raise UserError("choose one of --dry-run and --submit")
    trials = make_trials(base_batch, base_lr, batches, rule, group_size, samples, fixed_lr_control, seeds)
    plans = plan_trials(trials, backend, out, base_config=base_config, project=project,
                        num_processes=num_processes, trl_script=trl_script, base_critic_lr=base_critic_lr,
                        openrlhf_flags=openrlhf_flags)
    result: dict[str, Any] = {"plans": plans, "launch_script": None, "jobs": []}
    if dry_run:
        return result
    if submit:
        result["jobs"] = submit_plans(plans, address, out)
        result["launch_script"] = str(Path(out).expanduser().resolve() / "launch.sh")
        return result
    result["launch_script"] = str(write_launch(plans, out))
    return result
