"""Samples-to-target of one learning curve, independent of how often and how noisily it was evaluated.

The first evaluation at or above the target is early when evaluations are noisy and dense (more chances to cross
on a noise spike), and a straight chord between two coarse evaluations of a concave curve is late. Both biases
depend on the evaluation spacing, which grows with B (every max(eval_every, B) samples, or every N steps), so
they make rN grow with B on identical curves (statistics review, finding 4). This estimator:

1. keeps the curve up to where its centred moving average peaks, or its highest evaluation if later (a later
   decline, e.g. a collapse, does not pull the fit down), and fits it with a monotone (isotonic, pool adjacent
   violators) regression, weighted by the evaluation items ``eval/n`` when logged: a noise spike is pooled with
   its neighbours instead of ending the search. The monotone fit decides whether the target is reached at all, and
   brackets the crossing between the evaluations around it;
2. refines the crossing by a local quadratic fit of the score over the evaluations within a factor
   :data:`WINDOW` of it (at most the :data:`LOCAL_POINTS` nearest) and the two that bracket it in the monotone
   fit, iterated until it settles, weighted as above; with fewer than three points, a straight line in log samples.
   A quadratic follows a learning curve's bend near the crossing (a straight line in samples exactly), so neither
   the spacing nor the noise biases the crossing, and every point near it counts, not only the first one above.
   The refined crossing stays between the points fitted on (no extrapolation), and where the monotone fit is
   within two noise sd of the target (a step-like curve keeps its crossing between the evaluations around it).

A curve whose monotone fit never reaches the target has no samples-to-target (censored: the target lies beyond its
last evaluation). A curve already at the target at its first evaluation after 0 has none either (whether or not it was evaluated at 0):
it is only known to be at most that many samples (the first evaluation's x, or a chord from the evaluation at 0,
would be a value proportional to the spacing: up to 1.8x the truth, statistics review 2, N1). A curve
evaluated at 0 and at the target there has samples-to-target 0.

Sources: isotonic regression, Barlow et al. (1972), "Statistical inference under order restrictions"; local
polynomial regression, Fan & Gijbels (1996). The estimator is calibrated by simulation in ``benchmarks/calibration.py``
(median rN / true rN 0.98-1.02 at every B and spacing there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: half-width of the local fit around the crossing, as a factor on samples (points within [S / 2, 2 S])
WINDOW = 2.0
#: points of the centred moving average that finds where a curve peaks
PEAK_SMOOTHING = 5
#: distinct points from which the local fit is a quadratic (fewer: a straight line in log samples)
QUADRATIC_POINTS = 3
#: at most this many evaluations, the nearest to the crossing, in a local fit (densely evaluated curves: a plateau
#: or bend within the factor WINDOW would otherwise pull the fit)
LOCAL_POINTS = 12
#: evaluations at or after the crossing before a running trial may stop as "reached" (:func:`settled`)
SETTLE_POINTS = 3


@dataclass(frozen=True)
class Crossing:
    """Where one curve reaches the target. ``samples``: samples-to-target (the axis' units, retained responses);
    None when not reached (``censored_at``: the curve's last x, so samples-to-target is larger) or when the curve
    was at the target at its first evaluation after 0 (``at_most``: that evaluation's x). ``method``:
    ``local-linear`` (the refined crossing), ``monotone`` (the monotone fit's, when no local line rises through it),
    ``start`` (at the target at x = 0), or ``none``. ``points``: evaluations the local fit used."""

    samples: float | None
    censored_at: float | None = None
    at_most: float | None = None
    method: str = "none"
    points: int = 0

    @property
    def reached(self) -> bool:
        return self.samples is not None


def isotonic(y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """The non-decreasing least-squares fit of ``y`` (shape (n,)) with weights ``w`` (pool adjacent violators)."""
    y = np.asarray(y, float)
    w = np.ones_like(y) if w is None else np.asarray(w, float)
    vals: list[float] = []
    wts: list[float] = []
    cnt: list[int] = []
    for yi, wi in zip(y, w):
        vals.append(float(yi))
        wts.append(float(wi))
        cnt.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            wt = wts[-2] + wts[-1]
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / wt
            c = cnt[-2] + cnt[-1]
            del vals[-1], wts[-1], cnt[-1]
            vals[-1], wts[-1], cnt[-1] = v, wt, c
    return np.repeat(vals, cnt)


def _moving_average(y: np.ndarray, window: int) -> np.ndarray:
    n, h = len(y), window // 2
    c = np.r_[0.0, np.cumsum(y)]
    lo = np.clip(np.arange(n) - h, 0, n)
    hi = np.clip(np.arange(n) + h + 1, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


def _local_fit(u: np.ndarray, y: np.ndarray, w: np.ndarray, centre: float, target: float,
               bracket: tuple[int, int]) -> tuple[float, int, str] | None:
    """Where a weighted local polynomial of ``y`` on ``u`` (log samples) reaches ``target``: over the points within
    log :data:`WINDOW` of ``centre`` (the :data:`LOCAL_POINTS` nearest) and the two points ``bracket`` (indices of the monotone fit's last point below
    the target and first at or above it, so the fit always spans the crossing), and the nearest others up to
    :data:`QUADRATIC_POINTS` where the window holds fewer. A quadratic with
    :data:`QUADRATIC_POINTS` or more points, in samples (a curve's bend over the window would otherwise move the
    crossing by several percent, and by how densely it was evaluated: a straight line in samples is convex in log
    samples), else a straight line in log samples (between two or three sparse evaluations of a concave curve a
    chord in log samples lies closer to it than one in samples). The crossing stays between the points fitted on (no extrapolation).
    Returns ``(u of the crossing, points, "quadratic" | "linear")``, or None when the fit does not rise there."""
    d = np.abs(u - centre)
    inside = d <= math.log(WINDOW) + 1e-12
    order = np.argsort(d, kind="stable")
    inside[order[LOCAL_POINTS:]] = False  # the nearest LOCAL_POINTS: a curve's bend or plateau further out stays out
    inside[list(bracket)] = True
    for i in np.argsort(d, kind="stable"):  # at least QUADRATIC_POINTS points where the curve has them
        if inside.sum() >= QUADRATIC_POINTS:
            break
        inside[i] = True
    uu, yy, ww = u[inside] - centre, y[inside], w[inside]
    if len(uu) < 2 or np.ptp(uu) <= 0:
        return None
    lo, hi = float(uu.min()), float(uu.max())
    if len(np.unique(uu)) >= QUADRATIC_POINTS:
        # in samples relative to the centre (exact for a straight line or parabola in samples; a straight line in
        # log samples is followed to third order over the window)
        v = np.exp(uu) - 1.0
        c2, c1, c0 = np.polyfit(v, yy, 2, w=np.sqrt(ww))
        roots = np.roots([c2, c1, c0 - target]) if abs(c2) > 1e-15 else np.array([(target - c0) / c1])
        vlo, vhi = math.exp(lo) - 1.0, math.exp(hi) - 1.0
        real = [float(r.real) for r in np.atleast_1d(roots) if abs(r.imag) < 1e-12 and vlo <= r.real <= vhi
                and c1 + 2 * c2 * r.real > 0]
        if real:
            return centre + math.log1p(min(real, key=abs)), int(inside.sum()), "quadratic"
    um = np.average(uu, weights=ww)
    ym = np.average(yy, weights=ww)
    b = float(np.sum(ww * (uu - um) * (yy - ym))) / float(np.sum(ww * (uu - um) ** 2))
    if b <= 0:
        return None
    return centre + min(max(um + (target - ym) / b, lo), hi), int(inside.sum()), "linear"


def find_crossing(xs: np.ndarray, ys: np.ndarray, target: float, weights: np.ndarray | None = None,
                  sustained: bool = False) -> Crossing:
    """The crossing of ``target`` by the curve ``ys`` over ``xs`` (shape (n,), sorted ascending, x >= 0, no NaN;
    ``weights``: per point, e.g. evaluation items; default equal). ``sustained``: the crossing after the last point
    where the centred moving average of the curve falls below the target (a curve that reaches the target and
    drops back counts from where it stays). Returns a :class:`Crossing` (module docstring)."""
    xs = np.asarray(xs, float)
    ys = np.asarray(ys, float)
    w = np.ones_like(ys) if weights is None else np.asarray(weights, float)
    n = len(xs)
    if n == 0:
        return Crossing(None)
    last = float(xs[-1])
    window = PEAK_SMOOTHING if n >= 2 * PEAK_SMOOTHING else 3 if n >= 6 else 1
    ma = _moving_average(ys, window)
    if sustained:
        below = np.flatnonzero(ma < target)
        if len(below) and below[-1] == n - 1:
            return Crossing(None, censored_at=last)
        if len(below):
            start = int(below[-1])  # from the last smoothed point below the target on
            xs, ys, w, ma = xs[start:], ys[start:], w[start:], ma[start:]
    # up to where the smoothed curve is at its highest (ties: the last), with the points that smoothing spans
    m = len(ma)
    peak = m - 1 - int(np.argmax(ma[::-1] >= ma.max() - 1e-9 * max(1.0, abs(ma.max()))))
    keep = max(min(m, peak + window // 2 + 1), int(np.argmax(ys)) + 1, min(2, m))
    px, py, pw = xs[:keep], ys[:keep], w[:keep]
    fit = isotonic(py, pw)
    if not (fit >= target).any():
        return Crossing(None, censored_at=last)
    j = int(np.argmax(fit >= target))
    if j == 0:
        if px[0] <= 0:
            return Crossing(0.0, method="start")
        return Crossing(None, at_most=float(px[0]))
    x0, x1, f0, f1 = px[j - 1], px[j], fit[j - 1], fit[j]
    if x0 <= 0:  # between the evaluation at 0 and the first one after it: interval-censored, S in (0, x1] (a chord
        # from 0 across a concave curve overstates S up to ~1.8x: statistics review 2, N1)
        return Crossing(None, at_most=float(x1))
    xc = math.exp(math.log(x0) + (target - f0) / (f1 - f0) * (math.log(x1) - math.log(x0)))
    pos = px > 0
    u, yy, ww = np.log(px[pos]), py[pos], pw[pos]
    first = int(np.argmax(pos))  # index in px of the first point after 0 (px is sorted)
    bracket = (j - 1 - first, j - first)
    # where the crossing may lie: between the last point whose monotone level is below the target by more than the
    # evaluation noise and the first above it by more than that (2 sd of the points around the monotone fit)
    levels = len(np.unique(fit))
    dof = len(fit) - levels
    noise = math.sqrt(float(np.sum(pw * (py - fit) ** 2) / np.sum(pw)) * len(fit) / dof) if dof > 0 else 0.0
    below = np.flatnonzero(fit < target - 2 * noise)
    above = np.flatnonzero(fit >= target + 2 * noise)
    lo = math.log(max(px[below[-1]] if len(below) else px[0], px[first]))
    hi = math.log(px[above[0]] if len(above) else px[-1])
    method, used = "monotone", 2
    for _ in range(8):
        fit_ = _local_fit(u, yy, ww, math.log(xc), target, bracket)
        if fit_ is None:
            break
        new, used, kind = math.exp(min(max(fit_[0], lo), hi)), fit_[1], fit_[2]
        method = f"local-{kind}"
        if abs(math.log(new) - math.log(xc)) < 1e-6:
            xc = new
            break
        xc = new
    return Crossing(float(xc), method=method, points=used)


def settled(xs: np.ndarray, crossing: Crossing, points: int = SETTLE_POINTS) -> bool:
    """Whether a curve evaluated at ``xs`` (sorted) has reached the target for good enough to stop training it:
    its :class:`Crossing` is reached and at least ``points`` evaluations lie at or after it. A noise spike at the
    latest evaluation makes a crossing there, with one point after it: the trial runs on until more evaluations
    confirm it (or the monotone fit pools the spike away), so a stopped trial's samples-to-target is not the first
    noisy evaluation above the target (statistics review finding 4: the demo's stop rule)."""
    if crossing.samples is None:
        return False
    return int(np.sum(np.asarray(xs, float) >= crossing.samples - 1e-9)) >= points
