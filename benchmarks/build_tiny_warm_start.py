"""Rebuild the ``tiny`` preset's warm-start weights (package data ``src/rlbatch/data/tiny-<version>.safetensors``).

    .venv/bin/python benchmarks/build_tiny_warm_start.py            # writes the file of TINY_VERSION and prints its digest
    .venv/bin/python benchmarks/build_tiny_warm_start.py --check    # builds into a temp file: same digest as TINY_SHA256?

The recipe is ``rlbatch.train.models.TINY_WARM`` (AdamW on the arithmetic training pool, 260 steps of 64, on 2 torch
threads; ~25 s on one core). Its result depends on the CPU's floating-point reduction order, which is why the
weights are shipped instead of computed: on another machine this script may print another digest. A rebuild is a
new version: bump ``TINY_VERSION`` (the file name follows), set ``TINY_SHA256`` to the printed digest, add the new
file's negation to .gitignore and re-calibrate the demo (``rlbatch.study.demo.DEMOS["tiny"]``). See docs/design.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from rlbatch.train.models import TINY_SHA256, TINY_WEIGHTS, build_tiny_warm_start

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="build into a temp file and compare with TINY_SHA256")
    ap.add_argument("--out", type=Path, default=REPO / "src" / "rlbatch" / "data" / TINY_WEIGHTS)
    args = ap.parse_args()
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            digest = build_tiny_warm_start(Path(tmp) / TINY_WEIGHTS)
        same = digest == TINY_SHA256
        print(f"digest={digest} shipped={TINY_SHA256} same={same}")
        return 0 if same else 1
    digest = build_tiny_warm_start(args.out)
    print(f"wrote {args.out}\ndigest={digest}\nset TINY_SHA256 = \"{digest}\" in src/rlbatch/train/models.py"
          + ("" if digest == TINY_SHA256 else " (differs from the current value)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
