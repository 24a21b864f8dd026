"""JSON-lines logs: verl's file logger (``{"step": N, "data": {...}}`` per line) and generic JSONL (one flat or nested
object per line; nested keys are joined with ``/``).

A line that is not JSON is skipped with a warning naming file and line (a truncated last line says so); a line of
another schema than the first (mixed schemas) is read as a flat record, with one warning.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlbatch.batchspec import flatten
from rlbatch.errors import UserError
from rlbatch.readers import extract as X
from rlbatch.readers.generic import JSONL_CONFIG_BESIDE, read_config_beside
from rlbatch.readers.linescan import lost_counter, truncated_dict
from rlbatch.readers.common import build_run, json_reason, meta_from, read_text, to_count, to_float, warn
from rlbatch.runstore import Run


def is_verl_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "step" in obj and isinstance(obj.get("data"), dict)


def _document(text: str, path: Path) -> tuple[list[X.Record], dict[str, Any], str] | None:
    """Records of a whole-file JSON document (a list of records, an object of columns, an object holding records:
    :func:`rlbatch.readers.extract.json_document_records`), or None when ``text`` is JSON lines. Raises
    :class:`UserError` for one JSON object with no records in it (a config or summary file)."""
    head = text.lstrip()
    if not head.startswith(("{", "[")):
        return None
    try:
        whole = json.loads(text)  # Python's json reads the NaN / Infinity its own json.dump writes
    except (ValueError, RecursionError):
        return None  # JSON lines (several values), or broken: read line by line
    if isinstance(whole, dict) and "\n" not in head.strip() and not any(
            isinstance(v, list) and len(v) >= 2 for v in whole.values()) and X.summary_export(whole) is None:
        return None  # one record on one line (a summary export on one line is read as one, below)
    got = X.json_document_records(whole)
    if got is None or not got[0]:
        if isinstance(whole, dict):
            raise UserError("one JSON object over several lines with no list of records or columns in it: a config "
                            "or summary file, not a log (a config beside a log is read with it)", path=str(path))
        return None
    return got


def read(path: str | Path, *, fmt: str = "jsonl", run_id: str | None = None,
         user_map: dict[str, str] | None = None, meta: dict[str, Any] | None = None) -> Run:
    """Read a JSONL log holding one run; the first of :func:`read_all` (kept for callers that want one)."""
    return read_all(path, fmt=fmt, run_id=run_id, user_map=user_map, meta=meta)[0]


def read_all(path: str | Path, *, fmt: str = "jsonl", run_id: str | None = None,
             user_map: dict[str, str] | None = None, meta: dict[str, Any] | None = None) -> list[Run]:
    """Read a JSON-lines log (``fmt`` = ``verl-jsonl`` or ``jsonl``), or a whole-file JSON document of records or
    columns, into its runs: one, or one per run when the file holds several
    (:func:`rlbatch.readers.extract.split_records`: a run-name field, a step counter that starts over, a final
    summary followed by more records), each named by its run name or ``<file>-run<k>``.

    Raises :class:`UserError` naming the file when no line holds a training record.
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    mixed_warned = False
    records: list[X.Record] = []
    text = read_text(path)
    doc = _document(text, path) if fmt == "jsonl" else None
    doc_config: dict[str, Any] = {}
    doc_note = None
    if doc is not None:
        records, doc_config, how = doc
        doc_note = f"read as {how}"
    all_lines = [] if doc is not None else text.split("\n")
    n = len(all_lines)
    last = max((i for i, line in enumerate(all_lines, 1) if line.strip()), default=0)
    cut_note = None
    for i, line in enumerate(all_lines, 1):
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError) as err:  # JSONDecodeError; also ints over 4300 digits, deep nesting
            cut = _cut_record(s, i, records) if i == last and fmt == "jsonl" else None
            if cut is not None:
                rec, cut_note = cut
                warn(cut_note, path, i)
                if rec is not None:
                    records.append(rec)
                continue
            if i == n and not text.endswith("\n"):
                warn("truncated last line (no line end, not valid JSON): skipped", path, i)
            else:
                warn(f"not valid JSON ({json_reason(err)}): line skipped", path, i)
            continue
        if not isinstance(obj, dict):
            warn("not a JSON object: line skipped", path, i)
            continue
        if fmt == "verl-jsonl":
            if is_verl_record(obj):
                rec = flatten(obj["data"], "/")
                rec["step"] = obj["step"]
            else:
                if not mixed_warned:
                    warn("record not in verl's {\"step\": N, \"data\": {...}} form (mixed schemas); read as a flat "
                         "record", path, i)
                    mixed_warned = True
                rec = flatten(obj, "/")
        else:
            records.append(X.json_record(obj, i))
            continue
        rows.append(rec)
        lines.append(i)
    if fmt == "verl-jsonl":
        if not rows:
            raise UserError("no JSON records found", path=str(path))
        return [_verl_run(path, rows, lines, run_id, user_map, meta)]
    if not records:
        raise UserError("no JSON records found", path=str(path))
    parts = X.split_records(records)
    stem = run_id or path.stem
    runs: list[Run] = []
    errors: list[str] = []
    for k, part in enumerate(parts, 1):
        rid = stem if len(parts) == 1 else (part.name if part.name else f"{stem}-run{k}")
        notes = [doc_note] if doc_note else []
        if cut_note and k == len(parts):
            notes.append(f"line {last}: {cut_note}")
        if len(parts) > 1:
            notes.insert(0, f"run {k} of {len(parts)} in {path.name}: {part.why}")
        try:
            runs.append(_records_run(path, part.records, rid, user_map, meta, notes, doc_config))
        except UserError as err:
            if len(parts) == 1:
                raise
            errors.append(f"run {k} ({rid}): {err}")
    for e in errors:
        warn(f"skipped {e}", path)
    if not runs:
        raise UserError("no readable run: " + "; ".join(errors), path=str(path))
    return runs


def _cut_record(line: str, lineno: int, before: list[X.Record]) -> tuple[X.Record | None, str] | None:
    """The last line of a JSON-lines file cut off by the end of the text (an excerpt, a log copied while written):
    ``(record of its complete fields, note)``, ``(None, note)`` when it was cut before the step counter every other
    record has (it is dropped), or None when the line is not a cut JSON object (it is skipped as invalid)."""
    if not line.startswith("{") or line.endswith("}"):
        return None
    d = truncated_dict(line)
    if d is None:
        return None
    rec = X.json_record(d, lineno)
    rec.truncated = True
    lost = lost_counter([r.values for r in before], rec.values)
    if lost:
        return None, f"the last record is cut off before its step counter {lost!r} (the text ends inside it): dropped"
    return rec, (f"the last record is cut off (the text ends inside it): its {len(d)} complete fields kept, the field "
                 "cut in half dropped")


def _records_run(path: Path, records: list[X.Record], rid: str, user_map: dict[str, str] | None,
                 meta: dict[str, Any] | None, notes: list[str], doc_config: dict[str, Any]) -> Run:
    """One run from generic JSON records: record kinds, config records, counters and evaluation names
    (:func:`rlbatch.readers.extract.organize`), P/G/lr from config records, the records themselves and a config
    beside the file."""
    extra = dict(meta or {})
    org = X.organize(records, user_map)
    rows, lines = list(org.rows), list(org.lines)
    notes = notes + org.notes
    fin = org.closing_step()
    if fin:
        rows.append({"step": fin, "train_runtime": org.summary.get("train_runtime")})
        lines.append(0)
        notes.append(f"the final summary closes the run at step {fin}")
    config = {**doc_config, **org.config}
    if config or org.batch:
        cfg = X.find_config("", mapping=config) if config else X.ConfigFound()
        cfg.fill_from(org.batch)
        for k, v in cfg.fields().items():
            extra.setdefault(k, v)
        srcs = cfg.field_sources()
        notes += [f"{f}: {src}" for f, src in srcs.items()]
        if srcs:
            extra.setdefault("config_sources", srcs)
    if org.step_counter:
        extra.setdefault("step_source", org.step_counter)
    if not rows:
        raise UserError("no JSON records found", path=str(path))
    for k, v in config_beside(path, rows, notes).items():
        extra.setdefault(k, v)
    fields = meta_from(rid, **extra)
    run = build_run(rows, path=path, source_format="jsonl", meta_fields=fields, lines=lines, user_map=user_map,
                    notes=notes)
    org.restore_sources(run)
    return run


def _verl_run(path: Path, rows: list[dict[str, Any]], lines: list[int], run_id: str | None,
              user_map: dict[str, str] | None, meta: dict[str, Any] | None) -> Run:
    """verl's file logger: one run; the algorithm (and PPO's G = 1) guessed from the metrics where not given."""
    notes: list[str] = []
    fields = meta_from(run_id or path.stem, **dict(meta or {}))
    fields.setdefault("backend", "verl")
    if "algorithm" not in fields:
        critic = any("critic/vf_loss" in r or "critic/grad_norm" in r for r in rows[:5])
        fields["algorithm"] = "ppo" if critic else "grpo"
        notes.append(f"algorithm not in the log; guessed {fields['algorithm']!r} from the metrics"
                     + (" (critic metrics)" if critic else ""))
        if critic and "group_size" not in fields:
            fields["group_size"] = 1
            fields["group_size_source"] = "verl default"
            notes.append("group_size: rollout.n not in the log; verl's default n = 1 (PPO) assumed, flagged as a "
                         "default (--set RUN:group_size=... if the run set it)")
    return build_run(rows, path=path, source_format="verl-jsonl", meta_fields=fields, lines=lines,
                     user_map=user_map, notes=notes)


_LR_KEYS = ("learning_rate", "lr", "actor_lr")
_MODEL_KEYS = ("model_name", "model", "base_model", "model_name_or_path")


def config_beside(path: Path, rows: list[dict[str, Any]], notes: list[str]) -> dict[str, Any]:
    """P, G, lr and model from a config JSON next to a generic JSONL log (``run_metrics.jsonl`` ->
    ``run_config.json``, ``run_metrics_config.json`` or ``config.json`` in the same folder:
    :data:`rlbatch.readers.generic.JSONL_CONFIG_BESIDE`, read by :func:`rlbatch.readers.generic.read_config_beside`),
    or {}.

    ``group_size`` is ambiguous across loops: in Tinker's cookbook it is the completions per prompt (``batch_size``
    prompts per step), in others the number of prompts, each getting ``batch_size / group_size`` completions. The
    log decides: a per-step ``groups_total`` equal to ``group_size`` means group_size counts prompts (P =
    group_size, G = batch_size / group_size); equal to ``batch_size`` means the cookbook's meaning (P = batch_size,
    G = group_size). Without such a counter P and G stay unknown (noted, with the ``--set`` hint); lr and model are
    read either way. (This is why these names are not read by :func:`rlbatch.readers.generic.config_beside`, which
    takes ``group_size`` at its word.)"""
    cf = read_config_beside(path, JSONL_CONFIG_BESIDE)
    if cf is None:
        return {}
    cfg_path, cfg = cf.path, cf.data
    cfg = flatten(cfg, "/")
    out: dict[str, Any] = {}
    lr = next((to_float(cfg[k]) for k in _LR_KEYS if k in cfg and to_float(cfg[k])), None)
    if lr is not None and math.isfinite(lr) and lr > 0:
        out["lr"] = lr
    model = next((cfg[k] for k in _MODEL_KEYS if isinstance(cfg.get(k), str) and cfg[k]), None)
    if model:
        out["model"] = model
    gs, bs = to_count(cfg.get("group_size")), to_count(cfg.get("batch_size"))
    p, g = to_count(cfg.get("prompts_per_step")), to_count(cfg.get("n_samples_per_prompt"))
    totals = {to_count(r.get("groups_total")) for r in rows if r.get("groups_total") is not None} - {None}
    how = ""
    if p and g:
        how = "prompts_per_step and n_samples_per_prompt"
    elif gs and bs and totals == {gs} and bs % gs == 0 and gs != bs:
        p, g = gs, bs // gs
        how = (f"group_size = {gs} counts prompts here (the log's groups_total per step is {gs}); each prompt gets "
               f"batch_size / group_size = {bs} / {gs} = {g} completions")
    elif gs and bs and totals == {bs}:
        p, g = bs, gs
        how = f"batch_size = {bs} prompts (the log's groups_total), group_size = {gs} completions per prompt"
    if p and g:
        out["prompts_per_step"], out["group_size"] = p, g
        notes.append(f"P = {p}, G = {g} from {cfg_path.name}: {how}")
    elif gs or bs:
        notes.append(f"{cfg_path.name} gives batch_size = {bs}, group_size = {gs}, but whether group_size counts "
                     "prompts or completions per prompt differs between loops and the log does not say (no "
                     "groups_total): P and G left unknown (use --set RUN:prompts_per_step=... --set "
                     "RUN:group_size=...)")
    if out.get("lr"):
        notes.append(f"lr {out['lr']:.3g} from {cfg_path.name}")
    return out
