"""The report: HTML (self-contained, figures as base64 PNG), Markdown (figures as PNG files beside it) and JSON.

``build_report(runs, out_dir, ...)`` is the one entry point; ``rlbatch analyze --out`` and the sweep call it. Other
modules add content through *sections*: ``{"title": str, "markdown": str, "figures": {name: Figure},
"captions": {name: str} (optional), "json_key": str, "json": object}``, rendered in order after the built-in
content (title, markdown text, figures), with ``json`` stored under ``json_key`` in ``report.json``. ``name`` makes
the PNG's file name; the caption a reader sees is ``captions[name]``, or ``name`` in words (:func:`humanize`).

Both documents are rendered from one Markdown source (markdown-it), so they say the same thing.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import html
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from rlbatch.analysis import terms
from rlbatch.analysis.headline import INTERVALS, bound, clock_note, headline_markdown
from rlbatch.analysis.curves import CLOCK_X, aggregate_seeds, group_seeds
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.study import Study
from rlbatch.errors import UserError
from rlbatch.output import fmt_rate, fmt_value, markdown_table, to_json
from rlbatch.report import figures as F
from rlbatch.report.async_section import async_section
from rlbatch.report.family import aligned_family, family_markdown, rejected
from rlbatch.report.figures import short_label
from rlbatch.report.plan import plan_section
from rlbatch.result import StudyResult
from rlbatch.report.sections import noise_section, throughput_section
from rlbatch.runstore import Run, run_order

__all__ = ["build_report", "accounting_columns", "summary_columns", "count", "samples_cell"]

NOT_REACHED = "not reached"


def count(v: Any) -> str:
    """A sample count for a table: ``11,008`` (``1.2e+10`` from a billion up); ``—`` when missing."""
    if not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.3g}" if abs(v) >= 1e9 else f"{v:,.0f}"


def samples_cell(v: Any) -> str:
    """Samples-to-target for a table: a count, or ``not reached``."""
    return NOT_REACHED if v is None else count(v)


def batch_cell(v: Any) -> str:
    """A batch size for a table: the count, or ``—`` when the log does not give it (never ``not reached``)."""
    return "—" if v is None else str(v)


def _duration(v: Any) -> str:
    """Seconds with at least two significant figures (issue 35: a column of "3 s" to "7 s" hid the differences it
    exists to show): ``850 ms``, ``4.2 s``, ``42 s``, ``3.5 min`` or ``2.25 h``."""
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "—"
    if v < 0.0995:
        return f"{v * 1000:.2g} ms" if v >= 0.0095 else f"{v * 1000:.1f} ms"
    if v < 0.995:
        return f"{v * 1000:.0f} ms"
    if v < 9.95:
        return f"{v:.1f} s"
    return f"{v:.0f} s" if v < 120 else f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.2f} h"


def summary_columns(compact: bool = False) -> list[tuple[str, str, Any]]:
    """Columns of the per-run summary table (``rlbatch analyze``); ``compact`` keeps the ones that fit a terminal.
    Time and throughput are on the accounting's clock (:func:`rlbatch.analysis.summaries.run_summaries`), which the
    table's title names."""
    def hours(v: Any) -> str:
        return _duration(v)

    def pct(v: Any) -> str:
        return fmt_value(100.0 * v, ".0f") + "%" if isinstance(v, (int, float)) else "—"

    cols = [("run", "run", None), ("algorithm", "alg.", None), ("prompts_per_step", "P", None),
            ("group_size", "G", None), ("batch_size", "B", None), ("lr", "lr", ".3g"), ("steps", "steps", None),
            ("samples_retained", "samples", count), ("samples_source", "samples from", None),
            ("time_s", "time", hours), ("gen_time_share", "gen share", pct),
            ("throughput_samples_per_s", "retained samples/s", ".3g"),
            ("grad_norm_actor_mean", "grad norm actor", ".3g"),
            ("grad_norm_critic_mean", "grad norm critic", ".3g"), ("last_eval_score", "last eval", ".4g")]
    if compact:
        keep = ("run", "batch_size", "steps", "samples_retained", "time_s", "throughput_samples_per_s",
                "grad_norm_actor_mean", "last_eval_score")
        cols = [c for c in cols if c[0] in keep]
    return cols


def configurations(runs: list[Run], metric: str = "eval/score",
                   clock: str = "wall") -> tuple[dict[str, list[Run]], bool, list[Run]]:
    """``(groups, seeded, configs)`` for rendering: runs grouped by configuration
    (:func:`rlbatch.analysis.curves.group_seeds`), whether any configuration has several seeds, and the runs to
    plot: one per configuration (:func:`rlbatch.analysis.curves.aggregate_seeds`: the mean over seeds to the last
    point any seed has, the seed range, and the time on ``clock`` at each evaluation). The accounting never uses
    the averaged runs (:mod:`rlbatch.analysis.accounting`)."""

    groups = group_seeds(list(runs))
    seeded = any(len(rs) > 1 for rs in groups.values())
    configs = [aggregate_seeds(rs, name, metric, clock=clock) for name, rs in groups.items()]
    return groups, seeded, configs


def with_ci(v: Any, ci: Any) -> str:
    """``0.87 (0.70–1.11)``: a ratio with its 95% interval in one table cell; ``—`` when unknown."""
    if not isinstance(v, (int, float)):
        return "—"
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or ci[0] is None:
        return f"{v:.2f}"
    return f"{v:.2f} ({format_interval(ci)})"


def samples_to_target_cell(r: dict) -> str:
    """An accounting row's samples-to-target for a table: the count, ``stopped at N`` (an adaptive sweep stopped
    it), ``unfinished`` (its trials had not finished), ``unknown (no batch size)`` (the log gives no P x G), ``≤ N`` (reached before its first evaluation after 0, at N
    samples: an upper bound) or ``not reached`` (it ran its budget without reaching)."""
    v = r.get("samples_to_target")
    if v is not None:
        return count(v)
    if r.get("batch_size") is None and "batch_size" in r:  # no P x G: no sample axis (researcher finding 12)
        return "unknown (no batch size)"
    if r.get("samples_to_target_at_most"):
        return f"≤ {count(r['samples_to_target_at_most'])}"
    st = r.get("stopped")
    if st:
        return f"stopped at {count(st.get('samples'))}" if st.get("samples") else "stopped early"
    if r.get("unfinished"):
        return "unfinished"
    return NOT_REACHED


def with_ci_cells(rows: list[dict]) -> list[dict]:
    """Rows with their table cells: each ratio and its interval in one cell (``rN_cell``...), rN as a lower bound
    (``> 1.25``) where the configuration was not measured to the target, and ``samples_to_target_cell``."""
    out = []
    for r in rows:
        cells = {f"{k}_cell": with_ci(r.get(k), r.get(f"{k}_ci")) for k in ("rN", "relative_throughput",
                                                                            "relative_time")}
        if r.get("rN") is None and r.get("rN_at_least"):
            cells["rN_cell"] = f"> {bound(r['rN_at_least'], True)}"
        for k in ("rN", "relative_time"):  # reached before the first evaluation after 0: upper bounds (N1)
            if r.get(k) is None and r.get(f"{k}_at_most"):
                cells[f"{k}_cell"] = f"≤ {bound(r[f'{k}_at_most'], False)}"
        cells["samples_to_target_cell"] = samples_to_target_cell(r)
        out.append({**r, **cells})
    return out


def accounting_columns(combined: bool = False) -> list[tuple[str, str, Any]]:
    """Columns of the accounting table (the report and ``rlbatch analyze``); ``combined``: each ratio and its
    interval in one cell (the rows need :func:`with_ci_cells`)."""
    head = [("run", "configuration", None), ("batch_size", "B", batch_cell), ("n_seeds", "seeds", None),
            ("samples_to_target_cell", "samples-to-target", None),
            ("time_to_target_s", "time-to-target", _duration)]
    if combined:
        # the accounting's intervals are simultaneous over the ladder (researcher finding 8: said beside them)
        return head + [("rN_cell", "rN (95% simultaneous)", None),
                       ("relative_throughput_cell", "rel. throughput (95% simultaneous)", None),
                       ("relative_time_cell", "rel. time-to-target (95% simultaneous)", None),
                       ("verdict", "verdict vs the reference", None)]
    return head + [("rN", "rN", ".2f"), ("rN_ci", "rN 95% simult.", format_interval),
                   ("relative_throughput", "rel. throughput", ".2f"),
                   ("relative_throughput_ci", "rel. thr. 95% simult.", format_interval),
                   ("relative_time", "rel. time-to-target", ".2f"),
                   ("relative_time_ci", "rel. time 95% simult.", format_interval), ("verdict", "verdict", None)]


def humanize(name: str) -> str:
    """A figure name as a caption in words: ``grad_norm_vs_batch`` -> ``Grad norm vs batch``; a name that already
    has spaces is kept."""
    if re.fullmatch(r"[A-Za-z0-9_.\-]+", name) and ("_" in name or "-" in name or name.islower()):
        words = re.sub(r"[_\-]+", " ", name).strip()
        return words[:1].upper() + words[1:]
    return name


def metric_words(runs: list[Run], metric: str) -> tuple[str, str]:
    """``(axis label, sentence)``: what ``metric`` measures, in words. For ``eval/score`` of runs trained here on
    one task, the task's own metric (:func:`rlbatch.train.tasks.score_description`); else a general sentence."""
    if metric == "eval/score":
        tasks = {r.meta.task for r in runs}
        here = all((r.meta.backend or "rlbatch") == "rlbatch" and r.meta.source_format in (None, "rlbatch")
                   for r in runs)
        if len(tasks) == 1 and here and next(iter(tasks)):
            from rlbatch.train.tasks import score_description

            return "held-out score", score_description(next(iter(tasks)))
        return "held-out score", "the validation score the logs report (the task's own metric, in [0, 1])"
    if metric.startswith("reward/"):
        return "training reward", f"the {metric.split('/', 1)[1]} reward over each step's responses"
    return metric, f"the logged metric {metric}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "section"


def filled_columns(rows: list[dict], columns: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    """``columns`` without those that are empty in every row (None or NaN; e.g. the critic's for GRPO runs)."""
    def empty(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    return [c for c in columns if not rows or not all(empty(r.get(c[0])) for r in rows)]


def _md_cell_safe(rows: list[dict]) -> list[dict]:
    return [{k: (v.replace("|", "\\|") if isinstance(v, str) else v) for k, v in r.items()} for r in rows]


def build_report(runs: list[Run], out_dir: Path, *, target: float | None = None, metric: str = "eval/score",
                 reference: str | None = None, title: str = "rlbatch report", sections: list[dict] | None = None,
                 extra_json: dict | None = None, ema: float | None = None, sustained: bool = False,
                 clock: str = "auto", study: Study | None = None, study_result: StudyResult | None = None) -> dict:
    """Write ``report.html`` (self-contained), ``report.md`` (+ PNG figures beside it) and ``report.json`` into
    ``out_dir``; return the JSON object.

    JSON: ``{"title", "generated_at", "metric", "target", "reference", "clock" (the one clock of every time on the
    page, :func:`rlbatch.analysis.throughput.clock_basis`), "runs": [per-run summaries,
    :func:`rlbatch.analysis.summaries.run_summaries`], "accounting": [rows as rlbatch account --format json] and
    "headline": {pick, within_noise, lines (the verdict's three, then notes), bullets} (:func:`rlbatch.analysis.accounting.headline`;
    only with a target), "aligned_family": {...} and "rejected": [...] (with a target, one model / task /
    algorithm; :func:`rlbatch.report.family.aligned_family` and :func:`rlbatch.report.family.rejected`),
    "recommendation": str | None (the headline as Markdown), "configurations": [means over each seed's whole run,
    :func:`rlbatch.analysis.summaries.configuration_summaries`], "seeds": [...]
    (:func:`rlbatch.analysis.summaries.seed_rows`), "noise": {...} (rlbatch.report.sections.noise_section),
    "throughput": {...} (rlbatch.report.sections.throughput_section), "figures": [file names], "figure_problems":
    {file name: [problems]} (:func:`rlbatch.report.figures.figure_problems`; empty when no figure clips an interval
    or stops a curve short of its crossing), <section json_key>: <section json>, ...extra_json}``.

    Page: the clock (once), the headline (three lines, then bullets), the accounting with the pick marked, where the
    aligned family ends, the configuration table, the figures (score vs retained samples and vs time: each
    configuration's mean over its seeds to the last point any seed has, the seed range shaded, the accounting's
    crossing with its 95% interval; time per step split into generation + scoring + update + other = step), then
    the noise section (slope over the aligned family, knee, B_simple per B; fitted over the runs on an LR rule,
    without a fixed-LR control), the throughput section, with a target the plan (:func:`rlbatch.report.plan.plan_section`,
    key ``plan``), the synchronous-vs-asynchronous comparison where there is one, and each of ``sections``. Every
    number comes from :mod:`rlbatch.analysis` (nothing is recomputed here).

    ``study_result``: the :class:`rlbatch.result.StudyResult` to render (the study and its plan, computed once for
    the whole page); ``study``: its :class:`rlbatch.analysis.study.Study` alone (the plan is then built from it);
    default: a study of ``runs`` with ``target``, ``metric``, ``reference``, ``ema``, ``sustained`` and ``clock``
    (which a given study replaces).

    Seeds: runs that differ only in their seed (:func:`rlbatch.analysis.curves.group_seeds`) form one
    configuration; the accounting averages per-seed values, the figures draw the seed-averaged curves
    (:func:`rlbatch.analysis.curves.aggregate_seeds`), the noise fit and the plan use every seed. The sweep
    (``rlbatch.study.report.report_sweep``) and ``rlbatch analyze --out`` both call this function. Raises
    :class:`UserError` when ``runs`` is empty, a section is malformed, or the reference is unknown / never reached
    the target.
    """

    if not runs:
        raise UserError("no runs to report on")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = sorted(runs, key=run_order)
    if study is not None and study_result is not None and study_result.study is not study:
        raise ValueError("build_report: give study_result (the study and its plan) or study, not two studies")
    if study_result is not None:
        study = study_result.study
    if study is None:
        study = Study.of(runs, target, metric, reference, ema=ema, sustained=sustained, clock=clock)
    elif [r.run_id for r in study.runs] != [r.run_id for r in runs]:  # the page's order (run_order); the estimates already made are kept
        study = dataclasses.replace(study, runs=tuple(runs))
    target, metric, reference, clock = study.target, study.metric, study.reference, study.clock
    basis = study.basis
    summaries = study.run_summaries
    # one configuration per set of seeds; the figures draw each configuration's mean curve (bands = seed range), the
    # tables take whole-run means per seed; the accounting averages per-seed samples-to-target (analysis.accounting)
    groups, seeded, configs = configurations(runs, metric, basis)
    result: dict[str, Any] = {"title": title,
                              "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "metric": metric, "target": target, "reference": reference, "runs": summaries,
                              "clock": basis}
    timed = any(getattr(r.meta, "timing_blocks", None) for r in runs)
    md: list[str] = [f"# {title}", "", f"**Clock.** {clock_note(basis, timed)} Every time on this page "
                     "(time-to-target, throughput, seconds per step, the time axis of the figures) is on this clock.",
                     ""]
    recommendation = None
    ref = None
    rows: list[dict] = []
    pick = None
    if target is not None:
        acc = study.accounting
        rows, ref, recommendation = acc["accounting"], acc["reference"], acc["recommendation"]
        result.update({k: acc[k] for k in ("accounting", "reference", "clock", "aggregation", "within_noise",
                                           "headline")})
        pick = acc["headline"]["pick"]
        if "comparisons" in acc:
            result["comparisons"] = acc["comparisons"]
        if "lr_retuning" in acc:  # how the LR was set across the batches (also stated in the recommendation)
            result["lr_retuning"] = acc["lr_retuning"]
        cols = accounting_columns(combined=True)
        if "comparisons" in acc:
            cols = [("comparison", "model / task / algorithm", None)] + cols
        shown = [{**r, "run": f"**{r['run']}** (pick)" if r["run"] == pick else r["run"]} for r in rows]
        md += ["## Recommendation", "", headline_markdown(acc["headline"]), "", INTERVALS, "",
               f"### Accounting at {metric} ≥ {target:g}" + (f" (reference {ref})" if ref else ""), "",
               markdown_table(_md_cell_safe(with_ci_cells(shown)), cols, none=NOT_REACHED), "",
               f"{terms.RN}; {terms.RELATIVE_TIME} (relative throughput: up to the target). {terms.VERDICTS}", "",
               f"**How these numbers are computed.** {acc['aggregation']}", ""]
        if "comparisons" not in acc:  # one model / task / algorithm: one batch ladder

            # the family is a property of one system: the study's, over its synchronous rows (newcomer finding 20)
            result["aligned_family"] = aligned_family(study.family)
            result["rejected"] = rejected(rows, ref)
            md += ["### Where the aligned family ends", "", family_markdown(result["aligned_family"],
                                                                             result["rejected"]), ""]
    else:
        md += ["No target given (`--target`): no accounting or recommendation. Curves and summaries below.", ""]
    result["recommendation"] = recommendation
    result["configurations"] = study.configuration_summaries
    result["seeds"] = study.seed_rows
    secs = "CPU seconds" if basis == "cpu" else "seconds"
    conf_cols = [("config", "configuration", None), ("batch_size", "B", None), ("lr", "lr", ".3g")]
    if target is not None:
        conf_cols += [("reached", "seeds reaching target", None),
                      ("s2t_range", "samples-to-target per seed (min–max)", None)]
    else:
        conf_cols += [("seeds", "seeds", None)]
    conf_cols += [("steps", "steps", count), ("samples_retained", "retained samples", count),
                  ("seconds", f"time ({secs})", _duration),
                  ("gen_share", "gen. share", lambda v: fmt_value(100.0 * v, ".0f") + "%"
                   if isinstance(v, (int, float)) and math.isfinite(v) else "—"),
                  ("throughput_cell", "throughput, whole run (95% CI)", None),
                  ("grad_norm_actor_mean", "grad norm actor", ".3g"), ("grad_norm_critic_mean", "grad norm critic",
                                                                       ".3g"),
                  ("last_score_mean", "last score", ".3f")]

    def s2t_range(c: dict) -> str:
        lo, hi = c.get("samples_to_target_min"), c.get("samples_to_target_max")
        if lo is None:
            return NOT_REACHED
        return count(lo) if lo == hi else f"{count(lo)}–{count(hi)}"

    crow = [{**c, "throughput_cell": fmt_rate(c["throughput_samples_per_s"], c["throughput_ci"]),
             "s2t_range": s2t_range(c)} for c in result["configurations"]]
    md += [f"## Configurations ({len(runs)} runs in {len(groups)} configurations)", "",
           "Means over each seed's **whole run** (every seed to its own end), times on the clock above; the "
           "min / max samples-to-target are the seeds' own crossings, which the accounting combines. Throughput "
           "here is over the whole run during the study (retained samples per second); the accounting's is up "
           "to the target" + (", from the timing pass (the clock note above)" if timed else "") + ".", "",
           markdown_table(_md_cell_safe(crow), filled_columns(crow, conf_cols), none=NOT_REACHED), ""]
    if seeded:
        md += ["Per-run values (each seed) are in `report.json` (`runs`).", ""]

    figs: list[tuple[str, str, Any]] = []  # (file name, caption, figure)
    band = " Lines: mean over the seeds still running at each point (to the last point any seed has); shaded: " \
        "range across seeds." if seeded else ""
    short, words = metric_words(runs, metric)
    rule_note = " Solid lines and round markers: the square-root LR rule; dashed with squares: a fixed learning " \
        "rate (the control)."
    cross = " Markers on the target line: each configuration's samples-to-target from the accounting (geometric " \
        "mean over seeds) with its 95% interval." if rows else ""
    by_row = {r["run"]: r for r in rows}
    figs.append(("fig_score_vs_samples.png", f"Held-out score against cumulative retained training samples: curves "
                 f"that overlay are batch-size invariant (whether they do is the equivalence test of the accounting's rN, not the "
                 f"look of the curves).{rule_note}{band}{cross}",
                 F.score_vs(configs, "samples/retained", metric, target, xlabel="cumulative retained samples",
                            ylabel=short, crossings={n: (r["samples_to_target"], r["samples_to_target_ci"])
                                                     for n, r in by_row.items() if r["reached"]}, reference=ref)))
    scale, unit = _time_scale(configs)
    clock_words = "process CPU" if basis == "cpu" else "wall-clock"
    figs.append(("fig_score_vs_time.png", f"Held-out score against {clock_words} {unit} of training (the "
                 f"accounting's clock; evaluation time excluded where the log allows): what you wait for.{band}"
                 + (cross.replace("samples-to-target", "time-to-target") if cross else ""),
                 F.score_vs(configs, CLOCK_X, metric, target, xscale=scale, xlabel=f"{clock_words} {unit}",
                            ylabel=short, crossings={n: (r["time_to_target_s"], r["time_to_target_ci"])
                                                     for n, r in by_row.items() if r["reached"]}, reference=ref)))
    timing = study.timings
    figs.append(("fig_time_per_step.png", f"Where each configuration's optimizer step goes over its whole run: "
                 "generation, scoring (reward), update and other as shares of the step (they add up to it; the "
                 f"seconds of each part are in the throughput table), with the mean {secs} per step at the right.",
                 F.time_per_step(timing, names=_bar_names(groups), unit=secs)))
    md += ["## Figures", "", f"**{short}** (`{metric}`): {words}.", ""]
    for name, cap, _ in figs:
        md += [f"![{cap}]({name})", "", f"*{cap}*", ""]


    # the core analysis sections (grad-norm scaling and knee, noise scale, G x P; throughput model; the plan), then
    # the caller's. The grad-norm fit is over runs on an LR rule: a fixed-LR control is not part of the family.

    all_runs, runs = runs, study.synchronous_runs  # the noise fit, throughput model and plan: synchronous runs only
    on_rule = [r for r in runs if r.meta.lr_rule != "none"]
    fam = result.get("aligned_family")
    noise_runs = on_rule if len({r.meta.batch_size for r in on_rule}) >= 2 else runs
    why_out = (["off the LR rule"] if noise_runs is on_rule and len(on_rule) < len(runs) else []) + (
        ["asynchronous"] if len(all_runs) > len(runs) else [])
    left_out = sorted({c for c, rs in groups.items() for r in rs if r not in noise_runs})  # finding 19: named
    family = fam["undistinguished"] if fam else None
    core = [noise_section(study.noise(noise_runs, family), family=family,
                          left_out=f"left out ({', '.join(why_out)}): {', '.join(left_out)}" if left_out else None),
            throughput_section(study.throughput(runs), measured=[c for c in result["configurations"]
                                                                 if any(r in runs for r in groups[c["config"]])])]
    if target is not None:
        if study_result is None:  # the caller gave the study alone: its result (the plan) built here, once
            study_result = StudyResult.of(runs, target, study=study)
        core.append(_plan_section(study_result, runs, metric))
    core += [s for s in [async_section(study.async_comparison)] if s]
    for sec in core + list(sections or []):
        if not isinstance(sec, dict) or "title" not in sec:
            raise UserError("report section must be a dict with at least a 'title'", field="sections")
        slug = _slug(sec["title"])
        md += [f"## {sec['title']}", "", str(sec.get("markdown") or ""), ""]
        captions = sec.get("captions") or {}
        for name, fig in (sec.get("figures") or {}).items():
            fname = f"fig_{slug}_{_slug(name)}.png"
            cap = captions.get(name) or humanize(name)
            figs.append((fname, cap, fig))
            md += [f"![{cap}]({fname})", "", f"*{cap}*", ""]
        if sec.get("json_key"):
            result[sec["json_key"]] = sec.get("json")

    notes = [(s["run"], n) for s in summaries for n in s["notes"]]
    if notes:
        md += ["## How each log was read", ""]
        md += [f"- **{run}**: {n}" for run, n in notes]
        md += [""]

    result["figure_problems"] = {name: p for name, _, fig in figs if (p := F.figure_problems(fig))}
    images: dict[str, bytes] = {}
    for name, _, fig in figs:
        data = F.png_bytes(fig)
        images[name] = data
        (out_dir / name).write_bytes(data)
    result["figures"] = [name for name, _, _ in figs]
    if extra_json:
        result.update(extra_json)

    if "matplotlib.pyplot" in sys.modules:  # sections drawn with pyplot: free their figures
        sys.modules["matplotlib.pyplot"].close("all")
    md_text = "\n".join(md).rstrip() + "\n"
    (out_dir / "report.md").write_text(md_text, encoding="utf-8")
    (out_dir / "report.html").write_text(_html(title, md_text, images), encoding="utf-8")
    (out_dir / "report.json").write_text(to_json(result) + "\n", encoding="utf-8")
    return json.loads(to_json(result))


def _bar_names(groups: dict[str, list[Run]]) -> dict[str, str]:
    """Short names of the configurations for a bar chart (``B=128, sqrt rule``), or their own names when two
    short names would be equal (e.g. two group sizes at one B)."""

    short = {g: short_label(rs[0]) for g, rs in groups.items()}
    return short if len(set(short.values())) == len(short) else {g: g for g in groups}


def _time_scale(configs: list[Run]) -> tuple[float, str]:
    """Seconds per unit and unit name for a time axis (the clock column of the configurations' curves): hours for
    long runs, minutes or seconds for short."""

    longest = max((float(r.evals[CLOCK_X].max()) for r in configs
                   if len(r.evals) and CLOCK_X in r.evals.columns and r.evals[CLOCK_X].notna().any()), default=0.0)
    return (3600.0, "hours") if longest >= 7200 else (60.0, "minutes") if longest >= 120 else (1.0, "seconds")


def _plan_section(result: StudyResult, runs: list[Run], metric: str) -> dict:
    """The study result's plan (:attr:`rlbatch.result.StudyResult.plan`, over the synchronous runs, seeds kept
    apart), rendered by :func:`rlbatch.report.plan.plan_section`, or a section saying why there is none."""
    if result.plan is None:
        return {"title": "Plan: align, then accelerate", "markdown": f"No plan: {result.plan_error}",
                "json_key": "plan", "json": None}
    sec = plan_section(result.plan, runs, metric=metric)
    plan = sec["json"]
    pick = next((c for c in plan["candidates"] if c["run"] is None and c["batch_size"] == plan["recommended"]), None)
    if pick is not None:  # the plan's pick was not run: say how it relates to the measured recommendation
        sec["markdown"] = (f"The plan predicts that B={pick['batch_size']}, which has not been run, would be faster "
                           "still (rN from the noise model, throughput from the fitted time model; see the "
                           "interval). The recommendation above is measured among the batches run; "
                           f"B={pick['batch_size']} is the next batch to try.\n\n" + sec["markdown"])
    return sec


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{border-bottom:2px solid #444;padding-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0;max-width:100%}
th,td{border:1px solid #ccc;padding:.25em .45em;text-align:right;white-space:normal;overflow-wrap:break-word}
th{vertical-align:bottom}table.wide{font-size:.72em}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:.8em auto 0;border:1px solid #eee}
p em{display:block;text-align:center;color:#555;font-size:.9em}
code{background:#f5f5f5;padding:0 .2em}
"""


def _html(title: str, md_text: str, images: dict[str, bytes]) -> str:
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md_text)

    def embed(m: re.Match) -> str:
        name = html.unescape(m.group(1))
        if name in images:
            return 'src="data:image/png;base64,' + base64.b64encode(images[name]).decode("ascii") + '"'
        return m.group(0)

    body = re.sub(r'src="([^"]+)"', embed, body)
    # an interval "0.75–1.01" wraps as a whole in a narrow table cell, never at its dash (word joiners)
    body = re.sub(r"(\d)([–-])(\d|∞)", "\\1&#8288;\\2&#8288;\\3", body)
    body = re.sub(r"(\d) (s|min|h)\b", "\\1&nbsp;\\2", body)  # "10.3 min" stays on one line

    def narrow(m: re.Match) -> str:  # a table of many columns gets a smaller font so that it fits the page
        cols = m.group(0).split("</tr>", 1)[0].count("<th")
        return m.group(0).replace("<table>", '<table class="wide">', 1) if cols >= 10 else m.group(0)

    body = re.sub(r"<table>.*?</table>", narrow, body, flags=re.S)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}</body></html>\n")
