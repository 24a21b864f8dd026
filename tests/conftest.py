"""Shared fixtures, and the suite's rules on skipping (issue 23):

- a test may be *skipped* only for a missing optional dependency, and its reason must say so: it names what "is not
  installed" (or is pytest.importorskip's "could not import 'X'"); or for the third-party logs beside the repository
  when they are absent (``../shared/logs/<folder> is absent``, tests/_shared.py). Any other skip is turned into a
  failure here, so ``make test`` and CI (``.ci/run``) fail on it instead of passing quietly;
- tests marked ``slow`` are *deselected* (pytest counts them as such) unless ``RLBATCH_SLOW=1``.
"""

import os
import re
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
PAPER_CSV = REPO / "src" / "rlbatch" / "data" / "hunyuan_grpo_accounting.csv"


@pytest.fixture
def data_dir() -> Path:
    """``tests/data``: the fixtures in the repository (real logs under ``logs/``, ``gsm8k/``; SOURCE notes)."""
    return DATA


@pytest.fixture(scope="module")
def tiny():
    """The ``tiny-random`` preset (model, tokenizer), loaded once per test module; copy it with ``fresh``."""
    from rlbatch.train.models import load_model

    return load_model("tiny-random")


#: the reason of an allowed skip: a named optional dependency that is missing, or the folder of third-party logs
#: beside the repository (``../shared/logs/<folder> is absent``; tests/_shared.py) that a fresh clone lacks
OPTIONAL_DEPENDENCY_SKIP = re.compile(r"is not installed|could not import '|\.\./shared/logs/\S+ is absent")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("RLBATCH_SLOW") == "1":
        return
    slow = [it for it in items if it.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [it for it in items if not it.get_closest_marker("slow")]


def skip_reason(report) -> str:
    """The reason text of a skipped test report ("" when there is none)."""
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2])
    return str(lr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        reason = skip_reason(rep)
        if not OPTIONAL_DEPENDENCY_SKIP.search(reason):
            rep.outcome = "failed"
            rep.longrepr = (f"skipped for a reason that is not a missing optional dependency ({reason}); the suite "
                            "allows only skips whose reason says what 'is not installed' or which ../shared/logs "
                            "folder 'is absent' (tests/conftest.py)")
