"""End-to-end accounting: does a larger batch reach the target sooner? (the paper's "accelerate" test).

The one analysis core: every command (``account``, ``analyze``, ``plan``, the report, the sweeps, the demo) takes
samples-to-target, time-to-target, throughput, rN, relative time and the verdict from the functions here.

Per seed (one run), on the policy-sample axis (:func:`rlbatch.analysis.curves.curve`, evaluation at 0 kept):
    S  = samples-to-target: the crossing of a monotone fit of the evaluations, refined by a local quadratic in
         samples over the evaluations within a factor 2 of it (a straight line in log samples with fewer than three;
         :mod:`rlbatch.analysis.crossing`; independent of the evaluation spacing and noise);
    T  = time-to-target, the clock at S, interpolated between steps (:func:`rlbatch.analysis.throughput.time_at`;
         wall-clock, or process CPU time on a shared CPU, :func:`rlbatch.analysis.throughput.clock_basis`).
Per configuration (its seeds; :func:`estimate_configuration`), **seed aggregation = the mean of the per-seed values**
(not the crossing of the seed-averaged curve):
    S = mean_i S_i,   T = mean_i T_i,   throughput X = S / T  (retained samples per second up to the target; over
    the whole run when the target is not reached).
Relative to a reference configuration (Li et al. 2026, end-to-end accounting, Table "J = 77%"):
    rN                  = S / S_ref                    (sample penalty; samples-to-target ratio)
    relative_throughput = X / X_ref
    relative_time       = T / T_ref = rN / relative_throughput
and a configuration is faster than the reference iff ``relative_throughput > rN``. A configuration some of whose
seeds never reached the target has no rN and no time-to-target (censored), only lower bounds.

Intervals: per configuration, Student's t interval of the seed mean on the log scale for each of S, T and X, the
seed spread moderated across the comparison (:func:`comparison_spread`); the verdicts, their simultaneous intervals
and the "may be fastest" set: :func:`rlbatch.analysis.decision.decide`; their words:
:mod:`rlbatch.analysis.headline`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.decision import ALIGNED, alignment, decide, verdict_label
from rlbatch.analysis.estimate import (CONF, N_BOOT, comparison_spread, estimate_configuration, geometric_mean,
                                       reference_shape_of, retained_share, seed_estimate, still_running, timing_of)
from rlbatch.analysis.headline import AGGREGATION, headline, headline_markdown
from rlbatch.analysis.interval import bootstrap_interval
from rlbatch.analysis.lr_answer import lr_answer
from rlbatch.analysis.seed_effect import seed_effect
from rlbatch.analysis.throughput import clock_basis, throughput_to_target
from rlbatch.errors import UserError
from rlbatch.runstore import Run
from rlbatch.scaling import LRRetuning, detect_lr_rule

#: A configuration estimator with :func:`estimate_configuration`'s signature (a study's memoised one, or that).
Estimator = Callable[..., dict]

#: Keys of one accounting row in JSON output (``rlbatch account --format json``).
JSON_KEYS = ("run", "batch_size", "samples_to_target", "rN", "relative_throughput", "relative_time",
             "faster_than_reference", "verdict")



# ----------------------------------------------------------------------------------------- the formulas, once each
def sample_ratio(s: float, s_ref: float) -> float:
    """rN = S / S_ref: the samples-to-target ratio (sample penalty) against the reference (Li et al. 2026)."""
    return s / s_ref


def relative_throughput(x: float, x_ref: float) -> float:
    """The throughput gain X / X_ref against the reference (both retained samples per second)."""
    return x / x_ref


def relative_time(t: float, t_ref: float) -> float:
    """Measured relative time-to-target T / T_ref (= rN / relative throughput, Li et al. 2026)."""
    return t / t_ref


def predicted_relative_time(rn: float, gain: float) -> float:
    """Predicted relative time-to-target rN / throughput gain (Li et al. 2026: a configuration is faster than the
    reference iff its throughput gain exceeds rN), for a candidate whose time-to-target is not measured."""
    return rn / gain


def ratios(s: float | None, t: float | None, s_ref: float, t_ref: float) -> dict[str, float | None]:
    """:func:`sample_ratio`, :func:`relative_throughput` of :func:`throughput_to_target` and :func:`relative_time`
    (Li et al. 2026, end-to-end accounting). ``s``, ``s_ref``: samples-to-target (responses); ``t``, ``t_ref``:
    time-to-target (seconds). None where ``s`` or ``t`` is unknown; ``relative_throughput`` None when ``s`` or
    ``t`` is 0 (a target met at the first evaluation)."""
    out: dict[str, float | None] = {"rN": None, "relative_throughput": None, "relative_time": None}
    if s is not None:
        out["rN"] = sample_ratio(s, s_ref)
    if s is not None and t is not None:
        out["relative_time"] = relative_time(t, t_ref)
        if s > 0 and t > 0:
            out["relative_throughput"] = relative_throughput(throughput_to_target(s, t),
                                                             throughput_to_target(s_ref, t_ref))
    return out



def compare(est: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """rN, relative throughput and relative time of ``est`` against ``ref`` (both :func:`estimate_configuration`),
    each with its 95% interval from the two configurations' bootstrap replicates taken independently
    (``rN_ci``, ``relative_throughput_ci``, ``relative_time_ci``; the reference against itself: exactly 1)."""
    x, xr = est["throughput_samples_per_s"], ref["throughput_samples_per_s"]
    out: dict[str, Any] = {"rN": None, "rN_ci": None, "relative_throughput": None, "relative_throughput_ci": None,
                           "relative_time": None, "relative_time_ci": None}
    if est is ref:
        return {k: ([1.0, 1.0] if k.endswith("_ci") else 1.0) for k in out}
    s_ref, t_ref = ref["samples_to_target"], ref["time_to_target_s"]
    if s_ref is not None and s_ref > 0:
        r = ratios(est["samples_to_target"], est["time_to_target_s"], s_ref, t_ref if t_ref else float("nan"))
        out["rN"] = r["rN"]
        if t_ref:
            out["relative_time"] = r["relative_time"]
    if x is not None and xr:
        out["relative_throughput"] = relative_throughput(x, xr)
    a, b = est.get("_replicates") or {}, ref.get("_replicates") or {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for key, rk, ratio in (("rN", "S", sample_ratio), ("relative_time", "T", relative_time),
                               ("relative_throughput", "X", relative_throughput)):
            if out[key] is not None and a.get(rk) is not None and b.get(rk) is not None:
                out[f"{key}_ci"] = bootstrap_interval(ratio(a[rk], b[rk]))
    return out



#: Default tolerance of the aligned family: rN <= 1 + TOLERANCE (the plan's and the report's ``--tolerance``).
TOLERANCE = 0.1


def aligned(rn: float | None, on_rule: bool, tol: float = TOLERANCE,
            interval: Sequence[float | None] | None = None) -> bool:
    """Whether one batch size belongs to the aligned family (DESIGN.md; Li et al. 2026, "align"): on the
    reference's LR rule and rN within ``tol`` of the reference's. With ``interval`` (rN's 90% interval from the
    accounting, or a fit's or the noise model's 95% one), by the equivalence test of
    :func:`rlbatch.analysis.decision.alignment` (the interval inside [1 / (1 + tol), 1 + tol]: the report's aligned
    family, never a point estimate); without one (an accounting table of point values), ``rn <= 1 + tol``. False
    when rN is unknown."""
    if not on_rule or rn is None:
        return False
    if interval is not None:  # an interval open at either end shows nothing within the tolerance
        return (interval[0] is not None and interval[1] is not None
                and alignment((float(interval[0]), float(interval[1])), tol) == ALIGNED)
    return rn <= 1.0 + tol


def aligned_span(points: Sequence[tuple[int, bool]], reference_batch: int) -> list[int]:
    """The aligned family's members: the contiguous run of batch sizes around ``reference_batch`` whose
    :func:`aligned` flag is True (the reference always belongs). ``points``: (B, aligned) of the reference's LR
    rule, one per batch size, the reference's included. Returns the members' B, ascending."""
    flags = dict(points)
    flags[reference_batch] = True
    bs = sorted(flags)
    lo = hi = bs.index(reference_batch)
    while lo > 0 and flags[bs[lo - 1]]:
        lo -= 1
    while hi < len(bs) - 1 and flags[bs[hi + 1]]:
        hi += 1
    return bs[lo:hi + 1]


def comparison_groups(runs: Sequence[Run]) -> dict[tuple, list[Run]]:
    """Runs split by (model, task, algorithm): only runs within one group are compared on the batch axis
    (missing values match anything of the group they fall in only when the group has no other value)."""
    out: dict[tuple, list[Run]] = {}
    for r in runs:
        out.setdefault((r.meta.model, r.meta.task, r.meta.algorithm), []).append(r)
    return out


def _pick_reference(ests: dict[str, dict[str, Any]], groups: dict[str, list[Run]], reference: Any) -> str | None:
    """A configuration name for ``reference`` (a configuration name, a run id, or a batch size ``B64`` / ``64``);
    default: the smallest batch that reached the target after training began and has a time-to-target, a
    configuration on an LR rule before a fixed-LR one at equal B."""
    if reference is not None:
        key = str(reference)
        for name, rs in groups.items():
            if key == name or key in [r.run_id for r in rs]:
                return name
        if re.fullmatch(r"[Bb]?\d+", key):
            b = int(key.lstrip("Bb"))
            hits = sorted((e["lr_rule"] == "none", n) for n, e in ests.items() if e["batch_size"] == b)
            if hits:
                return hits[0][1]
        raise UserError(f"unknown reference {reference!r}; configurations are: {', '.join(groups)} (or give a run "
                        "id or a batch size, e.g. B64)", field="reference")
    return default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items()
                             if e["reached"] and e["samples_to_target"] and e["time_to_target_s"])


def default_reference(configs: Iterable[tuple[str, int | None, str | None]]) -> str | None:
    """The default reference among eligible ``configs`` (name, batch size B, declared LR rule): the smallest batch,
    one on a scaling rule before one whose rule is ``none`` or ``linear`` at equal B (a sweep's fixed-LR control),
    then by name. The one default of the accounting, the plan (an accounting table, short probes) and the
    asynchronous section; callers pass only the configurations that qualify (e.g. reached the target with a
    clock). None when there is none."""
    ranked = sorted((b or float("inf"), rule in ("none", "linear"), str(name)) for name, b, rule in configs)
    return ranked[0][2] if ranked else None


def account_runs(runs: Sequence[Run], target: float, metric: str = "eval/score", reference: Any = None, *,
                 ema: float | None = None, sustained: bool = False, clock: str = "auto",
                 n_boot: int = N_BOOT, allow_unreached_reference: bool = False,
                 estimate: Estimator | None = None, faster_tail: float | None = None,
                 called: dict[str, int] | None = None, sequential_stop: str | None = None) -> dict[str, Any]:
    """The accounting of ``runs`` at ``target``: seeds grouped into configurations
    (:func:`rlbatch.analysis.curves.group_seeds`), each estimated (:func:`estimate_configuration`) and compared
    with the reference (:func:`compare`), the verdict per configuration (:func:`verdict_label`) and the
    recommendation paragraph (:func:`recommendation`).

    Returns ``{"rows": [...] (one per configuration, keys :data:`ROW_KEYS`), "reference": name | None,
    "recommendation": str (Markdown), "best": name | None, "within_noise": [names], "clock": "wall" | "cpu",
    "estimates": {name: estimate}}``. Raises :class:`UserError` for an unknown reference, or one that did not
    reach the target after training began (its samples-to-target is 0 or None); with
    ``allow_unreached_reference`` (the plan's short probes) a reference that has not reached the target is kept and
    its comparisons are None. ``estimate``: where the configurations' estimates come from (a
    :class:`rlbatch.analysis.study.Study`'s :meth:`~rlbatch.analysis.study.Study.estimate`, which computes each
    configuration's bootstrap once per study); default :func:`estimate_configuration`. ``faster_tail``: a
    group-sequential look's per-comparison tail for "faster" and ``called`` a sequential study's claims
    (:func:`rlbatch.analysis.decision.decide`), ``sequential_stop`` why it stopped (the headline says it)."""
    runs = list(runs)
    basis = clock_basis(runs, clock)
    groups = group_seeds(runs)
    est_of = estimate or estimate_configuration
    spread = comparison_spread(groups, target, metric, ema=ema, sustained=sustained, clock=basis)
    ests = {name: est_of(rs, target, metric, ema=ema, sustained=sustained, clock=basis, n_boot=n_boot, name=name,
                         spread=spread)
            for name, rs in groups.items()}
    ref = _pick_reference(ests, groups, reference)
    if ref is None and allow_unreached_reference:  # short probes: the smallest batch on an LR rule
        ref = default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items())
    if ref is not None and not (allow_unreached_reference and not ests[ref]["reached"]):
        e = ests[ref]
        if not e["reached"]:
            raise UserError(f"reference {ref!r} never reached the target ({e['n_reached']}/{e['n_seeds']} seeds); "
                            "choose another --reference", field="reference")
        if not e["samples_to_target"]:
            raise UserError(f"reference {ref!r} is at the target at its first evaluation (0 samples): nothing to "
                            "compare against; choose a higher --target or another --reference", field="reference")
        if not e["time_to_target_s"] and not allow_unreached_reference:
            raise UserError(f"reference {ref!r} has no clock (time/wall_s, time/step_s or time/cpu_s) to time it",
                            field="reference")
    ref_ok = ref is not None and ests[ref]["reached"] and bool(ests[ref]["samples_to_target"])
    if ref_ok and any(e["at_most"] for n, e in ests.items() if n != ref):
        # seeds at the target at their first evaluation after 0: bounded by their later evaluations against the
        # reference's shape where that is tighter (statistics review 2, N1; :func:`rlbatch.analysis.shape.
        # bound_from_shape`), one estimate per configuration wherever the study gives it
        shape = reference_shape_of(groups[ref], target, metric) if not ema else None
        if shape is not None:
            for name, rs in groups.items():
                if name != ref and ests[name]["at_most"]:
                    ests[name] = est_of(rs, target, metric, ema=ema, sustained=sustained, clock=basis, n_boot=n_boot,
                                        name=name, spread=spread, shape=shape)
    dec = decide(ests, ref if ref_ok else None, faster_tail=faster_tail, called=called)
    rows = []
    for name, e in ests.items():
        v = dec.verdicts[name]
        row = {k: e[k] for k in ("batch_size", "prompts_per_step", "group_size", "lr", "lr_rule", "n_seeds",
                                 "n_reached", "samples_to_target", "samples_to_target_ci",
                                 "samples_to_target_per_seed", "time_to_target_s", "time_to_target_ci",
                                 "throughput_samples_per_s", "throughput_ci", "throughput_window", "best_score",
                                 "spread", "spread_df", "spread_sd")}
        row = {"run": name, **row, **v.rN.flat("rN"), **v.relative_throughput.flat("relative_throughput"),
               **v.relative_time.flat("relative_time"), "runs": e["runs"], "reached": e["reached"],
               "stopped": e.get("stopped"), "unfinished": e.get("unfinished") or [],
               "rN_at_least": v.rN_at_least.value if v.rN_at_least else None,
               "rN_at_least_lo": v.rN_at_least.lo if v.rN_at_least else None,
               "relative_time_at_least": v.relative_time_at_least.value if v.relative_time_at_least else None,
               "relative_time_at_least_lo": v.relative_time_at_least.lo if v.relative_time_at_least else None,
               "rN_at_most": v.rN_at_most.value if v.rN_at_most else None,
               "rN_at_most_hi": v.rN_at_most.hi if v.rN_at_most else None,
               "relative_time_at_most": v.relative_time_at_most.value if v.relative_time_at_most else None,
               "relative_time_at_most_hi": v.relative_time_at_most.hi if v.relative_time_at_most else None,
               "verdict": v.label, "why": v.why, "faster_than_reference": v.faster,
               "may_be_fastest": name in dec.may_be_fastest, "alignment": v.alignment,
               "rN_test": list(v.rN_test) if v.rN_test else None, "at_most": e.get("at_most") or [],
               "samples_to_target_at_most": e.get("samples_to_target_at_most"),
               "at_most_by_shape": e.get("at_most_by_shape") or 0}
        if dec.reference is None and ref is not None:  # short probes: the reference has not reached the target
            c = compare(e, ests[ref]) if e is ests[ref] else compare(e, {**e, "samples_to_target": None,
                                                                         "throughput_samples_per_s": None,
                                                                         "_replicates": {}})
            row.update(c)
            row["verdict"] = verdict_label(None, None, is_reference=name == ref, reached=e["reached"],
                                           stopped=bool(e.get("stopped")), unfinished=bool(e.get("unfinished")))
        rows.append(row)
    h = headline(rows, ref if ref_ok else None, metric, target, runs, pick=dec.pick,
                 may_be_fastest=dec.may_be_fastest, beats_reference=dec.beats_reference,
                 would_decide=dec.would_decide, no_spread=dec.no_spread, sequential_stop=sequential_stop)
    h["levels"] = dec.levels
    h["comparisons"] = dec.comparisons
    if ref_ok and ests[ref]["n_seeds"] and ref != _smallest(ests):
        small = _smallest(ests)
        e = ests[small]
        h["bullets"].append(f"The reference is {ref}, not the smallest batch {small}: {e['n_reached']} of "
                            f"{e['n_seeds']} of its seeds reached the target (choose one with --reference).")
    retune = lr_retuning(rows, ref)
    if retune.rule is not None:
        h["lr_note"] = retune.sentence()
        apart = lr_rule_apart(rows, ref)
        if apart:
            words = {"none": "fixed LR", "sqrt": "square-root rule", "linear": "linear rule"}
            named = ", ".join(f"{r['run']} (B={r['batch_size']}, {words.get(r['lr_rule'], r['lr_rule'])})"
                              for r in apart)
            h["lr_note"] += (f" Not on it: {named}, whose rN measures its learning-rate setting as well as the batch"
                             + (" (the fixed-LR control)." if all(r["lr_rule"] == "none" for r in apart) else "."))
    ans = lr_answer(rows, ests, _declared_rule(rows, ref), compare) if ref_ok else None
    if ans is not None:  # the LR question in one line (researcher finding 9), before what would decide
        h["lr_answer"] = ans
        wd = h.get("would_decide_text")
        at = h["lines"].index(wd) if wd in h["lines"] else len(h["lines"])
        h["lines"].insert(at, ans["sentence"])
    shares = {name: clipped_share(rs) for name, rs in groups.items()}
    for row in rows:
        row["clipped_share"] = shares.get(row["run"])
    known = {n: v for n, v in shares.items() if v is not None}
    if len(known) >= 2 and max(known.values()) - min(known.values()) > 0.1:
        order = sorted(known, key=lambda n: (ests[n]["lr_rule"] == "none", ests[n]["batch_size"] or 0, n))
        h["clip_note"] = ("Not only the learning rate differs along the ladder: gradient clipping (max_grad_norm) "
                          "clipped these shares of the steps: " + ", ".join(
                              f"B={ests[n]['batch_size']}{' (fixed lr)' if ests[n]['lr_rule'] == 'none' else ''} "
                              f"{known[n]:.0%}" for n in order)
                          + "; where most steps are clipped Adam takes clipped gradients, elsewhere plain ones "
                          "(clipping re-weights steps), a difference each batch's rN includes. What to conclude: "
                          "where nearly every step is clipped, max_grad_norm rather than the LR sets the step size, "
                          "so the LR rule matters less there; compare rN between batches with similar clipped "
                          "shares, or rerun with a larger max_grad_norm to see the rule alone.")
        h["bullets"].append(h["clip_note"])
    fx = seed_effect({name: {r.meta.seed: s for r, s in zip(rs, ests[name]["samples_to_target_per_seed"])
                             if r.meta.seed is not None} for name, rs in groups.items()})
    if fx is not None:  # the same seed ids at several batch sizes: how much the seed itself explains (issue 52)
        h["seed_effect"] = fx.to_json()
        h["bullets"].append(fx.sentence())
    text, best, tied = headline_markdown(h), h["pick"], h["within_noise"]
    return {"rows": rows, "reference": ref, "recommendation": text, "headline": h, "best": best,
            "within_noise": tied, "clock": basis, "estimates": ests, "lr_retuning": retuning_json(retune),
            "decision": dec}


def clipped_share(runs: Sequence[Run]) -> float | None:
    """The share of optimizer steps whose gradient was clipped (``grad_clipped``, logged by the trainer per step)
    over a configuration's seeds; None when no run logs it."""
    v = [pd.to_numeric(r.metrics["grad_clipped"], errors="coerce").dropna().astype(float)
         for r in runs if isinstance(r.metrics, pd.DataFrame) and "grad_clipped" in r.metrics.columns]
    v = [x for x in v if len(x)]
    return float(pd.concat(v).mean()) if v else None


def _smallest(ests: dict[str, dict[str, Any]]) -> str | None:
    """The configuration the default reference would be if every seed reached the target: the smallest batch on an
    LR rule (:func:`default_reference` over all)."""
    return default_reference((n, e["batch_size"], e["lr_rule"]) for n, e in ests.items())


def lr_retuning(rows: Sequence[dict[str, Any]], ref: str | None = None) -> LRRetuning:
    """How the compared configurations set the learning rate across batch sizes (:func:`rlbatch.scaling.
    detect_lr_rule` on each row's ``batch_size``, the update batch B of the LR rule, and peak ``lr``). Rows that
    declare an LR rule (``lr_rule``: runs of an rlbatch sweep, whose fixed-LR control sits beside its ladder) are
    judged within the reference's declared rule; rows from logs declare none and are judged together."""
    key = _declared_rule(rows, ref)
    return detect_lr_rule([(r["batch_size"], r["lr"]) for r in rows if r.get("lr_rule") == key])


def lr_rule_apart(rows: Sequence[dict[str, Any]], ref: str | None = None) -> list[dict[str, Any]]:
    """The rows that declare another LR rule than the one :func:`lr_retuning` judged (a sweep's fixed-LR control,
    ``lr_rule`` ``none`` beside a ``sqrt`` ladder); [] for logs, which declare none."""
    key = _declared_rule(rows, ref)
    return [r for r in rows if r.get("lr_rule") is not None and r.get("lr_rule") != key]


def _declared_rule(rows: Sequence[dict[str, Any]], ref: str | None) -> str | None:
    """The LR rule the comparison is judged within: the reference's declared ``lr_rule``, else the most common."""
    declared = [r.get("lr_rule") for r in rows]
    by = {r["run"]: r for r in rows}
    return by[ref].get("lr_rule") if ref in by else max(set(declared), key=declared.count, default=None)


def retuning_json(r: LRRetuning) -> dict[str, Any]:
    """:class:`rlbatch.scaling.LRRetuning` as the JSON of ``rlbatch analyze`` (``lr_retuning``): its fields, the
    points as ``[[B, lr], ...]`` and ``sentence`` (:meth:`LRRetuning.sentence`)."""
    d = dataclasses.asdict(r)
    d["points"] = [list(p) for p in r.points]
    d["sentence"] = r.sentence()
    return d


#: Keys of one accounting row (``rlbatch analyze --format json`` ``accounting``; ``rlbatch plan`` candidates carry
#: the same values under the same names).
ROW_KEYS = ("run", "batch_size", "samples_to_target", "samples_to_target_ci", "time_to_target_s", "time_to_target_ci",
            "throughput_samples_per_s", "throughput_ci", "rN", "rN_ci", "relative_throughput",
            "relative_throughput_ci", "relative_time", "relative_time_ci", "faster_than_reference", "verdict",
            "reached")


def intervals_overlap(a: Sequence[float] | None, b: Sequence[float] | None, pa: float, pb: float) -> bool:
    """Whether intervals ``a`` and ``b`` (None: the point estimates ``pa`` / ``pb``; an end None is unbounded:
    open below or above) overlap: the within-noise test of the accounting's and the plan's headlines."""
    a = a or [pa, pa]
    b = b or [pb, pb]
    lo_a = a[0] if a[0] is not None else float("-inf")  # an open lower end (a ratio to an open reference)
    lo_b = b[0] if b[0] is not None else float("-inf")
    hi_a = a[1] if a[1] is not None else float("inf")
    hi_b = b[1] if b[1] is not None else float("inf")
    return lo_a <= hi_b and lo_b <= hi_a


def check_target(target: float | None) -> None:
    """Refuse a target that no score can be compared with (NaN or infinite): a :class:`UserError` naming
    ``--target``. None (no target) passes."""
    if target is not None and not math.isfinite(target):
        raise UserError(f"--target must be a finite score, got {target!r}", field="target")


def check_target_below_start(runs: Sequence[Run], target: float | None, metric: str = "eval/score") -> None:
    """Refuse a ``target`` at or below every run's first evaluation of ``metric`` (the one at step 0 where logged,
    else the first after it): every run starts at the target, so samples-to-target is 0 or only bounded above by
    the first evaluation, and no batch size can be compared (researcher tryout, finding 1: ``--target -3`` or a
    target below every start gave "No run reached"). A :class:`UserError` naming ``--target``, with the lowest
    first evaluation and the best score; runs without an evaluation of ``metric`` are left to the accounting."""
    if target is None:
        return
    firsts = []
    for r in runs:
        ev = r.evals
        if ev is None or metric not in ev or ev[metric].notna().sum() == 0:
            continue
        e = ev.dropna(subset=[metric]).sort_values("samples/retained" if "samples/retained" in ev else "step")
        firsts.append((float(e[metric].iloc[0]), float(e[metric].max()), r.run_id))
    if not firsts or any(f < target for f, _, _ in firsts):
        return
    low, _, run = min(firsts)
    best = max(b for _, b, _ in firsts)
    raise UserError(f"--target {target:g} is at or below every run's first evaluation of {metric} (the lowest: "
                    f"{low:.4g}, {run}): every run starts at the target, so nothing can be compared; choose a target "
                    f"between {low:.4g} and the best score {best:.4g}", field="target")


def summary_of(acc: dict[str, Any]) -> dict[str, Any]:
    """One comparison group's :func:`account_runs` result in :func:`accounting_summary`'s form."""
    return {"accounting": acc["rows"], "reference": acc["reference"], "recommendation": acc["recommendation"],
            "headline": acc["headline"], "within_noise": acc["within_noise"], "clock": acc["clock"],
            "aggregation": AGGREGATION, "lr_retuning": acc["lr_retuning"]}


def accounting_summary(runs: Sequence[Run], target: float, metric: str = "eval/score", reference: Any = None, *,
                       ema: float | None = None, sustained: bool = False, clock: str = "auto",
                       n_boot: int = N_BOOT, estimate: Estimator | None = None) -> dict[str, Any]:
    """The accounting as ``rlbatch analyze`` and the report give it: :func:`account_runs` per comparison group
    (:func:`comparison_groups`: runs of different models, tasks or algorithms are never compared with each other).

    Returns ``{"accounting": rows (each with ``comparison`` when there are several groups), "reference",
    "recommendation", "clock", "aggregation", "comparisons": [{model, task, algorithm, reference, recommendation,
    runs}] (several groups only)}``. Raises :class:`UserError` as :func:`account_runs`."""
    groups = comparison_groups(runs)
    if len(groups) == 1:
        return summary_of(account_runs(runs, target, metric, reference, ema=ema, sustained=sustained, clock=clock,
                                       n_boot=n_boot, estimate=estimate))

    rows, comps, texts, clocks = [], [], [], set()
    key = None if reference is None else str(reference)
    owner = None  # the group a run or configuration reference belongs to; a batch size (B64) applies to every group
    if key is not None and not re.fullmatch(r"[Bb]?\d+", key):
        owner = next((g for g, rs in groups.items() if key in {r.run_id for r in rs} | set(group_seeds(rs))), None)
        if owner is None:
            raise UserError(f"unknown reference {reference!r}; runs are: {', '.join(r.run_id for r in runs)}",
                            field="reference")
    for (model, task, alg), rs in groups.items():
        label = " / ".join(str(v) for v in (model, task, alg) if v is not None) or "unlabelled"
        mine = key is not None and (owner is None or owner == (model, task, alg))
        try:
            acc = account_runs(rs, target, metric, reference if mine else None, ema=ema, sustained=sustained,
                               clock=clock, n_boot=n_boot, estimate=estimate)
        except UserError as err:
            if owner == (model, task, alg):
                raise
            acc = {"rows": [], "reference": None, "recommendation": f"not accounted: {err}", "clock": None}
        if acc["clock"]:
            clocks.add(acc["clock"])
        rows += [{**r, "comparison": label} for r in acc["rows"]]
        comps.append({"model": model, "task": task, "algorithm": alg, "runs": [r.run_id for r in rs],
                      "reference": acc["reference"], "recommendation": acc["recommendation"],
                      "lr_retuning": acc.get("lr_retuning")})
        texts.append(f"**{label}** — {acc['recommendation']}")
    head = (f"These runs are of {len(groups)} different model / task / algorithm combinations, so they are not "
            "compared with each other (a batch-size comparison holds only within one): each is accounted "
            "separately. ")
    return {"accounting": rows, "reference": None, "recommendation": head + " ".join(texts), "within_noise": [],
            "headline": {"pick": None, "within_noise": [], "lines": [head.strip()], "bullets": texts},
            "clock": clocks.pop() if len(clocks) == 1 else "mixed", "aggregation": AGGREGATION, "comparisons": comps}


#: Re-exported for their callers: the estimation lives in :mod:`rlbatch.analysis.estimate`
__all__ = ["CONF", "N_BOOT", "Estimator", "JSON_KEYS", "ROW_KEYS", "TOLERANCE", "account_runs", "accounting_summary",
           "aligned", "aligned_span", "check_target", "check_target_below_start", "clipped_share", "compare", "comparison_groups",
           "comparison_spread", "default_reference", "estimate_configuration", "geometric_mean", "intervals_overlap",
           "lr_retuning", "lr_rule_apart", "predicted_relative_time", "ratios", "relative_throughput", "relative_time",
           "retained_share", "retuning_json", "sample_ratio", "seed_estimate", "still_running", "summary_of",
           "timing_of"]
