"""Percentile intervals of replicates: the one definition every estimate's interval uses.

Source: Efron & Tibshirani (1993), the percentile interval: the ``(1 - conf) / 2`` and ``(1 + conf) / 2``
quantiles of the replicates. Replicates of a mean over a few seeds come from :func:`seed_mean_replicates` (Student's
t on the log scale), not from resampling the seeds: resampling two or three seeds gives an interval no wider than
the seeds' own spread, narrower than the truth and narrower with two seeds than with three.
"""

from __future__ import annotations

import math
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


def t_draws(n_seeds: int, n_boot: int, rng: np.random.Generator) -> np.ndarray | None:
    """``n_boot`` draws of Student's t with ``n_seeds - 1`` degrees of freedom (shape ``(n_boot,)``), shared by
    every quantity of one configuration so that its samples- and time-to-target move together across replicates;
    None for fewer than two seeds. The draws are the distribution's quantiles at ``(i + 0.5) / n_boot`` in a random
    order: their percentiles are the t quantiles themselves (no Monte Carlo error in the heavy tails of 1 or 2
    degrees of freedom), and the order pairs them at random with another configuration's replicates."""
    if n_seeds < 2 or n_boot < 1:
        return None
    from scipy import stats  # on use: `rlbatch --help` imports this module for format_interval (scipy.stats: ~0.8 s)

    u = (rng.permutation(n_boot) + 0.5) / n_boot
    return stats.t.ppf(u, n_seeds - 1)


def seed_mean_replicates(values: Sequence[float] | np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Replicates of the mean of per-seed ``values`` (k >= 2 positive numbers: samples- or time-to-target) whose
    percentile interval is the t interval of the mean on the log scale: ``mean x exp(t_{k-1} x s_log / sqrt(k))``,
    ``s_log`` the sample standard deviation of ``log(values)``, ``draws`` from :func:`t_draws`. It widens as seeds
    shrink (t_{0.975} = 12.7 with 2 seeds, 4.3 with 3, 2.8 with 5) and never crosses 0, so a ratio's interval never
    starts at 0. Values with a zero or negative member: the t interval on the linear scale. Shape ``(n_boot,)``.

    Source: the one-sample t interval (Student 1908) of the log of a positive quantity (multiplicative spread)."""
    v = np.asarray(values, float)
    k = len(v)
    if np.all(v > 0):
        se = np.std(np.log(v), ddof=1) / math.sqrt(k)
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
