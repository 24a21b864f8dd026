"""The decision: which configuration reaches the target soonest, with error rates that hold (issue 43).

Input: each configuration's replicates (:func:`rlbatch.analysis.accounting.estimate_configuration`: samples-,
time-to-target and throughput drawn from Student's t of the seed mean on the log scale, the seed spread moderated
across the comparison or taken from the ladder) and the reference. Output: one typed :class:`Decision`.

- **Simultaneous intervals.** rN, relative throughput and relative time of every configuration against the
  reference are given at 95% *simultaneous* over the comparison (all of them hold together in 95% of studies):
  each interval is the replicates' percentile interval at the level a* that makes the replicates of all
  comparisons fall inside their intervals together 95% of the time (the min-p adjustment of Westfall & Young 1993
  on the replicates; the shared reference makes it tighter than Bonferroni). So the verdicts across a ladder of
  nine configurations err together at most 5% of the time, not 5% each, and the pick's own interval, which is
  one of them, stays valid after it was selected as the smallest (no winner's curse in its interval).
- **Verdict** (:func:`verdict_label`): ``faster`` / ``slower`` when the simultaneous interval of the relative
  time lies wholly below / above 1, ``within noise`` when it contains 1. The relative time's interval is the
  decision's own: its 5% of error is split between the two claims, :data:`ALPHA_FASTER` (4%) below its upper end and
  :data:`ALPHA_SLOWER` (1%) above its lower end, each one-sided and simultaneous over the ladder (statistics review 2,
  N5: a "faster" claim is what a user acts on, so it gets most of the error; a two-sided 2.5% per direction cost a
  2x-faster batch power 0.575 -> 0.70 at 3 seeds). rN and the relative throughput keep 95% two-sided simultaneous
  intervals, and rN is ``penalised`` only when its simultaneous lower end is above 1 (N4). A configuration some of whose seeds never
  reached the target (censored) is ``slower`` only when even its lower bound (each such seed took at least its
  whole run) is above 1 at the simultaneous level, else ``undetermined``. Without a seed-to-seed spread (one seed
  and too few configurations to learn it from) there is no interval and the verdict is ``undetermined``.
- **May be fastest** (multiple comparisons with the best, Hsu 1984): a configuration is in the set unless another
  one is faster than it beyond noise, each configuration against all the others at 95% simultaneous (one-sided,
  the min-p level over the others), so the truly fastest configuration is in the set in at least 95% of studies.
  A configuration known only by bounds stays in the set unless even its lower bound is beaten (N3): a censored or
  stopped one (some seed ran out before the target: time-to-target at least its run), or one that reached the target
  before its first evaluation after 0 (at most that evaluation: never beaten, and it beats others by its upper
  bound, N1). The reference is in the set exactly when no configuration is ``faster`` (one test, not two).
  The pick (a stated rule, N6): among the configurations shown ``faster``, the one whose relative time has the
  smallest upper end (the safe pick: the smallest point estimate favours the least-known configuration), and it beats
  the reference; when none is faster, the set's member with the smallest estimated time (the best estimate, which
  the headline calls optimistic: the smallest of several estimates), which does not; one known only by an upper
  bound (N1) counts at that bound, since its true time is no larger.
- **Aligned** (equivalence, two one-sided tests at 5%, Schuirmann 1987): rN's 90% interval lies inside
  [1 / (1 + tol), 1 + tol]: ``aligned`` (a conjunction of equivalences needs no adjustment); its 95% simultaneous
  interval lies wholly above 1: ``penalised`` (N4: a scan up the ladder for the first penalised rung is a multiple
  comparison); the 90% interval wholly below 1 (and not aligned): ``below 1``; else ``not distinguishable from 1``
  (the interval is too wide to say either).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from rlbatch.analysis.results import Estimate, at_most_only

#: level of every interval of the decision (simultaneous over the comparison)
LEVEL = 0.95
#: level of the equivalence test of "aligned" (two one-sided tests at 5%: the 90% interval)
EQUIVALENCE_LEVEL = 0.90
#: aligned-family tolerance: rN within [1 / (1 + TOLERANCE), 1 + TOLERANCE]
TOLERANCE = 0.1
#: the relative time's error split: false "faster" claims (below the upper end) and false "slower" claims (above the
#: lower end), together 1 - LEVEL, each simultaneous over the comparison
ALPHA_FASTER, ALPHA_SLOWER = 0.04, 0.01

REFERENCE, FASTER, SLOWER, WITHIN_NOISE, UNDETERMINED = "reference", "faster", "slower", "within noise", "undetermined"
STOPPED, UNFINISHED, UNKNOWN = "stopped early", "unfinished", "unknown"
ALIGNED, NOT_DISTINGUISHABLE, PENALISED, BELOW = "aligned", "not distinguishable from 1", "penalised", "below 1"


@dataclass(frozen=True)
class Verdict:
    """One configuration's verdict against the reference. ``rN``, ``relative_throughput``, ``relative_time``:
    simultaneous 95% intervals (:data:`LEVEL`); for a censored configuration ``relative_time_at_least`` and
    ``rN_at_least`` are lower bounds (``value``: the bound's point; ``lo``: its lower end); for one that reached the
    target before its first evaluation after 0, ``relative_time_at_most`` and ``rN_at_most`` are upper bounds
    (``hi``: the upper end). ``why``: the reason
    in words (``interval below 1``, ``2 of 3 seeds reached the target``, ...). ``alignment``: the equivalence
    grade of rN (:data:`ALIGNED`, :data:`NOT_DISTINGUISHABLE`, :data:`PENALISED`) with its 90% interval
    ``rN_test``."""

    config: str
    batch_size: int | None
    label: str
    why: str
    rN: Estimate = field(default_factory=lambda: Estimate(None))
    relative_throughput: Estimate = field(default_factory=lambda: Estimate(None))
    relative_time: Estimate = field(default_factory=lambda: Estimate(None))
    rN_at_least: Estimate | None = None
    relative_time_at_least: Estimate | None = None
    rN_at_most: Estimate | None = None
    relative_time_at_most: Estimate | None = None
    alignment: str | None = None
    rN_test: tuple[float, float] | None = None
    n_seeds: int = 0
    n_reached: int = 0

    @property
    def faster(self) -> bool:
        return self.label == FASTER


@dataclass(frozen=True)
class Decision:
    """The decision over one comparison: ``verdicts`` (one per configuration, the reference's included),
    ``may_be_fastest`` (the set that may hold the fastest at 95%), ``pick`` (its member with the smallest estimated
    time-to-target; None when nothing has a time), ``beats_reference`` (the pick's simultaneous interval lies
    below 1), ``levels`` (per quantity, the marginal level of each simultaneous interval, e.g. 0.993),
    ``comparisons`` (how many configurations were compared with the reference), ``would_decide`` (when nothing beats
    the reference: :class:`rlbatch.analysis.would_decide.SeedPlan` per contender) and ``no_spread`` (no configuration
    measured to the target has an interval: nothing to judge or plan by)."""

    reference: str | None
    verdicts: dict[str, Verdict]
    may_be_fastest: tuple[str, ...] = ()
    pick: str | None = None
    beats_reference: bool = False
    levels: dict[str, float] = field(default_factory=dict)
    comparisons: int = 0
    level: float = LEVEL
    would_decide: tuple = ()
    no_spread: bool = False


def _log(v: np.ndarray | None) -> np.ndarray | None:
    if v is None:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.asarray(v, float))
    return out if np.isfinite(out).all() else None


def _ranks(d: np.ndarray) -> np.ndarray:
    """(rank + 0.5) / n of each replicate among its own (ties broken by position)."""
    r = np.empty(len(d))
    r[np.argsort(d, kind="stable")] = np.arange(len(d))
    return (r + 0.5) / len(d)


def simultaneous_tail(diffs: Sequence[np.ndarray], level: float = LEVEL, two_sided: bool = True) -> float:
    """The tail probability a* of each interval so that the replicates of all ``diffs`` (each shape (n,), one
    comparison, replicate i of each drawn together) fall inside their [a*, 1 - a*] quantiles (``two_sided``) or
    above their a* quantile (one-sided) together with probability ``level``: the min-p adjustment (Westfall &
    Young 1993) on replicates. One comparison: (1 - level) / 2 (two-sided) or 1 - level."""
    if two_sided:
        lo, _ = split_tails(diffs, level, 0.5)
        return lo
    diffs = [d for d in diffs if d is not None and len(d)]
    if len(diffs) <= 1:
        return 1 - level
    u = np.array([_ranks(d) for d in diffs])
    return float(max(np.quantile(u.min(axis=0), 1 - level), 0.5 / u.shape[1]))


def split_tails(diffs: Sequence[np.ndarray], level: float = LEVEL,
                low_share: float = ALPHA_SLOWER / (ALPHA_FASTER + ALPHA_SLOWER)) -> tuple[float, float]:
    """The tails ``(a_low, a_high)`` of simultaneous intervals [q(a_low), q(1 - a_high)] over ``diffs`` (shape (n,)
    each, replicate i drawn together) whose error ``1 - level`` is split between the ends: ``low_share`` of it below
    the lower ends, the rest above the upper ends, so that all replicates fall inside together with probability
    ``level`` (min-p, Westfall & Young 1993, with weights: a* with a_low = low_share x a*, a_high = (1 - low_share)
    x a*). ``low_share`` 0.5: the symmetric two-sided interval. One comparison: exactly the split of 1 - level."""
    diffs = [d for d in diffs if d is not None and len(d)]
    a = 1 - level
    if len(diffs) > 1:
        u = np.array([_ranks(d) for d in diffs])
        m = np.minimum(u / low_share, (1 - u) / (1 - low_share)).min(axis=0)
        a = float(max(np.quantile(m, 1 - level), 0.5 / u.shape[1] / min(low_share, 1 - low_share)))
    return low_share * a, (1 - low_share) * a


def _exp(x: float) -> float:
    """exp of a log-scale interval end; +inf past floating point (a spread on ~1 df has replicates far out in its
    tails: that end is open)."""
    with np.errstate(over="ignore"):
        return float(np.exp(x))


def _interval(d: np.ndarray, a: float, a_high: float | None = None) -> tuple[float, float]:
    lo, hi = np.quantile(d, [a, 1 - (a if a_high is None else a_high)])
    return _exp(lo), _exp(hi)


def verdict_label(relative_time: float | None, ci: Sequence[float | None] | None, *, is_reference: bool = False,
                  reached: bool = True, stopped: bool = False, unfinished: bool = False) -> str:
    """The decision word for one configuration from its relative time-to-target and interval: ``reference``,
    ``stopped early``, ``unfinished``, ``undetermined`` (not reached, or no interval), ``unknown`` (no time),
    ``faster`` / ``slower`` (the interval wholly below / above 1) or ``within noise`` (it contains 1). A table
    without intervals (a CSV of point values) gets ``faster (point estimate)`` / ``slower (point estimate)``."""
    if is_reference:
        return REFERENCE
    if not reached and stopped:
        return STOPPED
    if not reached and unfinished:
        return UNFINISHED
    if not reached:
        return UNDETERMINED
    if relative_time is None:
        return UNKNOWN
    if ci is None or (ci[0] is None and ci[1] is None):
        return "faster (point estimate)" if relative_time < 1 else "slower (point estimate)"
    lo = -math.inf if ci[0] is None else ci[0]  # an end None is open (a prediction that may not reach the target)
    hi = math.inf if ci[1] is None else ci[1]
    if hi < 1:
        return FASTER
    if lo > 1:
        return SLOWER
    return WITHIN_NOISE


def alignment(rn_test: tuple[float, float] | None, tol: float = TOLERANCE,
              penalty: Sequence[float] | None = None) -> str | None:
    """The equivalence grade of rN from its 90% interval (module docstring); None without one. ``penalty``: the
    interval that grades ``penalised`` (its lower end above 1), the 95% simultaneous one in a comparison (N4);
    without it, the 90% interval itself."""
    if rn_test is None:
        return None
    lo, hi = rn_test
    if lo >= 1 / (1 + tol) and hi <= 1 + tol:
        return ALIGNED
    if (penalty[0] if penalty is not None else lo) > 1:
        return PENALISED
    if hi < 1:
        return BELOW
    return NOT_DISTINGUISHABLE


def decide(ests: Mapping[str, Mapping[str, Any]], reference: str | None, *, level: float = LEVEL,
           tolerance: float = TOLERANCE, faster_tail: float | None = None,
           called: Mapping[str, int] | None = None) -> Decision:
    """The :class:`Decision` over the configurations ``ests`` (name -> :func:`rlbatch.analysis.accounting.
    estimate_configuration`'s dict: point values, ``reached``, ``stopped``, ``unfinished``, ``n_seeds``,
    ``n_reached``, ``at_most`` and ``_replicates`` with ``S``, ``T``, ``X``, ``S_low``, ``T_low``, ``S_high``,
    ``T_high``, each shape (n,) or None) against ``reference`` (a name of ``ests``, reached, or None: every verdict
    ``undetermined``). ``faster_tail``: the per-comparison tail below the relative time's upper end, in place of the
    simultaneous :data:`ALPHA_FASTER` one (a group-sequential look's efficacy boundary,
    :mod:`rlbatch.analysis.sequential`). ``called``: a sequential study's claims ({name: the look it was called
    faster at}, :class:`rlbatch.study.sequential.SequentialResult`): these are ``faster`` (a claim at a look is final,
    even where the last look's interval, after the reference's later seeds, reaches 1) and only these: another
    configuration whose interval lies below 1 at ``faster_tail`` is ``within noise`` (the study dropped it before
    it could be called: the design spent no error on it); the pick is the safe pick among those called."""
    names = list(ests)
    if reference is None or reference not in ests:
        return Decision(None, {n: Verdict(n, ests[n].get("batch_size"), UNDETERMINED, "no reference",
                                          n_seeds=ests[n].get("n_seeds", 0), n_reached=ests[n].get("n_reached", 0))
                               for n in names}, level=level)
    ref = ests[reference]
    rr = ref.get("_replicates") or {}
    logs = {q: _log(rr.get(q)) for q in ("S", "T", "X")}
    measured = [n for n in names if n != reference and ests[n]["reached"]
                and ests[n].get("time_to_target_s") is not None]
    diffs: dict[str, dict[str, np.ndarray | None]] = {}
    for n in names:
        if n == reference:
            continue
        rep = ests[n].get("_replicates") or {}
        diffs[n] = {}
        for q in ("S", "T", "X", "S_high", "T_high"):
            key = q if n in measured or q in ("X", "S_high", "T_high") else q + "_low"
            a = _log(rep.get(key))
            base = logs[q[0]]
            diffs[n][q] = a - base if a is not None and base is not None and len(a) == len(base) else None
    # one simultaneous level per quantity over the comparisons that have replicates (bounds included); the relative
    # time's split between a false "faster" (upper end) and a false "slower" (lower end)
    tails = {q: split_tails([diffs[n][q] for n in diffs if diffs[n][q] is not None], level, 0.5) for q in "SX"}
    t_diffs = [diffs[n]["T"] if diffs[n]["T"] is not None else diffs[n]["T_high"] for n in diffs]
    tails["T"] = split_tails([d for d in t_diffs if d is not None], level)
    if faster_tail is not None:
        tails["T"] = (tails["T"][0], faster_tail)
    verdicts: dict[str, Verdict] = {
        reference: Verdict(reference, ref.get("batch_size"), REFERENCE, "the reference",
                           Estimate(1.0, 1.0, 1.0, level), Estimate(1.0, 1.0, 1.0, level),
                           Estimate(1.0, 1.0, 1.0, level), alignment=ALIGNED, rN_test=(1.0, 1.0),
                           n_seeds=ref.get("n_seeds", 0), n_reached=ref.get("n_reached", 0))}
    for n in names:
        if n == reference:
            continue
        e = ests[n]
        d = diffs[n]
        k, kr = e.get("n_seeds", 0), e.get("n_reached", 0)
        est = {q: _point(e, ref, q) for q in ("S", "T", "X")}
        iv = {q: (_interval(d[q], *tails[q]) if d[q] is not None else None) for q in ("S", "T", "X")}
        if n in measured:
            rn = Estimate.of(est["S"], iv["S"], level)
            gain = Estimate.of(est["X"], iv["X"], level)
            rel = Estimate.of(est["T"], iv["T"], level)
            test = _interval(d["S"], (1 - EQUIVALENCE_LEVEL) / 2) if d["S"] is not None else None
            label = verdict_label(rel.value, rel.ci)
            if label.endswith("(point estimate)"):
                label, why = UNDETERMINED, _no_spread(e)
            else:
                why = {FASTER: "its interval of the relative time lies below 1",
                       SLOWER: "its interval of the relative time lies above 1",
                       WITHIN_NOISE: "its interval of the relative time contains 1"}.get(label, "")
            verdicts[n] = Verdict(n, e.get("batch_size"), label, why, rn, gain, rel,
                                  alignment=alignment(test, tolerance, iv["S"]),
                                  rN_test=test, n_seeds=k, n_reached=kr)
            continue
        gain = Estimate.of(est["X"], iv["X"], level, source="measured: whole run") if est["X"] else Estimate(None)
        if at_most_only(e):
            # every seed reached the target, some before their first evaluation after 0: an upper bound (N1)
            high_rn = _upper(e, ref, "samples_to_target_at_most", "samples_to_target", d["S_high"], tails["S"][1])
            high_t = _upper(e, ref, "time_to_target_at_most", "time_to_target_s", d["T_high"], tails["T"][1])
            m = len(e.get("at_most") or [])
            by_shape = int(e.get("at_most_by_shape") or 0)
            words = (f"{m} of {k} seeds reached the target before their first evaluation after 0 (only an upper "
                     "bound on its samples-to-target" + (f"; for {by_shape} of them tightened by their later "
                                                         "evaluations against the reference's curve shape"
                                                         if by_shape else "") + ")")
            if high_t is not None and high_t.hi is not None and high_t.hi < 1:
                label, why = FASTER, words + "; even at that bound its relative time lies below 1"
            else:
                label, why = UNDETERMINED, words + ("; its upper bound on the relative time does not exclude 1"
                                                    if high_t is not None else "")
            verdicts[n] = Verdict(n, e.get("batch_size"), label, why, relative_throughput=gain,
                                  rN_at_most=high_rn, relative_time_at_most=high_t, n_seeds=k, n_reached=kr)
            continue
        # not measured to the target: stopped by the adaptive loop, unfinished, or censored (ran its budget)
        low_rn = _bound(e, ref, "samples_to_target_at_least", "samples_to_target", d["S"], tails["S"][0])
        low_t = _bound(e, ref, "time_to_target_at_least", "time_to_target_s", d["T"], tails["T"][0])
        if e.get("stopped"):
            label, why = STOPPED, "stopped by the adaptive sweep before every seed reached the target"
        elif e.get("unfinished"):
            label, why = UNFINISHED, "its trials had not finished"
        elif low_t is not None and low_t.lo is not None and low_t.lo > 1:
            label = SLOWER
            why = (f"{kr} of {k} seeds reached the target; even counting each other seed's whole run as its time, "
                   "its relative time lies above 1")
        else:
            label = UNDETERMINED
            why = (f"{kr} of {k} seeds reached the target" if k else "no seeds") + _ends_text(e, ests) + (
                "; its lower bound on the relative time does not exclude 1" if low_t is not None else "")
        verdicts[n] = Verdict(n, e.get("batch_size"), label, why, relative_throughput=gain, rN_at_least=low_rn,
                              relative_time_at_least=low_t, alignment=PENALISED if label == SLOWER else None,
                              n_seeds=k, n_reached=kr)
    if called is not None:  # a sequential study: its claims, and only those
        for n, v in list(verdicts.items()):
            if v.label == FASTER and n not in called:
                verdicts[n] = replace(v, label=WITHIN_NOISE, why=v.why + "; not called faster by the sequential "
                                      "study, which dropped it at an earlier look (no error was spent on it)")
            elif n in called and n != reference and v.label != FASTER:
                verdicts[n] = replace(v, label=FASTER, why=(
                    f"called faster at look {called[n] + 1} of the sequential study (a claim there is final); the "
                    "interval shown is the last look's, after the reference's later seeds"))
    best = may_be_fastest(ests, reference, names, level)
    faster = [n for n in names if verdicts[n].label == FASTER]
    if faster and reference in best:
        best.remove(reference)  # some configuration beats the reference: the same test, one answer (N5)
    elif not faster and reference not in best:
        best.insert(0, reference)
    if faster:
        pick = safe_pick([n for n in best if n in faster], verdicts)
    else:  # nothing shown faster: the best estimate among the set (the headline says it is optimistic); one known
        # only by its upper bound (every seed at the target by its first evaluation) counts at that bound: its true
        # time is no larger, so it is never passed over for a slower point estimate (a 3x-faster B = 2048 evaluated
        # every 4 steps and not yet shown faster was picked in none of 28 such studies, B = 16..256 instead)
        t = {n: ests[n].get("time_to_target_s") or (ests[n].get("time_to_target_at_most")
                                                    if at_most_only(ests[n]) else None) for n in best}
        timed = [n for n in best if t.get(n)]
        pick = min(timed, key=lambda n: (t[n], ests[n].get("batch_size") or 0)) if timed else None
    beats = pick is not None and pick != reference and verdicts[pick].label == FASTER
    plans: tuple = ()
    if not beats:
        from rlbatch.analysis.would_decide import plan_seeds

        plans = plan_seeds(ests, reference, best, len(diffs), ALPHA_FASTER, ALPHA_SLOWER)
    no_spread = bool(measured) and all(verdicts[n].relative_time.lo is None for n in measured)
    return Decision(reference, {n: verdicts[n] for n in names}, tuple(best), pick, beats,
                    {q: 1 - sum(t) for q, t in tails.items()}, len(diffs), level, plans, no_spread)


def _ends_text(e: Mapping[str, Any], ests: Mapping[str, Mapping[str, Any]]) -> str:
    """Where a configuration's unfinished seeds' logs end, and whether that is short of the others' runs (researcher
    tryout, finding 13: a crashed run read as one that "ran its budget"): short when below 3/4 of the longest run
    among the other configurations (retained samples)."""
    end = e.get("ends_at")
    if not end:
        return ""
    others = [o.get("longest_run") for o in ests.values() if o is not e and o.get("longest_run")]
    longest = max(others, default=None)
    short = longest is not None and end < 0.75 * longest
    return (f"; its log ends at {end:,.0f} retained samples" + (
        f", less than the others' (up to {longest:,.0f}): it may have crashed or been cut short" if short else ""))


def safe_pick(faster: Sequence[str], verdicts: Mapping[str, Verdict]) -> str | None:
    """The pick among the configurations shown ``faster`` (statistics review 2, N6): the one whose relative time's
    simultaneous interval has the smallest upper end (the upper bound's, for one that reached the target before its
    first evaluation), so a configuration is not picked for being the least known; ties by the point estimate, then
    the smaller batch. None when ``faster`` is empty."""
    def upper(n: str) -> float:
        v = verdicts[n]
        return v.relative_time.hi if v.relative_time.hi is not None else v.relative_time_at_most.hi

    return min(faster, key=lambda n: (upper(n), verdicts[n].relative_time.value or 0.0,
                                      verdicts[n].batch_size or 0), default=None)


def _point(e: Mapping[str, Any], ref: Mapping[str, Any], q: str) -> float | None:
    key = {"S": "samples_to_target", "T": "time_to_target_s", "X": "throughput_samples_per_s"}[q]
    a, b = e.get(key), ref.get(key)
    return a / b if a is not None and b else None


def _bound(e: Mapping[str, Any], ref: Mapping[str, Any], key: str, ref_key: str, d: np.ndarray | None,
           a: float) -> Estimate | None:
    v, r = e.get(key), ref.get(ref_key)
    if v is None or not r:
        return None
    lo = _exp(np.quantile(d, a)) if d is not None else None
    return Estimate(v / r, lo, None, LEVEL if lo is not None else None, "lower bound")


def _upper(e: Mapping[str, Any], ref: Mapping[str, Any], key: str, ref_key: str, d: np.ndarray | None,
           a: float) -> Estimate | None:
    v, r = e.get(key), ref.get(ref_key)
    if v is None or not r:
        return None
    hi = _exp(np.quantile(d, 1 - a)) if d is not None else None
    return Estimate(v / r, None, hi, LEVEL if hi is not None else None, "upper bound")


#: why a configuration measured to the target has no interval
NO_SPREAD = ("no seed-to-seed spread to judge it by: that needs three configurations of two or more seeds, or four "
             "batch sizes on one LR rule")


def _no_spread(e: Mapping[str, Any]) -> str:
    return NO_SPREAD


def may_be_fastest(ests: Mapping[str, Mapping[str, Any]], reference: str, names: Sequence[str],
                   level: float = LEVEL) -> list[str]:
    """The configurations among ``names`` that may be the fastest at ``level`` (Hsu 1984's multiple comparisons with
    the best on the replicates): c is out when, with the lower ends of its comparisons against every other
    configuration taken at one simultaneous one-sided level, some other configuration is faster than it beyond
    noise. Each comparison pits c's lower bound on log time-to-target against d's upper bound: a configuration
    measured to the target is both; a censored, stopped or unfinished one has only a lower bound (``T_low``: each
    unreached seed counted at its whole run; none: never beaten) and no upper bound (never beats another); one that
    reached the target before its first evaluation has an upper bound (``T_high``) and no lower one (never beaten).
    So the truly fastest configuration is in the set in at least 95% of studies whatever was censored (statistics
    review 2, N3). Configurations without replicates stay in the set (nothing shows them slower)."""
    low: dict[str, np.ndarray | None] = {}
    high: dict[str, np.ndarray | None] = {}
    for n in names:
        e = ests[n]
        rep = e.get("_replicates") or {}
        if e.get("reached") and e.get("time_to_target_s"):
            low[n] = high[n] = _log(rep.get("T"))
        elif at_most_only(e):
            low[n], high[n] = None, _log(rep.get("T_high"))
        else:
            low[n], high[n] = _log(rep.get("T_low")), None
    out = []
    for c in names:
        if low[c] is None:
            out.append(c)
            continue
        others = [d for d in names if d != c and high[d] is not None and len(high[d]) == len(low[c])]
        diffs = [low[c] - high[d] for d in others]
        a = simultaneous_tail(diffs, level, two_sided=False) if diffs else 0.0
        if not any(float(np.quantile(df, a)) > 0 for df in diffs):
            out.append(c)
    return out


def aligned_family(rows: Sequence[Mapping[str, Any]], reference: str | None,
                   tolerance: float = TOLERANCE) -> dict[str, Any] | None:
    """Where the square-root rule keeps the batch on the reference's samples (the aligned family, Li et al. 2026,
    "align"), graded by the equivalence test of each rung's rN (:func:`alignment`, the rows' ``alignment`` and
    ``rN_test`` from :func:`decide`), never by a point estimate. Over the rows on the reference's LR rule (one per
    batch size; at several of one B the one with the worst grade), contiguous from the reference upwards and
    downwards:

    - ``batches``: shown aligned (rN's 90% interval inside [1 / (1 + tol), 1 + tol]); the reference always;
    - ``undistinguished``: not shown penalised (aligned, or an rN not distinguishable from 1): where the
      reference's rN may still hold, the range a gradient-noise slope can be fitted over;
    - ``end``: the first batch above the reference whose rN is shown above 1 (90% interval wholly above 1), or that
      some seed did not reach (``reached`` False: censored; ``rN_at_least`` bounds it); None when no rung is;
    - ``lower`` / ``upper``: the ends of ``batches``; ``largest_measured``: the largest B on the rule.

    Returns None without a reference among ``rows``. Keys also: ``tolerance``, ``rule``, ``reference``,
    ``reference_batch``, ``grades`` ({B: grade})."""
    by = {r["run"]: r for r in rows}
    if reference is None or reference not in by:
        return None
    ref = by[reference]
    rule = ref.get("lr_rule")
    order = {ALIGNED: 0, BELOW: 1, NOT_DISTINGUISHABLE: 2, None: 3, PENALISED: 4}
    ladder: dict[int, Mapping[str, Any]] = {}
    for r in rows:
        b = r.get("batch_size")
        if not b or r.get("lr_rule") != rule:
            continue
        g = r.get("alignment") if r.get("reached") else None
        worse = ladder.get(b)
        if worse is None or order.get(g, 3) > order.get(worse.get("alignment") if worse.get("reached") else None, 3):
            ladder[b] = r
    ladder[ref["batch_size"]] = ref
    bs = sorted(ladder)
    i0 = bs.index(ref["batch_size"])

    def grade(b: int) -> str | None:
        r = ladder[b]
        return ALIGNED if r is ref else (r.get("alignment") if r.get("reached") else None)

    def span(ok) -> list[int]:
        lo = hi = i0
        while lo > 0 and ok(grade(bs[lo - 1])):
            lo -= 1
        while hi < len(bs) - 1 and ok(grade(bs[hi + 1])):
            hi += 1
        return bs[lo:hi + 1]

    fam = span(lambda g: g == ALIGNED)
    undist = span(lambda g: g in (ALIGNED, NOT_DISTINGUISHABLE, BELOW))
    end = None
    for b in bs[i0 + 1:]:
        r = ladder[b]
        if grade(b) == PENALISED or (not r.get("reached") and r.get("rN_at_most") is None):
            end = {"run": r["run"], "batch_size": b, "rN": r.get("rN"), "rN_ci": r.get("rN_ci"),
                   "rN_test": r.get("rN_test"), "reached": bool(r.get("reached")),
                   "rN_at_least": r.get("rN_at_least"), "verdict": r.get("verdict")}
            break
    return {"tolerance": tolerance, "rule": rule, "reference": reference, "reference_batch": ref["batch_size"],
            "batches": fam, "lower": fam[0], "upper": fam[-1], "undistinguished": undist, "end": end,
            "clear_end": end, "largest_measured": bs[-1], "grades": {b: grade(b) for b in bs},
            "rows": {b: {"run": ladder[b]["run"], "rN": ladder[b].get("rN"), "rN_test": ladder[b].get("rN_test")}
                     for b in bs}}
