"""Where the aligned family ends, and which configurations the decision rule rejects (rendering of accounting rows;
every rN, interval and verdict comes from :func:`rlbatch.analysis.accounting.account_runs`, none is recomputed).

The aligned family (DESIGN.md; Li et al. 2026): the contiguous range of batch sizes on the reference's LR rule,
around the reference, whose samples-to-target ratio stays within ``rN <= 1 + tolerance``. Its *end* is the first
batch size above the family on the same rule whose rN is above ``1 + tolerance`` (or that did not reach the target
within its budget: its rN is larger than any the budget could measure).
"""

from __future__ import annotations

from typing import Any, Sequence

from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.accounting import TOLERANCE, aligned, aligned_span
from rlbatch.analysis.decision import STOPPED, UNFINISHED
from rlbatch.analysis.headline import verdict


def _ci_text(ci: Sequence[float | None] | None) -> str:
    return "" if not ci or ci[0] is None else f" (95% CI {format_interval(ci)})"


def aligned_family(rows: Sequence[dict[str, Any]], reference: str | None,
                   tolerance: float = TOLERANCE) -> dict[str, Any] | None:
    """The aligned family of the accounting ``rows`` (:func:`rlbatch.analysis.accounting.account_runs`, one per
    configuration, with ``rN``, ``rN_ci``, ``lr_rule``, ``reached``, ``verdict``) around ``reference``.

    Returns None without a reference, else ``{"tolerance", "rule", "reference", "reference_batch", "batches"
    (family members' B, ascending), "lower", "upper" (its smallest and largest B), "end": {"run", "batch_size",
    "rN", "rN_ci", "reached", "clear" (the whole interval is above 1 + tolerance, or not reached)} | None,
    "clear_end" (the first B above the family whose whole interval lies above 1 + tolerance, or not reached: where
    the end is certain; same keys without "clear") | None, "largest_measured" (the largest B on the rule), "statement" (one Markdown sentence)}``. Only configurations on
    the reference's LR rule count (a fixed-LR control at B != B0 is not part of the family). At several
    configurations of one B (e.g. group sizes) the one with the largest rN decides.
    """
    by = {r["run"]: r for r in rows}
    if reference is None or reference not in by:
        return None
    ref = by[reference]
    rule = ref.get("lr_rule")
    ladder: dict[int, dict[str, Any]] = {}
    for r in rows:
        b = r.get("batch_size")
        if not b or r.get("lr_rule") != rule:
            continue
        worse = ladder.get(b)
        key = (not r["reached"], r["rN"] if r["rN"] is not None else 0.0)
        if worse is None or key > (not worse["reached"], worse["rN"] if worse["rN"] is not None else 0.0):
            ladder[b] = r
    ladder[ref["batch_size"]] = ref
    bs = sorted(ladder)
    limit = 1.0 + tolerance
    fam = aligned_span([(b, bool(r["reached"]) and aligned(r["rN"], True, tolerance)) for b, r in ladder.items()],
                       ref["batch_size"])
    hi = bs.index(fam[-1])
    end = None
    if hi < len(bs) - 1:
        e = ladder[bs[hi + 1]]
        ci = e.get("rN_ci")
        clear = (not e["reached"]) or bool(ci and ci[0] is not None and ci[0] > limit)
        end = {"run": e["run"], "batch_size": e["batch_size"], "rN": e["rN"], "rN_ci": ci, "reached": e["reached"],
               "clear": clear}
    # the first B above the family whose whole rN interval lies above the tolerance (or that did not reach the
    # target): where the end is certain; with noisy rN it can lie several doublings above the first point estimate
    clear_end = None
    for b in bs[hi + 1:]:
        e = ladder[b]
        ci = e.get("rN_ci")
        if not e["reached"] or (ci and ci[0] is not None and ci[0] > limit):
            clear_end = {"run": e["run"], "batch_size": b, "rN": e["rN"], "rN_ci": ci, "reached": e["reached"]}
            break
    rule_s = (f"the {rule} LR rule" if rule and rule != "none" else "a fixed learning rate" if rule == "none"
              else "these runs' ladder (no LR rule recorded)")
    span = f"B = {fam[0]} to {fam[-1]}" if len(fam) > 1 else f"only B = {fam[0]}"
    if end is None:
        statement = (f"On {rule_s}, rN stays within 1 + {tolerance:g} = {limit:.2f} over every batch size run "
                     f"({span}): the aligned family does not end within this ladder, so the critical batch lies "
                     f"above B = {bs[-1]}; run larger batches to find it.")
    elif ladder[end["batch_size"]].get("verdict") in (STOPPED, UNFINISHED):
        e = ladder[end["batch_size"]]
        low = e.get("rN_at_least")
        how = ("stopped early by the adaptive sweep" if e.get("verdict") == STOPPED else
               "unfinished (its trials had not finished)")
        if low and low > limit:
            statement = (f"On {rule_s}, the aligned family (rN ≤ {limit:.2f}) is {span}; it ends at "
                         f"B = {end['batch_size']} ({end['run']}), {how} before reaching the target with rN > "
                         f"{low:.2f} already, above {limit:.2f}.")
        else:
            statement = (f"On {rule_s}, the aligned family (rN ≤ {limit:.2f}) is {span} as measured; "
                         f"B = {end['batch_size']} ({end['run']}) was {how} before its rN could be measured"
                         + (f" (rN > {low:.2f} by then)" if low else "") + ", so where the family ends is not "
                         "measured by this sweep.")
            end["clear"] = False
    elif not end["reached"]:
        statement = (f"On {rule_s}, the aligned family (rN ≤ {limit:.2f}) is {span}; it ends at "
                     f"B = {end['batch_size']} ({end['run']}), which did not reach the target within its sample "
                     "budget (some seed never got there), so its rN is larger than the budget can measure.")
    else:
        how = ("its whole interval lies above the tolerance" if end["clear"] else
               f"its interval reaches below {limit:.2f}, so this end is not yet certain")
        statement = (f"On {rule_s}, the aligned family (rN ≤ {limit:.2f}) is {span}; it ends at "
                     f"B = {end['batch_size']} ({end['run']}): rN = {end['rN']:.2f}{_ci_text(end['rN_ci'])}, "
                     f"above {limit:.2f} ({how}).")
        if not end["clear"]:
            if clear_end is None:
                statement += (f" No batch size up to B = {bs[-1]} has its whole interval above {limit:.2f}.")
            elif not clear_end["reached"]:
                statement += (f" The first batch size certainly outside it is B = {clear_end['batch_size']} "
                              f"({clear_end['run']}), which did not reach the target.")
            else:
                statement += (f" The first batch size whose whole interval lies above {limit:.2f} is "
                              f"B = {clear_end['batch_size']} ({clear_end['run']}: rN = {clear_end['rN']:.2f}"
                              f"{_ci_text(clear_end['rN_ci'])}): the family ends between B = {fam[-1]} and "
                              f"B = {clear_end['batch_size']}.")
    return {"tolerance": tolerance, "rule": rule, "reference": reference, "reference_batch": ref["batch_size"],
            "batches": fam, "lower": fam[0], "upper": fam[-1], "end": end, "clear_end": clear_end,
            "largest_measured": bs[-1],
            "statement": statement}


def rejected(rows: Sequence[dict[str, Any]], reference: str | None) -> list[dict[str, Any]]:
    """The configurations the decision rule rejects: accounting verdict ``slower`` (the interval of the relative
    time-to-target lies wholly above 1: the throughput gain does not beat rN) or ``not reached``. Each: ``run,
    batch_size, lr_rule, verdict, rN, rN_ci, relative_throughput, relative_throughput_ci, relative_time,
    relative_time_ci, reason`` (the accounting's sentence, :func:`rlbatch.analysis.accounting.verdict`)."""
    keys = ("run", "batch_size", "lr_rule", "verdict", "rN", "rN_ci", "relative_throughput",
            "relative_throughput_ci", "relative_time", "relative_time_ci")
    return [{**{k: r.get(k) for k in keys}, "reason": verdict(r, reference) if reference else r["verdict"]}
            for r in rows if r.get("verdict") in ("slower", "not reached")]


def family_markdown(fam: dict[str, Any] | None, rej: Sequence[dict[str, Any]]) -> str:
    """The report's paragraph on the aligned family and the rejected configurations (Markdown)."""
    if fam is None:
        return "No reference configuration, so no aligned family."
    lines = [fam["statement"], ""]
    past = [r for r in rej if r.get("lr_rule") == fam["rule"] and (r["batch_size"] or 0) > fam["upper"]]
    other = [r for r in rej if r not in past]
    if past:
        lines.append("Past the end of the family the decision rule rejects the larger batch even with the learning "
                     "rate retuned (the paper's warning: past the critical batch rN grows faster than throughput):")
        lines += [f"- {r['reason']}" for r in sorted(past, key=lambda r: r["batch_size"] or 0)]
    if other:
        lines.append("Rejected by the decision rule:" if not past else "Also rejected by the decision rule:")
        lines += [f"- {r['reason']}" for r in sorted(other, key=lambda r: (r.get("lr_rule") != fam["rule"],
                                                                          r["batch_size"] or 0))]
    if not rej:
        lines.append("No configuration is rejected: none is slower than the reference beyond noise.")
    return "\n".join(lines)
