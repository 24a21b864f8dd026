"""MLflow tracking data as users keep it, read-only: the file store (``mlruns/``) and the SQLite store
(``mlflow.db``), read through the mlflow package's own client (``MlflowClient``), never by parsing its files here.

What is read: every active run of every active experiment (or of the one experiment / run directory given): its
params (-> P, G, the update batch, lr and model: :func:`rlbatch.readers.trackers.config_fields`), the full history
of each metric with its steps (-> the run's metrics; evaluation names such as ``eval/score`` or ``eval_accuracy``
-> its evaluation points, :mod:`rlbatch.readers.names`), its latest metric values (the summary), run name and
status. Without a per-step timer, wall-clock comes from the metric timestamps (which include evaluation; noted).
A run that logged every value at step 0 (MLflow's default) is numbered by logging order (noted).

Read-only: mlflow would write into a store it opens (a ``.trash`` folder in a file store; tables or a migration in
a database), so it opens a private copy in a temporary directory (a file store without the contents of its ``artifacts/`` folders); the
user's files are never opened for writing. A database of an older MLflow schema is refused with the command that
upgrades a copy.

Optional dependency: ``pip install 'rlbatch[mlflow]'`` (mlflow-skinny, SQLAlchemy, alembic); without it one
error naming the extra (exit 2).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from rlbatch.errors import UserError
from rlbatch.readers.common import meta_from, read_each
from rlbatch.readers import names as N
from rlbatch.readers.trackers import config_fields, tracker_run
from rlbatch.runstore import Run

#: the install hint of the optional dependency
EXTRA = "pip install 'rlbatch[mlflow]'"
SQLITE_MAGIC = b"SQLite format 3\x00"
_STATUS = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "failed", "RUNNING": "running",
           "SCHEDULED": "running"}


def _sqlite_tables(path: Path) -> set[str]:
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != SQLITE_MAGIC:
                return set()
        # immutable=1: no lock, no journal, nothing written
        con = sqlite3.connect(f"file:{path.resolve()}?immutable=1", uri=True)
        try:
            return {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        return set()


def is_mlflow_db(path: Path) -> bool:
    """Whether ``path`` is an SQLite file holding MLflow's tracking tables (experiments, runs, metrics, params)."""
    path = Path(path)
    return path.is_file() and {"experiments", "runs", "metrics", "params"} <= _sqlite_tables(path)


def _meta_keys(meta: Path) -> set[str]:
    try:
        with open(meta, encoding="utf-8", errors="replace") as fh:
            return {ln.split(":", 1)[0].strip() for ln in fh.read(8192).splitlines() if ":" in ln and not
                    ln.startswith((" ", "\t"))}
    except OSError:
        return set()


def _is_experiment_dir(d: Path) -> bool:
    keys = _meta_keys(d / "meta.yaml")
    return "experiment_id" in keys and "run_uuid" not in keys and "run_id" not in keys


def locate(path: Path) -> tuple[str, Path, str | None, str | None] | None:
    """``(kind, store, experiment_id, run_id)`` of MLflow data at ``path``, or None: ``kind`` ``sqlite`` (a
    database file, or a directory holding ``mlflow.db``) or ``file`` (an ``mlruns`` root, a directory holding
    ``mlruns/``, one experiment's directory, or one run's directory: then only that experiment / run is read)."""
    path = Path(path)
    if path.is_file():
        return ("sqlite", path, None, None) if is_mlflow_db(path) else None
    if not path.is_dir():
        return None
    keys = _meta_keys(path / "meta.yaml")
    if "run_uuid" in keys or "run_id" in keys:
        if _is_experiment_dir(path.parent):
            return "file", path.parent.parent, path.parent.name, path.name
        return None
    if "experiment_id" in keys and _is_experiment_dir(path):
        return "file", path.parent, path.name, None
    for root in (path, path / "mlruns"):
        if root.is_dir() and any(_is_experiment_dir(d) for d in root.iterdir() if d.is_dir()):
            return "file", root, None, None
    db = path / "mlflow.db"
    if is_mlflow_db(db):
        return "sqlite", db, None, None
    return None


def is_store(path: Path) -> bool:
    """Whether ``path`` holds MLflow tracking data (:func:`locate`)."""
    return locate(path) is not None


def _skip_artifacts(directory: str, names: list[str]) -> list[str]:
    """``shutil.copytree`` filter: every ``artifacts/`` folder copied empty (mlflow checks that it exists; its
    contents, models and files, are not tracking data), the trash left out."""
    if Path(directory).name == "artifacts":
        return list(names)
    return [n for n in names if n == ".trash"]


@contextlib.contextmanager
def _private_uri(kind: str, store: Path) -> Iterator[str]:
    """A tracking URI of a private copy of ``store`` (deleted afterwards), so that nothing mlflow does on opening
    touches the user's files."""
    with tempfile.TemporaryDirectory(prefix="rlbatch-mlflow-") as tmp:
        if kind == "sqlite":
            dst = Path(tmp) / "mlflow.db"
            shutil.copyfile(store, dst)
            for suffix in ("-wal", "-journal"):
                side = store.with_name(store.name + suffix)
                if side.is_file():
                    shutil.copyfile(side, dst.with_name(dst.name + suffix))
            yield f"sqlite:///{dst}"
        else:
            dst = Path(tmp) / "mlruns"
            shutil.copytree(store, dst, symlinks=True, ignore=_skip_artifacts)
            yield dst.as_uri()


@contextlib.contextmanager
def _file_store_allowed() -> Iterator[None]:
    """MLflow >= 3.x refuses to open a file store unless ``MLFLOW_ALLOW_FILE_STORE`` is set (it is in
    maintenance mode, still readable): set for the read, restored after."""
    old = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = old


def _history_rows(client: Any, run: Any, keys: list[str], notes: list[str],
                  user_map: dict[str, str] | None) -> list[dict[str, Any]]:
    """One row per step: every metric's value at that step, ``step`` and ``_time_s`` (the latest timestamp of the
    step's training values, seconds; evaluation values are logged later and not counted). All values at step 0 with several per metric (MLflow's default step): numbered by order."""
    hist = {k: sorted(client.get_metric_history(run.info.run_id, k), key=lambda m: (m.step, m.timestamp))
            for k in keys}
    steps = {m.step for ms in hist.values() for m in ms}
    by_order = steps == {0} and any(len(ms) > 1 for ms in hist.values())
    if by_order:
        notes.append("every value logged at step 0 (MLflow's default): steps numbered by logging order per metric")
    by_step: dict[int, dict[str, Any]] = {}
    for k, ms in hist.items():
        if by_order:
            ms = sorted(ms, key=lambda m: m.timestamp)
        for i, m in enumerate(ms):
            s = i + 1 if by_order else int(m.step)
            row = by_step.setdefault(s, {"step": float(s)})
            row[k] = float(m.value)
            if not N.is_validation_side(k, user_map):  # the step's clock: when its training values were logged
                row["_time_s"] = max(row.get("_time_s", -np.inf), m.timestamp / 1000.0)
    return [by_step[s] for s in sorted(by_step)]


def _read_run(client: Any, run: Any, store: Path, user_map: dict[str, str] | None) -> Run:
    info, data = run.info, run.data
    params = dict(data.params)
    cfg = config_fields(params, "MLflow params")
    notes = list(cfg.notes)
    name = info.run_name or data.tags.get("mlflow.runName") or info.run_id
    extra = {"tracker": "mlflow", "tracker_run_id": info.run_id, "tracker_config": params,
             "tracker_summary": {k: float(v) for k, v in data.metrics.items()},
             "status": _STATUS.get(str(info.status).upper())}
    rows = _history_rows(client, run, sorted(data.metrics), notes, user_map)
    if not rows:
        raise UserError(f"MLflow run {name!r} ({info.run_id}) has no metrics", path=str(store))
    fields = meta_from(str(name), **cfg.fields, **extra)
    return tracker_run(rows, path=store, source_format="mlflow", fields=fields, notes=notes, user_map=user_map,
                       clock="_time_s", clock_note="time/wall_s from the metric timestamps (includes evaluation; the "
                       "time before the first step replaced by one median step)")


def read_all(path: str | Path, *, user_map: dict[str, str] | None = None) -> list[Run]:
    """Every active run at ``path`` (:func:`locate`) as a :class:`Run`, in experiment then start-time order; with
    several, a run that cannot be read is skipped with a warning.

    Raises :class:`UserError` naming ``path`` when it holds no MLflow data, mlflow is not installed (naming the
    extra), the database schema is older than the installed mlflow reads, or no run has metrics."""
    path = Path(path)
    loc = locate(path)
    if loc is None:
        raise UserError("no MLflow tracking data (an mlruns/ file store or an mlflow.db database) here",
                        path=str(path))
    kind, store, exp_only, run_only = loc
    try:  # optional dependency
        from mlflow.entities import ViewType
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise UserError(f"reading MLflow tracking data needs the optional mlflow package ({err}): {EXTRA}",
                        path=str(path)) from None

    runs: list[Run] = []
    with _file_store_allowed(), _private_uri(kind, store) as uri:
        try:
            client = MlflowClient(tracking_uri=uri)
            exps = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]
        except ImportError as err:  # the SQLite store's SQLAlchemy / alembic
            raise UserError(f"reading an MLflow database needs its optional packages ({err}): {EXTRA}",
                            path=str(path)) from None
        except MlflowException as err:
            msg = str(err).splitlines()[0]
            if "out-of-date" in msg:
                raise UserError(f"{msg} The database was written by an older MLflow; upgrade a copy and read that "
                                f"(cp {store} /tmp/mlflow-copy.db && mlflow db upgrade sqlite:////tmp/mlflow-copy.db)",
                                path=str(store)) from None
            raise UserError(f"mlflow cannot open this store: {msg}", path=str(store)) from None
        if exp_only is not None:
            exps = [e for e in exps if e == exp_only]
        found = []
        token = None
        while exps:
            page = client.search_runs(exps, run_view_type=ViewType.ACTIVE_ONLY, max_results=1000,
                                      order_by=["attributes.start_time ASC"], page_token=token)
            found += list(page)
            token = page.token
            if not token:
                break
        if run_only is not None:
            found = [r for r in found if r.info.run_id == run_only]
        runs = read_each(found, lambda r: _read_run(client, r, store, user_map))
    if not runs:
        raise UserError("no MLflow run with metrics here", path=str(path))
    return runs


__all__ = ["EXTRA", "is_mlflow_db", "is_store", "locate", "read_all"]
