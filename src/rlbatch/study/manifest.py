"""The manifest of a study run by rlbatch's trainers, ``OUT/sweep.json``: which trials exist and where each stands.

``{"version", "created", "backend": "local"|"ray"|"trl", "settings": {...}, "trials": [{"run_id", "spec"
(:class:`rlbatch.study.ladder.TrialSpec` fields), "state": pending|running|finished|failed, "run_dir"
("trials/<run_id>", relative to the sweep directory), "attempts", "error", "seconds"}]}``. Every backend that runs
trials here or on Ray reads and writes this one file, so a sweep started with one backend resumes with another.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlbatch.errors import UserError
from rlbatch.runstore import atomic_write_text, is_run_dir, read_meta, write_error
from rlbatch.study.ladder import TrialSpec

SWEEP_JSON = "sweep.json"
TRIALS_DIR = "trials"


def read_manifest_json(out: Path) -> dict | None:
    """``OUT/sweep.json`` as plain JSON (every trial's ``spec`` a dict), or None when there is none yet. Raises
    :class:`UserError` naming the file (and line) when it is not an object with a ``trials`` list."""
    path = out / SWEEP_JSON
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UserError(f"malformed sweep manifest ({err.msg}); move it away to start afresh", path=str(path),
                        line=err.lineno) from None
    if not isinstance(data, dict) or not isinstance(data.get("trials"), list):
        raise UserError("malformed sweep manifest (expected an object with a 'trials' list); move it away to start "
                        "afresh", path=str(path))
    return data


def read_manifest(out: Path) -> dict | None:
    """``OUT/sweep.json`` (:func:`read_manifest_json`) with every trial's ``spec`` as a :class:`TrialSpec`, or None
    when there is none yet. Raises :class:`UserError` naming the file when it is malformed."""
    data = read_manifest_json(out)
    if data is None:
        return None
    try:
        data["trials"] = [{**t, "spec": TrialSpec(**t["spec"])} for t in data["trials"]]
        return data
    except (KeyError, TypeError, ValidationError) as err:
        raise UserError(f"malformed sweep manifest ({str(err).splitlines()[0]}); move it away to start afresh",
                        path=str(out / SWEEP_JSON)) from None


def write_manifest_json(out: Path, data: dict) -> None:
    """Write ``out/sweep.json`` (plain JSON) atomically; :class:`UserError` naming it if it cannot be written (disk
    full)."""
    try:
        atomic_write_text(out / SWEEP_JSON, json.dumps(data, indent=2, default=str) + "\n")
    except OSError as err:
        raise write_error(err, out / SWEEP_JSON, "; the previous sweep.json is intact") from None


def write_manifest(out: Path, manifest: dict) -> None:
    """Write ``out/sweep.json`` from a manifest whose trials' ``spec`` are :class:`TrialSpec` objects
    (:func:`write_manifest_json`)."""
    write_manifest_json(out, {**manifest, "trials": [{"run_id": t["spec"].run_id, **t,
                                                      "spec": t["spec"].model_dump(mode="json")}
                                                     for t in manifest["trials"]]})


def trial_finished(out: Path, entry: dict) -> bool:
    """Whether the manifest entry's trial is finished: its state says so and its run directory agrees."""
    run_dir = out / entry["run_dir"]
    return entry.get("state") == "finished" and is_run_dir(run_dir) and read_meta(run_dir).status == "finished"


def ladder_settings(ladder: list[TrialSpec]) -> dict[str, Any]:
    """The study's settings as the manifest records them, read back from its ladder: ``base_batch, base_lr,
    batches, rule, fixed_lr_control, group_sizes, seeds, samples, budget, model, task, options``."""
    t0 = ladder[0]
    rule = next((t.lr_rule for t in ladder if t.lr_rule != "none"), t0.lr_rule)
    fixed = sorted({t.batch_size for t in ladder if t.lr_rule == "none" and rule != "none"})
    return dict(base_batch=t0.base_batch, base_lr=t0.base_lr,
                batches=sorted({t.batch_size for t in ladder if t.lr_rule == rule}), rule=rule,
                fixed_lr_control=fixed[0] if fixed else None, group_sizes=sorted({t.group_size for t in ladder}),
                seeds=len({t.seed for t in ladder}), samples=t0.samples, budget=t0.budget, model=t0.model,
                task=t0.task, options=t0.options)
