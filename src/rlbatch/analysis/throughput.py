"""Throughput vs batch: fits of generation and update time per step, predictions for unseen B, the sublinear window.

Li et al. 2026 ("When Do Larger Batches Help Scale LLM RL?", accelerate half): decoding is memory-bandwidth bound at
low concurrency, so generation time per step grows slower than B (PPO B 256->1024: 39 s -> 68 s, 1.74x for 4x the
responses, generation throughput 2.29x; GRPO P 128->512: 2.93x time for 4x responses), while the update is ~linear
in tokens (actor update 101.3 s -> 208.6 s, 2.06x, when P doubles). Throughput = B / (t_gen + t_reward + t_train)
retained samples per second (DESIGN.md, throughput model).

Models fitted here (least squares, per step, seconds):
- generation: power law  t_gen(B) = a * B^k   (log-log fit; k < 1 is sublinear; per doubling t grows by 2^k);
- update:     affine     t_train = c0 + c1 * tokens_trained_per_step   (or in B when token counts are missing);
- scoring:    affine     t_reward = r0 + r1 * B.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.errors import UserError


def _per_step(m: pd.DataFrame, col: str) -> pd.Series | None:
    """Per-step increments of a cumulative column (first step counted from 0)."""
    if col not in m:
        return None
    c = m[col].astype(float).dropna()
    if not len(c):
        return None
    return c.diff().fillna(c.iloc[0])


def step_timings(runs: Sequence[Any], skip_first: int = 1) -> pd.DataFrame:
    """Per-run median per-step timings and sizes, one row per run.

    Columns: ``run``, ``batch_size`` (B from run metadata), ``seed``, ``gen_s``, ``train_s``, ``reward_s``,
    ``step_s`` (seconds per step; ``step_s`` = time/step_s, else the sum of the parts), ``samples_per_step``
    (retained, from ``samples/retained`` increments, else B), ``gen_tokens_per_step``, ``train_tokens_per_step``
    (from the cumulative ``tokens/*``; NaN if missing), ``throughput_samples_per_s`` (= samples_per_step / step_s).
    Medians skip the first ``skip_first`` steps (warm-up, compilation) when the run has more steps than that.
    """
    rows = []
    for r in runs:
        m, b = r.metrics, r.meta.batch_size
        if b is None or not isinstance(m, pd.DataFrame) or not len(m):
            continue
        if len(m) > skip_first:
            m = m.iloc[skip_first:]

        def med(col: str, s: pd.Series | None = None) -> float:
            s = m[col] if s is None and col in m else s
            return float(s.astype(float).median()) if s is not None and s.notna().any() else float("nan")

        row = {"run": r.run_id, "batch_size": int(b), "seed": r.meta.seed, "gen_s": med("time/gen_s"),
               "train_s": med("time/train_s"), "reward_s": med("time/reward_s"), "step_s": med("time/step_s")}
        full = r.metrics
        row["samples_per_step"] = med("", _per_step(full, "samples/retained").iloc[min(skip_first, len(full) - 1):]
                                      if "samples/retained" in full else None)
        if not math.isfinite(row["samples_per_step"]):
            row["samples_per_step"] = float(b)
        for key, col in (("gen_tokens_per_step", "tokens/generated"), ("train_tokens_per_step", "tokens/trained")):
            s = _per_step(full, col)
            row[key] = med("", s.iloc[min(skip_first, len(s) - 1):]) if s is not None else float("nan")
        if not math.isfinite(row["step_s"]):
            parts = [row[k] for k in ("gen_s", "train_s", "reward_s") if math.isfinite(row[k])]
            row["step_s"] = float(sum(parts)) if parts else float("nan")
        row["throughput_samples_per_s"] = (row["samples_per_step"] / row["step_s"]
                                           if row["step_s"] and math.isfinite(row["step_s"]) else float("nan"))
        rows.append(row)
    cols = ["run", "batch_size", "seed", "gen_s", "train_s", "reward_s", "step_s", "samples_per_step",
            "gen_tokens_per_step", "train_tokens_per_step", "throughput_samples_per_s"]
    return pd.DataFrame(rows, columns=cols)


def fit_power(x: Sequence[float], t: Sequence[float], conf: float = 0.95) -> dict[str, Any]:
    """Fit ``t = a * x^k`` by least squares on log t vs log x. Returns ``a``, ``exponent`` k, ``exponent_ci`` (t
    interval at ``conf``; NaN with two points), ``r2``, ``n``. Raises :class:`UserError` with fewer than two distinct
    positive x. Units: those of t (seconds) and x (responses or tokens)."""
    from scipy import stats

    x, t = np.asarray(x, float), np.asarray(t, float)
    ok = (x > 0) & (t > 0) & np.isfinite(x) & np.isfinite(t)
    x, t = x[ok], t[ok]
    if len(np.unique(x)) < 2:
        raise UserError(f"need timings at two or more batch sizes to fit, got {len(np.unique(x))}", field="batch_size")
    res = stats.linregress(np.log(x), np.log(t))
    n = len(x)
    if n > 2:
        q = stats.t.ppf(0.5 + conf / 2, n - 2) * res.stderr
        ci = [float(res.slope - q), float(res.slope + q)]
    else:
        ci = [float("nan"), float("nan")]
    return {"a": float(math.exp(res.intercept)), "exponent": float(res.slope), "exponent_ci": ci,
            "r2": float(res.rvalue ** 2) if n > 2 else 1.0, "n": int(n)}


def fit_affine(x: Sequence[float], t: Sequence[float]) -> dict[str, Any]:
    """Fit ``t = intercept + slope * x`` by least squares (a single x gives a line through the origin). Returns
    ``intercept``, ``slope``, ``r2``, ``n``. Raises :class:`UserError` when no finite point exists."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    ok = np.isfinite(x) & np.isfinite(t)
    x, t = x[ok], t[ok]
    if not len(x):
        raise UserError("no finite timings to fit", field="time")
    if len(np.unique(x)) < 2:
        return {"intercept": 0.0, "slope": float(np.mean(t) / np.mean(x)) if np.mean(x) else 0.0, "r2": float("nan"),
                "n": int(len(x))}
    slope, intercept = np.polyfit(x, t, 1)
    pred = intercept + slope * x
    ss = float(((t - t.mean()) ** 2).sum())
    r2 = 1 - float(((t - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    return {"intercept": float(intercept), "slope": float(slope), "r2": r2, "n": int(len(x))}


def fit_throughput_model(timings: pd.DataFrame | Sequence[Any]) -> dict[str, Any]:
    """Fit the per-step time model (module docstring) from runs or from a :func:`step_timings` frame.

    Returns ``{"gen": fit_power over B, "gen_tokens": fit_power over generated tokens per step (None without token
    counts; use it when response lengths differ between runs), "train": fit_affine over train tokens per step (or B), "train_x":
    "tokens"|"batch_size", "tokens_per_response": mean trained tokens per retained response (NaN without tokens),
    "reward": fit_affine over B or None, "batch_range": [min B, max B]}``. Raises :class:`UserError` with fewer
    than two distinct batch sizes having generation time.
    """
    t = timings if isinstance(timings, pd.DataFrame) else step_timings(timings)
    g = t.dropna(subset=["gen_s"])
    model: dict[str, Any] = {"gen": fit_power(g["batch_size"], g["gen_s"]), "gen_tokens": None}
    gt = g.dropna(subset=["gen_tokens_per_step"])
    if len(gt) and gt["gen_tokens_per_step"].nunique() >= 2:
        model["gen_tokens"] = fit_power(gt["gen_tokens_per_step"], gt["gen_s"])
    tr = t.dropna(subset=["train_s"])
    tok = tr.dropna(subset=["train_tokens_per_step"])
    if len(tok) and tok["batch_size"].nunique() == tr["batch_size"].nunique() and (tok["train_tokens_per_step"] > 0).all():
        model["train"] = fit_affine(tok["train_tokens_per_step"], tok["train_s"])
        model["train_x"] = "tokens"
        model["tokens_per_response"] = float((tok["train_tokens_per_step"] / tok["samples_per_step"]).mean())
    elif len(tr):
        model["train"] = fit_affine(tr["batch_size"], tr["train_s"])
        model["train_x"] = "batch_size"
        model["tokens_per_response"] = float("nan")
    else:
        model["train"], model["train_x"], model["tokens_per_response"] = None, None, float("nan")
    rw = t.dropna(subset=["reward_s"])
    model["reward"] = fit_affine(rw["batch_size"], rw["reward_s"]) if len(rw) else None
    model["batch_range"] = [int(t["batch_size"].min()), int(t["batch_size"].max())]
    return model


def predict(model: dict[str, Any], batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Predicted per-step times and throughput for each B (seconds; retained samples per second).

    Rows: ``batch_size``, ``gen_s``, ``train_s``, ``reward_s``, ``step_s``, ``throughput_samples_per_s`` (= B /
    step_s; assumes all B responses are retained), ``gen_throughput`` (= B / gen_s), ``extrapolated`` (B outside the
    measured range: a power law keeps its sublinearity forever, real decoding turns compute bound, so treat these as
    optimistic).
    """
    lo, hi = model["batch_range"]
    out = []
    for b in batch_sizes:
        gen = model["gen"]["a"] * b ** model["gen"]["exponent"]
        train = 0.0
        if model.get("train"):
            x = b * model["tokens_per_response"] if model["train_x"] == "tokens" else b
            train = max(0.0, model["train"]["intercept"] + model["train"]["slope"] * x)
        rew = max(0.0, model["reward"]["intercept"] + model["reward"]["slope"] * b) if model.get("reward") else 0.0
        step = gen + train + rew
        out.append({"batch_size": int(b), "gen_s": gen, "train_s": train, "reward_s": rew, "step_s": step,
                    "throughput_samples_per_s": b / step if step > 0 else float("nan"),
                    "gen_throughput": b / gen if gen > 0 else float("nan"), "extrapolated": not (lo <= b <= hi)})
    return out


def time_ratios(batch_sizes: Sequence[float], times: Sequence[float], tol: float = 0.05) -> list[dict[str, Any]]:
    """For consecutive batch sizes: ``time_ratio`` t(B_hi)/t(B_lo), ``batch_ratio``, ``per_doubling`` =
    time_ratio^(1/log2(batch_ratio)), ``throughput_gain`` = batch_ratio / time_ratio and ``sublinear`` (per-doubling
    cost below 2 x (1 - tol): doubling B costs clearly less than double time). Pairs sorted by B; equal B averaged."""
    d = pd.DataFrame({"b": np.asarray(batch_sizes, float), "t": np.asarray(times, float)}).dropna()
    d = d[d["t"] > 0].groupby("b")["t"].mean().sort_index()
    bs, ts = d.index.to_numpy(), d.to_numpy()
    rows = []
    for i in range(len(bs) - 1):
        br, trt = bs[i + 1] / bs[i], ts[i + 1] / ts[i]
        per = trt ** (1.0 / math.log2(br))
        rows.append({"b_from": int(bs[i]), "b_to": int(bs[i + 1]), "batch_ratio": float(br), "time_ratio": float(trt),
                     "per_doubling": float(per), "throughput_gain": float(br / trt),
                     "sublinear": bool(per < 2.0 * (1 - tol))})
    return rows


def sublinear_window(batch_sizes: Sequence[float], times: Sequence[float], tol: float = 0.05) -> dict[str, Any]:
    """The sublinear generation window: the widest contiguous range of measured B over which every step up costs
    less than double time per doubling (:func:`time_ratios`). Returns ``{"window": [B_lo, B_hi] | None, "pairs":
    [...]}``; None when no step is sublinear. Source: Li et al. 2026 (memory-bound decoding at low concurrency)."""
    pairs = time_ratios(batch_sizes, times, tol)
    best, cur = None, None
    for p in pairs:
        if p["sublinear"]:
            cur = [cur[0] if cur else p["b_from"], p["b_to"]]
            if best is None or math.log(cur[1] / cur[0]) > math.log(best[1] / best[0]):
                best = list(cur)
        else:
            cur = None
    return {"window": best, "pairs": pairs}


def throughput_section(runs: Sequence[Any], predict_batches: Sequence[int] | None = None) -> dict[str, Any]:
    """The report section on throughput (report contract: title, markdown, figures, json_key, json).

    Measured per-step timings per run (:func:`step_timings`), the fitted time model (:func:`fit_throughput_model`),
    predictions for a ladder of B (default: doublings from the smallest measured B to 4x the largest), and the
    sublinear generation window (:func:`sublinear_window`). ``json`` = {"measured": [...], "model": {...} | None,
    "predicted": [...], "gen_window": {...}, "update_pairs": [...]}.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = step_timings(runs)
    js: dict[str, Any] = {"measured": t.to_dict(orient="records"), "model": None, "predicted": [],
                          "gen_window": None, "update_pairs": []}
    md: list[str] = []
    figs: dict[str, Any] = {}
    try:
        model = fit_throughput_model(t)
    except UserError as err:
        md.append(f"Throughput model not fitted: {err}.")
        return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs,
                "json_key": "throughput", "json": js}
    js["model"] = model
    lo, hi = model["batch_range"]
    if predict_batches is None:
        predict_batches, b = [], lo
        while b <= 4 * hi:
            predict_batches.append(b)
            b *= 2
    pred = predict(model, predict_batches)
    js["predicted"] = pred
    gw = sublinear_window(t["batch_size"], t["gen_s"])
    js["gen_window"] = gw
    js["update_pairs"] = time_ratios(t["batch_size"], t["train_s"])
    k = model["gen"]["exponent"]
    md.append(f"Generation time per step ~ {model['gen']['a']:.3g} x B^{k:.2f} (per doubling x{2 ** k:.2f}; "
              f"{'sublinear' if k < 1 else 'not sublinear'}).")
    if model.get("train"):
        unit = "trained token" if model["train_x"] == "tokens" else "response"
        md.append(f"Update time per step ~ {model['train']['intercept']:.3g} s + {model['train']['slope']:.3g} s per "
                  f"{unit}.")
    if gw["window"]:
        md.append(f"Sublinear generation window (measured): B = {gw['window'][0]} to {gw['window'][1]}.")
    else:
        md.append("No sublinear generation window among the measured batch sizes.")
    for p in gw["pairs"]:
        md.append(f"- gen B {p['b_from']} -> {p['b_to']}: time x{p['time_ratio']:.2f}, generation throughput "
                  f"x{p['throughput_gain']:.2f}")
    md.append("\n| B | gen s | update s | step s | samples/s | |\n|---|---|---|---|---|---|")
    for p in pred:
        md.append(f"| {p['batch_size']} | {p['gen_s']:.3g} | {p['train_s']:.3g} | {p['step_s']:.3g} | "
                  f"{p['throughput_samples_per_s']:.3g} | {'extrapolated' if p['extrapolated'] else 'fitted'} |")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    pb = np.array([p["batch_size"] for p in pred], float)
    a1.loglog(t["batch_size"], t["gen_s"], "o", label="generation (measured)")
    a1.loglog(pb, [p["gen_s"] for p in pred], "-", color=a1.lines[-1].get_color(), label="generation (fit)")
    if t["train_s"].notna().any():
        a1.loglog(t["batch_size"], t["train_s"], "s", label="update (measured)")
        a1.loglog(pb, [max(p["train_s"], 1e-12) for p in pred], "-", color=a1.lines[-1].get_color(),
                  label="update (fit)")
    a1.loglog(pb, pred[0]["gen_s"] * pb / pb[0], ":", color="gray", label="linear in B")
    from rlbatch.report.figures import batch_axis

    batch_axis(a1)
    a1.set_xlabel("batch size B")
    a1.set_ylabel("seconds per step")
    a1.legend(fontsize=8)
    a2.semilogx(t["batch_size"], t["throughput_samples_per_s"], "o", label="measured")
    a2.semilogx(pb, [p["throughput_samples_per_s"] for p in pred], "-", label="predicted")
    batch_axis(a2)
    a2.set_xlabel("batch size B")
    a2.set_ylabel("retained samples / s")
    a2.legend(fontsize=8)
    fig.tight_layout()
    figs["time_and_throughput_vs_batch"] = fig
    return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs,
            "json_key": "throughput", "json": js}
