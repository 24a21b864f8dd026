"""Line scanning, the first stage of reading an unseen log (:mod:`rlbatch.readers.extract` gives the pipeline):
the patterns that recognise records in text, :class:`Record`, the containers that hold text (:func:`clean`: ANSI
codes and carriage-return bars; Jupyter notebooks; HTML tables) and :func:`scan`, which finds records in any
line-oriented text (JSON and Python-dict lines, ``step:N - a:x`` lines, ``key=value`` runs, Markdown tables), with
:func:`json_record` for JSON objects. Nothing is ``eval``'ed: dicts through :func:`ast.literal_eval` only."""

from __future__ import annotations

import ast
import html.parser
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from rlbatch.batchspec import flatten
from rlbatch.readers.common import ANSI, SCALAR_CALL, to_float


_NONFINITE = re.compile(r"(?<![\w'\"])(nan|inf|-inf)(?![\w'\"])")
#: a Python dict repr starting: ``{'name':`` or ``{"name":``
BARE_DICT = re.compile(r"^['\"][^'\"\n]{1,200}['\"]\s*:\s*[-+\d.'\"]")
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
    #: the file ended inside this record: only its complete fields were kept
    truncated: bool = False


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
        # a dict's body pasted without its braces ("'loss': -0.0, 'grad_norm': 0.0, ..." in an issue)
        if BARE_DICT.match(s) and "{" not in s and s.count(",") >= 2:
            d = parse_pydict("{" + s.rstrip(", ") + "}") or truncated_dict("{" + s)
            if d is not None:
                flat = _step_from_fraction(flatten({str(k): v for k, v in d.items()}, "/", drop_lists=True))
                if sum(to_float(v) is not None for v in flat.values()) >= 2:
                    out.append(Record(ln, flat, "dict"))
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
            if end < 0 and not nested and j >= n:  # the file ends inside the record: its complete fields
                d = truncated_dict(buf[start:])
                if d is not None:
                    lab, ctr, kind = _label(buf[:start])
                    flat = _step_from_fraction(flatten({str(k): v for k, v in d.items()}, "/", drop_lists=True))
                    out.append(Record(ln, flat, "dict", kind=kind, label=lab, label_counter=ctr,
                                      truncated=True))
                    i = j
                    continue
            if end >= 0 and not nested:
                d = parse_pydict(buf[start:end + 1])
                if d is not None:
                    lab, ctr, kind = _label(buf[:start])
                    flat = _step_from_fraction(flatten({str(k): v for k, v in d.items()}, "/", drop_lists=True))
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
    return Record(line, _step_from_fraction(vals), "json", kind=kind)


def _step_from_fraction(vals: dict[str, Any]) -> dict[str, Any]:
    """ms-swift's ``global_step/max_steps: "5/500"``: the step is 5 (kept as ``step`` when the record has none)."""
    frac = vals.get("global_step/max_steps")
    if "step" not in vals and isinstance(frac, str):
        a, _, b = frac.partition("/")
        if a.strip().isdigit():
            vals["step"] = int(a)
            if b.strip().isdigit():
                vals["max_steps"] = int(b)
    return vals


#: counters a record's step comes from (a last record cut off before one that every other record has is dropped)
STEP_COUNTERS = ("step", "global_step", "global_step/max_steps", "episode", "iteration", "train/step")


def lost_counter(before: list[dict[str, Any]], cut: dict[str, Any]) -> str | None:
    """The step counter every record ``before`` has and the cut-off last record ``cut`` lacks (it cannot be placed
    at a step: drop it), or None."""
    return next((k for k in STEP_COUNTERS if before and all(k in d for d in before) and k not in cut), None)


def truncated_dict(text: str) -> dict[str, Any] | None:
    """The complete fields of a dict cut off before its closing brace (a log's last line cut short, an excerpt):
    everything up to the last top-level comma, closed and parsed (JSON, else a Python literal). The field after that
    comma may be cut in half and is dropped. None when fewer than two fields survive."""
    depth = 0
    quote = None
    cut = -1
    i = 0
    while i < len(text):
        ch = text[i]
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
        elif ch == "," and depth == 1:
            cut = i
        i += 1
    if cut < 0:
        return None
    body = text[:cut] + "}"
    try:
        d = json.loads(body)
    except (ValueError, RecursionError):
        d = parse_pydict(body)
    return d if isinstance(d, dict) and len(d) >= 2 else None
