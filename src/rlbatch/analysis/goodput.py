"""Goodput: the batch that makes the most statistical progress per second (issue 55, "align, then accelerate" online).

Pollux (Qiao et al., OSDI 2021) adapts a supervised job's batch to maximise goodput = throughput x statistical
efficiency. For RL post-training with the square-root LR rule (Li et al. 2026), the same trade: a larger batch
raises the retained samples per second (generation is sublinear in B) and lowers the progress each sample makes.

- **The sample penalty** (McCandlish et al. 2018, eq. 2.11): a step at batch B makes the progress of
  B / (1 + B / B_noise) samples at B -> 0, so rN(B) relative to the current batch is ``(1 + B / B_noise) / (1 +
  B_cur / B_noise)`` (:func:`rlbatch.analysis.noise_model.noise_model_rn`, the plan's noise model). B_noise is
  estimated by the simple noise scale B_simple (:func:`rlbatch.analysis.noise.noise_estimates`, in retained
  responses).
- **Time per step** (:class:`TimeModel`): ``intercept + slope x B`` seconds, fitted by least squares over the steps
  timed so far (generation flat in B where it is memory bound, the update linear); the fitted time model of the
  whole study is :func:`rlbatch.analysis.throughput.fit_throughput_model`, this is its online minimum.
- **Goodput** ``= retained samples per second / rN``, in the current batch's samples per second; its inverse ratio
  between two batches is the relative time-to-target rN / relative throughput
  (:func:`rlbatch.analysis.accounting.predicted_relative_time`, the accounting's), so the batch of highest goodput
  is the one of smallest predicted time-to-target. With ``step_s = gen_s + train_s x B`` it is largest at
  ``B* = sqrt(gen_s x B_noise / train_s)``.
- **The move** (:func:`choose_batch`): to the candidate of highest goodput at B_noise's point estimate, only when
  its gain over the current batch exceeds ``threshold`` (hysteresis; Pollux uses 5%) *and* it gains at the end of
  B_noise's interval that argues against the move (the lower end for a larger batch, the upper end for a smaller
  one): an unmeasurable noise scale (|G|^2 not shown above 0: B_noise open above) moves the batch up only as far as
  its lower end supports, and never down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rlbatch.analysis.accounting import predicted_relative_time
from rlbatch.analysis.noise_model import noise_model_rn

#: the least predicted goodput gain that moves the batch (Pollux's 5%)
THRESHOLD = 0.05


@dataclass(frozen=True)
class TimeModel:
    """Seconds per optimizer step ``intercept + slope x B`` (B in retained responses), least squares over
    ``n_points`` timed steps at ``batches``."""

    intercept: float
    slope: float
    n_points: int
    batches: tuple[int, ...]

    def step_s(self, batch: float) -> float:
        return self.intercept + self.slope * batch


def fit_time_model(batches: Sequence[float], step_s: Sequence[float]) -> TimeModel:
    """:class:`TimeModel` from timed steps (``batches[i]``, ``step_s[i]`` seconds). Both coefficients are kept at or
    above 0 (a negative slope or intercept is noise: refitted with it at 0). Raises ValueError with fewer than two
    distinct batch sizes (the slope is not identified)."""
    b, t = np.asarray(batches, float), np.asarray(step_s, float)
    ok = np.isfinite(b) & np.isfinite(t) & (b > 0) & (t > 0)
    b, t = b[ok], t[ok]
    if len(set(b.tolist())) < 2:
        raise ValueError("a time model needs steps timed at two or more batch sizes")
    slope, intercept = np.polyfit(b, t, 1)
    if slope < 0:
        slope, intercept = 0.0, float(t.mean())
    elif intercept < 0:
        slope, intercept = float((b @ t) / (b @ b)), 0.0
    return TimeModel(float(intercept), float(slope), int(len(b)), tuple(sorted({int(x) for x in b})))


def goodput(batch: float, time: TimeModel, b_noise: float, current: float, retained_fraction: float = 1.0) -> float:
    """Goodput at ``batch``: its retained samples per second (``retained_fraction x B / step_s(B)``) over its rN
    relative to ``current`` (:func:`rlbatch.analysis.noise_model.noise_model_rn`): the current batch's samples per
    second it is worth."""
    return retained_fraction * batch / time.step_s(batch) / noise_model_rn(batch, current, b_noise)


def relative_time(batch: float, time: TimeModel, b_noise: float, current: float) -> float:
    """Predicted time-to-target at ``batch`` over the current batch's: rN / relative throughput
    (:func:`rlbatch.analysis.accounting.predicted_relative_time`), the inverse ratio of their goodputs."""
    gain = (batch / time.step_s(batch)) / (current / time.step_s(current))
    return predicted_relative_time(noise_model_rn(batch, current, b_noise), gain)


@dataclass(frozen=True)
class Choice:
    """One decision of the controller: ``batch`` (where to go; the ``current`` one when it stays), ``moved``,
    ``gain`` (predicted goodput over the current batch's, less 1, at B_noise's point: 1 / relative time - 1),
    ``gain_at_bound`` (the same at the end of B_noise's interval against the move), ``relative_time`` {candidate:
    predicted time-to-target over the current batch's, at the point}, ``b_noise`` and ``b_noise_ci``, the ``time``
    model, and ``why`` in words."""

    batch: int
    current: int
    moved: bool
    gain: float
    gain_at_bound: float
    relative_time: dict[int, float]
    b_noise: float
    b_noise_ci: tuple[float, float]
    time: TimeModel
    why: str = ""
    step: int | None = field(default=None, compare=False)


def choose_batch(current: int, candidates: Sequence[int], b_noise: float, time: TimeModel,
                 b_noise_ci: tuple[float, float] | None = None, threshold: float = THRESHOLD) -> Choice:
    """The controller's move from ``current`` among ``candidates`` (module docstring): to the candidate of highest
    goodput at ``b_noise`` when its gain exceeds ``threshold`` and it still gains at the end of ``b_noise_ci``
    (default: the point) that argues against the move."""
    lo, hi = b_noise_ci if b_noise_ci is not None else (b_noise, b_noise)
    cands = sorted(set(int(c) for c in candidates) | {int(current)})
    rel = {c: relative_time(c, time, b_noise, current) for c in cands}
    best = min(cands, key=lambda c: (rel[c], abs(math.log(c / current))))
    gain = 1.0 / rel[best] - 1.0
    bound = lo if best > current else hi
    gain_b = 1.0 / relative_time(best, time, bound, current) - 1.0
    if best == current:
        why = "the current batch has the highest predicted goodput"
    elif gain <= threshold:
        why = f"B={best} would gain {gain:.1%}, not more than the {threshold:.0%} threshold"
    elif gain_b <= 0:
        end = "lower" if best > current else "upper"
        why = (f"B={best} would gain {gain:.1%} at B_noise {b_noise:,.0f}, but not at its interval's {end} end "
               f"({bound:,.0f})")
    else:
        return Choice(best, current, True, gain, gain_b, rel, b_noise, (lo, hi), time,
                      f"B={best} gains {gain:.1%} in goodput ({gain_b:.1%} at B_noise {bound:,.0f})")
    return Choice(current, current, False, gain, gain_b, rel, b_noise, (lo, hi), time, why)
