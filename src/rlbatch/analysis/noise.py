"""Gradient noise: the simple noise scale and (to come) the grad-norm vs batch fit and the knee.

McCandlish, Kaplan, Amodei et al. (2018), "An Empirical Model of Large-Batch Training", appendix A: with squared
norms of the mean gradient measured at a small batch B_small and a big batch B_big,

    |G|^2     ~= (B_big * |G_big|^2 - B_small * |G_small|^2) / (B_big - B_small)      (unbiased)
    tr(Sigma) ~= (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)                (unbiased)
    B_simple   = tr(Sigma) / |G|^2

In the trainer both come for free each step: the micro-batch gradients (B_small = micro-batch size, |G_small|^2 the
mean of their squared norms) and the accumulated full-batch gradient (B_big = B).
"""

from __future__ import annotations

import math


def noise_estimates(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> tuple[float, float]:
    """Unbiased estimates ``(|G|^2, tr(Sigma))`` from squared gradient norms at two batch sizes.

    ``g_small_sq``: squared L2 norm of the mean gradient over B_small samples (averaged over several small batches
    if available); ``g_big_sq``: the same over B_big samples. Units: squared gradient units. Source: McCandlish et al.
    2018, appendix A, eqs. A.2-A.3. Raises ``ValueError`` unless ``0 < b_small < b_big``.
    """
    if not (0 < b_small < b_big):
        raise ValueError(f"need 0 < b_small < b_big, got b_small={b_small}, b_big={b_big}")
    g2 = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    trace = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def b_simple(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> float:
    """The simple noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, eq. 2.8 and appendix A).

    Units: samples (the same unit as ``b_small``/``b_big``). Returns NaN when the |G|^2 estimate is not positive
    (a single step's estimate is noisy; smooth the two estimates over steps before dividing, see
    :func:`b_simple_smoothed`).
    """
    g2, trace = noise_estimates(g_small_sq, g_big_sq, b_small, b_big)
    if not (g2 > 0) or not math.isfinite(g2) or not math.isfinite(trace):
        return float("nan")
    return trace / g2
