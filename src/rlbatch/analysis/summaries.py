"""Per-run and per-configuration summaries for the report's tables (seeds, whole-run means, throughput on the
accounting's clock): numbers the accounting rows do not hold, computed with the accounting's estimator so the
throughput is the same quantity.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from rlbatch.analysis.curves import curve, mean_last, summarize_run
from rlbatch.analysis.estimate import estimate_configuration
from rlbatch.analysis.throughput import clock_basis, configuration_timings, run_throughput
from rlbatch.runstore import Run


def seed_rows(groups: dict[str, list[Run]], rows: list[dict[str, Any]] | None = None,
              metric: str = "eval/score") -> list[dict[str, Any]]:
    """Per configuration (the report's seed table): seeds, how many reached the target, each seed's
    samples-to-target with their min and max (from the accounting ``rows`` of :func:`account_runs`, so the same
    numbers), mean first and last score, mean retained / generated samples."""

    by = {r["run"]: r for r in rows or []}
    out = []
    for name, rs in groups.items():
        row = by.get(name, {})
        s2t = row.get("samples_to_target_per_seed") or [None] * len(rs)
        reached = [s for s in s2t if s is not None]
        scores = [c[metric] for c in (curve(r, metric) for r in rs) if len(c)]
        out.append({"config": name, "batch_size": rs[0].meta.batch_size, "lr": rs[0].meta.lr,
                    "lr_rule": rs[0].meta.lr_rule, "seeds": len(rs), "reached": f"{len(reached)}/{len(rs)}",
                    "samples_to_target_per_seed": s2t,
                    "samples_to_target_min": min(reached) if reached else None,
                    "samples_to_target_max": max(reached) if reached else None,
                    "first_score_mean": float(np.mean([s.iloc[0] for s in scores])) if scores else None,
                    "last_score_mean": float(np.mean([s.iloc[-1] for s in scores])) if scores else None,
                    "samples_retained": mean_last(rs, "samples/retained"),
                    "samples_generated": mean_last(rs, "samples/generated")})
    return out


def configuration_summaries(groups: dict[str, list[Run]], rows: list[dict[str, Any]] | None = None,
                            metric: str = "eval/score", clock: str = "wall", n_boot: int = 300) -> list[dict[str, Any]]:
    """Per configuration, the report's configuration table: **means over each seed's whole run** (never cut at the
    shortest seed), every time on ``clock`` (the accounting's). Keys: those of :func:`seed_rows` (seeds reaching the
    target, min / max samples-to-target per seed, mean first and last score, mean retained and generated samples),
    ``steps``, ``seconds``, ``step_s``, ``gen_share`` (:func:`rlbatch.analysis.throughput.configuration_timings`),
    ``throughput_samples_per_s`` and ``throughput_ci`` (whole run, :func:`estimate_configuration` without a
    target), ``grad_norm_actor_mean`` / ``grad_norm_critic_mean`` (mean over seeds of each run's mean), ``clock``."""

    timing = {t["config"]: t for t in configuration_timings(groups, clock)}
    out = []
    for srow in seed_rows(groups, rows, metric):
        name = srow["config"]
        rs = groups[name]
        e = estimate_configuration(rs, None, metric, clock=clock, n_boot=n_boot, name=name)
        t = timing.get(name, {})
        sums = [summarize_run(r) for r in rs]

        def mean_of(key: str) -> float | None:
            v = [x[key] for x in sums if isinstance(x.get(key), (int, float)) and math.isfinite(x[key])]
            return float(np.mean(v)) if v else None

        out.append({**srow, "steps": t.get("steps"), "seconds": t.get("seconds"), "step_s": t.get("step_s"),
                    "gen_share": t.get("gen_share"), "throughput_samples_per_s": e["throughput_samples_per_s"],
                    "throughput_ci": e["throughput_ci"], "grad_norm_actor_mean": mean_of("grad_norm_actor_mean"),
                    "grad_norm_critic_mean": mean_of("grad_norm_critic_mean"), "clock": clock})
    return out


def run_summaries(runs: Sequence[Run], clock: str = "auto", n_boot: int = 300) -> list[dict[str, Any]]:
    """Per-run summaries (:func:`rlbatch.analysis.curves.summarize_run`) whose throughput is the accounting's:
    whole-run retained samples per second on the accounting's clock (:func:`estimate_configuration`), with
    ``throughput_ci``, ``clock`` and ``time_s`` (the whole run's seconds on that clock; ``wall_clock_s`` stays the
    logged wall-clock)."""

    runs = list(runs)
    basis = clock_basis(runs, clock) if runs else "wall"
    out = []
    for r in runs:
        s = summarize_run(r)
        e = estimate_configuration([r], None, clock=basis, n_boot=n_boot, name=r.run_id)
        s.update(throughput_samples_per_s=e["throughput_samples_per_s"], throughput_ci=e["throughput_ci"],
                 clock=basis, time_s=run_throughput(r, basis)["seconds"])
        out.append(s)
    return out
