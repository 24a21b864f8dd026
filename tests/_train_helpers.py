"""Shared by the trainer tests: a task a random model gets right about a third of the time, and model copies."""

import copy

from rlbatch.train.tasks import Item, Task


def coin_task() -> Task:
    """Reward 1 if the response starts with 0-4: learnable signal for a tiny random model."""
    items = [Item(prompt=f"{a}+{a}=", answer="") for a in range(10, 60)]
    return Task("coin", train=items[10:], eval_items=items[:10], scorer=lambda it, c: float(c[:1] in "01234"))


def coin_score(item, completion: str) -> float:
    """:func:`coin_task`'s scorer as a module-level function (picklable: another process can score with it)."""
    return float(completion[:1] in "01234")


def coin_task_picklable() -> Task:
    """:func:`coin_task` with a picklable scorer (the asynchronous generator then scores and lays out batches)."""
    items = [Item(prompt=f"{a}+{a}=", answer="") for a in range(10, 60)]
    return Task("coin", train=items[10:], eval_items=items[:10], scorer=coin_score)


def fresh(tiny):
    """A deep copy of the ``(model, tokenizer)`` pair so each test trains its own model."""
    model, tok = tiny
    return copy.deepcopy(model), tok


class Kill(Exception):
    """Raised by :func:`killing_task`'s scorer: a simulated kill in the middle of a run."""


def killing_task(after_calls: int) -> Task:
    """coin_task whose scorer raises :class:`Kill` after ``after_calls`` scored training responses."""
    t = coin_task()
    base = t.scorer
    count = {"n": 0}
    evals = {id(x) for x in t.eval_items}

    def scorer(it, c):
        count["n"] += id(it) not in evals  # count training responses only
        if count["n"] > after_calls:
            raise Kill()
        return base(it, c)

    t.scorer = scorer
    return t
