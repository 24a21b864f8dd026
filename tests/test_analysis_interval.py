"""rlbatch.analysis.interval: the one percentile interval and the one interval text, by hand."""

import math

import numpy as np
import pytest

from rlbatch.analysis.interval import bootstrap_interval, format_interval, percentile_interval


def test_percentile_interval_by_hand():
    # 50% interval of 1..5: the 25% and 75% quantiles, linear between order statistics -> 2 and 4
    assert percentile_interval([1.0, 2.0, 3.0, 4.0, 5.0], conf=0.5) == (2.0, 4.0)
    # inverted CDF takes an observed value: the 25% quantile of 1..4 is 1, the 75% is 3
    assert percentile_interval([1.0, 2.0, 3.0, 4.0], conf=0.5, method="inverted_cdf") == (1.0, 3.0)


def test_bootstrap_interval_drops_nan_keeps_inf_and_needs_20_replicates():
    reps = np.arange(100, dtype=float)
    assert bootstrap_interval(reps) == pytest.approx([2.475, 96.525])  # 2.5% / 97.5% of 0..99, linear
    assert bootstrap_interval(np.append(reps, [np.nan] * 50)) == bootstrap_interval(reps)
    assert math.isinf(bootstrap_interval(np.append(reps, [np.inf] * 3))[1])  # open above: +inf is kept
    assert bootstrap_interval(np.arange(19.0)) is None and bootstrap_interval(None) is None


def test_format_interval_by_hand():
    assert format_interval([0.5234, 0.9]) == "0.52–0.90"
    assert format_interval([0.5, None]) == "≥ 0.50" and format_interval([0.5, math.inf]) == "≥ 0.50"
    # issue 46 item 4: never "0.00–∞"; bounds rounded outward, never printed as 0 or 1 unless they are
    assert format_interval([0.0, None]) == "not measurable" and format_interval([-1.0, math.inf]) == "not measurable"
    assert format_interval([1.003, 1.2]) == "1.003–1.20" and format_interval([0.004, 0.2]) == "0.004–0.20"
    assert format_interval([0.5261, 0.9049]) == "0.52–0.91" and format_interval([0.97, 0.9996]) == "0.97–0.9996"
    assert format_interval([1.0, 2.0]) == "1.00–2.00"
    assert format_interval([0.5, None], sep=", ", unbounded="unbounded") == "0.50, unbounded"
    assert format_interval([1234.5, 2000.0], lambda x: f"{x:,.0f}") == "1,234–2,000"
    assert format_interval(None) == "—" and format_interval([None, 1.0]) == "< 1.00" and format_interval([0.1, math.nan]) == "—"
