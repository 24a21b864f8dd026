"""``rlbatch launch``: the study on verl, OpenRLHF or TRL, one training command per trial with the scaled learning
rate.

:func:`plan_ladder` builds the plans of the ladder's trials (:mod:`rlbatch.backends.launch_plan`) on one backend
(:func:`rlbatch.backends.launch_verl.verl_plan`, :func:`rlbatch.backends.launch_openrlhf.openrlhf_plan`,
:func:`rlbatch.backends.launch_trl.trl_plan`); :func:`write_launch` writes ``launch.sh`` + one script per trial +
``plan.json``;
:func:`submit_plans` submits them with Ray's job submission API; :func:`format_dry_run` prints them. :func:`launch`
does all of it for a ladder (:func:`rlbatch.study.ladder.build_ladder` with a ``generated`` budget).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from rlbatch.backends.launch_config import read_base_config
from rlbatch.backends.launch_openrlhf import openrlhf_plan
from rlbatch.backends.launch_plan import DEFAULT_PROJECT, LAUNCH_BACKENDS, base_plan, unknown_backend
from rlbatch.backends.launch_trl import trl_plan
from rlbatch.backends.launch_verl import verl_plan
from rlbatch.errors import UserError
from rlbatch.runstore import atomic_write_text
from rlbatch.study.ladder import TrialSpec


def plan_ladder(trials: list[TrialSpec], backend: str, out_dir: Path | str, *,
                base_config: Path | str | None = None, project: str = DEFAULT_PROJECT, num_processes: int = 1,
                trl_script: str = "train_grpo.py", base_critic_lr: float | None = None,
                openrlhf_flags: str = "dotted") -> list[dict]:
    """Plans for all ``trials`` of a ladder on ``backend`` (``verl``, ``openrlhf`` or ``trl``), reading
    ``base_config`` once. A launched framework takes one group size and counts its budget in generated responses.

    Backend options: ``project`` (verl project name), ``num_processes`` (TRL: GPUs in ``accelerate launch``),
    ``trl_script`` (TRL: the user's GRPO training script taking ``--config``), ``base_critic_lr`` (OpenRLHF PPO:
    the critic's lr0 at B0, scaled by the same rule), ``openrlhf_flags`` (``dotted`` for OpenRLHF >= 0.10.2,
    ``flat`` for older releases). Nothing is written. Raises :class:`UserError` for an unknown backend, several
    group sizes, a retained budget, or a bad base configuration (naming file and line).
    """
    if backend not in LAUNCH_BACKENDS:
        raise unknown_backend(backend)
    sizes = sorted({t.group_size for t in trials})
    if len(sizes) > 1:
        raise UserError(f"--backend {backend} takes one group size (--group-sizes G), got {sizes}",
                        field="group_sizes")
    if any(t.budget != "generated" for t in trials):
        raise UserError(f"--backend {backend} launches a framework, which cannot stop at a retained count: give the "
                        "budget in generated responses (--generated-samples N; steps = ceil(N / B))", field="samples")
    common = [base_plan(t, backend, out_dir, project) for t in trials]
    if backend == "verl":
        base = read_base_config(base_config, "hydra")
        return [verl_plan(p, out_dir, base, project=project, base_path=base_config) for p in common]
    if backend == "openrlhf":
        base = read_base_config(base_config, "flags")
        return [openrlhf_plan(p, out_dir, base, base_path=base_config, base_critic_lr=base_critic_lr,
                              dialect=openrlhf_flags) for p in common]
    base = read_base_config(base_config, "mapping")
    return [trl_plan(p, out_dir, base, base_path=base_config, num_processes=num_processes, script=trl_script)
            for p in common]


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
    plans, including each trial's ``log_path``); every file is rendered first, then written atomically. Returns the
    path of ``launch.sh``."""
    out = Path(out_dir).expanduser().resolve()
    launch = out / "launch.sh"
    files: dict[Path, str] = {}
    for p in plans:
        files.update({Path(path): text for path, text in p.get("files", {}).items()})
        files[Path(p["script"])] = trial_script(p)
    files[launch] = launch_script(plans)
    files[out / "plan.json"] = json.dumps({"trials": plans}, indent=2) + "\n"
    for path, text in files.items():
        atomic_write_text(path, text)
    for path in [Path(p["script"]) for p in plans] + [launch]:
        path.chmod(0o755)
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


def ray_job_client(address: str):
    """Ray's ``JobSubmissionClient`` for the dashboard at ``address`` (e.g. ``http://HEAD:8265``). Raises
    :class:`UserError` when Ray is missing or the address cannot be reached."""
    try:
        # lazy: Ray is an optional dependency (rlbatch[ray]) and slow to import
        from ray.job_submission import JobSubmissionClient
    except ImportError:
        raise UserError("--submit needs Ray's job submission client: pip install 'rlbatch[ray]'") from None
    try:
        return JobSubmissionClient(address)
    except Exception as err:  # connection refused, bad URL, version mismatch
        raise UserError(f"--address {address}: cannot reach the Ray dashboard ({err})", field="address") from None


def submit_plans(plans: list[dict], address: str, out_dir: Path | str) -> list[dict]:
    """Submit every trial as a Ray job to the dashboard at ``address`` (e.g. ``http://HEAD:8265``) with
    ``ray.job_submission.JobSubmissionClient``. The scripts are written first (:func:`write_launch`); the sweep
    directory must be on a filesystem the cluster shares. Each job runs ``bash OUT/trials/<run_id>.sh`` with the
    plan's environment in its runtime env. Returns ``[{run_id, job_id, log_path}]`` and writes it to
    ``OUT/jobs.json``. Raises :class:`UserError` when Ray is missing or the address cannot be reached.
    """
    client = ray_job_client(address)
    write_launch(plans, out_dir)
    jobs = []
    for p in plans:
        job_id = client.submit_job(entrypoint=f"bash {shlex.quote(p['script'])}",
                                   runtime_env={"env_vars": {k: str(v) for k, v in p["env"].items()}},
                                   metadata={"rlbatch_run_id": p["run_id"], "rlbatch_backend": p["backend"]})
        jobs.append({"run_id": p["run_id"], "job_id": job_id, "log_path": p["log_path"]})
    atomic_write_text(Path(out_dir).expanduser().resolve() / "jobs.json", json.dumps(jobs, indent=2) + "\n")
    return jobs


def launch(trials: list[TrialSpec], *, backend: str, out: Path | str, base_config: Path | str | None = None,
           dry_run: bool = False, submit: bool = False, address: str | None = None,
           project: str = DEFAULT_PROJECT, num_processes: int = 1, trl_script: str = "train_grpo.py",
           base_critic_lr: float | None = None, openrlhf_flags: str = "dotted") -> dict[str, Any]:
    """Everything ``rlbatch launch`` does with a ladder: plans (:func:`plan_ladder`) -> print (``dry_run``), write
    scripts (default) or submit (``submit`` with ``address``). Returns ``{"plans": [...], "launch_script":
    path|None, "jobs": [...]}``. Raises :class:`UserError` for bad options (e.g. ``--submit`` without
    ``--address``)."""
    if submit and not address:
        raise UserError("--submit needs --address http://HEAD:8265 (the Ray dashboard of the cluster)",
                        field="address")
    if dry_run and submit:
        raise UserError("choose one of --dry-run and --submit")
    plans = plan_ladder(trials, backend, out, base_config=base_config, project=project,
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
