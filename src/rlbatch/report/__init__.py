"""The report: HTML (self-contained, figures as base64 PNG), Markdown (figures as PNG files beside it) and JSON.

``build_report(runs, out_dir, ...)`` is the one entry point; ``rlbatch analyze --out`` and the sweep call it. Other
modules add content through *sections*: ``{"title": str, "markdown": str, "figures": {name: Figure},
"json_key": str, "json": object}``, rendered in order after the built-in content (title, markdown text, figures),
with ``json`` stored under ``json_key`` in ``report.json``.

Both documents are rendered from one Markdown source (markdown-it), so they say the same thing.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rlbatch.errors import UserError
from rlbatch.output import fmt_value, markdown_table, to_json
from rlbatch.runstore import Run

__all__ = ["build_report", "accounting_for_runs", "summary_columns", "count", "samples_cell"]

NOT_REACHED = "not reached"


def count(v: Any) -> str:
    """A sample count for a table: ``11,008`` (``1.2e+10`` from a billion up); ``—`` when missing."""
    if not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:.3g}" if abs(v) >= 1e9 else f"{v:,.0f}"


def samples_cell(v: Any) -> str:
    """Samples-to-target for a table: a count, or ``not reached``."""
    return NOT_REACHED if v is None else count(v)


def _duration(v: Any) -> str:
    """Seconds as ``42 s``, ``3.5 min`` or ``2.25 h``."""
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "—"
    return f"{v:.0f} s" if v < 120 else f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.2f} h"


def summary_columns(compact: bool = False) -> list[tuple[str, str, Any]]:
    """Columns of the per-run summary table (shared by the report and ``rlbatch analyze``); ``compact`` keeps the
    ones that fit a terminal."""
    def hours(v: Any) -> str:
        return _duration(v)

    def pct(v: Any) -> str:
        return fmt_value(100.0 * v, ".0f") + "%" if isinstance(v, (int, float)) else "—"

    cols = [("run", "run", None), ("algorithm", "alg.", None), ("prompts_per_step", "P", None),
            ("group_size", "G", None), ("batch_size", "B", None), ("lr", "lr", ".3g"), ("steps", "steps", None),
            ("samples_retained", "samples", count), ("samples_source", "samples from", None),
            ("wall_clock_s", "wall-clock", hours), ("gen_time_share", "gen share", pct),
            ("throughput_samples_per_s", "samples/s", ".3g"), ("grad_norm_actor_mean", "grad norm actor", ".3g"),
            ("grad_norm_critic_mean", "grad norm critic", ".3g"), ("last_eval_score", "last eval", ".4g")]
    if compact:
        keep = ("run", "batch_size", "steps", "samples_retained", "wall_clock_s", "throughput_samples_per_s",
                "grad_norm_actor_mean", "last_eval_score")
        cols = [c for c in cols if c[0] in keep]
    return cols


def configurations(runs: list[Run], metric: str = "eval/score") -> tuple[dict[str, list[Run]], bool, list[Run]]:
    """``(groups, seeded, configs)``: runs grouped by configuration (seeds together,
    :func:`rlbatch.analysis.curves.group_seeds`), whether any configuration has several seeds, and the runs to
    account and plot: the seed-averaged run per configuration when seeded, else the runs themselves."""
    from rlbatch.analysis.curves import aggregate_seeds, group_seeds

    groups = group_seeds(list(runs))
    seeded = any(len(rs) > 1 for rs in groups.values())
    configs = [aggregate_seeds(rs, name, metric) for name, rs in groups.items()] if seeded else list(runs)
    return groups, seeded, configs


def _default_reference(inp: pd.DataFrame) -> str | None:
    # the same test as analysis.accounting.account: samples-to-target and throughput finite and > 0 (a target
    # already met by the initial evaluation, at 0 samples, gives no rN to compare against)
    def good(col: str) -> pd.Series:
        v = pd.to_numeric(inp[col], errors="coerce")
        return v.notna() & np.isfinite(v) & (v > 0)

    ok = inp[good("samples_to_target") & good("throughput_samples_per_s")]
    if ok.empty:
        return None
    ok = ok.assign(_b=ok["batch_size"].fillna(float("inf")))
    return str(ok.sort_values(["_b", "run"], kind="stable").iloc[0]["run"])


def accounting_for_runs(runs: list[Run], target: float, metric: str = "eval/score", reference: str | None = None,
                        ema: float | None = None, sustained: bool = False) -> tuple[list[dict], str | None, str]:
    """End-to-end accounting of ``runs`` at ``target`` (rows as ``rlbatch account --format json``), the reference
    used, and the recommendation paragraph (Markdown).

    The reference defaults to the smallest-B run that reached the target and has a throughput. Decision rule (Li et
    al. 2026, end-to-end accounting): a run is faster than the reference iff its throughput gain exceeds its sample
    penalty rN. Raises :class:`UserError` for an unknown ``reference`` or one that did not reach the target.
    """
    from rlbatch.analysis.accounting import account, fastest, to_json_rows, verdict
    from rlbatch.analysis.curves import accounting_input

    inp = accounting_input(runs, target, metric, ema=ema, sustained=sustained)
    names = list(inp["run"])
    if reference is not None and reference not in names:
        raise UserError(f"unknown reference run {reference!r}; runs are: {', '.join(names)}", field="reference")
    ref = reference or _default_reference(inp)
    if ref is None:
        rows = []
        for r in inp.to_dict(orient="records"):
            s = _num(r["samples_to_target"])
            b = _num(r["batch_size"])
            rows.append({"run": r["run"], "batch_size": int(b) if b is not None else None, "samples_to_target": s,
                         "rN": None, "relative_throughput": None, "relative_time": None,
                         "faster_than_reference": False, "reached": s is not None})
        reached = [r["run"] for r in rows if r["reached"]]
        if reached:
            text = (f"Runs {', '.join(reached)} reached {metric} ≥ {target:g}, but none has a measured throughput "
                    "(no per-step timings in the logs) and a target reached after training began, so time-to-target "
                    "cannot be compared.")
        else:
            best = max(runs, key=lambda r: _best(r, metric) if _best(r, metric) is not None else -1e300)
            bv = _best(best, metric)
            text = (f"No run reached {metric} ≥ {target:g}" +
                    (f"; the best was {best.run_id} at {bv:.4g}. " if bv is not None else ". ") +
                    "Train longer, or choose a lower target, before comparing batch sizes.")
        return rows, None, text
    table = account(inp, ref)
    rows = to_json_rows(table)
    recs = table.to_dict(orient="records")
    best = fastest(table)
    by = {r["run"]: r for r in recs}
    bref = by[ref]["batch_size"]
    parts = []
    if best is None or best == ref:
        parts.append(f"**Recommendation: keep {ref} (B={bref}).** No other run reaches {metric} ≥ {target:g} "
                     f"sooner: none has a throughput gain that beats its sample penalty rN.")
    else:
        b = by[best]
        parts.append(f"**Recommendation: {best} (B={b['batch_size']}).** It reaches {metric} ≥ {target:g} in "
                     f"{b['relative_time']:.2f}x the time of the reference {ref} (B={bref}): its throughput is "
                     f"{b['relative_throughput']:.2f}x the reference's while it needs rN = {b['rN']:.2f}x the "
                     f"samples, and a configuration is faster iff its throughput gain exceeds rN.")
    others = [verdict(r, ref) for r in recs if r["run"] not in (ref, best)]
    if others:
        parts.append("Others: " + " ".join(others))
    hw = {str(r.meta.hardware) for r in runs if r.meta.hardware}
    if len(hw) > 1:
        parts.append(f"Caution: these runs used different hardware ({'; '.join(sorted(hw))}), so throughput ratios "
                     "compare hardware as well as batch size.")
    return rows, ref, " ".join(parts)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _best(run: Run, metric: str) -> float | None:
    from rlbatch.analysis.curves import metric_frame

    df = metric_frame(run, metric)
    if metric not in df.columns:
        return None
    v = df[metric].dropna()
    return float(v.max()) if len(v) else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "section"


def _md_cell_safe(rows: list[dict]) -> list[dict]:
    return [{k: (v.replace("|", "\\|") if isinstance(v, str) else v) for k, v in r.items()} for r in rows]


def build_report(runs: list[Run], out_dir: Path, *, target: float | None = None, metric: str = "eval/score",
                 reference: str | None = None, title: str = "rlbatch report", sections: list[dict] | None = None,
                 extra_json: dict | None = None, ema: float | None = None, sustained: bool = False) -> dict:
    """Write ``report.html`` (self-contained), ``report.md`` (+ PNG figures beside it) and ``report.json`` into
    ``out_dir``; return the JSON object.

    JSON: ``{"title", "generated_at", "metric", "target", "reference", "runs": [summaries as
    rlbatch.analysis.curves.summarize_run], "accounting": [rows as rlbatch account --format json] (only when a
    target is given), "recommendation": str | None, "noise": {...} (rlbatch.analysis.noise.noise_section),
    "throughput": {...} (rlbatch.analysis.throughput.throughput_section), "figures": [file names],
    <section json_key>: <section json>, ...extra_json}``. Figures: score vs retained samples, score vs wall-clock,
    time per step; then the noise section (gradient norm vs B, log-log, with slope, interval and knee; B_simple;
    fitted over the runs on an LR rule, without a fixed-LR control), the throughput section, with a target the plan
    (:func:`rlbatch.plan.plan_section`, key ``plan``), and each of ``sections``.

    Seeds: runs that differ only in their seed (:func:`rlbatch.analysis.curves.group_seeds`) form one
    configuration; when any configuration has several, the accounting, the curves (with the range across seeds
    shaded) and the time figure use the seed-averaged runs (:func:`rlbatch.analysis.curves.aggregate_seeds`), the
    JSON adds ``configurations`` (their summaries) and ``seeds`` (:func:`rlbatch.analysis.curves.seed_rows`), and
    the noise fit and the plan use every seed. The sweep (``rlbatch.sweep.study.report_sweep``) and
    ``rlbatch analyze --out`` both call this function. Raises :class:`UserError` when ``runs`` is
    empty, a section is malformed, or the reference is unknown / never reached the target.
    """
    from rlbatch.analysis.curves import seed_rows, summarize_run
    from rlbatch.report import figures as F

    if not runs:
        raise UserError("no runs to report on")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = list(runs)
    summaries = [summarize_run(r) for r in runs]
    # several seeds of one configuration: account, plot and tabulate the seed-averaged run (bands = seed range)
    groups, seeded, configs = configurations(runs, metric)
    result: dict[str, Any] = {"title": title,
                              "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                              "metric": metric, "target": target, "reference": reference, "runs": summaries}
    if seeded:
        result["configurations"] = [summarize_run(r) for r in configs]
    md: list[str] = [f"# {title}", ""]
    recommendation = None
    ref = None
    if target is not None:
        rows, ref, recommendation = accounting_for_runs(configs, target, metric, reference, ema=ema,
                                                        sustained=sustained)
        result["accounting"] = rows
        result["reference"] = ref
        md += ["## Recommendation", "", recommendation, "",
               f"### Accounting at {metric} ≥ {target:g}" + (f" (reference {ref})" if ref else "")
               + (" — seed-averaged curves" if seeded else ""), "",
               markdown_table(_md_cell_safe(rows), [
                   ("run", "run", None), ("batch_size", "B", None), ("samples_to_target", "samples-to-target",
                                                                     samples_cell),
                   ("rN", "rN", ".2f"), ("relative_throughput", "rel. throughput", ".2f"),
                   ("relative_time", "rel. time-to-target", ".2f"), ("faster_than_reference", "faster", None)],
                   none=NOT_REACHED), "",
               "rN = samples-to-target / the reference's; relative time = rN / relative throughput; a run is "
               "faster iff its relative throughput exceeds rN (Li et al. 2026).", ""]
    else:
        md += ["No target given (`--target`): no accounting or recommendation. Curves and summaries below.", ""]
    result["recommendation"] = recommendation
    if seeded:
        srows = seed_rows(groups, target, metric)
        result["seeds"] = srows
        md += [f"## Configurations (mean over seeds; {len(runs)} runs in {len(groups)} configurations)", "",
               markdown_table(_md_cell_safe([s for s in result["configurations"]]), summary_columns()), "",
               "### Seeds" + (f": samples-to-target per seed (target {target:g})" if target is not None else ""), "",
               markdown_table(_md_cell_safe(srows), [
                   ("config", "configuration", None), ("batch_size", "B", None), ("lr", "lr", ".3g"),
                   ("reached", "seeds reaching target", None),
                   ("samples_to_target_min", "min samples-to-target", samples_cell),
                   ("samples_to_target_max", "max samples-to-target", samples_cell),
                   ("first_score_mean", "first score", ".3f"), ("last_score_mean", "last score", ".3f"),
                   ("samples_generated", "generated", count), ("samples_retained", "retained", count)],
                   none=NOT_REACHED), "",
               "The accounting uses each configuration's seed-averaged curve; the range across seeds shows how much "
               "evaluation and sampling noise there is in one seed's samples-to-target.", ""]
    else:
        md += ["## Runs", "", markdown_table(_md_cell_safe(summaries), summary_columns()), ""]

    figs: list[tuple[str, str, Any]] = []  # (file name, caption, figure)
    band = " (lines: mean over seeds; shaded: range across seeds)" if seeded else ""
    figs.append(("fig_score_vs_samples.png", f"{metric} vs cumulative retained samples (curves that overlay are "
                 f"batch-size invariant){band}",
                 F.score_vs(configs, "samples/retained", metric, target, xlabel="cumulative retained samples")))
    figs.append(("fig_score_vs_wallclock.png", f"{metric} vs wall-clock (evaluation time excluded where the log "
                 "allows)", F.score_vs(configs, "time/wall_s", metric, target, xscale=_time_scale(configs)[0],
                                      xlabel=f"wall-clock {_time_scale(configs)[1]}")))
    figs.append(("fig_time_per_step.png", "mean time per step: generation, reward, update, other",
                 F.time_per_step(configs)))
    md += ["## Figures", ""]
    for name, cap, _ in figs:
        md += [f"![{cap}]({name})", "", f"*{cap}*", ""]

    from rlbatch.analysis.noise import noise_section
    from rlbatch.analysis.throughput import throughput_section

    # the core analysis sections (grad-norm scaling and knee, noise scale, G x P; throughput model; the plan), then
    # the caller's. The grad-norm fit is over runs on an LR rule: a fixed-LR control is not part of the family.
    on_rule = [r for r in runs if r.meta.lr_rule != "none"]
    core = [noise_section(on_rule if len({r.meta.batch_size for r in on_rule}) >= 2 else runs, target=target,
                          metric=metric), throughput_section(runs)]
    if target is not None:
        core.append(_plan_section(runs, target, metric, ref or reference))
    for sec in core + list(sections or []):
        if not isinstance(sec, dict) or "title" not in sec:
            raise UserError("report section must be a dict with at least a 'title'", field="sections")
        slug = _slug(sec["title"])
        md += [f"## {sec['title']}", "", str(sec.get("markdown") or ""), ""]
        for name, fig in (sec.get("figures") or {}).items():
            fname = f"fig_{slug}_{_slug(name)}.png"
            figs.append((fname, name, fig))
            md += [f"![{name}]({fname})", "", f"*{name}*", ""]
        if sec.get("json_key"):
            result[sec["json_key"]] = sec.get("json")

    notes = [(s["run"], n) for s in summaries for n in s["notes"]]
    if notes:
        md += ["## How each log was read", ""]
        md += [f"- **{run}**: {n}" for run, n in notes]
        md += [""]

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


def _time_scale(runs: list[Run]) -> tuple[float, str]:
    """Seconds per unit and unit name for a wall-clock axis: hours for long runs, minutes or seconds for short."""
    longest = max((float(r.metrics["time/wall_s"].max()) for r in runs
                   if len(r.metrics) and "time/wall_s" in r.metrics.columns and r.metrics["time/wall_s"].notna().any()),
                  default=0.0)
    return (3600.0, "hours") if longest >= 7200 else (60.0, "minutes") if longest >= 120 else (1.0, "seconds")


def _plan_section(runs: list[Run], target: float, metric: str, reference: str | None) -> dict:
    """The plan (:func:`rlbatch.plan.plan_section`) over every run (seeds kept apart), or a section saying why
    there is none."""
    from rlbatch.plan import plan_section

    try:
        sec = plan_section(runs, target=target, metric=metric, reference=reference)
    except UserError as err:
        return {"title": "Plan: align, then accelerate", "markdown": f"No plan: {err}", "json_key": "plan",
                "json": None}
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
table{border-collapse:collapse;font-size:.85em;margin:.6em 0;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:.8em auto 0;border:1px solid #eee}
p em{display:block;text-align:center;color:#555;font-size:.9em}
code{background:#f5f5f5;padding:0 .2em}
"""


def _html(title: str, md_text: str, images: dict[str, bytes]) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md_text)

    def embed(m: re.Match) -> str:
        name = html.unescape(m.group(1))
        if name in images:
            return 'src="data:image/png;base64,' + base64.b64encode(images[name]).decode("ascii") + '"'
        return m.group(0)

    body = re.sub(r'src="([^"]+)"', embed, body)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>\n<body>\n{body}</body></html>\n")
