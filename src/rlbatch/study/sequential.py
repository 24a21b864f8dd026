"""The sequential study: seeds spent where the decision needs them (issue 52; statistics review 2, section 4(a)).

A group-sequential multi-arm multi-stage design (Magirr, Jaki & Whitehead 2012) on the seed-major rounds a sweep
already runs, with the decision's one-sided test (:func:`rlbatch.analysis.decision.decide`) at every look:

1. every configuration and the reference start with ``looks[0]`` seeds (default 2);
2. at look j (``looks[j]`` seeds each), the whole study is analysed as ``rlbatch analyze`` analyses it, with the
   relative time's "faster" end at the look's efficacy boundary (O'Brien-Fleming shape, -C sqrt(n_max / n_j) on the t
   scale, C calibrated by simulation so that a false "faster" over all looks has probability 5%:
   :func:`rlbatch.analysis.sequential.calibrate`); for each configuration still active:
   - **faster**: its relative time's upper end lies below 1: the claim is final, it gets no more seeds;
   - **dropped (futility)**: it is not ahead of the reference by ``futility`` standard errors (binding: the
     boundaries count on it);
   - **dropped (cannot be the fastest)**: it is outside "may be the fastest" (some configuration is faster than it
     beyond noise, multiple comparisons with the best), which only removes claims, so the error stays controlled;
3. the active configurations and the reference get seeds up to the next look; the study ends when none is active, when
   a configuration is called faster and every active one is shown within the indifference zone ``zone`` of it (its
   time over the called one's, 90% one-sided lower end, at least 1 / (1 + zone): near-ties cost tens of seeds to
   separate, and either is a good answer), at the last look, or when the run ``budget`` is spent;
4. the answer: the configurations called faster (each shown faster than the reference at its look), the "may be the
   fastest" set of the last analysis, and the pick: the last look's decision with only the study's claims counted
   (:func:`rlbatch.analysis.decision.decide`'s ``called``): among those called faster and in the set, the one whose
   relative time has the smallest upper end (the safe pick); none called faster: the member of the set with the
   smallest estimated time-to-target, named as the best estimate and never as shown faster, with what would decide.
   The report and ``rlbatch analyze`` of the study's directory repeat that decision from ``OUT/sequential.json``
   (:class:`rlbatch.analysis.study.Study`'s ``sequential``), so every page names the same pick.

Why O'Brien-Fleming: with 2 seeds the spread is poorly known and a claim needs an overwhelming effect, so almost no
error is spent early and the last look's boundary is close to the fixed design's; large effects and clear losers still
stop at the first look. Why looks at 2, 4, 6 with futility 1: at a 2x effect and per-seed log-sd 0.275 it calls the
fastest faster 0.91 of the time for 24 expected runs over 8 configurations, where the fixed 3-seed design (24 runs)
reaches 0.70 (review, section 4(a)).

The driver is backend-agnostic: a ``runner`` makes sure configurations have n seeds (:class:`Runner`) and returns the
runs so far. The simulator's (:class:`rlbatch.study.calibration.SimulatedRunner`) calibrates the whole procedure in
``benchmarks/calibration.py``; a ladder of trial specs runs real trials on the local, TRL or Ray backend
(:func:`run_spec_study`: ``rlbatch demo`` and ``rlbatch sweep --sequential``).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from rlbatch.analysis.accounting import account_runs
from rlbatch.analysis.decision import ALPHA_FASTER, FASTER, decide
from rlbatch.analysis.sequential import Design, calibrate
from rlbatch.errors import UserError

#: the default design: looks at 2, 4 and 6 seeds per configuration, binding futility at 1 standard error
LOOKS = (2, 4, 6)
FUTILITY = 1.0
#: the default indifference zone: configurations within 20% of the one called faster are as good an answer
ZONE = 0.20
#: the confidence with which the rest must be shown within the zone before the study stops for it (one-sided)
ZONE_LEVEL = 0.90


class Runner(Protocol):
    def ensure(self, wants: dict[str, int]) -> None:
        """Make sure each configuration of ``wants`` has that many finished seeds (run the missing ones, all of one
        look together: a backend runs them in parallel, in seed-major order)."""

    def runs(self) -> list[Any]:
        """Every run so far (:class:`rlbatch.runstore.Run`)."""


@dataclass
class LookRecord:
    """One look: ``seeds`` per active configuration, the boundary's per-comparison ``tail``, the configurations
    ``called`` faster, ``dropped`` ({name: why}) and still ``active`` after it, and ``runs`` so far."""

    index: int
    seeds: int
    tail: float
    called: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)
    runs: int = 0


@dataclass
class SequentialResult:
    """The sequential study's answer: ``faster`` ({name: the look it was called at}), ``may_be_fastest`` (the last
    look's set), ``pick`` (a name: the safe pick among those called faster, else the set's best estimate), ``decided`` (something was called
    faster), ``dropped`` ({name: why}), ``looks`` (:class:`LookRecord` each), ``stop`` (why the study ended),
    ``runs`` (trials run), ``design`` (its looks, futility, C), ``upper`` ({name: its relative time's upper end at the
    look it was called faster})."""

    reference: str
    faster: dict[str, int]
    may_be_fastest: list[str]
    pick: str
    decided: bool
    dropped: dict[str, str]
    looks: list[LookRecord]
    stop: str
    runs: int
    design: dict[str, Any]
    upper: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "faster": self.faster, "may_be_fastest": self.may_be_fastest,
                "pick": self.pick, "decided": self.decided, "dropped": self.dropped, "stop": self.stop,
                "runs": self.runs, "design": self.design, "upper": self.upper,
                "looks": [vars(lk) for lk in self.looks]}


def _df(est: dict[str, Any]) -> float:
    d = (est.get("spread_df") or {})
    v = d.get("T") or d.get("S")
    return float(v) if v and math.isfinite(v) else 1e6


def _log_diff(est: dict[str, Any], ref: dict[str, Any]) -> np.ndarray | None:
    rep = est.get("_replicates") or {}
    a = rep.get("T") if rep.get("T") is not None else rep.get("T_low")
    b = (ref.get("_replicates") or {}).get("T")
    if a is None or b is None or len(a) != len(b):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.log(a) - np.log(b)
    return d if np.isfinite(d).all() else None


def futile(est: dict[str, Any], ref: dict[str, Any], f: float) -> bool:
    """Whether a configuration is not ahead of the reference by ``f`` standard errors (t >= -f): the quantile of its
    log relative time's replicates at the level of ``f`` under its t distribution is at or above 0. A censored
    configuration is judged by its lower bound (its true time is larger still). False without replicates."""
    from scipy import stats

    if not math.isfinite(f):
        return False
    d = _log_diff(est, ref)
    if d is None:
        return False
    return float(np.quantile(d, stats.t.cdf(f, _df(est)))) >= 0


def run_sequential(runner: Runner, configs: Sequence[str], reference: str, target: float, *,
                   metric: str = "eval/score", looks: Sequence[int] = LOOKS, futility: float = FUTILITY,
                   zone: float = ZONE, budget_runs: int | None = None, alpha: float = ALPHA_FASTER,
                   n_boot: int = 2000, log=None) -> SequentialResult:
    """Run the sequential study over ``configs`` (names the runner knows; ``reference`` among them) to ``target``
    (module docstring). ``budget_runs``: at most this many trials in all (a look that would exceed it is cut to the
    configurations it can afford, the reference first). ``log``: a callable taking one line of progress."""
    design: Design = calibrate(tuple(looks), futility=futility, alpha=alpha, n_configs=len(configs))
    others = [c for c in configs if c != reference]
    active = list(others)
    faster: dict[str, int] = {}
    upper: dict[str, float] = {}
    dropped: dict[str, str] = {}
    records: list[LookRecord] = []
    seeds_of = {c: 0 for c in configs}
    dec = ests = None
    tail = float("nan")
    stop = f"the design's last look, {max(design.looks)} seeds"
    for j, n in enumerate(design.looks):
        want = [reference] + active
        cost = sum(max(0, n - seeds_of[c]) for c in want)
        if budget_runs is not None and sum(seeds_of.values()) + cost > budget_runs:
            stop = f"the budget of {budget_runs} runs"
            if j > 0:
                break
        todo = {c: n for c in want if seeds_of[c] < n}
        if todo:
            runner.ensure(todo)
            seeds_of.update(todo)
        runs = runner.runs()
        try:
            acc = account_runs(runs, target, metric, reference, n_boot=n_boot)
        except UserError as err:  # e.g. a seed of the reference ran out before the target: nothing to compare with,
            stop = f"no comparison: {err}"  # and more seeds cannot undo it
            break
        ests = acc["estimates"]
        # the look's per-comparison error is the design's: its boundary's tail at the pooled df the calibration
        # assumed (every configuration's seeds so far, less one each). Not at a configuration's own spread df: a
        # barely moderated 2-seed spread (df ~1.4) turns the first look's -C sqrt(3) into a tail of ~0.04 where the
        # design spends ~0.001, and 7 comparisons then err together far above alpha (null, seed log-sd 0.1: a false
        # "faster" at the first look in 4 of 40 studies). The replicates keep their own df, so that tail, read off
        # them, is a wider interval where the spread is less known.
        tail = design.tail(j, sum(max(seeds_of[c] - 1, 0) for c in configs))
        dec = decide(ests, reference, faster_tail=tail)
        rec = LookRecord(j, n, tail, runs=len(runs))
        for c in list(active):
            v = dec.verdicts[c]
            if v.label == FASTER:
                faster[c] = j
                hi = v.relative_time.hi if v.relative_time.hi is not None else (
                    v.relative_time_at_most.hi if v.relative_time_at_most is not None else None)
                if hi is not None:
                    upper[c] = hi
                rec.called.append(c)
                active.remove(c)
            elif futile(ests[c], ests[reference], design.futility):
                dropped[c] = rec.dropped[c] = f"futility: not ahead of the reference by {design.futility:g} se"
                active.remove(c)
            elif c not in dec.may_be_fastest:
                dropped[c] = rec.dropped[c] = "cannot be the fastest: another configuration is faster beyond noise"
                active.remove(c)
        rec.active = list(active)
        records.append(rec)
        if log:
            log(f"look {j + 1}/{len(design.looks)} ({n} seeds): faster {rec.called or '-'}, dropped "
                f"{list(rec.dropped) or '-'}, active {active or '-'}")
        if not active:
            stop = "no configuration left in the race (each called faster or dropped)"
            break
        if faster and _within_zone(active, faster, ests, reference, zone):
            stop = (f"the rest shown within the {zone:.0%} indifference zone of one called faster "
                    f"({ZONE_LEVEL:.0%} one-sided): "
                    "separating them is not worth the seeds")
            break
    # the answer is the last look's decision with the study's claims only (decide's ``called``): the safe pick among
    # those called faster, else the best estimate (never a claim). The report and analyze of the study's directory
    # repeat exactly this decision (rlbatch.analysis.study.Study's ``sequential``): one pick on every page.
    if dec is not None:
        dec = decide(ests, reference, faster_tail=tail, called=faster)
    best = list(dec.may_be_fastest) if dec is not None else list(configs)  # no analysis: none excluded
    pick = (dec.pick if dec is not None else None) or reference
    return SequentialResult(reference, faster, best, pick, bool(faster), dropped, records, stop,
                            sum(seeds_of.values()),
                            {"looks": list(design.looks), "futility": design.futility, "C": design.C,
                             "alpha": design.alpha, "zone": zone, "n_boot": n_boot, "target": target,
                             "metric": metric}, upper)


def _within_zone(active: Sequence[str], faster: dict[str, int], ests: dict[str, Any], reference: str,
                 zone: float, level: float = ZONE_LEVEL) -> bool:
    """Whether every active configuration is shown within the indifference zone of the best one called faster: its
    time-to-target over that one's has a one-sided lower end (at ``level``, from the two configurations' replicates)
    of at least 1 / (1 + zone), i.e. it is not more than ``zone`` faster beyond noise. A point estimate alone (the
    rule before 2026-12-07) stopped at the first look whenever a near-tie's estimate fell within the zone, and
    picked the slower of two near-ties about one time in five (paper-shaped ladder: the fastest called 0.80)."""
    t = {c: ests[c].get("time_to_target_s") for c in list(active) + list(faster)}
    best = min((c for c in faster if t.get(c)), key=lambda c: t[c], default=None)
    if best is None:
        return False
    for c in active:
        d = _log_diff(ests[c], ests[best]) if t.get(c) else None  # censored (no time-to-target): never within
        if d is None or float(np.quantile(d, 1.0 - level)) < -math.log1p(zone):
            return False
    return True


class SpecRunner:
    """A :class:`Runner` over a ladder of trial specs (:func:`rlbatch.study.ladder.build_ladder` with the design's
    largest seed count): ``ensure`` runs the specs of the wanted configurations whose seed index (from the ladder's
    first seed) is below the wanted count, all together and seed-major, with ``run_specs`` (e.g. a local sweep into
    one directory, which skips finished trials, so a killed study resumes); ``runs`` reads them back with
    ``read_runs``."""

    def __init__(self, specs: Sequence[Any], run_specs, read_runs):
        from rlbatch.study.ladder import config_id

        self.specs = list(specs)
        self.run_specs, self.read_runs = run_specs, read_runs
        first = min(s.seed for s in self.specs)
        self.index = {s.run_id: s.seed - first for s in self.specs}
        self.config = {s.run_id: config_id(s.run_id) for s in self.specs}
        self.done: list[Any] = []

    def configs(self) -> list[str]:
        """The configurations of the ladder, in ladder order."""
        return list(dict.fromkeys(self.config[s.run_id] for s in self.specs))

    def ensure(self, wants: dict[str, int]) -> None:
        new = [s for s in self.specs if self.config[s.run_id] in wants
               and self.index[s.run_id] < wants[self.config[s.run_id]] and s not in self.done]
        self.done += new
        self.run_specs(sorted(self.done, key=lambda s: s.seed))

    def runs(self) -> list[Any]:
        ids = {s.run_id for s in self.done}
        return [r for r in self.read_runs() if r.run_id in ids]


def run_spec_study(out: Any, specs: Sequence[Any], run_specs, target: float, *,
                   progress: bool = True) -> dict[str, Any]:
    """The sequential study over the ladder ``specs`` (the design's largest seed count each; its first configuration
    is the reference: the smallest batch on the LR rule), each look's trials run by ``run_specs`` (a resumable sweep
    into ``out``: the local or TRL trainer, or Ray tasks), decided on the runs as ``rlbatch analyze out`` reads them
    (the timing pass's throughput when ``out/timing.jsonl`` exists, else the trials' own clock). Its record is
    written to ``out/sequential.json`` (the report's and analyze's decision) and returned. Used by ``rlbatch demo``
    and ``rlbatch sweep --sequential``."""
    from rlbatch.readers.collect import load_all
    from rlbatch.runstore import atomic_write_text

    def read():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs, _ = load_all([Path(out)])
        return runs

    runner = SpecRunner(specs, run_specs, read)
    configs = runner.configs()
    say = (lambda line: print(f"sequential: {line}", flush=True)) if progress else None
    res = run_sequential(runner, configs, configs[0], target, log=say)
    rec = res.to_json()
    atomic_write_text(Path(out) / "sequential.json", json.dumps(rec, indent=2, default=str) + "\n")
    if say:
        say(f"stopped: {res.stop}; {res.runs} runs; pick {res.pick}"
            + (" (called faster)" if res.pick in res.faster else " (best estimate, not shown faster)"))
    return rec
