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

from rlbatch.analysis.curves import metric_frame
from rlbatch.runstore import Run


def new_figure(width: float = 7.0, height: float = 4.2):
    """A fresh Agg-backed figure (no global pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _label(run: Run) -> str:
    b = run.meta.batch_size
    return f"{run.run_id} (B={b})" if b else run.run_id


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10, color="0.4", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _curve(run: Run, metric: str, x: str) -> tuple[np.ndarray, np.ndarray] | None:
    df = metric_frame(run, metric)
    if not len(df) or metric not in df.columns or x not in df.columns:
        return None
    d = df[[x, metric]].dropna().sort_values(x)
    if d.empty:
        return None
    return d[x].to_numpy(dtype=float), d[metric].to_numpy(dtype=float)


def score_vs(runs: list[Run], x: str, metric: str = "eval/score", target: float | None = None,
             xscale: float = 1.0, xlabel: str = "", title: str = "") -> Any:
    """``metric`` against ``x`` (``samples/retained`` or ``time/wall_s``) for every run, target as a dashed line."""
    fig = new_figure()
    ax = fig.add_subplot()
    drawn = 0
    for run in sorted(runs, key=lambda r: (r.meta.batch_size or 0, r.run_id)):
        c = _curve(run, metric, x)
        if c is None:
            continue
        ax.plot(c[0] / xscale, c[1], marker="o", markersize=2.5, linewidth=1.4, label=_label(run))
        drawn += 1
    if not drawn:
        _empty(ax, f"no run has both {metric!r} and {x!r}")
    else:
        if target is not None:
            ax.axhline(target, color="0.3", linestyle="--", linewidth=1, label=f"target {target:g}")
        ax.set_xlabel(xlabel or x)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    ax.set_title(title or f"{metric} vs {xlabel or x}")
    return fig


def grad_norm_points(runs: list[Run]) -> list[dict[str, Any]]:
    """Per run with a batch size: mean actor (and critic) gradient norm over its steps."""
    pts = []
    for r in runs:
        b = r.meta.batch_size
        if not b:
            continue
        row: dict[str, Any] = {"run": r.run_id, "batch_size": b}
        for key, col in (("actor", "grad_norm/actor"), ("critic", "grad_norm/critic")):
            if col in r.metrics.columns:
                v = r.metrics[col].dropna()
                v = v[v > 0]
                row[key] = float(v.mean()) if len(v) else None
            else:
                row[key] = None
        if row["actor"] is not None or row["critic"] is not None:
            pts.append(row)
    return pts


def loglog_slope(bs: list[float], gs: list[float]) -> float | None:
    """Least-squares slope of log(g) on log(B); None with fewer than two distinct B. Li et al. 2026 expect about
    -1/2 inside the batch-invariant range (the gradient noise averages out as 1/sqrt(B))."""
    b = np.asarray(bs, dtype=float)
    g = np.asarray(gs, dtype=float)
    ok = (b > 0) & (g > 0) & np.isfinite(b) & np.isfinite(g)
    b, g = b[ok], g[ok]
    if len(np.unique(b)) < 2:
        return None
    return float(np.polyfit(np.log(b), np.log(g), 1)[0])


def grad_norm_vs_batch(runs: list[Run]) -> tuple[Any, dict[str, Any]]:
    """Mean actor gradient norm vs B on log-log axes with the fitted slope; returns (figure, fit summary)."""
    fig = new_figure()
    ax = fig.add_subplot()
    pts = grad_norm_points(runs)
    fit: dict[str, Any] = {"points": pts, "slope_actor": None, "slope_critic": None}
    if not pts:
        _empty(ax, "no run has both a batch size and gradient norms")
        ax.set_title("gradient norm vs batch size")
        return fig, fit
    for key, marker, color in (("actor", "o", "C0"), ("critic", "s", "C1")):
        sel = [p for p in pts if p[key] is not None]
        if not sel:
            continue
        bs = [p["batch_size"] for p in sel]
        gs = [p[key] for p in sel]
        ax.scatter(bs, gs, marker=marker, color=color, label=f"{key} (mean over steps)", zorder=3)
        for p in sel:
            ax.annotate(p["run"], (p["batch_size"], p[key]), fontsize=7, xytext=(4, 3), textcoords="offset points")
        slope = loglog_slope(bs, gs)
        fit[f"slope_{key}"] = slope
        if slope is not None:
            lb = np.log(np.asarray(bs, dtype=float))
            lg = np.log(np.asarray(gs, dtype=float))
            xs = np.linspace(lb.min(), lb.max(), 20)
            ax.plot(np.exp(xs), np.exp(lg.mean() + slope * (xs - lb.mean())), color=color, linewidth=1,
                    label=f"{key} fit: slope {slope:.2f}")
    if fit["slope_actor"] is not None:
        sel = [p for p in pts if p["actor"] is not None]
        lb = np.log([p["batch_size"] for p in sel])
        lg = np.log([p["actor"] for p in sel])
        xs = np.linspace(lb.min(), lb.max(), 20)
        ax.plot(np.exp(xs), np.exp(lg.mean() - 0.5 * (xs - lb.mean())), color="0.5", linestyle=":",
                label="slope -1/2 (noise-dominated)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size B (responses per update)")
    ax.set_ylabel("gradient norm")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("gradient norm vs batch size (log-log)")
    return fig, fit


def time_per_step(runs: list[Run]) -> Any:
    """Mean seconds per step per run, stacked: generation, reward, update, other (= step - the three)."""
    fig = new_figure(7.0, max(2.4, 0.5 * len(runs) + 1.6))
    ax = fig.add_subplot()
    names, parts = [], {"generation": [], "reward": [], "update": [], "other": []}
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
        names.append(_label(r))
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
    ax.set_yticks(y, names, fontsize=8)
    ax.set_xlabel("mean seconds per step")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("generation / update time per step")
    return fig
