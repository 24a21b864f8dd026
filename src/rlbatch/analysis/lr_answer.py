"""Should I scale the learning rate with the batch? One line from the study itself (researcher tryout, finding 9).

A study that runs a configuration off its ladder's LR rule at a batch size the ladder also runs (the sweep's
fixed-LR control: B = 256 with the reference's LR beside B = 256 on the square-root rule) answers it directly:
the control's samples-to-target over the rule's at the same B, with the 95% interval of that ratio from the two
configurations' replicates (:func:`rlbatch.analysis.accounting.compare`, the same ratio and interval as rN). Above 1
beyond noise: the rule saves samples, scale the LR; below 1 beyond noise: at this batch the rule costs samples;
otherwise the question stays open at the seeds run. A ladder without such a control is told which run would answer.

Source: Li et al. (2026), "When Do Larger Batches Help Scale LLM Reinforcement Learning?", section 3 (align: Adam's
learning rate retuned by the square-root rule, the fixed-LR ladder as control).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from rlbatch.analysis.interval import format_interval

RULES = {"none": "the fixed LR", "sqrt": "the square-root rule", "linear": "the linear rule"}


def lr_answer(rows: Sequence[Mapping[str, Any]], ests: Mapping[str, Mapping[str, Any]], rule: str | None,
              compare: Callable[[Mapping[str, Any], Mapping[str, Any]], Mapping[str, Any]]) -> dict[str, Any] | None:
    """The LR answer of a study whose ladder follows LR ``rule`` (the declared rule of the comparison): for the
    first configuration off the rule that has a partner on the rule at the same batch size, ``{"batch_size",
    "control", "scaled", "ratio", "ratio_ci" (95%, None with too few seeds), "reached": bool, "sentence"}``;
    without such a pair, ``{"sentence": what run would answer it}`` for a ladder of two or more batch sizes on the
    rule; None when the study declares no rule. ``compare(a, b)``: a's rN against b (``rN``, ``rN_ci``)."""
    if rule is None:
        return None
    on = {r.get("batch_size"): r for r in rows if r.get("lr_rule") == rule and r.get("batch_size")}
    off = [r for r in rows if r.get("lr_rule") not in (None, rule) and r.get("batch_size") in on]
    name = RULES.get(rule, f"the {rule} rule")
    if not off:
        if len(on) < 2:
            return None
        b = max(on)
        return {"sentence": f"Scale the learning rate with the batch? Not answered by these runs: no run at a ladder "
                            f"batch size off {name}. A fixed-LR run at B = {b} (the reference's LR) beside "
                            f"{on[b]['run']} would answer it at the same batch size."}
    c = off[0]
    b = c["batch_size"]
    s = on[b]
    other = RULES.get(c.get("lr_rule"), f"the {c.get('lr_rule')} setting")
    head = f"Scale the learning rate with the batch? At B = {b}, {other} ({c['run']}) "
    ec, es = ests[c["run"]], ests[s["run"]]
    if not es.get("reached") or not ec.get("reached"):
        why = "; ".join(f"{x['run']} " + ("was stopped early by the adaptive sweep" if e.get("stopped") else
                                          "has unfinished trials" if e.get("unfinished") else
                                          "did not reach the target in every seed")
                        for x, e in ((c, ec), (s, es)) if not e.get("reached"))
        return {"batch_size": b, "control": c["run"], "scaled": s["run"], "ratio": None, "ratio_ci": None,
                "reached": False, "sentence": head + f"and {name} ({s['run']}) cannot be compared in samples yet: "
                f"{why}."}
    r = compare(ec, es)
    ratio, ci = r.get("rN"), r.get("rN_ci")
    iv = f" (95% CI {format_interval(ci)})" if ci and ci[0] is not None else " (no interval: too few seeds)"
    needs = f"needs {ratio:.2f}x{iv} the samples-to-target of {name} ({s['run']}): "
    if ci and ci[0] is not None and ci[0] > 1:
        tail = f"scale the learning rate ({name} saves samples beyond noise)."
    elif ci and ci[1] is not None and math.isfinite(ci[1]) and ci[1] < 1:
        tail = f"at this batch {name} costs samples beyond noise; do not scale by it here."
    else:
        tail = "within noise at these seeds, so the runs do not settle it (more seeds of both would)."
    return {"batch_size": b, "control": c["run"], "scaled": s["run"], "ratio": ratio, "ratio_ci": ci,
            "reached": True, "sentence": head + needs + tail}
