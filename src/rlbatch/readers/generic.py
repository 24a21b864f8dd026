"""The general reader: any log whose format no adapter recognises, read through :mod:`rlbatch.readers.extract`.

Records are found wherever they are (JSON lines, Python dicts, ``key: value`` runs, tables, notebook outputs),
organised into training steps and evaluation points, and the run-level config (P, G, update batch, lr) is read
from config records, config cells, flags or trainer banners, each with its source in the run's notes. What could
not be found is listed with the ``--set`` that supplies it (:func:`missing_fields`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.readers import extract as X
from rlbatch.readers.common import build_run, finalize, meta_from, read_text, warn
from rlbatch.runstore import Run

#: run fields the analysis needs, and the ``--set`` that supplies each when a log lacks it
NEEDED = {
    "prompts_per_step": "--set RUN:prompts_per_step=P",
    "group_size": "--set RUN:group_size=G",
    "lr": "--set RUN:lr=LR",
}


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None,
         source_format: str = "generic") -> Run:
    """Read ``path`` (any text; a Jupyter notebook is unpacked first) into one :class:`Run`.

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
            run = _notebook_console(path, nb, user_map)
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


def _notebook_console(path: Path, nb: X.Notebook, user_map: dict[str, str] | None) -> Run | None:
    """A notebook whose outputs are a console log an adapter reads (TRL dicts, verl step lines): read by that
    adapter, then P, G and lr filled from the outputs and the config cell. None when no adapter recognises it."""
    from rlbatch.readers import _read_one, detect_format
    from rlbatch.readers.common import virtual_text

    with virtual_text(path, nb.text):
        try:
            fmt = detect_format(path)
            if fmt in ("notebook", "generic", "csv", "jsonl"):
                return None
            runs = _read_one(path, fmt, user_map or {})
        except UserError:
            return None
    run = runs[0]
    run.meta.source_format = f"notebook ({fmt})"
    run.notes.insert(0, f"Jupyter notebook: its outputs read as {fmt} console output")
    return fill_config(run, nb.text, code=nb.code)


#: config files read beside a log (``{stem}`` the log's name without suffix), first present wins; Hydra's
#: ``.hydra/config.yaml`` is what verl writes into its output directory
CONFIG_BESIDE = ("{stem}_config.yaml", "{stem}_config.yml", "{stem}.yaml", "{stem}.yml", "config.yaml", "config.yml",
                 ".hydra/config.yaml", "args.json", "hparams.yaml")


def config_beside(path: Path) -> tuple[X.ConfigFound, str] | None:
    """P, G, update batch and lr from a YAML/JSON config next to the log ``path`` (:data:`CONFIG_BESIDE`): a verl /
    OpenRLHF / TRL config through :func:`rlbatch.batchspec.batch_spec` (values it sets), any other mapping by meaning
    (:func:`rlbatch.readers.extract.config_from_mapping`). None when there is none or it cannot be read (never
    anything but YAML/JSON: ``training_args.bin`` is a pickle and is not read)."""
    import json

    import yaml

    from rlbatch.batchspec import batch_spec, detect_framework

    path = Path(path)
    for pat in CONFIG_BESIDE:
        c = path.parent / pat.format(stem=path.stem)
        if c == path or not c.is_file():
            continue
        try:
            text = read_text(c)
            data = json.loads(text) if c.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError, UserError, RecursionError) as err:
            warn(f"config beside the log not read ({str(err).splitlines()[0][:100]}): its settings are not used", c)
            continue
        if not isinstance(data, dict):
            continue
        where = c.name if c.parent == path.parent else str(c.relative_to(path.parent))
        flat = X.flatten(data)
        found = X.config_from_mapping(flat, where)
        for f in ("prompts_per_step", "group_size", "lr"):  # a key it states whose value is no count / rate
            hit = X.config_key(flat, f)
            if hit is not None and getattr(found, f) is None:
                want = "a learning rate in (0, 1)" if f == "lr" else "a positive whole number"
                warn(f"{hit[0]} = {hit[1]!r} is not {want}: not used as {f}", c)
        if detect_framework("", data):
            try:
                spec = batch_spec("", where=where, mapping=data)
            except UserError:
                spec = None
            if spec is not None:
                found = X.launch_config_from_spec(spec, where)
        return found, where
    return None


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


def missing_fields(run: Run) -> dict[str, str]:
    """Fields the analysis needs that ``run`` lacks -> the ``--set`` that supplies each (run id filled in)."""
    out = {}
    for f, hint in NEEDED.items():
        if getattr(run.meta, f, None) is None:
            out[f] = hint.replace("RUN", run.run_id)
    return out


__all__ = ["read", "fill_config", "missing_fields", "NEEDED"]
