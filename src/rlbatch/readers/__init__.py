"""Log readers: every supported format -> run-store :class:`rlbatch.runstore.Run` objects with canonical names.

``load(path)`` reads a file or a directory, detecting the format by content (``fmt`` overrides):

| format        | what                                                                                  |
|---------------|---------------------------------------------------------------------------------------|
| ``rlbatch``   | a run-store directory (``run.json`` + ``metrics.jsonl``), or a tree of them (a sweep) |
| ``verl``      | verl console log (``step:N - name:value - ...``), :mod:`.verl_console`                 |
| ``verl-jsonl``| verl file logger (``{"step": N, "data": {...}}`` per line), :mod:`.jsonl`              |
| ``tensorboard``| event directories (verl, OpenRLHF, TRL), :mod:`.tensorboard`                         |
| ``trl``       | TRL / transformers ``trainer_state.json``, :mod:`.trainer_state`                       |
| ``trl-console``| TRL / transformers console output (``{'loss': ..., 'epoch': ...}`` lines), :mod:`.trl_console` |
| ``prime-rl``, ``nemo-rl``, ``slime``, ``wandb-summary`` | console outputs, :mod:`.consoles`            |
| ``wandb-csv`` | W&B history or chart-panel CSV export, :mod:`.tabular`                                 |
| ``csv``, ``jsonl`` | generic tables, names mapped by :mod:`.names` plus ``mapping`` (``--map``)        |
| ``wandb``     | local W&B run directories (``wandb/run-*/``, one or many), :mod:`.wandb_dir` (extra ``wandb``) |
| ``mlflow``    | MLflow tracking data (``mlruns/`` file store, ``mlflow.db``), :mod:`.mlflow_store` (extra ``mlflow``) |
| ``notebook``, ``generic`` | Jupyter notebooks and any other text: the general extraction layer, :mod:`.generic` |

Under the adapters, :mod:`.extract` is the general extraction layer: a file that holds several runs is split into
runs (:func:`.extract.split_runs`), a notebook is unpacked, a file no adapter recognises (or in which the detected
adapter finds nothing) is read by :mod:`.generic`, and P, G and lr a reader left unknown are looked for in the same
file (:func:`.generic.fill_config`), each with its source in the run's notes.

The foreign -> canonical name table is :mod:`rlbatch.readers.names`.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable

from rlbatch.batchspec import batch_spec
from rlbatch.errors import UserError
from rlbatch.readers import (consoles, extract, generic, jsonl, mlflow_store, tabular, tensorboard, trainer_state,
                             trl_console, verl_console, wandb_dir)
from rlbatch.readers.common import (ReadWarning, apply_overrides, clean_store_run, finalize, read_text,
                                    sniff_encoding, unique_ids, virtual, virtual_text, warn)
from rlbatch.readers.generic import JSONL_CONFIG_BESIDE, config_paths_beside
from rlbatch.runstore import (Run, adaptive_trials, annotate_stopped, annotate_timing, is_run_dir, iter_run_dirs,
                              read_run, timing_blocks)



@dataclass(frozen=True)
class Adapter:
    """A console-log format recognised by its text: ``looks_like(head)`` on the file's first 64 KiB (decoded),
    ``read(path, mapping)`` -> its runs (a :class:`UserError` naming the file when it holds none)."""

    name: str
    looks_like: Callable[[str], bool]
    read: Callable[[Path, dict[str, str]], list[Run]]


#: The console formats detected by content, tried in this order after the structured ones (a run store, JSON,
#: TRL's trainer_state.json) and before a plain CSV: a new format is one module with ``looks_like`` and ``read``
#: and one line here (docs/adding-a-reader.md).
CONSOLE_ADAPTERS: tuple[Adapter, ...] = (
    Adapter("verl", verl_console.looks_like, lambda p, m: [verl_console.read(p, user_map=m)]),
    Adapter("trl-console", trl_console.looks_like, lambda p, m: [trl_console.read(p, user_map=m)]),
    *(Adapter(f, lambda h, f=f: consoles.detect(h) == f, lambda p, m, f=f: [consoles.read(p, f, user_map=m)])
      for f in consoles.FORMATS),
)

FORMATS = ("rlbatch", "verl-jsonl", "tensorboard", "trl", *(a.name for a in CONSOLE_ADAPTERS), "wandb-csv", "csv",
           "jsonl", "wandb", "mlflow", "notebook", "generic")

__all__ = ["FORMATS", "ReadWarning", "load", "detect_format", "apply_overrides", "parse_mapping", "read_console_text"]



def clip(text: str, n: int) -> str:
    """``text`` cut to at most about ``n`` characters at a word boundary, with "..." where it was cut (an error
    message is never cut mid-word)."""
    if len(text) <= n:
        return text
    cut = text[:n].rsplit(" ", 1)[0].rstrip(",;:(")
    return f"{cut} ..."


def shown(line: str, n: int = 60) -> str:
    """A quoted line of a user's file for an error message: characters that do not print (control bytes, binary)
    as ``?``, cut at a word boundary."""
    safe = "".join(ch if ch.isprintable() and ch != "\ufffd" else "?" for ch in line.strip())
    return repr(clip(safe, n))

def _head(path: Path, n: int = 65536) -> str:
    v = virtual(path)
    if v is not None:
        return v[:n]
    try:
        with open(path, "rb") as fh:
            raw = fh.read(n)
    except OSError as err:
        raise UserError(f"cannot read ({err.strerror})", path=str(path)) from None
    return raw.decode(sniff_encoding(raw), errors="replace")


def detect_format(path: str | Path) -> str:
    """The format of ``path`` (one of :data:`FORMATS`), judged by content (file names only for TensorBoard's
    binary event files and ``trainer_state.json`` in directories).

    Raises :class:`UserError` naming the file and its first line when the format is unknown.
    """
    path = Path(path)
    if not path.exists():
        raise UserError("no such file or directory", path=str(path))
    if path.is_dir():
        if is_run_dir(path) or any(True for _ in iter_run_dirs(path)):
            return "rlbatch"
        if trainer_state.find_state(path) is not None:
            return "trl"
        tracker = _tracker_format(path)
        if tracker:
            return tracker
        if any(path.rglob("events.out.tfevents*")):
            return "tensorboard"
        raise UserError("no run store (run.json), trainer_state.json or TensorBoard events in this directory",
                        path=str(path))
    if "tfevents" in path.name:
        return "tensorboard"
    tracker = _tracker_format(path)
    if tracker:
        return tracker
    head = _head(path)
    stripped = head.lstrip()
    if not stripped:
        raise UserError("empty file", path=str(path))
    # NUL runs inside a text log (a file cut by a crash, binary junk pasted in) are dropped; a file that is
    # mostly not text (an image, an archive) is binary, and its bytes are never printed
    head = head.replace("\x00", "")
    stripped = head.lstrip()
    printable = sum((ch.isprintable() and ch != "\ufffd") or ch in "\n\r\t\x1b" for ch in head[:4096])
    if not stripped or printable < 0.8 * min(len(head), 4096):
        raise UserError("binary file, not a training log", path=str(path))
    first = stripped.split("\n", 1)[0].strip()
    if extract.is_notebook(head):
        return "notebook"
    if stripped.startswith("["):
        try:
            if jsonl.X.json_document_records(json.loads(read_text(path))):
                return "jsonl"  # a JSON list of records
        except (ValueError, RecursionError):
            pass
    if stripped.startswith("{"):
        try:
            obj = json.loads(first)
            if jsonl.is_verl_record(obj):
                return "verl-jsonl"
            if isinstance(obj, dict) and "\n" in stripped.strip():
                return "jsonl"
        except (ValueError, RecursionError):  # JSONDecodeError, ints over 4300 digits, deep nesting
            pass
        if '"log_history"' in head:
            return "trl"
        try:
            obj = json.loads(read_text(path))
            if trainer_state.looks_like(obj):
                return "trl"
            if isinstance(obj, dict):
                return "jsonl"
        except (ValueError, RecursionError):
            pass
    for adapter in CONSOLE_ADAPTERS:
        if adapter.looks_like(head):
            return adapter.name
    if "," in first and "\n" in stripped:
        cols = [c.strip().strip('"') for c in first.split(",")]
        return "wandb-csv" if tabular.is_wandb_header(cols) else "csv"
    raise UserError(f"unknown log format (first line: {shown(first)}); give --log-format, one of {', '.join(FORMATS)}",
                    path=str(path), line=1)


def parse_mapping(items: list[str] | dict[str, str] | None) -> dict[str, str]:
    """``["foreign=canonical", ...]`` (``--map``) -> dict. Raises :class:`UserError` for an item without ``=``."""
    if not items:
        return {}
    if isinstance(items, dict):
        return dict(items)
    out = {}
    for item in items:
        for part in str(item).split(","):
            if not part.strip():
                continue
            k, sep, v = part.partition("=")
            if not sep or not k.strip() or not v.strip():
                raise UserError(f"--map {part!r}: expected foreign=canonical, e.g. train/acc=eval/score",
                                field="map")
            out[k.strip()] = v.strip()
    return out


def read_console_text(path: Path, text: str, mapping: dict[str, str]) -> tuple[str, Run] | None:
    """``text`` (a notebook's outputs, standing for the file ``path``) read by the adapter whose console format it
    matches: ``(format, run)``, or None when no console adapter recognises it or reads anything. The
    :mod:`.generic` reader's way back to the adapters (passed to it, so that it need not import this module)."""
    with virtual_text(path, text):
        try:
            fmt = detect_format(path)
            if fmt in ("notebook", "generic", "csv", "jsonl"):
                return None
            return fmt, _read_one(path, fmt, mapping)[0]
        except UserError:
            return None


def _read_one(path: Path, fmt: str, mapping: dict[str, str]) -> list[Run]:
    if fmt in ("wandb", "mlflow"):
        return _read_tracker(path, fmt, mapping)
    if fmt == "rlbatch":
        runs, started = [], []
        dirs = list(iter_run_dirs(path))
        for d in dirs:
            try:
                run = clean_store_run(read_run(d))
            except UserError as err:
                # a trial of a sweep that has just started (run.json written, no step logged yet) is not the sweep's
                # failure: its finished trials are still read (researcher tryout, rerun: one empty metrics.jsonl
                # made the whole sweep "nothing usable read" for analyze and watch)
                if len(dirs) == 1 or "no step records" not in str(err):
                    raise
                started.append(d.name)
                continue
            run.meta.source_format = run.meta.source_format or "rlbatch"
            runs.append(finalize(run))
        if started:
            warn(f"skipped {len(started)} run director{'y' if len(started) == 1 else 'ies'} with no step logged yet "
                 f"(just started, or never ran): {', '.join(started)}", path)
        if not runs:
            raise UserError("no run directories (run.json) here" if not dirs else
                            "no step logged yet in any run directory here", path=str(path))
        annotate_stopped(runs, adaptive_trials(path))  # an adaptive sweep's record: which trials it stopped early
        annotate_timing(runs, timing_blocks(path))  # a study's timing pass: the accounting's throughput
        return runs
    adapter = next((a for a in CONSOLE_ADAPTERS if a.name == fmt), None)
    if adapter is not None:
        return adapter.read(path, mapping)
    if fmt in ("verl-jsonl", "jsonl"):
        return jsonl.read_all(path, fmt=fmt, user_map=mapping)
    if fmt == "tensorboard":
        dirs = tensorboard.event_dirs(path)
        if not dirs:
            raise UserError("no TensorBoard event files here", path=str(path))
        runs = []
        for d in dirs:
            rid = d.name if d == path or path.is_file() else str(d.relative_to(path)).replace("/", "_")
            try:
                runs.append(tensorboard.read(d, run_id=rid, user_map=mapping))
            except UserError as err:
                if len(dirs) == 1:
                    raise
                warn(str(err))
        return runs
    if fmt == "trl":
        return trainer_state.read_all(path, user_map=mapping)
    if fmt in ("wandb-csv", "csv"):
        return tabular.read(path, fmt=fmt, user_map=mapping)
    if fmt in ("notebook", "generic"):
        return [generic.read(path, user_map=mapping, console=read_console_text)]
    raise UserError(f"unknown --log-format {fmt!r}; one of {', '.join(FORMATS)}", field="log-format")


# ---- experiment trackers (issue 24): W&B run directories and MLflow tracking data, read by their own packages ----
def _tracker_format(path: Path) -> str | None:
    """``wandb`` for W&B run directories (or a ``.wandb`` file) at ``path``, ``mlflow`` for MLflow tracking data,
    else None."""
    if wandb_dir.run_dirs(path):
        return "wandb"
    if mlflow_store.is_store(path):
        return "mlflow"
    return None


def _read_tracker(path: Path, fmt: str, mapping: dict[str, str]) -> list[Run]:
    if fmt == "wandb":  # a run without a .wandb history: its files/output.log through the console readers
        return wandb_dir.read_all(path, user_map=mapping, console=lambda p: load(p, mapping=mapping)[0])
    return mlflow_store.read_all(path, user_map=mapping)
# ---- end of the experiment trackers ----

# ---- issue 24: a file of unknown shape (kept apart from the dispatch above) ----------------------------------------

def _read_file(path: Path, mapping: dict[str, str]) -> list[Run]:
    """One log file, format detected: split into runs when it holds several launches; each part read by the
    adapter its content matches, else (unknown format, or the adapter found nothing) by the general reader; P, G
    and lr the adapter left unknown filled from the same text. Raises the adapter's :class:`UserError` when neither
    reads anything."""
    head = _head(path)
    if "tfevents" in path.name or extract.is_notebook(head) or "\x00" in head:
        fmt = detect_format(path)
        return _read_one(path, fmt, mapping)
    text = read_text(path)
    if text.lstrip().startswith("{") and "\n" in text.strip() and '"log_history"' in head:
        return _read_one(path, detect_format(path), mapping)
    starts = extract.run_starts(text)
    if len(starts) < 2:
        return _read_part(path, text, mapping, None)
    lines = text.split("\n")
    spans = extract.split_runs(lines, starts)
    if len(spans) == 1:
        return _read_part(path, text, mapping, None)
    runs: list[Run] = []
    errors: list[str] = []
    for k, (a, b) in enumerate(spans, 1):
        part = "\n".join(lines[a:b]) + ("\n" if b < len(lines) else "")
        with virtual_text(path, part):
            try:
                got = _read_part(path, part, mapping, f"{path.stem}-run{k}")
            except UserError as err:
                errors.append(f"run {k} (lines {a + 1}-{b}): {err}")
                continue
        for r in got:
            r.notes.insert(0, f"run {k} of {len(spans)} in {path.name} (lines {a + 1}-{b}; each launch of a "
                              "trainer starts a run)")
        runs.extend(got)
    if not runs:
        raise UserError("no readable run: " + "; ".join(errors), path=str(path))
    for e in errors:
        warn(f"skipped {e}", path)
    rl = [r for r in runs if not is_supervised(r)]
    if rl and len(rl) < len(runs):
        for r in runs:
            if r not in rl:
                warn(f"skipped {r.run_id}: supervised fine-tuning (a loss and a learning rate, no reward or policy "
                     "metric), not an RL run", path)
        runs = rl
    return runs


#: names a log of training steps carries: a reward, a loss, a KL or policy term, a gradient norm, an entropy, an
#: evaluation score (what a table of results, a profile or a note does not)
TRAINING_EVIDENCE = re.compile(r"(?i)reward|loss|(?<![a-z])kl(?![a-z])|grad|entropy|advantage|return|objective|"
                               r"policy|critic|clip|accura|pass|score")


def is_training_log(run: Run) -> bool:
    """True when ``run`` holds a series a training log has (:data:`TRAINING_EVIDENCE` among its metric names, or
    evaluation points): what a directory of files must contain to count as logs."""
    names = [str(c) for c in run.metrics.columns if c != "step"]
    names += [str(v) for v in (getattr(run.meta, "metric_sources", None) or {}).values()]
    return bool(len(run.evals)) or any(TRAINING_EVIDENCE.search(n) for n in names)


#: names that only an RL run logs (a reward, an advantage, a policy-gradient or KL term, a critic, rollouts)
RL_WORDS = re.compile(r"(?i)reward|advantage|(?<![a-z])kl(?![a-z])|pg_|policy|critic|score|return|rollout|"
                      r"response_length|clip|entropy|completion")


def is_supervised(run: Run) -> bool:
    """True for a run that logs nothing an RL run does (no reward, advantage, KL, policy or critic metric, no
    rollout): supervised fine-tuning printed in the same file as an RL run (a README's SFT-then-GRPO recipe)."""
    names = [c for c in run.metrics.columns if c != "step"]
    sources = list((getattr(run.meta, "metric_sources", None) or {}).values())
    return not any(RL_WORDS.search(str(n)) for n in names + sources)


def _read_part(path: Path, text: str, mapping: dict[str, str], run_id: str | None) -> list[Run]:
    try:
        fmt = detect_format(path)
    except UserError as err:
        if "unknown log format" not in str(err):
            raise
        fmt = None
    runs: list[Run] | None = None
    first_err: UserError | None = None
    if fmt is not None:
        try:
            runs = _read_one(path, fmt, mapping)
        except UserError as err:
            first_err = err
    if runs is None:
        try:
            runs = [generic.read(path, user_map=mapping, console=read_console_text)]
        except UserError:
            if first_err is not None:
                raise first_err from None
            raise UserError(f"unknown log format (first line: {shown(text.lstrip().split(chr(10), 1)[0])}) and no "
                            "records with a step and training metrics in it; give --log-format, one of "
                            f"{', '.join(FORMATS)}", path=str(path), line=1) from None
        if first_err is not None:
            runs[0].notes.insert(0, f"the {fmt} reader found nothing ({first_err}); read by the general layer")
    out = []
    for r in runs:
        if run_id:
            r.meta.run_id = run_id
        out.append(generic.fill_final_eval(generic.fill_config(r, text, path=path), text))
    return out


def _why_no_steps(path: Path, err: UserError) -> UserError:
    """``err`` (nothing read from a text log) with what the log itself says: the error it stopped with (a traceback's
    last line, ``Killed``) and the run's config as read (P, G, lr), so that a run that crashed before its first step
    is named as such. ``err`` unchanged for a binary file or one whose text gives neither."""
    try:
        head = _head(path)
        if "\x00" in head or extract.is_notebook(head):
            return err
        text = read_text(path)
    except UserError:
        return err
    why = extract.stop_reason(text)
    cfg = extract.find_config(text)
    if verl_console.looks_like(head):
        printed = verl_console.printed_config(path)
        if printed:
            try:
                cfg.fill_from(extract.launch_config_from_spec(batch_spec("", mapping=printed), "the printed config"))
            except UserError:
                pass
    fields = cfg.fields()
    said = [f"{k} = {fields[k]:g}" if isinstance(fields[k], float) else f"{k} = {fields[k]}"
            for k in ("prompts_per_step", "group_size", "lr") if k in fields]
    if why is None and not said:
        return err
    msg = str(err)  # names the file already
    parts = []
    if why is not None:
        parts.append(f"the run stopped before its first training step with {why[0]} (line {why[1]})")
    if said:
        parts.append("config read: " + ", ".join(said))
    out = UserError(f"{msg.rstrip('.')}; " + "; ".join(parts))
    out.path, out.line = err.path, err.line
    return out


def load(path: str | Path, fmt: str | None = None, *, prompts_per_step: int | None = None,
         group_size: int | None = None, mapping: dict[str, str] | list[str] | None = None) -> list[Run]:
    """Read any supported log at ``path`` into runs with canonical metric names.

    ``path``: a log file, a run-store directory, a tree of run-store directories (a sweep), a TensorBoard event
    directory tree, a TRL output directory, or a directory of log files (each read on its own; unreadable ones are
    skipped with a :class:`ReadWarning`). ``fmt``: one of :data:`FORMATS`, or None to detect by content.
    ``prompts_per_step``/``group_size``: P and G for logs that lack them (they override what a log states).
    ``mapping``: extra foreign -> canonical names (``--map``). Returns a list of runs (ids unique). Raises
    :class:`UserError` naming the file (and line) when nothing usable can be read.
    """
    path = Path(path)
    mapping = parse_mapping(mapping)
    if fmt is not None and fmt not in FORMATS:
        raise UserError(f"unknown --log-format {fmt!r}; one of {', '.join(FORMATS)}", field="log-format")
    if not path.exists():
        raise UserError("no such file or directory", path=str(path))
    if fmt is None and path.is_dir():
        try:
            fmt = detect_format(path)
        except UserError:
            files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
            if not files:
                raise
            configs = {c for f in files if f.suffix == ".jsonl"
                       for c in config_paths_beside(f, JSONL_CONFIG_BESIDE)[:1]}
            files = [f for f in files if f not in configs]  # read with the log beside them
            runs = []
            not_logs: list[str] = []
            unreadable: list[str] = []
            for f in files:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    try:
                        got = load(f, prompts_per_step=prompts_per_step, group_size=group_size, mapping=mapping)
                    except UserError as err:
                        unreadable.append(f"{f.name} ({clip(str(err).split(': ', 1)[-1], 100)})")
                        continue
                logs = [r for r in got if is_training_log(r)]
                if not logs:  # a result table, a note, a profile: read, but not a log of training steps
                    not_logs.append(f.name)
                    continue
                runs.extend(logs)
                for w in caught:  # the warnings of the files kept, as they were
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            skipped = ([f"{len(not_logs)} file(s) with no training log in them (no reward, loss, KL, gradient or "
                        f"evaluation series: tables, notes, profiles): {', '.join(not_logs[:6])}"
                        + (", ..." if len(not_logs) > 6 else "")] if not_logs else []) + \
                      ([f"{len(unreadable)} unreadable file(s): {'; '.join(unreadable[:4])}"
                        + ("; ..." if len(unreadable) > 4 else "")] if unreadable else [])
            if not runs:
                raise UserError(f"no training log among the {len(files)} file(s) in this directory"
                                + (f" ({'; '.join(skipped)})" if skipped else ""), path=str(path)) from None
            for msg in skipped:
                warn(f"skipped {msg}", path)
            return unique_ids(runs)
    if fmt is not None or path.is_dir():
        runs = _read_one(path, fmt, mapping)
    else:
        try:
            runs = _read_file(path, mapping)
        except UserError as err:
            raise _why_no_steps(path, err) from None
    over: dict[str, Any] = {}
    if prompts_per_step is not None:
        over["prompts_per_step"] = int(prompts_per_step)
    if group_size is not None:
        over["group_size"] = int(group_size)
    if over:
        runs = [apply_overrides(r, over) for r in runs]
    return unique_ids(runs)
