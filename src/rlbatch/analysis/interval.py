"""Percentile intervals of replicates: the one definition every estimate's interval uses.

Source: Efron & Tibshirani (1993), the percentile interval: the ``(1 - conf) / 2`` and ``(1 + conf) / 2``
quantiles of the replicates. Replicates of a mean over a few seeds come from :func:`seed_mean_replicates` (Student's
t on the log scale), not from resampling the seeds: resampling two or three seeds gives an interval no wider than
the seeds' own spread, narrower than the truth and narrower with two seeds than with three. The spread can be
pooled over the configurations of one comparison (:func:`pooled_spread`) when they agree on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

#: Fewest non-NaN replicates an interval is given from (fewer: no interval).
MIN_REPLICATES = 20


def percentile_interval(values: Sequence[float] | np.ndarray, conf: float = 0.95,
                        method: str = "linear") -> tuple[float, float]:
    """``(lo, hi)``: the ``(1 - conf) / 2`` and ``1 - (1 - conf) / 2`` quantiles of ``values`` (a 1-D sequence of
    replicates, at least one), by ``method`` (numpy's quantile methods: ``linear``, ``inverted_cdf``,
    ``nearest``)."""
    q = (1 - conf) / 2
    v = np.asarray(values, float)
    return float(np.quantile(v, q, method=method)), float(np.quantile(v, 1 - q, method=method))


@dataclass(frozen=True)
class PooledSpread:
    """The seed-to-seed spread on the log scale pooled over the configurations of one comparison: ``S`` and ``T``
    (pooled sample standard deviations of log samples-to-target and log time-to-target) with ``df`` degrees of
    freedom (the sum over the configurations of seeds - 1) and ``n_configurations``. Made by :func:`pooled_spread`."""
    S: float
    T: float
    df: int
    n_configurations: int


def pooled_spread(samples: Sequence[Sequence[float]], times: Sequence[Sequence[float]],
                  alpha: float = 0.05) -> PooledSpread | None:
    """One spread for every configuration of a comparison: the pooled standard deviation of the log per-seed
    samples-to-target (``samples``: one sequence per configuration, its seeds' values) and of the log time-to-target
    (``times``, the same shape), with ``df = sum(k_i - 1)``. A t interval of each configuration's mean then takes
    t_{df} and the pooled spread over sqrt(k_i): far tighter than each configuration's own t with k_i - 1 degrees of
    freedom (t_{0.975,2} = 4.3 with 3 seeds vs t_{0.975,18} = 2.1 pooled over 9 configurations), and still wider
    with fewer seeds. Only configurations with two or more positive values count; None with fewer than two of them,
    or when Bartlett's test (on the logs) rejects equal spreads at ``alpha`` for either quantity: then each
    configuration keeps its own spread.

    Source: the pooled variance of one-way ANOVA (Fisher 1925); Bartlett (1937) for the test of equal variances."""
    pairs = [(np.log(np.asarray(s, float)), np.log(np.asarray(t, float))) for s, t in zip(samples, times)
             if len(s) >= 2 and len(s) == len(t) and np.all(np.asarray(s, float) > 0)
             and np.all(np.asarray(t, float) > 0)]
    if len(pairs) < 2:
        return None
    from scipy import stats  # on use, as t_draws

    spreads = []
    for j in (0, 1):
        groups = [p[j] for p in pairs]
        if sum(np.var(g) > 0 for g in groups) >= 2:
            with np.errstate(all="ignore"):
                pv = stats.bartlett(*[g for g in groups if np.var(g) > 0]).pvalue
            if math.isfinite(pv) and pv < alpha:
                return None
        ss = sum(float(((g - g.mean()) ** 2).sum()) for g in groups)
        spreads.append(ss)
    df = sum(len(p[0]) - 1 for p in pairs)
    return PooledSpread(S=math.sqrt(spreads[0] / df), T=math.sqrt(spreads[1] / df), df=df,
                        n_configurations=len(pairs))


def t_draws(n_seeds: int, n_boot: int, rng: np.random.Generator, df: int | None = None) -> np.ndarray | None:
    """``n_boot`` draws of Student's t with ``df`` (default ``n_seeds - 1``) degrees of freedom (shape
    ``(n_boot,)``), shared by every quantity of one configuration so that its samples- and time-to-target move
    together across replicates; None for fewer than two seeds. The draws are the distribution's quantiles at
    ``(i + 0.5) / n_boot`` in a random order: their percentiles are the t quantiles themselves (no Monte Carlo error
    in the heavy tails of 1 or 2 degrees of freedom), and the order pairs them at random with another
    configuration's replicates."""
    if n_seeds < 2 or n_boot < 1:
        return None
    from scipy import stats  # on use: `rlbatch --help` imports this module for format_interval (scipy.stats: ~0.8 s)

    u = (rng.permutation(n_boot) + 0.5) / n_boot
    return stats.t.ppf(u, n_seeds - 1 if df is None else df)


def seed_mean_replicates(values: Sequence[float] | np.ndarray, draws: np.ndarray,
                         s_log: float | None = None) -> np.ndarray:
    """Replicates of the mean of per-seed ``values`` (k >= 2 positive numbers: samples- or time-to-target) whose
    percentile interval is the t interval of the mean on the log scale: ``mean x exp(t_{k-1} x s_log / sqrt(k))``,
    ``s_log`` the sample standard deviation of ``log(values)``, ``draws`` from :func:`t_draws`. It widens as seeds
    shrink (t_{0.975} = 12.7 with 2 seeds, 4.3 with 3, 2.8 with 5) and never crosses 0, so a ratio's interval never
    starts at 0. ``s_log``: a pooled spread instead of the values' own (:func:`pooled_spread`; ``draws`` then of
    its degrees of freedom). Values with a zero or negative member: the t interval on the linear scale. Shape
    ``(n_boot,)``.

    Source: the one-sample t interval (Student 1908) of the log of a positive quantity (multiplicative spread)."""
    v = np.asarray(values, float)
    k = len(v)
    if np.all(v > 0):
        se = (np.std(np.log(v), ddof=1) if s_log is None else s_log) / math.sqrt(k)
        return float(v.mean()) * np.exp(np.clip(draws * se, -700.0, 700.0))  # exp(700): beyond any count
    return float(v.mean()) + draws * (np.std(v, ddof=1) / math.sqrt(k))


def bootstrap_interval(reps: Sequence[float] | np.ndarray | None, conf: float = 0.95,
                       method: str = "linear") -> list[float] | None:
    """:func:`percentile_interval` of bootstrap replicates ``reps`` as ``[lo, hi]``, NaN replicates dropped (+inf
    kept: an unbounded end, None in JSON); None without replicates or with fewer than :data:`MIN_REPLICATES`."""
    if reps is None:
        return None
    r = np.asarray(reps, float)
    r = r[~np.isnan(r)]
    if len(r) < MIN_REPLICATES:
        return None
    return list(percentile_interval(r, conf, method))


def format_interval(ci: Any, spec: str | Callable[[float], str] = ".2f", *, sep: str = "–", unbounded: str = "∞",
                    missing: str = "—") -> str:
    """The one text form of an interval ``[lo, hi]``: ``lo{sep}hi`` with each end formatted by ``spec`` (a format
    spec, or a function of the number), ``unbounded`` for an upper end that is None or +inf (``0.52–∞``), and
    ``< hi`` for an interval open below (lower end None, upper finite), and ``missing`` when there is no interval
    (not a pair, a lower end that is not a finite number otherwise, or a NaN upper end). Every table cell, sentence and caption that shows an interval takes its text from here; callers add
    their own frame (``" (95% CI ...)"``)."""
    def ok(x: Any) -> bool:
        return isinstance(x, (int, float)) and math.isfinite(x)

    def fmt(x: float) -> str:
        return spec(x) if callable(spec) else format(x, spec)

    if isinstance(ci, (list, tuple)) and len(ci) == 2 and ci[0] is None and ok(ci[1]):
        return f"< {fmt(ci[1])}"  # open below (a ratio to a reference whose own prediction is open above)
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not ok(ci[0]):
        return missing
    hi = ci[1]
    if hi is None or (isinstance(hi, (int, float)) and math.isinf(hi) and hi > 0):
        return f"{fmt(ci[0])}{sep}{unbounded}"
    return f"{fmt(ci[0])}{sep}{fmt(hi)}" if ok(hi) else missing
