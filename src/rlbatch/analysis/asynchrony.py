"""Synchronous against asynchronous rollouts, computed (issue 17; the report's section renders it:
:mod:`rlbatch.report.async_section`): at each batch size, the asynchronous configuration (generation K policy
versions ahead, optionally partial rollouts; :mod:`rlbatch.train.async_rollout`) against the synchronous one with the
same B, G, learning rate and rule.

Every number comes from :mod:`rlbatch.analysis.accounting` (:func:`estimate_configuration`, :func:`compare`,
:func:`verdict_label`): the throughput gain from overlap (relative throughput, async / sync), rN of async vs sync
(the sample penalty of stale samples), their quotient the relative time-to-target, and the decision rule applied
to the combination (async at B against the synchronous reference, the smallest synchronous B that reached the
target). Time is always wall-clock here (``time/wall_s``): overlap saves wall time, not CPU time (the generation
process's CPU seconds are in ``time/cpu_s`` too), so a CPU clock would hide exactly what this comparison measures.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.analysis.accounting import N_BOOT, Estimator, compare, default_reference, estimate_configuration
from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.decision import verdict_label
from rlbatch.runstore import Run


def async_setting(run: Run) -> tuple[int, int | None] | None:
    """``(K, T)`` of an asynchronous run (``T`` None without partial rollouts), or None for a synchronous one.
    From the trainer's config in run.json; for a foreign log, K is the largest ``rollout/staleness_max`` (else
    ``rollout/staleness_mean``, e.g. prime-rl's "Async Level") logged."""
    cfg = getattr(run.meta, "config", None) or {}
    k, t = int(cfg.get("async_rollouts") or 0), cfg.get("partial_rollout_tokens")
    if k or t:
        return k, (int(t) if t else None)
    m = run.metrics
    for col in ("rollout/staleness_max", "rollout/staleness_mean"):
        if col in getattr(m, "columns", ()):
            top = m[col].max()
            if np.isfinite(top) and top > 0:
                return int(round(top)), None
    return None


def synchronous(runs: Sequence[Run]) -> list[Run]:
    """The synchronous runs of ``runs`` (all of them when none is): what the gradient-noise fit, the throughput
    model and the plan are fitted on, since an asynchronous run at the same B is a different system, not another
    point of the same curve."""
    sync = [r for r in runs if async_setting(r) is None]
    return sync or list(runs)


def _key(run: Run) -> tuple:
    m = run.meta
    return (m.model, m.task, m.algorithm, m.batch_size, m.group_size, round(float(m.lr or 0), 12), m.lr_rule)


def _mean(runs: Sequence[Run], col: str) -> float | None:
    vals = [float(r.metrics[col].mean()) for r in runs if col in r.metrics.columns and r.metrics[col].notna().any()]
    return float(np.mean(vals)) if vals else None


def _sum_ratio(runs: Sequence[Run], num: str, den: str) -> float | None:
    a = sum(float(r.metrics[num].sum()) for r in runs if num in r.metrics.columns)
    b = sum(float(r.metrics[den].sum()) for r in runs if den in r.metrics.columns)
    return a / b if b > 0 else None


def async_rows(runs: Sequence[Run], target: float | None, metric: str = "eval/score",
               n_boot: int = N_BOOT, estimate: Estimator | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """One row per asynchronous configuration that has a synchronous partner (same model, task, algorithm, B, G,
    lr, rule): ``config``, ``sync_config``, ``batch_size``, ``async_rollouts``, ``partial_rollout_tokens``,
    ``staleness_mean``, ``partial_frac``, ``overlap_frac`` (generation seconds hidden behind scoring and the update
    / all generation seconds), ``relative_throughput(_ci)``, ``rN(_ci)``, ``relative_time(_ci)`` (async / sync, wall
    clock), ``verdict`` (faster / slower / within noise than sync at the same B), ``vs_reference_time(_ci)`` and
    ``vs_reference_verdict`` (against the synchronous reference). Returns ``(rows, reference config name)``.
    ``estimate``: where the configurations' estimates come from (a study's
    :meth:`rlbatch.analysis.study.Study.estimate`, which the report's accounting has already filled); default
    :func:`rlbatch.analysis.accounting.estimate_configuration`."""
    groups = group_seeds(list(runs))
    setting = {name: async_setting(rs[0]) for name, rs in groups.items()}
    if not any(setting.values()):
        return [], None
    est_of = estimate or estimate_configuration
    est = {name: est_of(rs, target, metric, clock="wall", n_boot=n_boot, name=name) for name, rs in groups.items()}
    sync = {_key(rs[0]): name for name, rs in groups.items() if setting[name] is None}
    ref = default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in est.items()
                            if setting[n] is None and e["reached"] and e["time_to_target_s"])
    rows = []
    for name, rs in groups.items():
        if setting[name] is None or _key(rs[0]) not in sync:
            continue
        partner = sync[_key(rs[0])]
        c = compare(est[name], est[partner])
        row = {"config": name, "sync_config": partner, "batch_size": est[name]["batch_size"],
               "async_rollouts": setting[name][0], "partial_rollout_tokens": setting[name][1],
               "staleness_mean": _mean(rs, "rollout/staleness_mean"),
               "partial_frac": _mean(rs, "rollout/partial_frac"),
               "overlap_frac": _sum_ratio(rs, "time/overlap_s", "time/gen_busy_s"),
               "throughput_sync": est[partner]["throughput_samples_per_s"],
               "throughput_async": est[name]["throughput_samples_per_s"], **c,
               "verdict": verdict_label(c["relative_time"], c["relative_time_ci"],
                                        reached=est[name]["reached"] and est[partner]["reached"]),
               "vs_reference_time": None, "vs_reference_time_ci": None, "vs_reference_verdict": None}
        if ref is not None:
            cr = compare(est[name], est[ref])
            row.update(vs_reference_time=cr["relative_time"], vs_reference_time_ci=cr["relative_time_ci"],
                       vs_reference_verdict=verdict_label(cr["relative_time"], cr["relative_time_ci"],
                                                          reached=est[name]["reached"]))
        rows.append(row)
    rows.sort(key=lambda r: (r["batch_size"] or 0, r["config"]))
    return rows, ref


def async_comparison(runs: Sequence[Run], target: float | None, metric: str = "eval/score", n_boot: int = N_BOOT,
                     estimate: Estimator | None = None) -> tuple[list[dict[str, Any]], str | None] | None:
    """:func:`async_rows` of ``runs`` (``(rows, reference)``; rows empty when no asynchronous configuration has a
    synchronous partner), or None when no run is asynchronous (a study without the comparison)."""
    if not any(async_setting(r) for r in runs):
        return None
    return async_rows(runs, target, metric, n_boot=n_boot, estimate=estimate)
