"""The general reader: any log whose format no adapter recognises, read through :mod:`rlbatch.readers.extract`.

Records are found wherever they are (JSON lines, Python dicts, ``key: value`` runs, tables, notebook outputs),
organised into training steps and evaluation points, and the run-level config (P, G, update batch, lr) is read
from config records, config cells, flags or trainer banners, each with its source in the run's notes. What could
not be found is listed with the ``--set`` that supplies it (:func:`missing_fields`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import yaml

from rlbatch.batchspec import batch_spec, detect_framework, flatten
from rlbatch.errors import UserError
from rlbatch.readers import extract as X
from rlbatch.readers.common import build_run, finalize, json_reason, meta_from, read_text, warn
from rlbatch.runstore import Run

#: run fields the analysis needs, and the ``--set`` that supplies each when a log lacks it
NEEDED = {
    "prompts_per_step": "--set RUN:prompts_per_step=P",
    "group_size": "--set RUN:group_size=G",
    "lr": "--set RUN:lr=LR",
}


#: reads a text (a notebook's outputs) standing for ``path`` with the console adapter it matches, with a name map:
#: ``(format, run)`` or None (:func:`rlbatch.readers.read_console_text`)
ConsoleReader = Callable[[Path, str, dict[str, str]], "tuple[str, Run] | None"]


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None,
         source_format: str = "generic", console: ConsoleReader | None = None) -> Run:
    """Read ``path`` (any text; a Jupyter notebook is unpacked first) into one :class:`Run`. ``console``: how a
    notebook whose outputs are a known console log is read (the dispatcher's :func:`rlbatch.readers.read_console_text`);
    None reads every notebook through the general layer.

    Raises :class:`UserError` naming the file when no record with a step and a training metric is found.
    """
    path = Path(path)
    raw = read_text(path)
    code: list[str] = []
    tables: list[list[X.Record]] = []
    notes: list[str] = []
    if X.is_notebook(raw):
        try:
            nb = X.notebook_text(raw)
        except (ValueError, RecursionError):
            raise UserError("not a readable Jupyter notebook (invalid JSON)", path=str(path)) from None
        text, code, tables = nb.text, nb.code, nb.tables
        source_format = "notebook"
        notes.append("Jupyter notebook: read its stream outputs, HTML tables and config cell")
        if not any(len(t) > 1 for t in tables):  # no table of steps: the outputs may be a known console format
            run = _notebook_console(path, nb, user_map, console) if console is not None else None
            if run is not None:
                return run
    else:
        text = raw
    text = X.clean(text)
    lines = text.split("\n")
    records = X.scan(lines)
    for t in tables:
        records.extend(t)
    org = X.organize(records, user_map)
    if not org.rows:
        raise UserError("no records with a step and training metrics found (JSON lines, Python dicts, key: value "
                        "runs, tables); give --log-format if this is a known format", path=str(path))
    cfg = X.find_config(text, code=code, mapping=org.config)
    cfg.fill_from(org.batch)
    notes += org.notes
    fields: dict[str, Any] = dict(cfg.fields())
    srcs = cfg.field_sources()
    notes += [f"{f}: {src}" for f, src in srcs.items()]
    rows = org.rows
    fin = org.closing_step()
    if fin:
        rows = rows + [{"step": fin, "train_runtime": org.summary.get("train_runtime")}]
        notes.append(f"the final summary closes the run at step {fin}")
    meta = meta_from(run_id or path.stem, step_source=org.step_counter, rollout_counter=org.rollout_counter,
                     config_sources=srcs or None, **fields)
    run = build_run(rows, path=path, source_format=source_format, meta_fields=meta, notes=notes,
                    lines=org.lines + [0] * (len(rows) - len(org.lines)), user_map=user_map)
    org.restore_sources(run)
    return run


def _notebook_console(path: Path, nb: X.Notebook, user_map: dict[str, str] | None,
                      console: ConsoleReader) -> Run | None:
    """A notebook whose outputs are a console log an adapter reads (TRL dicts, verl step lines): read by that
    adapter (through ``console``), then P, G and lr filled from the outputs and the config cell. None when no
    adapter recognises it."""
    got = console(path, nb.text, user_map or {})
    if got is None:
        return None
    fmt, run = got
    run.meta.source_format = f"notebook ({fmt})"
    run.notes.insert(0, f"Jupyter notebook: its outputs read as {fmt} console output")
    return fill_config(run, nb.text, code=nb.code)


#: config files read beside a log (``{stem}`` the log's name without suffix), first readable wins; Hydra's
#: ``.hydra/config.yaml`` is what verl writes into its output directory
CONFIG_BESIDE = ("{stem}_config.yaml", "{stem}_config.yml", "{stem}.yaml", "{stem}.yml", "config.yaml", "config.yml",
                 ".hydra/config.yaml", "args.json", "hparams.yaml")
#: the config JSON a generic JSONL loop writes beside its metrics (``run_metrics.jsonl`` -> ``run_config.json``;
#: ``{base}`` the stem without a trailing ``metrics``, else the stem and ``_``); read by :mod:`.jsonl`, whose
#: ``group_size`` needs the log to tell its meaning (:func:`rlbatch.readers.jsonl.config_beside`)
JSONL_CONFIG_BESIDE = ("{stem}_config.json", "{stem}.config.json", "{base}_config.json", "{base}config.json",
                       "config.json")


@dataclass(frozen=True)
class ConfigFile:
    """A config file read beside a log: its ``path``, ``where`` (its name relative to the log's folder) and
    ``data`` (the parsed top-level mapping)."""

    path: Path
    where: str
    data: dict[str, Any]


def config_paths_beside(path: Path, names: tuple[str, ...] = CONFIG_BESIDE) -> list[Path]:
    """The files named by ``names`` (patterns with ``{stem}`` / ``{base}``) that exist next to the log ``path``,
    in the order of ``names``."""
    path = Path(path)
    stem = path.stem
    base = stem[: -len("metrics")] if stem.endswith("metrics") else stem + "_"
    out: list[Path] = []
    for pat in names:
        c = path.parent / pat.format(stem=stem, base=base)
        if c != path and c.is_file() and c not in out:
            out.append(c)
    return out


def read_config_beside(path: Path, names: tuple[str, ...] = CONFIG_BESIDE) -> ConfigFile | None:
    """The first config next to the log ``path`` (:func:`config_paths_beside`) that parses as a mapping: JSON for
    ``.json``, YAML (``yaml.safe_load``) otherwise; never anything else (``training_args.bin`` is a pickle and is
    not read). A file that does not parse is skipped with one warning naming it. None when there is none."""
    path = Path(path)
    for c in config_paths_beside(path, names):
        try:
            text = read_text(c)
            data = json.loads(text) if c.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError, UserError, RecursionError) as err:
            why = json_reason(err) if isinstance(err, (ValueError, RecursionError)) and c.suffix == ".json" \
                else str(err).splitlines()[0][:100]
            warn(f"config beside the log not read ({why}): its settings are not used", c)
            continue
        if isinstance(data, dict):
            return ConfigFile(c, c.name if c.parent == path.parent else str(c.relative_to(path.parent)), data)
    return None


def config_beside(path: Path) -> tuple[X.ConfigFound, str] | None:
    """P, G, update batch and lr from a YAML/JSON config next to the log ``path`` (:func:`read_config_beside` over
    :data:`CONFIG_BESIDE`): a verl / OpenRLHF / TRL config through :func:`rlbatch.batchspec.batch_spec` (values it
    sets), any other mapping by meaning (:func:`rlbatch.readers.extract.config_from_mapping`). None when there is
    none or it cannot be read."""
    cf = read_config_beside(path)
    if cf is None:
        return None
    flat = flatten(cf.data, "/", drop_lists=True)
    found = X.config_from_mapping(flat, cf.where)
    for f in ("prompts_per_step", "group_size", "lr"):  # a key it states whose value is no count / rate
        hit = X.config_key(flat, f)
        if hit is not None and getattr(found, f) is None:
            want = "a learning rate in (0, 1)" if f == "lr" else "a positive whole number"
            warn(f"{hit[0]} = {hit[1]!r} is not {want}: not used as {f}", cf.path)
    if detect_framework("", cf.data):
        try:
            spec = batch_spec("", where=cf.where, mapping=cf.data)
        except UserError:
            spec = None
        if spec is not None:
            found = X.launch_config_from_spec(spec, cf.where)
    return found, cf.where


def fill_config(run: Run, text: str, *, code: list[str] | None = None, path: Path | None = None) -> Run:
    """Fill P, G and lr a format reader left unknown from what :func:`rlbatch.readers.extract.find_config` finds
    in ``text`` (the same file) and, failing that, a config file beside the log (:func:`config_beside`), noting the
    source of each; fields the reader set are kept."""
    meta = run.meta
    cfg = X.find_config(text, code=code or [])
    if path is not None and not (cfg.prompts_per_step and cfg.group_size and cfg.lr):
        side = config_beside(path)
        if side is not None:
            found, _ = side
            for f in ("prompts_per_step", "group_size", "lr", "update_batch", "batch_size"):
                if getattr(cfg, f) is None and getattr(found, f) is not None:
                    setattr(cfg, f, getattr(found, f))
                    if f in found.sources:
                        cfg.sources[f] = found.sources[f]
    used: dict[str, str] = {}
    if meta.prompts_per_step is None and meta.group_size is None and cfg.prompts_per_step and cfg.group_size:
        if meta.batch_size is None or meta.batch_size == cfg.prompts_per_step * cfg.group_size:
            meta.prompts_per_step, meta.group_size = cfg.prompts_per_step, cfg.group_size
            meta.batch_size = cfg.prompts_per_step * cfg.group_size
            used["prompts_per_step"] = cfg.sources["prompts_per_step"]
            used["group_size"] = cfg.sources["group_size"]
            used["batch_size"] = f"P x G = {cfg.prompts_per_step} x {cfg.group_size}"
    lr_logged = meta.lr is not None and (getattr(meta, "lr_schedule", None) or {}).get("peak") == meta.lr
    if cfg.lr and (meta.lr is None or (lr_logged and abs(cfg.lr - meta.lr) <= 0.02 * cfg.lr)):
        meta.lr = cfg.lr  # the configured value where the log states one (the logged peak is its rounding)
        used["lr"] = cfg.sources["lr"]
    if used:
        for f, src in used.items():
            run.notes.append(f"{f}: {src}")
        srcs = dict(getattr(meta, "config_sources", None) or {})
        srcs.update(used)
        meta.config_sources = srcs
        finalize(run)
    return run


def fill_final_eval(run: Run, text: str) -> Run:
    """An evaluation score printed once after training (``Test accuracy: 26.7%``;
    :func:`rlbatch.readers.extract.final_eval`) as an evaluation point at the last step, when the run has no
    evaluation there yet; noted with the line it came from."""
    src = (getattr(run.meta, "metric_sources", None) or {}).get("reward/mean")
    fe = X.final_eval(text, (str(src),) if src else ())
    m, ev = run.metrics, run.evals
    if fe is None or not len(m):
        return run
    last = int(m["step"].max())
    if len(ev) and "eval/score" in ev.columns and (ev["step"] >= last).any():
        return run
    row = pd.DataFrame([{"step": last, "eval/score": fe.score}])
    run.evals = pd.concat([ev, row], ignore_index=True) if len(ev) else row
    run.notes.append(f"eval/score: {fe.name!r} printed after training (line {fe.line}) = {fe.score:g}"
                     + (" (printed in percent)" if fe.percent else "") + f", placed at the last step {last}")
    finalize(run)
    return run


def missing_fields(run: Run) -> dict[str, str]:
    """Fields the analysis needs that ``run`` lacks -> the ``--set`` that supplies each (run id filled in)."""
    out = {}
    for f, hint in NEEDED.items():
        if getattr(run.meta, f, None) is None:
            out[f] = hint.replace("RUN", run.run_id)
    return out


__all__ = ["read", "fill_config", "fill_final_eval", "missing_fields", "NEEDED", "CONFIG_BESIDE", "JSONL_CONFIG_BESIDE", "ConfigFile",
           "config_paths_beside", "read_config_beside", "config_beside"]
