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
from scipy import stats

from rlbatch.analysis.samples import X, policy_offset
from rlbatch.errors import UserError


#: Clocks a time axis can be measured on: ``wall`` (``time/wall_s``, cumulative wall-clock excluding evaluation) and
#: ``cpu`` (the cumulative sum of ``time/cpu_s``, the trainer's process CPU seconds per step).
CLOCKS = ("wall", "cpu")
PHASES = ("time/gen_s", "time/reward_s", "time/train_s")


def throughput_to_target(s: float, t: float) -> float:
    """Throughput up to the target, X = S / T: retained samples per second from the start to the crossing
    (``s``: samples-to-target, responses; ``t``: time-to-target, seconds; Li et al. 2026, end-to-end accounting).
    Arrays work element-wise (bootstrap replicates)."""
    return s / t


def throughput_whole_run(samples: float, seconds: float) -> float:
    """Throughput over a whole run (or any span of steps): its retained samples / its seconds on the study's clock
    (the run and configuration tables' column, the time model's points, and the accounting's throughput of a
    configuration that has not reached the target). Arrays work element-wise."""
    return samples / seconds


def clock_basis(runs: Sequence[Any], requested: str = "auto") -> str:
    """The clock that time-to-target and throughput are measured on, the same for every run compared.

    ``auto``: ``cpu`` when every run logs ``time/cpu_s`` and ran on a CPU device (``hardware.device == "cpu"``):
    there the process CPU time is the work of the step, untouched by other processes (other trials of the sweep,
    other users) that share the cores and stretch the wall-clock — the fixed-LR control and the square-root run at
    the same B then measure the same throughput; else ``wall``. With an asynchronous run among them
    (``time/overlap_s`` logged: generation in its own process) ``auto`` is ``wall``: CPU time adds up both
    processes' work, so it cannot show what overlapping them saves, and the accounting would contradict the report's
    synchronous-vs-asynchronous comparison (wall-clock). ``wall`` / ``cpu`` force one (``cpu`` raises
    :class:`UserError` when a run lacks ``time/cpu_s``)."""
    runs = list(runs)
    if requested not in ("auto",) + CLOCKS:
        raise UserError(f"clock must be auto, wall or cpu, got {requested!r}", field="clock")
    has_cpu = [isinstance(r.metrics, pd.DataFrame) and "time/cpu_s" in r.metrics.columns
               and r.metrics["time/cpu_s"].notna().any() for r in runs]
    if requested == "cpu":
        missing = [r.run_id for r, h in zip(runs, has_cpu) if not h]
        if missing:
            raise UserError(f"no time/cpu_s in run(s) {', '.join(missing[:4])}: use --clock wall", field="clock")
        return "cpu"
    if requested == "wall":
        return "wall"

    def on_cpu(r: Any) -> bool:
        hw = r.meta.hardware
        return isinstance(hw, dict) and str(hw.get("device", "")).startswith("cpu")

    def asynchronous(r: Any) -> bool:
        m = r.metrics
        return isinstance(m, pd.DataFrame) and "time/overlap_s" in m.columns and m["time/overlap_s"].notna().any()

    if any(asynchronous(r) for r in runs):
        return "wall"
    return "cpu" if runs and all(has_cpu) and all(on_cpu(r) for r in runs) else "wall"


#: runs of at least this many steps count their first step (the warm-up) as a typical one (:func:`run_clock`)
WARMUP_MIN_STEPS = 3


def run_clock(run: Any, basis: str = "wall") -> tuple[np.ndarray, np.ndarray] | None:
    """The run's clock on the policy-sample axis: ``(samples, seconds)``, both non-decreasing, one point per step
    plus ``(0, 0)`` first; ``samples`` as :func:`rlbatch.analysis.curves.curve` (critic warm-up removed; its time is
    kept), ``seconds`` cumulative on ``basis`` (``wall``: ``time/wall_s``, else the sum of ``time/step_s``; ``cpu``:
    the sum of ``time/cpu_s``; without either wall column, the sum of the phases ``time/gen_s`` + ``time/reward_s``
    + ``time/train_s``). Equal sample values keep the last point. The first step's seconds (the warm-up) are
    replaced by the median of the next ten steps' when the run has :data:`WARMUP_MIN_STEPS` or more. None without
    samples or clock."""
    m = run.metrics
    if not isinstance(m, pd.DataFrame) or X not in m.columns or not len(m):
        return None
    if basis == "cpu":
        if "time/cpu_s" not in m.columns:
            return None
        sec = pd.to_numeric(m["time/cpu_s"], errors="coerce").fillna(0.0).cumsum()
    elif "time/wall_s" in m.columns and m["time/wall_s"].notna().any():
        sec = pd.to_numeric(m["time/wall_s"], errors="coerce")
    elif "time/step_s" in m.columns and m["time/step_s"].notna().any():
        sec = pd.to_numeric(m["time/step_s"], errors="coerce").fillna(0.0).cumsum()
    elif any(c in m.columns for c in PHASES):
        sec = sum(pd.to_numeric(m[c], errors="coerce").fillna(0.0) for c in PHASES if c in m.columns).cumsum()
    else:
        return None
    x = pd.to_numeric(m[X], errors="coerce")
    ok = x.notna() & sec.notna()
    xs = np.r_[0.0, (x[ok].to_numpy(float) - policy_offset(m)).clip(min=0.0)]
    ts = np.r_[0.0, sec[ok].to_numpy(float)]
    if len(xs) < 2:
        return None
    xs, ts = np.maximum.accumulate(xs), np.maximum.accumulate(ts)
    dt = np.diff(ts)
    if len(dt) >= WARMUP_MIN_STEPS and dt[0] > 0:
        # step 1 holds the warm-up (allocation, compilation, the pipeline filling): it counts as a typical step of
        # the run, the median of the next ten, so a 5-step run at a large B is not charged a warm-up that a 500-step
        # run at a small B spreads thin (statistics review finding 12; issue 44)
        dt[0] = float(np.median(dt[1:11]))
        ts = np.r_[0.0, np.cumsum(dt)]
    keep = np.r_[xs[1:] != xs[:-1], True]
    return xs[keep], ts[keep]


def time_at(clock: tuple[np.ndarray, np.ndarray] | None, samples: Any) -> Any:
    """Seconds on ``clock`` (:func:`run_clock`) at ``samples`` (scalar or array), linear between steps; None
    without a clock. Time-to-target is the clock at samples-to-target, interpolated like the samples."""
    if clock is None:
        return None
    xs, ts = clock
    v = np.interp(np.asarray(samples, float), xs, ts)
    return float(v) if np.ndim(v) == 0 else v


def step_seconds(clock: tuple[np.ndarray, np.ndarray] | None, upto: float | None = None) -> np.ndarray:
    """Per-step seconds of ``clock`` (the increments), over the steps up to ``upto`` samples when given: the unit
    the timing bootstrap resamples."""
    if clock is None:
        return np.array([])
    xs, ts = clock
    dt = np.diff(ts)
    if upto is not None:
        dt = dt[: max(1, int(np.searchsorted(xs, upto, side="left")))]
    return dt


def timing_factors(dt: np.ndarray, n_boot: int, rng: np.random.Generator, block: int = 10) -> np.ndarray:
    """Timing noise as multiplicative factors (n_boot,): a moving-block bootstrap (Kuensch 1989; blocks of
    ``block`` consecutive steps, which keeps the correlation of slow phases such as a busy neighbour) of the mean
    step time over the mean. Ones when fewer than two steps."""
    dt = np.asarray(dt, float)
    n = len(dt)
    if n < 2 or not (dt.sum() > 0):
        return np.ones(n_boot)
    if n_boot <= 0:
        return np.ones(0)
    b = max(1, min(block, n))
    k = int(math.ceil(n / b))
    starts = rng.integers(0, n - b + 1, (n_boot, k))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(n_boot, -1)[:, :n]
    return dt[idx].mean(axis=1) / dt.mean()


def run_throughput(run: Any, basis: str = "wall", upto: float | None = None) -> dict[str, Any]:
    """Retained (policy) samples per second of ``run`` on ``basis`` (:func:`run_clock`): over the whole run, or up
    to ``upto`` samples. Returns ``{"throughput_samples_per_s", "samples", "seconds", "basis"}`` (None where the
    log lacks samples or a clock). Source: Li et al. 2026, throughput = retained samples / second."""
    c = run_clock(run, basis)
    if c is None:
        return {"throughput_samples_per_s": None, "samples": None, "seconds": None, "basis": basis}
    xs, ts = c
    s = float(xs[-1]) if upto is None else float(upto)
    t = time_at(c, s)
    return {"throughput_samples_per_s": throughput_whole_run(s, t) if t and t > 0 and s > 0 else None, "samples": s,
            "seconds": t,
            "basis": basis}


def _per_step(m: pd.DataFrame, col: str) -> pd.Series | None:
    """Per-step increments of a cumulative column (first step counted from 0)."""
    if col not in m:
        return None
    c = m[col].astype(float).dropna()
    if not len(c):
        return None
    return c.diff().fillna(c.iloc[0])


def step_timings(runs: Sequence[Any], skip_first: int = 1, clock: str = "wall") -> pd.DataFrame:
    """Per-run timings and sizes, one row per run, every time on ``clock`` (the accounting's).

    Columns: ``run``, ``batch_size`` (B, nominal P x G), ``seed``, ``step_s`` (mean seconds per step on ``clock``
    over the whole run: total clock / steps, :func:`run_clock`), ``gen_s``, ``reward_s``, ``train_s``, ``other_s``
    (the step split into generation, scoring, update and the rest: the whole-run mean of ``time/gen_s``,
    ``time/reward_s``, ``time/train_s`` per step, which the trainer measures in wall seconds, times ``step_s`` /
    the wall seconds per step, so that on the CPU clock each phase keeps its wall-clock share of the step;
    ``other_s`` = ``step_s`` - the three, so the four add up to ``step_s``; negative only where phases overlap,
    as with asynchronous rollouts), ``samples_per_step`` (mean retained responses per step: total / steps, not a
    median, which group filtering quantises), ``retained_fraction`` (retained / generated responses),
    ``gen_tokens_per_step``, ``train_tokens_per_step`` (from the cumulative ``tokens/*``, skipping the first
    ``skip_first`` steps; NaN if missing), ``samples``, ``seconds`` (whole run), ``steps`` and
    ``throughput_samples_per_s`` = samples / seconds (:func:`run_throughput`).
    """
    rows = []
    for r in runs:
        m, b = r.metrics, r.meta.batch_size
        if b is None or not isinstance(m, pd.DataFrame) or not len(m):
            continue

        def mean(col: str) -> float:
            s = pd.to_numeric(m[col], errors="coerce") if col in m else None
            return float(s.mean()) if s is not None and s.notna().any() else float("nan")

        tp = run_throughput(r, clock)
        steps = len(m)
        row = {"run": r.run_id, "batch_size": int(b), "seed": r.meta.seed}
        row["samples"], row["seconds"], row["steps"] = tp["samples"], tp["seconds"], steps
        row["step_s"] = tp["seconds"] / steps if tp["seconds"] else float("nan")
        wall = run_throughput(r, "wall")["seconds"] if clock != "wall" else tp["seconds"]
        scale = row["step_s"] * steps / wall if wall and math.isfinite(row["step_s"]) else 1.0
        phases = {"gen_s": mean("time/gen_s"), "reward_s": mean("time/reward_s"), "train_s": mean("time/train_s")}
        row.update({k: v * scale for k, v in phases.items()})
        known = [v for v in (row["gen_s"], row["reward_s"], row["train_s"]) if math.isfinite(v)]
        row["other_s"] = row["step_s"] - sum(known) if known and math.isfinite(row["step_s"]) else float("nan")
        if abs(row["other_s"]) < 1e-9 * row["step_s"]:  # rounding of a step that is the sum of its phases
            row["other_s"] = 0.0
        row["samples_per_step"] = tp["samples"] / steps if tp["samples"] is not None else float(b)
        gen = pd.to_numeric(m["samples/generated"], errors="coerce").dropna() if "samples/generated" in m else None
        row["retained_fraction"] = (float(tp["samples"] / gen.iloc[-1]) if gen is not None and len(gen)
                                    and gen.iloc[-1] > 0 and tp["samples"] is not None else 1.0)
        for key, col in (("gen_tokens_per_step", "tokens/generated"), ("train_tokens_per_step", "tokens/trained")):
            s = _per_step(m, col)
            row[key] = float(s.iloc[min(skip_first, len(s) - 1):].mean()) if s is not None else float("nan")
        x = tp["throughput_samples_per_s"]
        row["throughput_samples_per_s"] = x if x is not None else float("nan")
        rows.append(row)
    cols = ["run", "batch_size", "seed", "gen_s", "train_s", "reward_s", "other_s", "step_s", "samples_per_step",
            "retained_fraction", "gen_tokens_per_step", "train_tokens_per_step", "samples", "seconds", "steps",
            "throughput_samples_per_s"]
    return pd.DataFrame(rows, columns=cols)


def configuration_timings(groups: dict[str, Sequence[Any]], clock: str = "wall") -> list[dict[str, Any]]:
    """Per configuration (its seeds, :func:`rlbatch.analysis.curves.group_seeds`), the whole-run means the report's
    configuration table and time-per-step figure show, on ``clock``: ``config``, ``batch_size``, ``n_seeds``,
    ``steps`` (mean over seeds), ``samples``, ``seconds`` (geometric means over seeds of each seed's whole run, as
    the accounting combines seeds), ``step_s``, ``gen_s``, ``reward_s``, ``train_s``, ``other_s`` (seconds per step
    pooled over the seeds' steps, :func:`step_timings`; the four phases add up to ``step_s``) and ``gen_share``
    (``gen_s`` / ``step_s``). ``samples`` / ``seconds`` is the configuration's whole-run throughput, the value of
    :func:`rlbatch.analysis.accounting.estimate_configuration` without a target."""
    out = []
    for name, rs in groups.items():
        t = step_timings(rs, clock=clock)
        if not len(t):
            continue
        steps = float(t["steps"].sum())
        gm = (lambda v: float(np.exp(np.mean(np.log(v.astype(float))))) if (v > 0).all() else float(v.mean()))
        row: dict[str, Any] = {"config": name, "batch_size": int(t["batch_size"].iloc[0]), "n_seeds": len(t),
                               "steps": float(t["steps"].mean()), "samples": gm(t["samples"]),
                               "seconds": gm(t["seconds"])}
        for k in ("step_s", "gen_s", "reward_s", "train_s", "other_s"):
            v = t[k].astype(float)
            row[k] = float((v * t["steps"]).sum() / steps) if v.notna().all() and steps else float("nan")
        row["gen_share"] = row["gen_s"] / row["step_s"] if row["step_s"] and math.isfinite(row["step_s"]) \
            else float("nan")
        out.append(row)
    return out


def fit_power(x: Sequence[float], t: Sequence[float], conf: float = 0.95) -> dict[str, Any]:
    """Fit ``t = a * x^k`` by least squares on log t vs log x. Returns ``a``, ``exponent`` k, ``exponent_ci`` (t
    interval at ``conf``; NaN with two points), ``r2``, ``n``. Raises :class:`UserError` with fewer than two distinct
    positive x. Units: those of t (seconds) and x (responses or tokens)."""
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
    # the measured points the prediction passes through: per B (runs at one B pooled, seeds and LR rules alike)
    # seconds per step and the retained fraction
    pts = []
    for b, d in t.groupby("batch_size"):
        st = d["step_s"].astype(float)
        if not st.notna().any():
            st = d[["gen_s", "train_s", "reward_s"]].astype(float).fillna(0.0).sum(axis=1)
        if "samples" in d and d["samples"].notna().all() and d["seconds"].notna().all() and d["seconds"].sum() > 0:
            steps = d["steps"].sum()
            step_s = float(d["seconds"].sum() / steps) if steps > 0 else float(st.mean())
        else:
            step_s = float(st.mean())
        frac = float(d["retained_fraction"].mean()) if "retained_fraction" in d and d["retained_fraction"].notna().any() \
            else 1.0
        pts.append({"batch_size": int(b), "step_s": step_s, "retained_fraction": frac})
    model["points"] = pts
    ok = [p for p in pts if p["step_s"] > 0 and math.isfinite(p["step_s"])]
    model["step"] = fit_power([p["batch_size"] for p in ok], [p["step_s"] for p in ok]) if len(ok) >= 2 else None
    return model


def _phases(model: dict[str, Any], b: float, retained_fraction: float = 1.0) -> tuple[float, float, float]:
    """Seconds per step of generation, update and scoring at B from the per-phase fits (module docstring). The
    update trains the retained responses only: its tokens per step are B x ``retained_fraction`` x the tokens per
    retained response (the fit's x), not B x those (which overstates it by 1 / f, ~1.5x at f = 0.65)."""
    gen = model["gen"]["a"] * b ** model["gen"]["exponent"]
    train = 0.0
    if model.get("train"):
        x = b * retained_fraction * model["tokens_per_response"] if model["train_x"] == "tokens" else b
        train = max(0.0, model["train"]["intercept"] + model["train"]["slope"] * x)
    rew = max(0.0, model["reward"]["intercept"] + model["reward"]["slope"] * b) if model.get("reward") else 0.0
    return gen, train, rew


def predict(model: dict[str, Any], batch_sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Predicted per-step times and throughput for each B (seconds; retained samples per second).

    Throughput = f(B) x B / t_step(B), with f the retained fraction (group filtering) and t_step the seconds per
    step. Inside the measured range both are interpolated between the measured points (log-log for t_step, linear
    in log B for f), so at a measured B the prediction is the measurement; outside it t_step follows the per-phase
    model (power-law generation, affine update and scoring) scaled to meet the nearest measured end, and f is the
    nearest end's (``extrapolated``: a power law keeps its sublinearity forever, real decoding turns compute bound,
    so treat these as optimistic). Rows:
    ``batch_size``, ``gen_s``, ``train_s``, ``reward_s`` (from the per-phase fits), ``step_s``, ``shares`` (each
    phase's share of the fitted phases, ``{"gen", "reward", "train"}``: the split of ``step_s``, which is anchored
    to the measured points, into parts that add up to it), ``retained_fraction``, ``throughput_samples_per_s``,
    ``gen_throughput`` (= B / gen_s), ``extrapolated``.
    """
    lo, hi = model["batch_range"]
    pts = sorted((p for p in model.get("points") or [] if p["step_s"] > 0 and math.isfinite(p["step_s"])),
                 key=lambda p: p["batch_size"])
    out = []
    for b in batch_sizes:
        frac = 1.0
        if pts:
            lb = np.log([p["batch_size"] for p in pts])
            frac = float(np.interp(math.log(b), lb, [p["retained_fraction"] for p in pts]))
        gen, train, rew = _phases(model, b, frac)
        if pts:
            if len(pts) >= 2 and lb[0] <= math.log(b) <= lb[-1]:
                step = float(np.exp(np.interp(math.log(b), lb, np.log([p["step_s"] for p in pts]))))
            else:  # the per-phase model (power-law generation + affine update), anchored at the nearest end
                end = pts[0] if b < pts[0]["batch_size"] else pts[-1]
                comp_end = sum(_phases(model, end["batch_size"], end["retained_fraction"]))
                step = end["step_s"] * (gen + train + rew) / comp_end if comp_end > 0 else end["step_s"] * b / end[
                    "batch_size"]
        else:
            step = gen + train + rew
        parts = gen + train + rew
        out.append({"batch_size": int(b), "gen_s": gen, "train_s": train, "reward_s": rew, "step_s": step,
                    "shares": {"gen": gen / parts, "reward": rew / parts, "train": train / parts} if parts > 0
                    else None,
                    "retained_fraction": frac,
                    "throughput_samples_per_s": frac * b / step if step > 0 else float("nan"),
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
