import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_CANDIDATES = (REPO.parent / "shared", Path("/work/shared"))
SHARED = next((p for p in SHARED_CANDIDATES if p.is_dir()), SHARED_CANDIDATES[0])
PAPER_CSV = REPO / "src" / "rlbatch" / "data" / "hunyuan_grpo_accounting.csv"


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("shared data not present (looked in ../shared beside the checkout and /work/shared)")
    return SHARED


@pytest.fixture(scope="module")
def tiny():
    """The ``tiny-random`` preset (model, tokenizer), loaded once per test module; copy it with ``fresh``."""
    from rlbatch.train.models import load_model

    return load_model("tiny-random")
