"""End-to-end accounting: does a larger batch reach the target sooner? (the paper's "accelerate" test).

The one analysis core: every command (``account``, ``analyze``, ``plan``, the report, the sweeps, the demo) takes
samples-to-target, time-to-target, throughput, rN, relative time and the verdict from the functions here.

Per seed (one run), on the policy-sample axis (:func:`rlbatch.analysis.curves.curve`, evaluation at 0 kept):
    S  = samples-to-target, the first crossing of the target, linear between evaluation points
         (:func:`rlbatch.analysis.curves.samples_to_target`);
    T  = time-to-target, the clock logged at the crossing, interpolated like the samples
         (:func:`rlbatch.analysis.throughput.time_at`; wall-clock, or process CPU time on a shared CPU,
         :func:`rlbatch.analysis.throughput.clock_basis`).
Per configuration (its seeds; :func:`estimate_configuration`), **seed aggregation = the mean of the per-seed values**
(not the crossing of the seed-averaged curve, which is biased low):
    S = mean_i S_i,   T = mean_i T_i,   throughput X = S / T  (retained samples per second up to the target; over
    the whole run when the target is not reached).
Relative to a reference configuration (Li et al. 2026, end-to-end accounting, Table "J = 77%"):
    rN                  = S / S_ref                    (sample penalty; samples-to-target ratio)
    relative_throughput = X / X_ref
    relative_time       = T / T_ref = rN / relative_throughput
and a configuration is faster than the reference iff ``relative_throughput > rN``. A configuration some of whose
seeds never reached the target has no rN and no time-to-target: "not reached", never a number.

Intervals (95%, percentiles of replicates, Efron & Tibshirani 1993; :func:`estimate_configuration`): with two or
more seeds, Student's t interval of the seed mean on the log scale (:func:`rlbatch.analysis.interval.
seed_mean_replicates`: the seeds' spread holds sampling and evaluation noise, and the interval widens as seeds
shrink, where resampling two seeds would understate it), each configuration's spread moderated by the spreads of
the comparison's configurations (:func:`comparison_spread`, Smyth 2004's empirical Bayes prior: t with the prior's
degrees of freedom added to its own); with one seed, the evaluation
noise is resampled (binomial, sd sqrt(p(1-p)/n) per evaluation point when the number of evaluation items n is
logged, else the residuals around a 5-point moving average); timing noise in both cases by a moving-block bootstrap
of the steps (:func:`rlbatch.analysis.throughput.timing_factors`). Ratios take the candidate's and the reference's
replicates independently. The verdict follows the interval: ``faster`` / ``slower`` only when the interval of the
relative time lies wholly below / above 1, else ``within noise``.
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

from rlbatch.analysis.curves import (crossing, curve, ema_smooth, group_seeds, mean_last, moving_average,
                                     samples_to_target, summarize_run)
from rlbatch.analysis.interval import (SpreadPrior, bootstrap_interval, format_interval, moderated_spread,
                                      seed_mean_replicates, spread_prior, t_quantiles, uniform_ranks)
from rlbatch.analysis.throughput import (clock_basis, configuration_timings, run_clock, run_throughput, step_seconds,
                                         throughput_to_target, throughput_whole_run, time_at, timing_factors)
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
        r["faster_than_reference"], r["verdict"] = faster(label), label
    return pd.DataFrame(rows)



N_BOOT = 1000
CONF = 0.95
SMOOTH_WINDOW = 5


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


def _eval_noise(c: pd.DataFrame, metric: str, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) perturbed copies of one seed's curve ``c``: binomial noise when ``eval/n`` is logged, else the
    residuals around a centered moving average resampled."""

    y = c[metric].to_numpy(float)
    n = len(y)
    if "eval/n" in c.columns and c["eval/n"].notna().all() and (c["eval/n"] > 0).all():
        p = np.clip(y, 0.0, 1.0)
        sd = np.sqrt(np.maximum(p * (1 - p), 1e-4) / c["eval/n"].to_numpy(float))
        return y[None, :] + rng.standard_normal((n_boot, n)) * sd[None, :]
    sm = moving_average(y, SMOOTH_WINDOW)
    res = y - sm
    return sm[None, :] + res[rng.integers(0, n, (n_boot, n))]


def seed_estimate(run: Run, target: float | None, metric: str = "eval/score", *, ema: float | None = None,
                  sustained: bool = False, clock: str = "wall") -> dict[str, Any]:
    """One seed: ``samples_to_target`` (S, responses; None = not reached), ``time_to_target_s`` (T, seconds on
    ``clock``), ``samples`` / ``seconds`` (whole run), and the curve and clock the bootstrap perturbs."""

    c = curve(run, metric)
    clk = run_clock(run, clock)
    s = samples_to_target(c, target, metric, ema=ema, sustained=sustained) if target is not None else None
    t = time_at(clk, s) if s is not None else None
    return {"run": run.run_id, "seed": run.meta.seed, "samples_to_target": s, "time_to_target_s": t,
            "samples": float(clk[0][-1]) if clk is not None else None,
            "seconds": float(clk[1][-1]) if clk is not None else None, "_curve": c, "_clock": clk}


def estimate_configuration(runs: Sequence[Run], target: float | None, metric: str = "eval/score", *,
                           ema: float | None = None, sustained: bool = False, clock: str = "wall",
                           n_boot: int = N_BOOT, seed: int | None = None, name: str | None = None,
                           spread: SpreadPrior | None = None) -> dict[str, Any]:
    """Samples-to-target, time-to-target and throughput of one configuration (its seeds ``runs``), with intervals.

    Seed aggregation (module docstring): the mean over seeds of per-seed S and T; X = S / T. When any seed did
    not reach ``target`` (or no target): S, T None and X = mean whole-run samples / mean whole-run seconds.
    Intervals: ``samples_to_target_ci``, ``time_to_target_ci``, ``throughput_ci`` (95% percentile bootstrap:
    Student's t on the log scale over seeds when two or more, else evaluation noise; timing noise by block bootstrap
    of steps). ``spread``: the comparison's prior on the seed spread (:func:`comparison_spread`), which moderates
    this configuration's own (:func:`rlbatch.analysis.interval.moderated_spread`) when it has two or more seeds that
    all reached the target and have a clock. ``seed``
    fixes the bootstrap (default: from the configuration's name, so a configuration's interval does not depend on
    which others are analysed with it). The replicates stay in ``_replicates`` for ratios (:func:`compare`).

    Returns a dict with ``config, batch_size, prompts_per_step, group_size, lr, lr_rule, runs, n_seeds, n_reached,
    reached, samples_to_target(_ci), samples_to_target_per_seed, time_to_target_s, time_to_target_ci,
    throughput_samples_per_s, throughput_ci, throughput_window ("to target" | "whole run"), clock``.
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
        "samples_to_target": float(S.mean()) if reached else None, "samples_to_target_ci": None,
        "time_to_target_s": float(T.mean()) if timed else None, "time_to_target_ci": None,
        "throughput_samples_per_s": None, "throughput_ci": None, "clock": clock,
        "throughput_window": "to target" if reached else "whole run",
        "best_score": max((float(it["_curve"][metric].max()) for it in items if len(it["_curve"])), default=None),
        "stopped": None, "unfinished": [], "samples_to_target_at_least": None}
    if not reached:
        stops = [getattr(r.meta, "stopped_early", None) for r in runs]
        stop = next((x for x in stops if x), None)
        if stop is not None:  # the adaptive sweep stopped it before every seed got there: no verdict on the batch
            est["stopped"] = {"state": stop.get("state"), "why": stop.get("why"),
                              "samples": min(float(it["samples"] or 0.0) for it in items)}
        else:
            est["unfinished"] = [r.run_id for r, it in zip(runs, items)
                                 if it["samples_to_target"] is None and still_running(r)]
        if target is not None and all(it["samples"] is not None for it in items):
            # each seed needs at least the samples it has run (or its crossing): a lower bound on the mean
            est["samples_to_target_at_least"] = float(np.mean([
                it["samples_to_target"] if it["samples_to_target"] is not None else it["samples"] for it in items]))
    S_b = T_b = None
    # one quantile level per replicate, shared by S, T and the whole-run throughput (comonotone t draws)
    u = uniform_ranks(n_boot, rng) if k >= 2 and n_boot >= 1 else None
    z = t_quantiles(u, k - 1) if u is not None else None
    s_S = s_T = None
    zS = zT = z
    if spread is not None and timed and u is not None and np.all(S > 0) and np.all(T > 0):
        s_S, df_S = moderated_spread(np.log(S), spread.S_d0, spread.S_s0)
        s_T, df_T = moderated_spread(np.log(T), spread.T_d0, spread.T_s0)
        zS, zT = t_quantiles(u, df_S), t_quantiles(u, df_T)
        est["spread_df"] = {"S": df_S, "T": df_T}
    est["spread"] = "moderated" if s_S is not None else ("seeds" if k >= 2 else "evaluations")
    if reached:
        if k >= 2:
            idx = None
            S_b = seed_mean_replicates(S, zS, s_log=s_S)
        else:
            c = items[0]["_curve"]
            ys = _eval_noise(c, metric, n_boot, rng)
            if ema:
                ys = np.array([ema_smooth(y, float(ema)) for y in ys])
            S_b = crossing(c["samples/retained"].to_numpy(float), ys, target, sustained=sustained)
            S_b[np.isnan(S_b)] = np.inf  # a replicate that never reaches the target: beyond any sample count
            idx = np.zeros((n_boot, 1), dtype=int)
        if timed:
            F = np.array([timing_factors(step_seconds(it["_clock"], it["samples_to_target"]), n_boot, rng)
                          for it in items])  # (k, n_boot)
            if k >= 2:
                T_b = seed_mean_replicates(T, zT, s_log=s_T) * F.mean(axis=0)
            else:
                with np.errstate(invalid="ignore"):
                    t_at = np.where(np.isfinite(S_b), time_at(items[0]["_clock"], np.where(np.isfinite(S_b), S_b,
                                                                                            0.0)), np.inf)
                T_b = t_at * F[0]
        est["samples_to_target_ci"] = bootstrap_interval(S_b)
        est["time_to_target_ci"] = bootstrap_interval(T_b)
    # throughput: to the target when reached (X = S / T), else over the whole run
    if timed and est["samples_to_target"] > 0 and est["time_to_target_s"] > 0:
        est["throughput_samples_per_s"] = throughput_to_target(est["samples_to_target"], est["time_to_target_s"])
        with np.errstate(invalid="ignore", divide="ignore"):
            X_b = np.where(np.isfinite(S_b) & np.isfinite(T_b), throughput_to_target(S_b, T_b), np.nan)
    else:
        tot_s = np.array([np.nan if it["samples"] is None else it["samples"] for it in items])
        tot_t = np.array([np.nan if it["seconds"] is None else it["seconds"] for it in items])
        X_b = None
        if np.isfinite(tot_s).all() and np.isfinite(tot_t).all() and tot_t.sum() > 0 and tot_s.sum() > 0:
            est["throughput_samples_per_s"] = float(throughput_whole_run(tot_s.mean(), tot_t.mean()))
            est["throughput_window"] = "whole run"
            F = np.array([timing_factors(step_seconds(it["_clock"]), n_boot, rng) for it in items])
            if k >= 2:  # the seeds' own rates, their mean's t interval on the log scale, with timing noise
                X_b = seed_mean_replicates(tot_s / tot_t, z) / F.mean(axis=0)
            else:
                X_b = throughput_whole_run(tot_s[0], tot_t[0] * F[0])
    est["throughput_ci"] = bootstrap_interval(X_b)
    est["_replicates"] = {"S": S_b, "T": T_b, "X": X_b}
    return est


def comparison_spread(groups: dict[str, list[Run]], target: float | None, metric: str = "eval/score", *,
                      ema: float | None = None, sustained: bool = False, clock: str = "wall") -> SpreadPrior | None:
    """The prior on the seed spread of samples- and time-to-target from the configurations ``groups`` of one
    comparison (:func:`rlbatch.analysis.interval.spread_prior` of each configuration's per-seed values, from
    :func:`seed_estimate`); configurations with a seed that did not reach ``target`` or has no clock do not count.
    None without a target or with fewer than three configurations of two or more seeds."""
    if target is None:
        return None
    samples, times = [], []
    for rs in groups.values():
        if len(rs) < 2:
            continue
        items = [seed_estimate(r, target, metric, ema=ema, sustained=sustained, clock=clock) for r in rs]
        s = [it["samples_to_target"] for it in items]
        t = [it["time_to_target_s"] for it in items]
        if all(v is not None for v in s + t):
            samples.append(s)
            times.append(t)
    return spread_prior(samples, times)


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


#: verdicts of a configuration that was not measured to the target: no statement on the batch itself
STOPPED, UNFINISHED = "stopped early", "unfinished"


def verdict_label(relative_time: float | None, ci: Sequence[float] | None, *, is_reference: bool = False,
                  reached: bool = True, stopped: bool = False, unfinished: bool = False) -> str:
    """The decision for one configuration: ``reference``, ``stopped early`` (an adaptive sweep stopped it before
    every seed reached the target), ``unfinished`` (its trials had not finished: still running, or interrupted),
    ``not reached`` (it ran its budget without reaching the target), ``unknown`` (no throughput), ``faster`` /
    ``slower`` (the interval of the relative time lies wholly below / above 1; the point estimate when there is no
    interval) or ``within noise`` (the interval contains 1). One verdict per configuration: the headline, the
    tables and the aligned family all read this one."""
    if is_reference:
        return "reference"
    if not reached and stopped:
        return STOPPED
    if not reached and unfinished:
        return UNFINISHED
    if not reached:
        return "not reached"
    if relative_time is None:
        return "unknown"
    if ci is None or ci[0] is None or ci[1] is None:
        return "faster" if relative_time < 1 else "slower"
    if ci[1] < 1:
        return "faster"
    if ci[0] > 1:
        return "slower"
    return "within noise"


def faster(verdict: str) -> bool:
    """``faster_than_reference``: whether the verdict (:func:`verdict_label`) is ``faster``, so the flag and the
    verdict column never disagree (a point estimate below 1 whose interval contains 1 is ``within noise``, not
    faster)."""
    return verdict == "faster"


#: Default tolerance of the aligned family: rN <= 1 + TOLERANCE (the plan's and the report's ``--tolerance``).
TOLERANCE = 0.1


def aligned(rn: float | None, on_rule: bool, tol: float = TOLERANCE) -> bool:
    """Whether one batch size belongs to the aligned family (DESIGN.md; Li et al. 2026, "align"): on the
    reference's LR rule and samples-to-target ratio ``rn <= 1 + tol`` (False when rN is unknown)."""
    return bool(on_rule and rn is not None and rn <= 1.0 + tol)


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
                 estimate: Estimator | None = None) -> dict[str, Any]:
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
    configuration's bootstrap once per study); default :func:`estimate_configuration`."""
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
    rows = []
    for name, e in ests.items():
        c = compare(e, ests[ref]) if ref is not None and (e is ests[ref] or ests[ref]["reached"]) else compare(e, {**e, "samples_to_target": None,
                                                                       "throughput_samples_per_s": None,
                                                                       "_replicates": {}})
        row = {k: e[k] for k in ("batch_size", "prompts_per_step", "group_size", "lr", "lr_rule", "n_seeds",
                                 "n_reached", "samples_to_target", "samples_to_target_ci",
                                 "samples_to_target_per_seed", "time_to_target_s", "time_to_target_ci",
                                 "throughput_samples_per_s", "throughput_ci", "throughput_window", "best_score")}
        row = {"run": name, **row, **c, "runs": e["runs"], "reached": e["reached"], "stopped": e.get("stopped"),
               "unfinished": e.get("unfinished") or [], "rN_at_least": None}
        s_ref = ests[ref]["samples_to_target"] if ref is not None else None
        if not e["reached"] and e.get("samples_to_target_at_least") and s_ref:
            row["rN_at_least"] = e["samples_to_target_at_least"] / s_ref  # rN is more than this: it ran so far
        label = verdict_label(row["relative_time"], row["relative_time_ci"], is_reference=name == ref,
                              reached=e["reached"], stopped=bool(e.get("stopped")),
                              unfinished=bool(e.get("unfinished")))
        row["faster_than_reference"], row["verdict"] = faster(label), label
        rows.append(row)
    ref_ok = ref is not None and ests[ref]["reached"] and bool(ests[ref]["samples_to_target"])
    h = headline(rows, ref if ref_ok else None, metric, target, runs)
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
    text, best, tied = headline_markdown(h), h["pick"], h["within_noise"]
    return {"rows": rows, "reference": ref, "recommendation": text, "headline": h, "best": best,
            "within_noise": tied, "clock": basis, "estimates": ests, "lr_retuning": retuning_json(retune)}


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


def _iv(ci: Sequence[float] | None, spec: str = ".2f") -> str:
    return f" (95% CI {format_interval(ci, spec)})" if ci else ""


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


#: Verdicts the decision rule rejects (the headline's third line, :func:`rlbatch.report.family.rejected`).
REJECTED = ("slower", "not reached")

#: The one definition of "within noise" (the headline, the verdict column and the plan use it):
#: :func:`intervals_overlap` of the 95% intervals of the relative time-to-target.
def check_target(target: float | None) -> None:
    """Refuse a target that no score can be compared with (NaN or infinite): a :class:`UserError` naming
    ``--target``. None (no target) passes."""
    if target is not None and not math.isfinite(target):
        raise UserError(f"--target must be a finite score, got {target!r}", field="target")


WITHIN_NOISE = ("A is \"within noise of\" B when their 95% intervals of the relative time-to-target overlap (the "
                "reference's is exactly 1, so the verdict column's \"within noise\" means the interval contains 1).")


def batch_list(bs: Sequence[Any]) -> str:
    """Batch sizes as words, each named (never a span that would take in those between): ``B=32``, ``B=32 and
    B=128``, ``B=32, B=64 and B=512``."""
    items = [f"B={b}" for b in sorted({b for b in bs if b is not None})]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def _name(r: dict[str, Any]) -> str:
    return f"{r['run']} (B={r['batch_size']})" if r.get("batch_size") else str(r["run"])


#: at most this many seeds per configuration, "within noise" is said as "too few seeds to separate": a t interval
#: with one degree of freedom is about 6x wider than with many seeds (t_{0.975,1} = 12.7 vs 1.96)
FEW_SEEDS = 2


def few_seeds_text(rows: Sequence[dict[str, Any]]) -> str:
    """"2 seeds each" or "1-2 seeds per configuration": the seed counts behind a "too few seeds" sentence."""
    ns = sorted({int(r.get("n_seeds") or 0) for r in rows})
    return f"{ns[0]} seed{'s' if ns[0] != 1 else ''} each" if len(ns) == 1 else \
        f"{ns[0]}-{ns[-1]} seeds per configuration"


def stopped_text(r: dict[str, Any]) -> str:
    """One stopped-early configuration in words: its name, why and at how many samples the adaptive sweep stopped
    it, and the rN it had at least (it had not reached the target after that many samples)."""
    st = r.get("stopped") or {}
    at = st.get("samples")
    return (f"{_name(r)} stopped at {at:,.0f} samples ({st.get('state')}: {st.get('why')})" if at else
            f"{_name(r)} stopped ({st.get('state')}: {st.get('why')})") + (
        f", rN > {r['rN_at_least']:.2f} by then" if r.get("rN_at_least") else "")


def headline(rows: list[dict[str, Any]], ref: str | None, metric: str, target: float,
             runs: Sequence[Run] = ()) -> dict[str, Any]:
    """The accounting's headline: at most three ``lines`` (the pick with its interval; which others are within
    noise of it; what was rejected and why) and ``bullets`` (one sentence per other configuration, then notes such
    as mixed hardware), with ``pick`` (the configuration with the smallest relative time-to-target; None when
    nothing can be compared) and ``within_noise`` (the others whose 95% interval of the relative time overlaps the
    pick's, :data:`WITHIN_NOISE`). Callers may append bullets (e.g. how the learning rate was set)."""
    out: dict[str, Any] = {"pick": None, "within_noise": [], "lines": [], "bullets": []}
    if ref is None:
        reached = [r["run"] for r in rows if r["reached"]]
        if reached:
            out["lines"] = [f"No pick: runs {', '.join(reached)} reached {metric} ≥ {target:g}, but none has a measured "
                            "clock (no per-step timings in the logs) and a target reached after training began, so "
                            "time-to-target cannot be compared."]
        elif rows and not any(r.get("batch_size") for r in rows):
            out["lines"] = [f"No samples-to-target: no run's log gives its batch size (P x G), so its {metric} "
                            "cannot be placed on the retained-sample axis; supply it with --set "
                            "RUN:prompts_per_step=P --set RUN:group_size=G (rlbatch inspect FILE says what is "
                            "missing)."]
        elif rows and all(r.get("best_score") is None for r in rows):
            out["lines"] = [f"No run logs {metric}: nothing to compare at a target. Choose the score with --metric "
                            "(e.g. eval/score, reward/mean; rlbatch inspect FILE lists what each log holds)."]
        else:
            best = max(rows, key=lambda r: r.get("best_score") if r.get("best_score") is not None else -1e300,
                       default=None)
            bv = best.get("best_score") if best else None
            out["lines"] = [f"No run reached {metric} ≥ {target:g}" +
                            (f"; the best was {best['run']} at {bv:.4g}. " if bv is not None else ". ") +
                            "Train longer, or choose a lower target, before comparing batch sizes."]
        return out
    by = {r["run"]: r for r in rows}
    if len(rows) == 1:
        out.update(pick=ref, lines=[f"Only one configuration ({ref}, B={rows[0]['batch_size']}): nothing to compare "
                                    "it with."])
        return out
    ok = [r for r in rows if r["relative_time"] is not None]
    b = min(ok, key=lambda r: (r["relative_time"], r["batch_size"] or 0))
    rej = [r for r in rows if r.get("verdict") in REJECTED]
    stopped = [r for r in rows if r.get("verdict") == STOPPED]
    unfinished = [r for r in rows if r.get("verdict") == UNFINISHED]
    # one verdict per configuration: a rejected one is never also "within noise of the pick"
    # the reference is not listed as tied with a best estimate that does not beat it: the first line says so
    tied = [r for r in ok if r is not b and r["run"] != ref and r not in rej and intervals_overlap(
        r["relative_time_ci"], b["relative_time_ci"], r["relative_time"], b["relative_time"])]
    out["pick"], out["within_noise"] = b["run"], [r["run"] for r in tied]
    out["beats_reference"] = b["run"] != ref and b.get("verdict") == "faster"
    if b["run"] == ref:
        first = (f"**Pick: {_name(b)}, the reference.** No other configuration has a smaller relative "
                 f"time-to-target at {metric} ≥ {target:g}.")
    elif b.get("verdict") != "faster":
        first = (f"**No batch beats the reference {_name(by[ref])} beyond noise** at {metric} ≥ {target:g}. The best "
                 f"estimate is {_name(b)}: {b['relative_time']:.2f}x{_iv(b['relative_time_ci'])} the reference's "
                 f"time-to-target (throughput {b['relative_throughput']:.2f}x{_iv(b['relative_throughput_ci'])} "
                 f"against a sample penalty rN = {b['rN']:.2f}{_iv(b['rN_ci'])}), an interval that contains 1.")
    else:
        first = (f"**Pick: {_name(b)}**, {b['relative_time']:.2f}x{_iv(b['relative_time_ci'])} the reference "
                 f"{by[ref]['run']}'s time-to-target at {metric} ≥ {target:g}: throughput "
                 f"{b['relative_throughput']:.2f}x{_iv(b['relative_throughput_ci'])} against a sample penalty rN = "
                 f"{b['rN']:.2f}{_iv(b['rN_ci'])}.")
    what = "the pick" if out["beats_reference"] or b["run"] == ref else "the best estimate"
    few = min([r.get("n_seeds") or 0 for r in [b, *tied, by[ref]]]) <= FEW_SEEDS
    if tied:
        second = f"Within noise of {what}: {', '.join(_name(r) for r in tied)}; " + (
            f"too few seeds to separate them ({few_seeds_text([b, *tied, by[ref]])}): run more seeds."
            if few else "more seeds or longer timing would separate them.")
    elif b["run"] != ref and b.get("verdict") != "faster" and few:
        second = (f"Too few seeds to separate it from the reference ({few_seeds_text([b, by[ref]])}): run more "
                  "seeds. No other configuration is within noise of the best estimate.")
    else:
        second = f"No other configuration is within noise of {what}."
    if rej:
        why = {"slower": "slower than the reference beyond noise", "not reached": "did not reach the target"}
        third = "Rejected: " + "; ".join(f"{_name(r)}, {why[r['verdict']]}" + (
            f" ({r['relative_time']:.2f}x{_iv(r['relative_time_ci'])}: samples-to-target grew by rN = "
            f"{r['rN']:.2f}{_iv(r['rN_ci'])}, throughput only {r['relative_throughput']:.2f}x"
            f"{_iv(r['relative_throughput_ci'])})" if r["verdict"] == "slower" else
            f" ({r.get('n_reached', 0)}/{r.get('n_seeds', '?')} seeds within the budget"
            + (f"; rN > {r['rN_at_least']:.2f}" if r.get("rN_at_least") else "")
            + (f", throughput only {r['relative_throughput']:.2f}x" if r.get("relative_throughput") else "")
            + ")") for r in rej) + "."
    else:
        third = "Rejected: none (no configuration is slower than the reference beyond noise or missed the target)."
    out["lines"] = [first, second, third]
    if stopped:
        out["lines"].append("Stopped early by the adaptive sweep (not measured to the target, so no verdict on the "
                            "batch itself): " + "; ".join(stopped_text(r) for r in stopped) + ".")
    if unfinished:
        out["lines"].append("Unfinished: " + "; ".join(
            f"{_name(r)} ({len(r['unfinished'])} of {r.get('n_seeds', '?')} seed(s) still running or interrupted"
            + (f", rN > {r['rN_at_least']:.2f} so far" if r.get("rN_at_least") else "") + ")" for r in unfinished)
                            + ". The verdicts above are provisional until they finish (rerun the same sweep "
                            "command to resume).")
        out["provisional"] = True
    out["bullets"] = [verdict(r, ref) for r in rows if r["run"] not in (ref, b["run"])
                      and r.get("verdict") not in (STOPPED, UNFINISHED)]  # those have their line above
    hw = {str(r.meta.hardware) for r in runs if r.meta.hardware}
    if len(hw) > 1:
        out["bullets"].append(f"Caution: these runs used different hardware ({'; '.join(sorted(hw))}), so throughput "
                              "ratios compare hardware as well as batch size.")
    return out


def headline_markdown(h: dict[str, Any]) -> str:
    """A :func:`headline` as Markdown: its lines (hard line breaks), then its bullets (one per configuration, then
    how the learning rate was set across batch sizes, ``lr_note``, when known)."""
    text = "  \n".join(h["lines"])
    bullets = list(h["bullets"]) + ([h["lr_note"]] if h.get("lr_note") else [])
    if bullets:
        text += "\n\n" + "\n".join(f"- {b}" for b in bullets)
    return text


def recommendation(rows: list[dict[str, Any]], ref: str | None, metric: str, target: float,
                   runs: Sequence[Run] = ()) -> tuple[str, str | None, list[str]]:
    """The recommendation (Markdown, :func:`headline_markdown` of :func:`headline`), the pick and the
    configurations within noise of it."""
    h = headline(rows, ref, metric, target, runs)
    return headline_markdown(h), h["pick"], h["within_noise"]


AGGREGATION = ("Seeds of one configuration are combined as the mean of their per-seed samples-to-target and "
               "time-to-target (each seed's first crossing of the target, linear between evaluations, the "
               "evaluation at 0 samples included); throughput = samples-to-target / time-to-target. 95% intervals: "
               "Student's t interval of the seed mean on the log scale, each configuration's seed spread moderated "
               "by the spreads of all the configurations compared (empirical Bayes, Smyth 2004: they lend it "
               "degrees of freedom as far as they agree), so it widens as seeds shrink without each 2-3-seed "
               "spread standing alone; the evaluation noise for a single seed; and a bootstrap over blocks of steps "
               "for timing noise.")


def clock_note(clock: str) -> str:
    """One sentence on the clock that time-to-target and throughput were measured on."""
    if clock == "cpu":
        return ("Time is the trainer's process CPU time (time/cpu_s): the runs ran on CPU, where other processes "
                "sharing the cores (parallel trials, other users) stretch the wall-clock but not the work done.")
    return "Time is the logged wall-clock (time/wall_s, evaluation excluded where the log allows)."


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


def verdict(row: dict[str, Any], reference: str) -> str:
    """One sentence on an accounting row: throughput gain vs sample penalty rN with their intervals, and the
    decision as :func:`verdict_label` (``within noise`` when the interval of the relative time contains 1)."""
    run = row["run"]
    if run == reference:
        return f"{run} is the reference."
    if row.get("verdict") == STOPPED:
        return f"{stopped_text(row)}: stopped early, not measured to the target."
    if row.get("verdict") == UNFINISHED:
        return (f"{run} is unfinished ({len(row.get('unfinished') or [])} seed(s) still running or interrupted)"
                + (f"; rN > {row['rN_at_least']:.2f} so far" if row.get("rN_at_least") else "") + ": no verdict yet.")
    if not row.get("reached"):
        n = f" ({row['n_reached']}/{row['n_seeds']} seeds reached it)" if row.get("n_seeds") else ""
        low = f"; rN > {row['rN_at_least']:.2f}" if row.get("rN_at_least") else ""
        return f"{run} did not reach the target within its budget{n}{low}: not reached, so it cannot be faster."
    if row.get("relative_throughput") is None or row.get("relative_time") is None:
        return f"{run}: throughput unknown, no decision."
    gain, rn, rel = row["relative_throughput"], row["rN"], row["relative_time"]
    nums = (f"throughput gain {gain:.2f}x{_iv(row.get('relative_throughput_ci'))} vs sample penalty "
            f"rN={rn:.2f}{_iv(row.get('rN_ci'))}; {rel:.2f}x{_iv(row.get('relative_time_ci'))} the reference's "
            "time-to-target")
    label = row.get("verdict") or verdict_label(rel, row.get("relative_time_ci"))
    if label == "faster":
        return f"{run} is faster ({nums})."
    if label == "slower":
        return f"{run} is slower ({nums})."
    few = (f"; too few seeds to separate ({row['n_seeds']} seed{'s' if row['n_seeds'] != 1 else ''})"
           if 0 < (row.get("n_seeds") or 0) <= FEW_SEEDS else "")
    return f"{run} is within noise of the reference ({nums}{few})."


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
