"""A plan (:func:`rlbatch.plan.plan_runs`, :func:`rlbatch.plan.plan_table`) rendered: its headline, its table of
candidates in Markdown or a rich table, or its JSON. Nothing is computed here.
"""

from __future__ import annotations

import math
from typing import Any


from rlbatch.analysis import terms
from rlbatch.analysis.headline import batch_list, time_text
from rlbatch.analysis.interval import format_interval
from rlbatch.output import console, markdown_table, print_json, rich_table


def _fmt_ci(v: Any) -> str:
    return format_interval(v, sep="-")


COLUMNS = [("run", "candidate", None), ("batch_size", "B", None), ("rN", "rN", ".2f"), ("rN_ci", "rN interval", _fmt_ci),
           ("rN_source", "rN from", None), ("relative_throughput", "rel. throughput", ".2f"),
           ("throughput_source", "throughput from", None), ("predicted_relative_time", "pred. rel. time", ".2f"),
           ("interval", "interval", _fmt_ci), ("alignment", "rN vs 1 (alignment)", None), ("verdict_cell", "verdict", None)]


def _rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The candidates with their verdict cell: the verdict (analyze's, where measured) and "(pick)" on the pick."""
    return [{**c, "verdict_cell": c["verdict"] + (" (pick)" if c.get("pick") and c["verdict"] != "recommended"
                                                  else "")} for c in plan["candidates"]]


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
    bounded = c is not None and c.get("predicted_relative_time") is None and c.get("relative_time_at_most") is not None
    if c is not None and rec != plan.get("reference") and (c.get("predicted_relative_time") is not None or bounded) \
            and iv and iv[1] is not None and iv[1] >= 1:  # the analyze headline's rule (issue 37): within noise of B0
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
    elif bounded:  # reached the target before its first evaluation: the accounting's upper bound, not a prediction
        s += f", {time_text(c)} the reference's ({plan['reference']}) time-to-target at {tgt} (an upper bound)"
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
    lines = [f"**{_headline(plan)}**", "", markdown_table(_rows(plan), COLUMNS), ""]
    lines += [f"- {c['sentence']}" for c in plan["candidates"]]
    if plan.get("aligned_family"):
        fam = plan["aligned_family"]
        lo = fam[0]
        span = ", ".join(f"B = {b}" for b in fam) if len(fam) > 1 else f"only B = {lo}"
        tol = plan["tolerance"]
        lines += ["", f"Aligned family (square-root LR rule; rN shown within {tol:.0%} of the reference's: its "
                  f"interval inside [{1 / (1 + tol):.2f}, {1 + tol:.2f}], as in the accounting; rN <= {1 + tol:.2f} "
                  f"only for a point value without an interval): {span}."]
    lines += ["", f"Predicted {terms.RELATIVE_TIME}. {terms.RN_FROM_NOISE}."]
    for n in plan.get("notes") or []:
        lines.append(f"- Note: {n}")
    if plan.get("would_decide"):
        lines += ["", plan["would_decide"]]
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
    con.print(rich_table(_rows(plan), COLUMNS, title=f"Plan (reference {plan['reference']})"))
    con.print(f"  Predicted {terms.RELATIVE_TIME}.", highlight=False)
    for c in plan["candidates"]:
        con.print(f"  {c['sentence']}")
    for n in plan.get("notes") or []:
        con.print(f"  note: {n}")
    con.print(f"[bold]{_headline(plan)}[/bold]")
    if plan.get("would_decide"):
        con.print(plan["would_decide"])
