"""A synthetic, resumable trial with a known answer, for tests and benchmarks of the plan and the adaptive sweep.

The model (every constant in :class:`SyntheticModel`):

- samples-to-target follow McCandlish et al. (2018), eq. 2.11: a run at batch B makes the progress of
  ``s_eff = s / (1 + B / b_noise)`` samples at B -> 0, so rN(B) relative to B_ref is
  ``(1 + B/b_noise) / (1 + B_ref/b_noise)`` at every score level;
- score ``= top * (1 - exp(-s_eff / tau))`` plus Gaussian noise ``score_noise`` at each evaluation (every
  ``eval_every`` retained samples, at least every step);
- ``shape="scalerl"`` replaces the exponential by ScaleRL's saturating form (2025; R0 = 0):
  ``top / (1 + (tau / s_eff) ** steepness)`` (``tau`` is then the half-way sample count C_mid);
- optionally a *late* penalty (``late_batch``, ``late_top``): from B >= ``late_batch`` on the curve saturates at
  ``late_top`` < ``top`` with ``tau x late_top / top`` (``scalerl``: ``tau x (late_top / top) ** (1 / steepness)``),
  i.e. the same initial growth: the curves overlay early
  (rN ~ 1 at low scores) and part only near the top, so rN at a high target is large (the case a ratio measured
  below the target misses);
- time per step ``= gen_s + train_s_per_response * B`` (generation memory bound: flat in B; update linear), with
  relative noise ``time_noise``;
- gradient-noise metrics with |G|^2 = 1 and tr(Sigma) = b_noise (so B_simple = b_noise): ``noise/grad_sq_big = 1 +
  b_noise / B`` and ``noise/grad_sq_small = 1 + b_noise / G`` (micro-batch of one group), ``grad_norm/actor`` =
  sqrt(grad_sq_big).

So time-to-target ~ (1 + B/b_noise) (gen_s / B + train_s_per_response) is smallest near
B* = sqrt(gen_s * b_noise / train_s_per_response). :func:`synthetic_trial` writes a run-store directory for a
trial spec up to ``spec["samples"]`` retained samples; calling it again with a larger budget extends the same run
(the values of the prefix are the same: noise is drawn per step / evaluation index from a seed of (seed, B)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlbatch.runstore import Run, make_meta, write_run


@dataclass
class SyntheticModel:
    b_noise: float = 2048.0
    tau: float = 20000.0
    top: float = 0.9
    score_noise: float = 0.01
    eval_every: int = 2048
    gen_s: float = 20.0
    train_s_per_response: float = 0.01
    time_noise: float = 0.02
    late_batch: float | None = None
    late_top: float | None = None
    shape: str = "exp"
    steepness: float = 1.5

    def top_tau(self, batch_size: float) -> tuple[float, float]:
        """(asymptote, time constant or C_mid in samples) of the curve at ``batch_size``."""
        if self.late_batch is not None and self.late_top is not None and batch_size >= self.late_batch:
            r = self.late_top / self.top
            return self.late_top, self.tau * (r ** (1 / self.steepness) if self.shape == "scalerl" else r)
        return self.top, self.tau

    def score(self, s_eff: np.ndarray, batch_size: float) -> np.ndarray:
        """Noise-free score after ``s_eff`` effective samples at ``batch_size``."""
        top, tau = self.top_tau(batch_size)
        s_eff = np.asarray(s_eff, float)
        if self.shape == "scalerl":
            with np.errstate(divide="ignore"):
                return top / (1 + (tau / np.maximum(s_eff, 1e-12)) ** self.steepness)
        return top * (1 - np.exp(-s_eff / tau))

    def samples_to_target(self, batch_size: float, target: float) -> float:
        """Noise-free samples-to-target at ``batch_size`` (responses); inf when the curve never reaches it."""
        top, tau = self.top_tau(batch_size)
        if target >= top:
            return math.inf
        if self.shape == "scalerl":
            return tau * (top / target - 1) ** (-1 / self.steepness) * (1 + batch_size / self.b_noise)
        return -tau * math.log(1 - target / top) * (1 + batch_size / self.b_noise)

    def step_time(self, batch_size: float) -> float:
        return self.gen_s + self.train_s_per_response * batch_size

    def time_to_target(self, batch_size: float, target: float) -> float:
        """Noise-free time-to-target in seconds: samples-to-target / (B / step time)."""
        return self.samples_to_target(batch_size, target) * self.step_time(batch_size) / batch_size


def _spec(spec: Any) -> dict[str, Any]:
    return spec.model_dump() if hasattr(spec, "model_dump") else dict(spec)


def synthetic_trial(spec: Any, run_dir: Path | str, model: SyntheticModel | None = None) -> Path:
    """Write (or extend) the run directory of a trial under ``model``: ``spec`` has ``run_id``,
    ``prompts_per_step``, ``group_size``, ``lr``, ``samples`` (retained-sample budget; steps = ceil(samples / B)) and
    optionally ``seed``, ``lr_rule``, ``base_batch``, ``base_lr``, ``model``, ``task``. Returns ``run_dir``."""
    m = model or SyntheticModel()
    s = _spec(spec)
    p, g = int(s["prompts_per_step"]), int(s["group_size"])
    b = p * g
    seed = int(s.get("seed") or 0)
    steps = math.ceil(int(s["samples"]) / b)
    rng_t = np.random.default_rng([seed, b, 1])
    rng_e = np.random.default_rng([seed, b, 2])
    tnoise = rng_t.normal(0.0, m.time_noise, steps)
    samples = np.arange(1, steps + 1) * b
    gen = m.gen_s * (1 + tnoise)
    train = m.train_s_per_response * b * (1 + tnoise)
    step_s = gen + train
    gsq_big = 1.0 + m.b_noise / b
    metrics = pd.DataFrame({"step": np.arange(1, steps + 1), "samples/retained": samples,
                            "samples/generated": samples, "time/gen_s": gen, "time/train_s": train,
                            "time/step_s": step_s, "time/wall_s": np.cumsum(step_s),
                            "grad_norm/actor": math.sqrt(gsq_big), "noise/grad_sq_small": 1.0 + m.b_noise / g,
                            "noise/grad_sq_big": gsq_big, "noise/b_small": float(g), "noise/b_big": float(b),
                            "lr": float(s["lr"])})
    every = max(1, int(round(m.eval_every / b)))
    ev_steps = np.arange(every, steps + 1, every)
    n_ev = len(ev_steps)
    enoise = rng_e.normal(0.0, m.score_noise, max(n_ev, 1))[:n_ev]
    s_eff = ev_steps * b / (1 + b / m.b_noise)
    score = m.score(s_eff, b) + enoise
    metrics["reward/mean"] = m.score(samples / (1 + b / m.b_noise), b)
    evals = pd.DataFrame({"step": ev_steps, "samples/retained": ev_steps * b, "eval/score": score,
                          "eval/n": 500})
    meta = make_meta(run_id=s["run_id"], algorithm="grpo", model=s.get("model") or "synthetic",
                     task=s.get("task") or "synthetic", prompts_per_step=p, group_size=g, lr=float(s["lr"]),
                     lr_rule=s.get("lr_rule"), base_batch=s.get("base_batch"), base_lr=s.get("base_lr"), seed=seed,
                     backend="synthetic", status="finished", stop_reason="budget spent")
    return write_run(run_dir, Run(meta=meta, metrics=metrics, evals=evals))
