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


def short_error(error: str) -> str:
    """A trial's recorded ``error`` (``"<exception class>: <message>"``) as shown to the user: our own one-line
    :class:`UserError` without its class name, anything else whole."""
    return error.split(": ", 1)[1] if error.startswith("UserError: ") else error


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
    (:func:`write_manifest_json`), with every trial's and the study's :func:`fingerprint`."""
    trials = [{"run_id": t["spec"].run_id, **t, "spec": t["spec"].model_dump(mode="json")} for t in manifest["trials"]]
    for t in trials:
        t["fingerprint"] = fingerprint(t["spec"])
    settings = {k: v for k, v in (manifest.get("settings") or {}).items() if k not in FREE_SETTINGS}
    write_manifest_json(out, {**manifest, "fingerprint": fingerprint(settings), "trials": trials})


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


def fingerprint(obj: Any) -> str:
    """A short hash of ``obj``'s JSON (sorted keys): what a trial's result depends on (its spec) or a study's (its
    settings), recorded in ``sweep.json`` so that a re-run with other settings is told apart."""
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


#: settings that are bookkeeping, not results: a re-run may change them freely
FREE_SETTINGS = ("workers", "backend", "preset")


def study_differences(out: Path, specs: list[TrialSpec], settings: dict | None) -> list[str]:
    """What differs between the study already in ``out`` (its ``sweep.json``) and the one about to run: for every
    trial of both, its spec field by field (learning rate and rule, base, samples, model, task, every trainer option),
    and the study's settings that change its result (the target, ...): ``["base_lr 5e-05 (now 0.0001)", ...]``;
    [] when there is no study there yet, or it is the same one (a resume)."""
    old = read_manifest_json(out)
    if not old:
        return []
    diffs: dict[str, tuple[Any, Any]] = {}
    new_by = {s.run_id: _flat(s.model_dump(mode="json")) for s in specs}
    for t in old.get("trials", []):
        rid = t.get("run_id") or (t.get("spec") or {}).get("run_id")
        if rid not in new_by or not isinstance(t.get("spec"), dict):
            continue
        was = _flat(t["spec"])
        now = new_by[rid]
        for k in sorted(set(was) | set(now)):
            if k in ("run_id",) or was.get(k) == now.get(k):
                continue
            diffs.setdefault(k, (was.get(k), now.get(k)))
    old_set, new_set = old.get("settings") or {}, settings or {}
    for k in sorted(set(old_set) & set(new_set)):
        if k in FREE_SETTINGS or k in ("options",) or old_set[k] == new_set[k]:
            continue
        diffs.setdefault(k, (old_set[k], new_set[k]))
    return [f"{k} {a!r} (now {b!r})" for k, (a, b) in diffs.items()]


def check_same_study(out: Path, specs: list[TrialSpec], settings: dict | None, force: bool = False) -> None:
    """Refuse to run a study into ``out`` when it holds one of other settings (:func:`study_differences`): a
    :class:`UserError` naming them (exit 2), nothing written. ``force``: start over in place instead, the old study
    moved whole into ``out/replaced-<time>/`` (nothing lost)."""
    diffs = study_differences(out, specs, settings)
    if not diffs:
        return
    if force:
        import shutil
        import time as _time

        dest = out / f"replaced-{_time.strftime('%Y%m%d-%H%M%S')}"
        dest.mkdir(parents=True)
        for name in (SWEEP_JSON, TRIALS_DIR, "timing.jsonl", "adaptive.json", "report.html", "report.md",
                     "report.json"):
            if (out / name).exists():
                shutil.move(str(out / name), str(dest / name))
        for png in out.glob("fig_*.png"):
            shutil.move(str(png), str(dest / png.name))
        return
    shown = "; ".join(diffs[:6]) + (f"; and {len(diffs) - 6} more" if len(diffs) > 6 else "")
    raise UserError(f"holds a study of other settings ({shown}): its trials were trained with those. Use another "
                    f"--out, read it with `rlbatch analyze {out}`, or add --force to start over here (the old study "
                    "moves to a replaced-<time>/ folder inside it)", path=str(out))
