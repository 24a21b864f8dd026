"""Reading speed of the verl console reader.

Prints the seconds to read the largest real log in ../shared/logs/verl (third-party, beside the repository; skipped
where absent) (target: well under a second) and the
rows/second on a synthetic 1,000,000-step verl log (about 20 metrics per line, Ray prefix, validation every 100
steps). Usage: ``.venv/bin/python benchmarks/read_speed.py [--steps 1000000] [--keep]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

from rlbatch.readers import load

REPO = Path(__file__).resolve().parents[1]
VERL_LOGS = REPO.parent / "shared" / "logs" / "verl"  # real verl logs beside the repository (never copied into it)

METRICS = ["actor/entropy", "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm", "actor/lr",
           "critic/score/mean", "critic/score/max", "critic/rewards/mean", "critic/advantages/mean",
           "response_length/mean", "response_length/clip_ratio", "prompt_length/mean", "timing_s/gen",
           "timing_s/reward", "timing_s/old_log_prob", "timing_s/update_actor", "timing_s/step",
           "perf/total_num_tokens", "perf/throughput"]


def write_synthetic(path: Path, steps: int) -> None:
    prefix = "\x1b[36m(TaskRunner pid=4242)\x1b[0m "
    with open(path, "w") as fh:
        fh.write(prefix + "python3 -m verl.trainer.main_ppo data.train_batch_size=256 actor_rollout_ref.rollout.n=8 "
                 "actor_rollout_ref.actor.optim.lr=1e-6\n")
        for s in range(1, steps + 1):
            vals = " - ".join(f"{k}:{(s * 7 + i) % 1000 / 997:.3f}" for i, k in enumerate(METRICS))
            val = f" - val-core/openai/gsm8k/reward/mean@1:{(s % 1000) / 1000:.3f}" if s % 100 == 0 else ""
            fh.write(f"{prefix}step:{s} - {vals}{val}\n")


def timed(path: Path) -> tuple[float, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        (run,) = load(path)
        return time.perf_counter() - t, len(run.metrics)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="keep the synthetic log")
    args = ap.parse_args()
    if VERL_LOGS.is_dir():
        logs = sorted(VERL_LOGS.glob("*.log"), key=lambda p: p.stat().st_size) if VERL_LOGS.is_dir() else []
        if logs:
            sec, rows = timed(logs[-1])
            print(f"largest real log {logs[-1].name} ({logs[-1].stat().st_size / 1e6:.1f} MB): {rows} steps in "
                  f"{sec:.3f} s ({rows / sec:,.0f} rows/s)")
    tmp = Path(tempfile.mkdtemp(prefix="rlbatch-bench-"))
    path = tmp / "synthetic_verl.log"
    t = time.perf_counter()
    write_synthetic(path, args.steps)
    print(f"wrote {args.steps:,} steps ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    sec, rows = timed(path)
    print(f"synthetic log: {rows:,} rows in {sec:.2f} s = {rows / sec:,.0f} rows/s")
    if not args.keep:
        os.unlink(path)
        tmp.rmdir()


if __name__ == "__main__":
    main()
