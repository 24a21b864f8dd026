"""``rlbatch plan``: align, then accelerate — predict time-to-target for candidate batch sizes and recommend one.

Time-to-target relative to a reference batch (Li et al. 2026, end-to-end accounting):

    predicted_relative_time(B) = rN(B) / relative_throughput(B)

and a candidate is faster than the reference iff its throughput gain exceeds its sample penalty rN. The plan
recommends the candidate with the smallest predicted relative time.

Where each number comes from (``rN_source`` / ``throughput_source`` in the output):

- ``rN`` **measured**: every seed of the candidate and of the reference reached the target: samples-to-target
  (first crossing, linear interpolation; :func:`rlbatch.analysis.curves.samples_to_target`) over the reference's.
- ``rN`` **fit**: some run has not reached the target yet (short probes): samples-to-target *at the target*
  predicted by the saturating fit of each configuration's curve (ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid /
  C)^b) on retained samples, configurations of one LR rule jointly with shared R0 and b;
  :mod:`rlbatch.analysis.fit`), over the reference's (measured when it reached the target, else fitted), with an
  95% interval: the fit's bootstrap (paired across one joint fit) widened by the profile likelihood's extreme
  curves (:func:`rlbatch.analysis.fit.profile_interval`). A configuration no curve reaching the target fits (at
  95%) is ``never reaches`` (rejected; the fitted asymptote in the sentence); one whose best fit levels off below
  the target while reaching curves fit as well is ``undetermined`` (no fitted rN, its samples-to-target interval
  open above; the noise model stands in, and the sentence says to run it longer). ``rN_level`` is always the
  target: no rN measured at a lower score is reported as an rN at the target.
- ``rN`` **noise-model**: a batch without runs: McCandlish et al. (2018), eq. 2.11: samples to reach a given loss
  grow with B as ``E/E_min = 1 + B / B_noise``, so relative to the reference
  ``rN(B) = (1 + B / B_noise) / (1 + B_ref / B_noise)``. ``B_noise`` is fitted to the measured/curve rN of the
  runs on the square-root LR rule (``b_noise.source = "fit to rN"``), else taken from the simple noise scale
  B_simple of the runs' ``noise/*`` metrics (``"B_simple"``, McCandlish et al. 2018 appendix A), else from the
  gradient-norm vs B fit |g_B|^2 = |G|^2 + tr(Sigma)/B (``"grad-norm fit"``, the same fit whose departure from
  B^-1/2 marks the knee; :func:`rlbatch.analysis.noise.fit_grad_norm_scaling`). Also for runs too short to fit
  (fewer than 3 evaluations past the start) and when the reference's fit does not reach the target.
- Intervals of rN: the accounting's 95% interval for measured rN; the fit's 95% interval (bootstrap over seeds
  and blocks of evaluations, widened by the profile likelihood) for fitted rN; for the
  noise model, B_noise fitted to the ends of the measured intervals (or B_simple's spread). The interval of the
  predicted relative time is the rN interval divided by the relative throughput (throughput taken as exact).
- throughput **measured** (median per-step retained samples / second of the runs, :func:`rlbatch.analysis.
  throughput.step_timings`), **model** (the fitted time model of :mod:`rlbatch.analysis.throughput` for batches
  without runs), **profile** (the same model fitted to a ``rlbatch profile`` JSON: every candidate), **table**
  (samples-to-target / wall-clock of an accounting table) or **interpolated** (log-log between table rows).

A candidate is in the *aligned family* when it is on the square-root LR rule and its rN is shown within the tolerance
of the reference's: its interval inside [1 / (1 + tolerance), 1 + tolerance] (the accounting's 90% equivalence
interval for a measured rN, the fit's or the noise model's 95% otherwise; the report's family), or rN <= 1 +
tolerance for a point value without an interval (an accounting table), contiguous from the reference (DESIGN.md).
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.accounting import (N_BOOT, account, account_runs, aligned, aligned_span, check_target,
                                         default_reference, intervals_overlap, predicted_relative_time,
                                         read_accounting_csv, relative_throughput)
from rlbatch.analysis.decision import verdict_label
from rlbatch.analysis.headline import batch_list
from rlbatch.analysis.curves import group_seeds, metric_frame
from rlbatch.analysis.fit import fit_groups, rn_from_fits
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.noise_model import b_noise_from_gradients, b_noise_from_points, noise_candidate
from rlbatch.analysis.results import Configuration, Estimate
from rlbatch.analysis.study import Study
from rlbatch.analysis.throughput import fit_throughput_model, predict, step_timings, throughput_whole_run
from rlbatch.errors import UserError
from rlbatch.output import console, markdown_table, print_json, rich_table
from rlbatch.readers.collect import load_all
from rlbatch.runstore import Run
from rlbatch.scaling import scaled_lr

X = "samples/retained"
LR_RULE_TOL = 0.03

#: Keys of one candidate in ``rlbatch plan --format json``.
CANDIDATE_KEYS = ("run", "batch_size", "runs", "on_lr_rule", "retained_batch", "samples_to_target",
                  "predicted_samples_to_target", "predicted_samples_to_target_ci", "fit", "never_reaches",
                  "undetermined", "time_to_target_s", "throughput_samples_per_s", "throughput_ci", "rN", "rN_ci", "rN_source",
                  "rN_level", "relative_throughput", "relative_throughput_ci", "throughput_source",
                  "throughput_extrapolated", "relative_time", "predicted_relative_time", "interval",
                  "predicted_time_to_target_s", "aligned", "verdict", "rejected", "sentence")


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
    predicted_relative_time: Estimate
    predicted_time_to_target_s: float | None
    aligned: bool | None
    verdict: str | None
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
                   predicted_relative_time=Estimate.of(g("predicted_relative_time"), g("interval"), level,
                                                       g("rN_source")),
                   predicted_time_to_target_s=g("predicted_time_to_target_s"), aligned=g("aligned"),
                   verdict=g("verdict"), rejected=g("rejected"), sentence=g("sentence"))

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
                "predicted_relative_time": self.predicted_relative_time.value,
                "interval": self.predicted_relative_time.ci,
                "predicted_time_to_target_s": self.predicted_time_to_target_s, "aligned": self.aligned,
                "verdict": self.verdict, "rejected": self.rejected, "sentence": self.sentence}


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
            if c["verdict"] == "recommended" else "."
        return f"{name}{bstr} is the reference (rN = 1, throughput 1x){tail}"
    rn, g, t = c["rN"], c["relative_throughput"], c["predicted_relative_time"]
    if c.get("accounting_verdict") in ("slower", "undetermined") and not c.get("reaches", True):
        return (f"{name}{bstr} ran its budget without every seed reaching the target: {c['accounting_verdict']} "
                f"({c.get('why') or 'censored'}), as the accounting says; no prediction.")
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
        if c["aligned"]:
            fam = f"inside the aligned family ({test})"
        elif c.get("aligned_rn"):
            fam = f"outside the aligned family ({test}, but the family, contiguous from the reference, ends at a " \
                  "smaller batch)"
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
                "contains 1).")
    if c["verdict"] in ("recommended", "faster", "faster (point estimate)"):
        verdict = "recommended: the smallest predicted time-to-target" if c["verdict"] == "recommended" else \
            "faster than the reference but not the fastest"
        return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x beats its rN {rn:.2f}{rn_ci} ({src}), "
                f"predicted {t:.2f}x the reference's time-to-target{ivs}: {verdict}.")
    return (f"{name}{bstr} is {fam}; its throughput gain {g:.2f}x does not beat its rN {rn:.2f}{rn_ci} ({src}), "
            f"predicted {t:.2f}x the reference's time-to-target{ivs}: rejected (throughput gain below rN).")


def _finish(cands: list[dict[str, Any]], ref_label: str, target: float | None, tol: float, extra: dict) -> dict:
    ref = next(c for c in cands if c["is_reference"])
    s_ref, t_ref = ref.get("samples_to_target"), ref.get("time_to_target_s")
    for c in cands:
        rn, g = c["rN"], c["relative_throughput"]
        # one family on every page (the report's): by rN's interval where there is one (the accounting's 90%
        # equivalence interval for measured rN, else the fit's or noise model's 95%), a point value only without
        c["aligned_by"] = "90%" if c.get("rN_test") else "95%" if c.get("rN_ci") else None
        c["aligned"] = aligned(rn, c["on_lr_rule"], tol, interval=c.get("rN_test") or c.get("rN_ci"))
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
    if ok:
        best = min(ok, key=lambda c: (c["predicted_relative_time"], c["batch_size"] or 0))
    else:
        best = ref if ref.get("reaches", True) else None

    if ok and all(c["rN_source"] == "measured" and c.get("may_be_fastest") is not None for c in ok):
        # all measured: the accounting's "may be fastest" set (multiple comparisons with the best), not overlapping
        # intervals relative to the reference (which double-count the reference's noise)
        tied = [c for c in ok if c is not best and c["may_be_fastest"]]
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
        if c is best:
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
    if len(table) < 2:
        raise UserError(f"plan needs at least two runs to compare, the table has {len(table)}", field="run")
    inp = table.copy()
    if reference is None:
        reference = default_reference((str(r["run"]), r["batch_size"], None) for r in inp.to_dict(orient="records")
                                      if _finite(r["samples_to_target"]))
        if reference is None:
            raise UserError("no run in the table reached the target: nothing to plan from", field="samples_to_target")
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
             "time_to_target_s": r["time_to_target_s"], "throughput_samples_per_s": r["throughput_samples_per_s"],
             "predicted_relative_time": r["relative_time"], "interval": None,
             "relative_throughput": r["relative_throughput"], "throughput_source": "table",
             "throughput_extrapolated": False}
        if r["rN"] is None:
            c["why"] = "the run never reached the target"
        cands.append(c)
    pts = [c for c in cands if c["on_lr_rule"] and not c["is_reference"] and c["rN"] is not None]
    bn = b_noise_from_points(pts, b_ref) or {"value": None, "ci": None, "source": None}
    model = None
    if profile is not None:
        model = fit_throughput_model(profile_timings(profile))
    known = {c["batch_size"]: c["throughput_abs"] for c in cands if c["on_lr_rule"] and c["throughput_abs"]}
    have = {c["batch_size"] for c in cands}
    for b in candidates or []:
        if b in have:
            continue
        c = noise_candidate(b, b_ref, bn)
        c["relative_throughput"], c["throughput_source"], c["throughput_extrapolated"] = None, None, False
        if model is not None:
            x, ext = _model_throughput(model, b)
            x0, _ = _model_throughput(model, b_ref)
            c.update(relative_throughput=relative_throughput(x, x0), throughput_source="profile",
                     throughput_extrapolated=ext)
        else:
            x = _interp_throughput(known, b)
            if x is not None:
                c.update(relative_throughput=relative_throughput(x, ref["throughput_samples_per_s"]),
                         throughput_source="interpolated")
        cands.append(c)
    return _finish(cands, reference, target, tol, {"metric": None, "input": "table", "b_noise": _bn_json(bn),
                                                   "notes": ["an accounting table: rN and throughput as measured "
                                                             "at its own target; no curves, so no intervals"]})


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
            "profile_ci": _json_ci(fr.get("profile_ci"))}


def _bn_json(bn: dict[str, Any]) -> dict[str, Any]:
    v = bn.get("value")
    return {"value": None if v is None or not _finite(v) else float(v), "unbounded": bool(v is not None and
                                                                                         math.isinf(v)),
            "ci": [None if x is None or not _finite(x) else float(x) for x in bn["ci"]] if bn.get("ci") else None,
            "source": bn.get("source"), **{k: bn[k] for k in ("n_points", "batch_sizes", "lower_bound") if k in bn}}


# --------------------------------------------------------------------------------------------------- runs input
def check_consistent(runs: Sequence[Run], metric: str) -> None:
    """Raise :class:`UserError` when runs disagree on model, task or algorithm (non-missing values), or a run has
    no ``metric`` values on the retained-sample axis (naming the runs)."""
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


def plan_runs(runs: Sequence[Run], target: float, *, reference: str | None = None, metric: str = "eval/score",
              candidates: Sequence[int] | None = None, profile: dict | str | Path | None = None, tol: float = 0.1,
              n_boot: int = N_BOOT, seed: int = 0, extend: bool = True, clock: str = "auto",
              study: Study | None = None) -> dict[str, Any]:
    """Plan from runs (finished or short probes): rN, throughput and predicted time-to-target per candidate.

    ``runs``: run-store :class:`Run` objects (several seeds per configuration allowed; configurations as
    :func:`rlbatch.analysis.curves.group_seeds`). ``target``: score of ``metric`` (higher is better).
    ``reference``: a configuration name, a run id or a batch size (default as the accounting: the smallest batch
    that reached the target; for probes that have not, the smallest batch on an LR rule). ``candidates``: batch
    sizes to evaluate besides the runs' (default: the runs' configurations, plus two doublings above the largest
    when a noise model and a throughput model exist and ``extend``). ``profile``: a ``rlbatch profile`` JSON
    whose time model gives the throughput of batches without runs. ``tol``: aligned family = rN <= 1 + tol.
    ``clock``: as :func:`rlbatch.analysis.throughput.clock_basis`. ``study``: the :class:`rlbatch.analysis.study.
    Study` this plan reads (its accounting when it is of the same runs, else its memoised configuration estimates);
    default: a study of ``runs`` with these settings.

    Every configuration that reached the target takes rN, relative throughput, relative time and their intervals
    from the accounting (:func:`rlbatch.analysis.accounting.account_runs`): the same numbers as ``rlbatch
    analyze``. Returns the plan dict: ``recommended`` (configuration label, or batch size for a batch without
    runs), ``within_noise`` (candidates whose interval of the predicted relative time overlaps the recommended
    one's), ``reference``, ``target``, ``metric``, ``tolerance``, ``aligned_family`` (its members' B, ascending), ``b_noise``
    {value, ci, source}, ``throughput_model``, ``clock``, ``notes``, ``reach`` {best_score, best_run} (the best
    measured score, for the advice when nothing reaches the target) and ``candidates`` (:data:`CANDIDATE_KEYS`).
    ``recommended`` is None when no candidate reaches the target, measured or predicted (a candidate whose rN is
    scaled by a reference that reaches it neither measured nor by its fit is ``not reached``); the headline then
    says what to run instead.
    Raises :class:`UserError` when runs disagree on model/task/algorithm, lack the metric or a batch size, or there
    is too little to compare (one batch size without noise metrics or candidates, no throughput for any candidate).
    """
    runs = list(runs)
    if not runs:
        raise UserError("no runs to plan from")
    if target is None or not _finite(target):
        raise UserError("--target is required for runs (the score to reach, e.g. --target 0.6)", field="target")
    check_consistent(runs, metric)
    bad = [r.run_id for r in runs if r.meta.batch_size is None]
    if bad:
        raise UserError(f"batch size unknown for run(s) {', '.join(bad)}: set prompts_per_step and group_size "
                        "(--set RUN:prompts_per_step=... --set RUN:group_size=...)", field="batch_size")
    if study is None:
        study = Study.of(runs, target, metric, reference, clock=clock, n_boot=n_boot)
    acc = None
    if [r.run_id for r in study.runs] == [r.run_id for r in runs] and study.target == target:
        try:
            acc = study.accounted
        except UserError:  # e.g. a short probe as the reference, which has not reached the target yet
            acc = None
        if acc is not None and acc["reference"] is None:
            acc = None
    if acc is None:
        acc = account_runs(runs, target, metric, reference, clock=clock, n_boot=n_boot,
                           allow_unreached_reference=True, estimate=study.estimate)
    groups = group_seeds(runs)
    rows = {r["run"]: r for r in acc["rows"]}
    ests = acc["estimates"]
    ref_name = acc["reference"]
    ref_row, ref_est = rows[ref_name], ests[ref_name]
    b_ref = int(ref_row["batch_size"])
    notes: list[str] = []
    if len({r["batch_size"] for r in rows.values()}) < 2 and not candidates:
        raise UserError(f"plan needs runs at two or more batch sizes to compare (all runs are at B={b_ref}), or "
                        "--candidates B1,B2 with gradient-noise metrics (noise/*) in the runs and a throughput "
                        "profile (--profile)", field="candidates")
    ref_reached = bool(ref_est["reached"] and ref_est["samples_to_target"])
    timings = step_timings(runs, clock=acc["clock"])
    frac = {b: float(d["retained_fraction"].mean()) for b, d in timings.groupby("batch_size")}
    model, model_src = None, None
    if profile is not None:
        model, model_src = fit_throughput_model(profile_timings(profile)), "profile"
        for p in model.get("points") or []:  # the profile times every response; the runs tell what is retained
            if p["batch_size"] in frac:
                p["retained_fraction"] = frac[p["batch_size"]]
    else:
        try:
            model, model_src = fit_throughput_model(timings), "model"
        except (UserError, KeyError, ValueError):
            model = None

    def retained(b: int) -> float:
        if b in frac:
            return frac[b] * b
        if model is not None:
            return predict(model, [b])[0]["retained_fraction"] * b
        return float(b)

    x_ref = ref_est["throughput_samples_per_s"]
    fits: dict[str, dict[str, Any] | None] = {}

    def fit_of(name: str) -> dict[str, Any] | None:
        # configurations on one LR rule are fitted jointly (shared R0 and steepness b, their own asymptote A and
        # C_mid: analysis.fit.fit_configurations); one off the rule (the fixed-LR control) alone
        if not fits:
            fam: dict[str, list[str]] = {}
            for n in groups:
                on = n == ref_name or _on_rule(ests[n]["lr"], ests[n]["batch_size"], ref_est["lr"], b_ref,
                                               ests[n]["lr_rule"])
                fam.setdefault("rule" if on else n, []).append(n)
            for members in fam.values():
                fits.update(fit_groups({n: groups[n] for n in members}, target, metric, n_boot=min(n_boot, 200),
                                       seed=seed))
        return fits.get(name)

    # the reference's samples-to-target at the target: measured, else predicted by its fit
    ref_fit = None
    if ref_reached:
        s_ref, s_ref_reps = ref_est["samples_to_target"], Configuration.from_estimate(ref_est).replicates.S
    else:
        fr = ref_fit = fit_of(ref_name)
        s_ref = fr["samples_to_target"] if fr else None
        s_ref_reps = fr["_replicates"] if fr else None
    cands: list[dict[str, Any]] = []
    for name, row in rows.items():
        e = ests[name]
        is_ref = name == ref_name
        c = {"run": name, "batch_size": row["batch_size"], "runs": row["runs"], "is_reference": is_ref,
             "on_lr_rule": _on_rule(e["lr"], e["batch_size"], ref_est["lr"], b_ref, e["lr_rule"]) or is_ref,
             "samples_to_target": row["samples_to_target"], "time_to_target_s": row["time_to_target_s"],
             "predicted_samples_to_target": row["samples_to_target"],
             "predicted_samples_to_target_ci": row["samples_to_target_ci"], "fit": None,
             "throughput_samples_per_s": row["throughput_samples_per_s"], "throughput_ci": row["throughput_ci"],
             "retained_batch": retained(int(row["batch_size"])), "rN_level": None,
             "throughput_source": "measured" if row["throughput_samples_per_s"] else None,
             "throughput_extrapolated": False}
        if ref_reached and (row["reached"] or is_ref):  # the accounting's numbers, as they are
            c.update({k: row[k] for k in ("rN", "rN_ci", "relative_throughput", "relative_throughput_ci")})
            c.update(rN_source="measured", rN_level=target, predicted_relative_time=row["relative_time"],
                     rN_test=row.get("rN_test"),
                     interval=row["relative_time_ci"], accounting_verdict=row["verdict"],
                     may_be_fastest=row.get("may_be_fastest"))
        elif ref_reached and row["verdict"] in ("slower", "undetermined") and not e.get("unfinished") \
                and not e.get("stopped"):
            # ran its budget without every seed reaching the target: the accounting's verdict (a lower bound that
            # shows it slower, or undetermined), one verdict per configuration on every page; no prediction
            x = row["throughput_samples_per_s"]
            # (newcomer finding 19: never a noise-model rN whose interval reaches below the measured bound): rN
            # and relative time as the 95% lower ends of the accounting's bounds, open above ("≥ x" in the table)
            lo_rn, lo_t = row.get("rN_at_least_lo"), row.get("relative_time_at_least_lo")
            c.update(rN=None, rN_ci=[lo_rn, None] if lo_rn else None, rN_source="measured", rN_level=target,
                     relative_throughput=relative_throughput(x, x_ref) if x and x_ref else None,
                     relative_throughput_ci=None, predicted_relative_time=None,
                     interval=[lo_t, None] if lo_t else None, reaches=False, censored=True,
                     accounting_verdict=row["verdict"], why=row.get("why"))
        else:
            # not at the target yet: samples-to-target predicted by the saturating fit (analysis.fit), at the target
            x = row["throughput_samples_per_s"]
            g = relative_throughput(x, x_ref) if x and x_ref else None
            c.update(rN=1.0 if is_ref else None, rN_ci=[1.0, 1.0] if is_ref else None, rN_source="fit",
                     rN_level=target, relative_throughput=1.0 if is_ref else g, relative_throughput_ci=None,
                     predicted_relative_time=None, interval=None)
            if row["reached"]:
                s_c, reps = row["samples_to_target"], Configuration.from_estimate(e).replicates.S
                fr = {"samples_to_target": s_c, "_replicates": reps}
            else:
                fr = fit_of(name)
                if fr is not None:
                    c["fit"] = _fit_json(fr)
                    c.update(predicted_samples_to_target=fr["samples_to_target"],
                             predicted_samples_to_target_ci=_json_ci(fr["samples_to_target_ci"]))
            if is_ref:
                if s_ref is None:
                    c["rN_source"] = "fit"
            elif fr is None:
                c["why"] = "too few evaluation points past the start to fit its curve; run it longer"
            elif fr.get("samples_to_target") is None and fr.get("status") == "undetermined":
                c["why"] = fr["reason"]  # open above: neither a prediction nor a rejection (noise model below)
                c["undetermined"] = True
            elif fr.get("samples_to_target") is None:
                c["never_reaches"] = fr.get("reason") or "its fitted curve does not reach the target"
            elif s_ref is None:
                c["why"] = "the reference's fitted curve does not reach the target"
            else:
                rn, ci = rn_from_fits(fr, s_ref, s_ref_reps, ref_fit=ref_fit)
                c.update(rN=rn, rN_ci=_json_ci(ci))
        cands.append(c)

    # --- noise model for batches without runs (and runs whose curves cannot be compared yet), on retained B
    pts = [{"batch_size": c["retained_batch"], "rN": c["rN"], "rN_ci": c["rN_ci"]} for c in cands
           if c["on_lr_rule"] and not c["is_reference"] and c["rN"] is not None]
    rb_ref = retained(b_ref)
    bn = b_noise_from_points(pts, rb_ref)
    if bn is None or math.isinf(bn["value"]):
        alt = b_noise_from_gradients(runs)
        if alt is not None:
            if bn is not None:
                notes.append(f"no sample penalty measured up to retained B={max(bn['batch_sizes'])}: B_noise from "
                             f"{alt['source']} instead")
            bn = alt
    if bn is None:
        bn = {"value": None, "ci": None, "source": None}
    early = [c for c in cands if c["rN"] is None and c["on_lr_rule"] and not c["is_reference"]
             and not c.get("never_reaches") and not c.get("censored")]
    if early and bn.get("value") is not None:
        for c in early:
            nc = noise_candidate(c["batch_size"], b_ref, bn, c["retained_batch"], rb_ref)
            c.update({k: nc[k] for k in ("rN", "rN_ci", "rN_source")})
            c.pop("why", None)
        und = [c["run"] for c in early if c.get("undetermined")]
        rest = [c["run"] for c in early if not c.get("undetermined")]
        if rest:
            notes.append(f"rN of {', '.join(rest)} from the noise model: their curves cannot be fitted yet (too few "
                         "evaluations past the start, or the reference's fit does not reach the target)")
        if und:
            notes.append(f"rN of {', '.join(und)} from the noise model: their fits cannot tell yet whether or when "
                         "they reach the target (undetermined; the interval of samples-to-target is open above): "
                         "run them longer")
    have = {c["batch_size"] for c in cands}
    extra = list(candidates or [])
    if extend and not candidates and bn.get("value") is not None and model is not None:
        top = max(have)
        extra = [top * 2, top * 4]
        notes.append(f"added B={top * 2} and B={top * 4} (two doublings above the largest run) from the noise and "
                     "throughput models")
    x_ref_model = predict(model, [b_ref])[0]["throughput_samples_per_s"] if model is not None else None
    for b in extra:
        if b in have:
            continue
        have.add(b)
        c = noise_candidate(int(b), b_ref, bn, retained(int(b)), rb_ref)
        c.update(relative_throughput=None, relative_throughput_ci=None, throughput_source=None,
                 throughput_extrapolated=False, predicted_relative_time=None, interval=None,
                 retained_batch=retained(int(b)))
        if model is not None and x_ref_model:
            p = predict(model, [int(b)])[0]
            c.update(relative_throughput=relative_throughput(p["throughput_samples_per_s"], x_ref_model), throughput_source=model_src,
                     throughput_extrapolated=p["extrapolated"], throughput_samples_per_s=p["throughput_samples_per_s"])
        cands.append(c)
    # predicted relative time of the candidates the accounting could not time: rN / relative throughput, the
    # interval from rN's (throughput's interval folded in where known)
    for c in cands:
        if c.get("predicted_relative_time") is None and c["rN"] is not None and c["relative_throughput"]:
            g = c["relative_throughput"]
            c["predicted_relative_time"] = predicted_relative_time(c["rN"], g)
            c["interval"] = _div_ci(c.get("rN_ci"), c.get("relative_throughput_ci") or [g, g])
    if all(c["relative_throughput"] is None for c in cands if not c["is_reference"]):
        timed = sorted({int(r.meta.batch_size) for r in runs if r.meta.batch_size and any(
            k in r.metrics.columns for k in ("time/gen_s", "time/step_s", "time/wall_s"))})
        why = ("the runs have no per-step timings (time/gen_s, time/step_s or time/wall_s)" if not timed else
               f"the runs are timed at one batch size only (B = {timed[0]}), and a throughput model needs two or more"
               if len(timed) == 1 else "no timed batch size reached the target")
        raise UserError(f"no throughput for any candidate: {why}; give --profile PROFILE.json (rlbatch profile)",
                        field="throughput")
    if all(c["rN"] is None for c in cands if not c["is_reference"]):
        raise UserError("no sample penalty rN for any candidate: the probes have not risen above their starting "
                        "score, and there is no B_noise estimate (noise/* metrics or grad_norm/actor at two batch "
                        "sizes); run the probes longer", field="rN")
    fitted = [c["run"] for c in cands if c["rN_source"] == "fit" and not c["is_reference"] and c["rN"] is not None]
    if fitted:
        notes.append(f"rN of {', '.join(fitted)} at the target from saturating fits of the curves so far "
                     "(R = R0 + (A - R0) / (1 + (C_mid / C)^b), ScaleRL 2025), extrapolated: predicted samples-to-"
                     "target over the reference's, with 95% intervals")
    never = [c["run"] for c in cands if c.get("never_reaches")]
    if never:
        notes.append(f"{', '.join(never)}: predicted never to reach {metric} >= {target:g} (fitted asymptote below "
                     "the target): rejected")
    if not ref_reached:
        notes.append(f"the reference {ref_name} has not reached {metric} >= {target:g}: its samples-to-target is "
                     "predicted by its fit" + ("" if s_ref is not None else " (which does not reach it either)"))
    # the reference's fit says it never reaches the target (not merely open above, "undetermined", nor too short to
    # fit: then the noise model stands in, labelled): no samples-to-target to scale, no candidate's rN says it reaches
    ref_never = (not ref_reached and ref_fit is not None and ref_fit.get("samples_to_target") is None
                 and ref_fit.get("status") != "undetermined")
    # the reference's own prediction: its fit does not reach the target, or cannot tell whether it does (the best
    # fit levels off below it while reaching curves fit too): no samples-to-target to compare with, no pick. Its
    # prediction open above (a bound below only): every ratio to it is open below, the pick is provisional
    ref_ci = (ref_fit or {}).get("samples_to_target_ci") if not ref_reached else None
    ref_open = (not ref_reached and not ref_never and s_ref is not None
                and (not ref_ci or ref_ci[1] is None or not math.isfinite(ref_ci[1])))
    no_pick = provisional = None
    # a run that reached the target, or whose fit does: only then is "the reference does not" the news
    others_reach = any(c["run"] and not c["is_reference"] and (c["rN_source"] == "measured" or (
        c["rN_source"] == "fit" and c.get("reaches", True) and not c.get("never_reaches"))) for c in cands)
    ref_undetermined = (ref_fit or {}).get("status") == "undetermined"
    if not ref_reached and ref_fit is not None and (ref_never or s_ref is None) and (others_reach or ref_undetermined):
        no_pick = ((f"the reference {ref_name}'s fitted curve does not reach {metric} >= {target:g}" if ref_never
                    else f"the reference {ref_name}'s fit cannot tell whether it reaches {metric} >= {target:g} (its "
                    "best fit levels off below it, curves that reach it fit as well)")
                   + ", so there is no samples-to-target to compare with")
    elif ref_open:
        provisional = ((f"the reference {ref_name} has not reached {metric} >= {target:g} and its predicted "
                        f"samples-to-target is open above ({ref_ci[0]:,.0f} to unbounded)") if ref_ci and ref_ci[0]
                       else f"the reference {ref_name} has not reached {metric} >= {target:g} and its prediction "
                       "has no upper bound")
        provisional += ", so every ratio to it is open below and the ranking rests on the fits' point estimates"
        for c in cands:  # a ratio to an open reference has no lower bound: open, never 0.00
            ci = c.get("rN_ci")
            if c["rN_source"] == "fit" and not c["is_reference"] and ci and (ci[0] is None or ci[0] <= 0):
                c["rN_ci"] = [None, ci[1] if ci[1] is not None and math.isfinite(ci[1]) else None]
                g = c.get("relative_throughput")
                if g:
                    c["interval"] = _div_ci(c["rN_ci"], c.get("relative_throughput_ci") or [g, g])
    if no_pick is not None or (not ref_reached and ref_fit is not None and (ref_never or s_ref is None)):
        for c in cands:
            if c["rN_source"] != "measured" or c["is_reference"]:
                c.update(reaches=False, predicted_relative_time=None, interval=None)
                if not c["is_reference"] and c["rN_source"] == "fit":
                    c.update(rN=None, rN_ci=None)
    best_row = max((r for r in rows.values() if r.get("best_score") is not None), key=lambda r: r["best_score"],
                   default=None)
    reach_info = {"best_score": best_row["best_score"] if best_row else None,
                  "best_run": best_row["run"] if best_row else None}
    return _finish(cands, ref_name, target, tol,
                   {"metric": metric, "input": "runs", "b_noise": _bn_json(bn), "clock": acc["clock"],
                    "throughput_model": {"source": model_src, "gen_exponent": model["gen"]["exponent"]}
                    if model is not None else None, "notes": notes, "reach": reach_info, "no_pick": no_pick,
                    "provisional": provisional})


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
              sets: list[str] | None = None, mapping: list[str] | None = None, clock: str = "auto") -> dict[str, Any]:
    """The ``rlbatch plan`` entry point: one accounting table (CSV with ``samples_to_target``) -> :func:`plan_table`;
    otherwise run dirs, a sweep dir or any logs :func:`rlbatch.readers.load` reads -> :func:`plan_runs`. Warnings
    from the readers go into ``notes``."""
    check_target(target)
    if not (math.isfinite(tol) and tol >= 0):
        raise UserError(f"--tolerance must be a finite rN margin >= 0 (the aligned family is rN <= 1 + tolerance), "
                        f"got {tol!r}", field="tolerance")
    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("give runs, a sweep directory or an accounting table")
    if len(paths) == 1 and is_accounting_table(paths[0]):
        return plan_table(read_accounting_csv(paths[0]), reference, target=target, candidates=candidates,
                          profile=profile, tol=tol)

    runs, msgs = load_all(paths, log_format=log_format, mapping=mapping, sets=sets)
    plan = plan_runs(runs, target, reference=reference, metric=metric, candidates=candidates, profile=profile,
                     tol=tol, clock=clock, study=Study.of(runs, target, metric, reference, clock=clock))
    plan["notes"] = list(msgs) + plan["notes"]
    return plan


# --------------------------------------------------------------------------------------------------- output
def _fmt_ci(v: Any) -> str:
    return format_interval(v, sep="-")


COLUMNS = [("run", "candidate", None), ("batch_size", "B", None), ("rN", "rN", ".2f"), ("rN_ci", "rN interval", _fmt_ci),
           ("rN_source", "rN from", None), ("relative_throughput", "rel. throughput", ".2f"),
           ("throughput_source", "throughput from", None), ("predicted_relative_time", "pred. rel. time", ".2f"),
           ("interval", "interval", _fmt_ci), ("aligned", "aligned", None), ("verdict", "verdict", None)]


def _headline(plan: dict[str, Any]) -> str:
    rec = plan["recommended"]
    tgt = f"{plan['metric'] or 'score'} >= {plan['target']:g}" if plan.get("target") is not None else "the target"
    if rec is None:
        info = plan.get("reach") or {}
        best = info.get("best_score")
        seen = f"; the best measured score is {best:.3g} ({info['best_run']})" if best is not None else ""
        instead = (f"plan at a target the runs reach (e.g. --target {math.floor(best * 100) / 100:g})"
                   if best is not None else "plan at a lower --target")
        if plan.get("no_pick"):
            return (f"No pick: {plan['no_pick']}{seen}. Run instead: {instead}, or train the probes longer and plan "
                    "again.")
        return (f"No configuration reaches {tgt}, measured or predicted by its fitted curve{seen}: nothing to "
                f"recommend. Run instead: {instead}, or train the configurations longer and plan again.")
    c = next((c for c in plan["candidates"] if (c["run"] or c["batch_size"]) == rec), None)
    bn = plan.get("b_noise") or {}
    word = "Provisional pick" if plan.get("provisional") else "Pick"
    iv = c.get("interval") if c else None
    if c is not None and rec != plan.get("reference") and c.get("predicted_relative_time") is not None and iv \
            and iv[1] is not None and iv[1] >= 1:  # the analyze headline's rule (issue 37): within noise of B0
        word = ("No batch is predicted to beat the reference beyond noise. "
                + ("Provisional best estimate" if plan.get("provisional") else "Best estimate"))
    s = (f"{word}: {rec} (B={c['batch_size']})" if c and c["run"] else f"{word}: B={c['batch_size'] if c else rec}"
         + (" (not run yet)" if c else ""))
    if c and c["predicted_relative_time"] is not None:
        iv = c.get("interval")
        lvl = "95%"  # one confidence level on the page: the fit's intervals are 95% too
        ivs = f" ({lvl} interval {_fmt_ci(iv)})" if iv else ""
        s += (f", predicted {c['predicted_relative_time']:.2f}x{ivs} the reference's ({plan['reference']}) "
              f"time-to-target at {tgt}")
    tied = plan.get("within_noise") or []
    if tied:
        bs = [x["batch_size"] for x in plan["candidates"] if (x["run"] or x["batch_size"]) in tied]
        s += f". May be as fast as {'the pick' if word.endswith('ick') else 'it'}: {batch_list(bs)}"
    if bn.get("source"):
        if bn.get("lower_bound"):
            s += (f". B_noise at least {bn['lower_bound']:.4g} retained responses (the probes' noise/* metrics do "
                  "not resolve the true gradient |G|^2, so only a lower bound, which bounds no rN: the batches "
                  "without runs get no verdict, their rN intervals are open above)")
        else:
            v = "unbounded (no penalty seen)" if bn.get("unbounded") else f"{bn['value']:.4g}"
            s += f". B_noise {v} retained responses ({bn['source']})"
    nm = [x for x in plan["candidates"] if x.get("rN_source") == "noise-model" and x.get("predicted_relative_time")
          is not None and c is not None and c.get("predicted_relative_time") is not None
          and x["predicted_relative_time"] < c["predicted_relative_time"]]
    if nm:
        s += (". On the noise model alone " + batch_list([x["batch_size"] for x in nm]) + " would be faster still: "
              "a prediction without a run, not a verdict; probe it")
    if plan.get("provisional"):
        s += f". Provisional: {plan['provisional']}; run the probes longer to confirm it"
    return s + "."


def to_markdown(plan: dict[str, Any]) -> str:
    """The plan as Markdown: the headline, the candidate table, one sentence per candidate, notes."""
    lines = [f"**{_headline(plan)}**", "", markdown_table(plan["candidates"], COLUMNS), ""]
    lines += [f"- {c['sentence']}" for c in plan["candidates"]]
    if plan.get("aligned_family"):
        fam = plan["aligned_family"]
        lo, hi = fam[0], fam[-1]
        span = ", ".join(f"B = {b}" for b in fam) if len(fam) > 1 else f"only B = {lo}"
        tol = plan["tolerance"]
        lines += ["", f"Aligned family (square-root LR rule; rN shown within {tol:.0%} of the reference's: its "
                  f"interval inside [{1 / (1 + tol):.2f}, {1 + tol:.2f}], as in the accounting; rN <= {1 + tol:.2f} "
                  f"only for a point value without an interval): {span}."]
    lines += ["", "Predicted relative time = rN / relative throughput; a candidate beats the reference iff its "
              "throughput gain exceeds rN (Li et al. 2026). rN for batches without runs: E/E_min = 1 + B/B_noise "
              "(McCandlish et al. 2018, eq. 2.11)."]
    for n in plan.get("notes") or []:
        lines.append(f"- Note: {n}")
    return "\n".join(lines)


def print_plan(plan: dict[str, Any], fmt: str) -> None:
    """Print the plan as ``table`` (rich), ``markdown`` or ``json``."""
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
