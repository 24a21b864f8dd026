"""Report sections for the core analyses (rendering only: every number comes from :mod:`rlbatch.analysis`)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.analysis.interval import format_interval
from rlbatch.output import fmt_rate
from rlbatch.report.figures import LEGEND_FONT, TICK_FONT, batch_axis, plain_log_axis


def throughput_section(throughput: dict[str, Any], measured: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The report section on throughput (report contract: title, markdown, figures, json_key, json), rendered from
    the study's throughput result (:func:`rlbatch.analysis.throughput_summary.throughput_summary`, held by
    :meth:`rlbatch.analysis.study.Study.throughput`): per configuration, measured over each seed's whole run on the
    accounting's clock, seconds per step split into generation, scoring, update and other, which add up to the step,
    and the whole-run throughput with its interval (``measured``:
    :func:`rlbatch.analysis.summaries.configuration_summaries`' rows, as the report's configuration table has them);
    then the fitted time model and its predictions for the batch sizes not run, and the sublinear generation window.
    ``json``: the throughput result as given."""
    import matplotlib  # on first use: `rlbatch --help` and the analysis do not load matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    js = throughput
    clock, timing, model = js["clock"], list(js["configurations"]), js["model"]
    thr = {m["config"]: m for m in measured}
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
    if model is None:
        md.append(f"\nThroughput model not fitted: {js['error']}.")
        return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs,
                "json_key": "throughput", "json": js}
    lo, hi = model["batch_range"]
    pred, gw = js["predicted"], js["gen_window"]
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
    model_lines = time_model_lines(pred)
    for key, share, label, mk, col in (("gen_s", "gen", "generation", "o", "C0"),
                                       ("train_s", "train", "update", "s", "C1")):
        v = np.array([r[key] for r in timing], float)
        if np.isfinite(v).any():
            a1.loglog(tb, v, mk, color=col, label=f"{label} (measured)")
            # the model's step split in the fitted phases' proportions, where it is positive (an affine update fit
            # can cross 0 below the measured range): a part of the whole step, never above it (finding 16)
            xb, fv = model_lines[share]
            ok = fv > 0.05 * np.nanmin(v[v > 0]) if (v > 0).any() else fv > 0
            a1.loglog(xb[ok], fv[ok], "-", color=col, label=f"{label} (model)")
    st = np.array([r["step_s"] for r in timing], float)
    a1.loglog(tb, st, "D", mfc="none", color="0.2", label="whole step (measured)")
    a1.loglog(*model_lines["step"], "--", color="0.2", label="whole step (model)")
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
            "whole step against the batch size, measured per configuration (points) and from the time model (lines): "
            f"the model's whole step (dashed) passes through the measured steps from B = {lo} to {hi} and follows "
            "the fitted phases (power-law generation, affine update and scoring) scaled to meet the nearest "
            "measured end beyond them; the generation and update lines are that step split in the fitted phases' "
            "proportions, as in the table of predictions, so a part is never above the whole. Right: whole-run "
            "throughput in retained training samples per second, measured per configuration with its 95% interval, "
            "and the model's prediction."}
    return {"title": "Throughput vs batch size", "markdown": "\n".join(md), "figures": figs, "captions": caps,
            "json_key": "throughput", "json": js}


def window_words(fit: dict[str, Any]) -> str:
    """Where each run's mean gradient norm was taken, in words: ``retained samples 2,536 to 3,336 (the stretch every
    run covers)``, or each run's whole run when the runs do not overlap (no window)."""
    w = fit.get("window")
    if w is None:
        return "each run's whole run (the runs do not overlap in retained samples)"
    return f"retained samples {w[0]:,.0f} to {w[1]:,.0f} (the stretch of training every run covers)"


def missing_words(coverage: Sequence[dict[str, Any]]) -> str | None:
    """``B = 2048: no step in the window`` for each batch size whose runs log the norm but have no step in the
    window (absent from the fit and the figure); None when there is none."""
    miss = [c["batch_size"] for c in coverage if c["in_window"] == 0]
    if not miss:
        return None
    return "; ".join(f"B = {b}: no step in the window" for b in miss)


def _runs_in_window(c: dict[str, Any]) -> str:
    n, k = c["runs"], c["in_window"]
    return f"{k} of its {n} runs in the window" if k < n else f"{n} run" + ("s" if n != 1 else "")


def no_interval_words(coverage: Sequence[dict[str, Any]], b_from: int | None = None, b_to: int | None = None) -> str:
    """Why a doubling ratio (from ``b_from`` to ``b_to``; every doubling when None) has no interval over seeds: one
    run per batch size, or fewer than two runs of a batch size with a step in the window (named with how many of
    its runs the window holds: finding 11's "one run per B" while every B ran 3 seeds), or no spread."""
    cov = {c["batch_size"]: c for c in coverage}
    if not cov:
        return "fewer than two runs per B"
    sides = [cov[b] for b in (b_from, b_to) if b in cov] if b_from is not None else list(cov.values())
    if sides and all(c["runs"] <= 1 for c in cov.values()):
        return "one run per B"
    short = [c for c in sides if c["in_window"] < 2]
    if short:
        return ", ".join(f"B = {c['batch_size']}: {_runs_in_window(c)}" for c in short)
    return "no spread between the runs"


def time_model_lines(pred: Sequence[dict[str, Any]]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The time model's lines of the time-per-step figure, each ``(B, seconds per step)``: ``step``, the model's
    whole step (:func:`rlbatch.analysis.throughput.predict`: through the measured steps inside the measured range,
    the per-phase model anchored at the nearest measured end outside it), and ``gen``, ``train``, ``reward``, that
    step split in the fitted phases' proportions (``shares``), so that the parts add up to the whole and none is
    above it. Researcher finding 16: the per-phase fits drawn as they are put the update above the whole step from
    B = 256 on (fitted separately, the update in trained tokens at B x tokens per retained response, while group
    filtering retains a falling share of a large batch; the step through the measured points)."""
    rows = [p for p in pred if p.get("shares") and np.isfinite(p["step_s"])]
    b = np.array([p["batch_size"] for p in rows], float)
    out = {"step": (np.array([p["batch_size"] for p in pred], float), np.array([p["step_s"] for p in pred], float))}
    for k in ("gen", "train", "reward"):
        out[k] = (b, np.array([p["shares"][k] * p["step_s"] for p in rows], float))
    return out


def _fmt_fit(fit: dict[str, Any], family: Sequence[int] | None = None,
             coverage: Sequence[dict[str, Any]] | None = None) -> str:
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
                     + (f" (95% CI {format_interval(rci, '.3f')})" if rci else
                        f" ({no_interval_words(coverage or [], d['b_from'], d['b_to'])}: no interval)")
                     + f" vs {d['expected']:.3f} ({d['departure']:+.0%})"
                     + (" — flattens: the norm stops falling like B^-1/2" if d["past_knee"] else ""))
    lines.append("")  # the notes below: a paragraph of the bullet, not run into the last doubling's line
    if fit.get("window") is None:
        lines.append("  The runs do not overlap in retained samples, so each run's norm is its mean over its whole "
                     "run, not over a matched stretch of training (the norm changes as training goes on).")
    else:
        thin = [c for c in coverage or [] if 0 < c["in_window"] < c["runs"]]
        lines.append(f"  Each run's norm is its mean over {window_words(fit)}"
                     + ("; " + "; ".join(f"B = {c['batch_size']}: {_runs_in_window(c)}" for c in thin) if thin else "")
                     + ".")
    miss = missing_words(coverage or [])
    if miss:
        lines.append(f"  {miss} (its steps fall before and after it): not in the fit or the figure.")
    sl_ci = fit["slope_ci"] if len(fb) >= 2 else (fit.get("slope_all_ci") or [float("nan")] * 2)
    if all(np.isfinite(sl_ci)) and sl_ci[0] < -0.5 < sl_ci[1] and sl_ci[0] < 0 < sl_ci[1]:
        lines.append("  Its interval holds both -0.5 (noise-dominated) and 0 (signal-dominated): the slope is not "
                     "measurable at this scale.")
    lines.append("")
    seeded = any(d.get("ratio_ci") for d in fit["doublings"])
    # the knee's own doubling: with an interval, or said why not (the demo's knee at B = 2048 had none, one run of
    # B = 2048 and of 4096 in the window, while another doubling's interval made the text claim one)
    at_knee = next((d for d in fit["doublings"] if d["b_from"] == knee), None)
    first = min((d["b_from"] for d in fit["doublings"]), default=None)
    # newcomer finding 19: a knee at the ladder's smallest batch is not a located knee (it may lie below the
    # ladder), so not in bold; each line names its norm (actor, critic)
    at = (f"at or below the smallest batch, B = {knee} (the ladder's first doubling already flattens; the knee may "
          "lie below the ladder)" if knee == first else f"**B = {knee}**")
    lines.append(f"Knee of the `{fit['metric']}` norm: {at} (the lower B of the first doubling whose ratio is above "
                 f"1/sqrt(2) by more than {fit.get('tolerance', 0.08):.0%}"
                 + (", its interval's lower end above 1/sqrt(2)" if at_knee is not None and at_knee.get("ratio_ci")
                    else f"; {no_interval_words(coverage or [], knee, at_knee['b_to'] if at_knee else None)}, so "
                    "one ratio without an interval: a hint, not a measurement")
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


#: the batches the noise section compares with (the aligned-family section's "undistinguished": rN aligned or not
#: distinguishable from 1), named so as not to be read as the aligned family itself (researcher finding 7)
NO_PENALTY = "the range where rN is not shown above 1 (no sample penalty measured)"


def b_simple_vs_family(pooled: dict[str, Any], family: Sequence[int] | None) -> str:
    """How the study's pooled B_simple relates to the aligned family from rN, and which to trust: B_simple predicts
    where the sample penalty sets in (McCandlish et al. 2018: rN ~ 1 + B / B_noise), the family measures it."""
    use = ("The plan's noise model takes B_noise from a fit to the measured rN where there are any, and from this "
           "value only for batches without runs. ")
    if not pooled.get("measurable") or not family:
        return use
    v, last = pooled["b_simple"], max(family)
    if last / 2 <= v <= 2 * last:
        return use + f"It agrees with {NO_PENALTY} (up to B = {last}). "
    return use + (f"It {'exceeds' if v > last else 'falls short of'} {NO_PENALTY} (up to "
                  f"B = {last}) by more than 2x: trust the measured rN, which is the sample penalty itself, while "
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
        return (f"The knee agrees with {NO_PENALTY}, which reaches B = {last}.")
    if knee is None:
        return (f"The gradient norms show no knee, while {NO_PENALTY} ends after B = {last}: trust the measured "
                "rN (on samples-to-target, which the decision uses)" + spread + ".")
    return (f"The knee (B = {knee}) and {NO_PENALTY} (up to B = {last}) disagree: trust the measured "
            f"rN, which is on samples-to-target, the quantity the decision uses; the knee rests on "
            f"ratios of mean gradient norms{spread}, more than the knee rule's {fit.get('tolerance', 0.08):.0%}.")


def grad_norm_caption(fits: dict[str, dict[str, Any]]) -> str:
    """The gradient-norm figure's caption: where the norm was taken (the retained-sample window), how many runs
    each point averages where the window holds fewer than the batch size ran, and every batch size missing from the
    figure as missing (researcher finding 11)."""
    cap = ["Mean gradient norm (before clipping) against the batch size, log-log"]
    for role, fit in fits.items():
        who = f" ({role})" if len(fits) > 1 else ""
        cov = fit.get("coverage") or []
        seeds = sorted({c["in_window"] for c in cov if c["in_window"]})
        per = ("one run per batch size" if seeds == [1] and all(c["runs"] <= 1 for c in cov) else
               "the geometric mean over a batch size's runs")
        thin = [c for c in cov if 0 < c["in_window"] < c["runs"]]
        cap.append(f"; each point{who} is {per}, each run's mean over {window_words(fit)}"
                   + (" (" + "; ".join(f"B = {c['batch_size']}: {_runs_in_window(c)}" for c in thin) + ")"
                      if thin else ""))
        miss = missing_words(cov)
        if miss:
            cap.append(f"; missing{who}: {miss}")
    cap.append(". The least-squares slope is over the range the text names (where rN is not shown above 1, when "
               "there is one), with the knee where the norm flattens; where batches are noise-dominated the norm "
               "falls like B^-1/2 (dotted grey).")
    return "".join(cap)


def noise_section(noise: dict[str, Any], family: Sequence[int] | None = None,
                  left_out: str | None = None) -> dict[str, Any]:
    """The report section on gradient noise (report contract of the lead: title, markdown, figures, json_key, json),
    rendered from the study's noise result (:func:`rlbatch.analysis.noise_summary.noise_summary`, held by
    :meth:`rlbatch.analysis.study.Study.noise`): the grad-norm vs B fit and knee for the actor and, where logged,
    the critic; B_simple per run, per B with its interval or the reason it has none, and pooled; the G x P
    equivalence. ``family``: the aligned family's batch sizes (the accounting's,
    :func:`rlbatch.report.family.aligned_family`), named beside the slope. Parts whose inputs are missing are stated
    as such. ``json``: the noise result as given. ``left_out``: which of the study's configurations its runs leave
    out and why (the pooled B_simple's sentence names them)."""
    import matplotlib  # on first use (as throughput_section)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    js = noise
    md: list[str] = []
    figs: dict[str, Any] = {}
    fits = {role: js[role] for role in ("actor", "critic") if js.get(role)}
    if "actor" in (js.get("errors") or {}):
        md.append(f"- Grad norm vs B: not fitted ({js['errors']['actor']}).")
    for fit in fits.values():
        md.append(_fmt_fit(fit, family, fit["coverage"]))
    if fits:
        fig, ax = plt.subplots(figsize=(6.5, 4.4))
        for role, fit in fits.items():
            b = np.array([p["batch_size"] for p in fit["points"]], float)
            v = np.array([p["value"] for p in fit["points"]])
            line = ax.loglog(b, v, "o", label=f"{role} grad norm")[0]
            fl = fit.get("line")  # over the aligned part (B <= knee); over every batch when that part is one point
            if fl is not None:
                fb = np.array(fl["batches"], float)
                ax.loglog(fb, np.exp(fl["intercept"]) * fb ** fl["slope"], "--", color=line.get_color(),
                          label=f"{role} fit, slope {fl['slope']:.2f}" + (
                              " (all B)" if fl["over"] == "all" else " (B where rN is not shown above 1)"
                              if fit.get("fit_range") == "given" else ""))
            if fit["knee_batch"] is not None:
                ax.axvline(fit["knee_batch"], color=line.get_color(), alpha=0.4, ls=":", label="knee")
            ax.loglog(b, v[0] * (b / b[0]) ** -0.5, ":", color="gray", alpha=0.6, label="B^-1/2")
        batch_axis(ax)
        plain_log_axis(ax, "y")
        gone = "; ".join(f"{role}: {w}" if len(fits) > 1 else w for role, w in
                         ((role, missing_words(fit["coverage"])) for role, fit in fits.items()) if w)
        ax.set_xlabel("batch size B (responses per update)" + (f"\nnot drawn: {gone}" if gone else ""))
        ax.set_ylabel("mean gradient norm before clipping")
        ax.set_title("Gradient norm vs batch size (dotted grey: B^-1/2)")
        ax.tick_params(labelsize=TICK_FONT)
        ax.legend(fontsize=LEGEND_FONT)
        fig.tight_layout()
        figs["grad_norm_vs_batch"] = fig
    # B_simple
    if js["b_simple"]:
        pooled = js.get("b_simple_pooled")
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
    if js["gp_equivalence"]:
        md.append("\n**G x P equivalence** (equal B = P x G on the retained-sample axis):")
        for row in js["gp_equivalence"]:
            ref = row["reference"]
            dev = f"max deviation {row['max_deviation']:.3g}" if row["max_deviation"] is not None else "no overlap"
            rn = f", rN {row['rN']:.2f}" if row["rN"] is not None else ""
            md.append(f"- B={row['batch_size']}: P={row['prompts_per_step']}, G={row['group_size']} vs "
                      f"P={ref['prompts_per_step']}, G={ref['group_size']}: {dev}{rn}")
    caps = {"grad_norm_vs_batch": grad_norm_caption(fits),
            "b_simple_by_batch": "Simple noise scale B_simple (McCandlish et al. 2018) per batch size: each run's "
            "mean over its steps (grey) and the value per B over all its steps with its 95% interval (arrows: an end "
            "beyond what the steps can bound); where it "
            "lies below the dotted line (the retained batch, in the same units: responses kept after filtering), "
            "the batch is larger than the noise scale."}
    return {"title": "Gradient noise and the critical batch", "markdown": "\n".join(md), "figures": figs,
            "captions": caps, "json_key": "noise", "json": js}
