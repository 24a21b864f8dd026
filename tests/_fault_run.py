"""The runs of the fault tests (tests/test_faults.py), also run as a subprocess that a fault kills:

    python tests/_fault_run.py train OUT [--resume]
    python tests/_fault_run.py train-mb OUT [--resume]    (mini-batches and two epochs per rollout)
    python tests/_fault_run.py train-auto OUT [--resume]  (the online batch controller, --batch auto)
    python tests/_fault_run.py sweep OUT

Both use the ``tiny-random`` model on the "coin" task (reward 1 if a response starts with 0-4: a random model gets
it right about half the time, so groups are mixed and every step updates), installed in place of ``get_task``.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

TRAIN = dict(model="tiny-random", task="coin", prompts_per_step=2, group_size=4, lr=3e-3, samples=10_000, max_steps=6,
             max_new_tokens=4, eval_every=16, eval_size=8, checkpoint_every=2, micro_batch_size=4, threads=1)
#: the same run with the online batch controller (issue 55): B = 8, 16 or 32 (P = 2, 4, 8), a decision every 3 steps
TRAIN_AUTO = dict(TRAIN, batch="auto", batch_max=32, auto_window=3, max_steps=16)
#: the same run with PPO-style updates: mini-batches of one group (M = 4 of B = 8), two epochs per rollout
TRAIN_MB = dict(TRAIN, mini_batch_size=4, ppo_epochs=2)
SWEEP = dict(base_batch=4, base_lr=3e-3, batches=[8], rule="sqrt", group_sizes=[4], seeds=1, samples=32,
             model="tiny-random", task="coin",
             options=dict(max_new_tokens=4, eval_every=16, eval_size=8, micro_batch_size=4, checkpoint_every=2))


def coin_task(*_args, **_kw):
    from rlbatch.train.tasks import Item, Task

    items = [Item(prompt=f"{a}+{a}=", answer="") for a in range(10, 60)]
    return Task("coin", train=items[8:], eval_items=items[:8], scorer=lambda it, c: float(c[:1] in "01234"))


@contextmanager
def coin_task_installed():
    """While inside, ``get_task(...)`` returns the coin task (the trainer imports it at call time)."""
    import rlbatch.train.tasks as tasks

    real = tasks.get_task
    tasks.get_task = coin_task
    try:
        yield
    finally:
        tasks.get_task = real


def run_train(out: Path | str, resume: bool = False, mini_batches: bool = False, auto: bool = False) -> Path:
    from rlbatch.train.config import make_config
    from rlbatch.train.trainer import train

    with coin_task_installed():
        return train(make_config(**(TRAIN_MB if mini_batches else TRAIN_AUTO if auto else TRAIN)), out, resume=resume)


def run_sweep(out: Path | str) -> dict:
    from rlbatch.backends.local import run_sweep as sweep
    from rlbatch.study.ladder import build_ladder

    with coin_task_installed():
        return sweep(build_ladder(**SWEEP), Path(out), progress=False)


if __name__ == "__main__":
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    kind, out = sys.argv[1], sys.argv[2]
    if kind in ("train", "train-mb", "train-auto"):
        run_train(out, resume="--resume" in sys.argv, mini_batches=kind == "train-mb", auto=kind == "train-auto")
    else:
        run_sweep(out)
