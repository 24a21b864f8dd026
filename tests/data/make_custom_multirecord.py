"""Write the four logs of tests/data/custom_multirecord/: one recipe at 4 update batches, as a custom GRPO trainer logs it (issue 24).

Shaped like the custom trainers' JSONL logs collected for issue 24 (tests/data/readers_wild: a first
``{"type": "config", ...}`` record as in esmaeil-abedi-dev/verifier-as-reward, per-step records with timings as in
the Tinker loop of tests' ``tinker_grpo_qwen3_4b_metrics.jsonl``, evaluation records sharing the step counter) and
like xtuner's RL trainer (rollout and per-mini-batch train records with their own counters): one line per
record, four kinds told apart by ``"type"``:

- ``config``: ``n_prompts`` (P = 64), ``n_samples_per_prompt`` (G = 8), ``mini_batch_size`` (B, responses per
  optimizer update: 64, 128, 256, 512 of the 512 responses of a rollout), ``lr`` (sqrt rule from 1e-6 at B = 64);
- ``rollout``: ``rollout_step`` k, ``n_generated`` 512, ``n_retained`` (groups with equal rewards dropped),
  ``reward_mean``, ``gen_time_s``;
- ``train``: one per optimizer update (``optimizer_step`` j, ``rollout_step`` k): ``loss``, ``grad_norm``, ``lr``,
  ``update_time_s``;
- ``step``: the rollout's summary (``step_time_s``); ``eval`` every 5 rollouts: ``accuracy`` on 256 problems.

The numbers are made up, deterministic (no randomness), with the paper's pattern: the accuracy curve against
cumulative retained responses is the same for B <= 128 and needs 1.3x / 1.9x the samples at B = 256 / 512;
generation takes 20 s per rollout, an update 2 s + 0.01 s per response, so larger B is faster per rollout.
Run ``python tests/data/make_custom_multirecord.py`` to rewrite them (into tests/data/custom_multirecord/).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

P, G, ROLLOUTS, EVERY = 64, 8, 60, 5
BATCHES = (64, 128, 256, 512)
R_N = {64: 1.0, 128: 1.0, 256: 1.3, 512: 1.9}  # samples-to-target ratio against B = 64
N0 = 9000.0  # retained responses at which the accuracy has risen 63% of the way


def accuracy(n_retained: float, b: int) -> float:
    return round(0.1 + 0.7 * (1 - math.exp(-n_retained / (N0 * R_N[b]))), 4)


def retained(k: int) -> int:
    return 512 - 8 * (3 + (k * 7) % 5)  # 3-7 groups of 8 all-equal rewards dropped per rollout


def write(b: int, path: Path) -> None:
    lr = round(1e-6 * math.sqrt(b / 64), 12)
    recs: list[dict] = [{"type": "config", "run_name": f"grpo-b{b}", "model": "Qwen/Qwen2.5-0.5B-Instruct",
                         "task": "gsm8k", "n_prompts": P, "n_samples_per_prompt": G, "mini_batch_size": b,
                         "lr": lr, "lr_rule": "sqrt", "seed": 0}]
    updates = P * G // b
    opt = 0
    seen = 0
    for k in range(1, ROLLOUTS + 1):
        ret = retained(k)
        seen += ret
        gen = round(20.0 + 0.5 * ((k * 3) % 4), 3)
        recs.append({"type": "rollout", "rollout_step": k, "n_generated": P * G, "n_retained": ret,
                     "reward_mean": round(accuracy(seen - ret, b) * 0.95, 4), "gen_time_s": gen})
        upd = 0.0
        for u in range(updates):
            opt += 1
            t = round(2.0 + 0.01 * b, 3)
            upd += t
            recs.append({"type": "train", "optimizer_step": opt, "rollout_step": k,
                         "loss": round(0.05 / (1 + 0.01 * k), 5), "grad_norm": round(0.8 * math.sqrt(64 / b), 5),
                         "lr": lr, "update_time_s": t})
        recs.append({"type": "step", "rollout_step": k, "optimizer_step": opt,
                     "step_time_s": round(gen + 1.0 + upd, 3)})
        if k % EVERY == 0:
            recs.append({"type": "eval", "rollout_step": k, "optimizer_step": opt, "split": "test",
                         "accuracy": accuracy(seen, b), "n_problems": 256})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


if __name__ == "__main__":
    here = Path(__file__).parent / "custom_multirecord"
    for b in BATCHES:
        write(b, here / f"grpo_b{b}.jsonl")
