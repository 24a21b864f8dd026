"""Where the aligned family ends, and which configurations the decision rule rejects: the words of
:func:`rlbatch.analysis.decision.aligned_family` and of the accounting rows' verdicts (nothing is computed here).

"Aligned" is said only where an equivalence test shows it (rN's 90% interval inside [1 / (1 + tol), 1 + tol]),
"not distinguishable from 1" where the interval is too wide to say, "above 1" where it lies wholly above: the
absence of evidence of a penalty is not evidence of alignment (statistics review, finding 11).
"""

from __future__ import annotations

from typing import Any, Sequence

from rlbatch.analysis.decision import (ALIGNED, BELOW, NOT_DISTINGUISHABLE, SLOWER, STOPPED, TOLERANCE,
                                       UNFINISHED)
from rlbatch.analysis.headline import verdict
from rlbatch.analysis.interval import bound, format_interval


def _span(bs: Sequence[int]) -> str:
    return f"B = {bs[0]} to {bs[-1]}" if len(bs) > 1 else f"only B = {bs[0]}"


def _t(iv: Sequence[float] | None) -> str:
    return f" (90% CI {format_interval(iv)}, unadjusted: the equivalence test's)" if iv else ""


def aligned_family(family: dict[str, Any] | None, tolerance: float = TOLERANCE) -> dict[str, Any] | None:
    """The study's aligned ``family`` (:attr:`rlbatch.analysis.study.Study.family`, computed by
    :func:`rlbatch.analysis.decision.aligned_family`) with its ``statement`` (one Markdown paragraph) added, a
    copy; None without one."""
    if family is None:
        return None
    fam = dict(family)
    rule = fam["rule"]
    rule_s = (f"the {rule} LR rule" if rule and rule != "none" else "a fixed learning rate" if rule == "none"
              else "these runs' ladder (no LR rule recorded)")
    lo, hi = 1 / (1 + tolerance), 1 + tolerance
    grades, info = fam["grades"], fam["rows"]
    others = [b for b in grades if b != fam["reference_batch"]]
    aligned = [b for b in others if grades[b] == ALIGNED]
    unclear = [b for b in others if grades[b] in (NOT_DISTINGUISHABLE, BELOW)]
    words = [f"On {rule_s}, rN is shown within {tolerance:.0%} of the reference's (equivalence test at 5%: its 90% "
             f"interval inside [{lo:.2f}, {hi:.2f}]) for "
             + (", ".join(f"B = {b}{_t(info[b]['rN_test'])}" for b in aligned) if aligned else "no other batch size")
             + f"; the aligned family is {_span(fam['batches'])}."]
    if unclear:
        words.append("Not distinguishable from 1 (the interval is too wide to show either alignment or a penalty): "
                     + ", ".join(f"B = {b}: rN {info[b]['rN']:.2f}{_t(info[b]['rN_test'])}" for b in unclear) + ".")
    end = fam["end"]
    if end is None:
        words.append(f"No batch size up to B = {fam['largest_measured']} has an rN shown above 1, so where the "
                     "family ends (and the critical batch) is not measured by this ladder.")
    elif not end["reached"] and end.get("verdict") in (STOPPED, UNFINISHED):
        low = end.get("rN_at_least")
        how = ("stopped early by the adaptive sweep" if end["verdict"] == STOPPED else
               "unfinished (its trials had not finished)")
        words.append(f"B = {end['batch_size']} ({end['run']}) was {how} before its rN could be measured"
                     + (f" (rN > {bound(low, True)} by then)" if low else "") + ", so where the family ends is not measured "
                     "by this sweep.")
    elif not end["reached"]:
        low = end.get("rN_at_least")
        words.append(f"B = {end['batch_size']} ({end['run']}) did not reach the target within its run in every "
                     "seed" + (f" (rN > {bound(low, True)})" if low else "") + f": its rN is not measured; it is "
                     f"{end.get('verdict')}.")
    else:
        words.append(f"The first batch size whose rN is above 1 beyond noise is B = {end['batch_size']} "
                     f"({end['run']}): rN = {end['rN']:.2f} (95% simultaneous CI "
                     f"{format_interval(end['rN_ci'])}, the table's); the family's end lies between "
                     f"B = {fam['undistinguished'][-1]} and B = {end['batch_size']} (where the gradient-noise knee "
                     "or B_simple may place the critical batch; they are estimates of their own).")
    fam["statement"] = " ".join(words)
    return fam


def rejected(rows: Sequence[dict[str, Any]], reference: str | None) -> list[dict[str, Any]]:
    """The configurations the decision rule rejects: accounting verdict ``slower`` (the simultaneous interval of the
    relative time-to-target lies wholly above 1, or a censored configuration's lower bound does). Each: ``run,
    batch_size, lr_rule, verdict, rN, rN_ci, relative_throughput, relative_throughput_ci, relative_time,
    relative_time_ci, reason`` (the accounting's sentence, :func:`rlbatch.analysis.accounting.verdict`)."""
    keys = ("run", "batch_size", "lr_rule", "verdict", "rN", "rN_ci", "relative_throughput",
            "relative_throughput_ci", "relative_time", "relative_time_ci")
    return [{**{k: r.get(k) for k in keys}, "reason": verdict(r, reference) if reference else r["verdict"]}
            for r in rows if r.get("verdict") == SLOWER]


def family_markdown(fam: dict[str, Any] | None, rej: Sequence[dict[str, Any]]) -> str:
    """The report's paragraph on the aligned family and the rejected configurations (Markdown)."""
    if fam is None:
        return "No reference configuration, so no aligned family."
    lines = [fam["statement"], ""]
    past = [r for r in rej if r.get("lr_rule") == fam["rule"]
            and (r["batch_size"] or 0) > fam["undistinguished"][-1]]
    other = [r for r in rej if r not in past]
    if past:
        lines.append("Past the range where rN is not shown above 1 the decision rule rejects the larger batch even "
                     "with the learning rate retuned (the paper's warning: past the critical batch rN grows faster "
                     "than throughput):")
        lines += [f"- {r['reason']}" for r in sorted(past, key=lambda r: r["batch_size"] or 0)]
    if other:
        lines.append("Rejected by the decision rule:" if not past else "Also rejected by the decision rule:")
        lines += [f"- {r['reason']}" for r in sorted(other, key=lambda r: (r.get("lr_rule") != fam["rule"],
                                                                          r["batch_size"] or 0))]
    if not rej:
        lines.append("No configuration is rejected: none is slower than the reference beyond noise.")
    return "\n".join(lines)
