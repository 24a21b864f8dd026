"""The planner's shared pieces (:mod:`rlbatch.plan`): throughput from a profile or the measured runs, and the
finishing of a candidate list (which candidate is on the LR rule, each candidate's sentence, the pick and the
verdicts), used alike by the plan of an accounting table and the plan of runs; their JSON helpers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.accounting import (aligned, aligned_span, intervals_overlap, predicted_relative_time)
from rlbatch.analysis.decision import BELOW, NOT_DISTINGUISHABLE, alignment
from rlbatch.analysis.headline import bound, time_text
from rlbatch.analysis.decision import verdict_label
from rlbatch.analysis.fit import fitted_curve
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.results import Estimate
from rlbatch.analysis.throughput import predict, throughput_whole_run
from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr


X = "samples/retained"
LR_RULE_TOL = 0.03

#: Keys of one candidate in ``rlbatch plan --format json``.
CANDIDATE_KEYS = ("run", "batch_size", "runs", "on_lr_rule", "retained_batch", "samples_to_target",
                  "predicted_samples_to_target", "predicted_samples_to_target_ci", "fit", "never_reaches",
                  "undetermined", "time_to_target_s", "throughput_samples_per_s", "throughput_ci", "rN", "rN_ci", "rN_source",
                  "rN_level", "relative_throughput", "relative_throughput_ci", "throughput_source",
                  "throughput_extrapolated", "relative_time", "relative_time_at_most", "relative_time_at_most_hi",
                  "predicted_relative_time", "interval",
                  "predicted_time_to_target_s", "aligned", "alignment", "verdict", "pick", "rejected", "sentence")


@dataclass(frozen=True)
class Candidate:
    """One plan candidate (a configuration that was run, or a batch size without runs), typed: the row of
    ``rlbatch plan --format json`` (:meth:`to_json`, keys :data:`CANDIDATE_KEYS`). Each estimate says where it came
    from (:class:`rlbatch.analysis.results.Estimate` ``source``): ``rN`` measured at the target, ``fit`` (the
    saturating fit, 95% interval) or ``noise-model``; ``relative_throughput`` measured, ``model``, ``profile``,
    ``table`` or ``interpolated``; ``predicted_relative_time`` = rN / relative throughput (the accounting's
    measured relative time when both were measured), with its interval."""

    run: str | None
    batch_size: int | None
    runs: list[str] | None
    on_lr_rule: bool | None
    retained_batch: float | None
    samples_to_target: float | None
    predicted_samples_to_target: Estimate
    fit: dict[str, Any] | None
    never_reaches: str | None
    undetermined: bool | None
    time_to_target_s: float | None
    throughput: Estimate
    rN: Estimate
    rN_level: float | None
    relative_throughput: Estimate
    throughput_extrapolated: bool | None
    relative_time: float | None
    relative_time_at_most: float | None  # every seed at the target by its first evaluation: the accounting's
    relative_time_at_most_hi: float | None  # upper bound on the relative time and that bound's 95% upper end
    predicted_relative_time: Estimate
    predicted_time_to_target_s: float | None
    aligned: bool | None
    alignment: str | None
    verdict: str | None
    pick: bool | None
    rejected: bool | None
    sentence: str | None

    @classmethod
    def from_work(cls, c: dict[str, Any]) -> "Candidate":
        """From the plan's working record of one candidate (filled step by step in :func:`plan_runs` /
        :func:`plan_table`, finished by :func:`_finish`). Interval levels: 95% (the accounting's), 95%
        for an rN (and the times derived from it) from the saturating fit (module docstring)."""
        g = c.get
        level = 0.95  # one level on every page (the fit's intervals are 95% too)
        return cls(run=g("run"), batch_size=g("batch_size"), runs=g("runs"), on_lr_rule=g("on_lr_rule"),
                   retained_batch=g("retained_batch"), samples_to_target=g("samples_to_target"),
                   predicted_samples_to_target=Estimate.of(g("predicted_samples_to_target"),
                                                           g("predicted_samples_to_target_ci"), level, g("rN_source")),
                   fit=g("fit"), never_reaches=g("never_reaches"), undetermined=g("undetermined"),
                   time_to_target_s=g("time_to_target_s"),
                   throughput=Estimate.of(g("throughput_samples_per_s"), g("throughput_ci"), 0.95,
                                          g("throughput_source")),
                   rN=Estimate.of(g("rN"), g("rN_ci"), level, g("rN_source")), rN_level=g("rN_level"),
                   relative_throughput=Estimate.of(g("relative_throughput"), g("relative_throughput_ci"), 0.95,
                                                   g("throughput_source")),
                   throughput_extrapolated=g("throughput_extrapolated"), relative_time=g("relative_time"),
                   relative_time_at_most=g("relative_time_at_most"),
                   relative_time_at_most_hi=g("relative_time_at_most_hi"),
                   predicted_relative_time=Estimate.of(g("predicted_relative_time"), g("interval"), level,
                                                       g("rN_source")),
                   predicted_time_to_target_s=g("predicted_time_to_target_s"), aligned=g("aligned"),
                   alignment=g("alignment"), verdict=g("verdict"), pick=g("pick"), rejected=g("rejected"),
                   sentence=g("sentence"))

    def to_json(self) -> dict[str, Any]:
        """The JSON row (keys :data:`CANDIDATE_KEYS`, in that order; intervals as ``[lo, hi]`` or None)."""
        return {"run": self.run, "batch_size": self.batch_size, "runs": self.runs, "on_lr_rule": self.on_lr_rule,
                "retained_batch": self.retained_batch, "samples_to_target": self.samples_to_target,
                "predicted_samples_to_target": self.predicted_samples_to_target.value,
                "predicted_samples_to_target_ci": self.predicted_samples_to_target.ci, "fit": self.fit,
                "never_reaches": self.never_reaches, "undetermined": self.undetermined,
                "time_to_target_s": self.time_to_target_s, "throughput_samples_per_s": self.throughput.value,
                "throughput_ci": self.throughput.ci, "rN": self.rN.value, "rN_ci": self.rN.ci,
                "rN_source": self.rN.source, "rN_level": self.rN_level,
                "relative_throughput": self.relative_throughput.value,
                "relative_throughput_ci": self.relative_throughput.ci,
                "throughput_source": self.relative_throughput.source,
                "throughput_extrapolated": self.throughput_extrapolated, "relative_time": self.relative_time,
                "relative_time_at_most": self.relative_time_at_most,
                "relative_time_at_most_hi": self.relative_time_at_most_hi,
                "predicted_relative_time": self.predicted_relative_time.value,
                "interval": self.predicted_relative_time.ci,
                "predicted_time_to_target_s": self.predicted_time_to_target_s, "aligned": self.aligned,
                "alignment": self.alignment, "verdict": self.verdict, "pick": self.pick, "rejected": self.rejected,
                "sentence": self.sentence}


# --------------------------------------------------------------------------------------------------- small helpers
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating)) and math.isfinite(float(x))


def _div_ci(rn_ci: Sequence[float | None] | None, g_ci: Sequence[float]) -> list[float | None] | None:
    """The interval of rN / relative throughput: [rN_lo / g_hi, rN_hi / g_lo]; an open (None) end of rN stays
    open. None when both ends are open."""
    if not rn_ci or (rn_ci[0] is None and rn_ci[1] is None):
        return None
    return [rn_ci[0] / g_ci[1] if rn_ci[0] is not None else None,
            rn_ci[1] / g_ci[0] if rn_ci[1] is not None and math.isfinite(rn_ci[1]) else None]


def _ci_str(ci: Sequence[float | None] | None) -> str:
    if not ci:
        return ""
    return f" [{format_interval(ci, sep=', ', unbounded='unbounded', missing='open')}]"


# --------------------------------------------------------------------------------------------------- throughput
def profile_timings(profile: dict[str, Any] | str | Path) -> pd.DataFrame:
    """A ``rlbatch profile`` JSON (dict or path) as a :func:`rlbatch.analysis.throughput.step_timings`-shaped
    frame: per profiled batch size (sequences = responses), ``gen_s`` (prefill + decode) and ``train_s`` (one
    update). Raises :class:`UserError` naming the file when it is not a profile."""
    path = None
    if not isinstance(profile, dict):
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
    t["throughput_samples_per_s"] = throughput_whole_run(t["samples_per_step"], t["step_s"])
    return t


def _model_throughput(model: dict[str, Any], b: int) -> tuple[float, bool]:
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
    """Whether a candidate is on the reference's square-root LR rule: its peak ``lr`` within :data:`LR_RULE_TOL`
    of :func:`rlbatch.scaling.scaled_lr` at its batch (a declared ``none`` / ``linear`` rule only at the
    reference's own batch); True when an lr is unknown."""
    if rule in ("none", "linear") and not (b == ref_b):
        return False
    if _finite(lr) and _finite(ref_lr) and ref_lr > 0 and b and ref_b and b > 0 and ref_b > 0:
        return abs(lr / scaled_lr(b, ref_b, ref_lr, "sqrt") - 1.0) <= LR_RULE_TOL
    return True


def _sentence(c: dict[str, Any], ref_label: str, tol: float) -> str:
    name = c["run"] or f"B={c['batch_size']}"
    bstr = f" (B={c['batch_size']})" if c["run"] else ""
    if c["verdict"] == "reference" or (c["is_reference"]):
        tail = " and stays the recommendation: no candidate's throughput gain beats its rN by more." \
            if c.get("pick") else "."
        return f"{name}{bstr} is the reference (rN = 1, throughput 1x){tail}"
    rn, g, t = c["rN"], c["relative_throughput"], c["predicted_relative_time"]
    if c.get("at_most"):
        pick = ("; the pick, shown faster than the reference" if c.get("pick") and c["accounting_verdict"] == "faster"
                else "; the pick, by its bound (its true time is no larger), which does not beat the reference"
                if c.get("pick") else "")
        return (f"{name}{bstr} reached the target before its first evaluation after 0 in every seed: "
                f"{c['accounting_verdict']} ({c.get('why')}), as the accounting says; "
                + (f"rN ≤ {bound(c['rN_at_most'], False)}, " if c.get("rN_at_most") is not None else "")
                + f"relative time {time_text(c)}, as analyze shows them{pick}; no prediction.")
    if c.get("accounting_verdict") in ("slower", "undetermined") and not c.get("reaches", True):
        bounds = "; ".join(  # the accounting's point bounds, as analyze shows them, then the interval's lower ends
            f"{what} > {bound(c[k], True)}" + (f" (95% lower end {bound(lo[0], True)})" if lo and lo[0] else "")
            for what, k, lo in (("rN", "rN_at_least", c.get("rN_ci")),
                                ("relative time", "relative_time_at_least", c.get("interval"))) if c.get(k))
        return (f"{name}{bstr} did not reach the target in every seed within its run: {c['accounting_verdict']} "
                f"({c.get('why') or 'censored'}), as the accounting says" + (f"; {bounds}, as analyze shows them" if bounds else "")
                + "; no prediction.")
    if c.get("never_reaches"):
        return (f"{name}{bstr}: predicted never to reach the target ({c['never_reaches']}): rejected "
                "(not reached, so it cannot be faster).")
    if not c.get("reaches", True):
        return (f"{name}{bstr}: not shown to reach the target: the reference reaches it neither measured nor by its "
                "fit, so there is no samples-to-target to scale its rN by; no decision.")
    if rn is None:
        return f"{name}{bstr}: no rN estimate ({c.get('why') or 'no curve and no noise model'}); no decision."
    rn_ci = _ci_str(c.get("rN_ci"))
    src = {"measured": "measured at the target", "fit": "fitted and extrapolated to the target",
           "noise-model": "from the noise model"}.get(c["rN_source"], c["rN_source"])
    if c.get("undetermined") and c["rN_source"] == "noise-model":
        src += ", as its own fit cannot tell yet whether or when it reaches the target: run it longer"
    if not c["on_lr_rule"]:
        fam = "off the square-root LR rule, so outside the aligned family"
    else:
        band = f"[{1 / (1 + tol):.2f}, {1 + tol:.2f}]"
        by = c.get("aligned_by")
        iv = c.get("rN_test") if by == "90%" else c.get("rN_ci")
        test = (f"rN {rn:.2f}, its {by} interval {format_interval(iv, sep='-')} "
                + ("inside " if c.get("aligned_rn") else "not inside ") + band) if by else \
            f"rN {rn:.2f} {'<=' if c.get('aligned_rn') else '>'} {1 + tol:.2f}, a point value without an interval"
        if by is None and c.get("point_rule") is False and not c["is_reference"]:
            fam = (f"not shown aligned (rN {rn:.2f}, a point value without an interval: one seed and no spread to "
                   "judge it by; more seeds would tell)")
        elif c["aligned"]:
            fam = f"inside the aligned family ({test})"
        elif c.get("aligned_rn"):
            fam = f"outside the aligned family ({test}, but the family, contiguous from the reference, ends at a " \
                  "smaller batch)"
        elif c.get("alignment") in (NOT_DISTINGUISHABLE, BELOW):
            fam = f"not shown aligned: {c['alignment']} ({test}; more seeds would tell)"
        else:
            fam = f"outside the aligned family ({test})"
    if g is None:
        return f"{name}{bstr} is {fam}, rN {src}{rn_ci}; throughput unknown (give --profile), no decision."
    iv = c.get("interval")
    ivs = f", interval {format_interval(iv, sep='-', unbounded='unbounded')}" if iv else ""
    if c["verdict"] == "undetermined" and c["rN_source"] == "noise-model" and g is not None and t is not None:
        ivs = c.get("interval")
        ivs = f" (interval {format_interval(ivs, sep='-', unbounded='open')})" if ivs else ""
        return (f"{name}{bstr} is {fam}; predicted {t:.2f}x the reference's time-to-target{ivs} from a throughput "
                f"gain {g:.2f}x and rN {rn:.2f}{rn_ci} ({src}): no verdict, {c.get('why')}.")
    if c["verdict"] == "undetermined":
        return f"{name}{bstr} is {fam}: undetermined ({c.get('why') or 'no interval'})."
    if c["verdict"] == "within noise":
        return (f"{name}{bstr} is {fam}; throughput gain {g:.2f}x vs rN {rn:.2f}{rn_ci} ({src}), predicted "
                f"{t:.2f}x the reference's time-to-target{ivs}: within noise of the reference (the interval "
                "contains 1)" + ("; the pick, by the smallest estimated time (optimistic), which does not beat the "
                                 "reference." if c.get("pick") else "."))
    if c["verdict"] in ("recommended", "faster", "faster (point estimate)"):
        verdict = ("faster than the reference beyond noise, and the pick (the accounting's rule)"
                   if c.get("accounting_verdict") == "faster" else
                   "recommended: the smallest predicted time-to-target") if c.get("pick") else \
            "faster than the reference but not the pick"
        return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x beats its rN {rn:.2f}{rn_ci} ({src}), "
                f"predicted {t:.2f}x the reference's time-to-target{ivs}: {verdict}.")
    return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x does not beat its rN {rn:.2f}{rn_ci} ({src}), "
            f"predicted {t:.2f}x the reference's time-to-target{ivs}: rejected (throughput gain below rN).")


def candidate_alignment(c: dict[str, Any], tol: float) -> str | None:
    """A candidate's grade of rN in the report's words (researcher finding 7: "not distinguishable from 1" is not
    "no"), by :func:`rlbatch.analysis.decision.alignment` as the accounting grades it: a measured rN by its 90%
    equivalence interval (``rN_test``), "penalised" only when its 95% simultaneous interval (``rN_ci``) lies above 1
    (the 90% interval alone called B = 256 "penalised" where the accounting said "not distinguishable from 1"); a
    fitted or modelled rN by its 95% interval; a point value by the tolerance."""
    rn = c.get("rN")
    if not c.get("on_lr_rule"):
        return "off the LR rule"
    if rn is None:
        return None
    test, ci = c.get("rN_test"), c.get("rN_ci")
    ok = lambda iv: bool(iv) and iv[0] is not None and iv[1] is not None  # noqa: E731
    if ok(test):
        return alignment(tuple(test), tol, tuple(ci) if ok(ci) else None)
    if ok(ci):
        return alignment(tuple(ci), tol)
    if c.get("point_rule") is False:  # measured from runs without a spread: not shown either way (the accounting)
        return "no interval (one seed, no spread)"
    return "within tolerance (point value)" if rn <= 1 + tol else "above tolerance (point value)"


def _finish(cands: list[dict[str, Any]], ref_label: str, target: float | None, tol: float, extra: dict) -> dict:
    ref = next(c for c in cands if c["is_reference"])
    s_ref, t_ref = ref.get("samples_to_target"), ref.get("time_to_target_s")
    for c in cands:
        rn, g = c["rN"], c["relative_throughput"]
        # one family on every page (the report's): by rN's interval where there is one (the accounting's 90%
        # equivalence interval for measured rN, else the fit's or noise model's 95%), a point value only without
        c["aligned_by"] = "90%" if c.get("rN_test") else "95%" if c.get("rN_ci") else None
        iv = c.get("rN_test") or c.get("rN_ci")
        # a point value joins the family only in an accounting table; measured from runs without an interval (no
        # spread) it is not shown aligned, as the accounting's family section says (researcher finding 7, rerun:
        # "the aligned family is only B = 64" beside the plan's "bs128 is inside the aligned family")
        c["aligned"] = aligned(rn, c["on_lr_rule"], tol, interval=iv) if iv is not None or \
            c.get("point_rule", True) or c["is_reference"] else False
        c["alignment"] = candidate_alignment(c, tol)
        if c.get("predicted_relative_time") is None and rn is not None and g and c.get("reaches", True):
            c["predicted_relative_time"] = predicted_relative_time(rn, g)
            c["interval"] = _div_ci(c.get("rN_ci"), [g, g])
        c.setdefault("interval", None)
        c["relative_time"] = c.get("predicted_relative_time")
        c["predicted_time_to_target_s"] = None
        if c["predicted_relative_time"] is not None and _finite(t_ref) and _finite(s_ref) and s_ref:
            c["predicted_time_to_target_s"] = t_ref * c["predicted_relative_time"]  # T = T_ref x relative time
    # a candidate off the LR rule is recommended only with rN measured at the target: its fit is extrapolated
    # alone (no family on the rule to share the curve's shape with)
    # never a candidate that does not reach the target (measured, or by a fit of a reference that reaches it)
    # never a candidate predicted by the noise model alone (its B_noise = B_simple is an assumption, and a B_simple
    # the runs do not resolve bounds nothing): it gets no verdict and is only named as worth a probe
    ok = [c for c in cands if c["predicted_relative_time"] is not None and c.get("reaches", True)
          and (c["on_lr_rule"] or c["rN_source"] == "measured") and c["rN_source"] != "noise-model"]
    measured = bool(ok) and all(c["rN_source"] == "measured" and c.get("may_be_fastest") is not None for c in ok)
    bounded = [c for c in cands if c.get("at_most")]  # known by upper bounds only: the accounting's, as they are
    censored = [c for c in cands if c.get("censored")]  # known by lower bounds only (some seed ran out first)
    if measured and any(c.get("accounting_pick") for c in ok + bounded):
        # all measured: the accounting's pick (its stated rule, the decision module), one pick on every page
        best = next(c for c in ok + bounded if c.get("accounting_pick"))
    elif ok:
        best = min(ok, key=lambda c: (c["predicted_relative_time"], c["batch_size"] or 0))
    else:
        best = ref if ref.get("reaches", True) else None

    if measured:
        # all measured: the accounting's "may be fastest" set (multiple comparisons with the best), not overlapping
        # intervals relative to the reference (which double-count the reference's noise)
        # (researcher finding 13, rerun: a configuration cut short stayed out of the plan's list, in analyze's)
        tied = [c for c in ok + bounded + censored if c is not best and c.get("may_be_fastest")]
    else:
        tied = [c for c in ok if c is not best and intervals_overlap(
            c["interval"], best["interval"], c["predicted_relative_time"], best["predicted_relative_time"])]
    # the aligned family: the contiguous range of batch sizes around the reference with rN <= 1 + tol (DESIGN.md);
    # at several candidates of one B (group sizes) one outside the family decides. A candidate is aligned only
    # inside that range (an rN within the tolerance beyond its end does not join it).
    pts: dict[int, bool] = {}
    for c in cands:
        if c["on_lr_rule"] and c["rN"] is not None:
            pts[c["batch_size"]] = pts.get(c["batch_size"], True) and c["aligned"]
    members = aligned_span(list(pts.items()), ref["batch_size"])
    for c in cands:
        c["aligned_rn"] = c["aligned"]
        c["aligned"] = bool(c["aligned"] and c["batch_size"] in members)
    for c in cands:
        c["pick"] = c is best
        if c is best and not c.get("accounting_verdict"):
            c["verdict"] = "recommended"
        elif c["is_reference"]:
            c["verdict"] = "reference"
        elif c.get("accounting_verdict"):  # measured: the accounting's verdict (simultaneous intervals, censoring)
            c["verdict"] = c["accounting_verdict"]
        elif c["rN_source"] == "noise-model":
            c["verdict"] = "undetermined"
            c["why"] = ("rN from the noise model alone"
                        + (f" ({c['rN_open_because']})" if c.get("rN_open_because") else "")
                        + f"; a probe at B={c['batch_size']} would measure it")
        elif c.get("never_reaches"):
            c["verdict"] = "never reaches"
        elif not c.get("reaches", True):
            c["verdict"] = "not reached"
        else:
            c["verdict"] = verdict_label(c["predicted_relative_time"], c["interval"])
        c["rejected"] = c["verdict"] in ("slower", "slower (point estimate)", "never reaches")
        c["sentence"] = _sentence(c, ref_label, tol)
    fam = list(members)  # every member, as the table marks them (not only its ends)
    out = {"recommended": None if best is None else best["run"] if best["run"] is not None else best["batch_size"],
           "recommended_batch_size": None if best is None else best["batch_size"],
           "within_noise": [c["run"] if c["run"] is not None else c["batch_size"] for c in tied],
           "reference": ref_label, "target": target,
           "tolerance": tol, "aligned_family": fam, **extra,
           "candidates": [Candidate.from_work(c).to_json() for c in
                          sorted(cands, key=lambda c: (c["batch_size"] or 0, not c["on_lr_rule"], str(c["run"])))]}
    return out



def _json_ci(ci: Sequence[float] | None) -> list[float | None] | None:
    """An interval as JSON: an unbounded end (+inf) is None."""
    if ci is None:
        return None
    return [float(v) if _finite(v) else None for v in ci]


def _fit_json(fr: dict[str, Any]) -> dict[str, Any]:
    """The JSON part of :func:`rlbatch.analysis.fit.fit_configuration`'s result (no replicates)."""
    return {**{k: float(v) for k, v in fr["params"].items()}, "A_ci": _json_ci(fr["A_ci"]), "rmse": fr["rmse"],
            "n_points": fr["n_points"], "n_seeds": fr["n_seeds"], "x_max": fr["x_max"], "reaches": fr["reaches"],
            "reason": fr["reason"], "samples_to_target": fr["samples_to_target"],
            "samples_to_target_ci": _json_ci(fr["samples_to_target_ci"]),
            "mean_curve_samples_to_target": fr["mean_curve_samples_to_target"], "status": fr.get("status"),
            "profile_ci": _json_ci(fr.get("profile_ci")),
            "curve": fitted_curve(fr["params"], fr["x_max"], fr["samples_to_target"]
                                  if fr["samples_to_target"] is not None and _finite(fr["samples_to_target"]) else None)}


def _bn_json(bn: dict[str, Any]) -> dict[str, Any]:
    v = bn.get("value")
    return {"value": None if v is None or not _finite(v) else float(v), "unbounded": bool(v is not None and
                                                                                         math.isinf(v)),
            "ci": [None if x is None or not _finite(x) else float(x) for x in bn["ci"]] if bn.get("ci") else None,
            "source": bn.get("source"), **{k: bn[k] for k in ("n_points", "batch_sizes", "lower_bound") if k in bn}}
