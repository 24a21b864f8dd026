"""Report sections for the core analyses (rendering only: every number comes from :mod:`rlbatch.analysis`)."""

from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from rlbatch.errors import UserError
from rlbatch.report.figures import batch_axis, plain_log_axis


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
    md.append("\n| B | generation s/step | update s/step | total s/step | retained samples/s | from |\n"
              "|---|---|---|---|---|---|")
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
    plain_log_axis(a1, "y")
    a1.set_xlabel("batch size B (responses per update)")
    a1.set_ylabel("seconds per optimizer step")
    a1.set_title("Time per step vs batch size")
    a1.legend(fontsize=8)
    a2.semilogx(t["batch_size"], t["throughput_samples_per_s"], "o", label="measured")
    a2.semilogx(pb, [p["throughput_samples_per_s"] for p in pred], "-", label="predicted")
    batch_axis(a2)
    a2.set_xlabel("batch size B (responses per update)")
    a2.set_ylabel("throughput (retained samples / s)")
    a2.set_title("Throughput vs batch size")
    a2.legend(fontsize=8)
    fig.tight_layout()
    figs["time_and_throughput_vs_batch"] = fig
    caps = {"time_and_throughput_vs_batch": "Left: seconds per optimizer step for generation and for the update, "
            "measured (points) and fitted (lines), against the batch size; the dotted line grows linearly in B. "
            "Right: throughput in retained training samples per second, measured per run and predicted."}
    return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs, "captions": caps,
            "json_key": "throughput", "json": js}


def _fmt_fit(fit: dict[str, Any]) -> str:
    ci = fit["slope_ci"]
    ci_s = f" (95% CI {ci[0]:.3f} to {ci[1]:.3f})" if all(np.isfinite(ci)) else ""
    knee = fit["knee_batch"]
    if len(fit["fit_batches"]) >= 2:
        lines = [f"- `{fit['metric']}`: log-log slope over B in {fit['fit_batches']} = **{fit['slope']:.3f}**{ci_s} "
                 f"(ideal -0.5); over all batch sizes {fit['slope_all']:.3f}."]
    else:
        ca = fit.get("slope_all_ci") or [float("nan")] * 2
        ca_s = f" (95% CI {ca[0]:.3f} to {ca[1]:.3f})" if all(np.isfinite(ca)) else ""
        lines = [f"- `{fit['metric']}`: log-log slope over all batch sizes **{fit['slope_all']:.3f}**{ca_s} (ideal "
                 f"-0.5); the first doubling already departs from 1/sqrt(2), so there is no aligned range to fit alone."]
    if fit.get("slope_ci_bootstrap"):
        lo, hi = fit["slope_ci_bootstrap"]
        lines.append(f"  Bootstrap over seeds: {lo:.3f} to {hi:.3f}.")
    for d in fit["doublings"]:
        lines.append(f"  - B {d['b_from']} -> {d['b_to']}: ratio {d['ratio']:.3f} vs {d['expected']:.3f} "
                     f"({d['departure']:+.0%}){' — past the knee' if d['past_knee'] else ''}")
    lines.append("")
    lines.append(f"Knee (critical batch): **{knee}** (the lower B of the first doubling whose ratio departs from "
                 f"1/sqrt(2) by more than {fit.get('tolerance', 0.08):.0%})." if knee is not None else
                 "No knee within the measured batch sizes: all doublings stay within the tolerance of 1/sqrt(2).")
    return "\n".join(lines)


def noise_section(runs: Sequence[Any], target: float | None = None, metric: str = "eval/score") -> dict[str, Any]:
    """The report section on gradient noise (report contract of the lead: title, markdown, figures, json_key, json).

    Contents: the grad-norm vs B fit and knee for the actor and, where logged, the critic
    (:func:`fit_grad_norm_scaling`); the smoothed B_simple over training per run (:func:`b_simple_smoothed`) and its
    whole-run value (bootstrap interval over seeds at equal B); the G x P equivalence (:func:`gp_equivalence`).
    Parts whose inputs are missing are stated as such. ``json`` = {"actor": fit|None, "critic": fit|None,
    "b_simple": [{run, batch_size, seed, b_simple, b_simple_final}], "b_simple_by_batch": [...], "gp_equivalence":
    [...]}.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlbatch.analysis.noise import (X, _loglog_fit, b_simple_overall, b_simple_smoothed, bootstrap_ci,
                                        fit_grad_norm_scaling, gp_equivalence)

    runs = list(runs)
    md: list[str] = []
    figs: dict[str, Any] = {}
    js: dict[str, Any] = {"actor": None, "critic": None, "b_simple": [], "b_simple_by_batch": [], "gp_equivalence": []}
    fits = {}
    for role, m in (("actor", "grad_norm/actor"), ("critic", "grad_norm/critic")):
        try:
            fits[role] = fit_grad_norm_scaling(runs, m)
        except UserError as err:
            if role == "actor":
                md.append(f"- Grad norm vs B: not fitted ({err}).")
            continue
        js[role] = fits[role]
        md.append(_fmt_fit(fits[role]))
    if fits:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        for role, fit in fits.items():
            b = np.array([p["batch_size"] for p in fit["points"]], float)
            v = np.array([p["value"] for p in fit["points"]])
            line = ax.loglog(b, v, "o", label=f"{role} grad norm")[0]
            # the fit over the aligned part (B <= knee); over every batch when that part is a single point
            key = "slope" if np.isfinite(fit["slope"]) else "slope_all"
            fb = np.array(fit["fit_batches"] if key == "slope" else b, float)
            icpt = fit["intercept"] if key == "slope" else _loglog_fit(b, v, 0.95)["intercept"]
            if np.isfinite(fit[key]):
                ax.loglog(fb, np.exp(icpt) * fb ** fit[key], "--", color=line.get_color(),
                          label=f"{role} fit, slope {fit[key]:.2f}" + ("" if key == "slope" else " (all B)"))
            if fit["knee_batch"] is not None:
                ax.axvline(fit["knee_batch"], color=line.get_color(), alpha=0.4, ls=":", label="knee")
            ax.loglog(b, v[0] * (b / b[0]) ** -0.5, ":", color="gray", alpha=0.6, label="B^-1/2")
        batch_axis(ax)
        plain_log_axis(ax, "y")
        ax.set_xlabel("batch size B (responses per update)")
        ax.set_ylabel("mean gradient norm before clipping")
        ax.set_title("Gradient norm vs batch size (dotted grey: B^-1/2)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        figs["grad_norm_vs_batch"] = fig
    # B_simple
    curves = []
    for r in runs:
        try:
            d = b_simple_smoothed(r.metrics)
        except UserError:
            continue
        if not d["b_simple"].notna().any():
            continue
        overall = b_simple_overall(r.metrics)
        final = float(d["b_simple"].dropna().iloc[-1])
        js["b_simple"].append({"run": r.run_id, "batch_size": r.meta.batch_size, "seed": r.meta.seed,
                               "b_simple": overall, "b_simple_final": final})
        curves.append((r, d))
    if curves:
        by_b: dict[int, list[float]] = {}
        for row in js["b_simple"]:
            if row["batch_size"] is not None and np.isfinite(row["b_simple"]):
                by_b.setdefault(row["batch_size"], []).append(row["b_simple"])
        md.append("\n**Simple noise scale B_simple = tr(Sigma)/|G|^2** (McCandlish et al. 2018), averaged over each run "
                  "(responses):")
        for b in sorted(by_b):
            vals = by_b[b]
            lo, hi = bootstrap_ci(vals)
            ci = f" (bootstrap over {len(vals)} seeds: {lo:.3g} to {hi:.3g})" if len(vals) >= 2 else ""
            js["b_simple_by_batch"].append({"batch_size": b, "b_simple": float(np.mean(vals)), "n_runs": len(vals),
                                            "ci": [lo, hi] if len(vals) >= 2 else None})
            md.append(f"- B = {b}: B_simple ~ {np.mean(vals):.3g}{ci}"
                      f"{' — the batch is above the noise scale' if np.mean(vals) < b else ''}")
        fig, ax = plt.subplots(figsize=(5.5, 4))
        pts = [(row["batch_size"], row["b_simple"]) for row in js["b_simple"]
               if row["batch_size"] and row["b_simple"] is not None and np.isfinite(row["b_simple"])
               and row["b_simple"] > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color="0.6", ms=4, alpha=0.7,
                    label="one run (mean over its steps)")
        summ = [r for r in js["b_simple_by_batch"] if r["b_simple"] > 0]
        if summ:
            bb = np.array([r["batch_size"] for r in summ], float)
            mm = np.array([r["b_simple"] for r in summ])
            # an interval reaching 0 or below (the estimator is unbiased, so a run's mean can be negative) is
            # drawn down to 1/100 of the mean on the log axis
            err = np.array([[max(0.0, m - max(r["ci"][0], m / 100)), max(0.0, r["ci"][1] - m)] if r["ci"]
                            else [0.0, 0.0] for m, r in zip(mm, summ)]).T
            ax.errorbar(bb, mm, yerr=err, fmt="s", color="C0", capsize=3, label="mean per B (95% bootstrap)")
            ax.plot(bb, bb, ":", color="0.3", label="B_simple = B")
        batch_axis(ax)
        plain_log_axis(ax, "y")
        ax.set_xlabel("batch size B (responses per update)")
        ax.set_ylabel("B_simple (responses)")
        ax.set_title("Simple noise scale per batch size")
        ax.legend(fontsize=8)
        fig.tight_layout()
        figs["b_simple_by_batch"] = fig
    else:
        md.append("\n- B_simple: no `noise/*` metrics in these runs.")
    js["gp_equivalence"] = gp_equivalence(runs, metric=metric, target=target)
    if js["gp_equivalence"]:
        md.append("\n**G x P equivalence** (equal B = P x G on the retained-sample axis):")
        for row in js["gp_equivalence"]:
            ref = row["reference"]
            dev = f"max deviation {row['max_deviation']:.3g}" if row["max_deviation"] is not None else "no overlap"
            rn = f", rN {row['rN']:.2f}" if row["rN"] is not None else ""
            md.append(f"- B={row['batch_size']}: P={row['prompts_per_step']}, G={row['group_size']} vs "
                      f"P={ref['prompts_per_step']}, G={ref['group_size']}: {dev}{rn}")
    caps = {"grad_norm_vs_batch": "Mean gradient norm (before clipping) against the batch size, log-log, with the "
            "least-squares slope over the aligned range and the knee (critical batch); inside the aligned range the "
            "norm falls like B^-1/2 (dotted grey).",
            "b_simple_by_batch": "Simple noise scale B_simple (McCandlish et al. 2018) per batch size: each run's "
            "mean over its steps (grey) and the mean per B with its 95% bootstrap interval over seeds; where it "
            "lies below the dotted line B_simple = B, the batch is larger than the noise scale."}
    return {"title": "Gradient noise and the critical batch", "markdown": "\n".join(md), "figures": figs,
            "captions": caps, "json_key": "noise", "json": js}
