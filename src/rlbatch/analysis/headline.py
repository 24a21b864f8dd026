"""The decision in words: the accounting's headline and one sentence per configuration.

Every number and verdict here comes from the accounting rows (:func:`rlbatch.analysis.accounting.account_runs`),
whose verdicts, intervals and "may be fastest" set come from :func:`rlbatch.analysis.decision.decide`; nothing is
computed here but text. The headline has at most five lines: the pick (or that nothing beats the reference beyond
noise), which configurations may be the fastest, what is rejected and why, what is undetermined (censored, or no
seed-to-seed spread to judge by), and what the adaptive sweep stopped or is unfinished.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlbatch.analysis.decision import (FASTER, SLOWER, STOPPED, UNDETERMINED, UNFINISHED, WITHIN_NOISE)
from rlbatch.analysis.interval import bound, format_interval
from rlbatch.runstore import Run

#: Verdicts the decision rule rejects (the headline's "Rejected" line, :func:`rlbatch.report.family.rejected`).
REJECTED = (SLOWER,)

#: at most this many seeds per configuration, a configuration that cannot be separated is said to need more seeds
FEW_SEEDS = 2

#: What the page's intervals are (said once, under the headline).
INTERVALS = ("Intervals of rN, relative throughput and relative time are 95% simultaneous over the configurations "
             "compared with the reference (they hold together in 95% of studies, so a ladder of many batch sizes "
             "does not produce a false \"faster\" or \"slower\" 5% of the time each, and the pick's interval holds "
             "although it was chosen as the smallest). \"May be fastest\" is the set that holds the fastest "
             "configuration with 95% confidence (multiple comparisons with the best).")

AGGREGATION = ("Each seed's samples-to-target comes from a monotone fit of its evaluations, refined by a local "
               "quadratic in samples over the evaluations within a factor 2 of the crossing (a straight line in log "
               "samples with fewer than three) (it does not depend on how often or how noisily a run "
               "was evaluated); its time-to-target is the clock there. Seeds of one configuration are combined as "
               "the geometric mean of their samples-to-target and of their time-to-target (the typical run); "
               "throughput = samples-to-target / time-to-target. Intervals: Student's t interval of the seed mean on the log scale for each of "
               "samples-to-target, time-to-target and throughput, each configuration's seed spread moderated by "
               "the spreads of the configurations compared (empirical Bayes, Smyth 2004); with one seed per "
               "configuration, the spread of the ladder's configurations around a smooth trend in log B (run-to-run "
               "variability, never evaluation noise alone); without either, no interval.")


def clock_note(clock: str, timing_pass: bool = False) -> str:
    """Sentences on the clock that time-to-target and throughput were measured on, what it does and does not
    protect against, and (``timing_pass``) that the accounting's throughput comes from the timing pass."""
    if timing_pass:
        return clock_note(clock) + (
            " The accounting's throughput (and so each time-to-target, samples-to-target / throughput) is the timing "
            "pass's: after the study every configuration ran short blocks of steps again, interleaved across the "
            "configurations and repeated in rounds (rlbatch.study.timing), so that a load change during the study "
            "does not land on one batch size; its interval is over the blocks. The blocks give the rate of "
            "generated responses; the share of them kept for the update comes from the runs up to the target (it "
            "depends on the stage of training, not on the machine).")
    if clock == "cpu":
        return ("Time is the trainer's process CPU time (time/cpu_s): the runs ran on CPU, where other processes "
                "sharing the cores (parallel trials, other users) stretch the wall-clock; CPU time is less affected "
                "by them, but not untouched: cycles stalled on memory bandwidth, caches or a shared core that a "
                "neighbour uses are billed as CPU time too. " + WARMUP)
    return ("Time is the logged wall-clock (time/wall_s, evaluation excluded where the log allows; an asynchronous "
            "generator's work during evaluations is charged to it). " + WARMUP)


#: How the warm-up step is timed (:func:`rlbatch.analysis.throughput.run_clock`), said with the clock
WARMUP = ("A run's first step (the warm-up) counts as a typical step of that run: the median of its next ten.")


def _x(v: float | None, unit: str = "x") -> str:
    return "unknown" if v is None else f"{v:.2f}{unit}"


def _iv(ci: Sequence[float] | None, spec: str = ".2f") -> str:
    return f" (95% CI {format_interval(ci, spec)})" if ci and ci[0] is not None else ""


def batch_list(bs: Sequence[Any]) -> str:
    """Batch sizes as words, each named (never a span that would take in those between): ``B=32``, ``B=32 and
    B=128``, ``B=32, B=64 and B=512``."""
    items = [f"B={b}" for b in sorted({b for b in bs if b is not None})]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def _name(r: dict[str, Any]) -> str:
    return f"{r['run']} (B={r['batch_size']})" if r.get("batch_size") else str(r["run"])


def few_seeds_text(rows: Sequence[dict[str, Any]]) -> str:
    """"2 seeds each" or "1-2 seeds per configuration": the seed counts behind a "too few seeds" sentence."""
    ns = sorted({int(r.get("n_seeds") or 0) for r in rows})
    return f"{ns[0]} seed{'s' if ns[0] != 1 else ''} each" if len(ns) == 1 else \
        f"{ns[0]}-{ns[-1]} seeds per configuration"


def stopped_text(r: dict[str, Any]) -> str:
    """One stopped-early configuration in words: its name, why and at how many samples the adaptive sweep stopped
    it, and the rN it had at least (it had not reached the target after that many samples)."""
    st = r.get("stopped") or {}
    at = st.get("samples")
    return (f"{_name(r)} stopped at {at:,.0f} samples ({st.get('state')}: {st.get('why')})" if at else
            f"{_name(r)} stopped ({st.get('state')}: {st.get('why')})") + (
        f", rN > {bound(r['rN_at_least'], True)} by then" if r.get("rN_at_least") else "")



def at_most_text(r: dict[str, Any]) -> str:
    """A configuration that reached the target before its first evaluation after 0, in words: how many seeds and
    its upper bounds (``rN ≤ 0.8, relative time ≤ 0.5 (95% upper end 0.7)``)."""
    m = len(r.get("at_most") or [])
    parts = [f"{m} of {r.get('n_seeds', '?')} seeds reached the target before their first evaluation after 0"
             + (f" (bounded by their later evaluations against the reference's curve shape: {r['at_most_by_shape']})"
                if r.get("at_most_by_shape") else "")]
    if r.get("rN_at_most") is not None:
        parts.append(f"rN ≤ {bound(r['rN_at_most'], False)}")
    if r.get("relative_time_at_most") is not None:
        hi = r.get("relative_time_at_most_hi")
        parts.append(f"relative time ≤ {bound(r['relative_time_at_most'], False)}" + (
            f" (95% upper end {bound(hi, False)})" if hi is not None else ""))
    return ", ".join(parts)


def time_text(r: dict[str, Any]) -> str:
    """A configuration's relative time-to-target with its interval, or its upper bound when it reached the target
    before its first evaluation (``0.55x (95% CI 0.31–0.97)``, ``at most 0.40x (95% upper end 0.62)``)."""
    if r.get("relative_time") is not None:
        return f"{r['relative_time']:.2f}x{_iv(r.get('relative_time_ci'))}"
    hi = r.get("relative_time_at_most_hi")
    return f"at most {bound(r['relative_time_at_most'], False)}x" + (
        f" (95% upper end {bound(hi, False)})" if hi is not None else "")


def _bound_text(r: dict[str, Any]) -> str:
    """A censored configuration's bounds: ``rN > 1.2, relative time > 0.8 (lower end 0.6)``."""
    parts = []
    if r.get("rN_at_least"):
        parts.append(f"rN > {bound(r['rN_at_least'], True)}")
    if r.get("relative_time_at_least"):
        lo = r.get("relative_time_at_least_lo")
        parts.append(f"relative time > {bound(r['relative_time_at_least'], True)}" + (
            f" (95% lower end {bound(lo, True)})" if lo is not None else ""))
    return ", ".join(parts)


#: a configuration's own seed spread this far below the one its intervals use is named (researcher finding 8)
OWN_SPREAD_SMALLER = 0.25


def spread_text(rows: Sequence[dict[str, Any]]) -> str | None:
    """Where an interval's seed spread is not the configuration's own, in words beside the intervals (researcher
    tryout, finding 8: B = 64's three seeds agreed within 3% and its rN interval was 0.60-1.68, explained only at the
    foot of the page). Per measured configuration, from its row's ``spread`` (how: ``moderated``, ``ladder``,
    ``own (wider than the others')``), ``spread_sd`` and ``spread_df`` (log scale) and its per-seed samples-to-target:

    - one seed: its intervals use the others' spread (it has none of its own);
    - its own spread wider than the others' allow (:func:`rlbatch.analysis.interval.hypervariable`): its own, on
      n - 1 degrees of freedom, which is why that interval is wide;
    - two or more seeds whose own log-sd of samples-to-target is below :data:`OWN_SPREAD_SMALLER` x the moderated
      one used: they agree, but n - 1 degrees of freedom cannot measure a spread, so it is pooled toward the
      others' (Smyth 2004).

    None when every interval uses a spread close to the configuration's own."""
    parts = []
    for r in rows:
        how, sd, df = r.get("spread") or {}, r.get("spread_sd") or {}, r.get("spread_df") or {}
        if not r.get("reached") or not how:
            continue
        k = int(r.get("n_seeds") or 0)
        own = [q for q in ("S", "T", "X") if "own (wider" in str(how.get(q, ""))]
        half = [q for q in own if "moderated by 1 df" in str(how.get(q, ""))]  # two seeds: half its own
        words = {"S": "samples-to-target", "T": "times-to-target", "X": "throughputs"}
        # the interval each spread enters: rN from S, the relative time from T, the relative throughput from X
        rests = {"S": ("rN",), "T": ("relative time",), "X": ("relative throughput",)}
        if k == 1 and how.get("S") in ("moderated", "ladder"):
            src = "the ladder's trend residuals" if how.get("S") == "ladder" else "the other configurations' seeds"
            parts.append(f"{_name(r)} has one seed: its intervals use the spread of {src} (log-sd "
                         f"{sd.get('S', float('nan')):.2f} of samples-to-target)")
        elif own:
            ivs = list(dict.fromkeys(i for q in own for i in rests[q]))
            spread = (f"its own spread half-pooled with the others' ({k - 1} degree of freedom of its own and 1 of "
                      "theirs)" if half else f"its own spread on {k - 1} degrees of freedom")
            parts.append(f"{_name(r)}'s {' and '.join(words[q] for q in own)} scatter more across its {k} seeds "
                         f"than the others' allow (log-sd {', '.join(f'{sd[q]:.2f}' for q in own)}), so its "
                         f"{' and '.join(ivs)} interval{'s use' if len(ivs) > 1 else ' uses'} {spread}, which is "
                         f"why {'they are' if len(ivs) > 1 else 'it is'} wide")
        elif k >= 2 and how.get("S") == "moderated" and sd.get("S"):
            s = [v for v in (r.get("samples_to_target_per_seed") or []) if v]
            if len(s) == k:
                mine = float(np.std(np.log(s), ddof=1))
                if mine < OWN_SPREAD_SMALLER * sd["S"]:
                    parts.append(f"{_name(r)}'s {k} seeds agree within {max(s) / min(s) - 1:.0%} (log-sd {mine:.2f}), "
                                 f"but its intervals use {sd['S']:.2f}, its spread pooled toward the others' ({k - 1} "
                                 "degree" + ("s" if k > 2 else "") + " of freedom of its own cannot measure a spread)")
    return ("Seed spread behind the intervals: " + "; ".join(parts) + ".") if parts else None


def undetermined_text(r: dict[str, Any]) -> str:
    """Why one configuration has no verdict, in words (censored seeds, or no spread to judge one seed by)."""
    if not r.get("reached") and r.get("relative_time_at_most") is not None:
        return f"{_name(r)}: {at_most_text(r)}, which does not show it faster"
    if not r.get("reached"):
        b = _bound_text(r)
        return (f"{_name(r)}: {r.get('n_reached', 0)} of {r.get('n_seeds', '?')} seeds reached the target"
                + (f"; {b}" if b else "") + ", which does not show it slower")
    return f"{_name(r)}: {r.get('why') or 'no interval'}"


def verdict(row: dict[str, Any], reference: str) -> str:
    """One sentence on an accounting row: throughput gain vs sample penalty rN with their intervals, and the
    verdict (:func:`rlbatch.analysis.decision.verdict_label`)."""
    run = row["run"]
    if run == reference:
        return f"{run} is the reference."
    label = row.get("verdict")
    if label == STOPPED:
        return f"{stopped_text(row)}: stopped early, not measured to the target."
    if label == UNFINISHED:
        return (f"{run} is unfinished ({len(row.get('unfinished') or [])} seed(s) still running or interrupted)"
                + (f"; rN > {row['rN_at_least']:.2f} so far" if row.get("rN_at_least") else "") + ": no verdict yet.")
    if not row.get("reached") and row.get("relative_time_at_most") is not None:
        word = "faster" if label == FASTER else "undetermined"
        return f"{run} is {word}: {at_most_text(row)}."
    if not row.get("reached"):
        b = _bound_text(row)
        n = f"{row.get('n_reached', 0)} of {row.get('n_seeds', '?')} seeds reached the target"
        if label == SLOWER:
            return (f"{run} is slower: {n} before its run ended, and even counting each other seed's whole run as "
                    f"its time, {b}.")
        return f"{run} is undetermined: {n}" + (f"; {b}" if b else "") + (
            ": not reaching the target within its run is not the same as being slower (its time is censored).")
    if row.get("relative_throughput") is None or row.get("relative_time") is None:
        return f"{run}: throughput unknown, no decision."
    gain, rn, rel = row["relative_throughput"], row["rN"], row["relative_time"]
    nums = (f"throughput gain {gain:.2f}x{_iv(row.get('relative_throughput_ci'))} vs sample penalty "
            f"rN={rn:.2f}{_iv(row.get('rN_ci'))}; {rel:.2f}x{_iv(row.get('relative_time_ci'))} the reference's "
            "time-to-target")
    if label == FASTER:
        return f"{run} is faster ({nums})."
    if label == SLOWER:
        return f"{run} is slower ({nums})."
    if label == UNDETERMINED:
        return f"{run} is undetermined ({nums}): {row.get('why')}."
    if str(label).endswith("(point estimate)"):  # a table of point values: no interval, so no noise to be within
        return f"{run} is {label.split(' (')[0]} by its point estimates ({nums}; a table of point values has no interval)."
    few = (f"; too few seeds to separate ({row['n_seeds']} seed{'s' if row['n_seeds'] != 1 else ''})"
           if 0 < (row.get("n_seeds") or 0) <= FEW_SEEDS else "")
    return f"{run} is within noise of the reference ({nums}{few})."


def headline(rows: list[dict[str, Any]], ref: str | None, metric: str, target: float,
             runs: Sequence[Run] = (), *, pick: str | None = None, may_be_fastest: Sequence[str] = (),
             beats_reference: bool = False, would_decide: Sequence[Any] = (),
             no_spread: bool = False, sequential_stop: str | None = None) -> dict[str, Any]:
    """The accounting's headline from the decision: ``lines`` (the pick with its simultaneous interval; the "may be
    fastest" set; what was rejected; what is undetermined; stopped or unfinished configurations) and ``bullets``
    (one sentence per other configuration, then notes such as mixed hardware), with ``pick``, ``best_set`` (the
    "may be fastest" names), ``within_noise`` (the others of that set: configurations that cannot be told from the
    pick) and ``beats_reference``. ``sequential_stop``: why the sequential study that collected the runs stopped
    (it, not "run more seeds", says why the set was not separated). Callers may append bullets (e.g. how the learning
    rate was set)."""
    out: dict[str, Any] = {"pick": None, "within_noise": [], "best_set": None, "lines": [], "bullets": [],
                           "beats_reference": False}
    if ref is None:
        reached = [r["run"] for r in rows if r["reached"]]
        if reached:
            out["lines"] = [f"No pick: {', '.join(reached)} reached {metric} ≥ {target:g}, but none has a measured "
                            "clock (no per-step timings in the logs) and a target reached after training began, so "
                            "time-to-target cannot be compared."]
        elif rows and not any(r.get("batch_size") for r in rows):
            out["lines"] = [f"No samples-to-target: no run's log gives its batch size (P x G), so its {metric} "
                            "cannot be placed on the retained-sample axis; supply it with --set "
                            "RUN:prompts_per_step=P --set RUN:group_size=G (rlbatch inspect FILE says what is "
                            "missing)."]
        elif rows and all(r.get("best_score") is None for r in rows):
            out["lines"] = [f"No run logs {metric}: nothing to compare at a target. Choose the score with --metric "
                            "(e.g. eval/score, reward/mean; rlbatch inspect FILE lists what each log holds)."]
        else:
            best = max(rows, key=lambda r: r.get("best_score") if r.get("best_score") is not None else -1e300,
                       default=None)
            bv = best.get("best_score") if best else None
            some = [f"{r['run']} {r['n_reached']} of {r['n_seeds']}" for r in rows if r.get("n_reached")]
            what = (f"No configuration had every seed reach {metric} ≥ {target:g} (seeds that did: "
                    f"{', '.join(some)}), so none has a samples-to-target" if some
                    else f"No run reached {metric} ≥ {target:g}")
            out["lines"] = [what +
                            (f"; the best was {best['run']} at {bv:.4g}. " if bv is not None else ". ") +
                            "Train longer, or choose a lower target, before comparing batch sizes."]
        return out
    by = {r["run"]: r for r in rows}
    if len(rows) == 1:
        out.update(pick=ref, best_set=[ref], lines=[f"Only one configuration ({ref}, B={rows[0]['batch_size']}): "
                                                     "nothing to compare it with."])
        return out
    pick = pick if pick in by else ref
    best = [n for n in may_be_fastest if n in by] or [pick]
    out.update(pick=pick, best_set=best, within_noise=[n for n in best if n != pick], beats_reference=beats_reference)
    at = f"at {metric} ≥ {target:g}"
    b = by[pick]
    n_est = len([n for n in best if by[n].get("relative_time") is not None])
    if pick == ref:
        first = (f"**Pick: {_name(b)}, the reference.** No other configuration has a smaller estimated "
                 f"time-to-target {at}.")
    elif not beats_reference and b.get("relative_time") is None and b.get("relative_time_at_most") is not None:
        first = (f"**No batch is shown to beat the reference {_name(by[ref])}** {at}. The best estimate is "
                 f"{_name(b)}, {time_text(b)} the reference's time-to-target ({at_most_text(b)}): an upper bound "
                 "that does not exclude 1, so more seeds or an earlier first evaluation would decide.")
    elif not beats_reference and not b.get("relative_time_ci"):
        first = (f"**No batch is shown to beat the reference {_name(by[ref])}** {at}: there is no interval "
                 f"({b.get('why') or 'one seed'}). The best point estimate is {_name(b)}: "
                 f"{_x(b['relative_time'])} the reference's time-to-target (throughput "
                 f"{_x(b['relative_throughput'])} against a sample penalty rN = {_x(b['rN'], '')}).")
    elif not beats_reference:
        first = (f"**No batch beats the reference {_name(by[ref])} beyond noise** {at}. The best estimate is "
                 f"{_name(b)}: {b['relative_time']:.2f}x{_iv(b['relative_time_ci'])} the reference's time-to-target "
                 f"(throughput {_x(b['relative_throughput'])}{_iv(b['relative_throughput_ci'])} against a sample "
                 f"penalty rN = {_x(b['rN'], '')}{_iv(b['rN_ci'])}), an interval that reaches 1" + (
                     f"; the smallest of {n_est} estimates, so optimistic (N6)." if n_est > 1 else "."))
    elif b.get("relative_time") is None:
        first = (f"**Pick: {_name(b)}**, {time_text(b)} the reference {by[ref]['run']}'s time-to-target {at}: "
                 f"{at_most_text(b)}.")
    else:
        first = (f"**Pick: {_name(b)}**, {b['relative_time']:.2f}x{_iv(b['relative_time_ci'])} the reference "
                 f"{by[ref]['run']}'s time-to-target {at}: throughput {b['relative_throughput']:.2f}x"
                 f"{_iv(b['relative_throughput_ci'])} against a sample penalty rN = {b['rN']:.2f}{_iv(b['rN_ci'])}.")
    head_of_set = by[pick] if pick in best else b
    others = [by[n] for n in best if n != head_of_set["run"]]
    if others:
        few = min([r.get("n_seeds") or 0 for r in [head_of_set, *others]]) <= FEW_SEEDS
        second = (f"May be the fastest (95%, multiple comparisons with the best): {_name(head_of_set)} and "
                  f"{', '.join(_name(r) for r in others)}; " + (
                      f"the sequential study stopped there ({sequential_stop})." if sequential_stop else
                      f"too few seeds to separate them ({few_seeds_text([head_of_set, *others])}): run more seeds."
                      if few else "more seeds or longer timing would separate them."))
    else:
        second = (f"May be the fastest (95%, multiple comparisons with the best): only {_name(head_of_set)}; each "
                  "other configuration is slower than some configuration beyond noise.")
    rej = [r for r in rows if r.get("verdict") in REJECTED]
    if rej:
        third = "Rejected (slower than the reference beyond noise): " + "; ".join(
            f"{_name(r)}" + (f" ({r['relative_time']:.2f}x{_iv(r['relative_time_ci'])}: samples-to-target grew by "
                             f"rN = {r['rN']:.2f}{_iv(r['rN_ci'])}, throughput only "
                             f"{r['relative_throughput']:.2f}x{_iv(r['relative_throughput_ci'])})"
                             if r.get("reached") else
                             f" ({r.get('n_reached', 0)} of {r.get('n_seeds', '?')} seeds reached the target; "
                             f"{_bound_text(r)})") for r in rej) + "."
    else:
        third = "Rejected: none (no configuration is slower than the reference beyond noise)."
    out["lines"] = [first, second, third]
    wd = ""
    if not beats_reference:
        from rlbatch.analysis.would_decide import NO_SPREAD_PLAN, sentence

        wd = NO_SPREAD_PLAN if no_spread else sentence(would_decide)
        out["would_decide"] = [{"config": p.config, "batch_size": p.batch_size, "relative_time": p.relative_time,
                                "seeds_now": p.seeds_now, "reference_seeds": p.reference_seeds,
                                "seeds": {f"{k:.2f}": v for k, v in p.seeds.items()},
                                "more_runs": {f"{k:.2f}": p.more_runs(k) for k in p.seeds},
                                "sigma": p.sigma, "sigma_df": p.sigma_df, "reason": p.reason, "claim": p.claim}
                               for p in would_decide]
    und = [r for r in rows if r.get("verdict") == UNDETERMINED]
    if und:
        reached = [r for r in und if r.get("reached")]
        same = len({r.get("why") for r in reached}) == 1 and len(reached) > 1
        parts = [undetermined_text(r) for r in und if not (same and r.get("reached"))]
        if same:
            parts.append(f"{', '.join(_name(r) for r in reached)}: {reached[0].get('why')}")
        out["lines"].append("Undetermined: " + "; ".join(parts) + ".")
    stopped = [r for r in rows if r.get("verdict") == STOPPED]
    unfinished = [r for r in rows if r.get("verdict") == UNFINISHED]
    if stopped:
        out["lines"].append("Stopped early by the adaptive sweep (not measured to the target, so no verdict on the "
                            "batch itself): " + "; ".join(stopped_text(r) for r in stopped) + ".")
    if unfinished:
        out["lines"].append("Unfinished: " + "; ".join(
            f"{_name(r)} ({len(r['unfinished'])} of {r.get('n_seeds', '?')} seed(s) still running or interrupted"
            + (f", rN > {r['rN_at_least']:.2f} so far" if r.get("rN_at_least") else "") + ")" for r in unfinished)
                            + ". The verdicts above are provisional until they finish (rerun the same sweep "
                            "command to resume).")
        out["provisional"] = True
    spread = spread_text(rows)
    if spread:
        out["lines"].append(spread)
        out["spread_text"] = spread
    if wd:
        out["lines"].append(wd)
        out["would_decide_text"] = wd  # the one sentence plan and watch show too
    out["bullets"] = [verdict(r, ref) for r in rows if r["run"] not in (ref, pick)
                      and r.get("verdict") not in (STOPPED, UNFINISHED)]
    hw = {str(r.meta.hardware) for r in runs if r.meta.hardware}
    if len(hw) > 1:
        out["bullets"].append(f"Caution: these runs used different hardware ({'; '.join(sorted(hw))}), so throughput "
                              "ratios compare hardware as well as batch size.")
    return out


def headline_markdown(h: dict[str, Any]) -> str:
    """A :func:`headline` as Markdown: its lines (hard line breaks), then its bullets (one per configuration, then
    how the learning rate was set across batch sizes, ``lr_note``, when known)."""
    text = "  \n".join(h["lines"])
    bullets = list(h["bullets"]) + ([h["lr_note"]] if h.get("lr_note") else [])
    if bullets:
        text += "\n\n" + "\n".join(f"- {b}" for b in bullets)
    return text


__all__ = ["AGGREGATION", "FEW_SEEDS", "INTERVALS", "REJECTED", "WITHIN_NOISE", "batch_list", "bound", "clock_note",
           "few_seeds_text", "headline", "headline_markdown", "spread_text", "stopped_text", "verdict"]
