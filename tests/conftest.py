import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PAPER_CSV = REPO / "src" / "rlbatch" / "data" / "hunyuan_grpo_accounting.csv"


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared not present beside the checkout")
    return SHARED
