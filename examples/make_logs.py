"""Write the small example logs under examples/logs/ (written by us, not by the frameworks: the shapes follow
verl's console logger, TRL's trainer_state.json and a plain CSV of a custom loop). Deterministic: a seeded curve
per batch size with the square-root LR rule, so `rlbatch analyze` and `rlbatch inspect` have something real-shaped
to read on a fresh clone. Run: python examples/make_logs.py (the files are committed; this only re-makes them)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "logs"
G = 8  # responses per prompt
BASE_B, BASE_LR = 64, 1e-6  # the tuned run: B0 and lr0 (sqrt rule: lr = lr0 * sqrt(B / B0))
HALF = 2500.0  # retained samples to half the gain, the same for every B (aligned curves)


def score(samples: float, rng: random.Random) -> float:
    return 0.20 + 0.45 * samples / (samples + HALF) + rng.gauss(0, 0.01)


def verl(batch: int, seed: int) -> str:
    rng = random.Random(batch * 100 + seed)
    P = batch // G
    lr = BASE_LR * math.sqrt(batch / BASE_B)
    lines = [f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size={P} "
             f"actor_rollout_ref.rollout.n={G} actor_rollout_ref.actor.optim.lr={lr:.3g} "
             "trainer.test_freq=5 trainer.total_training_steps=60"]
    step_s = 6.0 + 0.02 * batch  # a larger batch costs more per step, less per sample
    for step in range(1, 61):
        s = step * batch
        line = (f"step:{step} - actor/pg_loss:{rng.gauss(0, 0.02):.4f} - actor/lr:{lr:.3g} - "
                f"critic/score/mean:{score(s, rng):.4f} - response_length/mean:{180 + rng.gauss(0, 5):.1f} - "
                f"timing_s/gen:{0.6 * step_s * (1 + rng.gauss(0, 0.03)):.3f} - "
                f"timing_s/step:{step_s * (1 + rng.gauss(0, 0.03)):.3f}")
        if step % 5 == 0:
            line += f" - val-core/openai/gsm8k/reward/mean@1:{score(s, rng):.4f}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def trainer_state(batch: int) -> dict:
    rng = random.Random(7 + batch)
    hist = []
    for step in range(1, 41):
        s = step * batch
        hist.append({"epoch": round(step / 40, 4), "step": step, "loss": round(rng.gauss(0, 0.01), 5),
                     "learning_rate": BASE_LR * math.sqrt(batch / BASE_B), "reward": round(score(s, rng), 4),
                     "completion_length": round(150 + rng.gauss(0, 4), 1)})
        if step % 5 == 0:
            hist.append({"epoch": round(step / 40, 4), "step": step, "eval_reward": round(score(s, rng), 4)})
    return {"global_step": 40, "max_steps": 40, "logging_steps": 1, "eval_steps": 5, "log_history": hist}


def csv(batch: int) -> str:
    rng = random.Random(11)
    rows = ["iteration,loss,acc"]
    for it in range(1, 31):
        rows.append(f"{it},{rng.gauss(0.5, 0.05):.4f},{score(it * batch, rng):.4f}")
    return "\n".join(rows) + "\n"


def main() -> None:
    (OUT / "verl").mkdir(parents=True, exist_ok=True)
    for b in (64, 128, 256):
        (OUT / "verl" / f"B{b}.log").write_text(verl(b, 0))
    (OUT / "trl" / "grpo-out").mkdir(parents=True, exist_ok=True)
    (OUT / "trl" / "grpo-out" / "trainer_state.json").write_text(json.dumps(trainer_state(512), indent=1) + "\n")
    (OUT / "metrics.csv").write_text(csv(128))


if __name__ == "__main__":
    main()
