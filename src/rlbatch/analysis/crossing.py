"""Samples-to-target of one learning curve, independent of how often and how noisily it was evaluated.

The first evaluation at or above the target is early when evaluations are noisy and dense (more chances to cross
on a noise spike), and a straight chord between two coarse evaluations of a concave curve is late. Both biases
depend on the evaluation spacing, which grows with B (every max(eval_every, B) samples, or every N steps), so
they make rN grow with B on identical curves (statistics review, finding 4). This estimator:

1. keeps the curve up to where its centred moving average peaks (a later decline, e.g. a collapse, does not pull
   the fit down), and fits it with a monotone (isotonic, pool-adjacent-violators) regression, weighted by the
   evaluation items ``eval/n`` when logged: a noise spike is pooled with its neighbours instead of ending the
   search. The monotone fit decides whether the target is reached at all, and brackets the crossing between the
   evaluation points of the two fitted blocks around it;
2. refines the crossing by a straight-line fit of the score against log samples over the points within a factor
   :data:`WINDOW` of it (iterated until it settles), weighted as above. Learning curves are close to straight in
   log samples over a factor of 2 either side, so neither the spacing nor the noise biases the crossing, and
   every point near it counts, not only the first one above. The refined crossing stays between the points the
   line was fitted on (no extrapolation).

A curve whose monotone fit never reaches the target has no samples-to-target (censored: the target lies beyond its
last evaluation). A curve already at the target at its first evaluation after 0 has none either: it is only known
to be at most that many samples (the first evaluation's x would be a value proportional to the spacing). A curve
evaluated at 0 and at the target there has samples-to-target 0.

Sources: isotonic regression, Barlow et al. (1972), "Statistical inference under order restrictions"; local linear
regression, Fan & Gijbels (1996). The estimator is calibrated by simulation in ``benchmarks/calibration.py``
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
#: fewest points of a local fit (the nearest ones when the window holds fewer)
MIN_POINTS = 2


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


def _local_line(u: np.ndarray, y: np.ndarray, w: np.ndarray,
                centre: float) -> tuple[float, float, int, float, float] | None:
    """(intercept, slope, points, lowest u, highest u) of the weighted line of ``y`` on ``u`` (log samples) over the
    points within log :data:`WINDOW` of ``centre`` (at least :data:`MIN_POINTS`, the nearest); None without two
    distinct u."""
    d = np.abs(u - centre)
    inside = d <= math.log(WINDOW) + 1e-12
    if inside.sum() < MIN_POINTS:
        inside = np.zeros(len(u), bool)
        inside[np.argsort(d, kind="stable")[:MIN_POINTS]] = True
    uu, yy, ww = u[inside], y[inside], w[inside]
    if len(uu) < 2 or np.ptp(uu) <= 0:
        return None
    um = np.average(uu, weights=ww)
    ym = np.average(yy, weights=ww)
    sxx = float(np.sum(ww * (uu - um) ** 2))
    b = float(np.sum(ww * (uu - um) * (yy - ym))) / sxx
    return ym - b * um, b, int(inside.sum()), float(uu.min()), float(uu.max())


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
    ma = _moving_average(ys, PEAK_SMOOTHING if n >= 2 * PEAK_SMOOTHING else 3 if n >= 6 else 1)
    if sustained:
        below = np.flatnonzero(ma < target)
        if len(below) and below[-1] == n - 1:
            return Crossing(None, censored_at=last)
        if len(below):
            start = int(below[-1])  # from the last smoothed point below the target on
            xs, ys, w, ma = xs[start:], ys[start:], w[start:], ma[start:]
    # the last point where the smoothed curve is at its highest (ties: the last; a short curve, fewer points)
    m = len(ma)
    peak = m - int(np.argmax(ma[::-1] >= ma.max() - 1e-12))
    keep = max(peak, min(2, m))
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
    if x0 <= 0:  # between the evaluation at 0 and the first one after it: no log axis to fit on
        return Crossing(float(x0 + (target - f0) / (f1 - f0) * (x1 - x0)), method="monotone", points=2)
    xc = math.exp(math.log(x0) + (target - f0) / (f1 - f0) * (math.log(x1) - math.log(x0)))
    pos = px > 0
    u, yy, ww = np.log(px[pos]), py[pos], pw[pos]
    method, used = "monotone", 2
    for _ in range(8):
        line = _local_line(u, yy, ww, math.log(xc))
        if line is None or line[1] <= 0:
            break
        a, b, used, lo, hi = line
        # interpolation only: the line's crossing stays within the points it was fitted on
        new = math.exp(min(max((target - a) / b, lo), hi))
        method = "local-linear"
        if abs(math.log(new) - math.log(xc)) < 1e-6:
            xc = new
            break
        xc = new
    return Crossing(float(xc), method=method, points=used)
