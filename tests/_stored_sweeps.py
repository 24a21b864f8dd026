"""The stored sweeps in tests/data (each a ``trials.tar.gz`` of compacted run directories, with a README saying how it
was made): one way to unpack them."""

from __future__ import annotations

import tarfile
from pathlib import Path


def unpack(tarball: Path, into: Path) -> Path:
    """Extract ``tarball`` into ``into`` (tarfile's ``data`` filter: no links or paths leaving ``into``); returns
    ``into / "trials"``, the sweep's trial directories."""
    with tarfile.open(tarball) as tar:
        tar.extractall(into, filter="data")
    return Path(into) / "trials"
