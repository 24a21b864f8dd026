"""Saturating fits of score vs retained samples, extrapolated to a target: predicted samples-to-target from short
probes.

The curve form is ScaleRL's compute-performance sigmoid ("The Art of Scaling Reinforcement Learning
Compute for LLMs", 2025), with the compute C replaced by cumulative *retained* samples:

    R(C) = R0 + (A - R0) / (1 + (C_mid / C) ** b)

- ``R0``: score at C -> 0 (the start of training); ``A``: the asymptote (the score the configuration saturates at);
- ``C_mid``: retained samples at which half of the gain A - R0 is reached (responses); ``b`` > 0: the steepness.

One configuration (its seeds) is fitted jointly: every seed's evaluation points with one set of (R0, A, C_mid, b)
(the configuration's mean curve), by bounded least squares (:func:`scipy.optimize.least_squares`). Samples-to-target
at a target score T follows by inverting the form:

    S(T) = C_mid * ((A - R0) / (T - R0) - 1) ** (-1 / b)      for R0 < T < A,

0 for T <= R0, and "never reaches" for T >= A (:func:`invert`). Several configurations of one comparison can be
fitted together (:func:`fit_configurations`): R0 and b shared, A and C_mid per configuration.

What is predicted (``samples_to_target``) is the quantity the accounting measures once runs finish: the mean over
seeds of each seed's samples-to-target (:func:`rlbatch.analysis.crossing.find_crossing`, which does not depend on
the evaluation noise or spacing) on its observed points continued at its own evaluation spacing by the fitted curve,
up to a horizon (20x the largest fitted sample count); None ("never reaches", with the asymptote in ``reason``) when
the continuation does not cross by then.

Intervals: a bootstrap that respects the correlation of the evaluation points: the seeds are resampled with
replacement (when two or more), and each resampled seed's residuals around the fit are resampled in moving blocks of
consecutive evaluations (Kunsch 1989) and added back to the fitted curve; every replicate is refitted and continued
once as above. Replicates that never reach the target count as +inf samples (so an interval can be unbounded above).
Percentile intervals at :data:`CONF` (95%). Units: samples are retained responses; scores as logged (in [0, 1] for
``eval/score``, which bounds A by 1).
"""

from __future__ import annotations

import math
import zlib
from typing import Any, Sequence

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import f as f_dist

from rlbatch.analysis.accounting import sample_ratio
from rlbatch.analysis.crossing import find_crossing
from rlbatch.analysis.curves import curve
from rlbatch.analysis.interval import bootstrap_interval, format_interval

X = "samples/retained"
#: Two-sided level of the fit's intervals: 95%, the level of every other interval on a page (issue 37: one
#: confidence level per page; the fit's used to be 80%). Extrapolated predictions from short probes are wide at it,
#: and say so: an open end, and no pick when the reference's own prediction is open.
CONF = 0.95
BLOCK = 3
#: Level at which a configuration is rejected as "never reaches" (:func:`profile_interval`): stricter than the
#: intervals' :data:`CONF`, since a rejection from a short probe is the costly mistake.
REJECT_CONF = 0.95


def sigmoid(c: np.ndarray, r0: float, a: float, c_mid: float, b: float) -> np.ndarray:
    """ScaleRL's form R(C) = R0 + (A - R0) / (1 + (C_mid / C)^b) at retained samples ``c`` (array, responses);
    R(0) = R0. Returns an array of scores shaped like ``c``."""
    c = np.asarray(c, float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        z = np.where(c > 0, (c_mid / np.where(c > 0, c, 1.0)) ** b, np.inf)
        return r0 + (a - r0) / (1.0 + z)


def fitted_curve(params: dict[str, float], x_max: float, samples_to_target: float | None = None,
                 n: int = 100) -> dict[str, list[list[float]]]:
    """The fitted score curve a figure draws (``params``: R0, A, C_mid, b): ``fitted`` [[retained samples, score]]
    over the measured range [0, ``x_max``] and ``extrapolated`` beyond it, to 1.2x the predicted
    ``samples_to_target`` (or 2x ``x_max`` when there is none), ``n`` points each."""
    p = (params["R0"], params["A"], params["C_mid"], params["b"])
    end = max(x_max, 1.2 * samples_to_target if samples_to_target else 2 * x_max)
    out = {}
    for key, xs in (("fitted", np.linspace(0, x_max, n)), ("extrapolated", np.linspace(x_max, end, n))):
        out[key] = [[float(x), float(y)] for x, y in zip(xs, sigmoid(xs, *p))]
    return out


def invert(target: float, r0: float, a: float, c_mid: float, b: float) -> float:
    """Retained samples at which the fitted curve reaches ``target``: 0 when target <= R0, +inf when target >= A."""
    if target <= r0:
        return 0.0
    if target >= a:
        return math.inf
    return float(c_mid * ((a - r0) / (target - r0) - 1.0) ** (-1.0 / b))


def _fit_points(xs: np.ndarray, ys: np.ndarray, hi: float, p0: Sequence[float] | None = None) -> np.ndarray | None:

    pos = xs[xs > 0]
    if len(pos) < 3:
        return None
    xmax = float(pos.max())
    lo_y = float(ys.min())
    # parametrise C_mid on the log scale, in units of the largest sample count (well-conditioned)
    start = list(p0) if p0 is not None else [float(np.mean(ys[xs <= pos.min()])) if (xs <= pos.min()).any() else lo_y,
                                             min(hi, float(ys.max()) + 0.1 * (float(ys.max()) - lo_y) + 1e-3),
                                             0.0, 1.0]
    if p0 is not None:
        start[2] = math.log(start[2] / xmax)
    lb = [lo_y - 0.5 * abs(lo_y) - 1e-3, lo_y, math.log(1e-3), 0.3]
    ub = [float(ys.max()), hi, math.log(1e3), 6.0]
    start = [min(max(s, l + 1e-9), u - 1e-9) for s, l, u in zip(start, lb, ub)]

    def res(p):
        return sigmoid(xs, p[0], p[1], xmax * math.exp(p[2]), p[3]) - ys

    try:
        sol = least_squares(res, start, bounds=(lb, ub), method="trf", max_nfev=400)
    except (ValueError, np.linalg.LinAlgError):
        return None
    p = sol.x.copy()
    p[2] = xmax * math.exp(p[2])
    return p


def _upper(ys: np.ndarray) -> float:
    if np.all((ys >= 0) & (ys <= 1)):
        return 1.0
    return float(ys.max() + 2 * (ys.max() - ys.min()) + 1e-9)


def _blocks(e: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` residuals drawn from ``e`` in moving blocks of :data:`BLOCK` consecutive evaluations."""
    blk = min(BLOCK, len(e))
    starts = rng.integers(0, len(e) - blk + 1, math.ceil(n / blk))
    return np.concatenate([e[s:s + blk] for s in starts])[:n]


def _extension(x: np.ndarray, q: Sequence[float], target: float, horizon: float) -> np.ndarray:
    """Future evaluation points of one seed: its own spacing (median step), from past its last point up to
    ``horizon`` retained samples (at most 4000 points)."""
    pos = np.diff(x[x > 0]) if (x > 0).sum() >= 2 else np.array([max(float(x.max()), 1.0)])
    dx = float(np.median(pos)) if len(pos) else max(float(x.max()), 1.0)
    dx = max(dx, (horizon - float(x.max())) / 4000.0)
    return float(x.max()) + dx * np.arange(1, max(1, int((horizon - float(x.max())) / dx)) + 1)


def _predicted_crossing(curves, resid, q, target: float, horizon: float, rng: np.random.Generator,
                        draws: int) -> np.ndarray:
    """(draws,) the mean over seeds of each seed's samples-to-target as the accounting measures it
    (:func:`rlbatch.analysis.crossing.find_crossing`, which does not depend on the evaluation noise or spacing) on
    its observed points followed by the fitted curve ``q`` at its future evaluations up to ``horizon``; +inf where
    some seed does not reach the target by then. The same value in every draw (``resid`` and ``rng`` are kept for
    the callers: the estimator needs no noise continued)."""

    per = []
    for (x, y), _e in zip(curves, resid):
        ext = _extension(x, q, target, horizon)
        c = find_crossing(np.concatenate([x, ext]), np.concatenate([y, sigmoid(ext, *q)]), target).samples
        per.append(math.inf if c is None else c)
    return np.full(draws, float(np.mean(per)))


def _inflation(curves: Sequence[tuple[np.ndarray, np.ndarray]], fitted: Sequence[np.ndarray], s2: float) -> float:
    """Variance inflation for correlated evaluation points, >= 1 (at most 6): the larger of (1 + rho) / (1 - rho),
    rho the lag-1 autocorrelation of the residuals within seeds (a seed's curve wanders: neighbouring evaluations
    share its policy), and the seed effect mean_j(n_j * mean_residual_j^2) / s2 (1 in expectation when seeds do not
    differ systematically)."""
    if not s2 > 0:
        return 1.0
    res = [y - f for (_, y), f in zip(curves, fitted)]
    num = sum(float(e[1:] @ e[:-1]) for e in res if len(e) > 1)
    den = sum(float(e @ e) for e in res)
    rho = min(0.7, max(0.0, num / den)) if den > 0 else 0.0
    ac = (1 + rho) / (1 - rho)
    seed = float(np.mean([len(e) * float(np.mean(e)) ** 2 for e in res if len(e)])) / s2 if len(res) >= 2 else 1.0
    return float(min(6.0, max(1.0, ac, seed)))


def _noise_scale(s2: float, df: int, noise: tuple[float, int] | None, level: float) -> float:
    """The profile likelihood's threshold per unit of inflation at ``level``: F_{1,df}(level) * s^2 (Bates & Watts
    1988, sec. 6.1: the variance is estimated from the same ``df`` = n - 4 residual degrees of freedom, so the
    chi2_1 quantile of a known variance is too small on a short probe: 3.84 against F_{1,3} = 10.1 at 95% with 7
    points), or the same for the evaluation noise pooled over the comparison's configurations (``noise`` = (variance,
    degrees of freedom), :func:`fit_configurations`), whichever is larger: a curve of few points that a 4-parameter
    form follows closely does not make the evaluation noise smaller than the one the comparison's other curves show
    on the same evaluation set."""
    own = float(f_dist.ppf(level, 1, max(1, df))) * s2
    if noise is None or not noise[0] > 0:
        return own
    return max(own, float(f_dist.ppf(level, 1, max(1, noise[1]))) * float(noise[0]))


def profile_interval(curves: Sequence[tuple[np.ndarray, np.ndarray]], target: float, params: Sequence[float], *,
                     conf: float = CONF, horizon: float, n_grid: int = 32,
                     noise: tuple[float, int] | None = None) -> dict[str, Any]:
    """Profile likelihood of where one configuration's mean curve reaches ``target``: the extreme curves that still
    fit its points.

    The form of the module docstring is reparametrised by S = the crossing of ``target`` (C_mid = S ((A - R0) /
    (T - R0) - 1)^(1/b), A > T > R0); for each S on a geometric grid from half the first evaluation to ``horizon``
    retained samples (finer around the best fit's crossing), the residual sum of squares is minimised over
    (R0, A, b). A curve is plausible when
    SSE - SSE_min <= F_{1,n-4}(conf) * s^2 * k, with s^2 = SSE_min / (n - 4) (or the comparison's pooled evaluation
    noise ``noise`` = (variance, degrees of freedom) when that is larger: :func:`_noise_scale`) and k >= 1 the
    inflation for correlated evaluations (:func:`_inflation`; Venzon & Moolgavkar 1988 for profile intervals). The
    best curve that saturates below the target (A <= T) is tested the same way. ``curves``: per seed (xs, ys) as
    :func:`fit_configuration`; ``params``: a fit (R0, A, C_mid, b) to start from (a joint fit's; this
    configuration's own best fit is used when it fits better).

    Returns {``ci``: [lo, hi] of the mean curve's crossing (hi = +inf when a curve that reaches the target only at the
    horizon or never fits; [inf, inf] when no reaching curve does), ``never_plausible``, ``reach_plausible``,
    ``extremes`` (the plausible curves' parameter rows (R0, A, C_mid, b): the earliest and the latest crossing and
    the best one below the target, where plausible), ``reach_possible_from`` (the earliest crossing of a reaching
    curve plausible at :data:`REJECT_CONF`, None when none is: the evidence for "never"), ``params`` (the best
    fit), ``inflation``}."""

    xs = np.concatenate([c[0] for c in curves])
    ys = np.concatenate([c[1] for c in curves])
    hi = _upper(ys)
    own = _fit_points(xs, ys, hi, p0=params)  # this configuration's own best fit (params may be a joint fit's)
    cand = [np.asarray(params, float)] + ([own] if own is not None else [])
    params = min(cand, key=lambda q: float(((sigmoid(xs, *q) - ys) ** 2).sum()))
    r0, a, cm, b = (float(v) for v in params)
    fitted = [sigmoid(x, *params) for x, _ in curves]
    sse0 = float(sum(float(((y - f) ** 2).sum()) for (_, y), f in zip(curves, fitted)))
    s2 = sse0 / max(1, len(xs) - 4)
    infl = _inflation(curves, fitted, s2)
    df = len(xs) - 4
    thr = _noise_scale(s2, df, noise, conf) * infl
    lo_y = float(ys.min())
    r0_lb = lo_y - 0.5 * abs(lo_y) - 1e-3
    out = {"ci": [math.inf, math.inf], "never_plausible": False, "reach_plausible": False, "extremes": [],
           "reach_possible_from": None,
           "params": np.asarray(params, float), "inflation": infl}
    xmax = float(xs.max())
    lb = [r0_lb, lo_y, math.log(1e-3), 0.3]
    ub = [float(ys.max()), max(min(target, hi), lo_y + 1e-6), math.log(1e3), 6.0]
    st = [min(max(v, l + 1e-9), u - 1e-9) for v, l, u in
          zip([r0, min(a, target), math.log(max(cm, 1e-9) / xmax), b], lb, ub)]
    try:
        sol = least_squares(lambda q: sigmoid(xs, q[0], q[1], xmax * math.exp(q[2]), q[3]) - ys, st,
                            bounds=(lb, ub), method="trf", max_nfev=400)
        if 2 * sol.cost - sse0 <= thr:
            out["never_plausible"] = True
            q = sol.x
            out["extremes"].append(np.array([q[0], q[1], xmax * math.exp(q[2]), q[3]]))
    except (ValueError, np.linalg.LinAlgError):
        pass
    lb, ub = [r0_lb, target + 1e-6, 0.3], [min(float(ys.max()), target - 1e-6), hi, 6.0]
    if lb[0] >= ub[0] or lb[1] >= ub[1]:
        return out
    pos = xs[xs > 0]
    grid = np.geomspace(max(float(pos.min()) / 2, 1.0), max(horizon, 2 * float(pos.min())), n_grid)
    s_best = invert(target, r0, a, cm, b)
    if 0 < s_best < grid[-1]:  # the best fit's own crossing (SSE_min), and a finer grid around it
        grid = np.unique(np.concatenate([grid, [s_best], s_best * np.geomspace(0.6, 1.6, 16)]))
        grid = grid[grid <= max(horizon, 2 * float(pos.min()))]

    def at(S: float, warm) -> tuple[float, np.ndarray | None]:
        """(SSE, parameter row) of the best curve crossing ``target`` at ``S``."""
        best, row = math.inf, None
        starts = ([warm] if warm is not None else []) + [[r0, max(a, target + 0.05 * (hi - target)), b],
                                                         [r0, hi - 1e-3, 1.0]]
        for st in starts:
            st = [min(max(v, l + 1e-9), u - 1e-9) for v, l, u in zip(st, lb, ub)]

            def res(q):
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    c_mid = S * ((q[1] - q[0]) / (target - q[0]) - 1.0) ** (1.0 / q[2])
                    return np.nan_to_num(sigmoid(xs, q[0], q[1], c_mid, q[2]) - ys, nan=1e3, posinf=1e3)

            try:
                sol = least_squares(res, st, bounds=(lb, ub), method="trf", max_nfev=200)
            except (ValueError, np.linalg.LinAlgError):
                continue
            if 2 * sol.cost < best:
                q = sol.x
                best, row = 2 * sol.cost, np.array([q[0], q[1], S * ((q[1] - q[0]) / (target - q[0]) - 1.0)
                                                    ** (1.0 / q[2]), q[2]])
        return best, row

    def warm(row):
        return None if row is None else [row[0], row[1], row[3]]

    ok, rows, prev, sses = [], [], None, []
    for S in grid:
        sse, row = at(float(S), warm(prev))
        prev = row if row is not None else prev
        ok.append(sse - sse0 <= thr)
        rows.append(row)
        sses.append(sse)
    ok = np.array(ok, bool)
    # a rejection ("never") is decided at the stricter REJECT_CONF: no reaching curve fits even at that level
    ok_r = np.array(sses) - sse0 <= _noise_scale(s2, df, noise, REJECT_CONF) * infl
    if ok_r.any():
        out["reach_possible_from"] = float(grid[np.flatnonzero(ok_r)[0]])
    if ok.any():
        idx = np.flatnonzero(ok)

        def edge(i_in: int, i_out: int) -> tuple[float, np.ndarray]:
            """Bisect (on the log scale, 6 steps) between a plausible grid point and an implausible neighbour."""
            s_in, s_out, r_in = float(grid[i_in]), float(grid[i_out]), rows[i_in]
            for _ in range(6):
                mid = math.sqrt(s_in * s_out)
                sse, row = at(mid, warm(r_in))
                if sse - sse0 <= thr:
                    s_in, r_in = mid, row
                else:
                    s_out = mid
            return s_in, r_in

        lo, r_lo = edge(idx[0], idx[0] - 1) if idx[0] > 0 else (float(grid[0]), rows[0])
        open_hi = bool(ok[-1] or out["never_plausible"])
        hi_s, r_hi = (float(grid[-1]), rows[-1]) if ok[-1] else edge(idx[-1], idx[-1] + 1)
        out["reach_plausible"] = True
        out["ci"] = [lo, math.inf if open_hi else hi_s]
        out["extremes"] += [r for r in (r_lo, r_hi) if r is not None]
    return out


def _finish(res: dict[str, Any], curves, target: float | None, conf: float, horizon: float,
            rng: np.random.Generator | None = None, noise: tuple[float, int] | None = None) -> dict[str, Any]:
    """Fold the profile likelihood (:func:`profile_interval`) into a fit's result and classify it.

    What the accounting measures is each seed's first *noisy* evaluation at the target, so the extreme plausible
    curves (earliest and latest crossing, the best one below the target) are each continued like the fit itself
    (the seed's observed points, then the curve plus the seed's residuals in blocks; :func:`_predicted_crossing`,
    100 draws) and their medians widen the bootstrap's interval: [min, max] over the bootstrap's ends and theirs.
    The bootstrap alone, resampling residuals around one fitted shape, understates how far a short curve can bend.
    ``status``: "reaches" (a predicted samples-to-target), "undetermined" (the best fit does not reach the target
    within the horizon but a plausible curve does: no point estimate, the interval open above; run longer) or
    "never" (no curve that reaches the target within the horizon fits, at :data:`REJECT_CONF`: rejected, with the
    reason)."""
    if target is None:
        res["status"] = None
        return res
    p = [res["params"][k] for k in ("R0", "A", "C_mid", "b")]
    pr = profile_interval(curves, target, p, conf=conf, horizon=horizon, noise=noise)
    rng = rng if rng is not None else np.random.default_rng(len(curves))
    resid = [y - sigmoid(x, *pr["params"]) for x, y in curves]
    ends = [float(np.median(_predicted_crossing(curves, resid, q, target, horizon, rng, 100)))
            for q in pr["extremes"]]
    res["profile_ci"] = pr["ci"]
    res["inflation"] = pr["inflation"]
    boot = res.get("samples_to_target_ci")
    lo = min(ends + ([boot[0]] if boot else []), default=math.inf)
    hi = max(ends + ([boot[1]] if boot else []), default=-math.inf)
    if res["reaches"]:
        res["status"] = "reaches"
        s = res["samples_to_target"]
        res["samples_to_target_ci"] = [min(lo, s), max(hi, s)]
    elif math.isfinite(lo) or pr["reach_possible_from"] is not None:
        lo = lo if math.isfinite(lo) else pr["reach_possible_from"]
        res["status"] = "undetermined"
        res["samples_to_target_ci"] = [lo, math.inf]
        res["reason"] = (f"undetermined: the best fit levels off at A = {res['params']['A']:.3g}, below the target "
                         f"{target:g}, but curves that reach it after {lo:.3g} samples also fit the points "
                         f"(profile likelihood); run longer")
    else:
        res["status"] = "never"
    return res


def fit_configuration(curves: Sequence[tuple[np.ndarray, np.ndarray]], target: float | None = None, *,
                      n_boot: int = 200, seed: int | None = None, name: str = "", conf: float = CONF,
                      horizon_factor: float = 20.0) -> dict[str, Any] | None:
    """Fit one configuration's seeds jointly and predict its samples-to-target at ``target``.

    ``curves``: per seed ``(xs, ys)``: retained samples (responses, ascending, the evaluation at 0 included where
    logged) and scores, arrays of equal length. The prediction is of the quantity the accounting measures once the
    runs are finished: the mean over seeds of each seed's *first* crossing of the target by its noisy evaluations
    (not the crossing of the fitted mean curve, which lies later near a plateau): each seed's observed points, then
    the fitted curve plus that seed's residuals (blocks) at its future evaluations, up to ``horizon_factor`` x the
    largest fitted sample count. Point estimate: the median over 200 such continuations of the fit; interval: the
    percentile interval over ``n_boot`` refits of the bootstrap (module docstring), each continued once.

    Returns None when there are fewer than 3 evaluation points past 0 or the fit fails; else a dict: ``params``
    {R0, A, C_mid (responses), b}, ``A_ci``, ``mean_curve_samples_to_target`` (the fitted curve's own crossing;
    None when A <= target), ``samples_to_target`` (predicted S, responses; None when it never reaches within the
    horizon), ``samples_to_target_ci`` ([lo, hi], hi may be +inf), ``reaches``, ``reason`` (why it never reaches,
    else None), ``rmse``, ``n_points``, ``n_seeds``, ``x_max`` and ``_replicates`` (array (n_boot,) of S, +inf =
    never)."""
    curves = [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves if len(x)]
    if not curves:
        return None
    xs = np.concatenate([c[0] for c in curves])
    ys = np.concatenate([c[1] for c in curves])
    hi = _upper(ys)
    p = _fit_points(xs, ys, hi)
    if p is None:
        return None
    r0, a, cm, b = (float(v) for v in p)
    fitted = [sigmoid(x, *p) for x, _ in curves]
    resid = [y - f for (_, y), f in zip(curves, fitted)]
    rmse = float(np.sqrt(np.mean(np.concatenate(resid) ** 2)))
    rng = np.random.default_rng(zlib.crc32(name.encode()) if seed is None else seed)
    horizon = horizon_factor * float(xs.max())
    k = len(curves)
    S_b, A_b = [], []
    for _ in range(max(0, n_boot)):
        pick = rng.integers(0, k, k) if k >= 2 else [0]
        bx = [curves[j][0] for j in pick]
        by = [fitted[j] + _blocks(resid[j], len(resid[j]), rng) for j in pick]
        q = _fit_points(np.concatenate(bx), np.concatenate(by), hi, p0=p)
        if q is None:
            continue
        A_b.append(q[1])
        if target is not None:
            S_b.append(_predicted_crossing(curves, resid, q, target, horizon, rng, 1)[0])
    S_b = np.array(S_b, float)
    s_mean = invert(target, r0, a, cm, b) if target is not None else None
    s = None
    if target is not None:
        s = float(np.median(_predicted_crossing(curves, resid, p, target, horizon, rng, 200)))
    reaches = s is not None and math.isfinite(s)
    a_ci = bootstrap_interval(np.array(A_b), conf, "inverted_cdf")
    out = {"params": {"R0": r0, "A": a, "C_mid": cm, "b": b}, "A_ci": a_ci,
           "mean_curve_samples_to_target": s_mean if s_mean is not None and math.isfinite(s_mean) else None,
           "samples_to_target": s if reaches else None,
           "samples_to_target_ci": bootstrap_interval(S_b, conf, "inverted_cdf") if target is not None else None,
           "reaches": reaches, "reason": None, "rmse": rmse, "n_points": int(len(xs)), "n_seeds": k,
           "x_max": float(xs.max()), "target": target, "_replicates": S_b if target is not None else None}
    if target is not None and not reaches:
        out["reason"] = (f"fitted asymptote A = {a:.3g}" + (f" ({conf:.0%} CI {format_interval(a_ci, '.3g', sep='-', unbounded='inf')})" if a_ci else "")
                         + f" with evaluation noise {rmse:.2g} does not reach the target {target:g} within "
                         f"{horizon:.3g} samples")
    return _finish(out, curves, target, conf, horizon)


def rn_from_fits(fit: dict[str, Any], ref_s: float, ref_reps: np.ndarray | None, conf: float = CONF,
                 ref_fit: dict[str, Any] | None = None) -> tuple[float | None, list[float] | None]:
    """Predicted rN = S_fit / S_ref and its percentile interval from the two sides' replicates: paired draw by draw
    when both come from one joint fit (``ref_fit`` given and ``fit["_joint"] is ref_fit["_joint"]``: the shared
    shape's uncertainty cancels in the ratio), else taken independently (``ref_reps``: the reference's bootstrap
    replicates of S, e.g. the accounting's measured ones). The interval is then widened to contain the candidate's
    own interval of S (bootstrap and profile likelihood, :func:`_finish`) over ``ref_s``, combined for an
    extrapolated reference (``ref_fit``) with the reference's own interval in quadrature on the log scale. rN is None when the fit never reaches the
    target; an interval end may be +inf (an undetermined, NaN, end is returned open: 0 below, +inf above). Replicates where both sides never reach the target are dropped."""
    s = fit.get("samples_to_target")
    if s is None or not ref_s:
        return None, None
    rn = sample_ratio(s, ref_s)
    a = fit.get("_replicates")
    if a is None or len(a) < 20 or ref_reps is None or len(ref_reps) < 20:
        return rn, None
    r = np.asarray(ref_reps, float)
    paired = ref_fit is not None and fit.get("_joint") is not None and fit.get("_joint") is ref_fit.get("_joint") \
        and len(r) == len(a)
    if not paired:
        rng = np.random.default_rng(len(a))
        r = r[rng.integers(0, len(r), len(a))]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = sample_ratio(np.asarray(a, float), r)
    q = q[~np.isnan(q)]
    if len(q) < 20:
        return rn, None
    ci = bootstrap_interval(q, conf, "inverted_cdf")
    own = fit.get("samples_to_target_ci")
    if ci is not None and own and own[0] > 0:
        # at least as wide as the candidate's own interval (bootstrap u profile) over S_ref, with an extrapolated
        # reference's own interval (``ref_fit``) added in quadrature on the log scale (independent errors)
        rci = (ref_fit or {}).get("samples_to_target_ci") or [ref_s, ref_s]
        with np.errstate(divide="ignore"):
            d_lo = math.hypot(math.log(s / min(own[0], s)), math.log(max(rci[1], ref_s) / ref_s))
            d_hi = math.hypot(math.log(max(own[1], s) / s), math.log(ref_s / min(rci[0], ref_s)) if rci[0] > 0
                              else math.inf)
        ci = [min(ci[0], rn * math.exp(-d_lo)), max(ci[1], rn * math.exp(d_hi))]
    if ci is not None:  # an undetermined (NaN) end is open: 0 below, +inf above
        ci = [ci[0] if math.isfinite(ci[0]) or ci[0] == math.inf else 0.0,
              ci[1] if not math.isnan(ci[1]) else math.inf]
    return rn, ci


def _fit_joint(pooled: Sequence[tuple[np.ndarray, np.ndarray]], hi: float, p0: np.ndarray | None = None
               ) -> np.ndarray | None:
    """Joint least squares over K configurations with a shared start R0 and steepness b and per-configuration A_k,
    C_mid,k: ``pooled[k] = (xs, ys)`` (all seeds of configuration k). Returns (K, 4) rows (R0, A_k, C_mid,k, b)."""

    K = len(pooled)
    xmax = [float(x.max()) if len(x) and x.max() > 0 else 1.0 for x, _ in pooled]
    ally = np.concatenate([y for _, y in pooled])
    lo_y, top = float(ally.min()), float(ally.max())
    if p0 is None:
        starts0 = [float(np.mean(y[x <= 0])) if (x <= 0).any() else lo_y for x, y in pooled]
        start = [float(np.mean(starts0)), 1.0] + [min(hi, float(y.max()) + 0.1 * (float(y.max()) - lo_y) + 1e-3)
                                                  for _, y in pooled] + [0.0] * K
    else:
        start = [p0[0, 0], p0[0, 3]] + list(p0[:, 1]) + [math.log(p0[k, 2] / xmax[k]) for k in range(K)]
    lb = [lo_y - 0.5 * abs(lo_y) - 1e-3, 0.3] + [lo_y] * K + [math.log(1e-3)] * K
    ub = [top, 6.0] + [hi] * K + [math.log(1e3)] * K
    start = [min(max(s, l + 1e-9), u - 1e-9) for s, l, u in zip(start, lb, ub)]

    def res(p):
        return np.concatenate([sigmoid(x, p[0], p[2 + k], xmax[k] * math.exp(p[2 + K + k]), p[1]) - y
                               for k, (x, y) in enumerate(pooled)])

    try:
        sol = least_squares(res, start, bounds=(lb, ub), method="trf", max_nfev=600)
    except (ValueError, np.linalg.LinAlgError):
        return None
    p = sol.x
    return np.array([[p[0], p[2 + k], xmax[k] * math.exp(p[2 + K + k]), p[1]] for k in range(K)])


def fit_configurations(curves: dict[str, Sequence[tuple[np.ndarray, np.ndarray]]], target: float | None = None, *,
                       n_boot: int = 200, seed: int = 0, conf: float = CONF, horizon_factor: float = 20.0
                       ) -> dict[str, dict[str, Any] | None]:
    """Joint fit of several configurations of one comparison (same model, task, algorithm): the form of the module
    docstring with R0 (the common start) and b (the steepness) shared, A and C_mid per configuration, so short
    probes borrow the shape of the curve from each other while keeping their own asymptote and speed.
    ``curves``: {configuration name: per-seed (xs, ys)} as :func:`fit_configuration`. Returns {name: result of the
    same shape as :func:`fit_configuration`} (None for a configuration with fewer than 3 points past 0; all None
    when the joint fit fails). Bootstrap as :func:`fit_configuration`, every configuration resampled within itself
    and refitted jointly; each configuration's prediction continues its own seeds."""
    names = [n for n, cs in curves.items() if sum(int((np.asarray(x) > 0).sum()) for x, _ in cs) >= 3]
    out: dict[str, dict[str, Any] | None] = {n: None for n in curves}
    if not names:
        return out
    cv = {n: [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves[n] if len(x)] for n in names}
    pooled = [(np.concatenate([c[0] for c in cv[n]]), np.concatenate([c[1] for c in cv[n]])) for n in names]
    hi = _upper(np.concatenate([y for _, y in pooled]))
    P = _fit_joint(pooled, hi)
    if P is None:
        return out
    rng = np.random.default_rng(seed)
    fitted = {n: [sigmoid(x, *P[k]) for x, _ in cv[n]] for k, n in enumerate(names)}
    resid = {n: [y - f for (_, y), f in zip(cv[n], fitted[n])] for n in names}
    S_b = {n: [] for n in names}
    A_b = {n: [] for n in names}
    for _ in range(max(0, n_boot)):
        bp = []
        for n in names:
            k = len(cv[n])
            pick = rng.integers(0, k, k) if k >= 2 else [0]
            bp.append((np.concatenate([cv[n][j][0] for j in pick]),
                       np.concatenate([fitted[n][j] + _blocks(resid[n][j], len(resid[n][j]), rng) for j in pick])))
        Q = _fit_joint(bp, hi, p0=P)
        if Q is None:
            continue
        for k, n in enumerate(names):
            A_b[n].append(Q[k, 1])
            if target is not None:
                hz = horizon_factor * float(pooled[k][0].max())
                S_b[n].append(_predicted_crossing(cv[n], resid[n], Q[k], target, hz, rng, 1)[0])
    token = object()  # replicates of one joint fit are paired (same bootstrap draw for every configuration)
    # the evaluation noise pooled over the comparison (same evaluation set): residual variance of the joint fit,
    # degrees of freedom = points - (2 shared + 2 per configuration) parameters
    n_all = sum(len(x) for x, _ in pooled)
    sse_all = sum(float((e ** 2).sum()) for n in names for e in resid[n])
    df_all = n_all - 2 - 2 * len(names)
    noise = (sse_all / df_all, df_all) if df_all > 0 else None
    for k, n in enumerate(names):
        r0, a, cm, b = (float(v) for v in P[k])
        hz = horizon_factor * float(pooled[k][0].max())
        s = float(np.median(_predicted_crossing(cv[n], resid[n], P[k], target, hz, rng, 200))) \
            if target is not None else None
        s_mean = invert(target, r0, a, cm, b) if target is not None else None
        reaches = s is not None and math.isfinite(s)
        a_ci = bootstrap_interval(np.array(A_b[n]), conf, "inverted_cdf")
        sb = np.array(S_b[n], float)
        rmse = float(np.sqrt(np.mean(np.concatenate(resid[n]) ** 2)))
        res = {"params": {"R0": r0, "A": a, "C_mid": cm, "b": b}, "A_ci": a_ci, "shared": ["R0", "b"],
               "_joint": token,
               "mean_curve_samples_to_target": s_mean if s_mean is not None and math.isfinite(s_mean) else None,
               "samples_to_target": s if reaches else None,
               "samples_to_target_ci": bootstrap_interval(sb, conf, "inverted_cdf") if target is not None else None,
               "reaches": reaches, "reason": None, "rmse": rmse, "n_points": int(len(pooled[k][0])),
               "n_seeds": len(cv[n]), "x_max": float(pooled[k][0].max()), "target": target,
               "_replicates": sb if target is not None else None}
        if target is not None and not reaches:
            res["reason"] = (f"fitted asymptote A = {a:.3g}" + (f" ({conf:.0%} CI {format_interval(a_ci, '.3g', sep='-', unbounded='inf')})"
                                                                  if a_ci else "")
                             + f" with evaluation noise {rmse:.2g} does not reach the target {target:g} within "
                             f"{hz:.3g} samples")
        out[n] = _finish(res, cv[n], target, conf, hz, noise=noise)
    return out


def fit_groups(groups: dict[str, Sequence[Any]], target: float | None, metric: str = "eval/score", **kw: Any
               ) -> dict[str, dict[str, Any] | None]:
    """:func:`fit_configurations` over run-store configurations ``{name: seeds (runs)}``, curves from
    :func:`rlbatch.analysis.curves.curve`."""

    cs = {}
    for n, rs in groups.items():
        cc = [curve(r, metric) for r in rs]
        cs[n] = [(c[X].to_numpy(float), c[metric].to_numpy(float)) for c in cc if len(c)]
    return fit_configurations(cs, target, **kw)
