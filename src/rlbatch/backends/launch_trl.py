"""One trial of the study as a TRL launch (``rlbatch launch --backend trl`` / ``rlbatch sweep --backend trl --dry-run``,
:func:`trl_plan`): a TRL ``GRPOConfig`` (YAML) for ``accelerate launch SCRIPT --config FILE``. (Training the trials
here with TRL's ``GRPOTrainer`` is :mod:`rlbatch.backends.local_trl`.)

Field names follow ``trl/trainer/grpo_config.py`` (github.com/huggingface/trl) and transformers'
``TrainingArguments``. In TRL the effective batch, in completions, is
``per_device_train_batch_size x num_processes x gradient_accumulation_steps``; ``generation_batch_size`` defaults to
it (``steps_per_generation`` defaults to ``gradient_accumulation_steps``), so one generation batch of B = P x G
completions is one optimizer step when ``num_iterations`` is 1. ``num_generations`` is G. The TensorBoard writer of
transformers >= 5 logs to ``TENSORBOARD_LOGGING_DIR`` (``integrations/integration_utils.py``), which the trial
script sets to :func:`rlbatch.backends.launch_plan.expected_log_path`; older versions write ``output_dir/runs/*``.
The script is the user's (it must build a ``GRPOTrainer`` from ``TrlParser((GRPOConfig, ...))``, which reads
``--config``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from rlbatch.errors import UserError
from rlbatch.backends.launch_config import Entry, check_conflicts

TRL_CONTROLLED = {
    "num_generations": "G, responses per prompt",
    "gradient_accumulation_steps": "B / (per_device_train_batch_size x num_processes)",
    "learning_rate": "lr from the scaling rule",
    "max_steps": "ceil(samples / B), the sample budget",
    "output_dir": "the trial's directory under the sweep",
    "run_name": "the trial's run id",
    "seed": "the trial's seed",
    "generation_batch_size": "B, one generation batch per optimizer step",
    "steps_per_generation": "B, one generation batch per optimizer step",
}


def _default_per_device(local: int, cap: int = 8) -> int:
    """Largest divisor of ``local`` (completions per process per step) that is <= ``cap`` (TrainingArguments'
    default per-device batch is 8)."""
    return max(d for d in range(1, min(cap, local) + 1) if local % d == 0)


def trl_plan(plan: dict, out_dir: Path | str, base: list[Entry] | None = None, *,
             base_path: Path | str | None = None, num_processes: int = 1, script: str = "train_grpo.py") -> dict:
    """Complete one trial's common ``plan`` (:func:`rlbatch.backends.launch_plan.base_plan`) for TRL: a GRPOConfig
    YAML file (in ``plan["files"]``) and the ``accelerate launch`` command. ``per_device_train_batch_size`` comes from the base config or is the largest divisor of
    B / ``num_processes`` up to 8; ``gradient_accumulation_steps`` = B / (per-device x processes).

    Raises :class:`UserError` when B is not divisible by ``num_processes`` x per-device batch, or on a conflict
    with :data:`TRL_CONTROLLED` (naming file and line).
    """
    base = base or []
    check_conflicts(base, TRL_CONTROLLED, base_path)
    if num_processes < 1:
        raise UserError(f"--num-processes must be >= 1, got {num_processes}", field="num_processes")
    out = Path(out_dir).expanduser().resolve()
    rid, g, b = plan["run_id"], plan["group_size"], plan["batch_size"]
    ckpt = plan["checkpoint_dir"]
    where = str(base_path) if base_path else None
    if b % num_processes:
        raise UserError(f"B = {b} (trial {rid}) is not divisible by --num-processes {num_processes}")
    local = b // num_processes
    cfg: dict[str, object] = {
        "logging_steps": 1,
        "report_to": ["tensorboard"],
        "num_iterations": 1,
        "save_steps": plan["checkpoint_every"],
    }
    for e in base:
        cfg[e.key] = e.value
    per_device = cfg.get("per_device_train_batch_size") or _default_per_device(local)
    try:
        per_device = int(per_device)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError("per_device_train_batch_size must be an integer", path=where) from None
    if per_device < 1 or local % per_device:
        raise UserError(f"per_device_train_batch_size={per_device} must divide B / num_processes = {local} "
                        f"(trial {rid})", path=where)
    report_to = cfg.get("report_to")
    report = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if "tensorboard" not in report and "all" not in report:
        report.append("tensorboard")
    log = Path(plan["log_path"])
    cfg.update({
        "output_dir": ckpt,
        "run_name": rid,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": local // per_device,
        "num_generations": g,
        "learning_rate": float(plan["lr"]),
        "max_steps": plan["steps"],
        "seed": plan["seed"],
        "report_to": report,
    })
    config_path = out / "trl" / f"{rid}.yaml"
    header = (f"# rlbatch trial {rid}: P={plan['prompts_per_step']} G={g} B={b} lr={plan['lr']!r} "
              f"({plan['lr_rule']} rule) steps={plan['steps']}\n")
    text = header + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=False)
    plan.update(command=["accelerate", "launch", "--num_processes", str(num_processes), script,
                         "--config", str(config_path)],
                env={"TENSORBOARD_LOGGING_DIR": str(log)}, files={str(config_path): text},
                log_path=str(log), log_format="tensorboard", updates_per_step=int(cfg.get("num_iterations") or 1),
                experiment_name=rid,
                checkpoint_dir=ckpt, prepare=[f"mkdir -p {shlex.quote(str(log))}"])
    return plan
