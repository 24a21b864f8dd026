"""The throughput part of a study's result, computed once (issue 54: the report only renders it).

:func:`throughput_summary` gathers what the report's throughput section shows: each run's step timings
(:func:`rlbatch.analysis.throughput.step_timings`), each configuration's seconds per step split into generation,
scoring, update and other (:func:`rlbatch.analysis.throughput.configuration_timings`), the fitted time model
(:func:`rlbatch.analysis.throughput.fit_throughput_model`) with its predictions for batch sizes not run
(:func:`rlbatch.analysis.throughput.predict`), the sublinear generation window
(:func:`rlbatch.analysis.throughput.sublinear_window`) and the update's time ratios
(:func:`rlbatch.analysis.throughput.time_ratios`). :meth:`rlbatch.analysis.study.Study.throughput` holds it;
:func:`rlbatch.report.sections.throughput_section` renders it.
"""

from __future__ import annotations

from typing import Any, Sequence

from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.throughput import (configuration_timings, fit_throughput_model, predict, step_timings,
                                         sublinear_window, time_ratios)
from rlbatch.errors import UserError


def default_batches(batch_range: Sequence[int]) -> list[int]:
    """The batch sizes a time model predicts by default: doublings from the smallest measured B up to 4x the
    largest."""
    lo, hi = batch_range
    out, b = [], lo
    while b <= 4 * hi:
        out.append(b)
        b *= 2
    return out


def throughput_summary(runs: Sequence[Any], clock: str = "wall", timing: Sequence[dict[str, Any]] | None = None,
                       predict_batches: Sequence[int] | None = None) -> dict[str, Any]:
    """The throughput part of a study's result (the report's ``throughput`` JSON) over ``runs`` on ``clock``:
    ``clock``, ``measured`` (each run's step timings, records), ``configurations`` (``timing``: per configuration,
    seconds per step by phase; computed from ``runs`` when not given), ``model`` (the fitted time model, or None
    with ``error`` saying why), ``predicted`` (at ``predict_batches``, default :func:`default_batches`),
    ``gen_window`` and ``update_pairs``."""
    runs = list(runs)
    t = step_timings(runs, clock=clock)
    timing = configuration_timings(group_seeds(runs), clock) if timing is None else list(timing)
    js: dict[str, Any] = {"clock": clock, "measured": t.to_dict(orient="records"), "configurations": timing,
                          "model": None, "predicted": [], "gen_window": None, "update_pairs": [], "error": None}
    try:
        model = fit_throughput_model(t)
    except UserError as err:
        js["error"] = str(err)
        return js
    js["model"] = model
    js["predicted"] = predict(model, list(predict_batches) if predict_batches is not None
                              else default_batches(model["batch_range"]))
    js["gen_window"] = sublinear_window(t["batch_size"], t["gen_s"])
    js["update_pairs"] = time_ratios(t["batch_size"], t["train_s"])
    return js
