"""The general extraction layer under the format readers: records from any line-oriented text (issue 24).

A log of an unseen format degrades gracefully instead of falling through: :func:`scan` finds *records* in any text,
:func:`organize` turns records into training rows, evaluation rows and a run-level config for
:func:`rlbatch.readers.common.build_run`, and :func:`find_config` reads P, G, the update batch and the learning rate
from wherever the file states them. The format readers (verl, TRL, JSONL, ...) use the same pieces.

Records (one :class:`Record` each) from:

- JSON objects, one per line: flat, nested (names joined with ``/``), or verl's ``{"step": N, "data": {...}}``;
- Python dict reprs (``{'loss': 0.1, ...}``), also glued to a progress bar, behind a label (``step 3: {...}``,
  ``model.py:660 - step 1: {...}``) or wrapped over several lines; parsed with :func:`ast.literal_eval` only;
- ``step:N - name:value - ...`` (verl), ``Step N | a: x | b: y`` tables, ``key=value`` runs and ``key: value`` /
  ``key value`` runs after a label (``Iter 3: Train loss 0.1, Learning Rate 1e-05, It/sec 0.05``);
- Markdown tables (a heading such as ``Rollout Step 3`` or ``Evaluation Step 10`` labels the table that follows;
  a two-column ``| Metric | Value |`` table is one record, a table with a step column one record per row) and HTML
  tables (Jupyter ``text/html`` outputs: ``Step | Training Loss | reward ...``).

Containers: Jupyter notebooks (:func:`notebook_text`: stream and ``text/plain`` outputs as lines, HTML tables as
records, code cells kept for their config), Markdown with fenced blocks, W&B's ``output.log``, ANSI colour codes and
carriage-return progress bars (:func:`clean`).

Kinds: a ``type``/``kind``/``split``/``mode``/``phase`` field (``train``, ``rollout``, ``eval``, ``config``,
``summary``...), the label in front of a record (``[eval]``, ``Val``, ``validation step=5``), the heading of a
table, or the keys themselves (every name validation-prefixed).

Counters: several step counters in one file (rollout step, optimizer step, global step, epoch) are told apart by
name (:data:`OPTIMIZER_COUNTERS`, :data:`ROLLOUT_COUNTERS`); the optimizer-update counter is the run's ``step``
where present, the rollout counter is kept (``raw/<name>``), and the choice is stated in the run's notes.

Evaluation names: besides the canonical table, a name logged in records without any training metric (a baseline
evaluation before training, an eval-only record) is an evaluation quantity; the score is the first such name meaning
accuracy, pass rate or score (:func:`eval_score_name`), never a loss.

Nothing is ever ``eval``'ed or unpickled: JSON through :mod:`json`, dicts through :func:`ast.literal_eval`.
"""

from __future__ import annotations

import ast
import html.parser
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from rlbatch.batchspec import batch_spec, flatten
from rlbatch.errors import UserError
from rlbatch.readers import names as N
from rlbatch.readers.common import ANSI, SCALAR_CALL, to_count, to_float

_NONFINITE = re.compile(r"(?<![\w'\"])(nan|inf|-inf)(?![\w'\"])")
#: a Python dict repr starting: ``{'name':`` or ``{"name":``
PYDICT_START = re.compile(r"\{\s*['\"][^'\"\n]{1,200}['\"]\s*:")
#: a label naming a step in front of a record: ``step 3:``, ``Iter 3:``, ``[eval] step 200:``, ``rollout 4:``
LABEL = re.compile(r"(?i)(?<![A-Za-z0-9_])(?P<word>global[_ ]step|train[_ ]step|step|iter(?:ation)?|update|rollout|"
                   r"epoch|episode)[\s#:=]*(?P<n>\d{1,12})(?:\s*/\s*\d{1,12})?\s*(?:\]|\))?\s*[:|,-]?\s*$")
LEAD_LABEL = re.compile(r"(?i)^\W{0,8}(?P<pre>[\w\[\]. -]{0,40}?)\b(?P<word>global[_ ]step|train[_ ]step|step|"
                        r"iter(?:ation)?|update|rollout|epoch|episode)\s*[#:=]?\s*(?P<n>\d{1,12})"
                        r"(?:\s*/\s*(?P<of>\d{1,12}))?\s*[\]):|,-]+\s*")
#: a header line that only names a step (``=== [global_reduce] - METRICS STEP 2 ===``, ``==== Step 3/10 ====``,
#: ``Step 5:``, ``## Step 4``): the ``key: value`` lines under it are that step's record
BLOCK_HEADER = re.compile(r"(?i)^[\W_]*(?:[\w\[\].-]+\s+){0,6}?[-:|]?\s*(?:metrics\s+)?(?P<word>global[_ ]step|step|"
                          r"iter(?:ation)?|epoch|rollout|update)\s*[#:]?\s*(?P<n>\d{1,12})(?:\s*/\s*\d{1,12})?"
                          r"[\s=#*:\-\]|)]*$")
#: a sentence counting the steps done so far (``Completed 20 training steps``, ``Finished 100 updates``,
#: ``After 40 steps:``): the ``key: value`` lines under it are that step's record
PROSE_COUNTER = re.compile(r"(?i)^\W{0,4}(?:completed|finished|done(?: with)?|after|ran)\s+(?P<n>\d{1,12})\s+"
                           r"(?:training\s+|optimizer\s+|rl\s+|grpo\s+|ppo\s+)?(?:steps|iterations|updates)\b[\s.:!]*$")
#: an epoch counter then the batch counter within it, in front of ``key: value`` pairs: ``Epoch:[1/2](10/9751),
#: loss: ...`` (MiniMind), ``Epoch [1/3] Step [10/100] loss: ...``, ``epoch 2/3 (5/40) | loss ...``; the step is
#: (epoch - 1) x batches per epoch + batch
EPOCH_BATCH = re.compile(r"(?i)^\W{0,8}(?P<pre>[\w\[\]. -]{0,40}?)\bepoch\s*[:=#]?\s*[\[(]?\s*(?P<e>\d{1,6})\s*/\s*"
                         r"\d{1,6}\s*[\])]?\s*[,:|-]?\s*(?:(?:step|batch|iter(?:ation)?)\s*[:=#]?\s*)?[\[(]?\s*"
                         r"(?P<n>\d{1,12})\s*/\s*(?P<of>\d{1,12})\s*[\])]?\s*[:|,-]*\s*")
TQDM_COUNTER = re.compile(r"(?<!\d)(\d{1,12})/\d{1,12} \[")
#: what Python's logging (and loguru, rich, absl) prints before a message: a time stamp, bracketed fields, the level
#: and the logger's name (``2025-04-01 10:00:01,123 - train - INFO - ``, ``[2025-04-01 10:00:01][train][INFO] - ``,
#: ``INFO:__main__:``, ``I0401 10:00:01.123 12345 train.py:88] ``)
LOG_PREFIX = re.compile(r"^\s*(?:(?:\[(?!(?i:eval|evaluation|train|training|val|valid|validation|test|rollout)\])"
                        r"[^\]\n]{1,60}\]\s*)+[-|:]?\s*|\d{4}-\d\d-\d\d[ T][\d:,.]+(?:Z|[+-]\d\d:?\d\d)?\s*"
                        r"(?:[-|]\s*)?(?:(?:[\w.]+\s*)?[-|]\s*)?(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|SUCCESS)\s*[-|:]\s*)?|"
                        r"(?:DEBUG|INFO|WARNING|WARN|SUCCESS):[\w.]*:|[IWE]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s*)")
VERL_STEP = re.compile(r"(?:^|\s)step:(\d{1,12}) - ")
NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"  # one way to split digits: no quadratic backtracking
NUM_ = NUM
PROSE_KV = re.compile(r"^\s*(?:[-\u2022*]\s+)?([A-Za-z_][\w ./@()%-]{0,60}?)\s*[:=]\s*(" + NUM + r")\s*(?:s|%|ms)?\s*$")
KV_EQ = re.compile(r"(?<![\w./-])([A-Za-z_][\w./@()-]{0,80})=(" + NUM + r")(?:s|ms|%)?(?![\w.])")
KV_LINE = re.compile(r"^\s*(?:[-\u2022*]\s+)?([A-Za-z_][\w./@()%-]{0,120}?)\s*[:=]\s*(" + NUM_ + r")\s*(?:s|%|ms)?\s*$")
KV_SEG = re.compile(r"^\s*([A-Za-z_][\w ./@()%-]{0,80}?)\s*(?::\s*|\s+)(" + NUM + r")\s*(?:%|s|ms|GB|GiB|MB|"
                    r"tokens?(?:/s)?|it/s|s/it)?\s*$")
MD_ROW = re.compile(r"^\s*\|(.+)\|\s*$")
MD_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
HEADING = re.compile(r"^\s*(?:#{1,6}\s*|={2,}\s*)(?P<text>.*?)\s*$")
PLUSMINUS = re.compile(r"^\s*(" + NUM + r")\s*(?:±|\+/-|\+-)")

#: names of a per-step rate in iterations per second (mlx-lm's ``It/sec``): the step's time is its inverse
RATE_NAMES = ("it/sec", "it/s", "iter/s", "iters/s", "iter/sec", "steps/s", "steps/sec", "iterations_per_second")
KIND_FIELDS = ("type", "kind", "split", "mode", "phase", "event", "record", "tag", "stage_type")
KINDS = {
    "train": "train", "training": "train", "step": "train", "update": "train", "optim": "train", "optimizer": "train",
    "rollout": "train", "generation": "train", "gen": "train", "sample": "train", "actor": "train", "policy": "train",
    "eval": "eval", "evaluation": "eval", "val": "eval", "valid": "eval", "validation": "eval", "test": "eval",
    "heldout": "eval", "dev": "eval", "benchmark": "eval",
    "config": "config", "args": "config", "hparams": "config", "hyperparameters": "config", "params": "config",
    "meta": "config", "metadata": "config", "setup": "config", "init": "config", "start": "config",
    "summary": "summary", "final": "summary", "end": "summary", "done": "summary", "result": "summary",
    "results": "summary",
}
#: names of counters that count optimizer updates, most specific first
OPTIMIZER_COUNTERS = ("optimizer_step", "optim_step", "update_step", "train_step", "trainer/global_step",
                      "train/global_step", "global_step", "training/global_step", "step", "train/step", "iteration",
                      "iter", "update", "_step")
#: names of counters that count rollouts (generation rounds), most specific first
ROLLOUT_COUNTERS = ("rollout_step", "rollout_id", "rollout_idx", "rollout", "rollout/step", "generation_step",
                    "gen_step", "batch_idx", "policy_version")
OTHER_COUNTERS = ("epoch", "episode", "cumulative_examples", "examples_seen", "samples_seen", "num_tokens")
#: a counter named after the RL cycle it counts (one rollout + its updates): ``grpo_step``, ``ppo_iter``, ``rl_step``,
#: ``outer_step``, ``policy_round`` ... (a custom loop names it after its algorithm)
ROLLOUT_COUNTER = re.compile(r"(?i)^(?:grpo|ppo|rl|rlhf|dapo|rloo|reinforce|policy|outer|rollout|generation|gen|"
                             r"sampling)[_/-]?(?:step|iter|iteration|round|idx|index|id)$")


def is_rollout_counter(name: str) -> bool:
    """True for a name that counts rollouts (RL cycles): :data:`ROLLOUT_COUNTERS` or :data:`ROLLOUT_COUNTER`."""
    return name in ROLLOUT_COUNTERS or bool(ROLLOUT_COUNTER.match(name))


def is_counter(name: str) -> bool:
    """True for a step counter of either family (optimizer updates or rollouts)."""
    return name in OPTIMIZER_COUNTERS or is_rollout_counter(name)
#: label words (in front of a record) -> counter name
LABEL_COUNTER = {"step": "step", "global step": "global_step", "global_step": "global_step", "train step": "step",
                 "train_step": "step", "iter": "iteration", "iteration": "iteration", "update": "update_step",
                 "rollout": "rollout_step", "epoch": "epoch", "episode": "episode"}
EVAL_WORDS = re.compile(r"(?i)(?:^|[^a-z])(eval|evaluation|val|valid|validation|test|heldout|held-out)(?:[^a-z]|$)")
SCORE_WORDS = re.compile(r"(?i)(accuracy|(?<![a-z])acc(?![a-z])|token_acc|pass@1|pass_at_1|pass1|exact_match|"
                         r"success_rate|solve_rate|(?<![a-z])score(?![a-z])|correct|win[_ -]?rate|"
                         r"pass(?:@|_at_)\d+|(?<![a-z])em(?![a-z]))")
NOT_SCORE = re.compile(r"(?i)(loss|std|(?<![a-z])min|max|runtime|per_second|time|took|length|_len(?![a-z])|count|"
                       r"(?<![a-z])num_|(?<![a-z])n_)")
REWARD_WORDS = re.compile(r"(?i)(reward)")
#: scores of an auxiliary check rather than of the task (the answer's format, its length)
AUX_SCORE = re.compile(r"(?i)(?:^|[/_])(format|formatting|length|len|syntax|parse|parsable|style)(?:[/_]|$)")


@dataclass
class Record:
    """One logged record: its first source line, values (flat foreign name -> number, text or None), how it was
    written (``form``), its ``kind`` (``train``/``eval``/``config``/``summary`` or None: decided later) and a step
    number written outside the values (``label``: ``step 3: {...}``, a table heading) with its counter name."""

    line: int
    values: dict[str, Any]
    form: str
    kind: str | None = None
    label: int | None = None
    label_counter: str | None = None


# ---- containers -----------------------------------------------------------------------------------------------

def clean(text: str) -> str:
    """ANSI escape codes dropped; carriage returns (progress bars redrawn in place) turned into line ends."""
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def is_notebook(head: str) -> bool:
    """True for a Jupyter notebook (JSON with ``cells`` and ``nbformat``) judged by its first bytes."""
    h = head.lstrip()
    # "nbformat" and "nbformat_minor" are notebook-only keys; "cells" may come after a large widget state
    return h.startswith("{") and '"nbformat"' in head and ('"cells"' in head or '"nbformat_minor"' in head)


@dataclass
class Notebook:
    """What a notebook holds for a log reader: ``text`` (stream and ``text/plain`` outputs, one output after the
    other, with a line-number map back to the cell), ``tables`` (records from HTML tables in ``text/html`` outputs),
    ``code`` (the source of code cells, read for a config cell only)."""

    text: str
    tables: list[list[Record]] = field(default_factory=list)
    code: list[str] = field(default_factory=list)


def notebook_text(raw: str) -> Notebook:
    """Unpack a Jupyter notebook (``raw`` its JSON text). Raises ``ValueError`` when it is not one."""
    nb = json.loads(raw)
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a notebook")
    parts: list[str] = []
    tables: list[list[Record]] = []
    code: list[str] = []

    def _s(v: Any) -> str:
        return "".join(v) if isinstance(v, list) else v if isinstance(v, str) else ""

    for cell in nb["cells"]:
        if not isinstance(cell, dict):
            continue
        if cell.get("cell_type") == "code":
            code.append(_s(cell.get("source")))
        for out in cell.get("outputs") or []:
            if not isinstance(out, dict):
                continue
            if out.get("output_type") == "stream":
                parts.append(_s(out.get("text")))
                continue
            data = out.get("data") or {}
            if not isinstance(data, dict):
                continue
            if "text/html" in data and "<table" in _s(data["text/html"]):
                for t in html_tables(_s(data["text/html"])):
                    tables.append(t)
            elif "text/plain" in data:
                parts.append(_s(data["text/plain"]))
    text = "\n".join(p if p.endswith("\n") else p + "\n" for p in parts if p)
    return Notebook(text=text, tables=tables, code=code)


class _TableParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
            self._depth += 1
        elif tag == "tr" and self._depth:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and self.tables:
                self.tables[-1].append(self._row)
            self._row = None
        elif tag == "table" and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _name(header: str) -> str:
    """A table header as a metric name: ``Training Loss`` -> ``training_loss``, ``rewards / acc / mean`` ->
    ``rewards/acc/mean``."""
    h = re.sub(r"\s*/\s*", "/", header.strip())
    return re.sub(r"\s+", "_", h).lower()


def _table_records(rows: list[list[str]], line: int, form: str, label: int | None = None,
                   kind: str | None = None) -> list[Record]:
    """Rows of a table (first row the header) -> records: a two-column name/value table is one record; a table
    with more columns one record per row (its step column, if any, a counter)."""
    if len(rows) < 2:
        return []
    head = [_name(h) for h in rows[0]]
    body = [r for r in rows[1:] if len(r) == len(head)]
    if form == "md-table" and label is None and not any(
            h in ("step", "global_step", "iteration", "iter", "epoch", "rollout_step", "update") for h in head):
        return []  # a table in a document (a summary, a comparison of configurations), not a log of steps
    if len(head) == 2 and head[1] in ("value", "values", "val", "mean") or (
            len(head) == 2 and all(to_float(_cellnum(r[1])) is not None for r in body) and
            not any(h in ("step", "global_step", "iteration", "epoch") for h in head)):
        vals = {_name(r[0]): _cellnum(r[1]) for r in body if r[0].strip()}
        vals = {k: v for k, v in vals.items() if to_float(v) is not None}
        return [Record(line, vals, form, kind=kind, label=label, label_counter="step" if label is not None else None)] \
            if vals else []
    out = []
    step_col = any(h in ("step", "global_step", "iteration", "iter", "epoch") for h in head)
    labelled_rows = not step_col and all(to_float(_cellnum(r[0])) is None for r in body)
    for r in body:
        if labelled_rows:  # a row label in the first column (Early / Middle / Late): one name per cell
            vals = {f"{_name(r[0])}/{h}": _cellnum(c) for h, c in zip(head[1:], r[1:]) if h}
        else:
            vals = {h: _cellnum(c) for h, c in zip(head, r) if h}
        vals = {k: v for k, v in vals.items() if to_float(v) is not None}
        if vals:
            out.append(Record(line, vals, form, kind=kind, label=label,
                              label_counter="step" if label is not None else None))
    return out


def _cellnum(cell: str) -> Any:
    """A table cell's number: ``0.812 ± 0.390`` -> ``0.812``, ``12.5%`` -> 12.5; else the text."""
    s = cell.strip()
    m = PLUSMINUS.match(s)
    if m:
        return m.group(1)
    return s.rstrip("%").strip() if s.endswith("%") else s


def html_tables(text: str) -> list[list[Record]]:
    """Every ``<table>`` in an HTML fragment as records (the header row names the columns)."""
    p = _TableParser()
    try:
        p.feed(text)
        p.close()
    except (AssertionError, ValueError):  # malformed markup: what was parsed is kept
        pass
    return [recs for t in p.tables if (recs := _table_records(t, 0, "html-table"))]


# ---- records from lines ---------------------------------------------------------------------------------------

def parse_pydict(text: str) -> dict[str, Any] | None:
    """A Python dict repr (``{'loss': np.float64(0.5), 'kl': nan}``) -> dict, through :func:`ast.literal_eval`
    only (never ``eval``); None when it is not a literal dict."""
    body = SCALAR_CALL.sub(r"\1", text)
    body = _NONFINITE.sub(lambda m: {"nan": "None", "inf": "1e999", "-inf": "-1e999"}[m.group(1)], body)
    try:
        d = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
    return d if isinstance(d, dict) else None


def _balanced_end(s: str, start: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``start`` (quotes respected), or -1."""
    depth = 0
    quote = None
    i = start
    n = len(s)
    while i < n:
        ch = s[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                return i if ch == "}" else -1
        i += 1
    return -1


def _label(prefix: str) -> tuple[int | None, str | None, str | None]:
    """(step, counter, kind) from the text in front of a record: ``[eval] step 200:`` -> (200, step, eval)."""
    tail = prefix[-120:]
    m = LABEL.search(tail)
    kind = _kind_of_words(tail)
    if not m:
        return None, None, kind
    word = m.group("word").lower()
    return int(m.group("n")), LABEL_COUNTER.get(word, word.replace(" ", "_")), kind


def _kind_of_words(text: str) -> str | None:
    if EVAL_WORDS.search(text):
        return "eval"
    if re.search(r"(?i)(?:^|[^a-z])(train|training|rollout)(?:[^a-z]|$)", text):
        return "train"
    return None


def _kv_pairs(body: str) -> dict[str, str]:
    """``key: value`` / ``key value`` segments separated by ``,`` ``|`` `` - `` or tabs, or ``key=value`` runs."""
    eq = KV_EQ.findall(body)
    if len(eq) >= 2 or (len(eq) == 1 and re.fullmatch(r"\s*[\w./@()-]+\s*=\s*" + NUM + r"\s*[,;]?\s*", body)):
        return {k: v for k, v in eq}
    out: dict[str, str] = {}
    for seg in re.split(r",\s+|\s+\|\s+|\s+-\s+|\t+|;\s+", body):
        if len(seg) > 200:  # a name and a number are short; a longer segment is not one pair
            continue
        m = KV_SEG.match(seg)
        if m:
            out[m.group(1).strip()] = m.group(2)
    return out


def scan(lines: Iterable[str], first_line: int = 1, *, max_wrap: int = 200) -> list[Record]:
    """Every record in ``lines`` (already :func:`clean`'ed), in file order. ``first_line``: the number of the
    first line (for messages). Markdown headings label the table under them."""
    lines = list(lines)
    out: list[Record] = []
    heading: tuple[int | None, str | None] = (None, None)
    i = 0
    n = len(lines)
    while i < n:
        raw = lines[i].rstrip("\n")
        ln = first_line + i
        s = raw.strip()
        i += 1
        if not s:
            continue
        # a header naming a step, with key: value lines under it (TorchForge's METRICS STEP blocks, bullet lists)
        bh = BLOCK_HEADER.match(s) if len(s) < 160 else None
        pc = PROSE_COUNTER.match(s) if bh is None and len(s) < 160 else None
        if pc:  # "Completed 20 training steps" then "Latest loss: 75.3": the lines under it are that step's record
            vals = {}
            j = i
            while j < n:
                km = PROSE_KV.match(lines[j].rstrip("\n"))
                if not km:
                    break
                vals[_name(km.group(1).strip())] = km.group(2)
                j += 1
            if vals:
                out.append(Record(ln, vals, "block", kind="train", label=int(pc.group("n")), label_counter="step"))
                i = j
                continue
        if bh:
            vals: dict[str, Any] = {}
            j = i
            while j < n:
                nxt = lines[j].rstrip("\n")
                if not nxt.strip():
                    if vals:
                        break
                    j += 1
                    continue
                km = KV_LINE.match(nxt)
                if not km:
                    break
                vals[km.group(1).strip()] = km.group(2)
                j += 1
            if len(vals) >= 2:
                word = bh.group("word").lower()
                out.append(Record(ln, vals, "block", kind=_kind_of_words(s[: bh.start("word")]), label=int(bh.group("n")),
                                  label_counter=LABEL_COUNTER.get(word, word.replace(" ", "_"))))
                i = j
                continue
        # Markdown heading (labels the tables after it)
        hm = HEADING.match(raw)
        if hm and (raw.lstrip().startswith("#") or raw.lstrip().startswith("==")):
            text = hm.group("text").strip("= ")
            lab = LEAD_LABEL.search(text) or re.search(r"(?i)\b(step|iter(?:ation)?|epoch|rollout)\s*#?\s*(\d+)",
                                                        text)
            if lab:
                heading = (int(lab.group("n") if "n" in lab.groupdict() else lab.group(2)), _kind_of_words(text))
            continue
        # Markdown table
        if MD_ROW.match(raw) and i < n and MD_SEP.match(lines[i]):
            rows = [[c.strip() for c in raw.strip().strip("|").split("|")]]
            i += 1
            while i < n and MD_ROW.match(lines[i]):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out.extend(_table_records(rows, ln, "md-table", label=heading[0], kind=heading[1]))
            continue
        # JSON object per line
        if s.startswith("{") and s.endswith("}"):
            try:
                obj = json.loads(s)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                out.append(json_record(obj, ln))
                continue
        # verl: step:N - name:value - ...
        vm = VERL_STEP.search(raw)
        if vm:
            vals: dict[str, Any] = {}
            for part in raw[vm.end():].split(" - "):
                k, sep, v = part.rpartition(":")
                if sep and to_float(v) is not None:
                    vals[k.strip()] = v.strip()
            if vals:
                out.append(Record(ln, vals, "verl", label=int(vm.group(1)), label_counter="step",
                                  kind=_kind_of_words(raw[:vm.start()])))
                continue
        # Python dict repr (possibly glued to a progress bar, labelled, or wrapped over lines)
        dm = PYDICT_START.search(raw)
        if dm:
            start = dm.start()
            buf = raw
            end = _balanced_end(buf, start)
            j = i
            while end < 0 and j < n and j - i < max_wrap:
                buf += lines[j].rstrip("\n")
                j += 1
                end = _balanced_end(buf, start)
            nested = re.search(r"['\"]\s*:\s*$", buf[:start]) is not None  # a sub-dict of a printed config
            if end >= 0 and not nested:
                d = parse_pydict(buf[start:end + 1])
                if d is not None:
                    lab, ctr, kind = _label(buf[:start])
                    flat = flatten({str(k): v for k, v in d.items()}, "/", drop_lists=True)
                    if any(to_float(v) is not None for v in flat.values()):
                        out.append(Record(ln, flat, "dict", kind=kind, label=lab, label_counter=ctr))
                    i = j
                    continue
        # an epoch counter and the batch within it, then key/value pairs (MiniMind's 'Epoch:[1/1](10/9751), a: x')
        s = LOG_PREFIX.sub("", s, count=1) or s  # a logging module's time stamp / level / logger name
        em = EPOCH_BATCH.match(s)
        if em:
            pairs = _kv_pairs(s[em.end():])
            if pairs:
                step = (int(em.group("e")) - 1) * int(em.group("of")) + int(em.group("n"))
                out.append(Record(ln, {_name(k): v for k, v in pairs.items()}, "kv",
                                  kind=_kind_of_words(em.group("pre") or ""), label=step, label_counter="step"))
                continue
        # labelled key/value runs and 'Step N | a: x | b: y' tables
        lm = LEAD_LABEL.match(s)
        if lm:
            pairs = _kv_pairs(s[lm.end():])
            if pairs:
                word = lm.group("word").lower()
                kind = _kind_of_words(lm.group("pre") or "")
                names = list(pairs)
                if kind is None and sum(_kind_of_words(k.split()[0]) == "eval" for k in names) > len(names) / 2:
                    kind = "eval"
                    pairs = {re.sub(r"(?i)^(val|eval|test)[ _]", "", k): v for k, v in pairs.items()}
                out.append(Record(ln, {_name(k): v for k, v in pairs.items()}, "kv", kind=kind,
                                  label=int(lm.group("n")),
                                  label_counter=LABEL_COUNTER.get(word, word.replace(" ", "_"))))
                continue
        if "=" in s:
            pairs = dict(KV_EQ.findall(s))
            if len(pairs) >= 2:
                dotted = sum("." in k for k in pairs)
                if dotted * 2 >= len(pairs):  # Hydra overrides / a config dump (data.train_batch_size=256): settings
                    out.append(Record(ln, pairs, "kv", kind="config"))
                else:
                    bar = list(TQDM_COUNTER.finditer(s[: s.find("=")]))  # a progress bar's postfix: its N/M
                    if bar and re.search(r"(?i)\bepoch\b", s[: bar[-1].start()]):
                        # the postfix of an inner bar over one epoch's micro-batches (OpenRLHF's "Train epoch
                        # [1/1]: 841/4096"): running averages within one update, not an RL step
                        continue
                    out.append(Record(ln, pairs, "kv", kind=_kind_of_words(s[: s.find("=")]),
                                      label=int(bar[-1].group(1)) if bar else None,
                                      label_counter="step" if bar else None))
                continue
    return out


def json_record(obj: dict[str, Any], line: int) -> Record:
    if "step" in obj and isinstance(obj.get("data"), dict):  # verl's file logger
        vals = flatten(obj["data"], "/", drop_lists=True)
        vals["step"] = obj["step"]
        return Record(line, vals, "json")
    kind = None
    for k in KIND_FIELDS:
        v = obj.get(k)
        if isinstance(v, str) and v.strip().lower() in KINDS:
            kind = KINDS[v.strip().lower()]
            break
    vals = flatten(obj, "/", drop_lists=True)
    for k in KIND_FIELDS:
        if isinstance(vals.get(k), str):
            vals.pop(k)
    if "step" not in vals and isinstance(vals.get("global_step/max_steps"), str):  # ms-swift: "5/500"
        a, _, b = vals["global_step/max_steps"].partition("/")
        if a.isdigit():
            vals["step"] = int(a)
    return Record(line, vals, "json", kind=kind)


# ---- names, counters, kinds -----------------------------------------------------------------------------------

def counters_in(records: Iterable[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(optimizer counter, rollout counter) of a file's records (dicts of values): of each family, the counter in
    the most records (ties: the more specific name, :data:`OPTIMIZER_COUNTERS` / :data:`ROLLOUT_COUNTERS` order);
    None when the family is absent."""
    count: dict[str, int] = {}
    for vals in records:
        for k in vals:
            if is_counter(k):
                count[k] = count.get(k, 0) + 1

    def best(family: tuple[str, ...], extra: list[str], skip: str | None = None) -> str | None:
        cands = [c for c in list(family) + extra if c in count and c != skip]
        order = {c: i for i, c in enumerate(list(family) + extra)}
        return max(cands, key=lambda c: (count[c], -order[c])) if cands else None

    opt = best(OPTIMIZER_COUNTERS, [])
    named = sorted(k for k in count if k not in ROLLOUT_COUNTERS and ROLLOUT_COUNTER.match(k))
    return opt, best(ROLLOUT_COUNTERS, named, opt)


def eval_score_name(names: Iterable[str], user_map: dict[str, str] | None = None) -> str | None:
    """The validation score among evaluation ``names``: a canonical ``eval/score`` alias, else the first name
    meaning accuracy / pass rate / score, else a reward mean; never a loss, spread, extreme, time or count."""
    names = list(names)
    for n in names:
        c = N.canonical_for(n, user_map)
        if c and c[0] == "eval/score":
            return n
    for pat in (SCORE_WORDS, REWARD_WORDS):
        cands = [n for n in names if pat.search(n) and not NOT_SCORE.search(n.rsplit("/", 1)[-1].replace("mean", ""))]
        if cands:
            # a format check (format_accuracy, format_reward) is not the task's score; then "accuracy"-like over
            # per-function breakdowns: the shortest name
            return min(cands, key=lambda n: (bool(AUX_SCORE.search(n)), 0 if "mean" in n or "acc" in n else 1,
                                             len(n)))
    return None


#: names that mean a training quantity (a loss, a reward, a gradient norm, the lr, a timing)
TRAINING_WORDS = re.compile(r"(?i)loss|reward|grad|entropy|advantage|(?<![a-z])(kl|kl_div|ppo_kl|lr|learning_rate|"
                            r"return|returns|pg|policy|actor|critic|score)(?![a-z])|timing|time|duration|throughput")
#: names that are settings, not measurements (a config dict printed in a log: kl_coef, temperature, max_tokens)
SETTING_WORDS = re.compile(r"(?i)coef|coeff|temperature|top_[pk]|seed|(?<![a-z])pid(?![a-z])|warmup|_ratio$|"
                           r"clip_range|(?<![a-z])(max|min)_|_steps$|epochs$|(?<![a-z])n$|_size$|_id$|port$|rank$")


def _is_training_name(n: str) -> bool:
    low = n.lower()
    if EVAL_WORDS.search(low) or SETTING_WORDS.search(low.rsplit("/", 1)[-1]):
        return False
    return bool(TRAINING_WORDS.search(low))


@dataclass
class Organized:
    """What :func:`organize` makes of records: ``rows`` (foreign name -> value, one per training or evaluation
    record, with ``step``), their source ``lines``, ``config`` (flat name -> value from config records), the
    counters chosen and ``notes`` saying so."""

    rows: list[dict[str, Any]]
    lines: list[int]
    config: dict[str, Any]
    step_counter: str | None
    rollout_counter: str | None
    notes: list[str]
    summary: dict[str, Any] = field(default_factory=dict)
    last_train_step: float | None = None
    renamed: dict[str, str] = field(default_factory=dict)
    #: P, G and the update batch stated by the training records themselves (:func:`batch_from_steps`)
    batch: "ConfigFound | None" = None

    def restore_sources(self, run) -> None:
        """Name the log's own names in ``run.meta.metric_sources`` where :func:`organize` renamed them."""
        ms = getattr(run.meta, "metric_sources", None)
        if ms:
            run.meta.metric_sources = {k: self.renamed.get(v, v) for k, v in ms.items()}

    def closing_step(self) -> int | None:
        """The final summary's step when it is past the last training record (the run ran to it), else None."""
        fin = to_count(self.summary.get("step") or self.summary.get("global_step"))
        return fin if fin and (self.last_train_step is None or fin > self.last_train_step) else None


SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")


def organize(records: list[Record], user_map: dict[str, str] | None = None) -> Organized:
    """Records -> rows for :func:`rlbatch.readers.common.build_run`.

    - ``config`` records (and a record made only of text and settings, such as ``{"args": {...}}``) are set
      aside as the run-level config; ``summary`` records (``train_runtime``...) give the final step only;
    - the step of each record: its optimizer counter (:data:`OPTIMIZER_COUNTERS`; the rollout counter when there is
      none), else its label; records of several kinds at one step (rollout, train, eval written as separate lines)
      are merged into one row when their names do not overlap (a re-logged step with the same names is not merged);
    - evaluation records: their names are marked validation-side (``eval/`` prefix unless they carry one) so that
      they become evaluation points; a name logged only in records without any training metric is an evaluation
      name everywhere (a baseline evaluation at step 0); the score is :func:`eval_score_name` and is mapped onto
      ``eval/score`` through a name the canonical table knows;
    - an evaluation printed just before the training record of the same step number was taken before that update:
      it is placed at the step before.
    """
    notes: list[str] = []
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    data: list[Record] = []
    for r in records:
        nums = {k: v for k, v in r.values.items() if to_float(v) is not None and not isinstance(v, bool)}
        if r.kind == "config" or (r.kind is None and r.form == "json" and not nums):
            config.update(r.values)
            continue
        if r.kind is None and r.form == "json" and any(isinstance(v, str) and "/" in v for v in r.values.values()) \
                and not _has_training(nums) and any(k in r.values for k in ("args/lr", "args/learning_rate")):
            config.update(r.values)
            continue
        last = {k.rsplit("/", 1)[-1]: v for k, v in nums.items()}  # a dump nests them: train_time/train_runtime
        if any(k in SUMMARY_KEYS for k in last) and not _has_training(
                {k: v for k, v in last.items() if k not in SUMMARY_KEYS}):
            summary.update(nums)
            if r.label is not None:
                summary.setdefault("step", r.label)
            continue
        data.append(Record(r.line, nums, r.form, r.kind, r.label, r.label_counter))
    opt, roll = counters_in(r.values for r in data)
    if opt is None and roll is None:
        labelled = [r.label_counter for r in data if r.label is not None]
        lab_opt = next((c for c in OPTIMIZER_COUNTERS if c in labelled), None)
        lab_roll = next((c for c in labelled if c is not None and is_rollout_counter(c)), None)
    else:
        lab_opt = lab_roll = None
    step_name = opt or roll
    per_rollout: dict[float, set[float]] = {}
    if opt and roll:
        for r in data:
            if opt in r.values and roll in r.values:
                per_rollout.setdefault(to_float(r.values[roll]), set()).add(to_float(r.values[opt]))
    k_upd = max((len(v) for v in per_rollout.values()), default=1)
    if opt and roll and k_upd > 1:
        step_name = roll
        data = _aggregate_updates(data, opt, roll)
        notes.append(f"two step counters: {roll!r} counts rollouts and {opt!r} optimizer updates, up to {k_upd} "
                     f"updates per rollout: one row per rollout step (as verl counts steps), the updates' values "
                     f"averaged (times summed); the last {opt!r} of each rollout kept as raw/{opt}_last and the "
                     "updates as raw/updates")
    elif opt and roll:
        notes.append(f"two step counters: {opt!r} counts optimizer updates (the run's step) and {roll!r} rollouts "
                     f"(one update per rollout; kept as raw/{roll})")
    elif roll and not opt:
        notes.append(f"steps from the rollout counter {roll!r} (no optimizer-update counter in the log: one update "
                     "per rollout assumed)")
    elif opt:
        notes.append(f"steps from the counter {opt!r} of each record (one update per record)")
    # step of each record; a record carrying only the other counter gets its step through the records that carry
    # both (a rollout record at rollout_step k, where one update per rollout makes optimizer_step j = f(k))
    second = roll if step_name == opt else opt
    via: dict[float, float] = {}
    if step_name and second:
        for r in data:
            if step_name in r.values and second in r.values:
                a, b = to_float(r.values[second]), to_float(r.values[step_name])
                if a is not None and b is not None:
                    via.setdefault(a, b)
    steps: list[float | None] = []
    for r in data:
        s = None
        other = next((c for c in OPTIMIZER_COUNTERS if c in r.values), None) if opt else None
        if step_name and step_name in r.values:
            s = to_float(r.values[step_name])
        elif second and second in r.values and to_float(r.values[second]) in via:
            s = via[to_float(r.values[second])]
        elif other is not None:  # a record that names the update counter differently (a final state dump)
            s = to_float(r.values[other])
        elif r.label is not None:
            s = float(r.label)
        steps.append(s)
    if not step_name and (lab_opt or lab_roll):
        notes.append(f"steps from the label in front of each record ({lab_opt or lab_roll})")
    if data and all(x is None for x in steps):
        k = 0
        for idx, r in enumerate(data):
            if r.kind != "eval" and _has_training(r.values):
                k += 1
            steps[idx] = float(k)
        if k:
            notes.append("no step counter in the log: training records numbered 1, 2, ... in file order (an "
                         "evaluation at the step of the training record before it); steps count logging intervals")
    # evaluation names: records with no training metric that carry names never seen with training metrics
    train_names: set[str] = set()
    evalish: set[str] = set()
    typed_eval: set[str] = set()  # names of records the log itself marks as evaluations (type: eval)
    train_steps = {s for r, s in zip(data, steps) if r.kind != "eval" and _has_training(r.values)}
    for r, s in zip(data, steps):
        names = set(r.values) - {step_name, roll, *OTHER_COUNTERS}
        if r.kind == "eval":
            evalish |= names
            typed_eval |= names
        elif _has_training({k: r.values[k] for k in names}):
            train_names |= names
        elif s not in train_steps or any(_looks_eval(n) for n in names) or any(
                SCORE_WORDS.search(n) and not NOT_SCORE.search(n.rsplit("/", 1)[-1].replace("mean", ""))
                for n in names):
            evalish |= names  # logged where no training happened (a baseline before training, an eval-only step)
        else:
            train_names |= names  # another table of a training step (statistics, per-stage values)
    eval_only = {n for n in evalish if n not in train_names or _looks_eval(n)}
    # names seen in an eval-only record and also in training records (a baseline point at step 0 logging the same
    # held-out metrics as every training record): evaluation names too, when they are not training metrics
    eval_only |= {n for n in (evalish - typed_eval) & train_names if not _is_training_name(n)
                  and not N.canonical_for(n, user_map)
                  and (SCORE_WORDS.search(n) or EVAL_WORDS.search(n))}
    score = eval_score_name(sorted(eval_only, key=lambda n: (not _looks_eval(n), n)), user_map)
    if score is not None and AUX_SCORE.search(score) and eval_score_name(
            [n for n in typed_eval if not AUX_SCORE.search(n)], user_map) is not None:
        score = None  # a format check only the eval records log: their own task score is taken per record below
    rename: dict[str, str] = {}
    for n in eval_only:
        if n == score:
            rename[n] = "eval/score" if not N.canonical_for(n, user_map) else n
        elif not N.is_validation_side(n, user_map):
            rename[n] = "val-aux/" + n
    if score:
        notes.append(f"evaluation score: {score!r}" + (" (a name logged at evaluation points)"
                                                        if rename.get(score) == "eval/score" else ""))
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    last_train: float | None = None
    last_step_keys: dict[float, set[str]] = {}
    for idx, (r, s) in enumerate(zip(data, steps)):
        if s is None:
            continue
        vals = {rename.get(k, k): v for k, v in r.values.items() if k != step_name and k not in OPTIMIZER_COUNTERS}
        counter_vals = {k: vals.pop(k) for k in [k for k in vals if is_rollout_counter(k)]}
        is_eval = r.kind == "eval" or (bool(vals) and any(N.is_validation_side(k, user_map) for k in vals) and
                                       not _has_training({k: v for k, v in vals.items()
                                                          if not N.is_validation_side(k, user_map)}))
        if is_eval:
            own = [k for k in r.values if k != step_name and k not in OPTIMIZER_COUNTERS]
            if r.kind == "eval" and "eval/score" not in vals and not any(
                    N.is_eval_name(k, user_map) for k in vals):
                # an evaluation record whose names are also training names ('[eval] reward_mean=...'): its own score
                own_score = eval_score_name(own, user_map)
                if own_score is not None and own_score in r.values:
                    vals.pop(rename.get(own_score, own_score), None)
                    vals["eval/score"] = r.values[own_score]
                    rename.setdefault(own_score + " (in the evaluation records)", "eval/score")
                    if not any(x.startswith("evaluation records' score") for x in notes):
                        notes.append(f"evaluation records' score: {own_score!r} (the same name in training records "
                                     "is the training value)")
            nxt = next((t for rr, t in zip(data[idx + 1:], steps[idx + 1:]) if t is not None and rr.kind != "eval"
                        and _has_training(rr.values)), None)
            prev_train = any(t == s and rr.kind != "eval" and _has_training(rr.values)
                             for rr, t in zip(data[:idx], steps[:idx]))
            if nxt == s and not prev_train and s >= 1:
                s = s - 1
                if not any("before that update" in x for x in notes):
                    notes.append("an evaluation printed before the training record of the same step number was taken "
                                 "before that update: placed at the step before")
            tname = next((k for k in r.values if _TIME_NAME.search(k) and not N.is_eval_name(k, user_map)
                          and rename.get(k, k) in vals and to_float(r.values[k]) is not None), None)
            if tname is not None:  # the evaluation's own duration: excluded from the wall clock (DESIGN.md)
                vals[N.EVAL_TIME] = vals.pop(rename.get(tname, tname))
                if not any(x.startswith("evaluation time") for x in notes):
                    notes.append(f"evaluation time: {tname!r} of the evaluation records (excluded from time/wall_s)")
            vals = {(k if N.is_validation_side(k, user_map) else "val-aux/" + k): v for k, v in vals.items()}
        else:
            last_train = s if last_train is None else max(last_train, s)
            rate = next((k for k in RATE_NAMES if k in vals), None)
            if rate is not None and not any((N.canonical_for(k, user_map) or ("",))[0] == "time/step_s" for k in vals):
                x = to_float(vals[rate])
                if x is not None and math.isfinite(x) and x > 0:
                    vals["time/step_s"] = 1.0 / x
                    if not any(n.startswith("time/step_s: 1 /") for n in notes):
                        notes.append(f"time/step_s: 1 / {rate!r} (iterations per second of the step)")
        keys = set(vals)
        if rows and rows[-1].get("step") == s and not (keys & last_step_keys.get(s, set())):
            rows[-1].update(vals)  # another kind of record of the same step (rollout / train / eval lines)
            for k, v in counter_vals.items():
                rows[-1].setdefault(k, v)
            last_step_keys[s] |= keys
            continue
        row = {"step": s, **vals, **counter_vals}
        rows.append(row)
        lines.append(r.line)
        last_step_keys[s] = keys
    batch = batch_from_steps(rows, notes)
    return Organized(rows=rows, lines=lines, config=config, step_counter=step_name or lab_opt or lab_roll,
                     rollout_counter=roll, notes=notes, summary=summary, last_train_step=last_train,
                     renamed={v: k for k, v in rename.items()}, batch=batch)


_TIME_NAME = re.compile(r"(?i)time|seconds|duration|(?<![a-z])_?s$|_sec$")


def _aggregate_updates(data: list[Record], opt: str, roll: str) -> list[Record]:
    """Training records of one rollout (several optimizer updates) -> one record at the rollout's first training
    record: numbers averaged, timings summed, ``{opt}_last`` and ``updates`` added; other records unchanged."""
    groups: dict[float, list[Record]] = {}
    out: list[Record | float] = []
    for r in data:
        rv = to_float(r.values.get(roll)) if roll in r.values else None
        if r.kind != "eval" and opt in r.values and rv is not None and _has_training(r.values):
            if rv not in groups:
                groups[rv] = []
                out.append(rv)
            groups[rv].append(r)
        else:
            out.append(r)
    merged: list[Record] = []
    for item in out:
        if isinstance(item, Record):
            merged.append(item)
            continue
        rs = groups[item]
        vals: dict[str, Any] = {}
        names = [k for k in dict.fromkeys(k for r in rs for k in r.values) if k not in (opt, roll)]
        for k in names:
            xs = [to_float(r.values[k]) for r in rs if k in r.values and to_float(r.values[k]) is not None]
            xs = [x for x in xs if math.isfinite(x)]
            if xs:
                vals[k] = sum(xs) if _TIME_NAME.search(k) else sum(xs) / len(xs)
        vals[roll] = item
        vals[f"{opt}_last"] = max(to_float(r.values[opt]) for r in rs)
        vals["updates"] = len({to_float(r.values[opt]) for r in rs})
        merged.append(Record(rs[0].line, vals, rs[0].form, rs[0].kind, rs[0].label, rs[0].label_counter))
    return merged


#: per-step fields that state the batch of a custom loop's rollout or training records, most specific first
STEP_PROMPTS = ("prompts_per_step", "num_prompts", "n_prompts", "num_questions", "n_questions", "questions_per_step",
                "prompts_per_rollout", "num_groups", "n_groups")
STEP_GROUP = ("num_generations", "n_samples_per_prompt", "samples_per_prompt", "responses_per_prompt",
              "completions_per_prompt", "rollouts_per_prompt", "generations_per_prompt", "n_generations", "group_size")
STEP_TOTAL = ("num_rollouts", "n_rollouts", "rollout_batch_size", "num_completions", "num_responses",
              "responses_per_step", "completions_per_step")
STEP_UPDATE = ("responses_per_update", "update_batch_size", "train_batch_size", "mini_batch_size", "minibatch_size",
               "ppo_mini_batch_size", "optimizer_batch_size")
STEP_EPOCHS = ("epochs_per_rollout_batch", "epochs_per_rollout", "ppo_epochs", "num_ppo_epochs", "update_epochs",
               "inner_epochs")


def _constants(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Numeric fields that hold one value in every training row that carries them (a rollout's size)."""
    seen: dict[str, set[float]] = {}
    for r in rows:
        for k, v in r.items():
            x = to_float(v)
            if x is not None and math.isfinite(x) and not isinstance(v, bool):
                seen.setdefault(k, set()).add(x)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def batch_from_steps(rows: list[dict[str, Any]], notes: list[str] | None = None) -> ConfigFound | None:
    """P, G and the update batch a custom loop states in its per-step records (``num_questions: 32, group_size: 8.0,
    num_rollouts: 256`` in each rollout record; ``train_batch_size: 128`` in each update record), or None.

    A field counts only when it holds one value throughout. P and G are taken when both are there and agree with a
    stated total (P x G responses), or one of them is there with the total; a disagreement leaves both unknown (and
    says so). The update batch (responses per optimizer update) is taken only when the log's own update count
    confirms it: updates per rollout = epochs x P x G / update batch (``epochs_per_rollout_batch`` where stated)."""
    notes = notes if notes is not None else []
    c = _constants([r for r in rows if not any(N.is_validation_side(k) for k in r if k != "step") or
                    any(_is_training_name(k) for k in r)])

    def first(names: tuple[str, ...]) -> tuple[str, int] | None:
        for n in names:
            if n in c and c[n] >= 1 and c[n] == int(c[n]):
                return n, int(c[n])
        return None

    p, g, t = first(STEP_PROMPTS), first(STEP_GROUP), first(STEP_TOTAL)
    out = ConfigFound()
    where = "in every record that logs it"
    if p and g:
        if t and p[1] * g[1] != t[1]:
            notes.append(f"{p[0]} = {p[1]} and {g[0]} = {g[1]} disagree with {t[0]} = {t[1]}: P and G left unknown "
                         "(--set RUN:prompts_per_step=... --set RUN:group_size=...)")
            return None
        out.prompts_per_step, out.group_size = p[1], g[1]
        out.sources["prompts_per_step"] = f"{p[0]} = {p[1]} ({where})"
        out.sources["group_size"] = f"{g[0]} = {g[1]} ({where})" + (f"; {t[0]} = {t[1]} = P x G" if t else "")
    elif g and t and t[1] % g[1] == 0 and g[0] != "group_size":
        out.prompts_per_step, out.group_size = t[1] // g[1], g[1]
        out.sources["prompts_per_step"] = f"{t[0]} / {g[0]} = {t[1]} / {g[1]} ({where})"
        out.sources["group_size"] = f"{g[0]} = {g[1]} ({where})"
    elif p and t and t[1] % p[1] == 0:
        out.prompts_per_step, out.group_size = p[1], t[1] // p[1]
        out.sources["prompts_per_step"] = f"{p[0]} = {p[1]} ({where})"
        out.sources["group_size"] = f"{t[0]} / {p[0]} = {t[1]} / {p[1]} ({where})"
    else:
        return None
    total = out.prompts_per_step * out.group_size
    u = first(STEP_UPDATE)
    if u and u[1] < total and total % u[1] == 0:
        per_epoch = total // u[1]
        upd = c.get("updates")
        ep = first(STEP_EPOCHS)
        epochs = ep[1] if ep else (int(upd // per_epoch) if upd and upd % per_epoch == 0 else None)
        if upd and epochs and upd == epochs * per_epoch:
            out.update_batch = u[1]
            out.sources["update_batch"] = (f"{u[0]} = {u[1]} responses per update ({where}); the log's "
                                           f"{int(upd)} updates per rollout = {epochs} epoch(s) x {total} / {u[1]}")
        else:
            notes.append(f"{u[0]} = {u[1]} may be the update batch (P x G = {total}), but the log's update count "
                         f"does not confirm it: B taken as P x G")
    return out


def _has_training(vals: dict[str, Any]) -> bool:
    """True when ``vals`` hold a training measurement: a name of the canonical table (not validation-side) or one
    meaning a loss, reward, gradient norm, lr or timing (:data:`TRAINING_WORDS`), not a setting."""
    return any((N.canonical_for(k) is not None and not N.is_validation_side(k)) or _is_training_name(k)
               for k, v in vals.items() if to_float(v) is not None and k not in OTHER_COUNTERS
               and not is_counter(k))


def _looks_eval(name: str) -> bool:
    return bool(EVAL_WORDS.search(name.split("/")[0])) or name.startswith(N.VALIDATION_PREFIXES)


# ---- run-level config -----------------------------------------------------------------------------------------

#: meaning -> config keys (flat, ``/``-joined, last component matched too), most specific first
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "prompts_per_step": ("prompts_per_step", "n_prompts", "num_prompts", "prompts_per_batch", "prompt_batch_size",
                         "data/train_batch_size", "rollout_batch_size_prompts", "batch_size_prompts",
                         "rollout_batch_size", "rollout/batch_size", "trainer/train_batch_size"),
    "group_size": ("num_generations", "n_samples_per_prompt", "samples_per_prompt", "completions_per_prompt",
                   "num_samples_per_prompt", "responses_per_prompt", "rollout/n", "actor_rollout_ref/rollout/n",
                   "n_generations", "group_size"),
    "update_batch": ("responses_per_update", "update_batch_size", "train_batch_size_responses", "mini_batch_size",
                     "train_mini_batch_size", "minibatch_size"),
    "lr": ("learning_rate", "actor_lr", "actor_learning_rate", "lr", "optim/lr", "actor/optim/lr",
           "actor_rollout_ref/actor/optim/lr", "policy_lr"),
    "batch_size": ("batch_size", "train_batch_size", "global_batch_size"),
    "per_device_train_batch_size": ("per_device_train_batch_size",),
    "gradient_accumulation_steps": ("gradient_accumulation_steps",),
}


@dataclass
class ConfigFound:
    """P, G, the update batch (responses per optimizer update) and the lr a file states, each with where it came
    from (``sources``: field -> text)."""

    prompts_per_step: int | None = None
    group_size: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    update_batch: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def fill_from(self, other: "ConfigFound | None") -> None:
        """Take from ``other`` what this one lacks: P and G together (never one from each source), the update batch
        when it divides this P x G, the batch size and lr; each with its source."""
        if other is None:
            return
        if self.prompts_per_step is None and self.group_size is None and other.prompts_per_step and other.group_size:
            self.prompts_per_step, self.group_size = other.prompts_per_step, other.group_size
            for f in ("prompts_per_step", "group_size"):
                self.sources[f] = other.sources[f]
        p, g, u = self.prompts_per_step, self.group_size, other.update_batch
        if self.update_batch is None and u and p and g and (p * g) % u == 0 and \
                (p, g) == (other.prompts_per_step, other.group_size):
            self.update_batch, self.sources["update_batch"] = u, other.sources["update_batch"]
        for f in ("batch_size", "lr"):
            if getattr(self, f) is None and getattr(other, f) is not None:
                setattr(self, f, getattr(other, f))
                self.sources[f] = other.sources[f]

    def fields(self) -> dict[str, Any]:
        """Run-metadata fields: P and G (and, when a mini-batch splits the rollout of P x G responses into several
        updates, ``batch_size`` = the mini-batch and ``rollout_batch_size`` = P x G); else the batch alone; lr."""
        out: dict[str, Any] = {}
        p, g = self.prompts_per_step, self.group_size
        if p and g:
            out["prompts_per_step"], out["group_size"] = p, g
            u = self.update_batch
            if u and u < p * g and (p * g) % u == 0:
                out["batch_size"], out["rollout_batch_size"] = u, p * g
        elif self.update_batch or self.batch_size:
            out["batch_size"] = self.update_batch or self.batch_size
        if self.lr:
            out["lr"] = self.lr
        return out

    def field_sources(self) -> dict[str, str]:
        """The source of each of :meth:`fields`."""
        f = self.fields()
        out = {k: self.sources[k] for k in ("prompts_per_step", "group_size", "lr") if k in f and k in self.sources}
        if "rollout_batch_size" in f:
            out["batch_size"] = self.sources.get("update_batch", "")
            out["rollout_batch_size"] = f"P x G = {f['prompts_per_step']} x {f['group_size']}"
        elif "batch_size" in f:
            out["batch_size"] = self.sources.get("update_batch") or self.sources.get("batch_size", "")
        return out


def _get(cfg: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return k, cfg[k]
    for k in keys:  # last path components: "args/lr" for "lr"
        for ck, v in cfg.items():
            if v is not None and (ck.endswith("/" + k) or ck.replace(".", "/").endswith("/" + k) or
                                  ck.replace(".", "/") == k):
                return ck, v
    return None


def config_key(cfg: dict[str, Any], meaning: str) -> tuple[str, Any] | None:
    """``(key, value)`` of the first key of a flat config ``cfg`` that means ``meaning`` (:data:`CONFIG_KEYS`:
    prompts_per_step, group_size, lr, ...), as :func:`config_from_mapping` looks it up, or None."""
    return _get({str(k).replace("-", "_").lstrip("_"): v for k, v in cfg.items()}, CONFIG_KEYS[meaning])


def config_from_mapping(cfg: dict[str, Any], where: str) -> ConfigFound:
    """P, G, update batch and lr from a flat config mapping (a JSON config record, a notebook's ``GRPOConfig(...)``
    keywords, CLI flags). ``group_size`` alone is read as responses per prompt; a ``batch_size`` without P and G is
    the update batch. ``where`` names the source in :attr:`ConfigFound.sources`."""
    cfg = {str(k).replace("-", "_").lstrip("_"): v for k, v in cfg.items()}
    out = ConfigFound()
    for f in ("prompts_per_step", "group_size", "lr", "batch_size", "update_batch"):
        hit = _get(cfg, CONFIG_KEYS[f])
        if hit is None:
            continue
        k, v = hit
        if f == "lr":
            x = to_float(v)
            if x is not None and math.isfinite(x) and 0 < x < 1:
                out.lr, out.sources["lr"] = x, f"{k} = {v} ({where})"
            continue
        c = to_count(v)
        if not c:
            continue
        if f == "update_batch":
            out.update_batch, out.sources["update_batch"] = c, f"{k} = {v} responses per update ({where})"
        elif f == "batch_size":
            if out.batch_size is None:
                out.batch_size, out.sources["batch_size"] = c, f"{k} = {v} ({where})"
        else:
            setattr(out, f, c)
            out.sources[f] = f"{k} = {v} ({where})"
    return out


KWARG = re.compile(r"(?m)^\s*([A-Za-z_]\w*)\s*=\s*([^,#\n]+?)\s*,?\s*(?:#.*)?$")
FLAG = re.compile(r"(?:^|\s)--([A-Za-z][\w.-]*)[= ]([^\s\\'\"]+)")
UNSLOTH_TOTAL = re.compile(r"Total batch size(?: \((\d+) x (\d+) x (\d+)\))? = ([\d,]+)")
UNSLOTH_CHANGE = re.compile(r"change the batch size of (\d+) to the `num_generations` of (\d+)")
TRL_CONFIG_CALL = re.compile(r"(?:GRPOConfig|TrainingArguments|RLOOConfig|PPOConfig|Config)\s*\(")


def _kwargs(src: str) -> dict[str, Any]:
    """``name = literal`` keyword lines of a call (a notebook's ``GRPOConfig(...)`` cell), literals only."""
    out: dict[str, Any] = {}
    for k, v in KWARG.findall(src):
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return out


def find_config(text: str, *, code: Iterable[str] = (), mapping: dict[str, Any] | None = None) -> ConfigFound:
    """P, G, the update batch and the lr stated in a log's ``text`` (and a notebook's ``code`` cells, a config
    ``mapping`` from config records), with the source of each.

    Sources, in order: the config mapping (JSON config records); ``GRPOConfig(...)`` / ``TrainingArguments(...)``
    keyword cells; CLI flags (``--lr 2e-5``, ``--num_generations 8``); Unsloth's banner (``Total batch size
    (4 x 8 x 1) = 32`` completions per update, ``change the batch size of 2 to the num_generations of 4``).
    TRL >= 0.15 counts completions in the batch (P = batch / G when G divides it; Unsloth's batch change says so);
    older TRL counted prompts (P = the batch when G does not divide it); the note says which was assumed.
    """
    found = ConfigFound()

    def merge(c: ConfigFound) -> None:
        for f in ("prompts_per_step", "group_size", "batch_size", "lr", "update_batch"):
            if getattr(found, f) is None and getattr(c, f) is not None:
                setattr(found, f, getattr(c, f))
                found.sources[f] = c.sources[f]

    if mapping:
        nested = any(isinstance(v, dict) for v in mapping.values())
        merge(config_from_mapping(flatten(mapping, "/", drop_lists=True) if nested else mapping, "config record"))
    kw: dict[str, Any] = {}
    for src in code:
        if TRL_CONFIG_CALL.search(src):
            kw.update(_kwargs(src))
    if kw:
        merge(config_from_mapping(kw, "config cell"))
    launch = launch_config(text)
    if launch is not None:
        merge(launch)
    flags = {k.replace("-", "_"): v for k, v in FLAG.findall(text[:200000])}
    if flags:
        merge(config_from_mapping(flags, "command-line flags"))
        for k in ("per_device_train_batch_size", "gradient_accumulation_steps"):
            if k in flags and k not in kw:
                kw[k] = flags[k]
    g = found.group_size
    text = text[:HEAD_CHARS] if len(text) > HEAD_CHARS else text  # a run states its setup at its start
    ch = UNSLOTH_CHANGE.search(text)
    if ch and not g:
        g = int(ch.group(2))
        found.group_size, found.sources["group_size"] = g, f"num_generations {g} (Unsloth: {ch.group(0)!r})"
    tot = UNSLOTH_TOTAL.search(text)
    per_dev = to_count(kw.get("per_device_train_batch_size")) if kw else None
    total = int(tot.group(4).replace(",", "")) if tot else None
    if total and g and not found.prompts_per_step:
        if total % g == 0 and (ch or tot.group(1) is not None or total >= g):
            found.prompts_per_step = total // g
            found.sources["prompts_per_step"] = (f"{total} completions per update / num_generations {g} (trainer "
                                                 f"banner {tot.group(0)!r}; TRL >= 0.15 counts completions)")
        else:
            found.prompts_per_step = total
            found.sources["prompts_per_step"] = (f"{total} prompts per update (trainer banner {tot.group(0)!r}: not "
                                                 f"a multiple of num_generations {g}, so the batch counts prompts, "
                                                 "as TRL < 0.15 did)")
    elif per_dev and g and not found.prompts_per_step and not tot:
        ga = to_count(kw.get("gradient_accumulation_steps")) or 1
        np_m = NPROC.search(text[:200000])
        nproc = int(np_m.group(1)) if np_m else 1
        b = per_dev * ga * nproc
        found.prompts_per_step = b // g if b % g == 0 else b
        found.sources["prompts_per_step"] = (
            f"per_device_train_batch_size x gradient_accumulation_steps x processes = {per_dev} x {ga} x {nproc} = "
            f"{b} " + (f"completions / num_generations {g} (TRL >= 0.15 counts completions)" if b % g == 0 else
                       f"prompts (not a multiple of num_generations {g}: counted as prompts, as TRL < 0.15 did)")
            + ("" if np_m else "; one process assumed (no NPROC_PER_NODE / --nproc_per_node in the log)"))
    return found


#: how far into a run's text its setup (launch command, banner, config) is looked for
HEAD_CHARS = 4_000_000
NPROC = re.compile(r"(?:NPROC_PER_NODE=|--nproc[_-]per[_-]node[= ]|--num[_-]processes[= ])(\d{1,4})")
#: a launch command in a log: verl / OpenRLHF / TRL entry points (its continuation lines joined)
LAUNCH = re.compile(r"verl\.trainer\.main_\w+|openrlhf\.cli\.train_\w+|train_ppo_ray|swift\s+rlhf|trl\s+grpo")


def launch_config(text: str) -> ConfigFound | None:
    """P, G, update batch and lr of the launch command printed in a log (verl / OpenRLHF / TRL), through
    :func:`rlbatch.batchspec.batch_spec` (one reading of each framework's batch); only values the command sets
    (no framework defaults). None when the log prints no launch command."""
    head = text[:2_000_000]
    m = LAUNCH.search(head)
    if not m:
        return None
    start = head.rfind("\n", 0, m.start()) + 1
    end = start
    while True:  # the command and its backslash continuations
        nl = head.find("\n", end)
        if nl < 0:
            end = len(head)
            break
        line = head[end:nl].rstrip()
        end = nl + 1
        if not line.endswith("\\"):
            break
    cmd = head[start:end]
    for v, val in re.findall(r"(?m)^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=(\S+)", head[:start][-5000:]):
        cmd = f"{v}={val}\n" + cmd  # shell variables set just before the command
    try:
        spec = batch_spec(cmd)
    except UserError:
        return None
    return launch_config_from_spec(spec, f"{spec.framework} launch command")


def launch_config_from_spec(spec, where: str) -> ConfigFound:
    """A :class:`ConfigFound` of the values a :class:`rlbatch.batchspec.BatchSpec` read from its source (not the
    framework defaults it filled in)."""
    out = ConfigFound()

    def explicit(field: str) -> bool:
        return field in spec.sources and "not set" not in spec.sources[field]

    if explicit("prompts_per_step") and explicit("responses_per_prompt"):
        out.prompts_per_step, out.group_size = spec.prompts_per_step, spec.responses_per_prompt
        out.sources["prompts_per_step"] = f"{spec.sources['prompts_per_step']} ({where})"
        out.sources["group_size"] = f"{spec.sources['responses_per_prompt']} ({where})"
        if explicit("responses_per_update") and spec.responses_per_update:
            out.update_batch = spec.responses_per_update
            out.sources["update_batch"] = f"{spec.sources['responses_per_update']} ({where})"
    if explicit("lr") and spec.lr:
        out.lr, out.sources["lr"] = spec.lr, f"{spec.sources['lr']} ({where})"
    return out


# ---- runs in one file -----------------------------------------------------------------------------------------

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
    parts: list[list[Record]] = [[]]
    first = top = None
    for r in records:
        s = _step_of(r, counter)
        if s is not None:
            if top is not None and s < top and first is not None and s <= first and \
                    sum(_has_training(x.values) for x in parts[-1]) >= 2:
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
        if last & set(SUMMARY_KEYS) and not _has_training({k: v for k, v in r.values.items()
                                                          if k.rsplit("/", 1)[-1] not in SUMMARY_KEYS}):
            parts.append([])
    parts = [p for p in parts if p]
    if len(parts) > 1 and all(sum(_has_training(x.values) and not (
            {k.rsplit("/", 1)[-1] for k in x.values} & set(SUMMARY_KEYS)) for x in p) for p in parts):
        return [RunPart(None, p, f"a final summary ends a run before line {parts[i + 1][0].line}"
                        if i + 1 < len(parts) else "the last run after a final summary")
                for i, p in enumerate(parts)]
    return [RunPart(None, records, "")]


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


def json_document_records(obj: Any) -> tuple[list[Record], dict[str, Any], str] | None:
    """Records from a whole-file JSON document that is not one record per line, or None:

    - a list of objects (``[{"step": 1, ...}, ...]``);
    - an object holding such a list (``{"history": [...], "config": {...}}``; the other scalars and objects are its
      config);
    - an object of columns (``{"steps": [...], "losses": [...], "val_rewards": [...]}``): the lists of the most
      common length are the rows (names singular: ``losses`` -> ``loss``); a ``null`` is a missing value.

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


def final_eval(text: str) -> FinalEval | None:
    """The last evaluation score printed after the last training record of ``text`` (:data:`FINAL_EVAL`), or None.
    A percent (``26.7%``, or a value above 1 for an accuracy-like name) becomes a fraction."""
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
