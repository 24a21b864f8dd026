"""What the launch backends (:mod:`rlbatch.backends.launch_verl`, :mod:`rlbatch.backends.launch_openrlhf`,
:mod:`rlbatch.backends.launch_trl`) share: the common part of a trial's plan and the layout of the sweep directory (logs, checkpoints, trial scripts).

A *plan* is one dict per trial: the trial's fields plus ``backend``, ``command`` (argv list), ``env`` (variables to
export), ``files`` (config files to write, path -> text), ``prepare`` (shell lines run before the command),
``log_path`` / ``log_format`` (where the trial's log will appear and in which format), ``script`` (the trial's shell
script) and ``done_marker``. :func:`base_plan` fills in the fields every backend has (including where the log and
the checkpoints go); each backend's planner adds its command and environment. :mod:`rlbatch.backends.launch` turns
trials into plans for a backend and plans into a launch.

The sweep directory ``OUT``:

- ``OUT/logs/...`` — the trials' training logs (:func:`expected_log_path`), read back by ``rlbatch analyze OUT/logs``,
- ``OUT/checkpoints/<run_id>`` — each trial's checkpoints (:func:`checkpoint_dir`), so a re-launch resumes,
- ``OUT/trials/<run_id>.sh`` and ``OUT/trials/<run_id>.done`` — the trial's script and its done marker.
"""

from __future__ import annotations

import math
from pathlib import Path

from rlbatch.errors import UserError
from rlbatch.study.ladder import TrialSpec

LAUNCH_BACKENDS = ("verl", "openrlhf", "trl")
DEFAULT_PROJECT = "rlbatch"


def unknown_backend(backend: str) -> UserError:
    """The error for a launch backend that is none of :data:`LAUNCH_BACKENDS`."""
    return UserError(f"unknown launch backend {backend!r}; choose one of {', '.join(LAUNCH_BACKENDS)}",
                     field="backend")


def expected_log_path(trial: TrialSpec, out_dir: Path | str, backend: str = "verl",
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
    rid = trial.run_id
    if backend == "verl":
        return out / "logs" / project / f"{rid}.jsonl"
    if backend in ("openrlhf", "trl"):
        return out / "logs" / backend / rid
    raise unknown_backend(backend)


def checkpoint_dir(out: Path, run_id: str) -> Path:
    """The trial's checkpoint directory, ``OUT/checkpoints/<run_id>`` (``out`` already resolved)."""
    return out / "checkpoints" / run_id


def checkpoint_every(steps: int) -> int:
    """Steps between checkpoints: a tenth of the trial's steps, at least 1."""
    return max(1, math.ceil(steps / 10))


def base_plan(trial: TrialSpec, backend: str, out_dir: Path | str, project: str = DEFAULT_PROJECT) -> dict:
    """The fields every backend's plan has, which the backend's planner then completes: the trial's
    (:meth:`rlbatch.study.ladder.TrialSpec.row`), ``backend``, empty ``env`` / ``files`` / ``prepare``, the trial's
    ``script`` and ``done_marker`` under ``OUT/trials``, its ``log_path`` (:func:`expected_log_path`),
    ``checkpoint_dir`` (:func:`checkpoint_dir`) and ``checkpoint_every`` (steps between checkpoints)."""
    out = Path(out_dir).expanduser().resolve()
    plan = trial.row()
    plan.update(backend=backend, env={}, files={}, prepare=[],
                script=str(out / "trials" / f"{trial.run_id}.sh"),
                done_marker=str(out / "trials" / f"{trial.run_id}.done"),
                log_path=str(expected_log_path(trial, out, backend, project)),
                checkpoint_dir=str(checkpoint_dir(out, trial.run_id)), checkpoint_every=checkpoint_every(trial.steps))
    return plan
