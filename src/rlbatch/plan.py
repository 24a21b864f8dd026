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
import math
import statistics
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from rlbatch.analysis.accounting import (N_BOOT, account_runs, check_target, check_target_below_start,
                                         default_reference, predicted_relative_time,
                                         relative_throughput)
from rlbatch.analysis.table import account, read_accounting_csv
from rlbatch.analysis.curves import group_seeds, metric_frame
from rlbatch.analysis.fit import fit_groups, rn_from_fits
from rlbatch.analysis.noise_model import b_noise_from_gradients, b_noise_from_points, noise_candidate
from rlbatch.analysis.results import Configuration
from rlbatch.analysis.study import Study
from rlbatch.analysis.throughput import fit_throughput_model, predict, step_timings
from rlbatch.errors import UserError
from rlbatch.readers.collect import load_all
from rlbatch.runstore import Run, sequential_of

from rlbatch.plan_finish import (X, _bn_json, _div_ci, _finish, _finite, _fit_json,
                                  _interp_throughput, _json_ci, _model_throughput, _on_rule, profile_timings)
# re-exported: the plan's rendering lives in rlbatch.plan_output
from rlbatch.plan_output import _headline, print_plan, to_markdown  # noqa: F401
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
    """Plan from an accounting table of finished runs (:func:`rlbatch.analysis.table.read_accounting_csv`).

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
            c.update(rN_source="measured", rN_level=target, predicted_relative_time=row["relative_time"], point_rule=False,
                     rN_test=row.get("rN_test"),
                     interval=row["relative_time_ci"], accounting_verdict=row["verdict"],
                     may_be_fastest=row.get("may_be_fastest"),
                     accounting_pick=name == ((acc.get("headline") or {}).get("pick")))
        elif ref_reached and row.get("relative_time_at_most") is not None and not e.get("unfinished") \
                and not e.get("stopped"):
            # every seed at the target by its first evaluation after 0: the accounting's upper bounds (N1), its
            # verdict and pick, as they are; no prediction (a bound is not a point value)
            c.update(rN=None, rN_ci=None, rN_source="measured", rN_level=target,
                     relative_throughput=row["relative_throughput"],
                     relative_throughput_ci=row["relative_throughput_ci"], predicted_relative_time=None,
                     interval=[None, row["relative_time_at_most_hi"]] if row.get("relative_time_at_most_hi")
                     else None, at_most=True, rN_at_most=row["rN_at_most"], rN_at_most_hi=row.get("rN_at_most_hi"),
                     relative_time_at_most=row["relative_time_at_most"],
                     relative_time_at_most_hi=row.get("relative_time_at_most_hi"), accounting_verdict=row["verdict"],
                     may_be_fastest=row.get("may_be_fastest"), why=row.get("why"),
                     accounting_pick=name == ((acc.get("headline") or {}).get("pick")))
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
                     rN_at_least=row.get("rN_at_least"), relative_time_at_least=row.get("relative_time_at_least"),
                     accounting_verdict=row["verdict"], why=row.get("why"), may_be_fastest=row.get("may_be_fastest"))
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
                ci = _with_seed_spread(ci, rn, len(groups[name]), len(groups.get(ref_name, [])), ests)
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
             and not c.get("never_reaches") and not c.get("censored") and not c.get("at_most")]
    if early and bn.get("value") is not None:
        for c in early:
            nc = noise_candidate(c["batch_size"], b_ref, bn, c["retained_batch"], rb_ref)
            c.update({k: nc[k] for k in ("rN", "rN_ci", "rN_source")})
            if c["run"] in groups:  # a configuration that was run: its noise-model interval (B_noise's alone) leaves
                # out the seed spread as a one-seed fit's does (researcher finding 5, rerun: watch's [0.62, 0.82]
                # for a one-seed B = 64 that measured 1.04)
                c["rN_ci"] = _with_seed_spread(c["rN_ci"], c["rN"], len(groups[c["run"]]),
                                               len(groups.get(ref_name, [])), ests, seeds_in_ci=False)
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
                    "provisional": provisional,
                    # the analyze headline's "what would decide" (issue 52), one sentence on every page
                    "would_decide": (acc.get("headline") or {}).get("would_decide_text")})


def _with_seed_spread(ci: list[float] | None, rn: float | None, k: int, k_ref: int,
                      ests: dict[str, dict[str, Any]], seeds_in_ci: bool | None = None) -> list[float] | None:
    """A fitted rN interval with the seed-to-seed spread it leaves out when the candidate or the reference has one
    seed (its bootstrap is over one curve's evaluation noise only; researcher tryout, finding 5: a live [0.60, 0.74]
    around a measured 1.06): widened in quadrature on the log scale by z_0.975 x sd x sqrt(1/k + 1/k_ref), sd the
    accounting's per-seed log-sd of samples-to-target (the median over configurations that have one), or no
    interval at all where the accounting has no spread either (as ``analyze``: no interval without one).
    ``seeds_in_ci``: whether ``ci`` already varies with the seeds (a fit bootstrapped over two or more seeds each;
    default: when both have two or more); a noise-model interval (B_noise's uncertainty alone) never does."""
    if seeds_in_ci is None:
        seeds_in_ci = min(k, k_ref) >= 2
    if ci is None or rn is None or seeds_in_ci:
        return ci
    sds = [float(e["spread_sd"]["S"]) for e in ests.values() if (e.get("spread_sd") or {}).get("S")]
    if not sds:
        return None
    w = 1.959964 * statistics.median(sds) * math.sqrt(1 / max(k, 1) + 1 / max(k_ref, 1))
    lo = rn * math.exp(-math.hypot(math.log(rn / ci[0]), w)) if ci[0] and ci[0] > 0 else ci[0]
    hi = rn * math.exp(math.hypot(math.log(ci[1] / rn), w)) if ci[1] and math.isfinite(ci[1]) else ci[1]
    return [lo, hi]


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
    check_target_below_start(runs, target, metric)
    plan = plan_runs(runs, target, reference=reference, metric=metric, candidates=candidates, profile=profile,
                     tol=tol, clock=clock, study=Study.of(runs, target, metric, reference, clock=clock,
                                                          sequential=sequential_of(paths)))
    plan["notes"] = list(msgs) + plan["notes"]
    return plan
