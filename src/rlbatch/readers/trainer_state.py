"""TRL ``trainer_state.json`` (written by ``transformers.Trainer`` and TRL's ``GRPOTrainer``/``PPOTrainer`` in each
checkpoint and the output directory).

``log_history`` holds one entry per logging step: training entries (GRPO: ``reward``, ``reward_std``,
``grad_norm``, ``learning_rate``, ``num_tokens`` (cumulative), ``step_time``, ``frac_reward_zero_std``,
``completions/mean_length``...), evaluation entries (``eval_*``; ``eval_reward``/``eval_accuracy`` become
``eval/score``) and a final summary (``train_runtime``...). The file does not say how many prompts and completions
per prompt a step used: give P and G with ``--set RUN:prompts_per_step=... --set RUN:group_size=...`` (or
``load(..., prompts_per_step=, group_size=)``). Without a per-step timer, wall-clock is spread evenly over the steps
from ``train_runtime`` (noted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


from rlbatch.errors import UserError
from rlbatch.readers import extract as X
from rlbatch.readers.common import build_run, finalize, json_reason, meta_from, read_text, warn
from rlbatch.readers.names import is_eval_name
from rlbatch.runstore import Run

SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("log_history"), list)


def find_state(directory: Path) -> Path | None:
    """``trainer_state.json`` in ``directory``, else in its latest ``checkpoint-N`` subdirectory."""
    p = directory / "trainer_state.json"
    if p.is_file():
        return p
    ckpts = []
    for c in directory.glob("checkpoint-*/trainer_state.json"):
        try:
            ckpts.append((int(c.parent.name.split("-")[-1]), c))
        except ValueError:
            continue
    return max(ckpts)[1] if ckpts else None


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None,
         meta: dict[str, Any] | None = None) -> Run:
    """Read a ``trainer_state.json`` holding one run; the first of :func:`read_all`."""
    return read_all(path, run_id=run_id, user_map=user_map, meta=meta)[0]


def read_all(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None,
             meta: dict[str, Any] | None = None) -> list[Run]:
    """Read a ``trainer_state.json`` (or a directory holding one) into its runs: one, or one per training run when
    ``log_history`` holds several (each ended by its ``train_runtime`` summary, or a step counter that starts over;
    :func:`rlbatch.readers.extract.split_records`), named ``<run>-run<k>``.

    Raises :class:`UserError` naming the file when it is not JSON, has no ``log_history``, or no training entry.
    """
    path = Path(path).resolve() if not Path(path).is_absolute() else Path(path)
    if path.is_dir():
        state = find_state(path)
        if state is None:
            raise UserError("no trainer_state.json in this directory or its checkpoint-* folders", path=str(path))
        default_id = path.name
        path = state
    else:
        default_id = path.parent.name if path.name == "trainer_state.json" else path.stem
    default_id = default_id or "trainer_state"
    try:
        obj = json.loads(read_text(path))
    except (ValueError, RecursionError) as err:  # JSONDecodeError; also ints over 4300 digits, deep nesting
        raise UserError(f"not valid JSON ({json_reason(err)})", path=str(path),
                        line=getattr(err, "lineno", None)) from None
    if not looks_like(obj):
        raise UserError("no 'log_history' list: not a trainer_state.json", path=str(path))
    entries = []
    for i, entry in enumerate(obj["log_history"]):
        if not isinstance(entry, dict) or "step" not in entry:
            warn(f"log_history[{i}] has no 'step'; skipped", path)
            continue
        entries.append(X.Record(i + 1, entry, "json"))
    parts = X.split_records(entries)
    stem = run_id or default_id
    runs = []
    for k, part in enumerate(parts, 1):
        rid = stem if len(parts) == 1 else f"{stem}-run{k}"
        run = _read_entries(path, obj, [r.values for r in part.records], rid, user_map, meta,
                            last_part=k == len(parts))
        if len(parts) > 1:
            why = part.why.replace("line ", "entry ")
            run.notes.insert(0, f"run {k} of {len(parts)} in {path.name}'s log_history: {why}")
        runs.append(run)
    return runs


def _read_entries(path: Path, obj: dict[str, Any], entries: list[dict[str, Any]], rid: str,
                  user_map: dict[str, str] | None, meta: dict[str, Any] | None, *, last_part: bool) -> Run:
    rows = []
    runtime = None
    for entry in entries:
        if "train_runtime" in entry:
            runtime = entry.get("train_runtime")
        rec = {k: v for k, v in entry.items() if k not in SUMMARY_KEYS and k != "epoch"
               and not (k.startswith("eval_") and not is_eval_name(k, user_map))}
        if len(rec) > 1:
            rows.append(rec)
    fields = meta_from(rid, backend="trl", **(meta or {}))
    run = build_run(rows, path=path, source_format="trl", meta_fields=fields, user_map=user_map)
    m = run.metrics
    if "time/wall_s" not in m.columns and isinstance(runtime, (int, float)) and runtime > 0:
        last = float((obj.get("global_step") if last_part else None) or m["step"].max())
        m["time/wall_s"] = m["step"].to_numpy(dtype=float) / last * float(runtime)
        run.notes.append("time/wall_s: train_runtime spread evenly over the steps (no per-step timer logged)")
        finalize(run)
    if obj.get("train_batch_size"):
        run.meta.trl_train_batch_size = obj["train_batch_size"]  # per-device completions; not P or G
    return run
