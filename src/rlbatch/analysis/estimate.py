"""Estimation of one configuration from its seeds: samples-to-target, time-to-target and throughput with their
replicates and intervals, and the comparison's prior on the seed spread (issue 43; the accounting's first stage).

Per seed (one run), on the policy-sample axis (:func:`rlbatch.analysis.curves.curve`, evaluation at 0 kept):
S_i from the crossing of a monotone fit refined by a local quadratic (:mod:`rlbatch.analysis.crossing`), T_i the
clock there. Per configuration: the geometric means over seeds, X = S / T, each with Student's t interval of the mean
log, the seed spread moderated across the comparison (:func:`comparison_spread`). Censored seeds give lower bounds,
seeds that reached the target before their first evaluation upper bounds. The comparison with a reference and the
decision: :mod:`rlbatch.analysis.accounting` and :mod:`rlbatch.analysis.decision`.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from typing import Any, Sequence

import numpy as np

from rlbatch.analysis.crossing import Crossing
from rlbatch.analysis.curves import crossing_of, curve, mean_last, points_of
from rlbatch.analysis.interval import (Spread, SpreadPrior, bootstrap_interval, hypervariable, smyth_prior,
                                      ladder_spread, moderated_spread, spread_prior, uniform_ranks)
from rlbatch.analysis.shape import ReferenceShape, bound_from_shape, reference_shape
from rlbatch.analysis.throughput import run_clock, throughput_to_target, throughput_whole_run, time_at
from rlbatch.runstore import Run

#: Replicates per configuration: enough for the tails of a simultaneous interval over ten configurations
#: (each at ~99.5%, i.e. ~10 replicates beyond each end)
N_BOOT = 4000
CONF = 0.95


def seed_estimate(run: Run, target: float | None, metric: str = "eval/score", *, ema: float | None = None,
                  sustained: bool = False, clock: str = "wall", shape: ReferenceShape | None = None) -> dict[str, Any]:
    """One seed: ``samples_to_target`` (S, responses; None = not reached, :func:`rlbatch.analysis.curves.
    crossing_of`), ``time_to_target_s`` (T, seconds on ``clock`` at S), ``censored_at`` (not reached: the last
    evaluated samples, so S is larger) and ``time_censored`` (the clock there), ``at_most`` (at the target at its
    first evaluation after 0: S is at most that evaluation's x, or the tighter bound its later evaluations give
    against the reference's shape ``shape``: :func:`rlbatch.analysis.shape.bound_from_shape`; ``bounded_by``
    ``"first evaluation"`` or ``"shape"``), ``samples`` / ``seconds`` (whole run), the ``crossing``, the curve and
    the clock."""

    c = curve(run, metric)
    clk = run_clock(run, clock)
    cross = crossing_of(c, target, metric, ema=ema, sustained=sustained) if target is not None else Crossing(None)
    at_most, bounded_by = cross.at_most, "first evaluation" if cross.at_most else None
    if at_most and shape is not None:
        pts = points_of(c, metric)
        if pts is not None:
            b = bound_from_shape(*pts, shape, at_most)
            if b < at_most:
                at_most, bounded_by = b, "shape"
    s = cross.samples
    t = time_at(clk, s) if s is not None else None
    cens = cross.censored_at
    return {"run": run.run_id, "seed": run.meta.seed, "samples_to_target": s, "time_to_target_s": t,
            "censored_at": cens, "time_censored": time_at(clk, cens) if cens is not None else None,
            "at_most": at_most, "time_at_most": time_at(clk, at_most) if at_most else None,
            "bounded_by": bounded_by, "crossing": cross,
            "samples": float(clk[0][-1]) if clk is not None else None,
            # where the log ends, as the runs table counts it (its last logged retained samples; researcher finding
            # 13: "its log ends at 15,104" beside the runs table's 15,360 for one run)
            "logged_samples": mean_last([run], "samples/retained"),
            "seconds": float(clk[1][-1]) if clk is not None else None, "_curve": c, "_clock": clk}


def reference_shape_of(runs: Sequence[Run], target: float, metric: str = "eval/score") -> ReferenceShape | None:
    """The shared shape of a reference configuration's seeds ``runs`` (:func:`rlbatch.analysis.shape.
    reference_shape`), keyed by their run ids and the metric; None where it has none (no crossing, a failed shape
    check, no measured noise, no points)."""
    pts = [points_of(curve(r, metric), metric) for r in runs]
    if not runs or any(p is None for p in pts):
        return None
    return reference_shape(pts, target, key=(tuple(r.run_id for r in runs), metric, target))


def timing_of(runs: Sequence[Run], clock: str, share: float | None = None) -> np.ndarray | None:
    """The timing pass's block throughputs of a configuration, retained samples per second on ``clock``
    (``cpu_s`` on the CPU clock, ``wall_s`` else), from ``meta.timing_blocks``
    (:func:`rlbatch.runstore.annotate_timing`); None when its runs have none.

    The blocks start from the warm start, where the share of responses kept (groups with a reward spread) is the
    start of training's, not the run's (the demo's B = 16 kept 37% in its blocks, 68% over its run up to the
    target): a property of the stage of training, not of the machine. With the runs' ``share``
    (:func:`retained_share`), each block's seconds are split by its phases' wall-clock shares into generation
    (per response generated: g) and the rest (the update and scoring, per response retained: u), and the block's
    throughput is the run's mix, 1 / (g / share + u) retained samples per second. A block without phases counts
    its generated responses (steps x B) times ``share``; without ``share``, its own retained samples."""
    blocks = getattr(runs[0].meta, "timing_blocks", None) if runs else None
    if not blocks:
        return None
    key = "cpu_s" if clock == "cpu" else "wall_s"
    x = []
    for b in blocks:
        t = float(b.get(key) or 0.0)
        if t <= 0:
            continue
        n_gen = float(b.get("generated") or (float(b.get("steps") or 0) * float(b.get("batch_size") or 0)))
        n_ret = float(b.get("samples") or 0.0)
        gen_s = float(b.get("gen_s") or 0.0)
        if share and n_gen > 0 and n_ret > 0 and gen_s > 0 and float(b.get("wall_s") or 0) > 0:
            f_gen = min(1.0, gen_s / float(b["wall_s"]))
            g, u = t * f_gen / n_gen, t * (1.0 - f_gen) / n_ret
            x.append(1.0 / (g / share + u))
        elif share and n_gen > 0:
            x.append(share * n_gen / t)
        elif n_ret > 0:
            x.append(n_ret / t)
    return np.array(x) if x else None


def retained_share(items: Sequence[dict[str, Any]], runs: Sequence[Run]) -> float | None:
    """Retained over generated responses of one configuration, pooled over its seeds (``items``: their
    :func:`seed_estimate`, in the order of ``runs``), each seed up to its samples-to-target (its whole run when it
    did not reach the target): the share that turns a generation rate into retained samples per second. None when a
    run logs no cumulative ``samples/generated``."""
    ret = gen = 0.0
    for it, r in zip(items, runs):
        if "samples/generated" not in r.metrics.columns or "samples/retained" not in r.metrics.columns:
            return None
        d = r.metrics[["samples/retained", "samples/generated"]].dropna()
        if d.empty:
            return None
        upto = it.get("samples_to_target")
        if upto is not None:
            ret += float(upto)
            gen += float(np.interp(upto, d["samples/retained"].to_numpy(float), d["samples/generated"].to_numpy(float)))
        else:
            ret += float(d["samples/retained"].iloc[-1])
            gen += float(d["samples/generated"].iloc[-1])
    return ret / gen if gen > 0 and ret > 0 else None


def _spread_of(logs: np.ndarray, spread: SpreadPrior | None, name: str | None,
               q: str) -> tuple[float, float, str] | None:
    """(s, df, how) of one quantity's seed spread on the log scale (``q``: ``S``, ``T`` or ``X``): moderated by the
    comparison's prior (:meth:`rlbatch.analysis.interval.SpreadPrior.for_config`, learned without this
    configuration; one seed: the prior alone), unless its own seeds scatter more than that prior allows
    (:func:`rlbatch.analysis.interval.hypervariable`: then its own); without a prior, its own (two or more seeds);
    else None. ``how``: ``moderated``, ``ladder``, ``own (wider than the others')`` or ``own``."""
    prior = spread.for_config(name, q) if spread is not None else None
    if prior is not None and math.isfinite(prior.s0):
        if len(logs) >= 2 and prior.source in ("seeds", "timing") and hypervariable(logs, prior):
            if len(logs) >= 3:
                return float(np.std(logs, ddof=1)), float(len(logs) - 1), "own (wider than the others')"
            # two seeds: their own spread has 1 df (a t_1 interval spans orders of magnitude); the prior capped at
            # 1 df instead, half the weight each (statistics review 2, N12: moderate less, not not at all)
            s, df = moderated_spread(logs, min(prior.d0, 1.0), prior.s0, prior.cap)
            return s, df, "own (wider than the others'), moderated by 1 df of the others'"
        s, df = moderated_spread(logs, prior.d0, prior.s0, prior.cap)
        return s, df, "ladder" if prior.source == "ladder" else "moderated"
    if len(logs) >= 2:
        return float(np.std(logs, ddof=1)), float(len(logs) - 1), "own"
    return None


def _chi_levels(n: int) -> np.ndarray:
    """The quantile levels of the spread's chi draws, the same for every configuration of every comparison (a fixed
    order): replicate i of each configuration divides by the same chi quantile, as a spread pooled across them
    does in the t statistics (their joint distribution is the multivariate t of Dunnett 1955, so the simultaneous
    intervals of :func:`rlbatch.analysis.decision.decide` hold jointly, not only one by one)."""
    return (np.random.default_rng(20261206).permutation(n) + 0.5) / n


def _replicates(point: float | None, logs: np.ndarray, k: int, spread: SpreadPrior | None, name: str | None, q: str,
                n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray | None, tuple[float, float, str] | None]:
    """Replicates of a geometric mean over ``k`` runs whose percentile interval is Student's t interval of the mean
    log: ``point x exp(z / chi x s / sqrt(k))``, z standard normal quantiles at stratified levels in a random order
    (:func:`rlbatch.analysis.interval.uniform_ranks`), chi = sqrt(chi^2_df / df) at :func:`_chi_levels` (so each
    configuration's replicates are exactly t_df, and those of several configurations share their chi), (s, df)
    from :func:`_spread_of`. None without a spread."""
    from scipy import stats

    sp = _spread_of(logs, spread, name, q) if point is not None and point > 0 else None
    if sp is None or n_boot < 1:
        return None, sp
    s, df, _ = sp
    z = stats.norm.ppf(uniform_ranks(n_boot, rng))
    if math.isfinite(df):
        z = z / np.sqrt(stats.chi2.ppf(_chi_levels(n_boot), df) / df)
    return float(point) * np.exp(np.clip(z * s / math.sqrt(k), -700.0, 700.0)), sp


def geometric_mean(values: Sequence[float] | np.ndarray) -> float:
    """exp(mean(log values)) of positive values: a configuration's samples-to-target, time-to-target or throughput
    over its seeds (the typical run under a log-normal seed spread; the centre of the t interval on the log
    scale). Raises ``ValueError`` for an empty or non-positive input."""
    v = np.asarray(values, float)
    if not len(v) or not np.all(v > 0):
        raise ValueError("geometric mean of an empty or non-positive sequence")
    return float(np.exp(np.mean(np.log(v))))


def estimate_configuration(runs: Sequence[Run], target: float | None, metric: str = "eval/score", *,
                           ema: float | None = None, sustained: bool = False, clock: str = "wall",
                           n_boot: int = N_BOOT, seed: int | None = None, name: str | None = None,
                           spread: SpreadPrior | None = None, shape: ReferenceShape | None = None) -> dict[str, Any]:
    """Samples-to-target, time-to-target and throughput of one configuration (its seeds ``runs``), with intervals.

    Per seed: S_i (:func:`seed_estimate`), T_i = the clock at S_i, X_i = S_i / T_i. Seed aggregation (module
    docstring): S = mean_i S_i, T = mean_i T_i, X = S / T. When some seed did not reach ``target`` (censored) S and T
    are None and ``samples_to_target_at_least`` / ``time_to_target_at_least`` bound them from below (each censored
    seed counted at its last evaluation and the clock there); X is then over the whole run.

    Intervals (95%, marginal): Student's t of the seed mean on the log scale for each of S, T and X
    (:func:`_replicates`), the spread of each moderated by the comparison's prior ``spread``
    (:func:`comparison_spread`: Smyth's over configurations with several seeds, or a one-seed ladder's residuals
    around a smooth trend in log B), else the seeds' own; with one seed and no prior, no interval (evaluation noise
    alone would leave out the run-to-run variability, statistics review finding 1). S, T and X are drawn
    independently (the throughput interval keeps its own seed spread). ``seed`` fixes the draws (default: from the
    configuration's name). The replicates stay in ``_replicates`` (``S``, ``T``, ``X``, ``S_low``, ``T_low``) for
    ratios and the decision (:func:`rlbatch.analysis.decision.decide`).

    Returns a dict with ``config, batch_size, prompts_per_step, group_size, lr, lr_rule, runs, n_seeds, n_reached,
    reached, samples_to_target(_ci), samples_to_target_per_seed, time_to_target_s, time_to_target_ci,
    throughput_samples_per_s, throughput_ci, throughput_window ("to target" | "whole run"), clock, spread (how the
    seed spread was estimated), spread_df, spread_sd`` (per quantity, the per-seed log-sd used and its df),
    ``longest_run`` (retained samples of its longest seed) and ``ends_at`` (where its shortest seed that did not reach
    the target ends, retained samples; None when every seed reached it). ``shape``: the reference's shape
    (:func:`rlbatch.analysis.shape.reference_shape`), which bounds the seeds at the target at their first
    evaluation after 0 more tightly than that evaluation (``at_most_by_shape`` of them).
    """

    runs = list(runs)
    name = name or runs[0].run_id
    rng = np.random.default_rng(zlib.crc32(name.encode()) if seed is None else seed)
    items = [seed_estimate(r, target, metric, ema=ema, sustained=sustained, clock=clock, shape=shape) for r in runs]
    k = len(items)
    S = np.array([np.nan if it["samples_to_target"] is None else it["samples_to_target"] for it in items])
    reached = target is not None and bool(np.isfinite(S).all())
    T = np.array([np.nan if it["time_to_target_s"] is None else it["time_to_target_s"] for it in items])
    timed = reached and bool(np.isfinite(T).all())
    meta = runs[0].meta
    est: dict[str, Any] = {
        "config": name, "batch_size": meta.batch_size, "prompts_per_step": meta.prompts_per_step,
        "group_size": meta.group_size, "lr": meta.lr, "lr_rule": meta.lr_rule, "runs": [r.run_id for r in runs],
        # n_reached: seeds at the target, those that reached it before their first evaluation after 0 included
        # (researcher finding 1, rerun: "n_reached": 0 beside "at_most": [1280] and "1 of 1 seeds reached")
        "n_seeds": k, "n_reached": int(np.isfinite(S).sum()) + sum(it["at_most"] is not None for it in items),
        "reached": reached,
        "samples_to_target_per_seed": [it["samples_to_target"] for it in items],
        "samples_to_target": geometric_mean(S) if reached and np.all(S > 0) else (0.0 if reached else None),
        "samples_to_target_ci": None,
        "time_to_target_s": geometric_mean(T) if timed and np.all(T > 0) else (0.0 if timed else None),
        "time_to_target_ci": None,
        "throughput_samples_per_s": None, "throughput_ci": None, "clock": clock,
        "throughput_window": "to target" if reached else "whole run",
        "best_score": max((float(it["_curve"][metric].max()) for it in items if len(it["_curve"])), default=None),
        "stopped": None, "unfinished": [], "samples_to_target_at_least": None, "time_to_target_at_least": None,
        "samples_to_target_at_most": None, "time_to_target_at_most": None,
        "at_most": [it["at_most"] for it in items if it["at_most"] is not None],
        "at_most_by_shape": sum(it["bounded_by"] == "shape" for it in items),
        # the longest of its seeds' runs (retained samples), and where its unfinished seeds end (below)
        "longest_run": max((float(it["logged_samples"]) for it in items if it["logged_samples"]), default=None),
        "ends_at": None,
        "spread": None, "spread_df": None}
    reps: dict[str, np.ndarray | None] = {"S": None, "T": None, "X": None, "S_low": None, "T_low": None,
                                          "S_high": None, "T_high": None}
    dfs: dict[str, float] = {}
    hows: dict[str, str] = {}
    sds: dict[str, float] = {}
    if timed and np.all(S > 0) and np.all(T > 0):
        est["throughput_samples_per_s"] = throughput_to_target(est["samples_to_target"], est["time_to_target_s"])
        for q, v, point in (("S", S, est["samples_to_target"]), ("T", T, est["time_to_target_s"]),
                            ("X", S / T, est["throughput_samples_per_s"])):
            reps[q], sp = _replicates(point, np.log(v), k, spread, name, q, n_boot, rng)
            if sp:
                dfs[q], hows[q], sds[q] = sp[1], sp[2], sp[0]
    elif reached and np.isfinite(S).all() and np.all(S > 0):
        reps["S"], sp = _replicates(est["samples_to_target"], np.log(S), k, spread, name, "S", n_boot, rng)
        if sp:
            dfs["S"], hows["S"], sds["S"] = sp[1], sp[2], sp[0]
    if not reached:
        stops = [getattr(r.meta, "stopped_early", None) for r in runs]
        stop = next((x for x in stops if x), None)
        if stop is not None:  # the adaptive sweep stopped it before every seed got there: no verdict on the batch
            est["stopped"] = {"state": stop.get("state"), "why": stop.get("why"),
                              "samples": min(float(it["logged_samples"] or 0.0) for it in items)}
        else:
            est["unfinished"] = [r.run_id for r, it in zip(runs, items)
                                 if it["samples_to_target"] is None and still_running(r)]
        # where the runs that did not reach the target end (retained samples): a log cut short may be a crash
        ends = [float(it["logged_samples"]) for it in items if it["samples_to_target"] is None and it["at_most"] is None
                and it["logged_samples"]]
        est["ends_at"] = min(ends) if ends else None
        # a seed at the target at its first evaluation after 0 has no lower bound (S <= that x): none for the mean
        low_s = [it["samples_to_target"] if it["samples_to_target"] is not None else None if it["at_most"] else
                 (it["censored_at"] if it["censored_at"] is not None else it["samples"]) for it in items]
        low_t = [it["time_to_target_s"] if it["time_to_target_s"] is not None else None if it["at_most"] else
                 (it["time_censored"] if it["time_censored"] is not None else it["seconds"]) for it in items]
        if target is not None and all(v is not None and v > 0 for v in low_s):
            # each seed needs at least the samples it was evaluated at (or its crossing): a lower bound
            est["samples_to_target_at_least"] = geometric_mean(low_s)
            ok = [math.log(v) for v, it in zip(low_s, items) if it["samples_to_target"] is not None]
            reps["S_low"], _ = _replicates(est["samples_to_target_at_least"], np.array(ok), k, spread, name, "S",
                                           n_boot, rng)
        if target is not None and all(v is not None and v > 0 for v in low_t):
            est["time_to_target_at_least"] = geometric_mean(low_t)
            ok = [math.log(v) for v, it in zip(low_t, items) if it["time_to_target_s"] is not None]
            reps["T_low"], _ = _replicates(est["time_to_target_at_least"], np.array(ok), k, spread, name, "T",
                                           n_boot, rng)
        high = [it["samples_to_target"] if it["samples_to_target"] is not None else it["at_most"] for it in items]
        high_t = [it["time_to_target_s"] if it["time_to_target_s"] is not None else it["time_at_most"]
                  for it in items]
        if target is not None and est["at_most"] and all(v is not None and v > 0 for v in high) \
                and all(v is not None and v > 0 for v in high_t):
            # interval-censored (statistics review 2, N1): each seed reached the target by its first evaluation after
            # 0 at the latest: an upper bound, never a chord from 0; the spread from its reached seeds or the prior
            est["samples_to_target_at_most"] = geometric_mean(high)
            est["time_to_target_at_most"] = geometric_mean(high_t)
            ok = [math.log(v) for v, it in zip(high, items) if it["samples_to_target"] is not None]
            reps["S_high"], _ = _replicates(est["samples_to_target_at_most"], np.array(ok), k, spread, name, "S",
                                            n_boot, rng)
            ok = [math.log(v) for v, it in zip(high_t, items) if it["time_to_target_s"] is not None]
            reps["T_high"], _ = _replicates(est["time_to_target_at_most"], np.array(ok), k, spread, name, "T",
                                            n_boot, rng)
        tot_s = np.array([np.nan if it["samples"] is None else it["samples"] for it in items])
        tot_t = np.array([np.nan if it["seconds"] is None else it["seconds"] for it in items])
        if np.isfinite(tot_s).all() and np.isfinite(tot_t).all() and np.all(tot_t > 0) and np.all(tot_s > 0):
            est["throughput_samples_per_s"] = geometric_mean(throughput_whole_run(tot_s, tot_t))
            reps["X"], sp = _replicates(est["throughput_samples_per_s"], np.log(tot_s / tot_t), k,
                                        spread if target is not None else None, name, "X", n_boot, rng)
            if sp:
                dfs["X"], hows["X"] = sp[1], sp[2]
    share = retained_share(items, runs) if target is not None else None
    blocks = timing_of(runs, clock, share)
    if blocks is not None and target is not None:
        # the timing pass (issue 44): throughput from its interleaved blocks (re-weighted to the runs' retained
        # share up to the target), time-to-target = S / that throughput
        x = blocks
        est["throughput_samples_per_s"] = geometric_mean(x)
        est["throughput_window"] = "timing pass"
        reps["X"], sp = _replicates(est["throughput_samples_per_s"], np.log(x), len(x), spread, name, "timing",
                                    n_boot, rng)
        if sp:
            dfs["X"], hows["X"] = sp[1], "timing pass: " + sp[2]
        est["timing"] = {"blocks": len(x), "source": "timing pass", "retained_share": share}
        if est["samples_to_target"] is not None and est["samples_to_target"] > 0:
            est["time_to_target_s"] = est["samples_to_target"] / est["throughput_samples_per_s"]
            reps["T"] = reps["S"] / reps["X"] if reps["S"] is not None and reps["X"] is not None else None
            hows["T"] = "samples-to-target / timing-pass throughput"
            dfs.pop("T", None)
        if est.get("samples_to_target_at_most"):
            est["time_to_target_at_most"] = est["samples_to_target_at_most"] / est["throughput_samples_per_s"]
            reps["T_high"] = reps["S_high"] / reps["X"] if reps["S_high"] is not None and reps["X"] is not None \
                else None
        if est.get("samples_to_target_at_least"):
            est["time_to_target_at_least"] = est["samples_to_target_at_least"] / est["throughput_samples_per_s"]
            reps["T_low"] = reps["S_low"] / reps["X"] if reps["S_low"] is not None and reps["X"] is not None \
                else None
    est["samples_to_target_ci"] = bootstrap_interval(reps["S"])
    est["time_to_target_ci"] = bootstrap_interval(reps["T"])
    est["throughput_ci"] = bootstrap_interval(reps["X"])
    est["spread"] = hows or None
    est["spread_df"] = dfs or None
    est["spread_sd"] = sds or None
    est["_replicates"] = reps
    return est


def comparison_spread(groups: dict[str, list[Run]], target: float | None, metric: str = "eval/score", *,
                      ema: float | None = None, sustained: bool = False, clock: str = "wall") -> SpreadPrior | None:
    """The prior on the seed spread of samples-to-target, time-to-target and throughput (log scale) of the
    configurations ``groups`` of one comparison, learned from the configurations on the comparison's main LR rule
    (the most common one: a fixed-LR control beside a square-root ladder is moderated by it but does not shape it):

    - with three or more configurations of two or more seeds that reached the target: Smyth's (2004) prior over
      their per-seed values (:func:`rlbatch.analysis.interval.spread_prior`); the reached seeds of a configuration
      with an unreached one count too;
    - else, with four or more configurations all of whose seeds reached it: the residual spread of the
      configurations' mean log values around a smooth trend in log B (:func:`rlbatch.analysis.interval.
      ladder_spread`), what one seed per batch size says about run-to-run variability;
    - else None (no target, or too little to learn from: a one-seed configuration then gets no interval)."""
    if target is None:
        return None
    per = []
    shares: dict[str, float | None] = {}
    for gname, rs in groups.items():
        items = [seed_estimate(r, target, metric, ema=ema, sustained=sustained, clock=clock) for r in rs]
        ok = [(it["samples_to_target"], it["time_to_target_s"]) for it in items
              if it["samples_to_target"] and it["time_to_target_s"]]
        per.append({"name": gname, "b": rs[0].meta.batch_size, "rule": rs[0].meta.lr_rule, "k": len(rs), "ok": ok})
        shares[gname] = retained_share(items, rs)
    timing = _timing_prior(groups, clock, shares)
    rules = [p["rule"] for p in per]
    main = max(set(rules), key=lambda r: (rules.count(r), r is not None, str(r))) if rules else None
    ladder = [p for p in per if p["rule"] == main]
    multi = [p for p in ladder if len(p["ok"]) >= 2]
    prior = spread_prior([[s for s, _ in p["ok"]] for p in multi], [[t for _, t in p["ok"]] for p in multi],
                         names=[p["name"] for p in multi]) if len(multi) >= 3 else None
    if prior is not None:
        return dataclasses.replace(prior, timing=timing) if timing is not None else prior
    full = [p for p in ladder if p["b"] and len(p["ok"]) == p["k"] and p["k"] >= 1]
    if len(full) < 4:
        return SpreadPrior(S=None, T=None, X=None, n_configurations=0, timing=timing) if timing is not None \
            else None
    lb = [math.log(p["b"]) for p in full]
    ks = [p["k"] for p in full]
    sp = [ladder_spread(lb, [float(np.mean(np.log([v[i] if i < 2 else v[0] / v[1] for v in p["ok"]])))
                             for p in full], ks) for i in range(3)]
    if any(s is None for s in sp):
        return None
    return SpreadPrior(S=sp[0], T=sp[1], X=sp[2], n_configurations=len(full), timing=timing)


def _timing_prior(groups: dict[str, list[Run]], clock: str, shares: dict[str, float | None]) -> Spread | None:
    """Smyth's prior over the configurations' timing-pass block throughputs (log scale; each as
    :func:`timing_of` with its configuration's retained share, as the accounting uses them), None without a timing
    pass of three or more configurations."""
    logs = [np.log(x) for x in (timing_of(rs, clock, shares.get(n)) for n, rs in groups.items())
            if x is not None and len(x) >= 2]
    if len(logs) < 3:
        return None
    pr = smyth_prior(logs)
    return Spread(pr[0], pr[1], "timing", float(sum(len(v) - 1 for v in logs))) if pr else None


def still_running(run: Run) -> bool:
    """Whether ``run`` had not finished when it was read: a run directory this tool wrote (its ``run.json`` says
    ``running`` until the trainer ends; a sweep interrupted by Ctrl-C or a crash leaves it so), not stopped by an
    adaptive sweep. Logs of other frameworks do not say, and count as finished."""
    m = run.meta
    return m.status == "running" and (m.source_format in (None, "rlbatch")) and not getattr(m, "stopped_early", None)
