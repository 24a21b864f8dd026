"""``rlbatch inspect``: what a log (or a launch) holds, where each number came from, and what is missing.

For a log: the format, the step counters (optimizer updates and rollouts) and which was chosen, which of the log's
names became which canonical metric, where P, G, the update batch and the learning rate came from, and what the
analysis needs but could not find, with the exact ``--set`` / ``--map`` flag that supplies it.

For a launch (a verl / OpenRLHF / TRL command line or config): the batch in framework-neutral terms
(:mod:`rlbatch.batchspec`) and the learning rate the square-root rule gives for other batches.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from rlbatch.batchspec import BatchSpec, batch_spec, detect_framework, looks_like_launch
from rlbatch.errors import UserError
from rlbatch.output import print_json
from rlbatch.readers.collect import load_all
from rlbatch.readers.clocks import grows_every_record
from rlbatch.readers.common import read_text
from rlbatch.readers.generic import missing_fields
from rlbatch.readers.verl_console import printed_config
from rlbatch.train.auto import controller_summary
from rlbatch.runstore import Run

#: canonical metrics the analysis uses, and what each is for
WANTED_METRICS = {
    "eval/score": "the learning curve and samples-to-target",
    "reward/mean": "the training-reward curve (a target on it with --metric reward/mean)",
    "time/gen_s": "generation time per step (the throughput decomposition)",
    "time/step_s": "time per step (throughput, time-to-target)",
    "grad_norm/actor": "the gradient-norm scaling check",
}
_FIELD_NOTE = {
    "prompts_per_step": ("prompts_per_step", "P = ", "P and G", "batch_size"),
    "group_size": ("group_size", "G = ", "P and G"),
    "lr": ("lr", "lr "),
    "batch_size": ("batch_size", "B = "),
}
_CANDIDATES = {
    "eval/score": re.compile(r"(?i)acc|pass|score|success|correct|eval|val|win"),
    "reward/mean": re.compile(r"(?i)reward|return|score"),
    "time/gen_s": re.compile(r"(?i)gen|rollout|sampl|decod|infer"),
    "time/step_s": re.compile(r"(?i)step.*time|time.*step|duration|^time(_s|_sec)?$|iter.*time|time_per|step.*sec|"
                              r"clock|elapsed|wall"),  # a clock: suggested as time/wall_s
    "grad_norm/actor": re.compile(r"(?i)grad.*norm|norm.*grad"),
}
#: what a candidate must also be, by kind: a time is named as one, a score or reward is not a time, count, length or
#: spread; checked with the values (a time is >= 0; a score lies in [0, 1] or [0, 100])
_TIME_WORD = re.compile(r"(?i)time|second|(?<![a-z])secs?(?![a-z])|_s$|/s$|duration|elapsed")
_NOT_A_SCORE = re.compile(r"(?i)time|second|duration|elapsed|count|length|len(?![a-z])|num_|n_|tokens?|std|min|max|"
                          r"loss|lr|learning_rate|temperature|top_[pk]|size|epoch|step")
_KIND = {
    "eval/score": lambda n, x: not _NOT_A_SCORE.search(n) and x.min() >= 0 and x.max() <= 100,
    "reward/mean": lambda n, x: not _NOT_A_SCORE.search(n),
    "time/gen_s": lambda n, x: bool(_TIME_WORD.search(n)) and x.min() >= 0,
    "time/step_s": lambda n, x: bool(_TIME_WORD.search(n)) and x.min() >= 0,
    "grad_norm/actor": lambda n, x: x.min() >= 0,
}


def map_candidates(run: Run, canonical: str, limit: int = 3) -> list[str]:
    """Names the log keeps as ``raw/`` that could be ``canonical`` (``--map NAME=canonical``): named like it and of
    its kind (a time for a time, a score for a score), judged by name and by the values logged."""
    out = []
    for c in run.metrics.columns:
        if not str(c).startswith("raw/"):
            continue
        n = str(c)[4:]
        x = run.metrics[c].dropna()
        if not len(x) or not _CANDIDATES[canonical].search(n) or not _KIND[canonical](n, x):
            continue
        out.append(n)
        if len(out) == limit:
            break
    return out


def _step_why(run: Run) -> str:
    """Why the run's steps are what they are: the reader's note on its step counter, else its format's rule."""
    for note in run.notes:
        low = note.lower()
        if low.startswith(("two step counters", "steps from", "no step counter", "the log counts steps from 0",
                           "step counter")):
            return note
    fmt = str(run.meta.source_format or "")
    if fmt.startswith("verl"):
        return "verl's own step number (step:N / \"step\": N): one rollout and its updates"
    if fmt == "trl":
        return "trainer_state.json's log_history 'step' (the optimizer step)"
    if fmt == "rlbatch":
        return "the run store's optimizer step"
    return f"the log's {getattr(run.meta, 'step_source', None) or 'record order'}"


def _source(run: Run, field: str) -> str | None:
    meta = run.meta
    srcs = getattr(meta, "config_sources", None) or {}
    if field in srcs:
        return srcs[field]
    if field == "group_size" and getattr(meta, "group_size_source", None):
        return str(meta.group_size_source)
    for note in run.notes:
        low = note.lower()
        if any(low.startswith(k.lower()) for k in _FIELD_NOTE[field]) or \
                (field in ("prompts_per_step", "group_size") and re.match(r"(?i)^p = \d+, g = \d+", note)):
            return note
        if field == "lr" and low.startswith("lr:"):
            return note
    if getattr(meta, field, None) is not None:
        if field == "lr" and getattr(meta, "lr_schedule", None):
            return "the peak learning rate logged"
        return f"the {meta.source_format} reader (the log's config or launch command)"
    return None


def inspect_run(run: Run) -> dict[str, Any]:
    """One run: format, counters, metric name map, config with sources, evaluations, what is missing (with the flag
    that supplies it) and the reader's notes."""
    meta, m, ev = run.meta, run.metrics, run.evals
    rid = run.run_id
    config = {}
    for f in ("prompts_per_step", "group_size", "batch_size", "rollout_batch_size", "lr"):
        v = getattr(meta, f, None)
        own = (getattr(meta, "config_sources", None) or {}).get(f)
        config[f] = {"value": v, "source": (own or _source(run, f if f in _FIELD_NOTE else "batch_size"))
                     if v is not None else None}
    sources = dict(getattr(meta, "metric_sources", None) or {})
    raw = [c[4:] for c in m.columns if str(c).startswith("raw/")]
    missing: list[dict[str, str]] = []
    for f, flag in missing_fields(run).items():
        missing.append({"field": f, "why": "P x G is the batch of the LR rule and the retained-sample axis"
                        if f != "lr" else "the LR rule's base point", "flag": flag})
    for c, why in WANTED_METRICS.items():
        have = (c in m.columns and m[c].notna().any()) or (c == "eval/score" and len(ev) and "eval/score" in ev.columns)
        if have:
            continue
        if c == "time/step_s" and "time/wall_s" in m.columns and m["time/wall_s"].notna().any():
            continue  # a clock since the start is there: step times come from it
        cands = map_candidates(run, c)
        # a time that grows at every record from near the start is a clock since the start, not seconds per step
        # (researcher finding 3: mapped as a step time, a 2.8 h run read as 694 h): suggest it as time/wall_s
        clocks = {n for n in cands if c == "time/step_s"
                  and grows_every_record(run.metrics[f"raw/{n}"].to_numpy(dtype=float))}
        flag = " or ".join(f"--map {n}={'time/wall_s' if n in clocks else c}" for n in cands) if cands else \
            f"--map NAME={c} (no candidate in the log)"
        missing.append({"field": c, "why": why, "flag": flag})
    evs = ev.dropna(subset=["eval/score"]) if len(ev) and "eval/score" in ev.columns else None
    return {
        "run": rid,
        "format": meta.source_format,
        "steps": int(m["step"].max()) if len(m) else 0,  # the last step (a run from step 1: how many)
        "first_step": int(m["step"].min()) if len(m) else None,
        "steps_logged": int(m["step"].nunique()) if len(m) else 0,
        "log_last_step": getattr(meta, "log_last_step", None),
        "counters": {"step": getattr(meta, "step_source", None), "rollout": getattr(meta, "rollout_counter", None),
                     "why": _step_why(run)},
        "metrics": sources,
        "unmapped": raw,
        "config": config,
        "evaluations": {"points": int(len(evs)) if evs is not None else 0,
                        "last_step": int(evs["step"].iloc[-1]) if evs is not None and len(evs) else None,
                        "last_score": float(evs["eval/score"].iloc[-1]) if evs is not None and len(evs) else None},
        "samples_source": getattr(meta, "samples_source", None),
        "missing": missing,
        "notes": list(run.notes),
        # a --batch auto run (issue 55): its batch over the run and the controller's decisions
        "controller": controller_summary(run.path, m) if run.path is not None else None,
    }


def inspect_path(path: Path, *, log_format: str | None = None, mapping: list[str] | None = None,
                 sets: list[str] | None = None, batches: list[int] | None = None, rule: str = "sqrt") -> dict[str, Any]:
    """What :func:`rlbatch.readers.load` makes of ``path`` (a log, a directory of logs) or, for a launch (command
    line, verl / OpenRLHF / TRL config), its batch in framework-neutral terms with the LR rule at ``batches``.

    Returns ``{"path", "kind": "log", "runs": [inspect_run...], "warnings"}`` or ``{"path", "kind": "launch",
    "batch": {...}}``. Raises :class:`UserError` when nothing can be read.
    """
    path = Path(path)
    if path.is_file() and log_format is None and path.suffix.lower() in (".yaml", ".yml"):
        return {"path": str(path), "kind": "launch", "batch": read_launch(path).to_dict(batches, rule)}
    try:
        runs, msgs = load_all([path], log_format=log_format, mapping=mapping, sets=sets)
    except UserError:
        # no metrics in it: a launch (a command line, a config) is explained as one; else the reader's error stands
        if path.is_file() and log_format is None and _is_launch(path):
            return {"path": str(path), "kind": "launch", "batch": read_launch(path).to_dict(batches, rule)}
        raise
    return {"path": str(path), "kind": "log", "runs": [inspect_run(r) for r in runs], "warnings": msgs}


def read_launch(path: Path) -> BatchSpec:
    """:func:`rlbatch.batchspec.batch_spec` of a file: a YAML/JSON config (verl's ppo_trainer-style mapping, a TRL
    GRPOConfig YAML, an OpenRLHF flag mapping), a text holding a command line (a shell script, a README), or a verl
    console log (the resolved config it printed). Raises :class:`UserError` naming the file when it cannot be read
    or tells no framework."""
    text = read_text(path)
    mapping = None
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        try:
            if path.suffix.lower() == ".json":
                mapping = json.loads(text)
            else:
                mapping = yaml.safe_load(text)
        except Exception as err:  # noqa: BLE001 - yaml.YAMLError / JSONDecodeError, one message either way
            raise UserError(f"not a readable config ({str(err).splitlines()[0][:100]})", path=str(path)) from None
        if not isinstance(mapping, dict):
            raise UserError("expected a mapping of settings at the top level", path=str(path))
        text = ""
    elif detect_framework(text) == "verl":
        printed = printed_config(path)  # a console log of a verl run: the resolved config it printed, not defaults
        if printed is not None:
            mapping, text = printed, ""
    try:
        return batch_spec(text, where=path.name, mapping=mapping)
    except UserError as err:
        raise UserError(str(err), path=str(path)) from None


def _is_launch(path: Path) -> bool:
    suf = path.suffix.lower()
    if suf in (".yaml", ".yml"):
        return True
    try:
        text = read_text(path)[:200000]
    except UserError:
        return False
    if suf == ".json":
        try:
            obj = json.loads(text)
        except ValueError:
            return False
        return isinstance(obj, dict) and "log_history" not in obj and "cells" not in obj and \
            looks_like_launch(json.dumps(obj))
    return looks_like_launch(text)


def print_inspection(res: dict[str, Any], fmt: str) -> None:
    """Print :func:`inspect_path`'s result as text (``table`` / ``markdown``) or JSON."""
    if fmt == "json":
        print_json(res)
        return
    for w in res.get("warnings", []):
        print(f"rlbatch: warning: {w}", file=sys.stderr)
    if res["kind"] == "launch":
        _print_launch(res)
        return
    for r in res["runs"]:
        # the counter column when the log names one; else the "steps:" line says what numbers the steps (the
        # format's own step, or records numbered in file order): one statement, never two that disagree
        span = (f"{r['steps']} step(s)" if r["first_step"] in (None, 1) and r["steps_logged"] == r["steps"] else
                f"1 step logged, step {r['steps']}" if r["steps_logged"] == 1 else
                f"{r['steps_logged']} steps logged, steps {r['first_step']}-{r['steps']}")
        print(f"run {r['run']}  (format: {r['format']}; {span}"
              + (f"; step counter: {r['counters']['step']}" if r["counters"]["step"] else "")
              + (f"; rollout counter: {r['counters']['rollout']}" if r["counters"]["rollout"] else "") + ")")
        print(f"  steps: {r['counters']['why']}")
        print("  metrics read:")
        for c, n in sorted(r["metrics"].items()):
            print(f"    {c:<18} <- {n}")
        if r["unmapped"]:
            more = f" (+{len(r['unmapped']) - 12} more)" if len(r["unmapped"]) > 12 else ""
            print(f"  kept as raw/: {', '.join(r['unmapped'][:12])}{more}")
        print("  config:")
        for f, d in r["config"].items():
            if d["value"] is not None:
                print(f"    {f:<18} {d['value']!s:<10} from {d['source']}")
        e = r["evaluations"]
        print(f"  evaluations: {e['points']}" + (f", last {e['last_score']:.4g} at step {e['last_step']}"
                                                  if e["points"] else ""))
        c = r.get("controller")
        if c:
            spans = ", ".join(f"B={b} (steps {a}-{z})" if a != z else f"B={b} (step {a})" for b, a, z in c["spans"])
            ci = c["last_b_noise_ci"] or [None, None]
            bn = c["last_b_noise"]
            print(f"  batch controller (--batch auto): {c['decisions']} decisions, {c['moves']} moves; {spans}"
                  + (f"; last B_noise {'open' if bn is None else f'{bn:,.0f}'} (90% "
                     f"{'open' if ci[0] is None else f'{ci[0]:,.0f}'}-{'open' if ci[1] is None else f'{ci[1]:,.0f}'})"
                     if c["decisions"] else "") + f" ({c['file']})")
        if r["missing"]:
            print("  missing:")
            for mm in r["missing"]:
                print(f"    {mm['field']:<18} ({mm['why']}): {mm['flag']}")
        if r["notes"]:
            print("  notes:")
            for n in r["notes"]:
                print(f"    - {n}")
        print()


def _print_launch(res: dict[str, Any]) -> None:
    b = res["batch"]
    src = b["sources"]

    def line(label: str, key: str, unit: str = "") -> None:
        v = b.get(key)
        if v is None:
            return
        vs = f"{v:g}" if isinstance(v, float) else str(v)
        print(f"  {label:<34} {vs + unit:<12} {src.get(key, '')}")

    print(f"{res['path']}: a {b['framework']} launch")
    line("prompts per rollout step (P)", "prompts_per_step")
    line("responses per prompt (G)", "responses_per_prompt")
    line("responses per rollout step", "responses_per_rollout")
    line("responses per optimizer update (B)", "responses_per_update")
    line("updates per rollout batch", "updates_per_rollout")
    line("micro-batch per device", "micro_batch_per_device")
    line("devices", "devices")
    line("gradient accumulation", "grad_accumulation")
    line("learning rate", "lr")
    rule = b["lr_rule"]
    if rule["base_lr"] and rule["base_batch"]:
        print(f"  {rule['rule']} rule from B0 = {rule['base_batch']}, lr0 = {rule['base_lr']:g}:")
        for bb, lr in rule["lr"].items():
            print(f"    B = {bb:<8} lr = {lr:.4g}")
    for n in b["notes"]:
        print(f"  - {n}")


__all__ = ["inspect_path", "read_launch", "inspect_run", "print_inspection", "WANTED_METRICS"]
