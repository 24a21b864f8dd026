"""The report section of the plan: its table, sentences and figure (rendering only; the plan is
:mod:`rlbatch.plan`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.analysis import terms
from rlbatch.analysis.curves import curve
from rlbatch.output import format_interval
from rlbatch.plan_output import to_markdown
from rlbatch.report.figures import LEGEND_FONT, TICK_FONT, batch_axis, open_arrow, plain_log_axis
from rlbatch.runstore import Run


def plan_section(plan: dict[str, Any], runs: Sequence[Run] | None = None, metric: str = "eval/score") -> dict[str, Any]:
    """The report section of the plan (report contract: title, markdown, figures, json_key ``plan``, json),
    rendered from a plan (:func:`rlbatch.plan.plan_runs` / ``plan_table``; the report's is
    :attr:`rlbatch.result.StudyResult.plan`). Figures: rN (with intervals) and relative throughput vs B, and the
    predicted relative time-to-target per candidate with its interval; the saturating fits over ``runs``' points of
    ``metric``."""
    # matplotlib on first use: the CLI and the analysis import this module without drawing
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch


    cs = [c for c in plan["candidates"] if c["batch_size"]]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.6))
    # axes from the data: every interval end that is finite lies inside; an open (unbounded) end gets an arrow
    ends = [v for c in cs for v in ([c["rN"]] + list(c["rN_ci"] or [])) + [c["relative_throughput"]]
            if v is not None and np.isfinite(v) and v > 0]
    bottom, top = (min(min(ends), 1.0) / 1.15, max(max(ends), 1.0) * 1.25) if ends else (0.5, 2.0)
    for src, mk in (("measured", "o"), ("fit", "s"), ("noise-model", "^")):
        for control in (False, True):
            sel = [c for c in cs if c["rN_source"] == src and c["rN"] is not None and (not c["on_lr_rule"]) == control]
            if not sel:
                continue
            # the fixed-LR control: an open diamond, nudged right so that it never hides the point at its B
            b = np.array([c["batch_size"] for c in sel], float) * (1.07 if control else 1.0)
            r = np.array([c["rN"] for c in sel])
            lo = np.array([c["rN_ci"][0] if c["rN_ci"] else c["rN"] for c in sel])
            hi = np.array([c["rN_ci"][1] if c["rN_ci"] and c["rN_ci"][1] is not None else
                           (top if c["rN_ci"] else c["rN"]) for c in sel])
            label = f"rN ({src}{', fixed-LR control' if control else ''})"
            a1.errorbar(b, r, yerr=np.array([np.clip(r - lo, 0, None), np.clip(hi - r, 0, None)]),
                        fmt="D" if control else mk, mfc="white" if control else None, capsize=3, ms=7 if control else 6,
                        label=label)
            for x, c in zip(b, sel):
                if c["rN_ci"] and c["rN_ci"][1] is None:
                    open_arrow(a1, x, top, "y")
    th = [c for c in cs if c["relative_throughput"] is not None and c["on_lr_rule"]]
    if th:
        th = sorted(th, key=lambda c: c["batch_size"])
        a1.plot([c["batch_size"] for c in th], [c["relative_throughput"] for c in th], "x--", color="gray",
                label="relative throughput")
    batch_axis(a1)
    a1.set_ylim(bottom, top)
    plain_log_axis(a1, "y")
    ticks = [v for v in (0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 7, 10, 20, 50, 100) if bottom <= v <= top]
    a1.set_yticks(ticks, [f"{v:g}" for v in ticks])
    a1.set_ylim(bottom, top)
    a1.axhline(1.0, color="black", lw=0.6, alpha=0.5)
    a1.set_xlabel("batch size B (responses per update)")
    a1.set_ylabel("ratio to the reference")
    a1.set_title("Sample penalty rN vs throughput gain")
    a1.tick_params(labelsize=TICK_FONT)
    a1.legend(fontsize=LEGEND_FONT)
    pr = [c for c in cs if c["predicted_relative_time"] is not None]
    if pr:
        names = [str(c["run"] or f"B={c['batch_size']}") + (" (pick)" if c.get("pick") else "")
                 for c in pr]
        t = np.array([c["predicted_relative_time"] for c in pr])
        los = [c["interval"][0] if c["interval"] and c["interval"][0] else v for v, c in zip(t, pr)]
        his = [c["interval"][1] if c["interval"] else v for v, c in zip(t, pr)]
        # a log axis around 1 (newcomer finding 24: one candidate's interval to 17 squeezed the others into 0-1):
        # ratios read alike above and below 1, and every interval is drawn whole
        finite = [h for h in his if h is not None and np.isfinite(h)]
        left = min([1.0] + [x for x in list(t) + los if x and x > 0]) / 1.3
        right = 1.3 * max([1.0] + list(t) + finite)
        colors = ["tab:green" if c.get("pick") else "tab:red" if c["rejected"] else "tab:blue"
                  for c in pr]
        for i, (v, lo, h, color) in enumerate(zip(t, los, his, colors)):
            a2.errorbar([v], [i], xerr=[[max(0.0, v - lo)], [max(0.0, (h if h is not None else v) - v)]], fmt="o",
                        color=color, ms=6, capsize=3, elinewidth=1.6)
            if pr[i]["interval"] and h is None:
                open_arrow(a2, right, i, "x")
        a2.set_yticks(range(len(pr)), names, fontsize=TICK_FONT)
        a2.set_ylim(-0.6, len(pr) - 0.4)
        a2.axvline(1.0, color="black", lw=0.8)
        plain_log_axis(a2, "x")
        a2.set_xlim(left, right)
        a2.legend(handles=[Patch(color="tab:green", label="pick"), Patch(color="tab:blue", label="not rejected"),
                           Patch(color="tab:red", label="rejected")], fontsize=LEGEND_FONT, loc="lower right")
    a2.set_xlabel("predicted time-to-target / reference's (log scale; bar: 95% interval)")
    a2.set_title("Predicted time-to-target")
    a2.tick_params(labelsize=TICK_FONT)
    fig.tight_layout()
    figures = {"plan_rn_throughput_time": fig}
    fitted = fit_figure(plan, runs, metric=metric)
    if fitted is not None:
        figures["plan_fitted_curves"] = fitted
    caps = {"plan_rn_throughput_time": "Left: the sample penalty rN (with its interval; measured, fitted or from "
            f"the noise model) against the throughput gain, both relative to the reference; {terms.RELATIVE_TIME}. "
            "Right: the predicted time-to-target relative to the reference, "
            "with its 95% interval (the pick green, rejected candidates red). Intervals are drawn whole; an arrow marks an "
            "end that is open (unbounded).",
            "plan_fitted_curves": "Saturating fits R0 + (A - R0) / (1 + (C_mid / C)^b) of the held-out score "
            "against retained samples for the configurations whose rN is fitted (dashed: extrapolated to the "
            "target)."}
    return {"title": "Plan: align, then accelerate", "markdown": to_markdown(plan),
            "figures": figures, "captions": caps, "json_key": "plan", "json": plan}


def fit_figure(plan: dict[str, Any], runs: Sequence[Run] | None = None, metric: str = "eval/score"):
    """The saturating fits of the candidates whose rN is predicted (``rN_source`` fit; :mod:`rlbatch.analysis.fit`)
    drawn over their measured evaluation points (when ``runs`` are given) and extended to where each predicts the
    target (dashed: extrapolated); the target as a horizontal line. None when no candidate has a fit."""
    import matplotlib.pyplot as plt  # matplotlib on first use (as plan_section)

    cs = [c for c in plan["candidates"] if c.get("fit")]
    if not cs:
        return None
    by_id = {r.run_id: r for r in runs or []}
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    for i, c in enumerate(cs):
        f = c["fit"]
        color = f"C{i % 10}"
        for rid in c.get("runs") or []:
            r = by_id.get(rid)
            if r is not None:
                d = curve(r, metric)
                ax.plot(d["samples/retained"], d[metric], ".", color=color, alpha=0.4, ms=4)
        fitted, extrapolated = np.array(f["curve"]["fitted"]), np.array(f["curve"]["extrapolated"])
        # newcomer finding 24: an asymptote at the score's ceiling is the fit's bound, not a measured A
        a = ("A at the bound 1.00: not measured" if f["A"] >= 0.999 and metric == "eval/score" else
             f"A={f['A']:.2f}" + (f", 95% {format_interval(f['A_ci'], sep='-')}" if f.get("A_ci") else ""))
        ax.plot(*fitted.T, "-", color=color, label=f"{c['run'] or c['batch_size']} ({a})")
        ax.plot(*extrapolated.T, "--", color=color)
    if plan.get("target") is not None:
        ax.axhline(plan["target"], color="black", lw=0.8, ls=":")
    ax.set_xlabel("cumulative retained samples")
    ax.set_ylabel("held-out score" if metric == "eval/score" else metric)
    ax.set_title("Saturating fits of the score (dashed: extrapolated)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: hides no point
    fig.tight_layout()
    return fig
