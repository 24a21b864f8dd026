"""The report's synchronous-vs-asynchronous section (issue 17): renders the comparison the study computed
(:func:`rlbatch.analysis.asynchrony.async_comparison`, :attr:`rlbatch.analysis.study.Study.async_comparison`): at
each batch size, the asynchronous configuration against the synchronous one with the same B, G, learning rate and
rule, wall-clock time.
"""

from __future__ import annotations

from typing import Any

from rlbatch.analysis.interval import format_interval
from rlbatch.output import markdown_table

TITLE = "Synchronous vs asynchronous rollouts"


def _summary(rows: list[dict], ref: str | None) -> str:
    parts = []
    for r in rows:
        x, rn, t = r["relative_throughput"], r["rN"], r["relative_time"]
        bits = [f"B={r['batch_size']} ({r['config']} vs {r['sync_config']}):"]
        bits.append(f"throughput x{x:.2f}" if x is not None else "throughput unknown")
        bits.append(f"rN {rn:.2f}" if rn is not None else "rN unknown (a side did not reach the target)")
        if t is not None:
            bits.append(f"time-to-target x{t:.2f} ({r['verdict']})")
        parts.append(" ".join(bits[:1]) + " " + ", ".join(bits[1:]) + ".")
    return " ".join(parts)


def async_section(comparison: tuple[list[dict[str, Any]], str | None] | None) -> dict | None:
    """The report section (``{"title", "markdown", "json_key": "async", "json"}``) of ``comparison``
    (:func:`rlbatch.analysis.asynchrony.async_comparison`: rows and the synchronous reference), or None when no run
    is asynchronous (``comparison`` None). Asynchronous runs without a synchronous partner are listed as such."""
    if comparison is None:
        return None
    rows, ref = comparison
    if not rows:
        return {"title": TITLE, "json_key": "async", "json": {"rows": [], "reference": None},
                "markdown": "Asynchronous runs are present but none has a synchronous run with the same B, G, "
                            "learning rate and rule to compare with (`rlbatch sweep --async-rollouts K` runs both)."}
    cells = [{**r, "rN_ci": format_interval(r["rN_ci"]), "relative_throughput_ci": format_interval(r["relative_throughput_ci"]),
              "relative_time_ci": format_interval(r["relative_time_ci"]),
              "vs_reference_time_ci": format_interval(r["vs_reference_time_ci"])} for r in rows]
    cols = [("batch_size", "B", None), ("config", "async", None), ("async_rollouts", "K", None),
            ("partial_rollout_tokens", "T", None), ("staleness_mean", "staleness", ".2f"),
            ("partial_frac", "partial", ".2f"), ("overlap_frac", "gen. overlapped", ".2f"),
            ("relative_throughput", "throughput async/sync", ".2f"), ("relative_throughput_ci", "95% CI", None),
            ("rN", "rN async/sync", ".2f"), ("rN_ci", "95% CI", None),
            ("relative_time", "time async/sync", ".2f"), ("relative_time_ci", "95% CI", None),
            ("verdict", "vs sync", None), ("vs_reference_time", f"time / {ref}" if ref else "time / ref", ".2f"),
            ("vs_reference_time_ci", "95% CI", None), ("vs_reference_verdict", "vs reference", None)]
    md = (markdown_table(cells, cols) + "\n\n"
          "Each asynchronous configuration against the synchronous one at the same B (same G, learning rate and "
          "rule): the throughput gain from overlapping generation with the update, the sample penalty rN of its "
          "stale samples, and the time-to-target ratio = rN / throughput gain; asynchrony pays iff its throughput "
          "gain exceeds its rN (the paper's rule applied to the combination). The last columns compare it with the "
          "synchronous reference. Staleness = policy versions between a response's first token and the update "
          "that trains it; partial = responses decoded under more than one version; gen. overlapped = generation "
          "seconds that ran while the trainer scored and updated / all generation seconds. Wall-clock time "
          "(overlap saves wall time, not CPU time).\n\n" + _summary(rows, ref))
    return {"title": TITLE, "markdown": md, "json_key": "async", "json": {"rows": rows, "reference": ref,
                                                                          "clock": "wall"}}
