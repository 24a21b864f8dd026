"""The learning-rate schedule a log shows: its logged values read as first / peak / last, warm-up and decay, and,
where the logged values follow a linear decay to zero that began before the first logged step, the schedule's peak
(issue 53: a TRL ``trainer_state.json`` logged every 5 steps shows 8e-07 at step 5 of a 1e-06 schedule)."""

from __future__ import annotations

from typing import Any

import numpy as np


def lr_schedule(steps: np.ndarray, lrs: np.ndarray) -> dict[str, Any] | None:
    """The learning-rate schedule as logged: ``first``, ``peak`` (the largest value; a run's learning rate),
    ``peak_step``, ``last``, ``warmup_steps`` (steps before the peak while the rate rose; 0 when the first value is
    the peak) and ``decay`` after the peak: ``constant`` (within 1% of the peak to the end), ``linear`` or
    ``cosine`` (whichever fits the values after the peak better, RMS relative to the peak, when it fits within 5%),
    ``still rising`` (the log ends in the warm-up), else ``other``. None when no positive value is logged."""
    ok = np.isfinite(lrs) & (lrs > 0)
    if not ok.any():
        return None
    s, v = steps[ok].astype(float), lrs[ok].astype(float)
    i = int(np.argmax(v))
    peak = float(v[i])
    out: dict[str, Any] = {"first": float(v[0]), "peak": peak, "peak_step": int(s[i]), "last": float(v[-1]),
                           "warmup_steps": int(s[i] - s[0]) if i > 0 and v[0] < 0.99 * peak else 0}
    tail_s, tail_v = s[i:], v[i:]
    if i == len(v) - 1 and i > 0 and out["warmup_steps"]:
        out["decay"] = "still rising"  # the log ends during the warm-up: the peak is only that of the logged values
        return out
    if len(tail_v) < 3 or np.all(np.abs(tail_v - peak) <= 0.01 * peak):
        out["decay"] = "constant" if np.all(np.abs(tail_v - peak) <= 0.01 * peak) else "other"
        return out
    x = (tail_s - tail_s[0]) / max(tail_s[-1] - tail_s[0], 1.0)
    lo = float(tail_v[-1])
    # fitted on the logged span: linear from peak to the last value, or a half cosine between them
    lin = peak + (lo - peak) * x
    cos = lo + (peak - lo) * 0.5 * (1 + np.cos(np.pi * x))
    err = {k: float(np.sqrt(np.mean((f - tail_v) ** 2)) / peak) for k, f in (("linear", lin), ("cosine", cos))}
    best = min(err, key=err.get)
    out["decay"] = best if err[best] <= 0.05 else "other"
    if out["decay"] == "linear" and not out["warmup_steps"] and s[0] > 1 and len(s) >= 3:
        # the first logged value is the largest and the values fall on one line to zero at the run's end (a linear
        # decay to 0, as transformers' get_linear_schedule_with_warmup): the schedule began before the first
        # logged step; its peak is that line at step 1 (assuming no warm-up before the first logged step)
        slope, icpt = np.polyfit(s, v, 1)
        fit = np.sqrt(np.mean((slope * s + icpt - v) ** 2)) / peak
        zero = -icpt / slope if slope < 0 else np.inf
        gap = float(np.median(np.diff(s)))
        if fit <= 0.005 and s[-1] < zero <= s[-1] + gap + 1:
            out["schedule_peak"] = float(slope + icpt)
            out["schedule_zero_step"] = float(zero)
    elif out["decay"] == "linear" and out["warmup_steps"] and i >= 2 and len(s) - i >= 3:
        # a linear warm-up and a linear decay, logged every few steps: the peak lies between two logged steps,
        # where the two lines meet (transformers' linear schedule with warm-up: the logged largest value is below it)
        (a1, b1), (a2, b2) = np.polyfit(s[:i], v[:i], 1), np.polyfit(s[i:], v[i:], 1)
        fit = max(np.sqrt(np.mean((a1 * s[:i] + b1 - v[:i]) ** 2)), np.sqrt(np.mean((a2 * s[i:] + b2 - v[i:]) ** 2)))
        if a1 > 0 > a2 and fit / peak <= 0.005:
            at = (b2 - b1) / (a1 - a2)
            if s[i - 1] < at < s[i] and a1 * at + b1 > peak:
                out["schedule_peak"] = float(a1 * at + b1)
                out["schedule_peak_step"] = float(at)
    return out




def _sched_text(s: dict[str, Any]) -> str:
    warm = f"warm-up over {s['warmup_steps']} step(s) from {s['first']:.3g}, then " if s["warmup_steps"] else ""
    if s["decay"] == "constant":
        return warm + "constant"
    if s["decay"] == "still rising":
        return (f"rising from {s['first']:.3g} over {s['warmup_steps']} step(s) and still rising at the last logged "
                "step (a warm-up not finished in the log: the run's configured peak may be higher)")
    return warm + f"{s['decay']} decay to {s['last']:.3g}"


def lr_note(s: dict[str, Any]) -> str:
    """The note that says which learning rate a run got from its logged values, and which value is which."""
    if s.get("schedule_peak_step"):
        return (f"lr: {s['schedule_peak']:.3g}, the peak of the linear warm-up and linear decay the logged values "
                f"follow (the two lines meet at step {s['schedule_peak_step']:.1f}, between logged steps); the "
                f"largest logged value is {s['peak']:.3g} at step {s['peak_step']}")
    if s.get("schedule_peak"):
        return (f"lr: {s['schedule_peak']:.3g}, the peak of the linear decay the logged values follow (they fall "
                f"from {s['peak']:.3g} at step {s['peak_step']}, the first logged, to {s['last']:.3g}, on a line "
                f"that reaches 0 at step {s['schedule_zero_step']:.0f}): the line at step 1, assuming no warm-up "
                f"before step {s['peak_step']}; the largest logged value is {s['peak']:.3g}")
    return f"lr: the peak logged learning rate ({s['peak']:.3g} at step {s['peak_step']}); schedule as read: " \
           f"{_sched_text(s)}"
