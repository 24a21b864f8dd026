"""The manifest of a study run by rlbatch's trainers, ``OUT/sweep.json``: which trials exist and where each stands.

``{"version", "created", "backend": "local"|"ray"|"trl", "settings": {...}, "trials": [{"run_id", "spec"
(:class:`rlbatch.study.ladder.TrialSpec` fields), "state": pending|running|finished|failed, "run_dir"
("trials/<run_id>", relative to the sweep directory), "attempts", "error", "seconds"}]}``. Every backend that runs
trials here or on Ray reads and writes this one file, so a sweep started with one backend resumes with another.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from rlbatch.errors import UserError
from rlbatch.runstore import atomic_write_text, is_run_dir, read_meta, write_error
from rlbatch.study.ladder import TrialSpec

SWEEP_JSON = "sweep.json"
TRIALS_DIR = "trials"


def read_manifest(out: Path) -> dict | None:
    """``OUT/sweep.json`` with every trial's ``spec`` as a :class:`TrialSpec`, or None when there is none yet.
    Raises :class:`UserError` naming the file when it is malformed."""
    path = out / SWEEP_JSON
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["trials"] = [{**t, "spec": TrialSpec(**t["spec"])} for t in data["trials"]]
        return data
    except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as err:
        raise UserError(f"malformed sweep manifest ({str(err).splitlines()[0]}); move it away to start afresh",
                        path=str(path)) from None


def write_manifest(out: Path, manifest: dict) -> None:
    """Write ``out/sweep.json`` atomically; :class:`UserError` naming it if it cannot be written (disk full)."""
    data = {**manifest, "trials": [{"run_id": t["spec"].run_id, **t, "spec": t["spec"].model_dump(mode="json")}
                                   for t in manifest["trials"]]}
    try:
        atomic_write_text(out / SWEEP_JSON, json.dumps(data, indent=2) + "\n")
    except OSError as err:
        raise write_error(err, out / SWEEP_JSON, "; the previous sweep.json is intact") from None


def trial_finished(out: Path, entry: dict) -> bool:
    """Whether the manifest entry's trial is finished: its state says so and its run directory agrees."""
    run_dir = out / entry["run_dir"]
    return entry.get("state") == "finished" and is_run_dir(run_dir) and read_meta(run_dir).status == "finished"
