"""The gradient-noise part of a study's result, computed once (issue 54: the report only renders it).

One function, :func:`noise_summary`, gathers what the report's noise section shows: the grad-norm vs B fit and its
knee for the actor and, where logged, the critic (:func:`rlbatch.analysis.noise.fit_grad_norm_scaling`) with which
batch sizes its window covers (:func:`grad_norm_coverage`) and the line a figure draws; each run's whole-run and final
simple noise scale B_simple (McCandlish et al. 2018, :func:`rlbatch.analysis.noise.b_simple_overall`), B_simple per
batch size and pooled with their intervals; the G x P equivalence (:func:`rlbatch.analysis.noise.gp_equivalence`).
:meth:`rlbatch.analysis.study.Study.noise` holds it; :func:`rlbatch.report.sections.noise_section` renders it.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.noise import (b_simple_by_batch, b_simple_overall, b_simple_pooled, b_simple_smoothed,
                                    fit_grad_norm_scaling, gp_equivalence, loglog_fit)
from rlbatch.errors import UserError

#: the gradient-norm metrics fitted, by role
GRAD_NORMS = (("actor", "grad_norm/actor"), ("critic", "grad_norm/critic"))


def grad_norm_coverage(runs: Sequence[Any], fit: dict[str, Any]) -> list[dict[str, Any]]:
    """Per batch size whose runs log ``fit["metric"]`` (positive values): ``batch_size``, ``runs`` (how many runs
    log it) and ``in_window`` (how many of them have a step in the fit's retained-sample ``window``, so a point in
    the fit: :func:`rlbatch.analysis.noise.grad_norm_points`; 0 for a batch size the fit and its figure lack).
    Researcher finding 11: B = 2048 had no step in the window and B = 4096 one of its three runs, said nowhere."""
    m = fit["metric"]
    total: dict[int, int] = {}
    for r in runs:
        b, met = r.meta.batch_size, r.metrics
        if b is None or not isinstance(met, pd.DataFrame) or m not in met:
            continue
        if (pd.to_numeric(met[m], errors="coerce") > 0).any():
            total[int(b)] = total.get(int(b), 0) + 1
    inside = {int(p["batch_size"]): int(p["n_runs"]) for p in fit["points"]}
    return [{"batch_size": b, "runs": max(n, inside.get(b, 0)), "in_window": inside.get(b, 0)}
            for b, n in sorted({**inside, **total}.items())]


def _fitted_line(fit: dict[str, Any]) -> dict[str, Any] | None:
    """The line a figure draws for a grad-norm fit: over the aligned part (its ``fit_batches``, slope ``slope``), or
    over every batch (``slope_all``, intercept refitted over all points) when that part is a single point; None when
    neither slope is finite."""
    b = np.array([p["batch_size"] for p in fit["points"]], float)
    v = np.array([p["value"] for p in fit["points"]])
    part = bool(np.isfinite(fit["slope"]))
    slope = fit["slope"] if part else fit["slope_all"]
    if not np.isfinite(slope):
        return None
    return {"batches": [float(x) for x in (fit["fit_batches"] if part else b)], "slope": float(slope),
            "intercept": float(fit["intercept"] if part else loglog_fit(b, v, 0.95)["intercept"]),
            "over": "aligned" if part else "all"}


def noise_summary(runs: Sequence[Any], target: float | None = None, metric: str = "eval/score",
                  family: Sequence[int] | None = None,
                  estimate: Callable[[list[Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The noise part of a study's result (the report's ``noise`` JSON): ``actor`` / ``critic`` (the grad-norm fit
    with ``coverage`` and ``line``, or None), ``errors`` {role: why it was not fitted}, ``b_simple`` [{run,
    batch_size, seed, b_simple, b_simple_final}] (runs with noise metrics), ``b_simple_by_batch`` and
    ``b_simple_pooled`` (only when some run has them), ``gp_equivalence``. ``family``: the aligned family's batch
    sizes, over which the slope is fitted when two or more have gradient norms; ``estimate``: a configuration's runs
    -> its accounting estimate (the G x P rN)."""
    runs = list(runs)
    js: dict[str, Any] = {"actor": None, "critic": None, "errors": {}, "b_simple": [], "b_simple_by_batch": [],
                          "gp_equivalence": []}
    for role, m in GRAD_NORMS:
        try:
            fit = fit_grad_norm_scaling(runs, m, fit_batches=family)
        except UserError as err:
            js["errors"][role] = str(err)
            continue
        fit["coverage"] = grad_norm_coverage(runs, fit)
        fit["line"] = _fitted_line(fit)
        js[role] = fit
    for r in runs:
        try:
            d = b_simple_smoothed(r.metrics)
        except UserError:
            continue
        if not d["b_simple"].notna().any():
            continue
        js["b_simple"].append({"run": r.run_id, "batch_size": r.meta.batch_size, "seed": r.meta.seed,
                               "b_simple": b_simple_overall(r.metrics),
                               "b_simple_final": float(d["b_simple"].dropna().iloc[-1])})
    if js["b_simple"]:
        js["b_simple_by_batch"] = b_simple_by_batch(runs)
        js["b_simple_pooled"] = b_simple_pooled(runs)
    js["gp_equivalence"] = gp_equivalence(runs, metric=metric, target=target, estimate=estimate)
    return js
