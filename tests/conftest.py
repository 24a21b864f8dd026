import os
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
