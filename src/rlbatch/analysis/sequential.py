"""Group-sequential multi-arm multi-stage (MAMS) comparison of K configurations against a reference.

Design. K configurations (the reference and K-1 others, e.g. batch sizes) are compared by the log time-to-target
of each seed. Every configuration starts with ``looks[0]`` seeds; at look j each surviving configuration and the
reference have ``n_j = looks[j]`` seeds, and for each surviving configuration c

    t_c = (mean log T_c - mean log T_ref) / (s * sqrt(2 / n_j)),

where s is the pooled sd over *all* configurations' seeds so far (those already stopped keep the seeds they had),
with df = sum over configurations of (n - 1). c is called FASTER (efficacy) when t_c <= -C * sqrt(n_max / n_j) and
DROPPED (futility) when t_c >= -f; otherwise it gets more seeds at the next look. A configuration called faster
stops getting seeds (its claim is final); the reference gets seeds while any configuration survives; the study
stops when none survives, or at the last look. Runs = seeds summed over all configurations, the reference included.

Boundary shape: O'Brien-Fleming (1979), constant on the score scale, so -C*sqrt(n_max/n_j) on the t scale. Early
looks, with few seeds and a noisy spread, are very conservative (a claim there needs an overwhelming effect, and
little alpha is spent), so the last look's critical value is close to the fixed design's: a study that runs to the
end loses almost nothing against the fixed design, while large effects and clear losers stop early.

Futility is *binding*: a dropped configuration is never claimed later. The calibration counts on it (C is smaller
than with non-binding futility), so the rule must be obeyed; ignoring it inflates the error. ``futility=-inf`` turns
futility off; with one look the design is the single-step one-sided Dunnett (1955) test.

Calibration. C is found by bisection so that, under the global null (all K configurations equal), the probability of
any false "faster" claim over all looks is ``alpha``, by vectorised Monte Carlo with common random numbers, with the
futility rule applied and the spread estimated (pooled, as above). It assumes normal log times with a common sigma
(t_c is then free of sigma and of the common mean, so no sigma is needed). Magirr, Jaki & Whitehead (2012), "A
generalized Dunnett test for multi-arm multi-stage clinical studies with treatment selection", Biometrika 99(2),
494-501, show that for this kind of design (efficacy on the maximum statistic, binding futility) the familywise error
is largest under the global null, so calibrating there controls it in the strong sense. With an estimated pooled
spread that holds approximately (the spread couples the comparisons); :func:`simulate` checks any configuration.

Other sources: Dunnett (1955), JASA 50, 1096-1121 (the many-to-one comparison, one-sided critical value);
Jennison & Turnbull (2000), "Group Sequential Methods", ch. 2 and 16 (O'Brien-Fleming shape, t-statistics).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, special, stats

__all__ = ["Design", "calibrate", "simulate", "fixed_power", "seeds_for_power", "dunnett_critical"]


@dataclass(frozen=True)
class Design:
    """A calibrated design; ``j`` below is the 0-based index of a look in ``looks``."""

    looks: tuple[int, ...]  # seeds per configuration at each look, e.g. (2, 4, 6)
    futility: float  # f: drop c when t_c >= -f (binding); -inf: no futility
    alpha: float  # familywise error of "faster" claims
    n_configs: int  # K, the reference included
    C: float  # calibrated efficacy constant

    def efficacy_bound(self, j: int) -> float:
        """The efficacy bound of look ``j`` on the t scale: ``-C * sqrt(n_max / n_j)``."""
        return -self.C * math.sqrt(self.looks[-1] / self.looks[j])

    def tail(self, j: int, df: float) -> float:
        """One-sided per-comparison tail probability of look ``j``'s bound under Student t with ``df``: a
        configuration is called faster at look j when the fraction of its replicates of the difference above zero
        (or its one-sided p-value) is at most this."""
        return float(stats.t.cdf(self.efficacy_bound(j), df))


def _check_looks(looks: Sequence[int]) -> tuple[int, ...]:
    lk = tuple(int(n) for n in looks)
    if not lk or lk[0] < 2 or any(b <= a for a, b in zip(lk, lk[1:])):
        raise ValueError(f"looks must be strictly increasing seed counts starting at 2 or more, got {looks}")
    return lk


def _look_stats(rng: np.random.Generator, looks: tuple[int, ...], n_sim: int, shift: np.ndarray):
    """Sums and within-configuration sums of squares of the first ``looks[j]`` seeds of every configuration,
    shapes (n_sim, K, J); seeds are N(shift_k, 1) (log time / sigma)."""
    K, J = len(shift), len(looks)
    s1, s2 = np.zeros((n_sim, K, J)), np.zeros((n_sim, K, J))
    a1, a2, prev = np.zeros((n_sim, K)), np.zeros((n_sim, K)), 0
    for j, n in enumerate(looks):
        x = rng.standard_normal((n_sim, K, n - prev)) + shift[None, :, None]
        a1 += x.sum(2)
        a2 += (x * x).sum(2)
        s1[:, :, j], s2[:, :, j], prev = a1, a2 - a1 * a1 / n, n
    return s1, s2


def _run(s1, ss, looks, bounds, futility):
    """Play the design on pre-drawn data. Returns (faster, dropped, stop look index, runs)."""
    n_sim, K, J = s1.shape
    la = np.asarray(looks)
    last = np.zeros((n_sim, K), dtype=np.intp)  # last look each configuration took part in
    active = np.ones((n_sim, K - 1), bool)
    faster, dropped = np.zeros_like(active), np.zeros_like(active)
    running = np.ones(n_sim, bool)
    stop = np.full(n_sim, J - 1)
    for j in range(J):
        last[:, 0] = np.where(running, j, last[:, 0])
        last[:, 1:] = np.where(active, j, last[:, 1:])
        n = la[last]
        m = np.take_along_axis(s1, last[..., None], 2)[..., 0] / n
        q = np.take_along_axis(ss, last[..., None], 2)[..., 0]
        s = np.sqrt(q.sum(1) / (n - 1).sum(1))
        t = (m[:, 1:] - m[:, :1]) / (s * math.sqrt(2.0 / looks[j]))[:, None]
        eff = active & (t <= bounds[j])
        drop = active & ~eff & (t >= -futility) if j < J - 1 else np.zeros_like(active)
        faster |= eff
        dropped |= drop
        active &= ~(eff | drop)
        now = running & ~active.any(1)
        stop[now] = j
        running &= ~now
    return faster, dropped, stop, la[last].sum(1)


@functools.lru_cache(maxsize=64)
def _calibrate(looks: tuple[int, ...], futility: float, alpha: float, n_configs: int, n_sim: int, seed: int) -> Design:
    rng = np.random.default_rng(seed)
    s1, ss = _look_stats(rng, looks, n_sim, np.zeros(n_configs))
    shape = np.sqrt(looks[-1] / np.asarray(looks, float))

    def fw(c: float) -> float:
        return float(_run(s1, ss, looks, -c * shape, futility)[0].any(1).mean())

    lo, hi = 0.0, 4.0
    while fw(hi) > alpha:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-4:  # the estimate is a step function of C; bisect to the smallest C with fw <= alpha
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fw(mid) > alpha else (lo, mid)
    return Design(looks, futility, alpha, n_configs, hi)


def calibrate(looks: Sequence[int], futility: float = 1.0, alpha: float = 0.05, n_configs: int = 8,
              n_sim: int = 40_000, seed: int = 0) -> Design:
    """Calibrate C (bisection, common random numbers) so that P(any false "faster") = ``alpha`` under the global
    null with binding futility and an estimated pooled spread. Deterministic given ``seed``; cached, so repeated
    calls with the same arguments are free. Monte Carlo sd of the attained error: sqrt(alpha(1-alpha)/n_sim)."""
    if n_configs < 2 or not 0 < alpha < 1:
        raise ValueError("need n_configs >= 2 and 0 < alpha < 1")
    return _calibrate(_check_looks(looks), float(futility), float(alpha), int(n_configs), int(n_sim), int(seed))


def _effects(effects: Sequence[float], K: int) -> np.ndarray:
    e = np.asarray(effects, float).ravel()
    if len(e) > K - 1:
        raise ValueError(f"{len(e)} effects for {K - 1} non-reference configurations")
    return np.concatenate([e, np.zeros(K - 1 - len(e))])  # missing ones: null (effect 0)


def simulate(design: Design, effects: Sequence[float], sigma: float = 0.275, n_sim: int = 20_000,
             seed: int = 1) -> dict:
    """Operating characteristics of ``design`` when the non-reference configurations have log-mean ``effects``
    relative to the reference (negative = faster; fewer than K-1 values: the rest are 0) and seed sd ``sigma``.

    Returns ``power`` (per configuration, P(called faster)), ``p_dropped``, ``fw`` (P(any false faster among the
    configurations with effect >= 0); NaN if there are none), ``expected_runs``, ``runs_p90``, ``runs_max_seen``,
    ``max_runs`` (the design's cap, K * n_max), ``p_stop`` (P(the study stops at each look)), ``expected_looks``.
    """
    K = design.n_configs
    e = _effects(effects, K)
    rng = np.random.default_rng(seed)
    s1, ss = _look_stats(rng, design.looks, n_sim, np.concatenate([[0.0], e / sigma]))
    bounds = [design.efficacy_bound(j) for j in range(len(design.looks))]
    faster, dropped, stop, runs = _run(s1, ss, design.looks, bounds, design.futility)
    null = e >= 0
    return {
        "power": faster.mean(0),
        "p_dropped": dropped.mean(0),
        "fw": float(faster[:, null].any(1).mean()) if null.any() else float("nan"),
        "expected_runs": float(runs.mean()),
        "runs_p90": float(np.quantile(runs, 0.9)),
        "runs_max_seen": int(runs.max()),
        "max_runs": K * design.looks[-1],
        "p_stop": np.bincount(stop, minlength=len(design.looks)) / n_sim,
        "expected_looks": float(stop.mean() + 1),
    }


# Fixed design: exact numerics. Under the null t_c = W_c / S with W_c = (Z_c - Z_0)/sqrt(2) (correlation 1/2) and
# S^2 ~ chi2_df / df independent, so P(all t_c > -c) = E_S[ int phi(z) Phi_bar(z - c S sqrt(2))^(K-1) dz ]: a 2-D
# integral, z by Gauss-Hermite and chi2 by the trapezoid rule in log(chi2) (smooth, fast-decaying integrand:
# spectrally accurate for any df).
_ZN, _ZW = special.roots_hermitenorm(96)
_ZW = _ZW / math.sqrt(2 * math.pi)


def _chi2_rule(df: float, n: int = 240):
    """Nodes x and weights w with sum w g(x) ~= E g(chi2_df)."""
    y = np.linspace(math.log(stats.chi2.ppf(1e-14, df)), math.log(stats.chi2.isf(1e-14, df)), n)
    w = np.exp(y + stats.chi2.logpdf(np.exp(y), df))
    return np.exp(y), w / w.sum()


@functools.lru_cache(maxsize=1024)
def dunnett_critical(n_configs: int, df: float, alpha: float = 0.05, one_sided: bool = True) -> float:
    """Critical value c of the single-step Dunnett test of K-1 = ``n_configs``-1 configurations against one
    reference with a pooled spread on ``df`` degrees of freedom: P(min t_c <= -c) = alpha (one-sided) or
    P(max |t_c| >= c) = alpha (two-sided) under the null. Exact up to quadrature error (< 1e-4)."""
    x, w = _chi2_rule(df)
    s = np.sqrt(x / df)[:, None, None]
    z = _ZN[None, :, None]

    def miss(c: float) -> float:
        a = c * s * math.sqrt(2.0)
        p = stats.norm.sf(z - a) if one_sided else stats.norm.cdf(z + a) - stats.norm.cdf(z - a)
        return float(w @ (p[..., 0] ** (n_configs - 1) @ _ZW)) - (1 - alpha)

    return float(optimize.brentq(miss, 0.0, 50.0, xtol=1e-8))


def _power_one(effect: float, sigma: float, n: int, K: int, alpha: float) -> float:
    """P(called faster) of one configuration in the fixed one-sided Dunnett design: noncentral t, exact (the claim
    on one configuration depends only on its own statistic)."""
    df = K * (n - 1)
    c = dunnett_critical(K, df, alpha, True)
    return float(stats.nct.cdf(-c, df, effect / (sigma * math.sqrt(2.0 / n))))


def fixed_power(n_seeds: int, effects: Sequence[float], sigma: float, alpha: float = 0.05,
                n_configs: int | None = None, one_sided: bool = True, n_sim: int = 20_000, seed: int = 2) -> dict:
    """The fixed design: ``n_seeds`` seeds of every configuration, one single-step Dunnett test with the pooled
    spread (df = K(n-1)). K = ``n_configs`` (missing effects: 0) or len(effects)+1. Returns ``critical`` (exact),
    ``power`` (simulated, per configuration, P(called faster)), ``power_exact`` (noncentral t, one-sided only),
    ``fw`` (P(any false faster among effects >= 0)), ``runs`` (K * n)."""
    K = int(n_configs) if n_configs is not None else len(effects) + 1
    e = _effects(effects, K)
    n = int(n_seeds)
    df = K * (n - 1)
    c = dunnett_critical(K, df, alpha, one_sided)
    rng = np.random.default_rng(seed)
    s1, ss = _look_stats(rng, (n,), n_sim, np.concatenate([[0.0], e / sigma]))
    m = s1[:, :, 0] / n
    s = np.sqrt(ss[:, :, 0].sum(1) / df)
    t = (m[:, 1:] - m[:, :1]) / (s * math.sqrt(2.0 / n))[:, None]
    faster = t <= -c
    null = e >= 0
    exact = np.array([_power_one(d, sigma, n, K, alpha) for d in e]) if one_sided else None
    return {"critical": c, "power": faster.mean(0), "power_exact": exact, "runs": K * n,
            "fw": float(faster[:, null].any(1).mean()) if null.any() else float("nan")}


def seeds_for_power(effect: float, sigma: float, power: float = 0.8, n_configs: int = 8, alpha: float = 0.05,
                    max_seeds: int = 30, sigma_df: float | None = None) -> int | None:
    """Smallest fixed n (seeds per configuration, 2..``max_seeds``) whose one-sided Dunnett power for one
    configuration with log effect ``effect`` (< 0), the others null, reaches ``power``; None if none does.

    Exact numerics: the Dunnett critical value by quadrature (:func:`dunnett_critical`) and the configuration's
    power by the noncentral t (the claim depends on its own statistic only). With ``sigma_df``, ``sigma`` is taken as
    an estimate on that many degrees of freedom and the power is averaged over the true sigma's scaled inverse
    chi-square distribution, sigma^2 = sigma_df * sigma_hat^2 / chi2_{sigma_df} (the posterior under the prior
    1/sigma^2): the expected power given the uncertain spread, which asks for more seeds than the plug-in power.
    """
    if sigma_df is not None:
        x, w = _chi2_rule(float(sigma_df))
        sig = sigma * np.sqrt(sigma_df / x)
    for n in range(2, int(max_seeds) + 1):
        if sigma_df is None:
            p = _power_one(effect, sigma, n, n_configs, alpha)
        else:
            df = n_configs * (n - 1)
            c = dunnett_critical(n_configs, df, alpha, True)
            p = float(w @ stats.nct.cdf(-c, df, effect / (sig * math.sqrt(2.0 / n))))
        if p >= power:
            return n
    return None
