"""The report's built-in matplotlib figures (Agg backend, no pyplot state): one function per figure, each taking
runs and returning a :class:`matplotlib.figure.Figure`.

- score vs cumulative retained samples (the paper's overlay: inside the batch-invariant range curves coincide);
- score vs wall-clock hours (the "accelerate" view: what the user waits for);
- actor gradient norm vs B, log-log, with the least-squares slope (expected about -1/2 below the critical batch);
- mean time per step split into generation, reward, update and other.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from rlbatch.analysis.curves import curve, metric_frame
from rlbatch.runstore import Run


def new_figure(width: float = 7.0, height: float = 4.2):
    """A fresh Agg-backed figure (no global pyplot state)."""
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


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _label(run: Run) -> str:
    b = run.meta.batch_size
    n = getattr(run.meta, "n_seeds", None)
    lr = f", lr {run.meta.lr:.2g}" if run.meta.lr else ""
    seeds = f", mean of {n} seeds" if n and n > 1 else ""
    return f"{run.run_id} (B={b}{lr}{seeds})" if b else run.run_id


def _short_label(run: Run) -> str:
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


def score_vs(runs: list[Run], x: str, metric: str = "eval/score", target: float | None = None,
             xscale: float = 1.0, xlabel: str = "", title: str = "", ylabel: str = "") -> Any:
    """``metric`` against ``x`` (``samples/retained`` or ``time/wall_s``) for every run, target as a dashed line;
    ``ylabel`` names the metric in words (default: the metric's name)."""
    fig = new_figure()
    ax = fig.add_subplot()
    drawn = 0
    for run in sorted(runs, key=lambda r: (r.meta.batch_size or 0, r.run_id)):
        c = _curve(run, metric, x)
        if c is None:
            continue
        ls = "--" if run.meta.lr_rule == "none" else "-"
        (line,) = ax.plot(c[0] / xscale, c[1], ls, marker="o", markersize=2.5, linewidth=1.4, label=_label(run))
        band = _band(run, metric, x)
        if band is not None:  # seed-averaged run: shade the range across seeds
            ax.fill_between(band[0] / xscale, band[1], band[2], color=line.get_color(), alpha=0.12, linewidth=0)
        drawn += 1
    if not drawn:
        _empty(ax, f"no run has both {metric!r} and {x!r}")
    else:
        if target is not None:
            ax.axhline(target, color="0.3", linestyle="--", linewidth=1, label=f"target {target:g}")
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(ylabel or metric)
        ax.grid(alpha=0.3)
        if drawn > 4:  # many curves: the legend below the axes, where it hides none of them
            fig.set_size_inches(7.0, 4.2 + 0.17 * ((drawn + 2) // 2))
            ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        else:
            ax.legend(fontsize=8, loc="best")
    head = f"{ylabel or metric} vs {xlabel or x}"
    ax.set_title(title or head[:1].upper() + head[1:])
    return fig


def time_per_step(runs: list[Run]) -> Any:
    """Mean seconds per step per run, stacked: generation, reward, update, other (= step - the three)."""
    fig = new_figure(7.0, max(2.4, 0.5 * len(runs) + 1.6))
    ax = fig.add_subplot()
    names, longs, parts = [], [], {"generation": [], "reward": [], "update": [], "other": []}
    for r in sorted(runs, key=lambda r: (r.meta.batch_size or 0, r.run_id)):
        m = r.metrics

        def mean(col: str) -> float:
            if col not in m.columns:
                return float("nan")
            v = m[col].dropna()
            return float(v.mean()) if len(v) else float("nan")

        gen, rew, upd, step = mean("time/gen_s"), mean("time/reward_s"), mean("time/train_s"), mean("time/step_s")
        if all(math.isnan(v) for v in (gen, rew, upd, step)):
            continue
        known = sum(v for v in (gen, rew, upd) if not math.isnan(v))
        other = step - known if not math.isnan(step) else 0.0
        names.append(_short_label(r))
        longs.append(_label(r))
        for k, v in (("generation", gen), ("reward", rew), ("update", upd), ("other", max(other, 0.0))):
            parts[k].append(0.0 if math.isnan(v) else v)
    if not names:
        _empty(ax, "no per-step timings in these logs")
        ax.set_title("time per step")
        return fig
    y = np.arange(len(names))
    left = np.zeros(len(names))
    colors = {"generation": "C0", "reward": "C2", "update": "C1", "other": "0.75"}
    for k, vals in parts.items():
        vals = np.asarray(vals)
        if not vals.any():
            continue
        ax.barh(y, vals, left=left, color=colors[k], label=k)
        left += vals
    if len(set(names)) < len(names):  # two runs of one configuration (e.g. seeds not averaged): keep them apart
        names = longs
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel("mean seconds per optimizer step")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Time per step: generation, scoring (reward), update")
    return fig
