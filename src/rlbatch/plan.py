"""``rlbatch plan``: align, then accelerate — predict time-to-target for candidate batch sizes and recommend one.

Time-to-target relative to a reference batch (Li et al. 2026, end-to-end accounting):

    predicted_relative_time(B) = rN(B) / relative_throughput(B)

and a candidate is faster than the reference iff its throughput gain exceeds its sample penalty rN. The plan
recommends the candidate with the smallest predicted relative time.

Where each number comes from (``rN_source`` / ``throughput_source`` in the output):

- ``rN`` **measured**: every seed of the candidate and of the reference reached the target: samples-to-target
  (first crossing, linear interpolation; :func:`rlbatch.analysis.curves.samples_to_target`) over the reference's.
- ``rN`` **curve**: some run has not reached the target yet (short probes): the samples each run needs to reach
  the highest (moving-average smoothed) score that both the candidate's and the reference's runs have reached,
  ``level = min(target, smoothed best of every run of the pair)``, in the same ratio. Inside the aligned family
  curves on the retained-sample axis overlay, so the ratio at a lower level predicts the ratio at the target.
- ``rN`` **noise-model**: a batch without runs: McCandlish et al. (2018), eq. 2.11: samples to reach a given loss
  grow with B as ``E/E_min = 1 + B / B_noise``, so relative to the reference
  ``rN(B) = (1 + B / B_noise) / (1 + B_ref / B_noise)``. ``B_noise`` is fitted to the measured/curve rN of the
  runs on the square-root LR rule (``b_noise.source = "fit to rN"``), else taken from the simple noise scale
  B_simple of the runs' ``noise/*`` metrics (``"B_simple"``, McCandlish et al. 2018 appendix A), else from the
  gradient-norm vs B fit |g_B|^2 = |G|^2 + tr(Sigma)/B (``"grad-norm fit"``, the same fit whose departure from
  B^-1/2 marks the knee; :func:`rlbatch.analysis.noise.fit_grad_norm_scaling`).
- Intervals of rN: percentile bootstrap (Efron & Tibshirani 1993) resampling the seeds of each side when several,
  and always the residuals of each curve around its moving average (the interval from curve noise); for the
  noise model, B_noise fitted to the ends of the measured intervals (or B_simple's spread). The interval of the
  predicted relative time is the rN interval divided by the relative throughput (throughput taken as exact).
- throughput **measured** (median per-step retained samples / second of the runs, :func:`rlbatch.analysis.
  throughput.step_timings`), **model** (the fitted time model of :mod:`rlbatch.analysis.throughput` for batches
  without runs), **profile** (the same model fitted to a ``rlbatch profile`` JSON: every candidate), **table**
  (samples-to-target / wall-clock of an accounting table) or **interpolated** (log-log between table rows).

A candidate is in the *aligned family* when it is on the square-root LR rule and rN <= 1 + tolerance (DESIGN.md).
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.errors import UserError
from rlbatch.runstore import Run

X = "samples/retained"
SMOOTH_WINDOW = 5
LR_RULE_TOL = 0.03

#: Keys of one candidate in ``rlbatch plan --format json``.
CANDIDATE_KEYS = ("run", "batch_size", "runs", "on_lr_rule", "rN", "rN_ci", "rN_source", "rN_level",
                  "relative_throughput", "throughput_source", "throughput_extrapolated", "predicted_relative_time",
                  "interval", "predicted_time_to_target_s", "aligned", "verdict", "rejected", "sentence")


# --------------------------------------------------------------------------------------------------- small helpers
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating)) and math.isfinite(float(x))


def noise_model_rn(batch_size: float, reference_batch: float, b_noise: float) -> float:
    """rN of ``batch_size`` relative to ``reference_batch`` under McCandlish et al. (2018) eq. 2.11:
    samples-to-target ``E(B) = E_min (1 + B / B_noise)``, so ``rN = (1 + B/B_noise) / (1 + B_ref/B_noise)``.
    ``b_noise = inf`` gives 1 (no penalty). Units: responses. Raises ``ValueError`` for non-positive inputs."""
    if batch_size <= 0 or reference_batch <= 0 or not b_noise > 0:
        raise ValueError("batch sizes and b_noise must be positive")
    u = 0.0 if math.isinf(b_noise) else 1.0 / b_noise
    return (1.0 + batch_size * u) / (1.0 + reference_batch * u)


def fit_b_noise(points: Sequence[tuple[float, float]], reference_batch: float) -> float:
    """Least-squares fit (in log rN) of B_noise to measured ``(batch_size, rN)`` pairs under
    :func:`noise_model_rn`. Returns B_noise in responses; ``inf`` when no penalty is seen (the best fit has
    1/B_noise = 0); NaN without points. Source: McCandlish et al. 2018, eq. 2.11."""
    from scipy.optimize import minimize_scalar

    pts = [(float(b), float(r)) for b, r in points if _finite(b) and _finite(r) and r > 0 and b != reference_batch]
    if not pts:
        return float("nan")
    b = np.array([p[0] for p in pts])
    r = np.log(np.array([p[1] for p in pts]))

    def loss(log_u: float) -> float:
        u = math.exp(log_u)
        return float(((np.log((1 + b * u) / (1 + reference_batch * u)) - r) ** 2).sum())

    lo, hi = math.log(1e-6 / b.max()), math.log(1e4 / min(b.min(), reference_batch))
    grid = np.linspace(lo, hi, 121)
    vals = [loss(g) for g in grid]
    i = int(np.argmin(vals))
    res = minimize_scalar(loss, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]), method="bounded")
    best_log_u, best = (res.x, res.fun) if res.fun <= vals[i] else (grid[i], vals[i])
    zero = float((r ** 2).sum())  # u = 0
    if zero <= best + 1e-12 or best_log_u <= lo + 1e-9:
        return float("inf")
    return float(math.exp(-best_log_u))


def moving_average(ys: np.ndarray, window: int = SMOOTH_WINDOW) -> np.ndarray:
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


def _crossing(xs: np.ndarray, ys: np.ndarray, level: float) -> np.ndarray:
    """First crossing of ``level`` by each row of ``ys`` (shape (k, n) or (n,)) over ``xs`` (n,), linear
    interpolation as :func:`rlbatch.analysis.curves.samples_to_target` (vectorised for the bootstrap); NaN when a
    row never reaches it."""
    y = np.atleast_2d(ys)
    above = y >= level
    hit = above.any(axis=1)
    i = np.argmax(above, axis=1)
    out = np.full(len(y), np.nan)
    first = hit & (i == 0)
    out[first] = xs[0]
    mid = hit & (i > 0)
    if mid.any():
        r = np.flatnonzero(mid)
        ii = i[mid]
        y0, y1 = y[r, ii - 1], y[r, ii]
        x0, x1 = xs[ii - 1], xs[ii]
        out[mid] = x0 + (level - y0) / (y1 - y0) * (x1 - x0)
    return out


def _curve(run: Run, metric: str) -> tuple[np.ndarray, np.ndarray]:
    from rlbatch.analysis.curves import curve

    d = curve(run, metric, X)
    d = d[d[X] > 0] if (d[X] > 0).sum() >= 2 else d
    return d[X].to_numpy(float), d[metric].to_numpy(float)


def _rn_estimate(ref_curves: list, cand_curves: list, level: float, smooth: bool, n_boot: int,
                 seed: int) -> tuple[float | None, list | None]:
    """rN = mean samples-to-``level`` of ``cand_curves`` / that of ``ref_curves`` (each a list of (xs, ys), one per
    seed), and a 95% percentile bootstrap interval resampling seeds within each side (when several) and each
    curve's residuals around its moving average. ``smooth``: cross the moving average (curve estimates) instead of
    the raw points (measured rN, as the accounting does)."""
    def prep(c):
        xs, ys = c
        sm = moving_average(ys)
        return xs, ys, sm, ys - sm

    ref = [prep(c) for c in ref_curves]
    cand = [prep(c) for c in cand_curves]

    def s_of(items, perturbed=None):
        vals = []
        for j, (xs, ys, sm, _res) in enumerate(items):
            y = ys if perturbed is None else perturbed[j]
            y = moving_average(y) if smooth else y
            vals.append(_crossing(xs, y, level)[0])
        return float(np.mean(vals))

    s_ref, s_c = s_of(ref), s_of(cand)
    if not (_finite(s_ref) and _finite(s_c) and s_ref > 0):
        return None, None
    point = s_c / s_ref
    rng = np.random.default_rng(seed)

    def boot_side(items: list) -> np.ndarray:
        # (n_boot,) mean crossing over resampled seeds with resampled residuals
        k = len(items)
        per = []
        for xs, ys, sm, res in items:
            n = len(ys)
            noise = res[rng.integers(0, n, (n_boot, n))]
            y = sm[None, :] + noise
            if smooth:
                y = moving_average(y)
            per.append(_crossing(xs, y, level))
        per = np.array(per)  # (k, n_boot)
        if k >= 2:
            pick = rng.integers(0, k, (n_boot, k))
            return np.array([per[pick[b], b].mean() for b in range(n_boot)])
        return per[0]

    if n_boot <= 0:
        return point, None
    br, bc = boot_side(ref), boot_side(cand)
    ratio = bc / br
    ratio = ratio[np.isfinite(ratio)]
    if len(ratio) < max(10, n_boot // 4):
        return point, None
    lo, hi = np.quantile(ratio, [0.025, 0.975])
    return point, [float(min(lo, point)), float(max(hi, point))]


# --------------------------------------------------------------------------------------------------- throughput
def profile_timings(profile: dict[str, Any] | str | Path) -> pd.DataFrame:
    """A ``rlbatch profile`` JSON (dict or path) as a :func:`rlbatch.analysis.throughput.step_timings`-shaped
    frame: per profiled batch size (sequences = responses), ``gen_s`` (prefill + decode) and ``train_s`` (one
    update). Raises :class:`UserError` naming the file when it is not a profile."""
    path = None
    if not isinstance(profile, dict):
        import json

        path = Path(profile)
        if not path.is_file():
            raise UserError("no such profile file", path=str(path))
        try:
            profile = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise UserError(f"not a JSON file ({err})", path=str(path)) from None
    rows = profile.get("batches") if isinstance(profile, dict) else profile
    if not isinstance(rows, list) or not rows:
        raise UserError("not a profile: expected a 'batches' list (write one with rlbatch profile)",
                        path=str(path) if path else None, field="batches")
    out = []
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not _finite(r.get("batch_size")) or not _finite(r.get("gen_s")):
            raise UserError(f"profile row {i}: needs batch_size and gen_s", path=str(path) if path else None,
                            field="batches")
        tr = r.get("update_s")
        out.append({"run": f"profile-B{r['batch_size']}", "batch_size": int(r["batch_size"]), "seed": None,
                    "gen_s": float(r["gen_s"]), "train_s": float(tr) if _finite(tr) else float("nan"),
                    "reward_s": float("nan"), "step_s": float(r["gen_s"]) + (float(tr) if _finite(tr) else 0.0),
                    "samples_per_step": float(r["batch_size"]), "gen_tokens_per_step": float("nan"),
                    "train_tokens_per_step": float("nan"), "throughput_samples_per_s": float("nan")})
    t = pd.DataFrame(out)
    t["throughput_samples_per_s"] = t["samples_per_step"] / t["step_s"]
    return t


def _model_throughput(model: dict[str, Any], b: int) -> tuple[float, bool]:
    from rlbatch.analysis.throughput import predict

    p = predict(model, [b])[0]
    return p["throughput_samples_per_s"], p["extrapolated"]


def _interp_throughput(known: dict[int, float], b: int) -> float | None:
    """Log-log interpolation of throughput between measured batch sizes (None outside their range)."""
    bs = sorted(k for k, v in known.items() if _finite(v) and v > 0)
    if not bs or b < bs[0] or b > bs[-1]:
        return None
    return float(np.exp(np.interp(math.log(b), np.log(bs), np.log([known[k] for k in bs]))))


# --------------------------------------------------------------------------------------------------- finishing
def _on_rule(lr: float | None, b: int | None, ref_lr: float | None, ref_b: int | None, rule: str | None) -> bool:
    if rule in ("none", "linear") and not (b == ref_b):
        return False
    if _finite(lr) and _finite(ref_lr) and b and ref_b:
        want = ref_lr * math.sqrt(b / ref_b)
        return abs(lr / want - 1.0) <= LR_RULE_TOL
    return True


def _sentence(c: dict[str, Any], ref_label: str, tol: float) -> str:
    name = c["run"] or f"B={c['batch_size']}"
    bstr = f" (B={c['batch_size']})" if c["run"] else ""
    if c["verdict"] == "reference" or (c["is_reference"]):
        tail = " and stays the recommendation: no candidate's throughput gain beats its rN by more." \
            if c["verdict"] == "recommended" else "."
        return f"{name}{bstr} is the reference (rN = 1, throughput 1x){tail}"
    rn, g, t = c["rN"], c["relative_throughput"], c["predicted_relative_time"]
    if rn is None:
        return f"{name}{bstr}: no rN estimate ({c.get('why') or 'no curve and no noise model'}); no decision."
    rn_ci = f" [{c['rN_ci'][0]:.2f}, {c['rN_ci'][1]:.2f}]" if c.get("rN_ci") else ""
    src = {"measured": "measured", "curve": f"from the curves at score {c['rN_level']:.3g}" if c.get("rN_level")
           is not None else "from the curves", "noise-model": "from the noise model"}.get(c["rN_source"],
                                                                                        c["rN_source"])
    if not c["on_lr_rule"]:
        fam = "off the square-root LR rule, so outside the aligned family"
    elif c["aligned"]:
        fam = f"inside the aligned family (rN {rn:.2f} <= {1 + tol:.2f})"
    else:
        fam = f"outside the aligned family (rN {rn:.2f} > {1 + tol:.2f})"
    if g is None:
        return f"{name}{bstr} is {fam}, rN {src}{rn_ci}; throughput unknown (give --profile), no decision."
    iv = c.get("interval")
    ivs = f", interval {iv[0]:.2f}-{iv[1]:.2f}" if iv else ""
    if c["verdict"] in ("recommended", "faster"):
        verdict = "recommended: the smallest predicted time-to-target" if c["verdict"] == "recommended" else \
            "faster than the reference but not the fastest"
        return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x beats its rN {rn:.2f}{rn_ci} ({src}), "
                f"predicted {t:.2f}x the reference's time-to-target{ivs}: {verdict}.")
    return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x does not beat its rN {rn:.2f}{rn_ci} ({src}), "
            f"predicted {t:.2f}x the reference's time-to-target{ivs}: rejected (throughput gain below rN).")


def _finish(cands: list[dict[str, Any]], ref_label: str, target: float | None, tol: float, extra: dict) -> dict:
    ref = next(c for c in cands if c["is_reference"])
    s_ref, x_ref = ref.get("samples_to_target"), ref.get("throughput_abs")
    for c in cands:
        rn, g = c["rN"], c["relative_throughput"]
        c["aligned"] = bool(c["on_lr_rule"] and rn is not None and rn <= 1 + tol)
        c["predicted_relative_time"] = rn / g if rn is not None and g else None
        c["interval"] = [c["rN_ci"][0] / g, c["rN_ci"][1] / g] if c.get("rN_ci") and g else None
        c["predicted_time_to_target_s"] = None
        if c["predicted_relative_time"] is not None and _finite(s_ref) and _finite(x_ref):
            c["predicted_time_to_target_s"] = s_ref / x_ref * c["predicted_relative_time"]
    ok = [c for c in cands if c["predicted_relative_time"] is not None]
    best = min(ok, key=lambda c: (c["predicted_relative_time"], c["batch_size"] or 0)) if ok else ref
    for c in cands:
        if c is best:
            c["verdict"] = "recommended"
        elif c["is_reference"]:
            c["verdict"] = "reference"
        elif c["predicted_relative_time"] is None:
            c["verdict"] = "unknown"
        elif c["relative_throughput"] > c["rN"]:
            c["verdict"] = "faster"
        else:
            c["verdict"] = "slower"
        c["rejected"] = c["verdict"] == "slower"
        c["sentence"] = _sentence(c, ref_label, tol)
    # the aligned family: the contiguous range of batch sizes around the reference with rN <= 1 + tol (DESIGN.md)
    ladder = sorted((c for c in cands if c["on_lr_rule"] and c["rN"] is not None), key=lambda c: c["batch_size"])
    i = next(k for k, c in enumerate(ladder) if c["is_reference"])
    lo, hi = i, i
    while lo > 0 and ladder[lo - 1]["aligned"]:
        lo -= 1
    while hi < len(ladder) - 1 and ladder[hi + 1]["aligned"]:
        hi += 1
    fam = [ladder[lo]["batch_size"], ladder[hi]["batch_size"]]
    out = {"recommended": best["run"] if best["run"] is not None else best["batch_size"],
           "recommended_batch_size": best["batch_size"], "reference": ref_label, "target": target,
           "tolerance": tol, "aligned_family": fam, **extra,
           "candidates": [{k: c.get(k) for k in CANDIDATE_KEYS} for c in
                          sorted(cands, key=lambda c: (c["batch_size"] or 0, not c["on_lr_rule"], str(c["run"])))]}
    return out


def _noise_candidate(b: int, b_ref: int, bn: dict[str, Any]) -> dict[str, Any]:
    c = {"run": None, "batch_size": int(b), "runs": [], "on_lr_rule": True, "is_reference": False,
         "rN": None, "rN_ci": None, "rN_source": None, "rN_level": None}
    if bn.get("value") is None:
        c["why"] = "no run at this batch and no B_noise estimate (need measured rN or noise/* metrics)"
        return c
    c["rN"] = noise_model_rn(b, b_ref, bn["value"])
    c["rN_source"] = "noise-model"
    lo, hi = bn.get("ci") or (None, None)
    if lo is not None and hi is not None:
        r1, r2 = noise_model_rn(b, b_ref, hi), noise_model_rn(b, b_ref, lo)  # larger B_noise -> smaller penalty
        c["rN_ci"] = [min(r1, r2, c["rN"]), max(r1, r2, c["rN"])]
    return c


def _b_noise_from_points(points: list[dict[str, Any]], b_ref: int) -> dict[str, Any] | None:
    """B_noise fitted to rN points ({batch_size, rN, rN_ci}) with an interval from the rN interval ends."""
    pts = [(p["batch_size"], p["rN"]) for p in points if p["rN"] is not None]
    if not pts:
        return None
    v = fit_b_noise(pts, b_ref)
    lo_pts = [(p["batch_size"], (p["rN_ci"] or [p["rN"]] * 2)[0]) for p in points if p["rN"] is not None]
    hi_pts = [(p["batch_size"], (p["rN_ci"] or [p["rN"]] * 2)[1]) for p in points if p["rN"] is not None]
    a, b = fit_b_noise(hi_pts, b_ref), fit_b_noise(lo_pts, b_ref)  # high rN -> small B_noise
    has_ci = any(p["rN"] is not None and p.get("rN_ci") for p in points)
    return {"value": v, "ci": [min(a, b), max(a, b)] if has_ci else None, "source": "fit to rN",
            "n_points": len(pts), "batch_sizes": sorted(int(p[0]) for p in pts)}


# --------------------------------------------------------------------------------------------------- table input
def is_accounting_table(path: Path | str) -> bool:
    """True for a CSV file whose header has ``samples_to_target`` (an accounting table of finished runs)."""
    p = Path(path)
    if not p.is_file() or p.suffix.lower() not in (".csv", ".tsv", ".txt"):
        return False
    try:
        with open(p, encoding="utf-8", errors="replace") as fh:
            head = fh.readline()
    except OSError:
        return False
    return "samples_to_target" in [h.strip().strip('"') for h in head.split(",")]


def plan_table(table: pd.DataFrame, reference: str | None = None, *, target: float | None = None,
               candidates: Sequence[int] | None = None, profile: dict | str | Path | None = None,
               tol: float = 0.1) -> dict[str, Any]:
    """Plan from an accounting table of finished runs (:func:`rlbatch.analysis.accounting.read_accounting_csv`).

    Every row that reached the target is a candidate with measured rN and throughput (samples-to-target /
    wall-clock, source ``table``); ``candidates`` (batch sizes) adds batches without a row, with rN from the noise
    model fitted to the rows on the square-root LR rule and throughput from ``profile`` (relative to the profile's
    prediction at the reference batch) or log-log interpolation between rows. No curves: intervals are None.
    ``target`` is only recorded (the table is already at its target). Returns the plan dict (module docstring).
    Raises :class:`UserError` for an unknown reference, one that never reached the target, or fewer than two rows.
    """
    from rlbatch.analysis.accounting import account

    if len(table) < 2:
        raise UserError(f"plan needs at least two runs to compare, the table has {len(table)}", field="run")
    inp = table.copy()
    if reference is None:
        ok = inp[inp["samples_to_target"].notna()].sort_values("batch_size", kind="stable")
        if ok.empty:
            raise UserError("no run in the table reached the target: nothing to plan from", field="samples_to_target")
        reference = str(ok.iloc[0]["run"])
    rows = account(inp, reference).to_dict(orient="records")
    lr_of = {str(r["run"]): r.get("lr") for r in inp.to_dict(orient="records")}
    by = {r["run"]: r for r in rows}
    ref = by[reference]
    b_ref = int(ref["batch_size"])
    cands = []
    for r in rows:
        on = _on_rule(lr_of.get(r["run"]), r["batch_size"], lr_of.get(reference), b_ref, None)
        c = {"run": r["run"], "batch_size": r["batch_size"], "runs": [r["run"]], "on_lr_rule": on,
             "is_reference": r["run"] == reference, "rN": r["rN"], "rN_ci": None,
             "rN_source": "measured" if r["rN"] is not None else None, "rN_level": target,
             "samples_to_target": r["samples_to_target"], "throughput_abs": r["throughput_samples_per_s"],
             "relative_throughput": r["relative_throughput"], "throughput_source": "table",
             "throughput_extrapolated": False}
        if r["rN"] is None:
            c["why"] = "the run never reached the target"
        cands.append(c)
    pts = [c for c in cands if c["on_lr_rule"] and not c["is_reference"] and c["rN"] is not None]
    bn = _b_noise_from_points(pts, b_ref) or {"value": None, "ci": None, "source": None}
    model = None
    if profile is not None:
        from rlbatch.analysis.throughput import fit_throughput_model

        model = fit_throughput_model(profile_timings(profile))
    known = {c["batch_size"]: c["throughput_abs"] for c in cands if c["on_lr_rule"] and c["throughput_abs"]}
    have = {c["batch_size"] for c in cands}
    for b in candidates or []:
        if b in have:
            continue
        c = _noise_candidate(b, b_ref, bn)
        c["relative_throughput"], c["throughput_source"], c["throughput_extrapolated"] = None, None, False
        if model is not None:
            x, ext = _model_throughput(model, b)
            x0, _ = _model_throughput(model, b_ref)
            c["relative_throughput"], c["throughput_source"], c["throughput_extrapolated"] = x / x0, "profile", ext
        else:
            x = _interp_throughput(known, b)
            if x is not None:
                c["relative_throughput"], c["throughput_source"] = x / ref["throughput_samples_per_s"], "interpolated"
        cands.append(c)
    return _finish(cands, reference, target, tol, {"metric": None, "input": "table", "b_noise": _bn_json(bn),
                                                   "notes": ["an accounting table: rN and throughput as measured "
                                                             "at its own target; no curves, so no intervals"]})


def _bn_json(bn: dict[str, Any]) -> dict[str, Any]:
    v = bn.get("value")
    return {"value": None if v is None or not _finite(v) else float(v), "unbounded": bool(v is not None and
                                                                                         math.isinf(v)),
            "ci": [None if x is None or not _finite(x) else float(x) for x in bn["ci"]] if bn.get("ci") else None,
            "source": bn.get("source"), **{k: bn[k] for k in ("n_points", "batch_sizes") if k in bn}}


# --------------------------------------------------------------------------------------------------- runs input
def check_consistent(runs: Sequence[Run], metric: str) -> None:
    """Raise :class:`UserError` when runs disagree on model, task or algorithm (non-missing values), or a run has
    no ``metric`` values on the retained-sample axis (naming the runs)."""
    from rlbatch.analysis.curves import metric_frame

    for field in ("model", "task", "algorithm"):
        vals: dict[str, list[str]] = {}
        for r in runs:
            v = getattr(r.meta, field, None)
            if v is not None:
                vals.setdefault(str(v), []).append(r.run_id)
        if len(vals) > 1:
            parts = "; ".join(f"{v}: {', '.join(ids[:4])}{' ...' if len(ids) > 4 else ''}" for v, ids in vals.items())
            raise UserError(f"runs disagree on {field} ({parts}): plan runs of one {field} at a time",
                            field=field)
    missing = []
    for r in runs:
        df = metric_frame(r, metric)
        if metric not in df.columns or X not in df.columns or not df[metric].notna().any():
            missing.append(r.run_id)
    if missing:
        raise UserError(f"no {metric!r} values on the retained-sample axis in run(s) {', '.join(missing)}: every run "
                        "needs the target metric (choose it with --metric, e.g. reward/mean; set P and G with "
                        "--set where the sample axis is missing)", field="metric")


def _groups(runs: Sequence[Run], ref_key: str | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from rlbatch.analysis.curves import seedless_id

    by: dict[tuple, list[Run]] = {}
    bad = [r.run_id for r in runs if r.meta.batch_size is None]
    if bad:
        raise UserError(f"batch size unknown for run(s) {', '.join(bad)}: set prompts_per_step and group_size "
                        "(--set RUN:prompts_per_step=... --set RUN:group_size=...)", field="batch_size")
    rules = {}
    for r in runs:
        key = (int(r.meta.batch_size), r.meta.lr_rule if r.meta.lr_rule in ("none", "linear") else "sqrt",
               round(float(r.meta.lr), 12) if r.meta.lr else None)
        by.setdefault(key, []).append(r)
        rules[key] = r.meta.lr_rule
    groups = []
    for key, rs in by.items():
        names = {seedless_id(r.run_id) for r in rs}
        label = rs[0].run_id if len(rs) == 1 else (names.pop() if len(names) == 1 else f"B{key[0]}-{key[1]}")
        groups.append({"run": label, "batch_size": key[0], "runs_obj": rs, "runs": [r.run_id for r in rs],
                       "lr": rs[0].meta.lr, "lr_rule": rules[key]})
    labels = [g["run"] for g in groups]
    if len(set(labels)) != len(labels):
        for g in groups:
            g["run"] = f"{g['run']}@lr{g['lr']:.3g}" if g["lr"] else g["run"]
    groups.sort(key=lambda g: (g["batch_size"], g["lr_rule"] in ("none", "linear")))
    # reference: a run id, a group label, a batch size (B512 / 512); default the smallest on-rule batch
    ref = None
    if ref_key is not None:
        k = str(ref_key)
        for g in groups:
            if k == g["run"] or k in g["runs"]:
                ref = g
                break
        if ref is None and re.fullmatch(r"[Bb]?\d+", k):
            b = int(k.lstrip("Bb"))
            ref = next((g for g in groups if g["batch_size"] == b and g["lr_rule"] not in ("none", "linear")), None)
        if ref is None:
            raise UserError(f"unknown reference {ref_key!r}; runs are: {', '.join(r.run_id for r in runs)} "
                            f"(or give a batch size, e.g. B{groups[0]['batch_size']})", field="reference")
    else:
        ref = next((g for g in groups if g["lr_rule"] not in ("none", "linear")), groups[0])
    return groups, ref


def plan_runs(runs: Sequence[Run], target: float, *, reference: str | None = None, metric: str = "eval/score",
              candidates: Sequence[int] | None = None, profile: dict | str | Path | None = None, tol: float = 0.1,
              n_boot: int = 200, seed: int = 0, extend: bool = True) -> dict[str, Any]:
    """Plan from runs (finished or short probes): rN, throughput and predicted time-to-target per candidate.

    ``runs``: run-store :class:`Run` objects (several seeds per configuration allowed; a configuration is a batch
    size and learning rate). ``target``: score of ``metric`` (higher is better). ``reference``: a run id, a
    configuration label or a batch size (default: the smallest batch on the square-root rule). ``candidates``: batch
    sizes to evaluate besides the runs' (default: the runs' configurations, plus two doublings above the largest
    when a noise model and a throughput model exist and ``extend``). ``profile``: a ``rlbatch profile`` JSON (dict or path) whose
    time model replaces the runs' timings for every candidate. ``tol``: aligned family = rN <= 1 + tol.

    Returns the plan dict: ``recommended`` (configuration label, or batch size for a batch without runs),
    ``reference``, ``target``, ``metric``, ``tolerance``, ``aligned_family`` [B_lo, B_hi], ``b_noise`` {value,
    ci, source}, ``throughput_model``, ``notes`` and ``candidates`` (:data:`CANDIDATE_KEYS`; rN sources and
    formulas in the module docstring). Raises :class:`UserError` when runs disagree on model/task/algorithm, lack
    the metric or a batch size, or there is too little to compare (one batch size without noise metrics or
    candidates, no throughput for any candidate).
    """
    from rlbatch.analysis.throughput import fit_throughput_model, step_timings

    runs = list(runs)
    if not runs:
        raise UserError("no runs to plan from")
    if target is None or not _finite(target):
        raise UserError("--target is required for runs (the score to reach, e.g. --target 0.6)", field="target")
    check_consistent(runs, metric)
    groups, ref = _groups(runs, reference)
    notes: list[str] = []
    b_ref = ref["batch_size"]
    if len({g["batch_size"] for g in groups}) < 2 and not candidates:
        raise UserError(f"plan needs runs at two or more batch sizes to compare (all runs are at B={b_ref}), or "
                        "--candidates B1,B2 with gradient-noise metrics (noise/*) in the runs and a throughput "
                        "profile (--profile)", field="candidates")
    curves = {id(r): _curve(r, metric) for r in runs}
    ref_curves = [curves[id(r)] for r in ref["runs_obj"]]
    ref_reached = all(len(c[0]) and (c[1] >= target).any() for c in ref_curves)
    s_ref = float(np.mean([_crossing(c[0], c[1], target)[0] for c in ref_curves])) if ref_reached else None

    # --- throughput: measured per run, the time model for batches without runs (or the profile for all)
    timings = step_timings(runs)
    thr_by_run = {r: v for r, v in zip(timings["run"], timings["throughput_samples_per_s"]) if _finite(v)}
    model, model_src = None, None
    if profile is not None:
        model, model_src = fit_throughput_model(profile_timings(profile)), "profile"
    else:
        try:
            model, model_src = fit_throughput_model(timings), "model"
        except (UserError, KeyError, ValueError):
            model = None

    def measured_thr(g: dict[str, Any]) -> float | None:
        from rlbatch.analysis.curves import summarize_run

        v = [thr_by_run[r] for r in g["runs"] if r in thr_by_run]
        if not v:
            v = [s["throughput_samples_per_s"] for s in map(summarize_run, g["runs_obj"])
                 if _finite(s["throughput_samples_per_s"])]
        return float(np.mean(v)) if v else None

    x_ref_meas = measured_thr(ref)

    cands: list[dict[str, Any]] = []
    for g in groups:
        is_ref = g is ref
        c = {"run": g["run"], "batch_size": g["batch_size"], "runs": g["runs"], "is_reference": is_ref,
             "on_lr_rule": _on_rule(g["lr"], g["batch_size"], ref["lr"], b_ref, g["lr_rule"]) or is_ref,
             "rN": None, "rN_ci": None, "rN_source": None, "rN_level": None}
        cc = [curves[id(r)] for r in g["runs_obj"]]
        if is_ref:
            c.update(rN=1.0, rN_ci=[1.0, 1.0], rN_source="measured" if ref_reached else "curve",
                     rN_level=target if ref_reached else None, samples_to_target=s_ref)
        else:
            reached = ref_reached and all((c_[1] >= target).any() for c_ in cc if len(c_[0]))
            if reached:
                rn, ci = _rn_estimate(ref_curves, cc, target, False, n_boot, seed)
                c.update(rN=rn, rN_ci=ci, rN_source="measured", rN_level=target)
            else:
                pair = [(x, y) for x, y in ref_curves + cc if len(y)]
                best = min(float(moving_average(y).max()) for x, y in pair)
                # a little below the lowest smoothed maximum (two standard errors of a smoothed point), so that
                # bootstrap replicates of that curve still reach it
                sd = float(np.sqrt(np.mean(np.concatenate([(y - moving_average(y)) ** 2 for x, y in pair]))))
                level = min(target, best - 2.0 * sd / math.sqrt(SMOOTH_WINDOW))
                # the level must lie above every curve's start, else there is no crossing to time
                starts = max(float(moving_average(y)[0]) for x, y in ref_curves + cc if len(y))
                if level > starts:
                    rn, ci = _rn_estimate(ref_curves, cc, level, True, n_boot, seed)
                    c.update(rN=rn, rN_ci=ci, rN_source="curve", rN_level=level)
                else:
                    c["why"] = (f"its curves have not risen above their starting score ({starts:.3g}) yet; run it "
                                "longer")
        cands.append(c)

    # --- noise model for batches without runs
    pts = [c for c in cands if c["on_lr_rule"] and not c["is_reference"] and c["rN"] is not None]
    bn = _b_noise_from_points(pts, b_ref)
    if bn is None or math.isinf(bn["value"]):
        alt = _b_noise_from_gradients(runs)
        if alt is not None:
            if bn is not None:
                notes.append(f"no sample penalty measured up to B={max(bn['batch_sizes'])}: B_noise from "
                             f"{alt['source']} instead")
            bn = alt
    if bn is None:
        bn = {"value": None, "ci": None, "source": None}
    # runs on the rule whose curves cannot be compared yet (not risen above their start): the noise model, as for a
    # batch without runs, rather than no estimate at all
    early = [c for c in cands if c["rN"] is None and c["on_lr_rule"] and not c["is_reference"]]
    if early and bn.get("value") is not None:
        for c in early:
            nc = _noise_candidate(c["batch_size"], b_ref, bn)
            c.update({k: nc[k] for k in ("rN", "rN_ci", "rN_source")})
            c.pop("why", None)
        notes.append(f"rN of {', '.join(c['run'] for c in early)} from the noise model: their curves have not risen "
                     "above their starting score yet")
    have = {c["batch_size"] for c in cands}
    extra = list(candidates or [])
    if extend and not candidates and bn.get("value") is not None and model is not None:
        top = max(have)
        extra = [top * 2, top * 4]
        notes.append(f"added B={top * 2} and B={top * 4} (two doublings above the largest run) from the noise and "
                     "throughput models")
    for b in extra:
        if b in have:
            continue
        have.add(b)
        cands.append(_noise_candidate(int(b), b_ref, bn))

    # --- throughput per candidate
    x_ref_model = _model_throughput(model, b_ref)[0] if model is not None else None
    for c in cands:
        c.update(relative_throughput=None, throughput_source=None, throughput_extrapolated=False, throughput_abs=None)
        g = next((g for g in groups if g["run"] == c["run"]), None)
        xm = measured_thr(g) if g is not None and model_src != "profile" else None
        if xm is not None and x_ref_meas:
            c.update(relative_throughput=xm / x_ref_meas, throughput_source="measured", throughput_abs=xm)
        elif model is not None and x_ref_model:
            x, ext = _model_throughput(model, c["batch_size"])
            c.update(relative_throughput=x / x_ref_model, throughput_source=model_src, throughput_extrapolated=ext,
                     throughput_abs=x)
    if all(c["relative_throughput"] is None for c in cands if not c["is_reference"]):
        raise UserError("no throughput for any candidate: the runs have no per-step timings (time/gen_s, "
                        "time/step_s or time/wall_s) at two or more batch sizes; give --profile PROFILE.json "
                        "(rlbatch profile)", field="throughput")
    if all(c["rN"] is None for c in cands if not c["is_reference"]):
        raise UserError("no sample penalty rN for any candidate: the probes have not risen above their starting "
                        "score, and there is no B_noise estimate (noise/* metrics or grad_norm/actor at two batch "
                        "sizes); run the probes longer", field="rN")
    ref_c = next(c for c in cands if c["is_reference"])
    ref_c["throughput_abs"] = x_ref_meas if ref_c["throughput_source"] == "measured" else x_ref_model
    below = [c["run"] for c in cands if c["rN_source"] == "curve" and not c["is_reference"]]
    if below:
        notes.append(f"rN of {', '.join(below)} estimated from the curves at scores below the target (rN_level): "
                     "inside the aligned family the ratio holds at every score; outside it, check it again once "
                     "the runs reach the target")
    if not ref_reached:
        notes.append(f"the reference {ref['run']} has not reached {metric} >= {target:g}: rN estimated from the "
                     "curves at lower scores; no absolute time-to-target")
    return _finish(cands, ref["run"], target, tol,
                   {"metric": metric, "input": "runs", "b_noise": _bn_json(bn),
                    "throughput_model": {"source": model_src, "gen_exponent": model["gen"]["exponent"]}
                    if model is not None else None, "notes": notes})


def _b_noise_from_gradients(runs: Sequence[Run]) -> dict[str, Any] | None:
    """B_noise from gradient-noise measurements: the median whole-run B_simple of the runs' ``noise/*`` metrics
    (interval: min-max over runs, or the 10-90% range of its smoothed value over the second half of a single run),
    else the grad-norm vs B fit |g_B|^2 = |G|^2 + tr(Sigma)/B (B_noise = tr(Sigma)/|G|^2). None when neither."""
    from rlbatch.analysis.noise import b_simple_overall, b_simple_smoothed, fit_grad_norm_scaling

    vals, spreads = [], []
    for r in runs:
        v = b_simple_overall(r.metrics)
        if _finite(v) and v > 0:
            vals.append(v)
            try:
                d = b_simple_smoothed(r.metrics)["b_simple"].dropna()
                d = d.iloc[len(d) // 2:]
                if len(d) >= 3:
                    spreads.append((float(d.quantile(0.1)), float(d.quantile(0.9))))
            except UserError:
                pass
    if vals:
        ci = [min(vals), max(vals)] if len(vals) >= 2 else (list(spreads[0]) if spreads else None)
        return {"value": float(np.median(vals)), "ci": ci, "source": "B_simple", "n_runs": len(vals)}
    try:
        fit = fit_grad_norm_scaling(runs, "grad_norm/actor")
    except (UserError, KeyError, ValueError):
        return None
    pts = fit["points"]
    if len(pts) < 2:
        return None
    inv_b = np.array([1.0 / p["batch_size"] for p in pts])
    g2 = np.array([p["value"] ** 2 for p in pts])
    slope, intercept = np.polyfit(inv_b, g2, 1)
    if not (slope > 0 and intercept > 0):
        return None
    return {"value": float(slope / intercept), "ci": None, "source": "grad-norm fit",
            "knee_batch": fit.get("knee_batch")}


# --------------------------------------------------------------------------------------------------- entry points
def truncate_runs(runs: Sequence[Run], fraction: float) -> list[Run]:
    """Copies of ``runs`` cut to the first ``fraction`` of each run's own retained samples (metrics and evaluation
    points with ``samples/retained`` <= fraction x the run's last value; status ``running``): what a plan would have
    seen from short probes. Raises :class:`UserError` unless 0 < fraction <= 1."""
    if not (0 < fraction <= 1):
        raise UserError(f"fraction must be in (0, 1], got {fraction}", field="fraction")
    out = []
    for r in runs:
        m = r.metrics
        total = float(pd.to_numeric(m[X], errors="coerce").max()) if X in m.columns and len(m) else None
        nr = copy.deepcopy(r)
        if total is None or not _finite(total):
            out.append(nr)
            continue
        cut = fraction * total
        nr.metrics = m[pd.to_numeric(m[X], errors="coerce") <= cut + 1e-9].reset_index(drop=True).copy()
        if len(r.evals) and X in r.evals.columns:
            nr.evals = r.evals[pd.to_numeric(r.evals[X], errors="coerce") <= cut + 1e-9].reset_index(drop=True).copy()
        nr.meta = r.meta.model_copy(update={"status": "running", "stop_reason": f"truncated to {fraction:g}"})
        out.append(nr)
    return out


def make_plan(paths: Sequence[Path | str], *, target: float | None = None, reference: str | None = None,
              candidates: Sequence[int] | None = None, profile: str | Path | None = None,
              metric: str = "eval/score", tol: float = 0.1, log_format: str | None = None,
              sets: list[str] | None = None, mapping: list[str] | None = None) -> dict[str, Any]:
    """The ``rlbatch plan`` entry point: one accounting table (CSV with ``samples_to_target``) -> :func:`plan_table`;
    otherwise run dirs, a sweep dir or any logs :func:`rlbatch.readers.load` reads -> :func:`plan_runs`. Warnings
    from the readers go into ``notes``."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("give runs, a sweep directory or an accounting table")
    if len(paths) == 1 and is_accounting_table(paths[0]):
        from rlbatch.analysis.accounting import read_accounting_csv

        return plan_table(read_accounting_csv(paths[0]), reference, target=target, candidates=candidates,
                          profile=profile, tol=tol)
    from rlbatch.analyze import load_all

    runs, msgs = load_all(paths, log_format=log_format, mapping=mapping, sets=sets)
    plan = plan_runs(runs, target, reference=reference, metric=metric, candidates=candidates, profile=profile,
                     tol=tol)
    plan["notes"] = list(msgs) + plan["notes"]
    return plan


# --------------------------------------------------------------------------------------------------- output
def _fmt_ci(v: Any) -> str:
    return f"{v[0]:.2f}-{v[1]:.2f}" if isinstance(v, (list, tuple)) and len(v) == 2 and all(map(_finite, v)) else "—"


COLUMNS = [("run", "candidate", None), ("batch_size", "B", None), ("rN", "rN", ".2f"), ("rN_ci", "rN 95%", _fmt_ci),
           ("rN_source", "rN from", None), ("relative_throughput", "rel. throughput", ".2f"),
           ("throughput_source", "throughput from", None), ("predicted_relative_time", "pred. rel. time", ".2f"),
           ("interval", "interval", _fmt_ci), ("aligned", "aligned", None), ("verdict", "verdict", None)]


def _headline(plan: dict[str, Any]) -> str:
    rec = plan["recommended"]
    c = next((c for c in plan["candidates"] if (c["run"] or c["batch_size"]) == rec), None)
    bn = plan.get("b_noise") or {}
    tgt = f" at {plan['metric'] or 'score'} >= {plan['target']:g}" if plan.get("target") is not None else ""
    s = f"Recommended: {rec}" + (f" (B={c['batch_size']})" if c and c["run"] else "")
    if c and c["predicted_relative_time"] is not None:
        s += f", predicted {c['predicted_relative_time']:.2f}x the reference's ({plan['reference']}) time-to-target{tgt}"
    if bn.get("source"):
        v = "unbounded (no penalty seen)" if bn.get("unbounded") else f"{bn['value']:.4g}"
        s += f". B_noise {v} ({bn['source']})"
    return s + "."


def to_markdown(plan: dict[str, Any]) -> str:
    """The plan as Markdown: the headline, the candidate table, one sentence per candidate, notes."""
    from rlbatch.output import markdown_table

    lines = [f"**{_headline(plan)}**", "", markdown_table(plan["candidates"], COLUMNS), ""]
    lines += [f"- {c['sentence']}" for c in plan["candidates"]]
    if plan.get("aligned_family"):
        lo, hi = plan["aligned_family"]
        lines += ["", f"Aligned family (rN <= {1 + plan['tolerance']:.2f}, square-root LR rule): B = {lo} to {hi}."]
    lines += ["", "Predicted relative time = rN / relative throughput; a candidate beats the reference iff its "
              "throughput gain exceeds rN (Li et al. 2026). rN for batches without runs: E/E_min = 1 + B/B_noise "
              "(McCandlish et al. 2018, eq. 2.11)."]
    for n in plan.get("notes") or []:
        lines.append(f"- Note: {n}")
    return "\n".join(lines)


def print_plan(plan: dict[str, Any], fmt: str) -> None:
    """Print the plan as ``table`` (rich), ``markdown`` or ``json``."""
    from rlbatch.output import console, print_json, rich_table

    if fmt == "json":
        print_json(plan)
        return
    if fmt == "markdown":
        print(to_markdown(plan))
        return
    con = console()
    con.print(rich_table(plan["candidates"], COLUMNS, title=f"Plan (reference {plan['reference']})"))
    for c in plan["candidates"]:
        con.print(f"  {c['sentence']}")
    for n in plan.get("notes") or []:
        con.print(f"  note: {n}")
    con.print(f"[bold]{_headline(plan)}[/bold]")


def plan_section(plan_or_runs: dict[str, Any] | Sequence[Run], **plan_kwargs: Any) -> dict[str, Any]:
    """The report section of the plan (report contract: title, markdown, figures, json_key ``plan``, json).

    ``plan_or_runs``: a plan dict (:func:`plan_runs` / :func:`plan_table`) or runs, planned with ``plan_kwargs``
    (``target`` required). Figure: rN (with intervals) and relative throughput vs B, and the predicted relative
    time-to-target per candidate with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = plan_or_runs if isinstance(plan_or_runs, dict) else plan_runs(list(plan_or_runs), **plan_kwargs)
    cs = [c for c in plan["candidates"] if c["batch_size"]]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for src, mk in (("measured", "o"), ("curve", "s"), ("noise-model", "^")):
        sel = [c for c in cs if c["rN_source"] == src and c["rN"] is not None]
        if sel:
            b = np.array([c["batch_size"] for c in sel], float)
            r = np.array([c["rN"] for c in sel])
            err = np.array([[c["rN"] - c["rN_ci"][0], c["rN_ci"][1] - c["rN"]] if c["rN_ci"] else [0, 0]
                            for c in sel]).T
            a1.errorbar(b, r, yerr=np.clip(err, 0, None), fmt=mk, capsize=3, label=f"rN ({src})")
    th = [c for c in cs if c["relative_throughput"] is not None]
    if th:
        a1.plot([c["batch_size"] for c in th], [c["relative_throughput"] for c in th], "x--", color="gray",
                label="relative throughput")
    from rlbatch.report.figures import batch_axis

    batch_axis(a1)
    a1.set_xlabel("batch size B (responses per update)")
    a1.set_ylabel("ratio to the reference")
    a1.set_title("Sample penalty rN vs throughput gain")
    a1.legend(fontsize=8)
    pr = [c for c in cs if c["predicted_relative_time"] is not None]
    if pr:
        names = [str(c["run"] or f"B={c['batch_size']}") for c in pr]
        t = np.array([c["predicted_relative_time"] for c in pr])
        err = np.array([[max(0, v - c["interval"][0]), max(0, c["interval"][1] - v)] if c["interval"] else [0, 0]
                        for v, c in zip(t, pr)]).T
        colors = ["tab:green" if c["verdict"] == "recommended" else "tab:red" if c["rejected"] else "tab:blue"
                  for c in pr]
        a2.barh(range(len(pr)), t, xerr=err, color=colors, capsize=3)
        a2.set_yticks(range(len(pr)), names, fontsize=8)
        a2.axvline(1.0, color="black", lw=0.8)
    a2.set_xlabel("predicted time-to-target / reference's")
    a2.set_title("Predicted time-to-target (green: recommended)")
    fig.tight_layout()
    return {"title": "Plan: align, then accelerate", "markdown": to_markdown(plan),
            "figures": {"plan_rn_throughput_time": fig}, "json_key": "plan", "json": plan}
