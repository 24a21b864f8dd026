"""The run store: one directory per run, the single data model everything downstream reads (DESIGN.md).

A run directory holds
- ``run.json``      metadata (:class:`RunMeta`), written atomically (temp file + rename);
- ``metrics.jsonl`` one JSON object per optimizer step, canonical metric names, flushed and fsynced per line;
- ``eval.jsonl``    one JSON object per validation point (``step``, ``samples/retained``, ``eval/score``, ``eval/n``).

A truncated last line (a crash mid-write) is ignored on read with a warning, and cut off before the next append, so
resuming never leaves a broken line in the middle of the file. A malformed line elsewhere is an error naming file
and line.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rlbatch import faults
from rlbatch.errors import UserError

RUN_JSON = "run.json"
METRICS_JSONL = "metrics.jsonl"
EVAL_JSONL = "eval.jsonl"
CHECKPOINT = "checkpoint.pt"
LOCK = ".lock"
#: Metric keys that measure time (excluded when comparing a resumed run with an uninterrupted one).
TIME_KEYS = ("time/gen_s", "time/reward_s", "time/train_s", "time/step_s", "time/cpu_s", "time/wall_s",
             "time/eval_s", "time/gen_during_eval_s")

#: Canonical metric names (DESIGN.md). Readers map foreign names onto these; see ``rlbatch.readers.names``.
CANONICAL_METRICS: dict[str, str] = {
    "step": "optimizer step, 1-based",
    "samples/retained": "cumulative retained training responses (the paper's x-axis)",
    "samples/generated": "cumulative generated responses, including those filtered out",
    "tokens/generated": "cumulative generated tokens",
    "tokens/trained": "cumulative trained tokens",
    "time/gen_s": "seconds spent on generation in this step",
    "time/reward_s": "seconds spent on scoring in this step",
    "time/train_s": "seconds spent on the update(s) in this step",
    "time/step_s": "seconds for the whole step",
    "time/cpu_s": "process CPU seconds (all threads, user + system) spent in the step: generation, scoring, update(s)",
    "time/wall_s": "cumulative wall-clock seconds, excluding evaluation",
    "reward/mean": "mean training reward over the step's responses",
    "reward/std": "standard deviation of the training reward over the step's responses",
    "grad_norm/actor": "L2 norm of the actor's full-batch gradient before clipping",
    "grad_norm/critic": "L2 norm of the critic's full-batch gradient before clipping",
    "noise/grad_sq_small": "squared gradient norm at the small batch (McCandlish et al. 2018, app. A)",
    "noise/grad_sq_big": "squared gradient norm at the big batch (McCandlish et al. 2018, app. A)",
    "noise/b_simple": "simple noise scale tr(Sigma)/|G|^2, responses (McCandlish et al. 2018); GRPO: "
                      "(G tr Sigma_b + tr Sigma_w)/|G|^2 from whole-group micro-batches, unbiased",
    "noise/b_small": "small-batch size of the two-batch estimator, responses (GRPO: harmonic mean over whole-group "
                     "units)",
    "noise/b_big": "big-batch size of the two-batch estimator: the step's retained responses",
    "noise/grad_sq_micro": "GRPO: mean |g|^2 over the micro-batches holding part of one prompt's group",
    "noise/grad_sq_prompt": "GRPO: mean |g_prompt|^2 over the prompts whose group was taken in parts",
    "noise/b_micro": "GRPO: responses per part-of-a-group micro-batch (harmonic mean)",
    "noise/group_size": "GRPO: responses per prompt G of the noise inputs",
    "noise/between_prompt": "GRPO: tr(Sigma_b), between-prompt gradient covariance trace (squared gradient units)",
    "noise/within_prompt": "GRPO: tr(Sigma_w), within-prompt per-response gradient covariance trace",
    "lr": "learning rate used for this step",
    "rollout/staleness_mean": "asynchronous rollouts: mean over the step's responses of the policy versions between "
                              "a response's first token and the update that trains it (prime-rl 'Async Level')",
    "rollout/staleness_max": "asynchronous rollouts: the largest staleness of the step's responses",
    "rollout/staleness_token_mean": "asynchronous rollouts: staleness averaged over tokens (each token's own "
                                    "policy version)",
    "rollout/partial_frac": "partial rollouts: fraction of the step's responses decoded across more than one policy "
                            "version (verl fully_async/partial/partial_ratio)",
    "rollout/version_span_max": "partial rollouts: the most policy versions one response spanned (prime-rl "
                                "'Max. Off-Policy Level', verl fully_async/partial/max_partial_span)",
    "time/overlap_s": "asynchronous rollouts: seconds of generation that ran during this step's update",
    "time/gen_busy_s": "asynchronous rollouts: seconds the generator process worked on this step's batch "
                       "(time/gen_s is then the trainer's wait for it)",
    "eval/score": "validation score in [0, 1] (eval.jsonl)",
}


class RunMeta(BaseModel):
    """Metadata of one run (``run.json``). Unknown keys are kept (``extra="allow"``).

    ``batch_size`` B is retained-capable training responses per optimizer update (the batch of the LR rule and the
    grad-norm fit), ``prompts_per_step`` (P) x ``group_size`` (G) unless the run splits each rollout into
    mini-batches: then ``rollout_batch_size`` is P x G and ``batch_size`` the mini-batch M (verl's
    ``ppo_mini_batch_size`` x ``rollout.n``), a divisor of it. ``batch_size`` is derived when P and G are given
    and must agree with them (or, with ``rollout_batch_size``, divide P x G) when all are.
    """

    model_config = ConfigDict(extra="allow")

    run_id: str = Field(min_length=1)
    algorithm: str = "grpo"
    model: str | None = None
    task: str | None = None
    prompts_per_step: int | None = Field(default=None, ge=1, le=2**53)
    group_size: int | None = Field(default=None, ge=1, le=2**53)
    batch_size: int | None = Field(default=None, ge=1, le=2**53)
    rollout_batch_size: int | None = Field(default=None, ge=1, le=2**53)
    lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    lr_rule: Literal["sqrt", "linear", "none"] | None = None
    base_batch: int | None = Field(default=None, ge=1, le=2**53)
    base_lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    seed: int | None = None
    backend: str | None = None
    source_format: str | None = None
    source_path: str | None = None
    hardware: dict[str, Any] | str | None = None
    software: dict[str, Any] = Field(default_factory=dict)
    status: Literal["running", "finished", "failed"] = "running"
    stop_reason: str | None = None

    @field_validator("algorithm")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip().lower()

    @model_validator(mode="after")
    def _batch(self) -> "RunMeta":
        p, g, b, rb = self.prompts_per_step, self.group_size, self.batch_size, self.rollout_batch_size
        if p is not None and g is not None:
            if rb is not None and rb != p * g:
                raise ValueError(f"rollout_batch_size={rb} disagrees with prompts_per_step x group_size = {p} x {g} "
                                 f"= {p * g}")
            if b is None:
                self.batch_size = p * g
            elif rb is not None:
                if b > rb or rb % b:
                    raise ValueError(f"batch_size={b} (responses per update) must divide rollout_batch_size={rb}")
            elif b != p * g:
                raise ValueError(f"batch_size={b} disagrees with prompts_per_step x group_size = {p} x {g} = {p * g}")
        return self


@dataclass
class Run:
    """A run in memory: metadata, per-step metrics and evaluation points, as pandas DataFrames with canonical names.

    ``metrics`` has one row per optimizer step (column ``step``); ``evals`` one row per validation point (columns
    ``step``, ``samples/retained``, ``eval/score`` and optionally ``eval/n``). ``notes`` collects what a reader
    inferred or skipped (e.g. "samples/retained computed as steps x B").
    """

    meta: RunMeta
    metrics: pd.DataFrame = field(default_factory=pd.DataFrame)
    evals: pd.DataFrame = field(default_factory=pd.DataFrame)
    path: Path | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.meta.run_id


def natural_key(text: str) -> tuple:
    """A sort key that orders the numbers inside a name by value: ``B16 < B128 < B1024``, ``s2 < s10``."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.findall(r"\d+|\D+", str(text)))


def run_order(run: "Run") -> tuple:
    """The one order of runs everywhere (tables, figures, the plan): by batch size B numerically (unknown B last),
    then by run id with its numbers compared as numbers (:func:`natural_key`)."""
    b = run.meta.batch_size
    return (b is None, b or 0, natural_key(run.run_id))


def _validation_message(path: Path | str, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
    extra = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}: field {loc!r}: {first.get('msg')}{extra}"


def make_meta(path: Path | str | None = None, **fields: Any) -> RunMeta:
    """Build a :class:`RunMeta`, turning validation failures into one :class:`UserError` naming the field."""
    try:
        return RunMeta(**fields)
    except ValidationError as err:
        raise UserError(_validation_message(path or "run metadata", err)) from None


# --------------------------------------------------------------------------------------------------- low-level I/O
def atomic_write_text(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: temp file in the same directory, fsync, rename, fsync the directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError) and err.filename is None:  # e.g. disk full on write: name the file
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory (after a rename into it), so the new entry survives a crash; errors are ignored."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps(obj: Any) -> str:
    """One-line JSON; NaN/Inf are written as ``NaN``/``Infinity`` (read back by Python's json)."""
    return json.dumps(obj, default=_json_default, separators=(",", ":"))


class JsonlWriter:
    """Append-only JSONL writer: one object per line, written with one ``write`` and fsynced per line.

    Opening a file whose last line is incomplete (a crash mid-write) first cuts that line off, with a warning, so
    appends never glue onto a broken line. A failed append (disk full, I/O error) cuts the file back to its length
    before the append, so earlier lines stay exactly as they were, and raises ``OSError`` naming the file.
    Fault points ``metrics``/``eval`` and ``enospc_metrics``/``enospc_eval`` (by file stem; :mod:`rlbatch.faults`).
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl_tail(self.path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._point = self.path.stem

    def append(self, obj: dict[str, Any]) -> None:
        data = (dumps(obj) + "\n").encode("utf-8")
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.path}: writer is closed")
        start = os.fstat(fd).st_size
        try:
            if faults.armed(self._point):  # killed mid-line: half of it on disk
                os.write(fd, data[: len(data) // 2])
                os.fsync(fd)
                faults.kill()
            if faults.armed("enospc_" + self._point):
                os.write(fd, data[: len(data) // 2])
                raise faults.enospc()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as err:
            try:
                os.ftruncate(fd, start)  # drop the partial line; earlier lines stay intact
                os.fsync(fd)
            except OSError:
                pass
            raise OSError(err.errno, err.strerror, str(self.path)) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def repair_jsonl_tail(path: Path) -> bool:
    """Cut an incomplete last line (no trailing newline) off ``path``. Returns True if something was cut."""
    if not path.exists():
        return False
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return False
        # find the last newline
        pos = size - 1
        chunk = 4096
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            data = fh.read(pos - start)
            idx = data.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    warnings.warn(f"{path}: cut an incomplete last line ({size - keep} bytes) before appending", stacklevel=3)
    return True


def read_jsonl(path: Path | str) -> list[dict[str, Any]]:
    """Read a JSONL file into a list of objects.

    An unparseable *last* line without a trailing newline is a truncated write: it is ignored with a warning.
    Any other malformed line raises :class:`UserError` naming file and line. A missing file reads as empty.
    """
    path = Path(path)
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"not UTF-8 text ({err.reason} at byte {err.start})", path=str(path)) from None
    lines = text.split("\n")
    complete_tail = text.endswith("\n")
    rows: list[dict[str, Any]] = []
    n = len(lines)
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as err:  # JSONDecodeError; ints over 4300 digits; deep nesting
            if i == n and not complete_tail:
                warnings.warn(f"{path}:{i}: ignoring a truncated last line", stacklevel=2)
                continue
            why = getattr(err, "msg", None) or str(err).split(";")[0] or type(err).__name__
            raise UserError(f"malformed JSON ({why})", path=str(path), line=i) from None
        if not isinstance(obj, dict):
            raise UserError("expected a JSON object per line", path=str(path), line=i)
        rows.append(obj)
    return rows


def write_error(err: OSError, path: Path | str, note: str = "") -> UserError:
    """A failed write (disk full, read-only or unwritable location) as one :class:`UserError` naming the file
    (``err.filename``, else ``path``) and the system's reason, plus ``note`` (e.g. what was kept)."""
    why = err.strerror or str(err) or type(err).__name__
    return UserError(f"cannot write ({why}){note}", path=str(err.filename or path))


# --------------------------------------------------------------------------------------------------- run directories
def write_meta(run_dir: Path | str, meta: RunMeta) -> Path:
    """Write ``run.json`` atomically; returns its path."""
    path = Path(run_dir) / RUN_JSON
    atomic_write_text(path, json.dumps(meta.model_dump(mode="json"), indent=2, default=_json_default) + "\n")
    return path


def read_meta(run_dir: Path | str) -> RunMeta:
    """Read and validate ``run.json``. Raises :class:`UserError` naming the file and the bad field."""
    path = Path(run_dir) / RUN_JSON
    if not path.exists():
        raise UserError("no run.json: not a run directory", path=str(Path(run_dir)))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError, huge ints, deep nesting
        raise UserError(f"malformed JSON ({str(err).splitlines()[0][:200] or type(err).__name__})",
                        path=str(path)) from None
    if not isinstance(data, dict):
        raise UserError("expected a JSON object", path=str(path))
    return make_meta(path, **data)


def update_meta(run_dir: Path | str, **changes: Any) -> RunMeta:
    """Read ``run.json``, apply ``changes`` (validated), write it back atomically."""
    meta = read_meta(run_dir)
    data = meta.model_dump(mode="json")
    data.update(changes)
    new = make_meta(Path(run_dir) / RUN_JSON, **data)
    write_meta(run_dir, new)
    return new


def is_run_dir(path: Path | str) -> bool:
    return (Path(path) / RUN_JSON).is_file()


def _records_frame(rows: list[dict[str, Any]], key: str = "step") -> pd.DataFrame:
    if not rows:
        return pd.DataFrame()
    df = pd.DataFrame.from_records(rows)
    if key in df.columns:
        df = df.sort_values(key, kind="stable").reset_index(drop=True)
    return df


def read_jsonl_frame(path: Path | str, key: str = "step") -> pd.DataFrame:
    """A JSONL file of flat records as a DataFrame sorted by ``key``: the same frame as :func:`read_jsonl` +
    ``DataFrame.from_records``, with the same warnings and errors.

    Fast path: pyarrow's JSON reader (C++), about 10x faster than ``json.loads`` per line on a 10,000-step
    metrics file; used only when it parses the whole file into flat number/text/bool columns. Anything else
    (a truncated or malformed line, NaN/Infinity tokens, nested objects, integers beyond int64, dates) goes through
    :func:`read_jsonl`, so messages still name the file and line.
    """
    path = Path(path)
    try:
        if path.stat().st_size == 0:
            return pd.DataFrame()
        import pyarrow as pa
        import pyarrow.json as paj

        table = paj.read_json(path)
        flat = all(pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)
                   or pa.types.is_string(f.type) or pa.types.is_large_string(f.type) for f in table.schema)
        df = table.to_pandas() if flat else None  # raises on invalid UTF-8 in a string
        floats = df.select_dtypes(include="float") if df is not None else None
        if floats is not None and len(floats.columns) and np.isinf(floats.to_numpy()).any():
            df = None  # a number beyond the float range: json.loads would keep it as an int (or refuse it)
    except Exception:  # noqa: BLE001 - any failure of the fast path: read line by line for exact messages
        df = None
    if df is None:
        return _records_frame(read_jsonl(path), key)
    if key in df.columns:
        df = df.sort_values(key, kind="stable").reset_index(drop=True)
    return df


def read_run(run_dir: Path | str) -> Run:
    """Read a run directory (``run.json``, ``metrics.jsonl``, ``eval.jsonl``) into a :class:`Run`.

    Raises :class:`UserError` if ``run.json`` is missing or invalid, or a metrics line is malformed (other than a
    truncated last line, which is ignored with a warning).
    """
    run_dir = Path(run_dir)
    meta = read_meta(run_dir)
    metrics = read_jsonl_frame(run_dir / METRICS_JSONL)
    evals = read_jsonl_frame(run_dir / EVAL_JSONL)
    return Run(meta=meta, metrics=metrics, evals=evals, path=run_dir)


def _clean_record(rec: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in rec.items():
        if v is None:
            continue
        if isinstance(v, float) and math.isnan(v):
            continue
        out[k] = v
    return out


def write_run(run_dir: Path | str, run: Run) -> Path:
    """Write a whole in-memory :class:`Run` as a run directory (used by readers to import foreign logs).

    Existing ``metrics.jsonl``/``eval.jsonl`` are replaced atomically. Returns the run directory.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_meta(run_dir, run.meta)
    for name, df in ((METRICS_JSONL, run.metrics), (EVAL_JSONL, run.evals)):
        lines = [dumps(_clean_record(r)) for r in df.to_dict(orient="records")] if len(df) else []
        atomic_write_text(run_dir / name, "".join(line + "\n" for line in lines))
    run.path = run_dir
    return run_dir


def iter_run_dirs(root: Path | str) -> Iterable[Path]:
    """Yield run directories at ``root`` or below it (sorted), e.g. the trials of a sweep."""
    root = Path(root)
    if is_run_dir(root):
        yield root
        return
    for p in sorted(root.rglob(RUN_JSON)):
        yield p.parent


#: the record an adaptive sweep writes beside its trials (``OUT/adaptive.json``; rlbatch.study.adaptive)
ADAPTIVE_JSON = "adaptive.json"
#: adaptive outcomes that end a trial before its configuration was measured (rlbatch.study.adaptive's states)
STOPPED_EARLY_STATES = ("cannot win", "never reaches", "skipped")


def annotate_stopped(runs: Iterable["Run"], trials: Sequence[dict[str, Any]]) -> None:
    """Mark the runs an adaptive sweep stopped early (``trials``: its record's ``trials``, each ``run_id``,
    ``state``, ``samples``, ``decided_by``) with ``meta.stopped_early = {"state", "why", "samples"}``, so that
    every report says "stopped early (why, at how many samples)" of them and never "did not reach the target"."""
    by = {t.get("run_id"): t for t in trials if isinstance(t, dict) and t.get("state") in STOPPED_EARLY_STATES}
    for r in runs:
        t = by.get(r.run_id)
        if t is not None:
            r.meta.stopped_early = {"state": t["state"], "why": t.get("decided_by") or t["state"],
                                    "samples": t.get("samples")}


def beside_trials(root: Path | str, name: str) -> Path | None:
    """The sweep's file ``name`` at ``root`` or its parent (``OUT/<name>`` beside ``OUT/trials``, when ``root`` is
    ``OUT`` or ``OUT/trials``); None when neither holds one."""
    root = Path(root)
    return next((d / name for d in (root, root.parent) if (d / name).is_file()), None)


def adaptive_trials(root: Path | str) -> list[dict[str, Any]]:
    """The ``trials`` of the adaptive record at ``root`` or its parent (a sweep's ``OUT/adaptive.json`` beside
    ``OUT/trials``); [] when there is none or it cannot be read."""
    p = beside_trials(root, ADAPTIVE_JSON)
    if p is None:
        return []
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    trials = data.get("trials") if isinstance(data, dict) else None
    return trials if isinstance(trials, list) else []


#: the timing pass's blocks beside a sweep's trials (``OUT/timing.jsonl``; rlbatch.study.timing)
TIMING_JSONL = "timing.jsonl"
#: the record of the sequential study that ran a sweep's trials (``OUT/sequential.json``; rlbatch.study.sequential)
SEQUENTIAL_JSON = "sequential.json"


def sequential_record(root: Path | str) -> dict[str, Any] | None:
    """The sequential study's record at ``root`` or its parent (``OUT/sequential.json`` beside ``OUT/trials``,
    :meth:`rlbatch.study.sequential.SequentialResult.to_json`); None without one. Raises :class:`UserError` naming
    the file when it is not such a record (the decision would otherwise be made without it)."""
    p = beside_trials(root, SEQUENTIAL_JSON)
    if p is None:
        return None
    try:
        rec = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the sequential study's record: {err}", path=str(p)) from None
    ok = (isinstance(rec, dict) and isinstance(rec.get("faster"), dict) and isinstance(rec.get("looks"), list)
          and all(isinstance(lk, dict) and isinstance(lk.get("tail"), (int, float)) for lk in rec["looks"]))
    if not ok:
        raise UserError("not a sequential study's record (needs 'faster' and 'looks' with each look's 'tail'); "
                        "move it away to analyse the runs as a fixed design", path=str(p))
    return rec


def sequential_of(paths: Sequence[Path | str]) -> dict[str, Any] | None:
    """The sequential study's record (:func:`sequential_record`) when ``paths`` is one directory holding one (a
    sweep the study ran); else None. analyze, plan and watch of that directory then decide as its report does."""
    return sequential_record(paths[0]) if len(paths) == 1 and Path(paths[0]).is_dir() else None


def timing_blocks(root: Path | str) -> list[dict[str, Any]]:
    """The timing pass's blocks at ``root`` or its parent (``OUT/timing.jsonl`` beside ``OUT/trials``), each
    ``config, batch_size, round, steps, samples, cpu_s, wall_s``; a truncated last line is ignored; [] without."""
    p = beside_trials(root, TIMING_JSONL)
    if p is None:
        return []
    rows = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(r, dict) and {"config", "round", "samples"} <= set(r):
            rows.append(r)
    return rows


def annotate_timing(runs: Iterable["Run"], blocks: Sequence[dict[str, Any]]) -> None:
    """Give every run the timing pass's blocks of its configuration (``meta.timing_blocks``; the configuration of a
    run id is its id without ``-s<seed>``), so that the accounting takes throughput from them."""
    by: dict[str, list[dict[str, Any]]] = {}
    for b in blocks:
        by.setdefault(str(b["config"]), []).append(b)
    for r in runs:
        head, _, tail = r.run_id.rpartition("-s")
        key = head if head and tail.isdigit() else r.run_id
        if key in by:
            r.meta.timing_blocks = by[key]


def finite_record(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with every non-finite float (NaN, +-Inf) replaced by None (written as ``null``), also inside nested
    lists and dicts (the batch controller's decisions), as the trainer and the TRL callback log their lines."""
    def fin(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: fin(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fin(x) for x in v]
        return v

    return {k: fin(v) for k, v in rec.items()}


# --------------------------------------------------------------------------------------------------- run directories
def check_writable(out: Path) -> None:
    """Create ``out`` and check a file can be written there; :class:`UserError` otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise UserError(f"output directory is not writable ({err.strerror})", path=str(out)) from None


def truncate_lines(path: Path, n: int) -> None:
    """Keep the first ``n`` complete lines of ``path`` (a resumed run drops the lines written after its
    checkpoint), rewritten atomically; nothing when the file is missing or already has exactly ``n``."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [x for x in lines if x.endswith("\n")]
    if len(lines) != n:
        atomic_write_text(path, "".join(lines[:n]))


def lock_holder(directory: Path | str) -> int | None:
    """The pid of the live process on this machine that holds ``directory/.lock`` (:func:`lock_run_dir`: a trainer
    in its run directory, a local sweep in its sweep directory), or None when there is no lock file, it names no
    pid, or that process has exited (a run or sweep killed, or one that ended). Reads only: the lock is not taken.
    A process on another machine (a Ray worker) is not seen."""
    f = Path(directory) / LOCK
    try:
        pid = int(f.read_text().strip() or "0")
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        return pid
    except OSError:
        return None
    return pid


def lock_run_dir(out: Path):
    """Take an exclusive lock on ``out/.lock`` for this process (released when it exits, even by ``kill -9``), so
    two trainers never write one run directory; :class:`UserError` if another process holds it. Returns the open
    file (keep it open while training); None where ``fcntl`` is unavailable."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    fh = open(out / LOCK, "a+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise UserError(f"directory is in use by another rlbatch process (pid {holder})", path=str(out)) from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def unlock_run_dir(out: Path, lock, existed: bool = True) -> None:
    """Release :func:`lock_run_dir`'s ``lock`` leaving no stale ``.lock`` (removed while still held); a directory
    that did not exist before (``existed`` False) and is still empty is removed, so a run that failed before
    writing anything leaves nothing behind."""
    if lock is None:
        return
    (out / LOCK).unlink(missing_ok=True)
    lock.close()
    if not existed and out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def remove_stale_temps(out: Path) -> None:
    """Remove temp files a killed writer left behind (``.checkpoint.pt.tmp``, ``.run.json.*.tmp``,
    ``.metrics.jsonl.*.tmp``, ...); call only while holding the run directory's lock."""
    for p in out.glob(".*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass
