"""End-to-end accounting: does a larger batch reach the target sooner? (the paper's "accelerate" test).

The one analysis core: every command (``account``, ``analyze``, ``plan``, the report, the sweeps, the demo) takes
samples-to-target, time-to-target, throughput, rN, relative time and the verdict from the functions here.

Per seed (one run), on the policy-sample axis (:func:`rlbatch.analysis.curves.curve`, evaluation at 0 kept):
    S  = samples-to-target: the crossing of a monotone fit of the evaluations, refined by a straight line against
         log samples around it (:mod:`rlbatch.analysis.crossing`; independent of the evaluation spacing and noise);
    T  = time-to-target, the clock at S, interpolated between steps (:func:`rlbatch.analysis.throughput.time_at`;
         wall-clock, or process CPU time on a shared CPU, :func:`rlbatch.analysis.throughput.clock_basis`).
Per configuration (its seeds; :func:`estimate_configuration`), **seed aggregation = the mean of the per-seed values**
(not the crossing of the seed-averaged curve):
    S = mean_i S_i,   T = mean_i T_i,   throughput X = S / T  (retained samples per second up to the target; over
    the whole run when the target is not reached).
Relative to a reference configuration (Li et al. 2026, end-to-end accounting, Table "J = 77%"):
    rN                  = S / S_ref                    (sample penalty; samples-to-target ratio)
    relative_throughput = X / X_ref
    relative_time       = T / T_ref = rN / relative_throughput
and a configuration is faster than the reference iff ``relative_throughput > rN``. A configuration some of whose
seeds never reached the target has no rN and no time-to-target (censored), only lower bounds.

Intervals: per configuration, Student's t interval of the seed mean on the log scale for each of S, T and X, the
seed spread moderated across the comparison (:func:`comparison_spread`); the verdicts, their simultaneous intervals
and the "may be fastest" set: :func:`rlbatch.analysis.decision.decide`; their words:
:mod:`rlbatch.analysis.headline`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.crossing import Crossing
from rlbatch.analysis.curves import crossing_of, curve, group_seeds, mean_last, summarize_run
from rlbatch.analysis.decision import ALIGNED, alignment, decide, verdict_label
from rlbatch.analysis.headline import AGGREGATION, headline, headline_markdown
from rlbatch.analysis.interval import (Spread, SpreadPrior, bootstrap_interval, hypervariable, smyth_prior,
                                      ladder_spread, moderated_spread, spread_prior, uniform_ranks)
from rlbatch.analysis.throughput import (clock_basis, configuration_timings, run_clock, run_throughput,
                                         throughput_to_target, throughput_whole_run, time_at)
from rlbatch.errors import UserError
from rlbatch.runstore import Run
from rlbatch.scaling import LRRetuning, detect_lr_rule

#: A configuration estimator with :func:`estimate_configuration`'s signature (a study's memoised one, or that).
Estimator = Callable[..., dict]

#: Keys of one accounting row in JSON output (``rlbatch account --format json``).
JSON_KEYS = ("run", "batch_size", "samples_to_target", "rN", "relative_throughput", "relative_time",
             "faster_than_reference", "verdict")

_NOT_REACHED_TOKENS = {"", "none", "null", "nan", "not reached", "not_reached", "-", "na", "n/a"}


def _finite_pos(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def account(runs: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Accounting rows against ``reference``.

    ``runs`` columns: ``run`` (str, unique), ``batch_size`` (responses per update), ``samples_to_target``
    (retained responses, NaN/None = not reached), and ``time_to_target_s`` (seconds) and/or
    ``throughput_samples_per_s`` (retained responses per second). When both are given, ``time_to_target_s`` wins.

    Returns one row per run with columns ``run, batch_size, samples_to_target, time_to_target_s,
    throughput_samples_per_s, rN, relative_throughput, relative_time, faster_than_reference, reached``; unknown
    quantities are None. Raises :class:`UserError` if the reference is unknown or did not reach the target.
    """
    runs = runs.reset_index(drop=True)
    names = list(runs["run"].astype(str))
    if reference not in names:
        raise UserError(f"unknown reference run {reference!r}; runs are: {', '.join(names)}", field="reference")
    rows = []
    for rec in runs.to_dict(orient="records"):
        s = rec.get("samples_to_target")
        s = float(s) if _finite_pos(s) else None
        t = rec.get("time_to_target_s")
        t = float(t) if _finite_pos(t) else None
        x = rec.get("throughput_samples_per_s")
        x = float(x) if _finite_pos(x) else None
        if s is not None and t is not None:
            x = throughput_to_target(s, t)
        elif s is not None and x is not None:
            t = s / x  # T = S / X, the time the throughput column implies
        b = rec.get("batch_size")
        rows.append({"run": str(rec["run"]), "batch_size": int(b) if _finite_pos(b) else None,
                     "samples_to_target": s, "time_to_target_s": t if s is not None else None,
                     "throughput_samples_per_s": x, "reached": s is not None})
    ref = rows[names.index(reference)]
    if not ref["reached"]:
        raise UserError(f"reference run {reference!r} never reached the target; choose another --reference",
                        field="reference")
    if ref["throughput_samples_per_s"] is None:
        raise UserError(f"reference run {reference!r} has neither time-to-target nor throughput", field="reference")
    for r in rows:
        r.update(ratios(r["samples_to_target"], r["time_to_target_s"], ref["samples_to_target"],
                        ref["time_to_target_s"]))
        x = r["throughput_samples_per_s"]
        if r["relative_throughput"] is None and x is not None:
            r["relative_throughput"] = relative_throughput(x, ref["throughput_samples_per_s"])
        label = verdict_label(r["relative_time"], None, is_reference=r["run"] == reference, reached=r["reached"])
        # a table of point values: the verdict says so ("faster (point estimate)"); the flag follows its word
        r["faster_than_reference"], r["verdict"] = label.startswith("faster"), label
    return pd.DataFrame(rows)



#: Replicates per configuration: enough for the tails of a simultaneous interval over ten configurations
#: (each at ~99.5%, i.e. ~10 replicates beyond each end)
N_BOOT = 4000
CONF = 0.95


# ----------------------------------------------------------------------------------------- the formulas, once each
def sample_ratio(s: float, s_ref: float) -> float:
    """rN = S / S_ref: the samples-to-target ratio (sample penalty) against the reference (Li et al. 2026)."""
    return s / s_ref


def relative_throughput(x: float, x_ref: float) -> float:
    """The throughput gain X / X_ref against the reference (both retained samples per second)."""
    return x / x_ref


def relative_time(t: float, t_ref: float) -> float:
    """Measured relative time-to-target T / T_ref (= rN / relative throughput, Li et al. 2026)."""
    return t / t_ref


def predicted_relative_time(rn: float, gain: float) -> float:
    """Predicted relative time-to-target rN / throughput gain (Li et al. 2026: a configuration is faster than the
    reference iff its throughput gain exceeds rN), for a candidate whose time-to-target is not measured."""
    return rn / gain


def ratios(s: float | None, t: float | None, s_ref: float, t_ref: float) -> dict[str, float | None]:
    """:func:`sample_ratio`, :func:`relative_throughput` of :func:`throughput_to_target` and :func:`relative_time`
    (Li et al. 2026, end-to-end accounting). ``s``, ``s_ref``: samples-to-target (responses); ``t``, ``t_ref``:
    time-to-target (seconds). None where ``s`` or ``t`` is unknown; ``relative_throughput`` None when ``s`` or
    ``t`` is 0 (a target met at the first evaluation)."""
    out: dict[str, float | None] = {"rN": None, "relative_throughput": None, "relative_time": None}
    if s is not None:
        out["rN"] = sample_ratio(s, s_ref)
    if s is not None and t is not None:
        out["relative_time"] = relative_time(t, t_ref)
        if s > 0 and t > 0:
            out["relative_throughput"] = relative_throughput(throughput_to_target(s, t),
                                                             throughput_to_target(s_ref, t_ref))
    return out


def seed_estimate(run: Run, target: float | None, metric: str = "eval/score", *, ema: float | None = None,
                  sustained: bool = False, clock: str = "wall") -> dict[str, Any]:
    """One seed: ``samples_to_target`` (S, responses; None = not reached, :func:`rlbatch.analysis.curves.
    crossing_of`), ``time_to_target_s`` (T, seconds on ``clock`` at S), ``censored_at`` (not reached: the last
    evaluated samples, so S is larger) and ``time_censored`` (the clock there), ``at_most`` (at the target at its
    first evaluation after 0), ``samples`` / ``seconds`` (whole run), the ``crossing``, the curve and the clock."""

    c = curve(run, metric)
    clk = run_clock(run, clock)
    cross = crossing_of(c, target, metric, ema=ema, sustained=sustained) if target is not None else Crossing(None)
    s = cross.samples
    t = time_at(clk, s) if s is not None else None
    cens = cross.censored_at
    return {"run": run.run_id, "seed": run.meta.seed, "samples_to_target": s, "time_to_target_s": t,
            "censored_at": cens, "time_censored": time_at(clk, cens) if cens is not None else None,
            "at_most": cross.at_most, "time_at_most": time_at(clk, cross.at_most) if cross.at_most else None,
            "crossing": cross,
            "samples": float(clk[0][-1]) if clk is not None else None,
            "seconds": float(clk[1][-1]) if clk is not None else None, "_curve": c, "_clock": clk}


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
        gen_s, train_s = float(b.get("gen_s") or 0.0), float(b.get("train_s") or 0.0)
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
        if len(logs) >= 3 and prior.source in ("seeds", "timing") and hypervariable(logs, prior):
            return float(np.std(logs, ddof=1)), float(len(logs) - 1), "own (wider than the others')"
        if len(logs) == 2 and prior.source in ("seeds", "timing") and hypervariable(logs, prior):
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
                           spread: SpreadPrior | None = None) -> dict[str, Any]:
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
    seed spread was estimated), spread_df, spread_sd`` (per quantity, the per-seed log-sd used and its df).
    """

    runs = list(runs)
    name = name or runs[0].run_id
    rng = np.random.default_rng(zlib.crc32(name.encode()) if seed is None else seed)
    items = [seed_estimate(r, target, metric, ema=ema, sustained=sustained, clock=clock) for r in runs]
    k = len(items)
    S = np.array([np.nan if it["samples_to_target"] is None else it["samples_to_target"] for it in items])
    reached = target is not None and bool(np.isfinite(S).all())
    T = np.array([np.nan if it["time_to_target_s"] is None else it["time_to_target_s"] for it in items])
    timed = reached and bool(np.isfinite(T).all())
    meta = runs[0].meta
    est: dict[str, Any] = {
        "config": name, "batch_size": meta.batch_size, "prompts_per_step": meta.prompts_per_step,
        "group_size": meta.group_size, "lr": meta.lr, "lr_rule": meta.lr_rule, "runs": [r.run_id for r in runs],
        "n_seeds": k, "n_reached": int(np.isfinite(S).sum()), "reached": reached,
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
                              "samples": min(float(it["samples"] or 0.0) for it in items)}
        else:
            est["unfinished"] = [r.run_id for r, it in zip(runs, items)
                                 if it["samples_to_target"] is None and still_running(r)]
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


def compare(est: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """rN, relative throughput and relative time of ``est`` against ``ref`` (both :func:`estimate_configuration`),
    each with its 95% interval from the two configurations' bootstrap replicates taken independently
    (``rN_ci``, ``relative_throughput_ci``, ``relative_time_ci``; the reference against itself: exactly 1)."""
    x, xr = est["throughput_samples_per_s"], ref["throughput_samples_per_s"]
    out: dict[str, Any] = {"rN": None, "rN_ci": None, "relative_throughput": None, "relative_throughput_ci": None,
                           "relative_time": None, "relative_time_ci": None}
    if est is ref:
        return {k: ([1.0, 1.0] if k.endswith("_ci") else 1.0) for k in out}
    s_ref, t_ref = ref["samples_to_target"], ref["time_to_target_s"]
    if s_ref is not None and s_ref > 0:
        r = ratios(est["samples_to_target"], est["time_to_target_s"], s_ref, t_ref if t_ref else float("nan"))
        out["rN"] = r["rN"]
        if t_ref:
            out["relative_time"] = r["relative_time"]
    if x is not None and xr:
        out["relative_throughput"] = relative_throughput(x, xr)
    a, b = est.get("_replicates") or {}, ref.get("_replicates") or {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for key, rk, ratio in (("rN", "S", sample_ratio), ("relative_time", "T", relative_time),
                               ("relative_throughput", "X", relative_throughput)):
            if out[key] is not None and a.get(rk) is not None and b.get(rk) is not None:
                out[f"{key}_ci"] = bootstrap_interval(ratio(a[rk], b[rk]))
    return out


def still_running(run: Run) -> bool:
    """Whether ``run`` had not finished when it was read: a run directory this tool wrote (its ``run.json`` says
    ``running`` until the trainer ends; a sweep interrupted by Ctrl-C or a crash leaves it so), not stopped by an
    adaptive sweep. Logs of other frameworks do not say, and count as finished."""
    m = run.meta
    return m.status == "running" and (m.source_format in (None, "rlbatch")) and not getattr(m, "stopped_early", None)


#: Default tolerance of the aligned family: rN <= 1 + TOLERANCE (the plan's and the report's ``--tolerance``).
TOLERANCE = 0.1


def aligned(rn: float | None, on_rule: bool, tol: float = TOLERANCE,
            interval: Sequence[float | None] | None = None) -> bool:
    """Whether one batch size belongs to the aligned family (DESIGN.md; Li et al. 2026, "align"): on the
    reference's LR rule and rN within ``tol`` of the reference's. With ``interval`` (rN's 90% interval from the
    accounting, or a fit's or the noise model's 95% one), by the equivalence test of
    :func:`rlbatch.analysis.decision.alignment` (the interval inside [1 / (1 + tol), 1 + tol]: the report's aligned
    family, never a point estimate); without one (an accounting table of point values), ``rn <= 1 + tol``. False
    when rN is unknown."""
    if not on_rule or rn is None:
        return False
    if interval is not None:  # an interval open at either end shows nothing within the tolerance
        return (interval[0] is not None and interval[1] is not None
                and alignment((float(interval[0]), float(interval[1])), tol) == ALIGNED)
    return rn <= 1.0 + tol


def aligned_span(points: Sequence[tuple[int, bool]], reference_batch: int) -> list[int]:
    """The aligned family's members: the contiguous run of batch sizes around ``reference_batch`` whose
    :func:`aligned` flag is True (the reference always belongs). ``points``: (B, aligned) of the reference's LR
    rule, one per batch size, the reference's included. Returns the members' B, ascending."""
    flags = dict(points)
    flags[reference_batch] = True
    bs = sorted(flags)
    lo = hi = bs.index(reference_batch)
    while lo > 0 and flags[bs[lo - 1]]:
        lo -= 1
    while hi < len(bs) - 1 and flags[bs[hi + 1]]:
        hi += 1
    return bs[lo:hi + 1]


def comparison_groups(runs: Sequence[Run]) -> dict[tuple, list[Run]]:
    """Runs split by (model, task, algorithm): only runs within one group are compared on the batch axis
    (missing values match anything of the group they fall in only when the group has no other value)."""
    out: dict[tuple, list[Run]] = {}
    for r in runs:
        out.setdefault((r.meta.model, r.meta.task, r.meta.algorithm), []).append(r)
    return out


def _pick_reference(ests: dict[str, dict[str, Any]], groups: dict[str, list[Run]], reference: Any) -> str | None:
    """A configuration name for ``reference`` (a configuration name, a run id, or a batch size ``B64`` / ``64``);
    default: the smallest batch that reached the target after training began and has a time-to-target, a
    configuration on an LR rule before a fixed-LR one at equal B."""
    if reference is not None:
        key = str(reference)
        for name, rs in groups.items():
            if key == name or key in [r.run_id for r in rs]:
                return name
        if re.fullmatch(r"[Bb]?\d+", key):
            b = int(key.lstrip("Bb"))
            hits = sorted((e["lr_rule"] == "none", n) for n, e in ests.items() if e["batch_size"] == b)
            if hits:
                return hits[0][1]
        raise UserError(f"unknown reference {reference!r}; configurations are: {', '.join(groups)} (or give a run "
                        "id or a batch size, e.g. B64)", field="reference")
    return default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items()
                             if e["reached"] and e["samples_to_target"] and e["time_to_target_s"])


def default_reference(configs: Iterable[tuple[str, int | None, str | None]]) -> str | None:
    """The default reference among eligible ``configs`` (name, batch size B, declared LR rule): the smallest batch,
    one on a scaling rule before one whose rule is ``none`` or ``linear`` at equal B (a sweep's fixed-LR control),
    then by name. The one default of the accounting, the plan (an accounting table, short probes) and the
    asynchronous section; callers pass only the configurations that qualify (e.g. reached the target with a
    clock). None when there is none."""
    ranked = sorted((b or float("inf"), rule in ("none", "linear"), str(name)) for name, b, rule in configs)
    return ranked[0][2] if ranked else None


def account_runs(runs: Sequence[Run], target: float, metric: str = "eval/score", reference: Any = None, *,
                 ema: float | None = None, sustained: bool = False, clock: str = "auto",
                 n_boot: int = N_BOOT, allow_unreached_reference: bool = False,
                 estimate: Estimator | None = None, faster_tail: float | None = None) -> dict[str, Any]:
    """The accounting of ``runs`` at ``target``: seeds grouped into configurations
    (:func:`rlbatch.analysis.curves.group_seeds`), each estimated (:func:`estimate_configuration`) and compared
    with the reference (:func:`compare`), the verdict per configuration (:func:`verdict_label`) and the
    recommendation paragraph (:func:`recommendation`).

    Returns ``{"rows": [...] (one per configuration, keys :data:`ROW_KEYS`), "reference": name | None,
    "recommendation": str (Markdown), "best": name | None, "within_noise": [names], "clock": "wall" | "cpu",
    "estimates": {name: estimate}}``. Raises :class:`UserError` for an unknown reference, or one that did not
    reach the target after training began (its samples-to-target is 0 or None); with
    ``allow_unreached_reference`` (the plan's short probes) a reference that has not reached the target is kept and
    its comparisons are None. ``estimate``: where the configurations' estimates come from (a
    :class:`rlbatch.analysis.study.Study`'s :meth:`~rlbatch.analysis.study.Study.estimate`, which computes each
    configuration's bootstrap once per study); default :func:`estimate_configuration`. ``faster_tail``: a
    group-sequential look's per-comparison tail for "faster" (:func:`rlbatch.analysis.decision.decide`)."""
    runs = list(runs)
    basis = clock_basis(runs, clock)
    groups = group_seeds(runs)
    est_of = estimate or estimate_configuration
    spread = comparison_spread(groups, target, metric, ema=ema, sustained=sustained, clock=basis)
    ests = {name: est_of(rs, target, metric, ema=ema, sustained=sustained, clock=basis, n_boot=n_boot, name=name,
                         spread=spread)
            for name, rs in groups.items()}
    ref = _pick_reference(ests, groups, reference)
    if ref is None and allow_unreached_reference:  # short probes: the smallest batch on an LR rule
        ref = default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items())
    if ref is not None and not (allow_unreached_reference and not ests[ref]["reached"]):
        e = ests[ref]
        if not e["reached"]:
            raise UserError(f"reference {ref!r} never reached the target ({e['n_reached']}/{e['n_seeds']} seeds); "
                            "choose another --reference", field="reference")
        if not e["samples_to_target"]:
            raise UserError(f"reference {ref!r} is at the target at its first evaluation (0 samples): nothing to "
                            "compare against; choose a higher --target or another --reference", field="reference")
        if not e["time_to_target_s"] and not allow_unreached_reference:
            raise UserError(f"reference {ref!r} has no clock (time/wall_s, time/step_s or time/cpu_s) to time it",
                            field="reference")
    ref_ok = ref is not None and ests[ref]["reached"] and bool(ests[ref]["samples_to_target"])
    dec = decide(ests, ref if ref_ok else None, faster_tail=faster_tail)
    rows = []
    for name, e in ests.items():
        v = dec.verdicts[name]
        row = {k: e[k] for k in ("batch_size", "prompts_per_step", "group_size", "lr", "lr_rule", "n_seeds",
                                 "n_reached", "samples_to_target", "samples_to_target_ci",
                                 "samples_to_target_per_seed", "time_to_target_s", "time_to_target_ci",
                                 "throughput_samples_per_s", "throughput_ci", "throughput_window", "best_score",
                                 "spread", "spread_df", "spread_sd")}
        row = {"run": name, **row, **v.rN.flat("rN"), **v.relative_throughput.flat("relative_throughput"),
               **v.relative_time.flat("relative_time"), "runs": e["runs"], "reached": e["reached"],
               "stopped": e.get("stopped"), "unfinished": e.get("unfinished") or [],
               "rN_at_least": v.rN_at_least.value if v.rN_at_least else None,
               "rN_at_least_lo": v.rN_at_least.lo if v.rN_at_least else None,
               "relative_time_at_least": v.relative_time_at_least.value if v.relative_time_at_least else None,
               "relative_time_at_least_lo": v.relative_time_at_least.lo if v.relative_time_at_least else None,
               "rN_at_most": v.rN_at_most.value if v.rN_at_most else None,
               "rN_at_most_hi": v.rN_at_most.hi if v.rN_at_most else None,
               "relative_time_at_most": v.relative_time_at_most.value if v.relative_time_at_most else None,
               "relative_time_at_most_hi": v.relative_time_at_most.hi if v.relative_time_at_most else None,
               "verdict": v.label, "why": v.why, "faster_than_reference": v.faster,
               "may_be_fastest": name in dec.may_be_fastest, "alignment": v.alignment,
               "rN_test": list(v.rN_test) if v.rN_test else None, "at_most": e.get("at_most") or []}
        if dec.reference is None and ref is not None:  # short probes: the reference has not reached the target
            c = compare(e, ests[ref]) if e is ests[ref] else compare(e, {**e, "samples_to_target": None,
                                                                         "throughput_samples_per_s": None,
                                                                         "_replicates": {}})
            row.update(c)
            row["verdict"] = verdict_label(None, None, is_reference=name == ref, reached=e["reached"],
                                           stopped=bool(e.get("stopped")), unfinished=bool(e.get("unfinished")))
        rows.append(row)
    h = headline(rows, ref if ref_ok else None, metric, target, runs, pick=dec.pick,
                 may_be_fastest=dec.may_be_fastest, beats_reference=dec.beats_reference,
                 would_decide=dec.would_decide, no_spread=dec.no_spread)
    h["levels"] = dec.levels
    h["comparisons"] = dec.comparisons
    if ref_ok and ests[ref]["n_seeds"] and ref != _smallest(ests):
        small = _smallest(ests)
        e = ests[small]
        h["bullets"].append(f"The reference is {ref}, not the smallest batch {small}: {e['n_reached']} of "
                            f"{e['n_seeds']} of its seeds reached the target (choose one with --reference).")
    retune = lr_retuning(rows, ref)
    if retune.rule is not None:
        h["lr_note"] = retune.sentence()
        apart = lr_rule_apart(rows, ref)
        if apart:
            words = {"none": "fixed LR", "sqrt": "square-root rule", "linear": "linear rule"}
            named = ", ".join(f"{r['run']} (B={r['batch_size']}, {words.get(r['lr_rule'], r['lr_rule'])})"
                              for r in apart)
            h["lr_note"] += (f" Not on it: {named}, whose rN measures its learning-rate setting as well as the batch"
                             + (" (the fixed-LR control)." if all(r["lr_rule"] == "none" for r in apart) else "."))
    shares = {name: clipped_share(rs) for name, rs in groups.items()}
    for row in rows:
        row["clipped_share"] = shares.get(row["run"])
    known = {n: v for n, v in shares.items() if v is not None}
    if len(known) >= 2 and max(known.values()) - min(known.values()) > 0.1:
        order = sorted(known, key=lambda n: (ests[n]["lr_rule"] == "none", ests[n]["batch_size"] or 0, n))
        h["clip_note"] = ("Not only the learning rate differs along the ladder: gradient clipping (max_grad_norm) "
                          "clipped these shares of the steps: " + ", ".join(
                              f"B={ests[n]['batch_size']}{' (fixed lr)' if ests[n]['lr_rule'] == 'none' else ''} "
                              f"{known[n]:.0%}" for n in order)
                          + "; where most steps are clipped Adam takes clipped gradients, elsewhere plain ones "
                          "(clipping re-weights steps), a difference each batch's rN includes.")
        h["bullets"].append(h["clip_note"])
    text, best, tied = headline_markdown(h), h["pick"], h["within_noise"]
    return {"rows": rows, "reference": ref, "recommendation": text, "headline": h, "best": best,
            "within_noise": tied, "clock": basis, "estimates": ests, "lr_retuning": retuning_json(retune),
            "decision": dec}


def clipped_share(runs: Sequence[Run]) -> float | None:
    """The share of optimizer steps whose gradient was clipped (``grad_clipped``, logged by the trainer per step)
    over a configuration's seeds; None when no run logs it."""
    v = [pd.to_numeric(r.metrics["grad_clipped"], errors="coerce").dropna().astype(float)
         for r in runs if isinstance(r.metrics, pd.DataFrame) and "grad_clipped" in r.metrics.columns]
    v = [x for x in v if len(x)]
    return float(pd.concat(v).mean()) if v else None


def _smallest(ests: dict[str, dict[str, Any]]) -> str | None:
    """The configuration the default reference would be if every seed reached the target: the smallest batch on an
    LR rule (:func:`default_reference` over all)."""
    return default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items())


def lr_retuning(rows: Sequence[dict[str, Any]], ref: str | None = None) -> LRRetuning:
    """How the compared configurations set the learning rate across batch sizes (:func:`rlbatch.scaling.
    detect_lr_rule` on each row's ``batch_size``, the update batch B of the LR rule, and peak ``lr``). Rows that
    declare an LR rule (``lr_rule``: runs of an rlbatch sweep, whose fixed-LR control sits beside its ladder) are
    judged within the reference's declared rule; rows from logs declare none and are judged together."""
    key = _declared_rule(rows, ref)
    return detect_lr_rule([(r["batch_size"], r["lr"]) for r in rows if r.get("lr_rule") == key])


def lr_rule_apart(rows: Sequence[dict[str, Any]], ref: str | None = None) -> list[dict[str, Any]]:
    """The rows that declare another LR rule than the one :func:`lr_retuning` judged (a sweep's fixed-LR control,
    ``lr_rule`` ``none`` beside a ``sqrt`` ladder); [] for logs, which declare none."""
    key = _declared_rule(rows, ref)
    return [r for r in rows if r.get("lr_rule") is not None and r.get("lr_rule") != key]


def _declared_rule(rows: Sequence[dict[str, Any]], ref: str | None) -> str | None:
    """The LR rule the comparison is judged within: the reference's declared ``lr_rule``, else the most common."""
    declared = [r.get("lr_rule") for r in rows]
    by = {r["run"]: r for r in rows}
    return by[ref].get("lr_rule") if ref in by else max(set(declared), key=declared.count, default=None)


def retuning_json(r: LRRetuning) -> dict[str, Any]:
    """:class:`rlbatch.scaling.LRRetuning` as the JSON of ``rlbatch analyze`` (``lr_retuning``): its fields, the
    points as ``[[B, lr], ...]`` and ``sentence`` (:meth:`LRRetuning.sentence`)."""
    d = dataclasses.asdict(r)
    d["points"] = [list(p) for p in r.points]
    d["sentence"] = r.sentence()
    return d


#: Keys of one accounting row (``rlbatch analyze --format json`` ``accounting``; ``rlbatch plan`` candidates carry
#: the same values under the same names).
ROW_KEYS = ("run", "batch_size", "samples_to_target", "samples_to_target_ci", "time_to_target_s", "time_to_target_ci",
            "throughput_samples_per_s", "throughput_ci", "rN", "rN_ci", "relative_throughput",
            "relative_throughput_ci", "relative_time", "relative_time_ci", "faster_than_reference", "verdict",
            "reached")


def intervals_overlap(a: Sequence[float] | None, b: Sequence[float] | None, pa: float, pb: float) -> bool:
    """Whether intervals ``a`` and ``b`` (None: the point estimates ``pa`` / ``pb``; an end None is unbounded:
    open below or above) overlap: the within-noise test of the accounting's and the plan's headlines."""
    a = a or [pa, pa]
    b = b or [pb, pb]
    lo_a = a[0] if a[0] is not None else float("-inf")  # an open lower end (a ratio to an open reference)
    lo_b = b[0] if b[0] is not None else float("-inf")
    hi_a = a[1] if a[1] is not None else float("inf")
    hi_b = b[1] if b[1] is not None else float("inf")
    return lo_a <= hi_b and lo_b <= hi_a


def check_target(target: float | None) -> None:
    """Refuse a target that no score can be compared with (NaN or infinite): a :class:`UserError` naming
    ``--target``. None (no target) passes."""
    if target is not None and not math.isfinite(target):
        raise UserError(f"--target must be a finite score, got {target!r}", field="target")


def summary_of(acc: dict[str, Any]) -> dict[str, Any]:
    """One comparison group's :func:`account_runs` result in :func:`accounting_summary`'s form."""
    return {"accounting": acc["rows"], "reference": acc["reference"], "recommendation": acc["recommendation"],
            "headline": acc["headline"], "within_noise": acc["within_noise"], "clock": acc["clock"],
            "aggregation": AGGREGATION, "lr_retuning": acc["lr_retuning"]}


def accounting_summary(runs: Sequence[Run], target: float, metric: str = "eval/score", reference: Any = None, *,
                       ema: float | None = None, sustained: bool = False, clock: str = "auto",
                       n_boot: int = N_BOOT, estimate: Estimator | None = None) -> dict[str, Any]:
    """The accounting as ``rlbatch analyze`` and the report give it: :func:`account_runs` per comparison group
    (:func:`comparison_groups`: runs of different models, tasks or algorithms are never compared with each other).

    Returns ``{"accounting": rows (each with ``comparison`` when there are several groups), "reference",
    "recommendation", "clock", "aggregation", "comparisons": [{model, task, algorithm, reference, recommendation,
    runs}] (several groups only)}``. Raises :class:`UserError` as :func:`account_runs`."""
    groups = comparison_groups(runs)
    if len(groups) == 1:
        return summary_of(account_runs(runs, target, metric, reference, ema=ema, sustained=sustained, clock=clock,
                                       n_boot=n_boot, estimate=estimate))

    rows, comps, texts, clocks = [], [], [], set()
    key = None if reference is None else str(reference)
    owner = None  # the group a run or configuration reference belongs to; a batch size (B64) applies to every group
    if key is not None and not re.fullmatch(r"[Bb]?\d+", key):
        owner = next((g for g, rs in groups.items() if key in {r.run_id for r in rs} | set(group_seeds(rs))), None)
        if owner is None:
            raise UserError(f"unknown reference {reference!r}; runs are: {', '.join(r.run_id for r in runs)}",
                            field="reference")
    for (model, task, alg), rs in groups.items():
        label = " / ".join(str(v) for v in (model, task, alg) if v is not None) or "unlabelled"
        mine = key is not None and (owner is None or owner == (model, task, alg))
        try:
            acc = account_runs(rs, target, metric, reference if mine else None, ema=ema, sustained=sustained,
                               clock=clock, n_boot=n_boot, estimate=estimate)
        except UserError as err:
            if owner == (model, task, alg):
                raise
            acc = {"rows": [], "reference": None, "recommendation": f"not accounted: {err}", "clock": None}
        if acc["clock"]:
            clocks.add(acc["clock"])
        rows += [{**r, "comparison": label} for r in acc["rows"]]
        comps.append({"model": model, "task": task, "algorithm": alg, "runs": [r.run_id for r in rs],
                      "reference": acc["reference"], "recommendation": acc["recommendation"],
                      "lr_retuning": acc.get("lr_retuning")})
        texts.append(f"**{label}** — {acc['recommendation']}")
    head = (f"These runs are of {len(groups)} different model / task / algorithm combinations, so they are not "
            "compared with each other (a batch-size comparison holds only within one): each is accounted "
            "separately. ")
    return {"accounting": rows, "reference": None, "recommendation": head + " ".join(texts), "within_noise": [],
            "headline": {"pick": None, "within_noise": [], "lines": [head.strip()], "bullets": texts},
            "clock": clocks.pop() if len(clocks) == 1 else "mixed", "aggregation": AGGREGATION, "comparisons": comps}


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


def fastest(rows: pd.DataFrame) -> str | None:
    """The run with the smallest relative time-to-target among those that reached the target (None if none)."""
    ok = rows[rows["relative_time"].notna()]
    if ok.empty:
        return None
    return str(ok.loc[ok["relative_time"].astype(float).idxmin(), "run"])


def to_json_rows(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts with :data:`JSON_KEYS` (None where not reached or unknown)."""
    out = []
    for rec in rows.to_dict(orient="records"):
        d = {}
        for k in JSON_KEYS:
            v = rec.get(k)
            if isinstance(v, float) and math.isnan(v):
                v = None
            d[k] = v
        d["reached"] = bool(rec.get("reached"))
        out.append(d)
    return out


# --------------------------------------------------------------------------------------------------- CSV input
def read_accounting_csv(path: Path | str) -> pd.DataFrame:
    """Read an accounting table (as ``shared/paper/hunyuan_grpo_accounting.csv``) into :func:`account`'s input.

    Columns: ``run, prompts_per_step, group_size, lr, samples_to_target`` and one of ``wall_clock_h``,
    ``wall_clock_s`` or ``throughput_samples_per_s``; an optional ``batch_size`` overrides P x G.
    ``samples_to_target`` may be empty or "not reached". Raises :class:`UserError` naming the file, line and column
    for a missing column, a non-numeric or negative cell, a duplicate run, or an empty file.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError("no such file", path=str(path))
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise UserError("empty file: expected a header line and one row per run", path=str(path)) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        raise UserError(f"not a readable CSV ({str(err).splitlines()[0]})", path=str(path)) from None
    df.columns = [c.strip() for c in df.columns]
    if df.empty:
        raise UserError("no rows: expected one row per run after the header", path=str(path))
    required = ["run", "prompts_per_step", "group_size", "samples_to_target"]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise UserError(f"missing column {missing[0]!r} (have: {', '.join(df.columns)})", path=str(path))
    time_cols = [c for c in ("wall_clock_h", "wall_clock_s", "throughput_samples_per_s") if c in df.columns]
    if not time_cols:
        raise UserError("missing column 'wall_clock_h' (or 'wall_clock_s' / 'throughput_samples_per_s')",
                        path=str(path))

    def num(value: str, col: str, line: int, *, allow_empty: bool, integer: bool = False) -> float | None:
        v = value.strip()
        if v.lower() in _NOT_REACHED_TOKENS:
            if allow_empty:
                return None
            raise UserError(f"column {col!r} is empty", path=str(path), line=line)
        try:
            x = float(v)
        except ValueError:
            raise UserError(f"column {col!r}: {v!r} is not a number", path=str(path), line=line) from None
        if not math.isfinite(x):
            raise UserError(f"column {col!r}: {v!r} is not finite", path=str(path), line=line)
        if x < 0 or (x == 0 and col != "samples_to_target"):
            raise UserError(f"column {col!r}: {v} must be positive", path=str(path), line=line)
        if x == 0:
            raise UserError(f"column {col!r}: 0 samples cannot reach a target", path=str(path), line=line)
        if integer and x != int(x):
            raise UserError(f"column {col!r}: {v} must be an integer", path=str(path), line=line)
        return x

    rows, seen = [], set()
    for i, rec in enumerate(df.to_dict(orient="records")):
        line = i + 2  # header is line 1
        run = rec["run"].strip()
        if not run:
            raise UserError("column 'run' is empty", path=str(path), line=line)
        if run in seen:
            raise UserError(f"duplicate run {run!r}", path=str(path), line=line)
        seen.add(run)
        p = num(rec["prompts_per_step"], "prompts_per_step", line, allow_empty=False, integer=True)
        g = num(rec["group_size"], "group_size", line, allow_empty=False, integer=True)
        b = p * g
        if "batch_size" in rec and rec["batch_size"].strip():
            b = num(rec["batch_size"], "batch_size", line, allow_empty=False, integer=True)
        lr = num(rec["lr"], "lr", line, allow_empty=True) if "lr" in rec else None
        s = num(rec["samples_to_target"], "samples_to_target", line, allow_empty=True)
        row = {"run": run, "prompts_per_step": int(p), "group_size": int(g), "batch_size": int(b), "lr": lr,
               "samples_to_target": s, "time_to_target_s": None, "throughput_samples_per_s": None}
        if "wall_clock_h" in rec:
            h = num(rec["wall_clock_h"], "wall_clock_h", line, allow_empty=True)
            row["time_to_target_s"] = h * 3600.0 if h is not None else None
        if row["time_to_target_s"] is None and "wall_clock_s" in rec:
            row["time_to_target_s"] = num(rec["wall_clock_s"], "wall_clock_s", line, allow_empty=True)
        if "throughput_samples_per_s" in rec:
            row["throughput_samples_per_s"] = num(rec["throughput_samples_per_s"], "throughput_samples_per_s",
                                                  line, allow_empty=True)
        if s is not None and row["time_to_target_s"] is None and row["throughput_samples_per_s"] is None:
            raise UserError(f"run {run!r} reached the target but has no wall-clock or throughput value",
                            path=str(path), line=line)
        rows.append(row)
    return pd.DataFrame(rows)


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
