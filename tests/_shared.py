"""Third-party logs live beside the repository in ``../shared/logs`` (with hand-read ground truth) and are never
copied into it. A test that reads them skips, naming the folder, when it is absent (a fresh clone has none; CI has
it): ``tests/conftest.py`` and ``.ci/run`` allow exactly this skip besides a missing optional dependency."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_LOGS = REPO.parent / "shared" / "logs"


def absent_reason(folder: str) -> str:
    """The skip reason for a missing ``../shared/logs/<folder>`` (matched by tests/conftest.py's skip rule)."""
    return (f"../shared/logs/{folder} is absent: third-party logs are read from beside the repository and never "
            "copied into it (CI has them)")


def shared_logs(folder: str, *, module: bool = True) -> Path:
    """``../shared/logs/<folder>``; skips the calling test module (``module=True``, at import) or test when it is
    absent."""
    path = SHARED_LOGS / folder
    if not path.is_dir():
        pytest.skip(absent_reason(folder), allow_module_level=module)
    return path
