"""Gradient noise: the simple noise scale, the grad-norm vs batch fit and the knee, G x P equivalence, seeds.

McCandlish, Kaplan, Amodei et al. (2018), "An Empirical Model of Large-Batch Training", appendix A: with squared
norms of the mean gradient measured at a small batch B_small and a big batch B_big,

    |G|^2     ~= (B_big * |G_big|^2 - B_small * |G_small|^2) / (B_big - B_small)      (unbiased)
    tr(Sigma) ~= (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)                (unbiased)
    B_simple   = tr(Sigma) / |G|^2

In the trainer both come for free each step: the micro-batch gradients (B_small = micro-batch size, |G_small|^2 the
mean of their squared norms) and the accumulated full-batch gradient (B_big = B).

Grad norm vs batch (Li et al. 2026, "When Do Larger Batches Help Scale LLM RL?", gradient-norm proxy): inside the
batch-size-invariant range the full-batch gradient norm is dominated by noise, |g_B| ~ sqrt(tr(Sigma) / B), so
log |g| vs log B has slope -1/2 and each doubling multiplies the norm by 1/sqrt(2) = 0.707. Past the critical batch
(the knee) the norm flattens towards |G| (paper: P=2048->4096 ratio 0.823; PPO B=2048->4096 ratio 0.905; in-range
slopes -0.468 GRPO, -0.471 PPO).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from rlbatch.analysis.accounting import compare, estimate_configuration
from rlbatch.analysis.curves import curve
from rlbatch.analysis.interval import percentile_interval
from rlbatch.errors import UserError

INV_SQRT2 = 1.0 / math.sqrt(2.0)
X = "samples/retained"


def noise_estimates(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> tuple[float, float]:
    """Unbiased estimates ``(|G|^2, tr(Sigma))`` from squared gradient norms at two batch sizes.

    ``g_small_sq``: squared L2 norm of the mean gradient over B_small samples (averaged over several small batches
    if available); ``g_big_sq``: the same over B_big samples. Units: squared gradient units. Source: McCandlish et al.
    2018, appendix A, eqs. A.2-A.3. Raises ``ValueError`` unless ``0 < b_small < b_big``.
    """
    if not (0 < b_small < b_big):
        raise ValueError(f"need 0 < b_small < b_big, got b_small={b_small}, b_big={b_big}")
    g2 = (b_big * g_big_sq - b_small * g_small_sq) / (b_big - b_small)
    trace = (g_small_sq - g_big_sq) / (1.0 / b_small - 1.0 / b_big)
    return g2, trace


def b_simple(g_small_sq: float, g_big_sq: float, b_small: float, b_big: float) -> float:
    """The simple noise scale B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, eq. 2.8 and appendix A).

    Units: samples (the same unit as ``b_small``/``b_big``). Returns NaN when the |G|^2 estimate is not positive
    (a single step's estimate is noisy; smooth the two estimates over steps before dividing, see
    :func:`b_simple_smoothed`).
    """
    g2, trace = noise_estimates(g_small_sq, g_big_sq, b_small, b_big)
    if not (g2 > 0) or not math.isfinite(g2) or not math.isfinite(trace):
        return float("nan")
    return trace / g2


# --------------------------------------------------------------------------------------------------- B_simple over time
def b_simple_smoothed(metrics: pd.DataFrame, alpha: float = 0.1, x: str = X) -> pd.DataFrame:
    """Per-step and smoothed simple noise scale over training from the per-step ``noise/*`` metrics.

    ``metrics``: one row per optimizer step with ``noise/grad_sq_small``, ``noise/grad_sq_big``, ``noise/b_small``,
    ``noise/b_big`` (as logged by the trainer). The unbiased estimates of |G|^2 and tr(Sigma) are computed per step
    (:func:`noise_estimates`), each smoothed with an exponential moving average of weight ``alpha`` on the newest step,
    and only then divided (McCandlish et al. 2018, appendix A.1: the ratio of the smoothed estimates is far less noisy
    than a smoothed ratio). When only ``noise/b_simple`` is present (e.g. a foreign log), its rolling median over
    ~1/alpha steps is returned instead.

    GRPO logs of the prompt layout (they carry ``noise/group_size``; :func:`rlbatch.train.grpo.grpo_noise_metrics`)
    have their small batch made of whole groups, so the same two inputs give the unbiased |G|^2 and the per-response
    trace G tr(Sigma_b) + tr(Sigma_w) even though responses of one prompt are correlated; their per-step
    ``noise/between_prompt`` (tr Sigma_b) and ``noise/within_prompt`` (tr Sigma_w) estimates are smoothed the same
    way. Older GRPO logs whose micro-batches cut groups (``noise/b_small`` < G) keep the bias of treating a prompt's
    responses as independent (B_simple too small); nothing in their inputs can undo it.

    Returns a DataFrame with columns ``step``, ``samples/retained`` (if present), ``g2``, ``trace``, ``weight``
    (the step's inverse-variance weight for pooling, (B_big - B_small)^2: the estimate's sd scales as
    tr(Sigma) / (B_big - B_small)), ``b_simple_step`` (per-step ratio, NaN where |G|^2 <= 0) and ``b_simple``
    (smoothed), in samples (responses),
    and ``between_prompt``, ``within_prompt`` (smoothed tr Sigma_b, tr Sigma_w, squared gradient units; NaN when
    not logged). Raises :class:`UserError` if neither the inputs nor ``noise/b_simple`` are present, or ``alpha``
    not in (0, 1].
    """
    if not (0 < alpha <= 1):
        raise UserError(f"alpha must be in (0, 1], got {alpha}", field="alpha")
    cols = ["noise/grad_sq_small", "noise/grad_sq_big", "noise/b_small", "noise/b_big"]
    out = pd.DataFrame(index=metrics.index)
    out["step"] = metrics["step"] if "step" in metrics else np.arange(1, len(metrics) + 1)
    if x in metrics:
        out[x] = metrics[x]
    if all(c in metrics for c in cols):
        d = metrics[cols].astype(float)
        ok = (d["noise/b_small"] > 0) & (d["noise/b_big"] > d["noise/b_small"]) & d.notna().all(axis=1)
        d = d[ok]
        out = out[ok].copy()
        bs, bb = d["noise/b_small"], d["noise/b_big"]
        gs, gb = d["noise/grad_sq_small"], d["noise/grad_sq_big"]
        out["g2"] = (bb * gb - bs * gs) / (bb - bs)
        out["trace"] = (gs - gb) / (1.0 / bs - 1.0 / bb)
        out["b_simple_step"] = np.where(out["g2"] > 0, out["trace"] / out["g2"].where(out["g2"] > 0), np.nan)
        # inverse-variance weight of the step's |G|^2 estimate: its sd scales as tr(Sigma) / (B_big - B_small)
        out["weight"] = (bb - bs) ** 2
        g2s = out["g2"].ewm(alpha=alpha, adjust=True).mean()
        trs = out["trace"].ewm(alpha=alpha, adjust=True).mean()
        out["b_simple"] = np.where(g2s > 0, trs / g2s.where(g2s > 0), np.nan)
        for col, name in (("between_prompt", "noise/between_prompt"), ("within_prompt", "noise/within_prompt")):
            v = metrics.loc[ok, name].astype(float) if name in metrics else pd.Series(np.nan, index=out.index)
            out[col] = v.ewm(alpha=alpha, adjust=True).mean() if v.notna().any() else np.nan
        return out.reset_index(drop=True)
    if "noise/b_simple" in metrics:
        s = metrics["noise/b_simple"].astype(float)
        out["g2"] = np.nan
        out["trace"] = np.nan
        out["weight"] = np.nan
        out["b_simple_step"] = s
        out["b_simple"] = s.rolling(max(1, int(round(1 / alpha))), min_periods=1).median()
        out["between_prompt"] = np.nan
        out["within_prompt"] = np.nan
        return out.reset_index(drop=True)
    raise UserError("no gradient-noise metrics: need noise/grad_sq_small, noise/grad_sq_big, noise/b_small, "
                    "noise/b_big (or noise/b_simple)", field="noise/b_simple")


def _noise_steps(runs: Sequence[Any]) -> tuple[list[tuple[Any, pd.DataFrame]], list[tuple[Any, list[float]]]]:
    """Each run's per-step unbiased |G|^2 and tr(Sigma) estimates (:func:`b_simple_smoothed`, rows with both), and
    the per-step ``noise/b_simple`` of foreign logs that log only that."""
    full, foreign = [], []
    for r in runs:
        try:
            d = b_simple_smoothed(r.metrics)
        except UserError:
            continue
        if not d["g2"].notna().any():  # a foreign log with only the per-step noise/b_simple
            v = d["b_simple_step"].dropna().tolist()
            if v:
                foreign.append((r, v))
            continue
        d = d.dropna(subset=["g2", "trace"])
        if len(d):
            full.append((r, d))
    return full, foreign


def _pooled_b_simple(ds: Sequence[pd.DataFrame], rng: np.random.Generator, n_boot: int, block: int,
                     conf: float) -> dict[str, Any]:
    """B_simple = mean tr(Sigma) / mean |G|^2 over every step of the runs ``ds`` (their :func:`b_simple_smoothed`
    frames; means weighted by each step's inverse-variance ``weight``, so that steps of large batches, whose |G|^2
    estimates are far less noisy, count for more: equal weights at one batch size), with a percentile bootstrap resampling the runs (two or more) and, within each, blocks of ``block``
    consecutive steps; a replicate whose mean |G|^2 is <= 0 is unbounded above. ``b_simple`` is None when the mean
    |G|^2 itself is <= 0 (not measurable at this scale); the interval's lower end is then still a lower bound."""
    w = [d["weight"].to_numpy(float) if "weight" in d else np.ones(len(d)) for d in ds]
    g2 = [d["g2"].to_numpy(float) * wi for d, wi in zip(ds, w)]  # weighted: a ratio of weighted sums below
    tr = [d["trace"].to_numpy(float) * wi for d, wi in zip(ds, w)]
    n_steps = int(sum(len(x) for x in g2))
    row: dict[str, Any] = {"b_simple": None, "ci": None, "n_runs": len(ds), "steps": n_steps, "reason": None,
                           "measurable": False}
    mg, mt = float(np.sum(np.concatenate(g2))), float(np.sum(np.concatenate(tr)))
    if mg > 0:
        row["b_simple"] = mt / mg
    if n_steps < 2 * block:
        row["reason"] = f"only {n_steps} steps with noise metrics: too few for an interval"
        return row
    reps = np.empty(n_boot)
    for i in range(n_boot):
        pick = rng.integers(0, len(ds), len(ds)) if len(ds) >= 2 else [0]
        sg = st = 0.0
        for k in pick:
            n = len(g2[k])
            bl = max(1, min(block, n))
            starts = rng.integers(0, n - bl + 1, int(math.ceil(n / bl)))
            idx = (starts[:, None] + np.arange(bl)[None, :]).ravel()[:n]
            sg += g2[k][idx].sum()
            st += tr[k][idx].sum()
        reps[i] = st / sg if sg > 0 else np.inf
    big = np.finfo(float).max  # an unbounded replicate (mean |G|^2 <= 0): beyond any finite value
    reps = np.where(np.isfinite(reps), reps, big)
    lo, hi = percentile_interval(reps, conf, "nearest")
    row["ci"] = [lo if lo < big else None, hi if hi < big else None]
    if row["b_simple"] is None:
        row["reason"] = (f"the mean |G|^2 estimate over {n_steps} steps is not positive (the gradient signal is "
                         "below the noise): B_simple is larger than these steps can measure")
        if row["ci"][0] is None:
            row["ci"] = None
            row["reason"] += ", and most resamples give no lower bound either"
    elif row["ci"][0] is None:
        row["ci"], row["reason"] = None, "most resamples have a mean |G|^2 <= 0: not even a lower bound"
    elif row["ci"][1] is None:
        row["reason"] = "the interval has no upper end (some resamples have a mean |G|^2 <= 0)"
    else:
        row["measurable"] = True
    return row


def _median_b_simple(values: Sequence[float], rng: np.random.Generator, n_boot: int, block: int,
                     conf: float) -> dict[str, Any]:
    """B_simple of a log that has only the per-step ``noise/b_simple`` ratios: their median, a value <= 0 (a step
    whose |G|^2 estimate was negative: the ratio has passed its pole) counting as larger than any finite value, with
    a bootstrap over blocks of ``block`` steps. ``b_simple`` None when the median itself is beyond every finite
    value; the interval's open ends None."""
    v = np.asarray(values, float)
    v = np.where(v > 0, v, np.inf)
    n = len(v)
    med = float(np.median(v))
    row: dict[str, Any] = {"b_simple": med if math.isfinite(med) else None, "ci": None, "n_runs": None,
                           "steps": n, "measurable": False, "reason": None}
    if n < 2 * block:
        row["reason"] = f"only {n} steps with noise/b_simple: too few for an interval"
        return row
    bl = min(block, n)
    reps = np.empty(n_boot)
    for i in range(n_boot):
        starts = rng.integers(0, n - bl + 1, int(math.ceil(n / bl)))
        idx = (starts[:, None] + np.arange(bl)[None, :]).ravel()[:n]
        reps[i] = np.median(v[idx])
    big = np.finfo(float).max
    lo, hi = percentile_interval(np.where(np.isfinite(reps), reps, big), conf, "nearest")
    row["ci"] = [lo if lo < big else None, hi if hi < big else None]
    if row["ci"][0] is None:
        row["ci"], row["reason"] = None, "most steps' |G|^2 estimates are negative: not even a lower bound"
    elif row["b_simple"] is None or row["ci"][1] is None:
        row["reason"] = "the interval has no upper end (many steps' |G|^2 estimates are negative)"
    else:
        row["measurable"] = True
    return row


def retained_batch(runs: Sequence[Any]) -> dict[int, float]:
    """Per nominal batch size B, the mean retained responses per optimizer step over its runs' steps (the big batch
    of the noise estimator, ``noise/b_big``, where logged; else the step's increment of ``samples/retained``):
    B_simple is in retained responses, so it is compared with this, not with the nominal P x G."""
    out: dict[int, list[float]] = {}
    for r in runs:
        b, m = r.meta.batch_size, r.metrics
        if not b or not isinstance(m, pd.DataFrame) or not len(m):
            continue
        if "noise/b_big" in m.columns and m["noise/b_big"].notna().any():
            v = pd.to_numeric(m["noise/b_big"], errors="coerce").dropna()
        elif "samples/retained" in m.columns:
            v = pd.to_numeric(m["samples/retained"], errors="coerce").dropna().diff().dropna()
        else:
            continue
        out.setdefault(int(b), []).extend(float(x) for x in v if x > 0)
    return {b: float(np.mean(v)) for b, v in out.items() if v}


def b_simple_by_batch(runs: Sequence[Any], n_boot: int = 1000, seed: int = 0, block: int = 10,
                      conf: float = 0.95) -> list[dict[str, Any]]:
    """B_simple per batch size with its interval, or the reason it has none: the runs at one B pooled (every
    step's unbiased tr(Sigma) and |G|^2 estimates, :func:`b_simple_smoothed`), B_simple = mean tr(Sigma) / mean
    |G|^2 (McCandlish et al. 2018, appendix A.1: average the estimates, then divide). Interval: percentile
    bootstrap (``conf``) resampling the seeds (two or more) and, within each, blocks of ``block`` consecutive steps
    (the estimates of neighbouring steps are correlated); a replicate whose mean |G|^2 is <= 0 is unbounded above.

    Returns one row per B, ascending: ``batch_size``, ``b_simple`` (responses; None with its ``reason``),
    ``ci`` [lo, hi] (hi None = unbounded) or None with ``reason``, ``measurable`` (a value with a bounded
    interval), ``n_runs`` (runs with noise metrics), ``steps``, ``retained_batch`` (:func:`retained_batch`: the
    retained responses per step B_simple is to be compared with, in its units).
    """
    full, foreign = _noise_steps([r for r in runs if r.meta.batch_size is not None])
    by: dict[int, list[pd.DataFrame]] = {}
    fb: dict[int, list[float]] = {}
    for r, d in full:
        by.setdefault(int(r.meta.batch_size), []).append(d)
    for r, v in foreign:
        fb.setdefault(int(r.meta.batch_size), []).extend(v)
    rng = np.random.default_rng(seed)
    retained = retained_batch(runs)
    out = []
    for b in sorted(set(by) | set(fb)):
        if b not in by:
            out.append({"batch_size": b, **_median_b_simple(fb[b], rng, n_boot, block, conf),
                        "retained_batch": retained.get(b)})
            continue
        out.append({"batch_size": b, **_pooled_b_simple(by[b], rng, n_boot, block, conf),
                    "retained_batch": retained.get(b)})
    return out


def b_simple_pooled(runs: Sequence[Any], n_boot: int = 1000, seed: int = 0, block: int = 10,
                    conf: float = 0.95) -> dict[str, Any] | None:
    """One B_simple for a study: every step of every run with noise metrics pooled across batch sizes and seeds
    (the estimators are unbiased at any B, so the steps of all rungs measure the same per-response tr(Sigma) and
    |G|^2 of the task and model, over the stretch of training the runs cover), with the bootstrap of
    :func:`b_simple_by_batch` resampling the runs. Returns ``{"b_simple", "ci", "measurable", "reason", "n_runs",
    "steps", "batch_sizes"}`` (``measurable``: a value with a bounded interval; otherwise ``ci[0]`` is at most a
    lower bound and the report says "not measurable at this scale"), or None without noise metrics. Foreign logs
    with only ``noise/b_simple``: the median of their per-step values with a block bootstrap. The plan's noise model takes
    its B_noise from here (:func:`rlbatch.analysis.noise_model.b_noise_from_gradients`)."""
    full, foreign = _noise_steps(runs)
    if full:
        row = _pooled_b_simple([d for _, d in full], np.random.default_rng(seed), n_boot, block, conf)
        bs = sorted({int(r.meta.batch_size) for r, _ in full if r.meta.batch_size is not None})
        return {**row, "batch_sizes": bs}
    if foreign:
        v = [x for _, xs in foreign for x in xs]
        row = _median_b_simple(v, np.random.default_rng(seed), n_boot, block, conf)
        return {**row, "n_runs": len(foreign), "batch_sizes": sorted({int(b) for r, _ in foreign if (
            b := getattr(getattr(r, "meta", None), "batch_size", None)) is not None})}
    return None


def b_simple_overall(metrics: pd.DataFrame, skip_frac: float = 0.0) -> float:
    """One B_simple for a whole run: mean tr(Sigma) estimate / mean |G|^2 estimate over its steps.

    ``skip_frac`` drops that fraction of the first steps (warm-up). Units: samples. NaN when the mean |G|^2 <= 0 or
    the inputs are missing. Source: McCandlish et al. 2018, appendix A.1 (average the unbiased estimates, then divide).
    For GRPO logs of the prompt layout this is (G mean tr Sigma_b + mean tr Sigma_w) / mean |G|^2, unbiased
    (:func:`b_simple_smoothed`); for foreign logs with only ``noise/b_simple``, the median per-step value.
    """
    try:
        d = b_simple_smoothed(metrics)
    except UserError:
        return float("nan")
    d = d.iloc[int(len(d) * skip_frac):]
    if d["g2"].notna().any():
        g2, tr = d["g2"].mean(), d["trace"].mean()
        return float(tr / g2) if g2 > 0 else float("nan")
    return float(d["b_simple_step"].median()) if len(d) else float("nan")


# --------------------------------------------------------------------------------------------------- GRPO split
def grpo_noise_split(sq_micro: float, sq_prompt: float, sq_big: float, responses_per_micro: float, group_size: int,
                     prompts: int, *, sq_small: float | None = None,
                     prompts_per_small: float = 1.0) -> dict[str, float]:
    """Split the gradient noise of a GRPO batch into a between-prompt and a within-prompt part.

    Layout it needs (:func:`rlbatch.train.grpo.prompt_layout`): micro-batches laid out *by prompt*, some (or all)
    prompts' G = ``group_size`` responses taken in parts of ``s = responses_per_micro`` responses of that one
    prompt (s < G; the harmonic mean size when the parts are unequal). Per step the trainer logs squared norms,
    all of mean gradients (gradient of the mean loss over the responses concerned):

    - ``sq_micro``:  mean over the parts of |g_part|^2;
    - ``sq_prompt``: mean over the same prompts of |g_prompt|^2 (the G responses of one prompt, its parts summed);
    - ``sq_big``:    |g_big|^2 over the whole step (P = ``prompts`` prompts x G responses);
    - ``sq_small``:  mean |g_u|^2 over units of whole groups (``prompts_per_small`` prompts per unit, harmonic
      mean) covering the step; default ``sq_prompt`` with 1 prompt per unit (every prompt was split).

    Model: a response's gradient is ``G_true + u_p + e_pi`` with prompt effect u_p (covariance Sigma_b) and
    within-prompt noise e_pi (covariance Sigma_w; for merely exchangeable responses, e.g. coupled by group-normalised
    advantages, Sigma_b is the covariance of two different responses of one prompt and its trace may be negative),
    so the mean of n responses of one prompt has
    E|.|^2 = |G|^2 + tr(Sigma_b) + tr(Sigma_w)/n, and m whole groups of distinct prompts have E|.|^2 = |G|^2 +
    N_p/m with N_p = tr(Sigma_b) + tr(Sigma_w)/G the noise per prompt. The unbiased two-batch idea of McCandlish
    et al. (2018, appendix A) at the nested levels gives

        tr(Sigma_w) = (sq_micro - sq_prompt) / (1/s - 1/G)      (paired: u_p cancels)
        N_p         = (sq_small - sq_big) / (1/m - 1/P)         (m = prompts_per_small)
        |G|^2       = (P sq_big - m sq_small) / (P - m)
        tr(Sigma_b) = N_p - tr(Sigma_w)/G

    (with ``sq_small = sq_prompt``, m = 1 this is the same as solving the three equations for sq_micro, sq_prompt,
    sq_big). Returns ``g2`` (|G|^2), ``trace_between``, ``trace_within``, ``trace`` (= G tr_b + tr_w: the
    per-response trace, so that the noise scale in responses is trace / |G|^2), ``between_fraction`` (= tr_b /
    (tr_b + tr_w)), ``b_simple_prompts`` = N_p / |G|^2 (noise scale in prompts at this G) and
    ``b_simple_responses`` = (G tr_b + tr_w) / |G|^2 (= G x that); the ratios are NaN when |G|^2 <= 0. Units:
    squared gradient units; noise scales in prompts / responses. Single-step estimates are noisy: average the inputs
    (or these linear estimates) over steps before dividing. Raises :class:`UserError` unless ``1 <= s < G`` and
    ``1 <= prompts_per_small < prompts``.
    """
    s, g, p = float(responses_per_micro), int(group_size), int(prompts)
    m = float(prompts_per_small)
    if not (1 <= s < g):
        raise UserError(f"need 1 <= responses_per_micro < group_size, got {s:g} and {g} (lay micro-batches out by "
                        "prompt with a group split over at least two micro-batches)", field="responses_per_micro")
    if p < 2 or not (1 <= m < p):
        raise UserError(f"need at least 2 prompts per step and 1 <= prompts_per_small < prompts, got prompts {p} "
                        f"and prompts_per_small {m:g}", field="prompts")
    small = sq_prompt if sq_small is None else sq_small
    tw = (sq_micro - sq_prompt) / (1.0 / s - 1.0 / g)
    n_p = (small - sq_big) / (1.0 / m - 1.0 / p)
    g2 = (p * sq_big - m * small) / (p - m)
    tb = n_p - tw / g
    tot = tb + tw
    bp = n_p / g2 if g2 > 0 else float("nan")
    return {"g2": g2, "trace_between": tb, "trace_within": tw, "trace": g * tb + tw,
            "between_fraction": tb / tot if tot > 0 else float("nan"),
            "b_simple_prompts": bp, "b_simple_responses": g * bp}


# --------------------------------------------------------------------------------------------------- bootstrap
def bootstrap_grouped(groups: dict[Any, Sequence[Any]], statistic: Callable[[dict], float], n_boot: int = 1000,
                      conf: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap resampling *within* each group (e.g. seeds within each batch size) at once.

    ``groups`` maps a key (batch size, run name) to its items (one per seed); ``statistic`` maps a resampled dict of
    the same shape to a float (e.g. a slope over batch sizes, or rN = samples-to-target ratio of two configurations).
    Returns ``(lo, hi)``; NaN when no group has two or more items.
    """
    if not any(len(v) >= 2 for v in groups.values()):
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        res = {k: [v[i] for i in rng.integers(0, len(v), len(v))] for k, v in groups.items()}
        s = statistic(res)
        if s is not None and np.isfinite(s):
            vals.append(s)
    if not vals:
        return (float("nan"), float("nan"))
    return percentile_interval(vals, conf)


# --------------------------------------------------------------------------------------------------- grad norm vs B
def matched_window(runs: Sequence[Any], metric: str = "grad_norm/actor", x: str = X) -> tuple[float, float] | None:
    """The retained-sample range every run covers: [max of the runs' first x, min of their last x] (where ``metric``
    is logged). None when the runs do not overlap. Units: retained samples."""
    lo, hi = -math.inf, math.inf
    for r in runs:
        m = r.metrics
        if metric not in m or x not in m:
            continue
        d = m[[x, metric]].dropna()
        if not len(d):
            continue
        lo, hi = max(lo, float(d[x].min())), min(hi, float(d[x].max()))
    if not math.isfinite(lo) or not math.isfinite(hi) or hi < lo:
        return None
    return lo, hi


def grad_norm_points(runs: Sequence[Any], metric: str = "grad_norm/actor", window: tuple[float, float] | None = None,
                     x: str = X) -> pd.DataFrame:
    """One point per run: the mean of ``metric`` over the retained-sample ``window`` (default: :func:`matched_window`,
    so every run is compared over the same stretch of training). A step counts when the retained samples it covers,
    (the previous logged step's x, its own x], overlap the window: a large-batch step can span more than the whole
    window (researcher finding 11: B = 2048's steps at 1,900 and 3,900 retained samples around a window of
    [2,100, 3,000] left it "no step in the window" though its second step trained through all of it). Returns
    columns ``run``, ``batch_size``, ``seed``, ``value``, ``n_steps``; runs without the metric or without ``batch_size`` are skipped."""
    if window is None:
        window = matched_window(runs, metric, x)
    rows = []
    for r in runs:
        m, b = r.metrics, r.meta.batch_size
        if b is None or metric not in m:
            continue
        d = m[[c for c in (x, metric) if c in m]].dropna()
        if window is not None and x in d:
            start = m[x].ffill().shift(1).fillna(0.0).loc[d.index].astype(float)  # where each step's span begins
            d = d[(d[x] >= window[0]) & (start <= window[1])]
        v = d[metric].astype(float)
        v = v[v > 0]
        if not len(v):
            continue
        rows.append({"run": r.run_id, "batch_size": int(b), "seed": r.meta.seed, "value": float(v.mean()),
                     "n_steps": int(len(v))})
    return pd.DataFrame(rows, columns=["run", "batch_size", "seed", "value", "n_steps"])


def doubling_ratio_flag(ratio: float, batch_ratio: float = 2.0, tol: float = 0.08,
                        ratio_ci: Sequence[float] | None = None) -> bool:
    """True when a measured grad-norm ratio for a batch step has flattened past the noise-dominated expectation
    ``batch_ratio ** -0.5`` (1/sqrt(2) per doubling): ``ratio / expected - 1 > tol`` (one-sided: past the critical
    batch the norm stops falling, Li et al. 2026; a steeper drop is not a knee) and, with the ratio's interval
    ``ratio_ci`` (seeds at both batch sizes), its lower end above the expectation (beyond noise).

    Default tol 0.08: the paper's in-range slopes (-0.468, -0.471) give 0.72 per doubling (2% off) and are inside;
    its past-knee doublings (0.823, 0.905; 16% and 28% off) are flagged. Source: Li et al. 2026, gradient-norm proxy.
    """
    expected = batch_ratio ** -0.5
    if ratio / expected - 1.0 <= tol:
        return False
    return ratio_ci is None or ratio_ci[0] is None or ratio_ci[0] > expected


def ratio_interval(a: Sequence[float], b: Sequence[float], conf: float = 0.95) -> list[float] | None:
    """The ``conf`` interval of the ratio of geometric means gm(b) / gm(a) of two positive samples (the seeds'
    mean gradient norms at two batch sizes), Welch's t on the log scale; None with fewer than two values on either
    side or no spread."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    if len(la) < 2 or len(lb) < 2:
        return None
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    se = math.sqrt(va + vb)
    if not se > 0:
        return None
    df = (va + vb) ** 2 / ((va ** 2 / (len(la) - 1) if va else 0.0) + (vb ** 2 / (len(lb) - 1) if vb else 0.0))
    t = float(stats.t.ppf(0.5 + conf / 2, df))
    d = float(lb.mean() - la.mean())
    return [math.exp(d - t * se), math.exp(d + t * se)]


def loglog_fit(b: np.ndarray, v: np.ndarray, conf: float) -> dict[str, Any]:
    """Least-squares line of log ``v`` against log ``b`` (1-D arrays of equal length, positive): ``slope`` with its
    t-interval at ``conf`` (``slope_ci``; NaN with two points), ``intercept``, ``r2``, ``n_points``; all NaN with
    fewer than two distinct ``b``. The report draws the fitted line of :func:`fit_grad_norm_scaling` with it."""
    lb, lv = np.log(b), np.log(v)
    n = len(lb)
    if n < 2 or np.ptp(lb) == 0:
        return {"slope": float("nan"), "slope_ci": [float("nan"), float("nan")], "intercept": float("nan"),
                "r2": float("nan"), "n_points": int(n)}
    res = stats.linregress(lb, lv)
    if n > 2:
        t = stats.t.ppf(0.5 + conf / 2, n - 2)
        ci = [float(res.slope - t * res.stderr), float(res.slope + t * res.stderr)]
    else:
        ci = [float("nan"), float("nan")]
    return {"slope": float(res.slope), "slope_ci": ci, "intercept": float(res.intercept),
            "r2": float(res.rvalue ** 2), "n_points": int(n)}


def fit_grad_norm_scaling(runs_or_frame: Any, metric: str = "grad_norm/actor", *,
                          window: tuple[float, float] | None = None, tol: float = 0.08, conf: float = 0.95,
                          n_boot: int = 1000, seed: int = 0,
                          fit_batches: Sequence[int] | None = None) -> dict[str, Any]:
    """Log-log fit of the (actor or critic) gradient norm against batch size B across runs, and the knee.

    ``runs_or_frame``: a list of :class:`rlbatch.runstore.Run` (each reduced to the mean of ``metric`` over the
    matched retained-sample window, see :func:`grad_norm_points`) or a DataFrame with columns ``batch_size`` and
    ``value`` (one row per run; several rows per B = seeds). Values of equal B are averaged (geometric mean).

    Per consecutive pair of batch sizes: ``ratio`` = norm(B_hi)/norm(B_lo) with its interval over seeds
    (``ratio_ci``, :func:`ratio_interval`; None with one run per B) against ``expected`` = (B_lo/B_hi)^0.5
    (1/sqrt(2) per doubling), flagged by :func:`doubling_ratio_flag` (one-sided: the norm flattens). The knee is
    the lower B of the first flagged step (a point estimate without seeds; not by itself the critical batch); the slope (with a t-interval at ``conf``) is fitted over the aligned part, B <= knee (all
    points when no knee), and also over all points (``slope_all``). With seeds at two or more B a percentile
    bootstrap interval of the slope over seeds is added (``slope_ci_bootstrap``). Source: Li et al. 2026 (slope -1/2
    and ratio 1/sqrt(2) in the aligned range; McCandlish et al. 2018 for why: noise-dominated norm ~ B^-1/2).

    Returns a dict: metric, window, points [{batch_size, value, n_runs}], doublings [{b_from, b_to, ratio, expected,
    departure, past_knee}], knee_batch (None if no knee), slope, slope_ci, intercept, r2, n_points, fit_batches,
    fit_range (``"given"``: over ``fit_batches``, e.g. the aligned family of the accounting, when two or more of
    them were measured; else ``"below the knee"``), slope_all, slope_all_ci, slope_ci_bootstrap. Raises
    :class:`UserError` with fewer than two distinct batch sizes.
    """
    if isinstance(runs_or_frame, pd.DataFrame):
        pts = runs_or_frame.copy()
        if "batch_size" not in pts or "value" not in pts:
            raise UserError("grad-norm frame needs columns batch_size and value", field="batch_size")
    else:
        runs = list(runs_or_frame)
        if window is None:
            window = matched_window(runs, metric)
        pts = grad_norm_points(runs, metric, window)
    pts = pts[(pts["value"] > 0) & pts["batch_size"].notna()]
    if pts["batch_size"].nunique() < 2:
        raise UserError(f"need runs at two or more batch sizes with {metric} to fit its scaling, "
                        f"got {pts['batch_size'].nunique()}", field=metric)
    pts = pts.assign(logv=np.log(pts["value"].astype(float)))
    agg = pts.groupby("batch_size").agg(logv=("logv", "mean"), n_runs=("logv", "size")).reset_index()
    agg = agg.sort_values("batch_size")
    bs = agg["batch_size"].to_numpy(float)
    vs = np.exp(agg["logv"].to_numpy())
    doublings, knee = [], None
    per_b = {int(b): list(np.exp(g["logv"])) for b, g in pts.groupby("batch_size")}
    for i in range(len(bs) - 1):
        ratio, br = vs[i + 1] / vs[i], bs[i + 1] / bs[i]
        exp_ = br ** -0.5
        rci = ratio_interval(per_b[int(bs[i])], per_b[int(bs[i + 1])], conf)
        flag = doubling_ratio_flag(ratio, br, tol, rci)
        doublings.append({"b_from": int(bs[i]), "b_to": int(bs[i + 1]), "ratio": float(ratio), "ratio_ci": rci,
                          "expected": float(exp_), "departure": float(ratio / exp_ - 1.0), "past_knee": flag})
        if flag and knee is None:
            knee = int(bs[i])
    inside = bs <= knee if knee is not None else np.ones_like(bs, bool)
    fit_range = "below the knee"
    if fit_batches is not None and np.isin(bs, list(fit_batches)).sum() >= 2:
        inside, fit_range = np.isin(bs, list(fit_batches)), "given"
    fit = loglog_fit(bs[inside], vs[inside], conf)
    fit_all = loglog_fit(bs, vs, conf)
    out: dict[str, Any] = {
        "metric": metric, "window": list(window) if window is not None else None,
        "points": [{"batch_size": int(b), "value": float(v), "n_runs": int(n)}
                   for b, v, n in zip(bs, vs, agg["n_runs"])],
        "doublings": doublings, "knee_batch": knee, "tolerance": tol, **fit,
        "fit_batches": [int(b) for b in bs[inside]], "fit_range": fit_range,
        "slope_all": fit_all["slope"], "slope_all_ci": fit_all["slope_ci"],
    }
    groups = {int(b): list(np.exp(g["logv"])) for b, g in pts.groupby("batch_size") if int(b) in out["fit_batches"]}
    if len(groups) >= 2 and any(len(v) >= 2 for v in groups.values()):
        def slope_of(res: dict) -> float:
            kb = np.array(sorted(res), float)
            kv = np.array([np.exp(np.mean(np.log(res[int(k)]))) for k in kb])
            return loglog_fit(kb, kv, conf)["slope"]
        out["slope_ci_bootstrap"] = list(bootstrap_grouped(groups, slope_of, n_boot=n_boot, conf=conf, seed=seed))
    else:
        out["slope_ci_bootstrap"] = None
    return out


# --------------------------------------------------------------------------------------------------- G x P equivalence
def _curve(run: Any, metric: str, x: str = X) -> pd.DataFrame:
    return curve(run, metric, x)


def gp_equivalence(runs: Sequence[Any], metric: str = "eval/score", target: float | None = None,
                   grid_points: int = 50, x: str = X,
                   estimate: Callable[[list[Any]], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """G x P equivalence: runs with the same B = P x G but different (P, G), compared on the retained-sample axis.

    Runs are grouped by batch size; within a group each distinct (P, G) is one configuration (several seeds of it are
    averaged on the grid). The reference of a group is the configuration with the largest P. For each other
    configuration: ``max_deviation`` = max |curve - reference| on ``grid_points`` points over the retained-sample
    range both cover (linear interpolation; units of ``metric``), and, when ``target`` is given, ``rN`` =
    samples-to-target / the reference's (None when either never reaches it). Source: Li et al. 2026 (equal P x G
    runs overlay on the retained-sample axis).

    ``estimate``: a configuration's runs -> its accounting estimate (a study's
    :meth:`rlbatch.analysis.study.Study.configuration_estimate`, so the report bootstraps each configuration once);
    default :func:`rlbatch.analysis.accounting.estimate_configuration` at ``target``.

    Returns one dict per compared configuration: batch_size, reference (P, G), prompts_per_step, group_size, runs,
    max_deviation, mean_deviation, rN, rN_ci (bootstrap over seeds when several seeds exist).
    """
    cfgs: dict[tuple[int, int, int], list[Any]] = {}
    for r in runs:
        p, g, b = r.meta.prompts_per_step, r.meta.group_size, r.meta.batch_size
        if p is None or g is None or b is None or not len(_curve(r, metric, x)):
            continue
        cfgs.setdefault((b, p, g), []).append(r)
    out = []
    for b in sorted({k[0] for k in cfgs}):
        keys = sorted([k for k in cfgs if k[0] == b], key=lambda k: -k[1])
        if len(keys) < 2:
            continue
        ref = keys[0]
        for k in keys[1:]:
            curves_ref = [_curve(r, metric, x) for r in cfgs[ref]]
            curves_k = [_curve(r, metric, x) for r in cfgs[k]]
            lo = max(c[x].min() for c in curves_ref + curves_k)
            hi = min(c[x].max() for c in curves_ref + curves_k)
            row: dict[str, Any] = {"batch_size": b, "reference": {"prompts_per_step": ref[1], "group_size": ref[2]},
                                   "prompts_per_step": k[1], "group_size": k[2],
                                   "runs": [r.run_id for r in cfgs[k]], "max_deviation": None,
                                   "mean_deviation": None, "rN": None, "rN_ci": None}
            if hi > lo:
                grid = np.linspace(lo, hi, grid_points)
                yr = np.mean([np.interp(grid, c[x], c[metric]) for c in curves_ref], axis=0)
                yk = np.mean([np.interp(grid, c[x], c[metric]) for c in curves_k], axis=0)
                dev = np.abs(yk - yr)
                row["max_deviation"], row["mean_deviation"] = float(dev.max()), float(dev.mean())
            if target is not None:  # the accounting's rN (rlbatch.analysis.accounting)
                if estimate is None:
                    e_ref = estimate_configuration(cfgs[ref], target, metric, n_boot=500, name=f"B{b}-P{ref[1]}")
                    e_k = estimate_configuration(cfgs[k], target, metric, n_boot=500, name=f"B{b}-P{k[1]}")
                else:
                    e_ref, e_k = estimate(cfgs[ref]), estimate(cfgs[k])
                if e_ref["reached"] and e_ref["samples_to_target"]:
                    c = compare(e_k, e_ref)
                    row["rN"], row["rN_ci"] = c["rN"], c["rN_ci"]
            out.append(row)
    return out


# --------------------------------------------------------------------------------------------------- report section
