"""Report sections for the core analyses (rendering only: every number comes from :mod:`rlbatch.analysis`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.summaries import configuration_summaries
from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.noise import (b_simple_by_batch, b_simple_overall, b_simple_pooled, b_simple_smoothed,
                                    fit_grad_norm_scaling, gp_equivalence, loglog_fit)
from rlbatch.analysis.throughput import (configuration_timings, fit_throughput_model, predict, step_timings,
                                         sublinear_window, time_ratios)
from rlbatch.errors import UserError
from rlbatch.output import fmt_rate
from rlbatch.report.figures import LEGEND_FONT, TICK_FONT, batch_axis, plain_log_axis


def throughput_section(runs: Sequence[Any], predict_batches: Sequence[int] | None = None,
                       clock: str = "wall", measured: Sequence[dict[str, Any]] | None = None,
                       timing: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report section on throughput (report contract: title, markdown, figures, json_key, json).

    Per configuration, measured over each seed's whole run on ``clock`` (the accounting's): seconds per step split
    into generation, scoring, update and other, which add up to the step (``timing``:
    :func:`rlbatch.analysis.throughput.configuration_timings`), and the whole-run throughput with its interval
    (``measured``: :func:`rlbatch.analysis.summaries.configuration_summaries`; both computed from ``runs`` when
    not given). Then the fitted time model (:func:`fit_throughput_model`) and its predictions for the batch sizes
    not run (default: doublings up to 4x the largest measured B), and the sublinear generation window
    (:func:`sublinear_window`). ``json`` = {"clock", "measured": [per run], "configurations": [timing rows],
    "model": {...} | None, "predicted": [...], "gen_window": {...}, "update_pairs": [...]}.
    """
    import matplotlib  # on first use: `rlbatch --help` and the analysis do not load matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = step_timings(runs, clock=clock)
    if timing is None or measured is None:
        groups = group_seeds(list(runs))
        timing = configuration_timings(groups, clock) if timing is None else timing
        measured = configuration_summaries(groups, None, clock=clock) if measured is None else measured
    timing = list(timing)
    thr = {m["config"]: m for m in measured}
    js: dict[str, Any] = {"clock": clock, "measured": t.to_dict(orient="records"), "configurations": timing,
                          "model": None, "predicted": [], "gen_window": None, "update_pairs": []}
    md: list[str] = []
    figs: dict[str, Any] = {}
    secs = "CPU seconds" if clock == "cpu" else "seconds"
    md.append(f"Measured per configuration over each seed's whole run, in {secs} per optimizer step on the "
              "accounting's clock: generation + scoring + update + other = step"
              + (" (the trainer times the phases in wall seconds; each keeps its wall-clock share of the step)"
                 if clock == "cpu" else "") + ".")
    md.append("\n| configuration | B | generation | scoring | update | other | step | throughput, whole run "
              "(95% CI) |\n|---|---|---|---|---|---|---|---|")

    def f3(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, (int, float)) and np.isfinite(v) else "—"

    for row in timing:
        m = thr.get(row["config"], {})
        cell = fmt_rate(m.get("throughput_samples_per_s"), m.get("throughput_ci"))
        md.append(f"| {row['config']} | {row['batch_size']} | {f3(row['gen_s'])} | {f3(row['reward_s'])} | "
                  f"{f3(row['train_s'])} | {f3(row['other_s'])} | {f3(row['step_s'])} | {cell} |")
    try:
        model = fit_throughput_model(t)
    except UserError as err:
        md.append(f"\nThroughput model not fitted: {err}.")
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
    md.append("")
    md.append(f"Fitted time model (least squares over the runs; the plan uses it for batch sizes not run): "
              f"generation per step ~ {model['gen']['a']:.3g} x B^{k:.2f} (per doubling x{2 ** k:.2f}; "
              f"{'sublinear' if k < 1 else 'not sublinear'})"
              + (f"; update per step ~ {model['train']['intercept']:.3g} + {model['train']['slope']:.3g} per "
                 f"{'trained token' if model['train_x'] == 'tokens' else 'response'}" if model.get("train") else "")
              + ".")
    if gw["window"]:
        md.append(f"Sublinear generation window (measured): B = {gw['window'][0]} to {gw['window'][1]}.")
    else:
        md.append("No sublinear generation window among the measured batch sizes.")
    for p in gw["pairs"]:
        md.append(f"- gen B {p['b_from']} -> {p['b_to']}: time x{p['time_ratio']:.2f}, generation throughput "
                  f"x{p['throughput_gain']:.2f}")
    new = [p for p in pred if p["batch_size"] not in {r["batch_size"] for r in timing}]
    if new:
        md.append(f"\nPredicted for batch sizes not run ({secs} per step; extrapolated beyond the measured range, "
                  "so optimistic; the step is anchored to the measured points and split in the fitted phases' "
                  "proportions, so the parts add up to it):\n\n| B | generation | scoring | update | step | "
                  "predicted throughput |\n|---|---|---|---|---|---|")
        for p in new:
            sh = p.get("shares") or {"gen": float("nan"), "reward": float("nan"), "train": float("nan")}
            rew = f3(sh["reward"] * p["step_s"]) if model.get("reward") else "—"
            md.append(f"| {p['batch_size']} | {f3(sh['gen'] * p['step_s'])} | {rew} | {f3(sh['train'] * p['step_s'])} "
                      f"| {p['step_s']:.3g} | {fmt_rate(p['throughput_samples_per_s'])} |")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.4))
    pb = np.array([p["batch_size"] for p in pred], float)
    tb = np.array([r["batch_size"] for r in timing], float)
    ctrl = np.array([thr.get(c["config"], {}).get("lr_rule") == "none" for c in timing], bool)
    for key, label, mk, col in (("gen_s", "generation", "o", "C0"), ("train_s", "update", "s", "C1")):
        v = np.array([r[key] for r in timing], float)
        if np.isfinite(v).any():
            a1.loglog(tb, v, mk, color=col, label=f"{label} (measured)")
            # the fit where it is positive (an affine update fit can cross 0 below the measured range)
            fv = np.array([p[key] for p in pred], float)
            ok = fv > 0.05 * np.nanmin(v[v > 0]) if (v > 0).any() else fv > 0
            a1.loglog(pb[ok], fv[ok], "-", color=col, label=f"{label} (fit)")
    st = np.array([r["step_s"] for r in timing], float)
    a1.loglog(tb, st, "D", mfc="none", color="0.2", label="whole step (measured)")
    a1.loglog(pb, [p["step_s"] for p in pred], "--", color="0.2", label="whole step (model)")
    batch_axis(a1)
    plain_log_axis(a1, "y")
    a1.set_xlabel("batch size B (responses per update)")
    a1.set_ylabel(f"{secs} per optimizer step")
    a1.set_title("Time per step vs batch size")
    a1.tick_params(labelsize=TICK_FONT)
    a1.legend(fontsize=LEGEND_FONT - 1)
    xs = np.array([thr.get(r["config"], {}).get("throughput_samples_per_s") or np.nan for r in timing], float)
    cis = [thr.get(r["config"], {}).get("throughput_ci") for r in timing]
    err = np.array([[max(0.0, x - c[0]), max(0.0, c[1] - x)] if c and c[0] is not None and c[1] is not None
                    else [0.0, 0.0] for x, c in zip(xs, cis)]).T if len(xs) else None
    rule = ~ctrl if len(ctrl) else np.ones(len(xs), bool)
    if rule.any():
        a2.errorbar(tb[rule], xs[rule], yerr=err[:, rule], fmt="o", capsize=3, color="C0",
                    label="measured (95% CI), LR rule")
    if (~rule).any():
        a2.errorbar(tb[~rule] * 1.07, xs[~rule], yerr=err[:, ~rule], fmt="D", mfc="white", capsize=3, color="C3",
                    label="measured (95% CI), fixed-LR control")
    a2.plot(pb, [p["throughput_samples_per_s"] for p in pred], "-", color="0.4", label="model")
    a2.set_xscale("log")
    batch_axis(a2)
    a2.set_xlabel("batch size B (responses per update)")
    a2.set_ylabel(f"throughput (retained samples / {'CPU ' if clock == 'cpu' else ''}s)")
    a2.set_title("Throughput vs batch size")
    a2.tick_params(labelsize=TICK_FONT)
    a2.legend(fontsize=LEGEND_FONT - 1)
    fig.tight_layout()
    figs["time_and_throughput_vs_batch"] = fig
    caps = {"time_and_throughput_vs_batch": f"Left: {secs} per optimizer step for generation, the update and the "
            "whole step, measured per configuration (points) and from the fitted time model (lines), against the "
            "batch size. Right: whole-run throughput in retained training samples per second, measured per "
            "configuration with its 95% interval, and the model's prediction."}
    return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs, "captions": caps,
            "json_key": "throughput", "json": js}


def _fmt_fit(fit: dict[str, Any], family: Sequence[int] | None = None) -> str:
    ci = fit["slope_ci"]
    ci_s = f" (95% CI {format_interval(ci, '.3f', sep=' to ')})" if all(np.isfinite(ci)) else ""
    knee = fit["knee_batch"]
    fb = fit["fit_batches"]
    if fit.get("fit_range") == "given":
        where = (f"over the batch sizes whose rN the accounting does not show above 1 (B = {fb[0]} to {fb[-1]} on "
                 "the LR rule)")
    else:
        if family is not None:
            fam_s = f"B = {family[0]}" + (f" to {family[-1]}" if family[-1] != family[0] else " only")
            why = f"the range where rN is not shown above 1 ({fam_s}) has gradient norms at fewer than two batch sizes"
        else:
            why = "no accounting to take the range from"
        where = f"over B = {fb[0]} to {fb[-1]} ({'up to the knee' if knee is not None else 'every batch size'}; {why})"
    if len(fb) >= 2:
        lines = [f"- `{fit['metric']}`: log-log slope {where} = **{fit['slope']:.3f}**{ci_s} (ideal -0.5); over "
                 f"all batch sizes {fit['slope_all']:.3f}."]
    else:
        ca = fit.get("slope_all_ci") or [float("nan")] * 2
        ca_s = f" (95% CI {format_interval(ca, '.3f', sep=' to ')})" if all(np.isfinite(ca)) else ""
        lines = [f"- `{fit['metric']}`: log-log slope over all batch sizes **{fit['slope_all']:.3f}**{ca_s} (ideal "
                 f"-0.5); the first doubling already departs from 1/sqrt(2), so there is no aligned range to fit alone."]
    if fit.get("slope_ci_bootstrap"):
        lo, hi = fit["slope_ci_bootstrap"]
        lines.append(f"  Bootstrap over seeds: {lo:.3f} to {hi:.3f}.")
    for d in fit["doublings"]:
        rci = d.get("ratio_ci")
        lines.append(f"  - B {d['b_from']} -> {d['b_to']}: ratio {d['ratio']:.3f}"
                     + (f" (95% CI {format_interval(rci, '.3f')})" if rci else " (one run per B: no interval)")
                     + f" vs {d['expected']:.3f} ({d['departure']:+.0%})"
                     + (" — flattens: the norm stops falling like B^-1/2" if d["past_knee"] else ""))
    if fit.get("window") is None:
        lines.append("  The runs do not overlap in retained samples, so each run's norm is its mean over its whole "
                     "run, not over a matched stretch of training (the norm changes as training goes on).")
    sl_ci = fit["slope_ci"] if len(fb) >= 2 else (fit.get("slope_all_ci") or [float("nan")] * 2)
    if all(np.isfinite(sl_ci)) and sl_ci[0] < -0.5 < sl_ci[1] and sl_ci[0] < 0 < sl_ci[1]:
        lines.append(f"  Its interval holds both -0.5 (noise-dominated) and 0 (signal-dominated): the slope is not "
                     "measurable at this scale.")
    lines.append("")
    seeded = any(d.get("ratio_ci") for d in fit["doublings"])
    first = min((d["b_from"] for d in fit["doublings"]), default=None)
    # newcomer finding 19: a knee at the ladder's smallest batch is not a located knee (it may lie below the
    # ladder), so not in bold; each line names its norm (actor, critic)
    at = (f"at or below the smallest batch, B = {knee} (the ladder's first doubling already flattens; the knee may "
          "lie below the ladder)" if knee == first else f"**B = {knee}**")
    lines.append(f"Knee of the `{fit['metric']}` norm: {at} (the lower B of the first doubling whose ratio is above "
                 f"1/sqrt(2) by more than {fit.get('tolerance', 0.08):.0%}"
                 + (", its interval's lower end above 1/sqrt(2)" if seeded else
                    "; one run per batch size, so one ratio without an interval: a hint, not a measurement")
                 + "). It is an estimate of where the norm flattens, not by itself the critical batch."
                 if knee is not None else
                 f"No knee of the `{fit['metric']}` norm within the measured batch sizes: no doubling's ratio is "
                 "above 1/sqrt(2) by more than "
                 f"{fit.get('tolerance', 0.08):.0%}" + (" beyond noise." if seeded else "."))
    lines.append(knee_vs_family(fit, family))
    return "\n".join(x for x in lines if x is not None)


def b_simple_text(row: dict[str, Any]) -> str:
    """A B_simple row (:func:`rlbatch.analysis.noise.b_simple_by_batch` or ``b_simple_pooled``) in words: the value
    with its interval when the interval is bounded, else "not measurable at this scale" with the lower bound the
    steps give (never an unbounded estimate printed as a number)."""
    v, ci = row.get("b_simple"), row.get("ci")
    if row.get("measurable"):
        return f"**{v:.3g}** (95% CI {format_interval(ci, '.3g', sep=' to ')})"
    if ci and ci[0] is not None:
        why = "no upper bound" if row.get("b_simple") is not None else (
            f"its mean |G|^2 estimate over {row['steps']} steps is not positive")
        return f"not measurable at this scale (at least {ci[0]:.3g}; {why})"
    if v is not None and not ci:
        return f"~{v:.3g}, without an interval ({row['reason']})"
    return f"not measurable at this scale ({row['reason']})"


def b_simple_vs_family(pooled: dict[str, Any], family: Sequence[int] | None) -> str:
    """How the study's pooled B_simple relates to the aligned family from rN, and which to trust: B_simple predicts
    where the sample penalty sets in (McCandlish et al. 2018: rN ~ 1 + B / B_noise), the family measures it."""
    use = ("The plan's noise model takes B_noise from a fit to the measured rN where there are any, and from this "
           "value only for batches without runs. ")
    if not pooled.get("measurable") or not family:
        return use
    v, last = pooled["b_simple"], max(family)
    if last / 2 <= v <= 2 * last:
        return use + f"It agrees with the aligned family from rN (last member B = {last}). "
    return use + (f"It {'exceeds' if v > last else 'falls short of'} the aligned family from rN (last member "
                  f"B = {last}) by more than 2x: trust the family, which measures the sample penalty itself, while "
                  "B_simple predicts it from gradient statistics averaged over training (the noise model's rN = "
                  "(1 + B/B_noise) / (1 + B0/B_noise) assumes the noise scale holds along the way). ")


def knee_vs_family(fit: dict[str, Any], family: Sequence[int] | None) -> str | None:
    """One sentence on whether the gradient-norm knee and the aligned family (the accounting's, from rN) agree, and
    which to trust when they do not: the family, measured on samples-to-target, the quantity the decision uses; the
    knee rests on ratios of mean gradient norms between doublings, whose scatter the sentence gives. None without a
    family."""
    if not family:
        return None
    last = max(family)
    knee = fit["knee_batch"]
    ratios = [d["ratio"] for d in fit["doublings"]]
    spread = (f"; the doubling ratios scatter from {min(ratios):.2f} to {max(ratios):.2f} around 1/sqrt(2) = 0.71"
              if ratios else "")
    if knee == last:
        return (f"The knee agrees with the aligned family from rN, whose last member is B = {last}.")
    if knee is None:
        return (f"The gradient norms show no knee, while the aligned family from rN ends after B = {last}: trust the "
                "family (measured on samples-to-target, which the decision uses)" + spread + ".")
    return (f"The knee (B = {knee}) and the aligned family from rN (last member B = {last}) disagree: trust the "
            f"family, which is measured on samples-to-target, the quantity the decision uses; the knee rests on "
            f"ratios of mean gradient norms{spread}, more than the knee rule's {fit.get('tolerance', 0.08):.0%}.")


def noise_section(runs: Sequence[Any], target: float | None = None, metric: str = "eval/score",
                  family: Sequence[int] | None = None,
                  estimate: Callable[[list[Any]], dict[str, Any]] | None = None,
                  left_out: str | None = None) -> dict[str, Any]:
    """The report section on gradient noise (report contract of the lead: title, markdown, figures, json_key, json).

    Contents: the grad-norm vs B fit and knee for the actor and, where logged, the critic
    (:func:`fit_grad_norm_scaling`); the smoothed B_simple over training per run (:func:`b_simple_smoothed`) and its
    whole-run value (bootstrap interval over seeds at equal B); the G x P equivalence (:func:`gp_equivalence`).
    ``family``: the aligned family's batch sizes (the accounting's, :func:`rlbatch.report.family.aligned_family`);
    the slope is fitted over them when two or more have gradient norms, else up to the knee. B_simple per B with
    its interval or the reason it has none (:func:`b_simple_by_batch`).
    Parts whose inputs are missing are stated as such. ``json`` = {"actor": fit|None, "critic": fit|None,
    "b_simple": [{run, batch_size, seed, b_simple, b_simple_final}], "b_simple_by_batch": [...], "gp_equivalence":
    [...]}. ``estimate``: a configuration's runs -> its accounting estimate, for the G x P rN
    (:func:`rlbatch.analysis.noise.gp_equivalence`; the report passes its study's). ``left_out``: which of the
    study's configurations these runs leave out and why (the pooled B_simple's sentence names them).
    """
    import matplotlib  # on first use (as throughput_section)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = list(runs)
    md: list[str] = []
    figs: dict[str, Any] = {}
    js: dict[str, Any] = {"actor": None, "critic": None, "b_simple": [], "b_simple_by_batch": [], "gp_equivalence": []}
    fits = {}
    for role, m in (("actor", "grad_norm/actor"), ("critic", "grad_norm/critic")):
        try:
            fits[role] = fit_grad_norm_scaling(runs, m, fit_batches=family)
        except UserError as err:
            if role == "actor":
                md.append(f"- Grad norm vs B: not fitted ({err}).")
            continue
        js[role] = fits[role]
        md.append(_fmt_fit(fits[role], family))
    if fits:
        fig, ax = plt.subplots(figsize=(6.5, 4.4))
        for role, fit in fits.items():
            b = np.array([p["batch_size"] for p in fit["points"]], float)
            v = np.array([p["value"] for p in fit["points"]])
            line = ax.loglog(b, v, "o", label=f"{role} grad norm")[0]
            # the fit over the aligned part (B <= knee); over every batch when that part is a single point
            key = "slope" if np.isfinite(fit["slope"]) else "slope_all"
            fb = np.array(fit["fit_batches"] if key == "slope" else b, float)
            icpt = fit["intercept"] if key == "slope" else loglog_fit(b, v, 0.95)["intercept"]
            if np.isfinite(fit[key]):
                ax.loglog(fb, np.exp(icpt) * fb ** fit[key], "--", color=line.get_color(),
                          label=f"{role} fit, slope {fit[key]:.2f}" + (
                              " (all B)" if key != "slope" else " (aligned family)" if fit.get("fit_range") == "given"
                              else ""))
            if fit["knee_batch"] is not None:
                ax.axvline(fit["knee_batch"], color=line.get_color(), alpha=0.4, ls=":", label="knee")
            ax.loglog(b, v[0] * (b / b[0]) ** -0.5, ":", color="gray", alpha=0.6, label="B^-1/2")
        batch_axis(ax)
        plain_log_axis(ax, "y")
        ax.set_xlabel("batch size B (responses per update)")
        ax.set_ylabel("mean gradient norm before clipping")
        ax.set_title("Gradient norm vs batch size (dotted grey: B^-1/2)")
        ax.tick_params(labelsize=TICK_FONT)
        ax.legend(fontsize=LEGEND_FONT)
        fig.tight_layout()
        figs["grad_norm_vs_batch"] = fig
    # B_simple
    curves = []
    for r in runs:
        try:
            d = b_simple_smoothed(r.metrics)
        except UserError:
            continue
        if not d["b_simple"].notna().any():
            continue
        overall = b_simple_overall(r.metrics)
        final = float(d["b_simple"].dropna().iloc[-1])
        js["b_simple"].append({"run": r.run_id, "batch_size": r.meta.batch_size, "seed": r.meta.seed,
                               "b_simple": overall, "b_simple_final": final})
        curves.append((r, d))
    if curves:
        js["b_simple_by_batch"] = b_simple_by_batch(runs)
        js["b_simple_pooled"] = pooled = b_simple_pooled(runs)
        md.append("\n**Simple noise scale B_simple = tr(Sigma)/|G|^2** (McCandlish et al. 2018; mean tr(Sigma) over "
                  "mean |G|^2, in responses; 95% interval: bootstrap over runs and blocks of steps). "
                  + (f"Over all {pooled['n_runs']} runs with noise metrics ({pooled['steps']} steps, every batch "
                     f"size pooled, weighted by the precision of each step's estimate"
                     + (f"; {left_out}" if left_out else "") + f"): {b_simple_text(pooled)}. "
                     f"{b_simple_vs_family(pooled, family)}" if pooled else "")
                  + "Per batch size:")
        for row in js["b_simple_by_batch"]:
            rb = row.get("retained_batch")
            cmp = ""
            if row["measurable"] and rb:
                ci = row.get("ci") or [None, None]
                if ci[0] is not None and ci[0] > rb:
                    cmp = f" — above the retained batch (~{rb:,.0f} responses): the batch is below the noise scale"
                elif ci[1] is not None and ci[1] < rb:
                    cmp = f" — below the retained batch (~{rb:,.0f} responses): the batch is above the noise scale"
                else:
                    cmp = f" — not distinguishable from the retained batch (~{rb:,.0f} responses)"
            md.append(f"- B = {row['batch_size']}: {b_simple_text(row)}{cmp}.")
        fig, ax = plt.subplots(figsize=(6.5, 4.4))
        pts = [(row["batch_size"], row["b_simple"]) for row in js["b_simple"]
               if row["batch_size"] and row["b_simple"] is not None and np.isfinite(row["b_simple"])
               and row["b_simple"] > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color="0.6", ms=4, alpha=0.7,
                    label="one run (mean over its steps)")
        summ = [r for r in js["b_simple_by_batch"] if r["b_simple"] is not None and r["b_simple"] > 0]
        if summ:
            bb = np.array([r["batch_size"] for r in summ], float)
            mm = np.array([r["b_simple"] for r in summ])
            los = [r["ci"][0] if r["ci"] else m for m, r in zip(mm, summ)]
            his = [r["ci"][1] if r["ci"] else m for m, r in zip(mm, summ)]
            vals = [v for v in list(mm) + [p[1] for p in pts] + [x for x in los + his if x is not None]
                    if v is not None and v > 0]
            bottom, top = min(vals) / 1.5, max(vals) * 1.5
            # a lower end at or below 0 (the estimator is unbiased, so it can be) and an open upper end: arrows
            lo_d = [l if l is not None and l > 0 else bottom for l in los]
            hi_d = [h if h is not None else top for h in his]
            ax.errorbar(bb, mm, yerr=np.array([np.maximum(0, mm - lo_d), np.maximum(0, np.array(hi_d) - mm)]),
                        fmt="s", color="C0", capsize=3, label="per B, all its steps (95% CI)")
            for x, l, h in zip(bb, los, his):
                if h is None:
                    ax.annotate("", xy=(x, top), xytext=(0, -18), textcoords="offset points",
                                arrowprops=dict(arrowstyle="-|>", color="C0"))
                if l is not None and l <= 0:
                    ax.annotate("", xy=(x, bottom), xytext=(0, 18), textcoords="offset points",
                                arrowprops=dict(arrowstyle="-|>", color="C0"))
            rb = [r.get("retained_batch") or r["batch_size"] for r in summ]
            ax.plot(bb, rb, ":", color="0.3", label="B_simple = retained batch")
            ax.set_ylim(bottom, top)
        batch_axis(ax)
        plain_log_axis(ax, "y")
        if summ:
            ax.set_ylim(bottom, top)
        ax.set_xlabel("batch size B (responses per update)")
        ax.set_ylabel("B_simple (responses)")
        ax.set_title("Simple noise scale per batch size")
        ax.tick_params(labelsize=TICK_FONT)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=LEGEND_FONT)
        fig.tight_layout()
        figs["b_simple_by_batch"] = fig
    else:
        md.append("\n- B_simple: no `noise/*` metrics in these runs.")
    js["gp_equivalence"] = gp_equivalence(runs, metric=metric, target=target, estimate=estimate)
    if js["gp_equivalence"]:
        md.append("\n**G x P equivalence** (equal B = P x G on the retained-sample axis):")
        for row in js["gp_equivalence"]:
            ref = row["reference"]
            dev = f"max deviation {row['max_deviation']:.3g}" if row["max_deviation"] is not None else "no overlap"
            rn = f", rN {row['rN']:.2f}" if row["rN"] is not None else ""
            md.append(f"- B={row['batch_size']}: P={row['prompts_per_step']}, G={row['group_size']} vs "
                      f"P={ref['prompts_per_step']}, G={ref['group_size']}: {dev}{rn}")
    caps = {"grad_norm_vs_batch": "Mean gradient norm (before clipping) against the batch size, log-log, with the "
            "least-squares slope over the range the text names (where rN is not shown above 1, when there is one) "
            "and the knee where the norm flattens; where batches are noise-dominated the norm falls like B^-1/2 "
            "(dotted grey).",
            "b_simple_by_batch": "Simple noise scale B_simple (McCandlish et al. 2018) per batch size: each run's "
            "mean over its steps (grey) and the value per B over all its steps with its 95% interval (arrows: an end "
            "beyond what the steps can bound); where it "
            "lies below the dotted line (the retained batch, in the same units: responses kept after filtering), "
            "the batch is larger than the noise scale."}
    return {"title": "Gradient noise and the critical batch", "markdown": "\n".join(md), "figures": figs,
            "captions": caps, "json_key": "noise", "json": js}
