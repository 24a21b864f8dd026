"""Verifiable tasks for RL: prompts, fixed seeded train/eval splits and a scorer returning a reward in [0, 1].

Three kinds (:func:`get_task`):
- ``arithmetic``: a compact task for the ``tiny`` preset: two-digit addition ``"47+85="`` whose answer is written
  with its digits reversed (``"231"`` for 132), which a 2-layer character model can learn; reward 1 for an exact match.
- reasoning-gym generators (any name ``reasoning_gym.create_dataset`` knows, e.g. ``chain_sum``,
  ``basic_arithmetic``, ``countdown``), scored by the generator's own ``score_answer``.
- ``gsm8k`` (the GSM8K parquet directory: ``$RLBATCH_GSM8K``, else a ``shared/data/gsm8k`` beside the checkout) and any ``.parquet``/``.jsonl`` file or directory in verl's RL schema
  (``prompt`` = chat messages, ``reward_model.ground_truth``), scored with ``math-verify``.

Every task gives the same interface: ``train_size``, ``sample(rng, n)`` (training prompts, with replacement, from a
numpy ``Generator``), ``eval_items`` (the fixed held-out set) and ``score(item, completion) -> float``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlbatch.errors import UserError

#: Characters of the ``arithmetic`` task (and of the ``tiny`` preset's tokenizer).
ARITH_CHARS = "0123456789+="


@dataclass
class Item:
    """One prompt: ``prompt`` is plain text or a list of chat messages; ``answer`` the reference; ``entry`` the raw
    record the scorer needs (reasoning-gym entry, verl row)."""

    prompt: str | list[dict[str, str]]
    answer: str
    entry: Any = None


@dataclass
class Task:
    """A task: training pool, fixed held-out eval items, and a scorer (see module docstring)."""

    name: str
    train: list[Item]
    eval_items: list[Item]
    scorer: Any = None  # callable(item, completion) -> float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def train_size(self) -> int:
        return len(self.train)

    def sample(self, rng: np.random.Generator, n: int) -> list[Item]:
        """``n`` training prompts drawn uniformly with replacement using ``rng``."""
        idx = rng.integers(0, len(self.train), size=n)
        return [self.train[i] for i in idx]

    def step_prompts(self, seed: int, step: int, n: int) -> list[Item]:
        """The ``n`` prompts of training step ``step`` of a run seeded ``seed``: :meth:`sample` with
        ``numpy.random.default_rng([seed, step])`` (the synchronous loop, the asynchronous generator and the TRL
        entry point draw the same prompts this way)."""
        return self.sample(np.random.default_rng([seed, step]), n)

    def score(self, item: Item, completion: str) -> float:
        """Reward in [0, 1] for ``completion`` (decoded response text, without the prompt)."""
        return float(self.scorer(item, completion))


# --------------------------------------------------------------------------------------------------- arithmetic
def _arith_item(a: int, b: int) -> Item:
    return Item(prompt=f"{a}+{b}=", answer=str(a + b)[::-1])


def _exact(item: Item, completion: str) -> float:
    return 1.0 if completion.strip() == item.answer else 0.0


def arithmetic_task(seed: int = 0, eval_size: int = 512, lo: int = 10, hi: int = 99) -> Task:
    """Two-digit addition with the answer reversed (carry-friendly for left-to-right decoding).

    All ``(hi-lo+1)^2`` problems (8100 by default) are shuffled with ``seed``; the first ``eval_size`` are the
    held-out set, the rest the training pool. Reward: 1 if the response (up to EOS) equals the reversed sum, else 0.
    """
    pairs = [(a, b) for a in range(lo, hi + 1) for b in range(lo, hi + 1)]
    order = np.random.default_rng(seed).permutation(len(pairs))
    items = [_arith_item(*pairs[i]) for i in order]
    if eval_size >= len(items):
        raise UserError(f"eval_size {eval_size} leaves no training problems (only {len(items)})", field="eval_size")
    return Task("arithmetic", train=items[eval_size:], eval_items=items[:eval_size], scorer=_exact)


# --------------------------------------------------------------------------------------------------- answers
_NUM = re.compile(r"-?\d+(?:[.,]\d+)*")


def extract_answer(text: str) -> str:
    """The final answer in a response: inside ``<answer>...</answer>``, after the last ``####`` or
    ``answer:``/``answer is``, else the last number when there is one, else the stripped text."""
    m = re.findall(r"<answer>(.*?)</answer>", text, flags=re.S)
    if m:
        return m[-1].strip()
    if "####" in text:
        return text.rsplit("####", 1)[1].strip().split("\n")[0].strip()
    low = text.lower()
    for key in ("answer is", "answer:"):
        if key in low:
            tail = text[low.rfind(key) + len(key):].strip().split("\n")[0].strip().rstrip(".")
            if tail:
                return tail
    nums = _NUM.findall(text)
    if nums:
        return nums[-1].replace(",", "")
    return text.strip()


# --------------------------------------------------------------------------------------------------- reasoning-gym
def _unknown_task(name: str, why: str) -> UserError:
    return UserError(f"unknown task {name!r} ({why}); use arithmetic, gsm8k, a verl parquet/jsonl path or a "
                     f"reasoning-gym name such as chain_sum, basic_arithmetic, countdown", field="task")


def reasoning_gym_task(name: str, seed: int = 0, eval_size: int = 256, train_size: int = 20000) -> Task:
    """A reasoning-gym generator: eval items from seed ``seed + 1_000_003``, training items from ``seed`` with any
    question that also appears in the eval set removed. Scored by the generator's ``score_answer`` applied to
    :func:`extract_answer` of the response. Unknown names raise :class:`UserError`."""
    try:
        import reasoning_gym
    except ImportError:  # pragma: no cover - a runtime dependency
        raise UserError("task needs the reasoning-gym package: pip install reasoning-gym") from None
    try:
        ev = reasoning_gym.create_dataset(name, size=eval_size, seed=seed + 1_000_003)
        tr = reasoning_gym.create_dataset(name, size=train_size, seed=seed)
    except Exception as err:  # reasoning-gym raises various types for unknown names
        raise _unknown_task(name, str(err)) from None
    eval_items = [Item(prompt=[{"role": "user", "content": e["question"]}], answer=str(e["answer"]), entry=e)
                  for e in ev]
    seen = {it.prompt[0]["content"] for it in eval_items}
    train = [Item(prompt=[{"role": "user", "content": e["question"]}], answer=str(e["answer"]), entry=e)
             for e in tr if e["question"] not in seen]

    def scorer(item: Item, completion: str) -> float:
        try:
            return float(ev.score_answer(answer=extract_answer(completion), entry=item.entry))
        except Exception:
            return 0.0

    return Task(name, train=train, eval_items=eval_items, scorer=scorer, meta={"source": "reasoning-gym"})


# --------------------------------------------------------------------------------------------------- verl parquet
def _read_verl_file(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pandas as pd

        try:
            return pd.read_parquet(path).to_dict(orient="records")
        except Exception as err:
            raise UserError(f"not a readable parquet file ({err})", path=str(path)) from None
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise UserError(f"malformed JSON ({err.msg})", path=str(path), line=i) from None
    return rows


def _verl_item(row: dict, path: Path, i: int) -> Item:
    prompt = row.get("prompt")
    if prompt is None:
        raise UserError("missing column 'prompt' (verl schema: prompt, reward_model.ground_truth)",
                        path=str(path), line=i + 1)
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in list(prompt)]
    rm = row.get("reward_model") or {}
    gt = rm.get("ground_truth") if isinstance(rm, dict) else None
    if gt is None:
        raise UserError("missing field 'reward_model.ground_truth'", path=str(path), line=i + 1)
    return Item(prompt=messages, answer=str(gt), entry=None)


def math_verify_score(item: Item, completion: str) -> float:
    """1 if ``math-verify`` judges the response's final answer equal to the ground truth, else 0."""
    from math_verify import parse, verify

    try:
        gold = parse(item.answer)
        for cand in (completion, extract_answer(completion)):
            if verify(gold, parse(cand)):
                return 1.0
    except Exception:
        return 0.0
    return 0.0


def verl_task(path: Path, name: str, seed: int = 0, eval_size: int = 256) -> Task:
    """A verl-schema dataset. ``path``: a directory with ``train.parquet``/``test.parquet`` (or ``.jsonl``), or
    one file (then ``eval_size`` rows, chosen with ``seed``, are held out). The eval set is the first ``eval_size``
    rows of the test split (fixed). Scored with :func:`math_verify_score`."""
    path = Path(path)
    if path.is_dir():
        files = {p.stem: p for p in sorted(path.iterdir()) if p.suffix in (".parquet", ".jsonl")}
        if "train" not in files or "test" not in files:
            raise UserError("expected train.parquet and test.parquet (or .jsonl) in the directory", path=str(path))
        tr_rows, te_rows = _read_verl_file(files["train"]), _read_verl_file(files["test"])
        train = [_verl_item(r, files["train"], i) for i, r in enumerate(tr_rows)]
        test = [_verl_item(r, files["test"], i) for i, r in enumerate(te_rows)]
        eval_items = test[:eval_size]
    elif path.is_file():
        items = [_verl_item(r, path, i) for i, r in enumerate(_read_verl_file(path))]
        order = np.random.default_rng(seed).permutation(len(items))
        eval_items = [items[i] for i in order[:eval_size]]
        train = [items[i] for i in order[eval_size:]]
    else:
        raise UserError("no such file or directory", path=str(path))
    if not train or not eval_items:
        raise UserError("dataset has no training or no evaluation rows", path=str(path))
    return Task(name, train=train, eval_items=eval_items, scorer=math_verify_score, meta={"source": str(path)})


def _shared_gsm8k() -> Path:
    """The GSM8K parquet directory: ``$RLBATCH_GSM8K`` if set, else ``shared/data/gsm8k`` found beside the working
    directory or the checkout (or one of their parents). Raises :class:`UserError` when there is none."""
    env = os.environ.get("RLBATCH_GSM8K")
    if env:
        if not Path(env).is_dir():
            raise UserError("RLBATCH_GSM8K is not a directory", path=env)
        return Path(env)
    here = Path(__file__).resolve()
    for parent in [Path.cwd(), *Path.cwd().parents, *here.parents]:
        cand = parent / "shared" / "data" / "gsm8k"
        if cand.is_dir():
            return cand
    raise UserError("gsm8k: no shared/data/gsm8k directory found beside the checkout; pass the parquet directory "
                    "as --task PATH or set RLBATCH_GSM8K")


# --------------------------------------------------------------------------------------------------- registry
def get_task(name: str | Path, seed: int = 0, eval_size: int | None = None) -> Task:
    """Task by name: ``arithmetic``, ``gsm8k``, a path to a verl parquet/jsonl file or directory, or a
    reasoning-gym generator name. ``seed`` fixes the train/eval split. Raises :class:`UserError` for unknown names."""
    name = str(name)
    if name == "arithmetic":
        return arithmetic_task(seed=seed, eval_size=eval_size or 512)
    if name == "gsm8k":
        return verl_task(_shared_gsm8k(), "gsm8k", seed=seed, eval_size=eval_size or 256)
    p = Path(name)
    if p.suffix in (".parquet", ".jsonl") or p.is_dir() or "/" in name:
        return verl_task(p, p.stem, seed=seed, eval_size=eval_size or 256)
    return reasoning_gym_task(name, seed=seed, eval_size=eval_size or 256)


def check_task(name: str | Path) -> None:
    """Raise the :class:`UserError` :func:`get_task` would raise for ``name``, without loading the task: an unknown
    reasoning-gym name, a missing file or directory, no GSM8K directory found. Cheap (no dataset is built), so that a
    sweep can refuse a mistyped ``--task`` before it writes anything."""
    name = str(name)
    kind = _kind(name)  # get_task's own dispatch
    if name == "gsm8k":
        _shared_gsm8k()
    elif kind == "verl" and not Path(name).exists():
        raise UserError("task file or directory not found", path=name)
    elif kind == "reasoning-gym":
        try:
            from reasoning_gym.factory import DATASETS
        except ImportError:  # pragma: no cover - a runtime dependency
            raise UserError("task needs the reasoning-gym package: pip install reasoning-gym") from None
        if name not in DATASETS:
            raise _unknown_task(name, "not a reasoning-gym dataset")


# --------------------------------------------------------------------------------------------------- defaults, words
#: Default cap on generated tokens per response, per kind of task: long enough not to cut a task's answers short.
#: ``arithmetic``: a reversed sum of two two-digit numbers has at most 3 digits, + EOS = 4 tokens (5 leaves one
#: spare); reasoning-gym: room for a short chain of thought before the answer; GSM8K / verl files: verl's usual
#: ``data.max_response_length`` for GSM8K-sized problems.
MAX_NEW_TOKENS = {"arithmetic": 5, "reasoning-gym": 256, "verl": 512}


def _kind(name: str | Path) -> str:
    name = str(name)
    if name == "arithmetic":
        return "arithmetic"
    p = Path(name)
    if name == "gsm8k" or p.suffix in (".parquet", ".jsonl") or p.is_dir() or "/" in name:
        return "verl"
    return "reasoning-gym"


def default_max_new_tokens(name: str | Path) -> int:
    """The ``--max-new-tokens`` default of task ``name`` (:data:`MAX_NEW_TOKENS`; no task is loaded)."""
    return MAX_NEW_TOKENS[_kind(name)]


def score_description(name: str | Path | None) -> str:
    """What ``eval/score`` measures for task ``name``, in words (for report axes and captions); a generic sentence
    for an unknown or foreign task."""
    if name is None:
        return "held-out score (the task's own metric, in [0, 1])"
    kind = _kind(name)
    if kind == "arithmetic":
        return ("fraction of held-out two-digit additions answered exactly (sum written with its digits reversed; "
                "greedy decoding)")
    if str(name) == "gsm8k":
        return "fraction of held-out GSM8K problems whose final answer math-verify accepts (greedy decoding)"
    if kind == "verl":
        return (f"fraction of held-out items of {Path(str(name)).stem} whose answer math-verify accepts "
                "(greedy decoding)")
    return f"mean reasoning-gym score of {name} on held-out items (greedy decoding)"
