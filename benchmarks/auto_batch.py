"""The online batch controller on the synthetic backend's model (issue 55, evaluation item 4b and 4c): where it
settles against the known best batch B* = sqrt(gen_s x b_noise / train_s_per_response), and its time-to-target
against the best fixed batch of the candidates (chosen knowing the truth) and against its start B0.

    .venv/bin/python benchmarks/auto_batch.py [--seeds 5] [--steps 1000]

Per b_noise (and the case where moving is wrong: B* below the smallest candidate): the settled batch over B* (median
and range over seeds), the moves, and the noise-free time-to-target of the run's own schedule (its effective samples
s / (1 + B / b_noise) accumulated step by step, McCandlish et al. 2018 eq. 2.11; the target at 0.8 of the curve's
top) over the best fixed batch's and over B0's, the probes and the moves included. Both sides are the same model and
the same target: only the batch schedule differs.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from rlbatch.backends.synthetic import SyntheticModel
from rlbatch.study.auto_batch import SyntheticEnvironment, optimum, run_controller

POW2 = [2 ** k for k in range(4, 15)]


def schedule_time(m: SyntheticModel, schedule: list[int], target: float) -> float:
    """Noise-free seconds until the schedule's effective samples reach the target's; a schedule that ends first
    goes on at its last batch (where the controller settled). The model's truth, not the controller's estimate."""
    def eff(b: int) -> float:  # the synthetic model's progress per sample at b: 1 / (1 + B / b_noise)
        return 1.0 / (1.0 + b / m.b_noise)

    need = -m.tau * math.log(1 - target / m.top)
    s = t = 0.0
    for b in schedule:
        s += b * eff(b)
        t += m.step_time(b)
        if s >= need:
            return t
    b = schedule[-1]
    return t + math.ceil((need - s) / (b * eff(b))) * m.step_time(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--window", type=int, default=20, help="steps between decisions")
    a = ap.parse_args()
    t0 = time.time()
    cases = [(256, 20.0, 64), (1024, 20.0, 64), (4096, 20.0, 64), (16384, 20.0, 64), (4, 0.1, 16)]
    print("| b_noise | gen_s | B0 | B* | settled / B* median (range) | moves median (max) | time-to-target / best "
          "fixed batch's, median (range) | / B0's, median |")
    print("|---|---|---|---|---|---|---|---|")
    for bn, gen, start in cases:
        m = SyntheticModel(b_noise=bn, gen_s=gen, tau=20000.0 * max(1.0, bn / 1024))
        target = 0.8 * m.top
        best_fixed = min(m.time_to_target(b, target) for b in POW2)
        ratios, moves, vs_best, vs_b0 = [], [], [], []
        for seed in range(a.seeds):
            res = run_controller(SyntheticEnvironment(m, seed=seed), start, POW2, a.steps, window=a.window)
            ratios.append(res.settled / optimum(m))
            moves.append(res.moves)
            tt = schedule_time(m, res.schedule, target)
            vs_best.append(tt / best_fixed)
            vs_b0.append(tt / m.time_to_target(start, target))
        print(f"| {bn:,} | {gen:g} | {start} | {optimum(m):,.0f} | {np.median(ratios):.2f} ({min(ratios):.2f}-"
              f"{max(ratios):.2f}) | {np.median(moves):.0f} ({max(moves)}) | {np.median(vs_best):.2f} "
              f"({min(vs_best):.2f}-{max(vs_best):.2f}) | {np.median(vs_b0):.2f} |", flush=True)
    print(f"\n{a.seeds} seeds x {len(cases)} cases, {a.steps} steps each; {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
