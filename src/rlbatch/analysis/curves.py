"""Learning curves: samples-to-target and the per-run summary (pure functions over a run's DataFrames; no I/O).

Samples-to-target (Li et al. 2026, "align"): the cumulative retained responses at which a run's score first reaches
the target, by linear interpolation between the two evaluation points around the crossing. A run that never reaches
the target has no samples-to-target: ``None``, never infinity or zero.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rlbatch.runstore import Run


def ema_smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential moving average with TensorBoard's smoothing convention: ``s_0 = y_0``,
    ``s_t = weight * s_{t-1} + (1 - weight) * y_t``. ``weight`` in [0, 1) (0 = no smoothing).
    Raises ``ValueError`` for a weight outside [0, 1)."""
    if not (0.0 <= weight < 1.0):
        raise ValueError(f"ema weight must be in [0, 1), got {weight}")
    out = np.empty(len(values), dtype=float)
    s = None
    for i, y in enumerate(values):
        s = y if s is None else weight * s + (1.0 - weight) * y
        out[i] = s
    return out


def samples_to_target(df: pd.DataFrame, target: float, metric: str = "eval/score", x: str = "samples/retained",
                      ema: float | None = None, sustained: bool = False) -> float | None:
    """Retained samples at which ``metric`` first reaches ``target`` (higher is better).

    ``df``: one row per evaluation point with columns ``x`` (cumulative retained responses, or any monotone axis
    such as ``time/wall_s``) and ``metric``; rows with a missing value are ignored, rows are sorted by ``x``.
    ``ema``: optional smoothing weight in [0, 1) applied to the metric first (:func:`ema_smooth`). ``sustained``: the
    crossing must be the last one, i.e. every later point stays at or above the target.
    Returns the interpolated x of the crossing: with points (x0, y0) below and (x1, y1) at or above the target,
    ``x0 + (target - y0) / (y1 - y0) * (x1 - x0)``; the first point's x when the curve starts at or above the
    target; ``None`` when it never reaches it (or ``df`` lacks the columns).
    """
    if df is None or len(df) == 0 or metric not in df.columns or x not in df.columns:
        return None
    d = df[[x, metric]].apply(pd.to_numeric, errors="coerce").dropna().sort_values(x, kind="stable")
    if d.empty:
        return None
    xs = d[x].to_numpy(dtype=float)
    ys = d[metric].to_numpy(dtype=float)
    if ema:
        ys = ema_smooth(ys, float(ema))
    above = ys >= target
    if not above.any():
        return None
    if sustained:
        below = np.flatnonzero(~above)
        i = 0 if below.size == 0 else int(below[-1]) + 1
        if i >= len(ys):
            return None
    else:
        i = int(np.argmax(above))
    if i == 0:
        return float(xs[0])
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(x0 + (target - y0) / (y1 - y0) * (x1 - x0))


def metric_frame(run: Run, metric: str) -> pd.DataFrame:
    """The frame holding ``metric``: ``evals`` for validation scores, else ``metrics`` (e.g. ``reward/mean``)."""
    if len(run.evals) and metric in run.evals.columns:
        return run.evals
    return run.metrics


def curve(run: Run, metric: str, x: str = "samples/retained") -> pd.DataFrame:
    """The learning curve of ``metric`` against ``x``: columns ``[x, metric]``, numeric, NaN rows dropped, sorted by
    ``x`` (stable). Taken from ``evals`` when it holds both columns, else from ``metrics``; empty when neither does.
    The one curve extractor shared by the figures, the noise analysis and the plan."""
    for df in (run.evals, run.metrics):
        if isinstance(df, pd.DataFrame) and metric in df.columns and x in df.columns:
            d = df[[x, metric]].apply(pd.to_numeric, errors="coerce").dropna().sort_values(x, kind="stable")
            if len(d):
                return d.reset_index(drop=True)
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


def throughput(run: Run) -> float | None:
    """Retained samples per wall-clock second over the whole run (last ``samples/retained`` / last
    ``time/wall_s``); None when either is missing or the wall-clock is not positive."""
    samples, wall = _last(run.metrics, "samples/retained"), _last(run.metrics, "time/wall_s")
    return samples / wall if samples is not None and wall and wall > 0 else None


def summarize_run(run: Run) -> dict[str, Any]:
    """Per-run summary (the ``runs`` objects of ``rlbatch analyze --format json``); None where the log lacks it.

    Keys: ``run, source_format, algorithm, model, prompts_per_step, group_size, batch_size, lr, steps`` (optimizer
    steps the log covers), ``log_last_step`` (the logger's own last step number), ``samples_retained``
    (cumulative retained responses at the last step), ``samples_source`` (``log`` or ``steps x B``),
    ``wall_clock_s`` (training wall-clock, evaluation excluded where the log allows), ``gen_time_share`` (generation
    seconds / wall-clock), ``throughput_samples_per_s`` (retained samples / wall-clock second),
    ``time_per_step_s``, ``gen_time_per_step_s``, ``train_time_per_step_s``, ``grad_norm_actor_mean``,
    ``grad_norm_critic_mean``, ``reward_mean_last``, ``eval_points``, ``last_eval_step``, ``last_eval_score``,
    ``best_eval_score``, ``notes``.
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
        "throughput_samples_per_s": throughput(run),
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
        "notes": list(run.notes),
    }


def accounting_input(runs: list[Run], target: float, metric: str = "eval/score", ema: float | None = None,
                     sustained: bool = False) -> pd.DataFrame:
    """Rows for :func:`rlbatch.analysis.accounting.account`: per run, ``batch_size``, ``samples_to_target`` (None if
    not reached) and ``throughput_samples_per_s`` (retained samples per wall-clock second over the whole run, so
    time-to-target = samples-to-target / throughput, Li et al. 2026 end-to-end accounting)."""
    rows = []
    for r in runs:
        stt = samples_to_target(metric_frame(r, metric), target, metric, ema=ema, sustained=sustained)
        rows.append({"run": r.run_id, "batch_size": r.meta.batch_size, "samples_to_target": stt,
                     "throughput_samples_per_s": throughput(r)})
    return pd.DataFrame(rows)



def seedless_id(run_id: str) -> str:
    """A run id without its seed suffix: ``B64-G8-sqrt-s2`` / ``run_seed1`` -> ``B64-G8-sqrt`` / ``run``."""
    import re

    return re.sub(r"[-_](s|seed)\d+$", "", run_id)


def group_seeds(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs of one configuration (same seedless id, batch size, LR and LR rule) grouped together, ordered by batch
    size then name; the key is the seedless id (made unique with ``@lr...`` if two configurations share it)."""
    by: dict[tuple, list[Run]] = {}
    for r in sorted(runs, key=lambda r: (r.meta.batch_size or 0, r.run_id)):
        key = (seedless_id(r.run_id), r.meta.batch_size, r.meta.lr, r.meta.lr_rule)
        by.setdefault(key, []).append(r)
    out: dict[str, list[Run]] = {}
    for (name, _b, lr, _rule), rs in by.items():
        out[name if name not in out else f"{name}@lr{lr:.3g}"] = rs
    return out


def aggregate_seeds(runs: list[Run], name: str, metric: str = "eval/score", x: str = "samples/retained") -> Run:
    """One run standing for several seeds of one configuration, named ``name``.

    ``metrics``: numeric per-step columns averaged over seeds, on the steps every seed has. ``evals``: ``metric``
    averaged over seeds on the evaluation grid (``x``) of the seed that stopped first, each seed linearly
    interpolated onto it; ``<metric>_min`` / ``<metric>_max`` keep the range across seeds (the bands of the
    overlay); ``time/wall_s`` is interpolated from the averaged metrics. Samples-to-target of the result is that of
    the seed-averaged curve. Metadata: the first run's, with ``seed`` None and ``seeds`` / ``n_seeds`` added. A
    single run is only renamed."""
    from rlbatch.runstore import make_meta

    first = runs[0]
    meta = make_meta(None, **{**first.meta.model_dump(mode="json"), "run_id": name, "seed": None,
                              "seeds": [r.meta.seed for r in runs], "n_seeds": len(runs)})
    if len(runs) == 1:
        return Run(meta=meta, metrics=first.metrics.copy(), evals=first.evals.copy(), path=first.path)
    metrics = pd.concat([r.metrics.select_dtypes("number") for r in runs]).groupby("step", as_index=False).mean()
    counts = pd.concat([r.metrics[["step"]] for r in runs]).groupby("step").size()
    metrics = metrics[metrics["step"].map(counts) == len(runs)].reset_index(drop=True)
    frames = [metric_frame(r, metric) for r in runs]
    frames = [f[[c for c in ("step", x, metric) if c in f.columns]].dropna(subset=[x, metric]).sort_values(x)
              for f in frames if x in f.columns and metric in f.columns]
    evals = pd.DataFrame()
    if len(frames) == len(runs):
        base = min(frames, key=lambda f: float(f[x].max()) if len(f) else -1.0)
        grid = base[x].to_numpy(float)
        ys = np.array([np.interp(grid, f[x].to_numpy(float), f[metric].to_numpy(float)) for f in frames])
        evals = pd.DataFrame({"step": base["step"].to_numpy() if "step" in base else np.arange(len(grid)),
                              x: grid, metric: ys.mean(0), f"{metric}_min": ys.min(0), f"{metric}_max": ys.max(0)})
        if len(metrics) and "time/wall_s" in metrics and x in metrics:
            evals["time/wall_s"] = np.interp(grid, np.r_[0.0, metrics[x].to_numpy(float)],
                                             np.r_[0.0, metrics["time/wall_s"].to_numpy(float)])
    return Run(meta=meta, metrics=metrics, evals=evals, path=None)


def seed_rows(groups: dict[str, list[Run]], target: float | None, metric: str = "eval/score") -> list[dict[str, Any]]:
    """Per configuration: seeds, how many reached ``target``, samples-to-target of each seed and their range, mean
    first and last score, mean retained / generated samples (the report's seed table)."""
    rows = []
    for name, rs in groups.items():
        s2t = [samples_to_target(metric_frame(r, metric), target, metric) if target is not None else None for r in rs]
        reached = [s for s in s2t if s is not None]
        scores = [metric_frame(r, metric)[metric].dropna() for r in rs if metric in metric_frame(r, metric).columns]
        scores = [s for s in scores if len(s)]
        rows.append({"config": name, "batch_size": rs[0].meta.batch_size, "lr": rs[0].meta.lr,
                     "lr_rule": rs[0].meta.lr_rule, "seeds": len(rs), "reached": f"{len(reached)}/{len(rs)}",
                     "samples_to_target_per_seed": s2t,
                     "samples_to_target_min": min(reached) if reached else None,
                     "samples_to_target_max": max(reached) if reached else None,
                     "first_score_mean": float(np.mean([s.iloc[0] for s in scores])) if scores else None,
                     "last_score_mean": float(np.mean([s.iloc[-1] for s in scores])) if scores else None,
                     "samples_retained": _mean_last(rs, "samples/retained"),
                     "samples_generated": _mean_last(rs, "samples/generated")})
    return rows


def _mean_last(runs: list[Run], col: str) -> float | None:
    v = [x for x in (_last(r.metrics, col) for r in runs) if x is not None]
    return float(np.mean(v)) if v else None
