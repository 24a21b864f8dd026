"""Long fuzz run of the log readers: mutated real verl logs and small generated logs of every format.

Each input is a seed (tests/_readers_fuzz_lib.py) mutated by 1-4 random ops (truncation, byte flips, inserted
tokens, huge numbers, re-encodings, interleaved Ray output, long lines, duplicated chunks, binary junk, empty
files), read with the format detected (and, half the time, with the seed's format given). Every input must end in
parsed runs or one ``UserError`` naming the file; anything else is a crash, saved with its ops under
``runs/fuzz/crash-N/`` to reproduce. Prints counts of inputs tried / parsed / clean errors / crashes.

Usage: ``.venv/bin/python benchmarks/fuzz_readers.py --minutes 5 [--seed 0]``; exit code 1 when something crashed.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import _readers_fuzz_lib as F  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--crash-dir", type=Path, default=REPO / "runs" / "fuzz")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seeds = F.all_seeds()
    print(f"{len(seeds)} seeds ({sum(k == 'verl' for k, _ in F.real_verl_seeds())} real verl logs from "
          f"{F.verl_log_dir()}, {len(F.real_other_seeds())} real files of other formats from ../shared/logs/real), "
          f"{args.minutes:g} min, seed {args.seed}")
    counts = collections.Counter()
    by_kind = collections.Counter()
    crashes: dict[str, int] = {}
    t_end = time.monotonic() + 60 * args.minutes
    with tempfile.TemporaryDirectory() as tmp:
        while time.monotonic() < t_end:
            kind, files = rng.choice(seeds)
            ops = F.random_ops(rng)
            which = rng.randrange(len(files))
            give = rng.random() < 0.5
            root = Path(tmp) / f"case{counts['tried']}"
            root.mkdir()
            counts["tried"] += 1
            try:
                outcome, _ = F.run_case(root, kind, files, ops, which, give)
                counts[outcome] += 1
                by_kind[(kind, outcome)] += 1
            except Exception as err:  # noqa: BLE001 - counting crashes is the point
                tb = traceback.extract_tb(err.__traceback__)
                where = next((f"{Path(fr.filename).name}:{fr.lineno}" for fr in reversed(tb)
                              if "rlbatch" in fr.filename), "?")
                sig = f"{type(err).__name__} at {where}"
                counts["crash"] += 1
                by_kind[(kind, "crash")] += 1
                if sig not in crashes:
                    crashes[sig] = counts["tried"]
                    dest = args.crash_dir / f"crash-{len(crashes)}"
                    shutil.rmtree(dest, ignore_errors=True)
                    shutil.copytree(root, dest)
                    (dest / "ops.txt").write_text(f"kind={kind} which={which} give_format={give}\nops={ops!r}\n"
                                                  + "".join(traceback.format_exception(err)))
                    print(f"CRASH {sig}: {type(err).__name__}: {str(err)[:200]} -> {dest}", flush=True)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    print(f"tried={counts['tried']} parsed={counts['parsed']} clean_errors={counts['error']} "
          f"crashes={counts['crash']} distinct_crashes={len(crashes)}")
    for kind in sorted({k for k, _ in by_kind}):
        print(f"  {kind:12s} parsed={by_kind[(kind, 'parsed')]} errors={by_kind[(kind, 'error')]} "
              f"crashes={by_kind[(kind, 'crash')]}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
