"""The noise model of the plan: rN for batch sizes without runs (McCandlish et al. 2018, eq. 2.11).

Samples to reach a given loss grow with the batch as ``E / E_min = 1 + B / B_noise``, so relative to a reference
``rN(B) = (1 + B / B_noise) / (1 + B_ref / B_noise)``. B is in **retained** responses per update (group filtering
removes the zero-advantage groups before the update), the unit of B_simple too. ``B_noise`` comes from a fit to
measured rN, else the simple noise scale B_simple of the runs' ``noise/*`` metrics, else the grad-norm vs B fit.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from scipy.optimize import minimize_scalar

from rlbatch.analysis.noise import b_simple_pooled, fit_grad_norm_scaling
from rlbatch.errors import UserError
from rlbatch.runstore import Run


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating)) and math.isfinite(float(x))


def noise_model_rn(batch_size: float, reference_batch: float, b_noise: float) -> float:
    """rN of ``batch_size`` relative to ``reference_batch`` under McCandlish et al. (2018) eq. 2.11:
    samples-to-target ``E(B) = E_min (1 + B / B_noise)``, so ``rN = (1 + B/B_noise) / (1 + B_ref/B_noise)``.
    ``b_noise = inf`` gives 1 (no penalty). Units: responses. Raises ``ValueError`` for non-positive inputs."""
    if batch_size <= 0 or reference_batch <= 0 or not b_noise > 0:
        raise ValueError("batch sizes and b_noise must be positive")
    u = 0.0 if math.isinf(b_noise) else 1.0 / b_noise
    return (1.0 + batch_size * u) / (1.0 + reference_batch * u)


def fit_b_noise(points: Sequence[tuple[float, float]], reference_batch: float) -> float:
    """Least-squares fit (in log rN) of B_noise to measured ``(batch_size, rN)`` pairs under
    :func:`noise_model_rn`. Returns B_noise in responses; ``inf`` when no penalty is seen (the best fit has
    1/B_noise = 0); NaN without points. Source: McCandlish et al. 2018, eq. 2.11."""
    pts = [(float(b), float(r)) for b, r in points if _finite(b) and _finite(r) and r > 0 and b != reference_batch]
    if not pts:
        return float("nan")
    b = np.array([p[0] for p in pts])
    r = np.log(np.array([p[1] for p in pts]))

    def loss(log_u: float) -> float:
        u = math.exp(log_u)
        return float(((np.log((1 + b * u) / (1 + reference_batch * u)) - r) ** 2).sum())

    lo, hi = math.log(1e-6 / b.max()), math.log(1e4 / min(b.min(), reference_batch))
    grid = np.linspace(lo, hi, 121)
    vals = [loss(g) for g in grid]
    i = int(np.argmin(vals))
    res = minimize_scalar(loss, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]), method="bounded")
    best_log_u, best = (res.x, res.fun) if res.fun <= vals[i] else (grid[i], vals[i])
    zero = float((r ** 2).sum())  # u = 0
    if zero <= best + 1e-12 or best_log_u <= lo + 1e-9:
        return float("inf")
    return float(math.exp(-best_log_u))


def noise_candidate(b: int, b_ref: int, bn: dict[str, Any], retained_b: float | None = None,
                    retained_ref: float | None = None) -> dict[str, Any]:
    """A plan candidate for a batch without runs: rN from :func:`noise_model_rn` applied to the **retained** batch
    (``retained_b`` = retained fraction x B, and ``retained_ref`` for the reference; default the nominal B), with
    the interval from the ends of B_noise's interval."""
    c = {"run": None, "batch_size": int(b), "runs": [], "on_lr_rule": True, "is_reference": False,
         "rN": None, "rN_ci": None, "rN_source": None, "rN_level": None}
    if bn.get("value") is None:
        c["why"] = "no run at this batch and no B_noise estimate (need measured rN or noise/* metrics)"
        return c
    rb, rr = retained_b or b, retained_ref or b_ref
    c["rN"] = noise_model_rn(rb, rr, bn["value"])
    c["rN_source"] = "noise-model"
    lo, hi = bn.get("ci") or (None, None)
    if bn.get("lower_bound") is not None:
        # the noise/* metrics did not resolve |G|^2: B_simple is only bounded below, and a bound on the noise scale
        # is no bound on the penalty (the model's B_noise = B_simple is itself an assumption): open above
        c["rN_ci"] = [1.0 if rb >= rr else c["rN"], None]
        c["rN_open_because"] = ("the noise/* metrics bound B_simple only from below, so nothing bounds rN from "
                                "above")
    elif lo is not None and hi is not None:
        r1, r2 = noise_model_rn(rb, rr, hi), noise_model_rn(rb, rr, lo)  # larger B_noise -> smaller penalty
        c["rN_ci"] = [min(r1, r2, c["rN"]), max(r1, r2, c["rN"])]
    return c


def b_noise_from_points(points: list[dict[str, Any]], b_ref: float) -> dict[str, Any] | None:
    """B_noise fitted to rN points ({batch_size, rN, rN_ci}; ``batch_size`` and ``b_ref`` in retained responses)
    with an interval from the rN interval ends. None without points away from ``b_ref``."""
    pts = [(p["batch_size"], p["rN"]) for p in points if p["rN"] is not None]
    if not pts:
        return None
    v = fit_b_noise(pts, b_ref)
    if math.isnan(v):  # every point at the reference's own batch (e.g. an async variant of it): nothing to fit
        return None
    lo_pts = [(p["batch_size"], (p["rN_ci"] or [p["rN"]] * 2)[0]) for p in points if p["rN"] is not None]
    hi_pts = [(p["batch_size"], (p["rN_ci"] or [p["rN"]] * 2)[1]) for p in points if p["rN"] is not None]
    a, b = fit_b_noise(hi_pts, b_ref), fit_b_noise(lo_pts, b_ref)  # high rN -> small B_noise
    has_ci = any(p["rN"] is not None and p.get("rN_ci") for p in points) and not (math.isnan(a) or math.isnan(b))
    return {"value": v, "ci": [min(a, b), max(a, b)] if has_ci else None, "source": "fit to rN",
            "n_points": len(pts), "batch_sizes": sorted(int(p[0]) for p in pts)}


def b_noise_from_gradients(runs: Sequence[Run]) -> dict[str, Any] | None:
    """B_noise from gradient-noise measurements: B_simple of the runs' ``noise/*`` metrics, every step of every run
    pooled (:func:`rlbatch.analysis.noise.b_simple_pooled`, the number the report's noise section prints), with its
    bootstrap interval (an open upper end: ``inf``). When the steps do not resolve the true gradient (mean |G|^2
    estimate <= 0) only the interval's lower end is known: ``{"value": inf, "ci": [lower bound, inf],
    "lower_bound"}``, so the noise model gives rN = 1 with an interval up to rN at the bound. Without noise
    metrics, the grad-norm vs B fit |g_B|^2 = |G|^2 + tr(Sigma)/B (B_noise = tr(Sigma)/|G|^2). None when neither."""
    pooled = b_simple_pooled(runs)
    if pooled is not None:
        v, ci = pooled["b_simple"], pooled["ci"]
        if v is not None and v > 0:
            hi = None if not ci else ci[1]
            return {"value": float(v), "ci": [ci[0], math.inf if hi is None else hi] if ci else None,
                    "source": "B_simple", "n_runs": pooled["n_runs"]}
        if ci and ci[0] is not None and ci[0] > 0:
            bound = float(ci[0])
            return {"value": math.inf, "ci": [bound, math.inf], "lower_bound": bound, "n_steps": pooled["steps"],
                    "source": f"B_simple >= {bound:.4g}: the noise/* metrics do not resolve |G|^2 (its mean "
                              f"estimate over {pooled['steps']} steps is <= 0)"}
    try:
        fit = fit_grad_norm_scaling(runs, "grad_norm/actor")
    except (UserError, KeyError, ValueError):
        return None
    pts = fit["points"]
    if len(pts) < 2:
        return None
    inv_b = np.array([1.0 / p["batch_size"] for p in pts])
    g2 = np.array([p["value"] ** 2 for p in pts])
    slope, intercept = np.polyfit(inv_b, g2, 1)
    if not (slope > 0 and intercept > 0):
        return None
    return {"value": float(slope / intercept), "ci": None, "source": "grad-norm fit",
            "knee_batch": fit.get("knee_batch")}
