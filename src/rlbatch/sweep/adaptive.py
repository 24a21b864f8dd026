"""Adaptive sweep: double the batch from the base, run each new trial only until the plan can decide, and stop
doubling once the throughput gain no longer beats the sample penalty rN (Li et al. 2026, "align, then accelerate").

The trial runner is passed in (``run_trial_fn(spec, run_dir) -> Path``, resumable: calling it again with a larger
``spec["samples"]`` continues the same run), so the same logic drives the local trainer
(``rlbatch.sweep.local.run_trial``) and the synthetic trial of the tests (:mod:`rlbatch.sweep.synthetic`).

Algorithm (B_k = B_0 x 2^k, learning rate from the square-root rule):

1. The base trial runs in chunks until it reaches the target (samples-to-target S_ref) or its ``samples`` budget.
2. Before a doubling (once two batch sizes are measured) the plan predicts the next batch (noise model rN,
   fitted time model): if even its optimistic time (lower end of the rN interval / predicted throughput gain) is
   no better than the best so far, stop without running it.
3. A new trial runs in chunks of ``chunk_fraction x S_ref`` samples until one of
   - it reaches the target: rN measured;
   - it has spent ``g x best x S_ref x (1 + margin)`` samples without reaching the target (g its measured
     throughput gain, ``best`` the best relative time so far): then rN > g x best, so it cannot beat the best;
   - with at least ``min_eval_points`` evaluations, the predicted rN *at the target* from the saturating fit of its
     curve (:func:`rlbatch.plan.plan_runs`, rN source ``fit``; :mod:`rlbatch.analysis.fit`) is decided against the
     throughput gain: its interval over the gain (the relative time's interval) lies wholly above or below the best
     relative time so far (1 while the reference is the best: rN wholly above or below the gain);
   - or the fit predicts it never reaches the target (fitted asymptote below it).
   Each trial records why it stopped (``decided_by``).
4. If its relative time is no better than the best so far, doubling stops; else it becomes the best and the next
   doubling follows (up to ``max_doublings``).

The recommendation is the final :func:`rlbatch.plan.plan_runs` over every trial run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

from rlbatch.errors import UserError


def _spec_dict(spec: Any) -> dict[str, Any]:
    return spec.model_dump() if hasattr(spec, "model_dump") else dict(spec)


def _read(run_dir: Path):
    from rlbatch.readers import load

    return load(run_dir, "rlbatch")[0]


def _samples(run) -> float:
    m = run.metrics
    return float(m["samples/retained"].max()) if len(m) and "samples/retained" in m else 0.0


def _throughput(run) -> float | None:
    """Whole-run throughput on the accounting's clock (:func:`rlbatch.analysis.throughput.run_throughput`)."""
    from rlbatch.analysis.throughput import clock_basis, run_throughput

    v = run_throughput(run, clock_basis([run]))["throughput_samples_per_s"]
    return v if v is not None and math.isfinite(v) and v > 0 else None


def _eval_points(run, metric: str) -> int:
    from rlbatch.analysis.curves import metric_frame

    df = metric_frame(run, metric)
    return int(df[metric].notna().sum()) if metric in df.columns else 0


def adaptive_sweep(run_trial_fn: Callable[[Any, Path], Any], base_spec: Any, sweep_dir: Path | str, *,
                   target: float, metric: str = "eval/score", max_doublings: int = 6, chunk_fraction: float = 0.25,
                   margin: float = 0.05, min_eval_points: int = 8, tol: float = 0.1, predict_skip: bool = True,
                   n_boot: int = 200, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the adaptive doubling sweep (module docstring) and return its record.

    ``base_spec``: dict or pydantic model (e.g. ``TrialSpec``) with ``prompts_per_step``, ``group_size``, ``lr``,
    ``samples`` (the base trial's budget of retained samples) and optionally ``lr_rule`` (default ``sqrt``),
    ``seed``, ``model``, ``task`` and trainer options (passed through). New trials get P doubled, ``lr`` =
    :func:`rlbatch.scaling.scaled_lr`, ``run_id`` = :func:`rlbatch.sweep.trials.trial_id`, ``base_batch`` and
    ``base_lr``, and the same type as ``base_spec``. Trials live in ``sweep_dir/<run_id>``.

    Returns ``{"recommended", "recommended_batch_size", "reference", "target", "samples_spent" (retained samples
    over all trials), "trials": [{run_id, batch_size, samples, decided_by, relative_time, relative_throughput, rN,
    faster_than_best}], "stopped_because": str, "plan": the final plan}``. Raises :class:`UserError` when the base
    trial does not reach the target within its budget, or a parameter is out of range.
    """
    from rlbatch.analysis.accounting import account_runs, estimate_configuration
    from rlbatch.plan import plan_runs
    from rlbatch.scaling import scaled_lr
    from rlbatch.sweep.trials import trial_id

    if not (0 < chunk_fraction <= 1):
        raise UserError(f"chunk_fraction must be in (0, 1], got {chunk_fraction}", field="chunk_fraction")
    if max_doublings < 1:
        raise UserError(f"max_doublings must be >= 1, got {max_doublings}", field="max_doublings")
    say = progress or (lambda _m: None)
    base = _spec_dict(base_spec)
    for k in ("prompts_per_step", "group_size", "lr", "samples"):
        if base.get(k) is None:
            raise UserError(f"base trial spec lacks {k!r}", field=k)
    sweep_dir = Path(sweep_dir)
    p0, g = int(base["prompts_per_step"]), int(base["group_size"])
    b0, lr0 = p0 * g, float(base["lr"])
    rule = base.get("lr_rule") or "sqrt"
    seed = int(base.get("seed") or 0)
    cap0 = int(base["samples"])
    make = type(base_spec) if hasattr(base_spec, "model_dump") else dict

    def spec_for(k: int, samples: int) -> dict[str, Any]:
        p = p0 * 2 ** k
        b = p * g
        d = {**base, "prompts_per_step": p, "group_size": g, "lr": scaled_lr(b, b0, lr0, rule), "lr_rule": rule,
             "base_batch": b0, "base_lr": lr0, "seed": seed, "samples": int(samples),
             "run_id": base.get("run_id") if k == 0 and base.get("run_id") else trial_id(p, g, rule, seed)}
        if "batch_size" in d:
            d["batch_size"] = b
        if "steps" in d:
            d["steps"] = math.ceil(samples / b)
        return d

    def advance(d: dict[str, Any], samples: int):
        d["samples"] = int(samples)
        if "steps" in d:
            d["steps"] = math.ceil(samples / (d["prompts_per_step"] * g))
        run_dir = sweep_dir / d["run_id"]
        run_trial_fn(make(**d) if make is not dict else dict(d), run_dir)
        return _read(run_dir)

    def s2t(run) -> float | None:  # the accounting's samples-to-target (rlbatch.analysis.accounting)
        return estimate_configuration([run], target, metric, n_boot=0)["samples_to_target"]

    # 1. the base trial, until it reaches the target
    chunk0 = max(b0, int(chunk_fraction * cap0 / 2))
    d0 = spec_for(0, chunk0)
    spent = chunk0
    while True:
        ref = advance(d0, spent)
        s_ref = s2t(ref)
        if s_ref is not None or spent >= cap0:
            break
        spent = min(cap0, spent + chunk0)
    if s_ref is None:
        raise UserError(f"the base trial {d0['run_id']} did not reach {metric} >= {target:g} within its budget of "
                        f"{cap0} samples: raise samples or lower the target", field="samples")
    x_ref = _throughput(ref)
    if x_ref is None:
        raise UserError(f"the base trial {d0['run_id']} logged no step timings: cannot compare throughput",
                        field="time/step_s")
    say(f"B={b0}: reached {target:g} after {s_ref:.0f} samples (reference)")
    runs = [ref]
    trials = [{"run_id": ref.run_id, "batch_size": b0, "samples": _samples(ref), "decided_by": "reference",
               "relative_time": 1.0, "relative_throughput": 1.0, "rN": 1.0, "faster_than_best": None}]
    best_rel, best_b = 1.0, b0
    stopped = f"reached the largest doubling (max_doublings={max_doublings})"
    chunk = max(1, int(chunk_fraction * s_ref))

    for k in range(1, max_doublings + 1):
        b = b0 * 2 ** k
        # 2. predicted: skip the doubling when even the optimistic prediction loses
        if predict_skip and len(runs) >= 2:
            try:
                pp = plan_runs(runs, target, reference=ref.run_id, metric=metric, candidates=[b], tol=tol,
                               n_boot=n_boot, extend=False)
            except UserError:
                pp = None
            c = next((c for c in (pp or {}).get("candidates", []) if c["batch_size"] == b and not c["runs"]), None)
            if c and c["rN"] is not None and c["relative_throughput"]:
                optimistic = (c["rN_ci"][0] if c["rN_ci"] else c["rN"]) / c["relative_throughput"]
                if optimistic >= best_rel:
                    stopped = (f"predicted: at B={b} the throughput gain {c['relative_throughput']:.2f}x does not beat "
                               f"rN {c['rN']:.2f} by enough to improve on B={best_b} (optimistic relative time "
                               f"{optimistic:.2f} >= {best_rel:.2f})")
                    say(stopped)
                    break
        # 3. run until decided
        d = spec_for(k, 0)
        step_chunk = max(b, int(math.ceil(chunk / b)) * b)
        spent = step_chunk
        while True:
            run = advance(d, spent)
            x = _throughput(run)
            gain = x / x_ref if x else None
            s = s2t(run)
            got = _samples(run)
            rec = {"run_id": run.run_id, "batch_size": b, "samples": got, "relative_throughput": gain}
            if s is not None:  # rN and relative time exactly as rlbatch analyze gives them
                row = next(r for r in account_runs([ref, run], target, metric, ref.run_id, n_boot=n_boot)["rows"]
                           if r["runs"] == [run.run_id])
                rec.update(decided_by="reached the target", rN=row["rN"], rN_source="measured", rN_ci=row["rN_ci"],
                           relative_time=row["relative_time"],
                           relative_throughput=row["relative_throughput"])
                break
            cap = (gain or 1.0) * best_rel * s_ref * (1 + margin)
            if got >= cap:
                rec.update(decided_by=f"sample cap {cap:.0f} (rN > throughput gain x best relative time)",
                           rN=None, relative_time=None)
                break
            if _eval_points(run, metric) >= min_eval_points and gain:
                try:
                    pp = plan_runs([ref, run], target, reference=ref.run_id, metric=metric, tol=tol, n_boot=n_boot,
                                   extend=False)
                    c = next(c for c in pp["candidates"] if c["batch_size"] == b)
                except (UserError, StopIteration):
                    c = None
                if c and c.get("never_reaches"):
                    rec.update(decided_by=f"fit: never reaches the target ({c['never_reaches']})", rN=None,
                               relative_time=None, rN_source="fit")
                    break
                if c and c.get("interval") and c["rN_source"] == "fit":
                    # the predicted rN at the target against the throughput gain: rN / gain vs the best so far
                    lo, hi = c["interval"]
                    hi = math.inf if hi is None else hi
                    if hi < best_rel or lo > best_rel:
                        side = "below" if hi < best_rel else "above"
                        rec.update(decided_by=f"fit: predicted rN at the target {c['rN']:.2f} (interval "
                                              f"{c['rN_ci'][0]:.2f}-{c['rN_ci'][1] if c['rN_ci'][1] is not None else math.inf:.2f}) "
                                              f"wholly {side} the throughput gain x best relative time "
                                              f"{(gain or 1.0) * best_rel:.2f}",
                                   rN=c["rN"], relative_time=c["predicted_relative_time"], rN_source="fit",
                                   rN_ci=c["rN_ci"])
                        break
            nxt = spent + step_chunk
            spent = min(nxt, int(math.ceil(cap / b)) * b) if nxt > cap else nxt
        runs.append(run)
        rel = rec.get("relative_time")
        better = rel is not None and rel < best_rel
        rec["faster_than_best"] = better
        trials.append(rec)
        say(f"B={b}: {rec['decided_by']} after {got:.0f} samples; relative time "
            f"{'%.2f' % rel if rel is not None else '> %.2f' % best_rel}")
        if not better:
            stopped = (f"measured: at B={b} the throughput gain {gain:.2f}x no longer beats rN by enough to improve on "
                       f"B={best_b}" if gain else f"measured: B={b} is not faster than B={best_b}")
            break
        best_rel, best_b = rel, b

    plan = plan_runs(runs, target, reference=ref.run_id, metric=metric, tol=tol, n_boot=n_boot, extend=False)
    return {"recommended": plan["recommended"], "recommended_batch_size": plan["recommended_batch_size"],
            "best_batch_during_sweep": best_b, "reference": ref.run_id, "target": target,
            "samples_spent": float(sum(t["samples"] for t in trials)), "trials": trials, "stopped_because": stopped,
            "plan": plan}
