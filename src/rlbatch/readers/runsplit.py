"""Runs in one file and how they ended, the last stage (:mod:`rlbatch.readers.extract` gives the pipeline): records
split into runs by a run-name field or a step counter that starts over (:func:`split_records`), text split at
launch commands (:func:`split_runs`), JSON documents holding records (:func:`json_document_records`), a score
printed once after training (:func:`final_eval`) and why a run stopped (:func:`stop_reason`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from rlbatch.readers.common import to_float
from rlbatch.readers.linescan import NUM, Record, clean, json_record
from rlbatch.readers.records import SUMMARY_KEYS, has_training, counters_in


#: fields that name the run a record belongs to (a file holding several runs: a sweep's records appended to one
#: JSONL, a W&B long export, a CSV with one block per run)
RUN_FIELDS = ("run_name", "run_id", "run", "experiment", "experiment_name", "exp_name", "exp_id", "trial",
              "trial_id", "trial_name", "wandb_run", "run_tag", "config_name", "name", "display_name")


@dataclass
class RunPart:
    """One run of a file that holds several: ``name`` (the run's own name where the file gives one, else None),
    its ``records`` and ``why`` it was split off (for the run's notes)."""

    name: str | None
    records: list[Record]
    why: str


def _step_of(r: Record, counter: str | None) -> float | None:
    if counter is not None and counter in r.values:
        return to_float(r.values[counter])
    return float(r.label) if r.label is not None else None


def split_records(records: list[Record]) -> list[RunPart]:
    """The runs a file's records hold, in file order (one part when it holds one).

    - a run-name field (:data:`RUN_FIELDS`: ``run_name``, ``run_id``, ...) with two or more values in most records:
      one run per value (records without it join the run before them); the field is dropped from the values;
    - else a step counter that starts over (falls back to or below the step the current run began at) starts a new
      run; falling back to a later step is a resumed run re-logging steps, not a new one;
    - else a final summary (``train_runtime``...) followed by more training records ends a run (TRL's
      ``log_history`` of two ``trainer.train()`` calls).
    """
    if not records:
        return [RunPart(None, records, "")]
    for f in RUN_FIELDS:
        named = [r for r in records if isinstance(r.values.get(f), (str, int)) and not isinstance(r.values.get(f), bool)
                 and str(r.values.get(f)).strip()]
        distinct = list(dict.fromkeys(str(r.values[f]).strip() for r in named))
        if len(distinct) < 2 or len(named) * 2 < len(records) or len(distinct) * 2 > len(named):
            continue
        groups: dict[str, list[Record]] = {d: [] for d in distinct}
        current = distinct[0]
        for r in records:
            v = r.values.get(f)
            if v is not None and str(v).strip() in groups:
                current = str(v).strip()
            vals = {k: x for k, x in r.values.items() if k != f}
            groups[current].append(Record(r.line, vals, r.form, r.kind, r.label, r.label_counter))
        return [RunPart(d, recs, f"the records whose {f!r} is {d!r}") for d, recs in groups.items()]
    opt, roll = counters_in(r.values for r in records)
    counter = opt or roll
    repeats_ok = not _rows_per_step(records, counter)
    parts: list[list[Record]] = [[]]
    first = top = None
    for r in records:
        s = _step_of(r, counter)
        if s is not None:
            back = top is not None and s < top and first is not None and s <= first and \
                sum(has_training(x.values) for x in parts[-1]) >= 2
            # a run of one record: the same first step again, logging a training metric it already has, in a
            # file that never logs two such records for one step otherwise (issue 45: fifteen runs in one file)
            again = repeats_ok and top is not None and s == top == first and has_training(r.values) and any(
                _step_of(x, counter) == s and _same_metric(x, r) for x in parts[-1])
            if back or again:
                parts.append([])
                first = top = None
            first = s if first is None else first
            top = s if top is None else max(top, s)
        parts[-1].append(r)
    if len(parts) > 1:
        what = f"the step counter {counter!r}" if counter else "the step numbers"
        return [RunPart(None, p, f"{what} starts over at line {p[0].line}" if i else
                        f"the records before {what} starts over at line {parts[1][0].line}")
                for i, p in enumerate(parts)]
    parts = [[]]
    for r in records:
        parts[-1].append(r)
        last = {k.rsplit("/", 1)[-1] for k in r.values}
        if last & set(SUMMARY_KEYS) and not has_training({k: v for k, v in r.values.items()
                                                          if k.rsplit("/", 1)[-1] not in SUMMARY_KEYS}):
            parts.append([])
    parts = [p for p in parts if p]
    if len(parts) > 1 and all(sum(has_training(x.values) and not (
            {k.rsplit("/", 1)[-1] for k in x.values} & set(SUMMARY_KEYS)) for x in p) for p in parts):
        return [RunPart(None, p, f"a final summary ends a run before line {parts[i + 1][0].line}"
                        if i + 1 < len(parts) else "the last run after a final summary")
                for i, p in enumerate(parts)]
    return [RunPart(None, records, "")]


def _same_metric(a: Record, b: Record) -> bool:
    """True when two records log a training metric under the same name (the step logged twice)."""
    common = set(a.values) & set(b.values)
    return has_training({k: b.values[k] for k in common})


def _rows_per_step(records: list[Record], counter: str | None) -> bool:
    """True when the file logs several training records with the same fields for one step somewhere past a run's
    first step (one row per optimizer step or micro-batch under one step number): there a repeated step is not a
    new run."""
    prev: Record | None = None
    low = None
    for r in records:
        s = _step_of(r, counter)
        if s is None or not has_training(r.values):
            continue
        if prev is not None:
            ps = _step_of(prev, counter)
            if s == ps and _same_metric(prev, r) and low is not None and s > low:
                return True
            if ps is not None and s < ps:
                low = s
        low = s if low is None else min(low, s)
        prev = r
    return False


def _singular(name: str) -> str:
    """A column list's name as one record's name: ``losses`` -> ``loss``, ``accuracies`` -> ``accuracy``,
    ``val_rewards`` -> ``val_reward``, ``steps`` -> ``step``."""
    last = name.rsplit("/", 1)
    tail = last[-1]
    if tail.endswith("sses"):
        tail = tail[:-2]
    elif tail.endswith("ies"):
        tail = tail[:-3] + "y"
    elif tail.endswith("s") and not tail.endswith(("ss", "_s", "us", "is")):
        tail = tail[:-1]
    return (last[0] + "/" + tail) if len(last) == 2 else tail


#: a count of updates in a summary export (``num_batches_visited``, ``steps_done``, ``n_updates``): its last value is
#: the step the summary was written at
#: (a word of work done is required: a bare ``num_steps`` or ``steps`` is as often the configured total)
SUMMARY_COUNTER = re.compile(r"(?i)^(?:num_|n_)?(?:batches|steps|updates|iterations|iters)"
                             r"_(?:visited|seen|done|completed|taken|trained)$")


def summary_export(obj: Any) -> dict[str, Any] | None:
    """The scalar values of a tracker's summary export with no history (``{"summary": {...}, "rows": []}``: an
    object with a ``summary`` object of two or more numbers and no non-empty list of records), or None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("summary"), dict):
        return None
    if any(isinstance(v, list) and v and all(isinstance(o, dict) for o in v[:50]) for v in obj.values()):
        return None
    vals = {k: v for k, v in obj["summary"].items() if _scalar(v)}
    return vals if len(vals) >= 2 else None


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def json_document_records(obj: Any) -> tuple[list[Record], dict[str, Any], str] | None:
    """Records from a whole-file JSON document that is not one record per line, or None:

    - a list of objects (``[{"step": 1, ...}, ...]``);
    - an object holding such a list (``{"history": [...], "config": {...}}``; the other scalars and objects are its
      config);
    - an object of columns (``{"steps": [...], "losses": [...], "val_rewards": [...]}``): the lists of the most
      common length are the rows (names singular: ``losses`` -> ``loss``); a ``null`` is a missing value;
    - a summary export with no history (``{"summary": {...}, "rows": []}``): one record of the last values, at the
      step a count of updates in it gives (:data:`SUMMARY_COUNTER`), else step 1.

    Returns ``(records, config, how)``; ``how`` names the shape for the run's notes."""
    def recs(items: list[Any]) -> list[Record]:
        return [json_record(o, i + 1) for i, o in enumerate(items) if isinstance(o, dict)]

    if isinstance(obj, list):
        if sum(isinstance(o, dict) for o in obj) >= 1 and all(isinstance(o, dict) for o in obj[:50]):
            return recs(obj), {}, "a JSON list of records"
        return None
    if not isinstance(obj, dict):
        return None
    lists = {k: v for k, v in obj.items() if isinstance(v, list) and v and all(isinstance(o, dict) for o in v[:50])}
    vals = summary_export(obj)
    if vals is not None:
        # a tracker's summary export with an empty (or no) history (W&B monitor scripts write {"summary": {...},
        # "rows": []}): the last values as one record, at the step it states (a step counter the readers know,
        # e.g. _step or global_step), else at its count of work done (num_batches_visited), else step 1; said so
        from rlbatch.readers.names import FOREIGN_NAMES

        stated = next((k for k in vals if k in FOREIGN_NAMES["step"]), None)
        ctr = None if stated else next((k for k in vals if SUMMARY_COUNTER.match(k) and float(vals[k]).is_integer()),
                                        None)
        rec = Record(1, {k: v for k, v in vals.items() if k != ctr}, "json-summary", kind="train",
                     label=int(vals[ctr]) if ctr else None, label_counter=ctr)
        cfg = {k: v for k, v in obj.items() if k != "summary" and not isinstance(v, (list, dict))}
        at = (f" at the step it states ({stated} = {vals[stated]:g})" if stated else
              f" at step {int(vals[ctr])} (its count {ctr})" if ctr else " (no step in it: step 1)")
        return [rec], cfg, "a summary export with no history: the last values only, one record" + at + \
            "; no curve to read"
    if lists:
        key = max(lists, key=lambda k: len(lists[k]))
        if len(lists[key]) >= 2 or len(lists) == 1:
            cfg = {k: v for k, v in obj.items() if k != key and not isinstance(v, list)}
            return recs(lists[key]), cfg, f"the records under {key!r}"
    cols = {k: v for k, v in obj.items() if isinstance(v, list) and len(v) >= 2 and all(
        (isinstance(x, (int, float)) and not isinstance(x, bool)) or x is None for x in v)}
    if len(cols) < 2:
        return None
    lengths: dict[int, int] = {}
    for v in cols.values():
        lengths[len(v)] = lengths.get(len(v), 0) + 1
    n = max(lengths, key=lambda k: (lengths[k], k))
    use = {k: v for k, v in cols.items() if len(v) == n}
    if len(use) < 2:
        return None
    names = {k: _singular(k) for k in use}
    out = []
    for i in range(n):
        vals = {names[k]: v[i] for k, v in use.items() if v[i] is not None}
        out.append(Record(i + 1, vals, "json-columns"))
    cfg = {k: v for k, v in obj.items() if not isinstance(v, (list, dict))}
    skipped = [k for k in cols if k not in use]
    how = f"a JSON object of columns ({', '.join(use)}; one row per index)"
    if skipped:
        how += f"; lists of another length left out: {', '.join(skipped)}"
    return out, cfg, how


#: lines that start a new run: a launch command, a trainer banner, a printed config dict
RUN_START = re.compile(r"^\s*(?:\+\s+)?(?:python3?|torchrun|accelerate|deepspeed|swift|bash)\b.*"
                       r"(?:verl\.trainer|train|grpo|ppo|rlhf|sft)|==\(\(====\)\)==\s+Unsloth - |"
                       r"\*\*\*\*\* Running training \*\*\*\*\*|Unsloth: We now expect `per_device_train_batch_size`")


def run_starts(text: str) -> list[int]:
    """Line indices (0-based) of the lines of ``text`` that start a run (:data:`RUN_START`), found in one pass."""
    begins: set[int] = set()
    for kw in _RUN_KEYWORDS:  # str.find per keyword, then the regex on those lines only (fast on 100 MB logs)
        i = text.find(kw)
        while i >= 0:
            b = text.rfind("\n", 0, i) + 1
            if b not in begins:
                e = text.find("\n", i)
                if RUN_START.search(text[b: e if e >= 0 else len(text)]):
                    begins.add(b)
            nl = text.find("\n", i)
            if nl < 0:
                break
            i = text.find(kw, nl)
    out: list[int] = []
    last = line = 0
    for b in sorted(begins):
        line += text.count("\n", last, b)
        last = b
        out.append(line)
    return out


def split_runs(lines: list[str], starts: list[int] | None = None) -> list[tuple[int, int]]:
    """``[(first line index, end index), ...]``: the runs a log holds, one per launch (:data:`RUN_START`: a
    launch command, Unsloth's banner, transformers' ``***** Running training *****``) followed by training records
    before the next launch; a launch with no training records after it joins the run after it. One span (the whole
    text) when there are fewer than two such runs. ``starts``: the launch lines when already found
    (:func:`run_starts`)."""
    if starts is None:
        starts = [i for i, ln in enumerate(lines) if RUN_START.search(ln)]
    if len(starts) < 2:
        return [(0, len(lines))]
    bounds = [0] + starts[1:] + [len(lines)]
    merged: list[tuple[int, int]] = []
    carry: int | None = None
    for a, b in zip(bounds, bounds[1:]):
        a0 = carry if carry is not None else a
        if _has_records(lines[a:b]):
            merged.append((a0, b))
            carry = None
        else:
            carry = a0
    if carry is not None and merged:
        merged[-1] = (merged[-1][0], len(lines))
    if len(merged) < 2:
        return [(0, len(lines))]
    return merged


_RUN_KEYWORDS = ("python", "torchrun", "accelerate", "deepspeed", "swift", "bash", "==((====))==",
                 "***** Running training", "Unsloth: We now expect")
_TRAIN_HINT = re.compile(r"step:\d+ - |\{'loss'|\{\"loss\"|'learning_rate'|\bStep \d+ \||Iter \d+: Train")


#: a score printed once after training ("Test accuracy: 26.7% (267/1000)", "final eval pass@1 = 0.41")
FINAL_EVAL = re.compile(r"(?im)^[^\n{}]{0,80}?\b(?P<name>(?:test|eval(?:uation)?|val(?:idation)?|held[- ]?out|final)"
                        r"[ _/-]?(?:set[ _/-]?)?(?:accuracy|acc|pass@1|pass_at_1|score|win[ _-]?rate|success[ _-]?rate|"
                        r"exact[ _-]?match))\b\s*(?:[:=]|is)\s*(?P<v>" + NUM + r")\s*(?P<pct>%)?")
#: where training records are written, to find what comes after the last one
_LAST_RECORD = re.compile(r"step:\d+ - |\{'loss'|\{\"loss\"|'learning_rate'|\bStep \d+ \||Iter \d+: Train|"
                          r"\"step\"\s*:|(?<![\w])step\s*=\s*\d|'train_runtime'|\"train_runtime\"")


@dataclass(frozen=True)
class FinalEval:
    """A score printed after the last training record: its ``name`` as printed, ``score`` as a fraction, the
    ``line`` (1-based) and whether it was printed in percent."""

    name: str
    score: float
    line: int
    percent: bool


def final_eval(text: str, reward_names: tuple[str, ...] = ()) -> FinalEval | None:
    """The last evaluation score printed after the last training record of ``text`` (:data:`FINAL_EVAL`), or None.
    A percent (``26.7%``, or a value above 1 for an accuracy-like name) becomes a fraction.

    Failing that, the training reward measured again after training: a line that prints only ``NAME: value`` for a
    name in ``reward_names`` (the log's own name of the per-step reward, e.g. ``reward``) after the last training
    record (a custom loop's test pass: ``utils - INFO - reward: 0.0598``)."""
    last = None
    for last in _LAST_RECORD.finditer(text):
        pass
    if last is None:
        return None
    tail_at = text.find("\n", last.end())
    if tail_at < 0:
        return None
    hit = None
    for hit in FINAL_EVAL.finditer(text, tail_at):
        pass
    if hit is None and reward_names:
        alts = "|".join(re.escape(n) for n in reward_names if n)
        pat = re.compile(r"(?im)^[^\n{}=]{0,80}?(?<![\w/])(?P<name>%s)\s*:\s*(?P<v>%s)\s*(?P<pct>%%)?\s*$" % (alts, NUM))
        for hit in pat.finditer(text, tail_at):
            pass
    if hit is None:
        return None
    v = to_float(hit.group("v"))
    if v is None or not math.isfinite(v) or v < 0:
        return None
    pct = bool(hit.group("pct")) or (1.0 < v <= 100.0)
    if pct:
        v /= 100.0
    if v > 1.0:
        return None
    return FinalEval(hit.group("name"), v, text.count("\n", 0, hit.start("name")) + 1, pct)


#: the last line of a Python traceback (``torch.OutOfMemoryError: CUDA out of memory...``, ``KeyboardInterrupt``,
#: ``NotImplementedError: ...``) and other ways a process dies in a log
EXC_LINE = re.compile(r"(?m)^\s*(?:\(\w+ pid=\d+[^)]*\)\s*)?(?P<exc>(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|"
                      r"Interrupt|Exit|Fault)(?:\([\w.]+\))?)(?::\s*(?P<msg>[^\n]{0,200}))?\s*$")
FATAL_LINE = re.compile(r"(?im)^.{0,80}?\b(?P<what>Killed|Segmentation fault|CUDA out of memory[^\n]{0,120}|"
                        r"Error executing job)\b")


def stop_reason(text: str) -> tuple[str, int] | None:
    """Why a run stopped, as its log says: the last exception a traceback ends with (after ``Traceback (most recent
    call last)``), else the last fatal line (``Killed``, ``Segmentation fault``); ``(text, line)`` or None."""
    raw = text
    text = clean(text)

    def line_of(found: str) -> int:  # in the file as it is (clean() turns carriage returns into line ends)
        at = raw.rfind(found)
        return raw.count("\n", 0, at) + 1 if at >= 0 else text.count("\n", 0, text.rfind(found)) + 1

    tb = text.rfind("Traceback (most recent call last)")
    best = None
    if tb >= 0:
        for m in EXC_LINE.finditer(text, tb):
            best = m
    if best is not None:
        exc = best.group("exc")
        msg = (best.group("msg") or "").strip()
        return (f"{exc}: {msg}" if msg else exc), line_of(best.group(0).strip())
    fatal = None
    for fatal in FATAL_LINE.finditer(text):
        pass
    if fatal is not None:
        return fatal.group("what").strip(), line_of(fatal.group("what"))
    return None


def _has_records(lines: list[str]) -> bool:
    return any(_TRAIN_HINT.search(ln) for ln in lines)


__all__ = ["Record", "RunPart", "split_records", "json_document_records", "json_record", "scan", "organize", "clean",
           "notebook_text", "html_tables", "find_config", "ConfigFound", "config_from_mapping", "split_runs", "eval_score_name", "counters_in", "parse_pydict"]
