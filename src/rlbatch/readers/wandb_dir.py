"""Local W&B run directories (``wandb/run-*/``, ``wandb/offline-run-*/``) as users keep them, read-only.

A run directory holds the binary transaction log ``run-<id>.wandb`` (every record the run logged: config, the full
history, summary updates, console output, exit code) and, for runs that were online, ``files/config.yaml``,
``files/wandb-summary.json`` and ``files/output.log``. The history is read from the ``.wandb`` file by the installed
wandb package's own reader (its Python log reader ``wandb.sdk.internal.datastore`` where it ships one, up to wandb
0.30; ``wandb leet inspect --json`` from 0.31), never by a reimplementation of its format; config and summary come from ``files/`` when present, else from the log's records.
A directory holding several run directories (a ``wandb/`` folder, or the folder above it) reads as several runs.

Optional dependency: ``pip install 'rlbatch[wandb]'`` (without it: one error naming the extra, exit 2).
Nothing is written into the user's directory (``wandb leet`` runs in a temporary working directory).

Mapping: history rows keep W&B's names (``_step`` is the step unless the run logged its own counter; nested
dicts are joined with ``.`` by W&B), mapped by :mod:`rlbatch.readers.names`; media (histograms, tables, images)
and text are skipped. P, G, the update batch and lr come from the config (:func:`rlbatch.readers.trackers.config_fields`).
Without a per-step timer, wall-clock is W&B's ``_runtime`` (seconds since the run started, which includes
evaluation; noted). When the history has no evaluation, a final evaluation in the summary is used (at the last step).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import yaml

from rlbatch.batchspec import flatten
from rlbatch.errors import UserError
from rlbatch.readers import names as N
from rlbatch.readers.common import finalize, meta_from, read_each, read_text, warn
from rlbatch.readers.trackers import clock_only_on_training, config_fields, tracker_run
from rlbatch.runstore import Run, make_meta

#: the install hint of the optional dependency
EXTRA = "pip install 'rlbatch[wandb]'"
#: seconds the wandb reader may take for one run's log
READ_TIMEOUT_S = 300


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is one W&B run directory: a ``*.wandb`` transaction log in it, or ``files/`` with
    ``wandb-metadata.json`` or ``config.yaml`` + ``wandb-summary.json``, or beside W&B's own
    ``logs/debug-internal.log``."""
    path = Path(path)
    if not path.is_dir():
        return False
    if any(p.is_file() for p in path.glob("*.wandb")):
        return True
    files = path / "files"
    if not files.is_dir():
        return False
    return (files / "wandb-metadata.json").is_file() or (
        (files / "config.yaml").is_file() and (files / "wandb-summary.json").is_file()) or (
        (path / "logs" / "debug-internal.log").is_file())


def run_dirs(path: Path) -> list[Path]:
    """The W&B run directories at ``path``: itself (a run directory, or the directory of a ``.wandb`` file), else
    every ``run-*`` / ``offline-run-*`` run directory below it (a ``wandb/`` folder, a project folder holding one,
    a folder of several projects; ``latest-run`` links counted once), sorted by path."""
    path = Path(path)
    if path.is_file():
        return [path.parent] if path.suffix == ".wandb" else []
    if is_run_dir(path):
        return [path]
    if not path.is_dir():
        return []
    found: dict[Path, Path] = {}
    for top, dirs, _ in os.walk(path):  # one walk; links not followed (latest-run)
        runs = {n for n in dirs if n.startswith(("run-", "offline-run-")) and is_run_dir(Path(top) / n)}
        for name in sorted(runs):
            found.setdefault((Path(top) / name).resolve(), Path(top) / name)
        dirs[:] = [n for n in dirs if n not in runs]  # nothing to find inside a run
    return sorted(found.values())


def _require_wandb(where: Path) -> None:
    if importlib.util.find_spec("wandb") is None:
        raise UserError(f"reading W&B run directories needs the optional wandb package: {EXTRA}", path=str(where))


def records(wandb_file: Path) -> list[dict[str, Any]]:
    """The records of a ``.wandb`` transaction log as dicts (``{"num", "type", <type>: {...}}``, the shape of
    ``wandb leet inspect --json``), read by the installed wandb package's own reader: its Python log reader
    (``wandb.sdk.internal.datastore`` with the ``Record`` protobuf, wandb <= 0.30) where it ships one, else
    ``wandb leet inspect --json`` (wandb >= 0.31) in a temporary working directory.

    Raises :class:`UserError` naming the file when wandb is missing, has neither reader, or fails on the file
    (corrupt, or not a W&B log); a log cut short (a crashed run) is read to its last complete record."""
    _require_wandb(wandb_file)
    if importlib.util.find_spec("wandb.sdk.internal.datastore") is not None:
        return _records_datastore(wandb_file)
    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline", "NO_COLOR": "1"}
    with tempfile.TemporaryDirectory(prefix="rlbatch-wandb-") as tmp:
        try:
            proc = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json",
                                   str(Path(wandb_file).resolve())], cwd=tmp, env=env, capture_output=True,
                                  text=True, timeout=READ_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError(f"the wandb reader took over {READ_TIMEOUT_S} s", path=str(wandb_file)) from None
    out = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    if proc.returncode != 0 and not out:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        why = err[-1] if err else f"exit code {proc.returncode}"
        if "No such command" in proc.stderr or "No such option" in proc.stderr:  # wandb 0.30: inspect without --json
            raise UserError("this wandb has no machine-readable transaction-log reader (neither "
                            "wandb.sdk.internal.datastore nor `wandb leet inspect --json`: wandb 0.30); install wandb "
                            f"<= 0.29 or >= 0.31: {EXTRA}", path=str(wandb_file))
        raise UserError(f"the wandb reader could not read this transaction log: {why}", path=str(wandb_file))
    if proc.returncode != 0:
        warn(f"the wandb reader stopped early (exit code {proc.returncode}); {len(out)} record(s) read",
             wandb_file)
    return out


def _items(items: Any) -> dict[str, Any]:
    """Protobuf ``HistoryItem`` / ``SummaryItem`` / ``ConfigItem`` lists -> ``{key: value}`` (``nested_key`` joined
    with ``.`` as W&B names them; ``value_json`` parsed as JSON, nothing evaluated)."""
    out = {}
    for it in items:
        key = it.key or ".".join(it.nested_key)
        try:
            out[key] = json.loads(it.value_json)
        except ValueError:
            continue
    return out


def _records_datastore(wandb_file: Path) -> list[dict[str, Any]]:
    """:func:`records` through wandb's Python transaction-log reader (``DataStore.scan_data`` + ``Record``)."""
    # the optional wandb package (extra ``wandb``), imported only when records() found its Python reader
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore

    ds = datastore.DataStore()
    out: list[dict[str, Any]] = []
    try:
        ds.open_for_scan(str(wandb_file))
    except Exception as err:  # the reader raises AssertionError / struct.error on a file that is not a W&B log
        raise UserError(f"the wandb reader could not read this transaction log ({type(err).__name__}: {err})",
                        path=str(wandb_file)) from None
    try:
        while True:
            try:
                data = ds.scan_data()
            except Exception as err:  # a corrupt or cut block: keep what was read
                warn(f"the wandb reader stopped at a damaged record ({type(err).__name__}); {len(out)} record(s) "
                     "read", wandb_file)
                break
            if data is None:
                break
            pb = wandb_internal_pb2.Record()
            try:
                pb.ParseFromString(data)
            except Exception:
                continue
            kind = pb.WhichOneof("record_type")
            if kind == "history":
                body = {"item": _items(pb.history.item), "step": {"num": pb.history.step.num}}
            elif kind == "summary":
                body = {"update": _items(pb.summary.update)}
            elif kind == "config":
                body = {"update": _items(pb.config.update)}
            elif kind == "run":
                body = {"config": {"update": _items(pb.run.config.update)}, "display_name": pb.run.display_name,
                        "run_id": pb.run.run_id, "project": pb.run.project}
            elif kind == "exit":
                body = {"exit_code": pb.exit.exit_code}
            else:
                continue
            out.append({"num": len(out) + 1, "type": kind, kind: body})
    finally:
        ds.close()
    return out


def _scalar_items(item: dict[str, Any]) -> dict[str, float]:
    """Numeric values of one history/summary item; media (a ``<name>._type`` key), text, lists and bools out."""
    media = {k[: -len("._type")] for k in item if k.endswith("._type")}
    out = {}
    for k, v in item.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if media and any(k == m or k.startswith(m + ".") for m in media):
            continue
        out[k] = float(v)
    return out


def _unwrap_config_yaml(cfg: dict[str, Any]) -> dict[str, Any]:
    """W&B's ``config.yaml`` stores each key as ``{value: ..., desc: ...}``: the values."""
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict) and "value" in v and set(v) <= {"value", "desc"}:
            out[k] = v["value"]
        else:
            out[k] = v
    return out


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(read_text(path))
    except (ValueError, RecursionError) as err:
        warn(f"not read ({err})", path)
        return None
    return obj if isinstance(obj, dict) else None


def _read_yaml(path: Path) -> dict[str, Any] | None:
    try:
        obj = yaml.safe_load(read_text(path))
    except yaml.YAMLError as err:
        warn(f"not read ({str(err).splitlines()[0]})", path)
        return None
    return obj if isinstance(obj, dict) else None


def files_config_summary(run_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(config, summary)`` from a run directory's ``files/config.yaml`` (values unwrapped from W&B's
    ``{value: ...}``) and ``files/wandb-summary.json``; None for a file that is absent or not a mapping (a warning
    names a file that cannot be parsed). YAML is read with ``yaml.safe_load`` (no Python objects built)."""
    files = Path(run_dir) / "files"
    cfg = _read_yaml(files / "config.yaml") if (files / "config.yaml").is_file() else None
    summ = _read_json(files / "wandb-summary.json") if (files / "wandb-summary.json").is_file() else None
    return (_unwrap_config_yaml(cfg) if cfg is not None else None), summ


def summary_scalars(summary: dict[str, Any]) -> dict[str, float]:
    """A W&B summary's numeric values, nested keys joined with ``.`` (``_wandb.runtime``), media entries (a
    ``_type`` key) and text left out."""
    return _scalar_items(flatten(summary))


def read(run_dir: str | Path, *, user_map: dict[str, str] | None = None,
         console: Callable[[Path], Run] | None = None) -> Run:
    """Read one W&B run directory into a :class:`Run` (history from the ``.wandb`` log, config and summary from
    ``files/`` or the log). The run id is the run's display name when it has one, else its W&B id. ``console``:
    the reader of ``files/output.log`` used when there is no history (the dispatcher's, for console formats).

    Raises :class:`UserError` naming the directory when the wandb package is missing, or there is neither a
    transaction log with history nor a ``files/output.log`` another reader understands."""
    run_dir = Path(run_dir)
    files = run_dir / "files"
    logs = sorted(p for p in run_dir.glob("*.wandb") if p.is_file())
    notes: list[str] = []
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    status = None
    for log in logs:
        for rec in records(log):
            kind = rec.get("type")
            body = rec.get(kind) if isinstance(kind, str) else None
            if not isinstance(body, dict):
                continue
            if kind == "run":
                info.update({k: body[k] for k in ("display_name", "run_id", "project", "start_time") if k in body})
                config.update((body.get("config") or {}).get("update") or {})
            elif kind == "config":
                config.update(body.get("update") or {})
            elif kind == "summary":
                summary.update(body.get("update") or {})
            elif kind == "history" and isinstance(body.get("item"), dict):
                row = _scalar_items(body["item"])
                num = (body.get("step") or {}).get("num")
                if "_step" not in row and num is not None:
                    row["_step"] = float(num)
                rows.append(row)
            elif kind == "environment":
                if body.get("gpu"):
                    info["hardware"] = f"{body.get('gpu_count') or 1} x {body['gpu']}"
            elif kind == "exit":
                status = "finished" if not body.get("exit_code") else "failed"
    source = "the .wandb log's config records"
    y, j = files_config_summary(run_dir)
    if y is not None:
        config.update(y)
        source = "W&B files/config.yaml"
    if j is not None:
        summary = j
    config.pop("_wandb", None)
    cfg = config_fields(config, source)
    notes += cfg.notes
    run_id = info.get("display_name") or info.get("run_id") or run_dir.name
    extra = {"tracker": "wandb", "tracker_run_id": info.get("run_id"), "hardware": info.get("hardware"),
             "tracker_config": {k: v for k, v in flatten(config).items()
                                if isinstance(v, (int, float, str, bool)) or v is None},
             "tracker_summary": summary_scalars(summary), "status": status}
    fields = meta_from(str(run_id), **cfg.fields, **extra)
    if not rows:
        out_log = files / "output.log"
        if out_log.is_file() and console is not None:
            run = console(out_log)
            data = run.meta.model_dump()
            batch = ("prompts_per_step", "group_size", "batch_size", "rollout_batch_size")
            if all(data.get(k) is None for k in batch):  # the console said nothing of the batch: the config's
                data.update({k: fields[k] for k in batch if k in fields})
            data.update({k: v for k, v in fields.items() if k not in batch and data.get(k) is None})
            data["run_id"] = str(run_id)
            run.meta = make_meta(out_log, **data)
            run.notes += notes + [f"no history in a .wandb log ({'none here' if not logs else 'no history records'}):"
                                  " read from files/output.log"]
            return finalize(run)
        raise UserError("W&B run directory without history (no .wandb transaction log with history records and no "
                        "files/output.log)", path=str(run_dir))
    final: dict[str, float] = {}
    if not any(N.is_eval_name(k, user_map) for row in rows for k in row):
        final = {k: v for k, v in summary_scalars(summary).items() if N.is_eval_name(k, user_map)}
        if final:
            notes.append("evaluation: the summary's final value, at the last step (no evaluation in the history)")
    clock_only_on_training(rows, ("_runtime", "_timestamp"), user_map)
    return tracker_run(rows, path=run_dir, source_format="wandb", fields=fields, notes=notes, user_map=user_map,
                       extra_evals=[(None, final)] if final else (), clock="_runtime",
                       clock_note="time/wall_s from W&B's _runtime (includes evaluation; start-up before the first "
                       "step replaced by one median step)")


def read_all(path: str | Path, *, user_map: dict[str, str] | None = None,
             console: Callable[[Path], Run] | None = None) -> list[Run]:
    """Every W&B run directory at ``path`` (:func:`run_dirs`) read with :func:`read`; with several, a run that
    cannot be read is skipped with a warning. Raises :class:`UserError` when there is none or none is readable."""
    dirs = run_dirs(Path(path))
    if not dirs:
        raise UserError("no W&B run directory (run-*/ with a .wandb log or files/) here", path=str(path))
    runs = read_each(dirs, lambda d: read(d, user_map=user_map, console=console))
    if not runs:
        raise UserError("no readable W&B run among the run directories here", path=str(path))
    return runs


__all__ = ["EXTRA", "is_run_dir", "run_dirs", "records", "read", "read_all"]
