"""The report's built-in matplotlib figures (Agg backend, no pyplot state): one function per figure, each taking
runs and returning a :class:`matplotlib.figure.Figure`.

- score vs cumulative retained samples (the paper's overlay: inside the batch-invariant range curves coincide);
- score vs time on the accounting's clock (the "accelerate" view: what the user waits for);
  both with the accounting's crossing of the target and its 95% interval;
- mean time per step per configuration split into generation, scoring, update and other.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from rlbatch.analysis.curves import curve, metric_frame
from rlbatch.runstore import Run, run_order


def new_figure(width: float = 7.0, height: float = 4.2):
    """A fresh Agg-backed figure (no global pyplot state)."""
    # matplotlib here and below on first use: the analysis and `rlbatch --help` never load it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def batch_axis(ax, axis: str = "x") -> None:
    """A batch-size axis: log base 2 with plain integer labels at the powers of two (16, 32, 64, ...), no minor
    labels. Shared by every figure that plots against B."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    a.set_major_locator(LogLocator(base=2))
    a.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:.0f}" if v >= 1 else f"{v:g}"))
    a.set_minor_formatter(NullFormatter())


def plain_log_axis(ax, axis: str = "y") -> None:
    """A log-10 axis labelled with plain numbers (0.01, 0.02, 0.05, 0.1, ... 200, 500) instead of powers of ten
    (``6 x 10^0``); minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    lo, hi = (ax.get_xlim() if axis == "x" else ax.get_ylim())
    # few decades: label 1-2-5 steps; many: decades only
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-300) < 1e3 else (1.0,)
    a.set_major_locator(LogLocator(base=10, subs=subs))
    a.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}" if v >= 1 else f"{v:.3g}"))
    a.set_minor_formatter(NullFormatter())


def figure_problems(fig) -> list[str]:
    """What a reader of ``fig`` would be misled by, in words (empty when none): an interval (error bar) that ends
    outside its axes, where the figure would clip it; a legend or tick label smaller than :data:`LEGEND_FONT` - 1.5
    points (unreadable at 100% zoom); a score curve that stops short of the crossing the accounting reports for it
    (recorded by :func:`score_vs`). The report checks every figure it draws (``report.json`` ``figure_problems``)."""
    from matplotlib.container import ErrorbarContainer

    out = []
    small = LEGEND_FONT - 1.5
    for ax in fig.get_axes():
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        ex, ey = 1e-6 * (x1 - x0), 1e-6 * (y1 - y0)
        for c in ax.containers:
            if not isinstance(c, ErrorbarContainer):
                continue
            label = c.get_label() or "an interval"
            for col in c.lines[2]:
                for seg in col.get_segments():
                    for x, y in seg:
                        if not (x0 - ex <= x <= x1 + ex and y0 - ey <= y <= y1 + ey):
                            out.append(f"{ax.get_title() or 'axes'}: {label} ends at ({x:.4g}, {y:.4g}), outside the "
                                       f"axes [{x0:.4g}, {x1:.4g}] x [{y0:.4g}, {y1:.4g}] (clipped)")
        leg = ax.get_legend()
        if leg is not None and any(t.get_fontsize() < small for t in leg.get_texts()):
            out.append(f"{ax.get_title() or 'axes'}: legend text under {small:g} pt")
        if leg is not None:
            hidden = legend_covers(ax, leg)
            if hidden:
                out.append(f"{ax.get_title() or 'axes'}: the legend covers {hidden} data point(s)")
        curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2 and ln.get_linestyle() not in ("None", "")]
        if len(curves) > MAX_LINES + 1:
            out.append(f"{ax.get_title() or 'axes'}: {len(curves)} curves in one panel (at most {MAX_LINES + 1})")
        for reach in getattr(ax, "_rlbatch_reach", []):
            if reach["curve_end"] < reach["crossing"] * (1 - 1e-9):
                out.append(f"{ax.get_title() or 'axes'}: the curve of {reach['run']} ends at {reach['curve_end']:.4g}, "
                           f"short of its crossing at {reach['crossing']:.4g}")
    return out


def legend_covers(ax, leg) -> int:
    """How many data points of ``ax`` (line vertices, scatter and marker positions) lie under its legend ``leg``."""
    fig = ax.figure
    fig.canvas.draw()
    box = leg.get_window_extent()
    n = 0
    for ln in ax.get_lines():
        xy = np.column_stack([np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)])
        if len(xy) <= 2 and ln.get_linestyle() not in ("None", ""):
            continue  # a reference line (target, B^-1/2 guide) spans the axes: not a data point
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy):
            pts = ax.transData.transform(xy)
            n += int(((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0)
                      & (pts[:, 1] <= box.y1)).sum())
    for col in ax.collections:
        offs = np.asarray(col.get_offsets(), float)
        if offs.ndim == 2 and len(offs) and getattr(col, "get_sizes", None) is not None and len(col.get_sizes()):
            pts = col.get_offset_transform().transform(offs)
            n += int(((pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0)
                      & (pts[:, 1] <= box.y1)).sum())
    return n


def legend_below(ax, ncol: int = 2) -> None:
    """The legend under the axes (below the x label), where it covers no data."""
    ax.legend(fontsize=LEGEND_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol, frameon=False)


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _label(run: Run) -> str:
    b = run.meta.batch_size
    n = getattr(run.meta, "n_seeds", None)
    lr = f", lr {run.meta.lr:.2g}" if run.meta.lr else ""
    seeds = f", {n} seeds" if n and n > 1 else ""
    return f"{run.run_id} (B={b}{lr}{seeds})" if b else run.run_id


def short_label(run: Run) -> str:
    """``B=128, sqrt rule`` / ``B=128, fixed lr``: a configuration's name for a bar chart (the run id when there
    is no batch size)."""
    b = run.meta.batch_size
    if not b:
        return run.run_id
    rule = {"none": "fixed lr", None: ""}.get(run.meta.lr_rule, f"{run.meta.lr_rule} rule")
    return f"B={b}" + (f", {rule}" if rule else "")


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _curve(run: Run, metric: str, x: str) -> tuple[np.ndarray, np.ndarray] | None:
    d = curve(run, metric, x)
    return (d[x].to_numpy(dtype=float), d[metric].to_numpy(dtype=float)) if len(d) else None


def _band(run: Run, metric: str, x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(x, min, max) across seeds of a seed-averaged run (:func:`rlbatch.analysis.curves.aggregate_seeds`)."""
    df = metric_frame(run, metric)
    lo, hi = f"{metric}_min", f"{metric}_max"
    if not len(df) or x not in df.columns or lo not in df.columns or hi not in df.columns:
        return None
    d = df[[x, lo, hi]].dropna().sort_values(x)
    return (d[x].to_numpy(float), d[lo].to_numpy(float), d[hi].to_numpy(float)) if len(d) else None


#: Font sizes (points at 100 dpi) of legends and tick labels: readable at 100% zoom.
LEGEND_FONT = 9.5
TICK_FONT = 9.5


def open_arrow(ax, x: float, y: float, axis: str = "y") -> None:
    """An arrow at the edge of the axes where an interval is open (unbounded): pointing up (``axis="y"``) at
    ``(x, y)`` = the top, or right (``"x"``) at ``(x, y)`` = the right edge."""
    if axis == "y":
        ax.annotate("", xy=(x, y), xytext=(0, -18), textcoords="offset points", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-|>", color="0.2", lw=1.2))
    else:
        ax.annotate("", xy=(x, y), xytext=(-18, 0), textcoords="offset points", annotation_clip=False,
                    arrowprops=dict(arrowstyle="-|>", color="0.2", lw=1.2))


#: Most curves in one panel of a score figure (issue 35: 9-10 tangled lines): more configurations go into small
#: multiples, each with the reference drawn again.
MAX_LINES = 4


def score_vs(runs: list[Run], x: str, metric: str = "eval/score", target: float | None = None,
             xscale: float = 1.0, xlabel: str = "", title: str = "", ylabel: str = "",
             crossings: dict[str, tuple[float, Any]] | None = None, reference: str | None = None,
             max_lines: int = MAX_LINES) -> Any:
    """``metric`` against ``x`` (``samples/retained`` or the clock column of
    :func:`rlbatch.analysis.curves.aggregate_seeds`) for every configuration, the range across seeds shaded,
    target as a dashed line; ``ylabel`` names the metric in words. ``crossings``: per configuration (run id) the
    accounting's crossing ``(value, [lo, hi] | None)`` on ``x`` (samples-to-target or time-to-target, in ``x``'s
    unit before ``xscale``), drawn on the target line with its 95% interval (an arrow where the interval is open);
    the axes always take in every curve and every interval. Fixed-LR runs (the control): dashed with square
    markers. ``reference`` (a run id): drawn in black and thicker, in every panel. More than ``max_lines`` curves
    (the reference counted) go into small multiples on shared axes, at most ``max_lines`` per panel, each
    configuration keeping its colour; every legend sits below its panel, covering no data."""
    ordered = [r for r in sorted(runs, key=run_order) if _curve(r, metric, x) is not None]
    ref = next((r for r in ordered if r.run_id == reference), None)
    others = [r for r in ordered if r is not ref]
    per = max(1, max_lines - (1 if ref is not None else 0))
    n = max(1, math.ceil(len(others) / per))
    size = math.ceil(len(others) / n) if others else 0  # balanced panels: 9 curves in 3 x 3, not 4 + 4 + 1
    panels = [others[k:k + size] for k in range(0, len(others), size)] if others else [[]]
    n = len(panels)
    cols = n if n <= 3 else 2
    rows = math.ceil(n / cols)
    fig = new_figure(7.0 if n == 1 else 5.2 * cols, 4.8 if n == 1 else 4.6 * rows)
    axes = fig.subplots(rows, cols, sharex=False, sharey=True, squeeze=False).ravel()
    colors = {r.run_id: f"C{k % 10}" for k, r in enumerate(others)}
    right = 0.0
    for v in ([] if ref is None else [ref]) + others:
        right = max(right, float(np.nanmax(_curve(v, metric, x)[0])) / xscale)
    for (v, ci) in (crossings or {}).values():
        if v is not None:
            hi = ci[1] if ci and ci[1] is not None and math.isfinite(ci[1]) else v
            right = max(right, v / xscale, hi / xscale)
    for ax, members in zip(axes, panels):
        shown = ([ref] if ref is not None else []) + members
        _score_panel(ax, shown, x, metric, target, xscale, crossings, reference, colors,
                     panel_right(shown, crossings, xscale, right))
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel or metric)
    for ax in axes[n:]:
        ax.set_visible(False)
    if not ordered:
        _empty(axes[0], f"no run has both {metric!r} and {x!r}")
    head = f"{ylabel or metric} vs {xlabel or x}"
    text = title or head[:1].upper() + head[1:]
    if n == 1:
        axes[0].set_title(text)
    else:
        fig.suptitle(text + (" (the reference in black in every panel)" if ref is not None else ""))
    return fig


def panel_right(runs: list[Run], crossings: dict[str, tuple[float, Any]] | None, xscale: float,
                right: float) -> float:
    """The right end of one panel's x-axis: where its curves overlay and cross the target, not where the longest
    run of the whole study ends (newcomer finding 24: a 17,500-sample axis left the aligned family in its first
    quarter). 1.5x the furthest crossing or finite interval end of the panel's runs, at most ``right`` (every
    curve's end); ``right`` when no run of the panel has a crossing. Intervals are never cut (the furthest
    interval end is inside); curves past it run off the panel's edge."""
    ends = []
    for r in runs:
        cr = (crossings or {}).get(r.run_id)
        if cr is None or cr[0] is None:
            continue
        ci = cr[1]
        hi = ci[1] if ci and ci[1] is not None and math.isfinite(ci[1]) else cr[0]
        ends.append(max(cr[0], hi) / xscale)
    return min(right, 1.5 * max(ends)) if ends and right > 0 else right


def _score_panel(ax, runs: list[Run], x: str, metric: str, target: float | None, xscale: float,
                 crossings: dict[str, tuple[float, Any]] | None, reference: str | None, colors: dict[str, str],
                 right: float) -> None:
    """One panel of :func:`score_vs`: ``runs`` (the reference first when given) with their seed bands, the target,
    the crossings with their intervals, the legend below the axes."""
    marks = []
    reach: list[dict[str, Any]] = []
    ax._rlbatch_reach = reach  # what figure_problems checks: each curve reaches its crossing
    for run in runs:
        c = _curve(run, metric, x)
        control = run.meta.lr_rule == "none"
        is_ref = run.run_id == reference
        color = "black" if is_ref else colors.get(run.run_id, "C0")
        (line,) = ax.plot(c[0] / xscale, c[1], "--" if control else "-", marker="s" if control else "o",
                          markersize=3 if control else 2.5, linewidth=2.2 if is_ref else 1.4, color=color,
                          label=("reference: " if is_ref else "") + _label(run), zorder=4 if is_ref else 3)
        band = _band(run, metric, x)
        if band is not None:  # seed-averaged run: shade the range across seeds
            ax.fill_between(band[0] / xscale, band[1], band[2], color=color, alpha=0.1 if is_ref else 0.14,
                            linewidth=0)
        cr = (crossings or {}).get(run.run_id)
        if cr is not None and target is not None and cr[0] is not None:
            marks.append((cr, color, control))
            reach.append({"run": run.run_id, "curve_end": float(np.nanmax(c[0])) / xscale,
                          "crossing": cr[0] / xscale})
    if target is not None:
        ax.axhline(target, color="0.3", linestyle=":", linewidth=1, label=f"target {target:g}")
    open_ends = []
    for (v, ci), color, control in marks:
        v = v / xscale
        lo = ci[0] / xscale if ci and ci[0] is not None else v
        hi = ci[1] / xscale if ci and ci[1] is not None and math.isfinite(ci[1]) else None
        ax.errorbar([v], [target], xerr=[[max(0.0, v - lo)], [max(0.0, (hi if hi is not None else v) - v)]],
                    fmt="D" if control else "o", mfc="white", mec=color, color=color, ms=7, capsize=4,
                    elinewidth=1.6, zorder=5)
        if ci and hi is None:
            open_ends.append((v, color))
    ax.set_xlim(0 if right > 0 else None, right * 1.04 if right > 0 else None)
    for v, color in open_ends:
        ax.annotate("", xy=(right * 1.04, target), xytext=(v, target), annotation_clip=False,
                    arrowprops=dict(arrowstyle="-|>", color=color, lw=1.4))
    if marks:
        ax.plot([], [], "o", mfc="white", mec="0.2", color="0.2", ms=7, label="crossing with its 95% interval")
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=TICK_FONT)
    if runs:
        ax.legend(fontsize=LEGEND_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)


def time_per_step(rows: list[dict[str, Any]], names: dict[str, str] | None = None, unit: str = "seconds") -> Any:
    """Where each configuration's optimizer step goes: generation, scoring, update and other as shares of the step
    (each bar is 100%, so a part is visible at every B however long the step), the step's mean seconds over the
    whole run written beside it; ``rows`` from :func:`rlbatch.analysis.throughput.configuration_timings` (the four
    add up to the step on the accounting's clock); ``names`` maps a configuration to its label."""
    rows = [r for r in rows if math.isfinite(r.get("step_s", float("nan"))) and r["step_s"] > 0]
    fig = new_figure(7.5, max(2.6, 0.5 * len(rows) + 1.9))
    ax = fig.add_subplot()
    if not rows:
        _empty(ax, "no per-step timings in these logs")
        ax.set_title("time per step")
        return fig
    parts = {"generation": "gen_s", "scoring": "reward_s", "update": "train_s", "other": "other_s"}
    colors = {"generation": "C0", "scoring": "C2", "update": "C1", "other": "0.7"}
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    for k, col in parts.items():
        vals = np.array([100.0 * max(0.0, r[col]) / r["step_s"] if math.isfinite(r[col]) else 0.0 for r in rows])
        ax.barh(y, vals, left=left, color=colors[k], label=k)
        for i, v in enumerate(vals):
            if v >= 7:
                ax.text(left[i] + v / 2, i, f"{v:.0f}%", ha="center", va="center", fontsize=TICK_FONT - 1,
                        color="white" if k != "other" else "black")
        left += vals
    for i, r in enumerate(rows):
        ax.text(max(100.0, left[i]) + 1.5, i, f"{r['step_s']:.3g} s", va="center", fontsize=TICK_FONT - 0.5)
    ax.set_xlim(0, 122)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_yticks(y, [(names or {}).get(r["config"], r["config"]) for r in rows], fontsize=TICK_FONT)
    ax.set_xlabel(f"share of the step (%); right: mean {unit} per optimizer step over the whole run")
    ax.tick_params(labelsize=TICK_FONT)
    ax.legend(fontsize=LEGEND_FONT, loc="upper center", bbox_to_anchor=(0.5, -0.16 - 0.02 * (len(rows) < 4)), ncol=4,
              frameon=False)
    ax.set_title("Time per step: generation, scoring, update, other")
    return fig
