"""Learning curves: samples-to-target and the per-run summary (pure functions over a run's DataFrames; no I/O).

Samples-to-target (Li et al. 2026, "align"): the cumulative retained responses at which a run's score reaches the
target, from a monotone fit of its evaluations refined by a local quadratic in samples (a straight line in log
samples with fewer than three evaluations near the crossing; :mod:`rlbatch.analysis.crossing`: independent of the evaluation spacing and noise). A run that never reaches the
target has no samples-to-target: ``None``, never infinity or zero.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.crossing import Crossing, find_crossing
from rlbatch.analysis.samples import X, policy_offset
from rlbatch.analysis.throughput import run_clock, run_throughput, time_at
from rlbatch.errors import UserError
from rlbatch.runstore import Run, make_meta, run_order


def check_ema(weight: float) -> None:
    """Refuse an EMA smoothing weight outside [0, 1): a :class:`rlbatch.errors.UserError` naming ``--ema``."""
    if not (0.0 <= weight < 1.0):
        raise UserError(f"--ema must be a smoothing weight in [0, 1), got {weight}", field="ema")


#: --ema is refused when the configurations' median evaluation spacings (retained samples) differ by more than this
EMA_SPACING_RATIO = 1.5


def check_ema_spacing(runs: Sequence[Run], metric: str) -> None:
    """Refuse ``--ema`` when the runs' median evaluation spacings in retained samples differ by more than
    :data:`EMA_SPACING_RATIO`: an EMA lags a concave curve by an amount set by the spacing, so samples-to-target
    carries a bias that grows with it (noise-free identical curves, weight 0.6: S / truth 1.02, 1.14, 1.64 at
    spacings 256, 1,024, 4,096 retained samples; statistics review 2, N7) and rN would measure the spacing. A
    :class:`rlbatch.errors.UserError` naming the two extremes; nothing is checked with fewer than two spaced runs."""
    gaps = {}
    for r in runs:
        d = curve(r, metric)
        if len(d) >= 3:
            g = np.diff(d[X].to_numpy(dtype=float))
            g = g[g > 0]
            if len(g):
                gaps[r.run_id] = float(np.median(g))
    if len(gaps) < 2:
        return
    lo, hi = min(gaps, key=gaps.get), max(gaps, key=gaps.get)
    if gaps[hi] > EMA_SPACING_RATIO * gaps[lo]:
        raise UserError(f"--ema with evaluations {gaps[hi] / gaps[lo]:.1f}x further apart in {hi} (every "
                        f"{gaps[hi]:,.0f} retained samples) than in {lo} (every {gaps[lo]:,.0f}): an EMA's lag grows "
                        "with the spacing, so rN would measure the spacing as well as the batch; drop --ema (the "
                        "crossing's monotone fit already smooths the noise)", field="ema")


def ema_smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential moving average with TensorBoard's smoothing convention: ``s_0 = y_0``,
    ``s_t = weight * s_{t-1} + (1 - weight) * y_t``. ``weight`` in [0, 1) (0 = no smoothing).
    Raises :class:`rlbatch.errors.UserError` (a ``ValueError``) naming ``--ema`` for a weight outside [0, 1)."""
    check_ema(weight)
    out = np.empty(len(values), dtype=float)
    s = None
    for i, y in enumerate(values):
        s = y if s is None else weight * s + (1.0 - weight) * y
        out[i] = s
    return out


def moving_average(ys: np.ndarray, window: int = 5) -> np.ndarray:
    """Centered moving average over ``window`` points along the last axis (shrinking at the ends); no lag, unlike
    an EMA, so curves evaluated at different sample spacings stay comparable. ``ys``: shape (n,) or (k, n)."""
    ys = np.asarray(ys, float)
    n, h = ys.shape[-1], window // 2
    if n == 0 or window <= 1:
        return ys.copy()
    c = np.concatenate([np.zeros(ys.shape[:-1] + (1,)), np.cumsum(ys, axis=-1)], axis=-1)
    lo = np.clip(np.arange(n) - h, 0, n)
    hi = np.clip(np.arange(n) + h + 1, 0, n)
    return (c[..., hi] - c[..., lo]) / (hi - lo)


def ema_positions(xs: np.ndarray, weight: float) -> np.ndarray:
    """Where each point of :func:`ema_smooth` (same ``weight``) belongs on the x-axis: the same recursion applied to
    the x values, i.e. the weighted mean x of the points it averages. An EMA lags by ``weight / (1 - weight)``
    evaluations, a lag in samples proportional to the evaluation spacing (rN 2.7 from identical curves at 0.6
    between spacings 256 and 4096, statistics review finding 4); placed at these positions, an EMA of a straight
    line lies on the line, so its crossing is not shifted by the spacing."""
    return ema_smooth(np.asarray(xs, float), weight)


def points_of(df: pd.DataFrame | None, metric: str = "eval/score",
              x: str = "samples/retained") -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The evaluation points of ``metric`` over ``x`` in ``df`` as arrays ``(xs, ys, weights)``, shape (n,) each:
    rows with a missing value dropped, sorted by ``x`` (stable); ``weights`` the evaluation items ``eval/n`` when
    every row logs a positive one, else None. None when ``df`` has no such points."""
    if df is None or len(df) == 0 or metric not in df.columns or x not in df.columns:
        return None
    cols = [x, metric] + (["eval/n"] if "eval/n" in df.columns else [])
    d = df[cols].apply(pd.to_numeric, errors="coerce").dropna(subset=[x, metric]).sort_values(x, kind="stable")
    if d.empty:
        return None
    w = None
    if "eval/n" in d.columns and d["eval/n"].notna().all() and (d["eval/n"] > 0).all():
        w = d["eval/n"].to_numpy(dtype=float)
    return d[x].to_numpy(dtype=float), d[metric].to_numpy(dtype=float), w


def crossing_of(df: pd.DataFrame, target: float, metric: str = "eval/score", x: str = "samples/retained",
                ema: float | None = None, sustained: bool = False) -> Crossing:
    """The :class:`rlbatch.analysis.crossing.Crossing` of ``metric`` over ``x`` in ``df`` (one row per evaluation;
    rows with a missing value ignored, sorted by ``x``; ``eval/n``, when logged, weights each point by its items).
    ``ema``: an EMA of this weight in [0, 1) first (:func:`ema_smooth`), lag-corrected (:func:`ema_positions`).
    ``sustained``: the crossing after the curve last falls below the target (:func:`rlbatch.analysis.crossing.
    find_crossing`). A frame without the columns has no crossing (``Crossing(None)``)."""
    pts = points_of(df, metric, x)
    if pts is None:
        return Crossing(None)
    xs, ys, w = pts
    if ema:
        ys = ema_smooth(ys, float(ema))
        xs = ema_positions(xs, float(ema))
    return find_crossing(xs, ys, target, w, sustained=sustained)


def samples_to_target(df: pd.DataFrame, target: float, metric: str = "eval/score", x: str = "samples/retained",
                      ema: float | None = None, sustained: bool = False) -> float | None:
    """Retained samples at which ``metric`` reaches ``target`` (higher is better): the crossing of a monotone fit,
    refined by a local quadratic in samples around it, a straight line in log samples with fewer than three points
    (:func:`crossing_of`,
    :mod:`rlbatch.analysis.crossing`), so that it does not depend on how often or how noisily the run was
    evaluated. ``df``: one row per evaluation point with columns ``x`` (cumulative retained responses, or any
    monotone axis such as ``time/wall_s``) and ``metric``. Returns None when the curve never reaches the target, or
    when it is already there at its first evaluation after 0 (only a bound is known); 0 when it is there at 0."""
    return crossing_of(df, target, metric, x, ema=ema, sustained=sustained).samples


def metric_frame(run: Run, metric: str) -> pd.DataFrame:
    """The frame holding ``metric``: ``evals`` for validation scores, else ``metrics`` (e.g. ``reward/mean``)."""
    if len(run.evals) and metric in run.evals.columns:
        return run.evals
    return run.metrics


def curve(run: Run, metric: str, x: str = X) -> pd.DataFrame:
    """The per-seed learning curve of ``metric`` against ``x``: columns ``[x, metric]`` (plus ``eval/n``, the
    number of evaluation items, when logged), numeric, NaN rows dropped, sorted by ``x`` (stable). Taken from
    ``evals`` when it holds both columns, else from ``metrics``; empty when neither does.

    The evaluation at 0 samples is kept (it is where every curve starts). On the retained-sample axis, samples of
    leading PPO critic warm-up steps are not policy samples and are subtracted (:func:`policy_offset`; points
    inside the warm-up sit at 0). The one curve extractor of the accounting, the figures and the plan."""
    for df in (run.evals, run.metrics):
        if isinstance(df, pd.DataFrame) and metric in df.columns and x in df.columns:
            cols = [x, metric] + (["eval/n"] if "eval/n" in df.columns and df is run.evals else [])
            d = df[cols].apply(pd.to_numeric, errors="coerce").dropna(subset=[x, metric])
            d = d.sort_values(x, kind="stable").reset_index(drop=True)
            if len(d):
                if x == X:
                    off = policy_offset(run.metrics)
                    if off:
                        d[x] = (d[x] - off).clip(lower=0.0)
                return d
    return pd.DataFrame(columns=[x, metric], dtype=float)


def _mean(df: pd.DataFrame, col: str) -> float | None:
    if col not in df.columns:
        return None
    v = pd.to_numeric(df[col], errors="coerce").dropna()
    return float(v.mean()) if len(v) else None


def _last(df: pd.DataFrame, col: str) -> float | None:
    if col not in df.columns:
        return None
    v = pd.to_numeric(df[col], errors="coerce").dropna()
    return float(v.iloc[-1]) if len(v) else None


def summarize_run(run: Run) -> dict[str, Any]:
    """Per-run summary (the ``runs`` objects of ``rlbatch analyze --format json``); None where the log lacks it.

    Keys: ``run, source_format, algorithm, model, prompts_per_step, group_size, batch_size, lr, steps`` (optimizer
    steps the log covers), ``log_last_step`` (the logger's own last step number), ``samples_retained``
    (cumulative retained responses at the last step), ``samples_source`` (``log`` or ``steps x B``),
    ``wall_clock_s`` (training wall-clock, evaluation excluded where the log allows), ``gen_time_share`` (generation
    seconds / wall-clock), ``throughput_samples_per_s`` (retained samples / wall-clock second),
    ``time_per_step_s``, ``gen_time_per_step_s``, ``train_time_per_step_s``, ``grad_norm_actor_mean``,
    ``grad_norm_critic_mean``, ``reward_mean_last``, ``eval_points``, ``last_eval_step``, ``last_eval_score``,
    ``best_eval_score``, ``lr_schedule`` (first / peak / last lr, warm-up steps and decay shape as read; ``lr`` is
    the peak), ``step_source`` (where the step numbers came from), ``steps_in_file`` and ``resumed_from_step`` (a
    resumed log), ``group_size_source`` (e.g. verl's default G = 1), ``notes``.
    """
    m, ev, meta = run.metrics, run.evals, run.meta
    steps = int(m["step"].max()) if len(m) and "step" in m.columns else 0
    samples = _last(m, "samples/retained")
    wall = _last(m, "time/wall_s")
    gen_total = float(pd.to_numeric(m["time/gen_s"], errors="coerce").sum()) if "time/gen_s" in m.columns else None
    share = gen_total / wall if gen_total is not None and wall and wall > 0 else None
    has_eval = len(ev) and "eval/score" in ev.columns and ev["eval/score"].notna().any()
    evs = ev.dropna(subset=["eval/score"]) if has_eval else pd.DataFrame()
    return {
        "run": meta.run_id,
        "source_format": meta.source_format,
        "algorithm": meta.algorithm,
        "model": meta.model,
        "prompts_per_step": meta.prompts_per_step,
        "group_size": meta.group_size,
        "batch_size": meta.batch_size,
        "lr": meta.lr,
        "steps": steps,
        "log_last_step": getattr(meta, "log_last_step", None),
        "samples_retained": samples,
        "samples_source": getattr(meta, "samples_source", None),
        "wall_clock_s": wall,
        "gen_time_share": share,
        "throughput_samples_per_s": run_throughput(run)["throughput_samples_per_s"],
        "time_per_step_s": _mean(m, "time/step_s"),
        "gen_time_per_step_s": _mean(m, "time/gen_s"),
        "train_time_per_step_s": _mean(m, "time/train_s"),
        "grad_norm_actor_mean": _mean(m, "grad_norm/actor"),
        "grad_norm_critic_mean": _mean(m, "grad_norm/critic"),
        "reward_mean_last": _last(m, "reward/mean"),
        "eval_points": int(len(evs)),
        "last_eval_step": int(evs["step"].iloc[-1]) if len(evs) and "step" in evs.columns else None,
        "last_eval_score": float(evs["eval/score"].iloc[-1]) if len(evs) else None,
        "best_eval_score": float(evs["eval/score"].max()) if len(evs) else None,
        **{k: getattr(meta, k, None) for k in ("lr_schedule", "step_source", "steps_in_file", "resumed_from_step",
                                                "group_size_source")},
        "notes": list(run.notes),
    }


def seedless_id(run_id: str) -> str:
    """A run id without its seed suffix: ``B64-G8-sqrt-s2`` / ``run_seed1`` -> ``B64-G8-sqrt`` / ``run``."""
    return re.sub(r"[-_](s|seed)\d+$", "", run_id)


def config_key(run: Run) -> tuple:
    """What makes two runs seeds of one configuration: the same seedless id (:func:`seedless_id`), model, task,
    algorithm, P, G, B, learning rate and LR rule."""
    m = run.meta
    return (seedless_id(run.run_id), m.model, m.task, m.algorithm, m.prompts_per_step, m.group_size, m.batch_size,
            round(float(m.lr), 12) if m.lr else None, m.lr_rule)


def group_seeds(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs of one configuration (:func:`config_key`) grouped together, ordered by batch size then name; the key
    is the seedless id (made unique with ``@lr...`` if two configurations share it). The one grouping of seeds used
    by the accounting, the plan, the report and the sweeps. A configuration with one run keeps that run's id."""
    by: dict[tuple, list[Run]] = {}
    for r in sorted(runs, key=run_order):
        by.setdefault(config_key(r), []).append(r)
    out: dict[str, list[Run]] = {}
    for key, rs in by.items():
        name, lr = (key[0] if len(rs) > 1 else rs[0].run_id), key[7]
        if name in out:
            name = f"{name}@lr{lr:.3g}" if lr else f"{name}@{len(out)}"
        while name in out:
            name += "'"
        out[name] = rs
    return out


#: The time column of :func:`aggregate_seeds`' evaluations: seconds on the accounting's clock
#: (:func:`rlbatch.analysis.throughput.run_clock`) at each evaluation point, the x-axis of the score-vs-time figure.
CLOCK_X = "time/clock_s"


def aggregate_seeds(runs: list[Run], name: str, metric: str = "eval/score", x: str = X, clock: str = "wall") -> Run:
    """One run standing for several seeds of one configuration, named ``name``: **for the figures only** (the
    accounting never crosses this averaged curve: the first crossing of a seed-averaged curve is biased low; it
    averages per-seed samples-to-target instead, :func:`rlbatch.analysis.accounting.estimate_configuration`; the
    configuration table takes whole-run means per seed, :func:`rlbatch.analysis.throughput.configuration_timings`).

    ``evals``: ``metric`` averaged over seeds on the evaluation grid (``x``, policy samples as :func:`curve`) of the
    seed that ran longest, each seed linearly interpolated onto the grid up to its own last evaluation, so the mean
    runs to the last point any seed has (after a seed's end, the mean of those still running); ``<metric>_min`` /
    ``<metric>_max`` keep the range across the seeds at each point (the bands of the overlay), ``n_seeds`` how many
    seeds a point averages, and :data:`CLOCK_X` the mean over those seeds of their time on ``clock`` at that
    point's samples (:func:`rlbatch.analysis.throughput.time_at`). ``metrics``: numeric per-step columns averaged
    over the seeds that have each step. Metadata: the first run's, with ``seed`` None and ``seeds`` / ``n_seeds``
    added. A single run keeps its own curve (with :data:`CLOCK_X` added)."""
    first = runs[0]
    meta = make_meta(None, **{**first.meta.model_dump(mode="json"), "run_id": name, "seed": None,
                              "seeds": [r.meta.seed for r in runs], "n_seeds": len(runs)})
    metrics = pd.concat([r.metrics.select_dtypes("number") for r in runs]).groupby("step", as_index=False).mean() \
        if len(runs) > 1 and all("step" in r.metrics.columns for r in runs) else first.metrics.copy()
    frames = [curve(r, metric, x) for r in runs]
    if not any(len(f) for f in frames):
        return Run(meta=meta, metrics=metrics, evals=pd.DataFrame(), path=first.path if len(runs) == 1 else None)
    base = max((f for f in frames if len(f)), key=lambda f: float(f[x].max()))
    grid = base[x].to_numpy(float)
    ys = np.full((len(runs), len(grid)), np.nan)
    ts = np.full((len(runs), len(grid)), np.nan)
    for i, (r, f) in enumerate(zip(runs, frames)):
        if not len(f):
            continue
        fx = f[x].to_numpy(float)
        on = grid <= fx.max() + 1e-9
        ys[i, on] = np.interp(grid[on], fx, f[metric].to_numpy(float))
        clk = run_clock(r, clock) if x == X else None
        if clk is not None:
            ts[i, on] = time_at(clk, grid[on])
    n = np.isfinite(ys).sum(0)
    with np.errstate(invalid="ignore"):
        evals = pd.DataFrame({"step": np.arange(len(grid)), x: grid, metric: np.nanmean(ys, 0),
                              f"{metric}_min": np.nanmin(ys, 0), f"{metric}_max": np.nanmax(ys, 0), "n_seeds": n})
    if np.isfinite(ts).any():
        tn = np.isfinite(ts).sum(0)
        evals[CLOCK_X] = np.where(tn > 0, np.nansum(ts, 0) / np.maximum(tn, 1), np.nan)
    return Run(meta=meta, metrics=metrics, evals=evals, path=first.path if len(runs) == 1 else None)


def mean_last(runs: list[Run], col: str) -> float | None:
    """Mean over ``runs`` of the last logged value of ``col`` (e.g. total retained samples); None if none has it."""
    v = [x for x in (_last(r.metrics, col) for r in runs) if x is not None]
    return float(np.mean(v)) if v else None
