"""The report section of the plan: its table, sentences and figure (rendering only; the plan is
:mod:`rlbatch.plan`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.runstore import Run


def plan_section(plan_or_runs: dict[str, Any] | Sequence[Run], **plan_kwargs: Any) -> dict[str, Any]:
    """The report section of the plan (report contract: title, markdown, figures, json_key ``plan``, json).

    ``plan_or_runs``: a plan dict (:func:`plan_runs` / :func:`plan_table`) or runs, planned with ``plan_kwargs``
    (``target`` required). Figure: rN (with intervals) and relative throughput vs B, and the predicted relative
    time-to-target per candidate with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlbatch.plan import plan_runs, to_markdown

    plan = plan_or_runs if isinstance(plan_or_runs, dict) else plan_runs(list(plan_or_runs), **plan_kwargs)
    cs = [c for c in plan["candidates"] if c["batch_size"]]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for src, mk in (("measured", "o"), ("fit", "s"), ("noise-model", "^")):
        sel = [c for c in cs if c["rN_source"] == src and c["rN"] is not None]
        if sel:
            b = np.array([c["batch_size"] for c in sel], float)
            r = np.array([c["rN"] for c in sel])
            err = np.array([[c["rN"] - c["rN_ci"][0], c["rN_ci"][1] - c["rN"]] if c["rN_ci"] else [0, 0]
                            for c in sel]).T
            a1.errorbar(b, r, yerr=np.clip(err, 0, None), fmt=mk, capsize=3, label=f"rN ({src})")
    th = [c for c in cs if c["relative_throughput"] is not None]
    if th:
        a1.plot([c["batch_size"] for c in th], [c["relative_throughput"] for c in th], "x--", color="gray",
                label="relative throughput")
    from rlbatch.report.figures import batch_axis

    batch_axis(a1)
    a1.set_xlabel("batch size B (responses per update)")
    a1.set_ylabel("ratio to the reference")
    a1.set_title("Sample penalty rN vs throughput gain")
    a1.legend(fontsize=8)
    pr = [c for c in cs if c["predicted_relative_time"] is not None]
    if pr:
        names = [str(c["run"] or f"B={c['batch_size']}") for c in pr]
        t = np.array([c["predicted_relative_time"] for c in pr])
        err = np.array([[max(0, v - c["interval"][0]), max(0, c["interval"][1] - v)] if c["interval"] else [0, 0]
                        for v, c in zip(t, pr)]).T
        colors = ["tab:green" if c["verdict"] == "recommended" else "tab:red" if c["rejected"] else "tab:blue"
                  for c in pr]
        a2.barh(range(len(pr)), t, xerr=err, color=colors, capsize=3)
        a2.set_yticks(range(len(pr)), names, fontsize=8)
        a2.axvline(1.0, color="black", lw=0.8)
    a2.set_xlabel("predicted time-to-target / reference's")
    a2.set_title("Predicted time-to-target (green: recommended)")
    fig.tight_layout()
    return {"title": "Plan: align, then accelerate", "markdown": to_markdown(plan),
            "figures": {"plan_rn_throughput_time": fig}, "json_key": "plan", "json": plan}
