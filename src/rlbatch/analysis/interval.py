"""Percentile intervals of bootstrap replicates: the one definition every estimate's interval uses.

Source: Efron & Tibshirani (1993), the percentile interval: the ``(1 - conf) / 2`` and ``(1 + conf) / 2``
quantiles of the bootstrap replicates.
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
    ``missing`` when there is no interval (not a pair, a lower end that is not a finite number, or a NaN upper
    end). Every table cell, sentence and caption that shows an interval takes its text from here; callers add
    their own frame (``" (95% CI ...)"``)."""
    def ok(x: Any) -> bool:
        return isinstance(x, (int, float)) and math.isfinite(x)

    def fmt(x: float) -> str:
        return spec(x) if callable(spec) else format(x, spec)

    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not ok(ci[0]):
        return missing
    hi = ci[1]
    if hi is None or (isinstance(hi, (int, float)) and math.isinf(hi) and hi > 0):
        return f"{fmt(ci[0])}{sep}{unbounded}"
    return f"{fmt(ci[0])}{sep}{fmt(hi)}" if ok(hi) else missing
