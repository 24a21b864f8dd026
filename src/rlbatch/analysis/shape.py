"""Samples-to-target of every seed of one configuration from a shape the seeds share (self-modelling regression).

Model (shape invariance): seed i's evaluation j is ``y_ij = g(x_ij / s_i) + e_ij``, with ``x`` in retained samples,
``g`` a non-decreasing curve shared by the seeds (the template) and ``s_i > 0`` the seed's time-scale, normalised so
that the geometric mean of the ``s_i`` is 1. The template's crossing of the target ``S`` then gives every seed's
samples-to-target ``S_i = s_i S``. A seed's time-scale is fixed by all of its evaluations, not only the two around
its crossing, so a seed evaluated too sparsely to bracket its crossing, or one whose run ends before the target
(censored), still gets one, and the template's crossing is estimated from every seed's points.

Fit (alternating least squares, Lawton, Sylvestre & Maggio 1972; Kneip & Gasser 1988):

1. each seed keeps its points up to where its smoothed curve peaks (as :func:`find_crossing`: a later decline is not
   the shape). The template is the weighted isotonic regression (pool adjacent violators) of the seeds' points
   pooled on the aligned axis ``x / s_i``, read as the straight line through the centres (weighted mean aligned x)
   of its constant blocks, and held at its end values beyond the first and last centre (clamped);
2. each ``log s_i``, in turn, minimises the weighted squared error of the seed's points after 0 against the template
   of the *other* seeds' points and everyone's points at 0 (leave one seed out: a template holding the seed's own
   points follows them and holds the seed where it is): a grid over a factor :data:`SPAN` either way, then a
   bounded Brent search within a grid step of its best point. Evaluations at 0 carry no time-scale, but they are
   the template's start. Then the ``s_i`` are renormalised (geometric mean 1);
3. step 2 is repeated from the seeds' own crossings until no ``log s_i`` moves by more than :data:`TOL`, at most
   :data:`ROUNDS` times; an isotonic template is piecewise, so the alternation can cycle: the round with the least
   leave-one-out squared error is kept.

``S``: :func:`find_crossing` of the pooled aligned points decides whether the template reaches the target (None
also where it is at the target at its first point after 0: the N1 rule of one seed), and is then refined by a
weighted quadratic in samples over all pooled points within a factor :data:`WINDOW` of the crossing, iterated until
it settles and kept within those points; where the median seed has fewer than :data:`QUADRATIC_POINTS` points in
that window (sparse evaluations), the window widens by sqrt(WINDOW) steps up to WINDOW^2, tricube-weighted in log
distance. ``find_crossing``'s own refinement (the 12 nearest points) sees pooled sparse evaluations as two tight
clusters, through which a quadratic is ill-conditioned (the template crossing's log-sd at B = 2048 in the
calibration simulator: 0.12 against 0.10). One seed: ``s = 1`` and ``S`` is that seed's :func:`find_crossing`.

``shape_ok`` is False when (a) some seed's residual rms over all its points after 0 (also those after its peak)
against the other seeds' template is more than :data:`SHAPE_FACTOR` times both the median seed's and the evaluation
noise (the median over seeds of the rms about each seed's own monotone fit, corrected for the levels fitted, as
:func:`find_crossing` estimates it; at least :data:`NOISE_FLOOR` of the template's rise), or (b) a seed's own
monotone fit never reaches the target while the template, at that seed's last evaluation, is above it by more than
the noise. Either says the seed's curve is not a time-rescaling of the others' (a collapse, a lower plateau), and
its ``S_i`` should not be trusted. A seed plateauing within ~2 noise sd below the target can pass as a slow seed
(its ``S_i`` then lies beyond its last evaluation: ``extrapolated``).

Limits: a seed's time-scale is only as good as its points on the rising part of the curve; where every seed is
first evaluated after its crossing (e.g. every 4 steps at B >= 1024), the scales rest on plateau points and the
``S_i`` are poor (log-sd ~0.35 in the simulator) though not None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.optimize import minimize_scalar

from rlbatch.analysis.crossing import PEAK_SMOOTHING, QUADRATIC_POINTS, WINDOW, _moving_average, find_crossing, \
    isotonic

#: the time-scale search spans a factor SPAN either way of the geometric mean
SPAN = 8.0
#: grid points of the coarse search over log s (then a bounded Brent search within one grid step)
GRID = 49
#: the alternation stops when no log s_i moves by more than TOL, or after ROUNDS rounds
TOL, ROUNDS = 1e-3, 12
#: shape_ok: a seed's residual rms above SHAPE_FACTOR x the median seed's and x the evaluation noise
SHAPE_FACTOR = 2.0
#: floor on the evaluation-noise estimate, as a share of the template's rise: on noise-free curves the template's
#: interpolation, and its clamping beyond the other seeds' range (the fastest seed's last points), leave ~1.5%
NOISE_FLOOR = 0.02

Seed = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class SharedShape:
    """The shared-shape fit of one configuration's seeds (module docstring). Per seed, in input order:
    ``samples`` (S_i, retained samples; None only when the template's crossing is unknown: it never reaches the
    target, or it is at the target at its first point after 0), ``scales`` (s_i, geometric mean 1), ``seed_rms``
    (rms of the seed's residuals after 0 against the other seeds' template, score units) and ``extrapolated``
    (S_i beyond the seed's last evaluation, or before its first evaluation after 0: it rests on the other seeds'
    shape). ``template_crossing``: S of the template (aligned samples); ``rms``: the residual rms over all seeds'
    points after 0; ``shape_ok``: the shape-invariance check (module docstring); ``noise``: the evaluation noise
    (score sd of a point of mean weight, floored as in the check) and ``weight`` the mean weight of a point;
    ``knots``: the template of all seeds' points at the fitted scales (aligned samples, level)."""

    samples: tuple[float | None, ...]
    scales: tuple[float, ...]
    template_crossing: float | None
    rms: float
    seed_rms: tuple[float, ...]
    shape_ok: bool
    extrapolated: tuple[bool, ...]
    noise: float = 0.0
    weight: float = 1.0
    knots: tuple[np.ndarray, np.ndarray] | None = None


def _trim(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> Seed:
    """The points up to where the centred moving average of ``y`` peaks (or the highest point, if later)."""
    n = len(y)
    window = PEAK_SMOOTHING if n >= 2 * PEAK_SMOOTHING else 3 if n >= 6 else 1
    ma = _moving_average(y, window)
    peak = n - 1 - int(np.argmax(ma[::-1] >= ma.max() - 1e-9 * max(1.0, abs(ma.max()))))
    keep = max(min(n, peak + window // 2 + 1), int(np.argmax(y)) + 1, min(2, n))
    return x[:keep], y[:keep], w[:keep]


def _pool(seeds: list[Seed], logs: np.ndarray, skip: int | None = None) -> Seed:
    """All seeds' points on the aligned axis x / s_i, sorted (``skip``: that seed's points after 0 left out)."""
    parts = [(x / math.exp(ls), y, w) if i != skip else (x[x <= 0], y[x <= 0], w[x <= 0])
             for i, ((x, y, w), ls) in enumerate(zip(seeds, logs))]
    u, y, w = (np.concatenate(p) for p in zip(*parts))
    order = np.argsort(u, kind="stable")
    return u[order], y[order], w[order]


def _template(u: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The template's knots (aligned x, level): the weighted centre of each block of the isotonic fit."""
    fit = isotonic(y, w)
    starts = np.flatnonzero(np.r_[True, np.diff(fit) != 0])
    return np.add.reduceat(u * w, starts) / np.add.reduceat(w, starts), fit[starts]


def _sse(ls: float, x: np.ndarray, y: np.ndarray, w: np.ndarray, knots: tuple[np.ndarray, np.ndarray]) -> float:
    """Weighted squared error of points (x, y, w) against the template ``knots`` at log time-scale ``ls``."""
    return float(np.sum(w * (y - np.interp(x / math.exp(ls), *knots)) ** 2))


def _best_scale(seed: Seed, knots: tuple[np.ndarray, np.ndarray], now: float) -> float:
    """The log s minimising the seed's squared error against the template: a grid, then Brent within a step."""
    x, y, w = seed
    grid = np.linspace(-math.log(SPAN), math.log(SPAN), GRID)
    err = (w * (y - np.interp(x[None, :] / np.exp(grid)[:, None], *knots)) ** 2).sum(axis=1)
    k = int(np.argmin(err))
    if err[k] >= err.max():  # flat: the points carry no time-scale (all on the template's start or plateau)
        return now
    step = grid[1] - grid[0]
    res = minimize_scalar(_sse, bounds=(grid[k] - step, grid[k] + step), args=(x, y, w, knots), method="bounded",
                          options={"xatol": TOL / 4})
    return float(res.x) if res.fun <= err[k] else float(grid[k])


def _loo(seeds: list[Seed], logs: np.ndarray, i: int) -> tuple[Seed, tuple[np.ndarray, np.ndarray]]:
    """Seed i's points after 0, and the template of the other seeds' points (and everyone's points at 0)."""
    x, y, w = seeds[i]
    pos = x > 0
    return (x[pos], y[pos], w[pos]), _template(*_pool(seeds, logs, skip=i))


def _refine(u: np.ndarray, y: np.ndarray, w: np.ndarray, start: float, factor: float, target: float) -> float:
    """The template's crossing: a weighted quadratic in samples over the pooled points (``u`` > 0) within
    ``factor`` of it (tricube-weighted in log distance where ``factor`` > WINDOW), recentred until it settles and
    kept within those points; ``start`` where none rises through the target."""
    c = start
    for _ in range(8):
        inside = np.abs(np.log(u / c)) <= math.log(factor) + 1e-12
        if len(np.unique(u[inside])) < QUADRATIC_POINTS:
            break
        v, kw = u[inside] / c - 1.0, w[inside]
        if factor > WINDOW * (1 + 1e-9):  # widened: tricube weights in log distance (the far points do not bend it)
            kw = kw * (1.0 - np.minimum(np.abs(np.log(u[inside] / c)) / math.log(factor), 1.0) ** 3) ** 3 + 1e-12
        c2, c1, c0 = np.polyfit(v, y[inside], 2, w=np.sqrt(kw))
        roots = [float(r.real) for r in np.atleast_1d(np.roots([c2, c1, c0 - target]))
                 if abs(r.imag) < 1e-12 and c1 + 2 * c2 * r.real > 0 and v.min() <= r.real <= v.max()]
        if not roots:
            break
        new = c * (1.0 + min(roots, key=abs))
        if abs(math.log(new / c)) < 1e-6:
            return new
        c = new
    return c


def fit_shared_shape(curves: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
                     target: float) -> SharedShape:
    """Fit the shared shape to one configuration's seeds. ``curves``: per seed ``(xs, ys, weights)``, shape (n_i,)
    each, ``xs`` retained samples sorted ascending (may start at 0), ``ys`` scores, ``weights`` per point (e.g. the
    evaluation items ``eval/n``; None: equal). ``target``: the score to reach. Returns a :class:`SharedShape`.
    Raises ValueError when ``curves`` is empty or a seed has no points."""
    if len(curves) == 0:
        raise ValueError("fit_shared_shape needs at least one seed's curve")
    raw, seeds = [], []
    for xs, ys, ws in curves:
        x, y = np.asarray(xs, float), np.asarray(ys, float)
        w = np.ones_like(y) if ws is None else np.asarray(ws, float)
        if len(x) == 0 or len(x) != len(y) or len(w) != len(y):
            raise ValueError("every seed needs xs, ys (and weights) of one non-zero length")
        raw.append((x, y, w))
        seeds.append(_trim(x, y, w))
    m = len(seeds)
    own = [find_crossing(x, y, target, w).samples for x, y, w in seeds]
    known = [math.log(o) for o in own if o]
    logs = np.array([math.log(o) - float(np.mean(known)) if o else 0.0 for o in own])
    best, best_err = logs.copy(), math.inf
    for _ in range(ROUNDS if m > 1 else 0):
        old = logs.copy()
        for i in range(m):
            seed, knots = _loo(seeds, logs, i)
            if len(seed[0]) and np.ptp(knots[1]) > 0:
                logs[i] = _best_scale(seed, knots, logs[i])
        logs -= logs.mean()
        err = 0.0
        for i in range(m):
            seed, knots = _loo(seeds, logs, i)
            err += _sse(logs[i], *seed, knots)
        if err < best_err:
            best, best_err = logs.copy(), err
        if float(np.max(np.abs(logs - old))) < TOL:
            break
    logs = best
    u, y, w = _pool(seeds, logs)
    cross = find_crossing(u, y, target, w)
    s_shared = cross.samples
    if m > 1 and s_shared is not None and s_shared > 0:
        dist = [np.abs(np.log(x[x > 0] / math.exp(ls) / s_shared)) for (x, _, _), ls in zip(seeds, logs)]
        factor = WINDOW
        while factor < WINDOW ** 2 and np.median([np.sum(d <= math.log(factor) + 1e-9)
                                                  for d in dist]) < QUADRATIC_POINTS:
            factor *= math.sqrt(WINDOW)
        pos = u > 0
        s_shared = _refine(u[pos], y[pos], w[pos], s_shared, factor, target)
    sse, tot, seed_rms, noises, ends = 0.0, 0.0, [], [], []
    for i, ((x, yy, ww), (rx, ry, rw)) in enumerate(zip(seeds, raw)):
        knots = _loo(seeds, logs, i)[1] if m > 1 else _template(u, y, w)
        seed = (rx[rx > 0], ry[rx > 0], rw[rx > 0])  # all its points: a decline the template lacks counts here
        wsum = float(seed[2].sum())
        e = _sse(logs[i], *seed, knots) if wsum > 0 else 0.0
        sse, tot = sse + e, tot + wsum
        seed_rms.append(math.sqrt(e / wsum) if wsum > 0 else 0.0)
        # (the seed's own monotone fit's top, the template's level at the seed's last evaluation)
        ends.append((float(isotonic(ry, rw).max()), float(np.interp(rx[-1] / math.exp(logs[i]), *knots))))
        fit = isotonic(yy, ww)
        dof = len(fit) - len(np.unique(fit))
        if dof > 0:
            noises.append(math.sqrt(float(np.sum(ww * (yy - fit) ** 2) / np.sum(ww)) * len(fit) / dof))
    rise = float(np.ptp(isotonic(y, w)))
    noise = max(float(np.median(noises)) if noises else 0.0, NOISE_FLOOR * rise)
    med = float(np.median(seed_rms))
    shape_ok = not any(r > SHAPE_FACTOR * med and r > SHAPE_FACTOR * noise for r in seed_rms) and not (
        m > 1 and any(top < target < level - noise for top, level in ends))
    scales = tuple(math.exp(v) for v in logs)
    samples = tuple(None if s_shared is None else s * s_shared for s in scales)
    extrap = []
    for (x, _, _), si in zip(raw, samples):
        after = x[x > 0]
        extrap.append(bool(si is not None and si > 0 and (len(after) == 0 or si > after[-1] or si < after[0])))
    return SharedShape(samples=samples, scales=scales, template_crossing=s_shared,
                       rms=math.sqrt(sse / tot) if tot > 0 else 0.0, seed_rms=tuple(seed_rms), shape_ok=shape_ok,
                       extrapolated=tuple(extrap), noise=noise, weight=float(np.mean(w)), knots=_template(u, y, w))


#: a seed at the target at its first evaluation after 0: the largest time-scale its points allow is where the
#: profile of its squared error (in noise variances) rises BOUND_Z^2 above its least (one-sided ~97.7% per seed)
BOUND_Z = 2.0
#: ... and its points must fit the reference's shape at all: least squared error within this chi-square quantile
FIT_QUANTILE = 0.99


@dataclass(frozen=True)
class ReferenceShape:
    """The reference configuration's shared shape, the yardstick for seeds first evaluated after their crossing
    (:func:`reference_shape`). ``knots``: the template (aligned retained samples, level); ``crossing``: its
    samples-to-target (aligned: the geometric mean of the reference seeds' time-scales is 1); ``noise``: evaluation
    noise, score sd at a point of weight ``weight``; ``key``: what it was fitted from (for memoisation)."""

    knots: tuple[np.ndarray, np.ndarray]
    crossing: float
    noise: float
    weight: float
    key: tuple


def reference_shape(curves: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]], target: float,
                    key: tuple = ()) -> ReferenceShape | None:
    """The shared shape of the reference's seeds (:func:`fit_shared_shape`; ``curves`` as there) as a
    :class:`ReferenceShape`; None when the reference has no crossing, its seeds fail the shape check, or it
    measured no evaluation noise."""
    if not len(curves):
        return None
    fit = fit_shared_shape(curves, target)
    if not fit.shape_ok or not fit.template_crossing or not fit.noise > 0:
        return None
    return ReferenceShape(knots=fit.knots, crossing=float(fit.template_crossing), noise=fit.noise, weight=fit.weight,
                          key=key)


def bound_from_shape(xs: np.ndarray, ys: np.ndarray, weights: np.ndarray | None, ref: ReferenceShape,
                     at_most: float) -> float:
    """An upper bound on the samples-to-target of a seed that was at the target at its first evaluation after 0
    (interval-censored, S in (0, ``at_most``]; statistics review 2, N1 and section 4(d)), from all its evaluations
    against the reference's shape: under shape invariance (the seed's curve is the reference's template stretched by
    a time-scale s, as :func:`fit_shared_shape` assumes within a configuration) its S is s times the template's
    crossing, and its evaluations above the target bound s from above (a seed's score at its first evaluation says
    how far along the curve it is). The bound is the largest s whose squared error, in the reference's noise
    variances, is within BOUND_Z^2 of the least (one-sided ~97.7% per seed); it is only an upper bound, never a
    point value (the points near the plateau leave s unbounded below).

    ``xs`` retained samples, sorted, ``ys`` scores, ``weights`` per point (None: the reference's mean weight),
    shape (n,) each. Returns min(``at_most``, the bound); ``at_most`` itself when the seed's points do not fit the
    shape (least squared error beyond the FIT_QUANTILE chi-square quantile: a higher or lower plateau, a collapse)
    or leave s unbounded within the search (a factor SPAN^2 either way)."""
    from scipy.stats import chi2

    x, y = np.asarray(xs, float), np.asarray(ys, float)
    w = np.full(len(y), ref.weight) if weights is None else np.asarray(weights, float)
    x, y, w = _trim(x, y, w)
    pos = x > 0
    x, y, w = x[pos], y[pos], w[pos] / ref.weight  # a point's variance: noise^2 / w
    if len(x) == 0:
        return at_most
    grid = np.linspace(-2 * math.log(SPAN), 2 * math.log(SPAN), 4 * GRID)

    def err(ls: np.ndarray) -> np.ndarray:
        fit = np.interp(x[None, :] / np.exp(ls)[:, None], *ref.knots)
        return (w * (y - fit) ** 2).sum(axis=1) / ref.noise ** 2

    e = err(grid)
    k = int(np.argmin(e))
    if e[k] > chi2.ppf(FIT_QUANTILE, len(x)):
        return at_most
    level = e[k] + BOUND_Z ** 2
    j = k
    while j + 1 < len(grid) and e[j + 1] <= level:
        j += 1
    if j == len(grid) - 1:
        return at_most
    lo, hi = float(grid[j]), float(grid[j + 1])
    for _ in range(40):  # bisection between the last grid point inside and the first outside
        mid = 0.5 * (lo + hi)
        if err(np.array([mid]))[0] <= level:
            lo = mid
        else:
            hi = mid
    return float(min(at_most, math.exp(lo) * ref.crossing))
