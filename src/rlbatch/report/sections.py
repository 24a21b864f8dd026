"""Report sections for the core analyses (rendering only: every number comes from :mod:`rlbatch.analysis`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.errors import UserError
from rlbatch.report.figures import batch_axis


def throughput_section(runs: Sequence[Any], predict_batches: Sequence[int] | None = None,
                       clock: str = "wall") -> dict[str, Any]:
    """The report section on throughput (report contract: title, markdown, figures, json_key, json).

    Measured per-step timings per run (:func:`step_timings`), the fitted time model (:func:`fit_throughput_model`),
    predictions for a ladder of B (default: doublings from the smallest measured B to 4x the largest), and the
    sublinear generation window (:func:`sublinear_window`). ``json`` = {"measured": [...], "model": {...} | None,
    "predicted": [...], "gen_window": {...}, "update_pairs": [...]}.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlbatch.analysis.throughput import fit_throughput_model, predict, step_timings, sublinear_window, time_ratios

    t = step_timings(runs, clock=clock)
    js: dict[str, Any] = {"clock": clock, "measured": t.to_dict(orient="records"), "model": None, "predicted": [],
                          "gen_window": None, "update_pairs": []}
    md: list[str] = []
    figs: dict[str, Any] = {}
    try:
        model = fit_throughput_model(t)
    except UserError as err:
        md.append(f"Throughput model not fitted: {err}.")
        return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs,
                "json_key": "throughput", "json": js}
    js["model"] = model
    md.append(f"Seconds per step on the {'process CPU' if clock == 'cpu' else 'wall'} clock (the accounting's). "
              "Predicted throughput = retained fraction x B / seconds per step, through the measured points "
              "(interpolated between them; the per-phase fits below extrapolate beyond them).")
    lo, hi = model["batch_range"]
    if predict_batches is None:
        predict_batches, b = [], lo
        while b <= 4 * hi:
            predict_batches.append(b)
            b *= 2
    pred = predict(model, predict_batches)
    js["predicted"] = pred
    gw = sublinear_window(t["batch_size"], t["gen_s"])
    js["gen_window"] = gw
    js["update_pairs"] = time_ratios(t["batch_size"], t["train_s"])
    k = model["gen"]["exponent"]
    md.append(f"Generation time per step ~ {model['gen']['a']:.3g} x B^{k:.2f} (per doubling x{2 ** k:.2f}; "
              f"{'sublinear' if k < 1 else 'not sublinear'}).")
    if model.get("train"):
        unit = "trained token" if model["train_x"] == "tokens" else "response"
        md.append(f"Update time per step ~ {model['train']['intercept']:.3g} s + {model['train']['slope']:.3g} s per "
                  f"{unit}.")
    if gw["window"]:
        md.append(f"Sublinear generation window (measured): B = {gw['window'][0]} to {gw['window'][1]}.")
    else:
        md.append("No sublinear generation window among the measured batch sizes.")
    for p in gw["pairs"]:
        md.append(f"- gen B {p['b_from']} -> {p['b_to']}: time x{p['time_ratio']:.2f}, generation throughput "
                  f"x{p['throughput_gain']:.2f}")
    md.append("\n| B | gen s | update s | step s | samples/s | |\n|---|---|---|---|---|---|")
    for p in pred:
        md.append(f"| {p['batch_size']} | {p['gen_s']:.3g} | {p['train_s']:.3g} | {p['step_s']:.3g} | "
                  f"{p['throughput_samples_per_s']:.3g} | {'extrapolated' if p['extrapolated'] else 'fitted'} |")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    pb = np.array([p["batch_size"] for p in pred], float)
    a1.loglog(t["batch_size"], t["gen_s"], "o", label="generation (measured)")
    a1.loglog(pb, [p["gen_s"] for p in pred], "-", color=a1.lines[-1].get_color(), label="generation (fit)")
    if t["train_s"].notna().any():
        a1.loglog(t["batch_size"], t["train_s"], "s", label="update (measured)")
        a1.loglog(pb, [max(p["train_s"], 1e-12) for p in pred], "-", color=a1.lines[-1].get_color(),
                  label="update (fit)")
    a1.loglog(pb, pred[0]["gen_s"] * pb / pb[0], ":", color="gray", label="linear in B")
    batch_axis(a1)
    a1.set_xlabel("batch size B")
    a1.set_ylabel("seconds per step")
    a1.legend(fontsize=8)
    a2.semilogx(t["batch_size"], t["throughput_samples_per_s"], "o", label="measured")
    a2.semilogx(pb, [p["throughput_samples_per_s"] for p in pred], "-", label="predicted")
    batch_axis(a2)
    a2.set_xlabel("batch size B")
    a2.set_ylabel("retained samples / s")
    a2.legend(fontsize=8)
    fig.tight_layout()
    figs["time_and_throughput_vs_batch"] = fig
    return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs,
            "json_key": "throughput", "json": js}
