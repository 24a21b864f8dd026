"""Adaptive sweeps: one decision loop for every backend. Trials of a batch-size ladder run (or are fed) while the
plan re-predicts their time-to-target at every new evaluation; a configuration is stopped as soon as its predicted
time-to-target interval lies wholly above the best's, or its outcome is decided; the others are extended (Li et al.
2026, "align, then accelerate": a larger batch is faster iff its throughput gain beats its sample penalty rN).

Where the trials run is an *executor* (:mod:`rlbatch.backends.executors`): the local trainer and TRL in chunks
(:class:`~rlbatch.backends.executors.ChunkExecutor`), Ray tasks (:class:`~rlbatch.backends.executors.RayExecutor`),
launched verl / OpenRLHF jobs whose logs are watched as they are written, or stored logs replayed in timestamp order
(:class:`~rlbatch.backends.executors.LogExecutor`). The loop only asks an executor to start or extend a trial to N
retained samples, to report which trials have new data, to read a trial as a run, and to stop a trial (resumable).

The loop (:func:`decide`), per configuration (the seeds of one batch size and LR rule decide together):

1. start: every trial, or the first ``max_active`` in ladder order, with a first chunk of ``chunk`` samples;
2. the race, at every new evaluation (no model): a configuration whose time-to-target is already above the best
   measured one (:func:`time_floor`: every seed that has not reached the target has run longer on its own clock
   than the best needed) is stopped, ``cannot win`` (:func:`race_verdict`);
3. once every running trial has new data (a round), re-plan (:func:`rlbatch.plan.plan_runs` over every run so far, the
   not-yet-started batches as candidates) and decide each active configuration:
   - ``reached``: every seed reached the target (samples-to-target measured at its first evaluation at or above it;
     with ``confirm``, once its interval is closed above);
   - ``never reaches``: with ``min_eval_points`` evaluations per seed, the fit predicts it never reaches the target
     and the trial has run at least as many samples as the sweep's earliest measured crossing of the target;
   - ``cannot win``: with ``min_eval_points`` evaluations, the interval of its predicted relative time-to-target
     (rN / relative throughput; fitted or measured rN only, never the noise model alone) lies wholly above the
     interval of the best configuration's (the smallest predicted relative time);
   - ``decided``: it is the best and every other configuration has been decided (nothing left to compare), and no
     other configuration's measured time-to-target is still to beat (then it races on: issue 27's demo_sweep_cpu
     seed 0 had B = 128 "decided" from a fit at 3088 samples while B = 32 had reached the target faster);
   - ``budget``: a seed spent ``budget`` samples without reaching the target;
   the rest are extended by another ``chunk`` when their executor finished the previous one;
4. configurations not started yet start in ladder order when a slot is free. Opt-in (``skip_after`` K), they climb
   the ladder above the lead (the best measured time-to-target, else the plan's best): one is ``skipped`` once K
   batches between the lead and it lost (assuming time-to-target unimodal in B: the sample penalty rN grows with B
   while the throughput gain saturates), and starts only when no batch between the lead and it is still running
   (its outcome may skip it). Off by default: one-seed time-to-target on the CPU demo ladders is not unimodal
   (issue 27: with K = 2 the pick was wrong on 3 of 10 replayed ladders). Never skipped on the noise model alone
   (with two configurations at a time on demo0 seed 0 its interval for B = 64, [0.53, 0.55], lay above the best's
   and skipped the true best);
5. the recommendation is the final plan over every run, its pick among the configurations the loop did not stop.

Every decision is recorded with its reason and evidence (:class:`Decision`); :meth:`AdaptiveResult.to_json` is the
``adaptive.json`` of every backend.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from rlbatch.analysis.accounting import estimate_configuration, geometric_mean, seed_estimate
from rlbatch.analysis.crossing import settled
from rlbatch.analysis.curves import crossing_of, curve, metric_frame
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.throughput import clock_basis, run_clock
from rlbatch.errors import UserError
from rlbatch.plan import plan_runs

VERSION = 1
REACHED, NEVER, CANNOT_WIN, DECIDED, BUDGET, SKIPPED = ("reached", "never reaches", "cannot win", "decided",
                                                       "budget", "skipped")


@dataclass
class TrialRef:
    """One trial for the loop: its run id, batch size B (responses per update), configuration (seeds of one
    configuration share it) and the executor's spec (opaque to the loop)."""

    run_id: str
    batch_size: int
    config: str
    spec: Any = None


@dataclass
class Decision:
    """One decision of the loop. ``action``: start | extend | stop | skip. ``evidence``: the numbers it rests on
    (samples and evaluation points per seed, predicted relative time and its interval, rN and its source, relative
    throughput, the best configuration and its interval) at re-plan ``event``."""

    event: int
    action: str
    config: str
    run_ids: list[str]
    reason: str
    outcome: str | None = None
    samples: float | None = None
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrialOutcome:
    """Where a trial ended: ``state`` (one of reached, never reaches, cannot win, decided, budget, skipped),
    retained ``samples`` and clock seconds ``time_s`` it spent, ``decided_by`` (the reason), and the last plan's
    ``relative_time`` / ``interval`` / ``rN`` / ``rN_source`` for its configuration."""

    run_id: str
    config: str
    batch_size: int
    state: str
    samples: float
    time_s: float
    decided_by: str
    relative_time: float | None = None
    interval: list[float | None] | None = None
    rN: float | None = None
    rN_source: str | None = None
    resume: str | None = None


@dataclass
class AdaptiveResult:
    """The record of an adaptive sweep (``adaptive.json``): see :meth:`to_json`."""

    backend: str
    target: float
    metric: str
    clock: str
    reference: str | None
    recommended: Any
    recommended_batch_size: int | None
    within_noise: list[Any]
    samples_spent: float
    time_spent_s: float
    stopped_because: str
    trials: list[TrialOutcome]
    decisions: list[Decision]
    plan: dict[str, Any] | None
    replans: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"version", "backend", "target", "metric", "clock", "reference", "recommended",
        "recommended_batch_size", "within_noise", "samples_spent" (retained samples over all trials),
        "time_spent_s" (clock seconds summed over trials), "stopped_because", "replans", "trials": [TrialOutcome],
        "decisions": [Decision], "plan"}``: the same keys for every backend."""
        d = asdict(self)
        return {"version": VERSION, **d}


# --------------------------------------------------------------------------------------------------- run helpers
def run_samples(run) -> float:
    """Retained samples a run has trained on so far (its last ``samples/retained``; 0 without)."""
    m = run.metrics if run is not None else None
    if m is None or not len(m) or "samples/retained" not in m:
        return 0.0
    v = m["samples/retained"].max()
    return float(v) if v == v else 0.0


def run_seconds(run, clock: str) -> float:
    """Seconds a run has spent on ``clock`` (:func:`rlbatch.analysis.throughput.run_clock`; 0 without)."""
    c = run_clock(run, clock) if run is not None else None
    return float(c[1][-1]) if c is not None else 0.0


def eval_points(run, metric: str) -> int:
    """Evaluation points of ``metric`` in a run so far."""
    if run is None:
        return 0
    df = metric_frame(run, metric)
    return int(df[metric].notna().sum()) if metric in df.columns else 0


def reached(run, target: float, metric: str) -> bool:
    """Whether the run's curve reached the target for good (the accounting's samples-to-target, with
    :data:`rlbatch.analysis.crossing.SETTLE_POINTS` evaluations at or after it: :func:`rlbatch.analysis.crossing.
    settled`), so that stopping it there does not end it on a noise spike."""
    if run is None:
        return False
    c = curve(run, metric)
    return settled(c["samples/retained"].to_numpy(float), crossing_of(c, target, metric))


def earliest_crossing(runs: Sequence[Any], target: float, metric: str) -> float | None:
    """The fewest retained samples at which any of ``runs`` first reached the target (the accounting's
    samples-to-target of each run: :func:`rlbatch.analysis.accounting.estimate_configuration`); None when none has.
    The evidence :func:`stop_verdict` needs before a fit may call a trial ``never reaches``."""
    s = [estimate_configuration([r], target, metric, n_boot=0)["samples_to_target"] for r in runs if r is not None]
    s = [float(v) for v in s if v is not None]
    return min(s) if s else None


def time_floor(runs: Sequence[Any], target: float, metric: str, clock: str) -> tuple[float | None, bool]:
    """``(seconds, measured)``: a lower bound on a configuration's time-to-target (seconds on ``clock``) from its
    seeds ``runs`` so far, and whether it is the measured value itself. The accounting's time-to-target of a
    configuration is the geometric mean over its seeds of each seed's (:func:`rlbatch.analysis.accounting.seed_estimate`):
    a seed that reached the target contributes its time-to-target, one that has not yet contributes the seconds it
    has run (it can only reach later). ``measured`` when every seed reached the target. ``(None, False)`` when a
    seed has no run or no clock yet."""
    ts, done = [], True
    for r in runs:
        e = seed_estimate(r, target, metric, clock=clock) if r is not None else None
        if e is None or e["seconds"] is None:
            return None, False
        if e["time_to_target_s"] is not None:
            ts.append(float(e["time_to_target_s"]))
        else:
            ts.append(float(e["seconds"]))
            done = False
    if not ts or min(ts) <= 0:
        return (min(ts), done) if ts else (None, False)
    return geometric_mean(ts), done


def race_verdict(floor_s: float | None, best_s: float | None, best: str | None,
                 measured: bool = False) -> tuple[str, str] | None:
    """The race rule of the loop: a configuration whose time-to-target is already above the best measured one
    (``floor_s`` from :func:`time_floor`, ``measured`` when it is its own measured value, > ``best_s``, the
    smallest measured time-to-target among the configurations every seed of which reached the target, ``best`` its
    name) cannot be the fastest to the target on these seeds: ``(CANNOT_WIN, reason)``, else None. Exact on the
    measured values (no model): every trial runs on its own clock, so one that has spent more seconds than the
    winner needed without reaching the target lost (Li et al. 2026: the batch size to pick is the one of the least
    time-to-target). Used through :func:`race` by :func:`decide`, ``rlbatch watch`` and the TRL callback."""
    if floor_s is None or best_s is None or not floor_s > best_s:
        return None
    what = (f"its measured time-to-target, {floor_s:.1f} s," if measured else
            f"{floor_s:.1f} s on its clock without reaching the target,")
    return CANNOT_WIN, f"lost the race: {what} is more than the best measured time-to-target, {best} {best_s:.1f} s"


@dataclass
class Race:
    """The race among configurations on their own clocks (:func:`race`): ``best`` (its name) and ``best_s`` (its
    measured time-to-target, seconds; None while no configuration has one), and per configuration ``floors``
    (:func:`time_floor`'s ``(seconds, measured)``)."""

    best: str | None
    best_s: float | None
    floors: dict[str, tuple[float | None, bool]]
    reference: str | None = None

    def verdict(self, name: str) -> tuple[str, str] | None:
        """:func:`race_verdict` for configuration ``name`` (None for the best itself, the reference, or an unknown
        name): the reference is never stopped, every rN is measured against it."""
        if name in (self.best, self.reference) or name not in self.floors:
            return None
        floor, is_measured = self.floors[name]
        return race_verdict(floor, self.best_s, self.best, is_measured)


def race(groups: dict[str, Sequence[Any]], target: float, metric: str, clock: str,
         reference: str | None = None) -> Race:
    """The race over ``groups`` ({configuration: its seeds' runs so far}, in ladder order: a tie in measured
    time-to-target goes to the first): every configuration's :func:`time_floor` on ``clock`` and the best measured
    one. ``reference``: the configuration every other is compared with, never stopped. The one implementation of the
    race rule for :func:`decide`, ``rlbatch watch`` and the TRL callback."""
    floors = {c: time_floor(rs, target, metric, clock) for c, rs in groups.items()}
    done = [(v[0], i, c) for i, (c, v) in enumerate(floors.items()) if v[1] and v[0] is not None]
    t, _, best = min(done) if done else (None, 0, None)
    return Race(best, t, floors, reference)


def measured(runs: Sequence[Any], target: float, metric: str, n_boot: int = 200,
             closed: bool = False) -> list[float | None] | None:
    """The configuration's samples-to-target interval once every seed reached the target (the accounting's 95%
    interval, :func:`rlbatch.analysis.accounting.estimate_configuration`: seeds resampled, or one seed's evaluation
    noise; an end may be None, open); else None. ``closed``: also None until the interval is closed above, i.e.
    the crossing is not a noise blip at the last evaluation (the loop's ``confirm``)."""
    if any(r is None or not reached(r, target, metric) for r in runs):
        return None
    ci = estimate_configuration(list(runs), target, metric, n_boot=n_boot)["samples_to_target_ci"]
    ci = list(ci) if ci else [None, None]
    if closed and (ci[1] is None or not math.isfinite(ci[1])):
        return None
    return ci


def _end(x: float | None) -> float | None:
    """An interval end as a finite float, or None (open) for a missing or non-finite (NaN, inf) end."""
    return float(x) if x is not None and math.isfinite(float(x)) else None


def _above(a: Sequence[float | None] | None, b: Sequence[float | None] | None) -> bool:
    """Interval ``a`` lies wholly above interval ``b``. A missing or NaN end is open: a's open lower end and b's
    open upper end never lie above / below anything (e.g. ``rn_from_fits``' [0, NaN] while the reference is open)."""
    if not a or not b:
        return False
    lo, hi = _end(a[0]), _end(b[1])
    return lo is not None and hi is not None and lo > hi


def degenerate(iv: Sequence[float | None] | None) -> bool:
    """Whether an interval carries no uncertainty to stop on: missing, or both ends finite and equal (zero width,
    e.g. the reference's [1, 1] by construction or a one-seed interval that collapsed). An open end is not
    degenerate (it is wide)."""
    if not iv:
        return True
    lo, hi = _end(iv[0]), _end(iv[1])
    return lo is not None and hi is not None and hi <= lo


def informative(c: dict[str, Any] | None) -> bool:
    """Whether a plan candidate's relative time-to-target interval may justify a stop: not :func:`degenerate`
    (width > 0) and from the fit's own interval (``rN_source`` fit) or from two or more seeds (a measured one-seed
    interval is the evaluation-noise bootstrap alone, which misses the run's own trajectory: issue 27's
    demo_sweep_cpu stopped the true best on one)."""
    return c is not None and not degenerate(c.get("interval")) and (
        c.get("rN_source") == "fit" or len(c.get("runs") or []) >= 2)


def stop_verdict(c: dict[str, Any] | None, best: dict[str, Any] | None, n_eval: int,
                 min_eval_points: int = 6, reference: str | None = None, samples: float | None = None,
                 crossed_at: float | None = None) -> tuple[str, str] | None:
    """The loop's stopping rule for one plan candidate with runs (``c``, a :func:`rlbatch.plan.plan_runs`
    candidate) against the best (``best``; None when ``c`` is the best): ``(outcome, reason)`` or None to go on.
    With at least ``min_eval_points`` evaluations per seed: ``never reaches`` when the fit predicts it never reaches
    the target and the trial has run (``samples``: its seeds' fewest retained samples) at least as far as the samples
    at which a comparable trial of the sweep first crossed it (``crossed_at``, :func:`earliest_crossing`; no such
    stop while none has): a short probe's fit cannot tell a curve that levels off below the target from one that
    dips, stays flat and rises later (issue 27: demo0's B = 16, 512 and 1024 were rejected at 1.7-4k samples and
    all reached the target), while a fit whose plateau is real still stops it once a rival shows at how many
    samples curves of this sweep cross; ``cannot win`` when its predicted relative time-to-target interval (rN fitted or measured, never
    the noise model alone) lies wholly above the best's (a configuration with runs: a batch predicted by the
    noise model alone never stops a trial). A degenerate (zero-width) interval never justifies a
    stop: ``c``'s and the best's must have width > 0, except the plan's ``reference`` (its run name), whose [1, 1]
    is so by construction (its uncertainty is in the other side's ratio interval). The reference itself is never
    stopped (issue 37: a reference stopped on a prediction about another batch left the report without rN for
    anything). NaN ends are open. Used by :func:`decide` and ``rlbatch watch``."""
    if c is None or n_eval < min_eval_points or (reference is not None and c.get("run") == reference):
        return None  # the reference is never stopped: every rN of the sweep is measured against it
    if c.get("never_reaches") and crossed_at is not None and samples is not None and samples >= crossed_at:
        return NEVER, (f"fit: never reaches the target ({c['never_reaches']}), after {samples:.0f} samples, past "
                       f"the earliest crossing of the target in this sweep ({crossed_at:.0f} samples)")
    if best is not None and best is not c and best.get("run") != c.get("run") and best.get("runs") \
            and c.get("rN_source") in ("fit", "measured") \
            and (informative(best) if c.get("run") == reference else not degenerate(c.get("interval"))) \
            and (best.get("run") == reference or not degenerate(best.get("interval"))) \
            and _above(c.get("interval"), best.get("interval")):
        return CANNOT_WIN, (f"its predicted relative time-to-target {c['predicted_relative_time']:.2f} (interval "
                            f"{_iv(c['interval'])}) lies wholly above the best's, {best['run']} "
                            f"{best['predicted_relative_time']:.2f} (interval {_iv(best['interval'])})")
    return None


def _evidence(c: dict[str, Any] | None, best: dict[str, Any] | None) -> dict[str, Any]:
    if c is None:
        return {}
    out = {k: c.get(k) for k in ("predicted_relative_time", "interval", "rN", "rN_ci", "rN_source",
                                 "relative_throughput", "predicted_samples_to_target",
                                 "predicted_samples_to_target_ci", "predicted_time_to_target_s", "never_reaches")}
    if best is not None:
        out.update(best=best["run"] if best.get("run") is not None else best["batch_size"],
                   best_predicted_relative_time=best.get("predicted_relative_time"), best_interval=best.get("interval"))
    return out


def _best(plan: dict[str, Any]) -> dict[str, Any] | None:
    """The plan's best configuration with runs: its recommendation when that has runs, else the candidate with runs of
    the smallest predicted relative time-to-target. A batch without runs (the noise model alone) is never the best a
    trial is stopped against (issue 27: with two configurations at a time on demo_sweep seed 2, B = 128 not started
    yet, predicted 0.33 [0.33, 0.34], stopped B = 64, the measured best)."""
    rec = plan.get("recommended")
    ran = [c for c in plan["candidates"] if c.get("runs")]
    return next((c for c in ran if c["run"] == rec), None) or min(
        (c for c in ran if c.get("predicted_relative_time") is not None),
        key=lambda c: (c["predicted_relative_time"], c["batch_size"] or 0), default=None)


# --------------------------------------------------------------------------------------------------- the loop
def decide(executor, trials: Sequence[TrialRef], *, target: float, metric: str = "eval/score", budget: int,
           chunk: int | None = None, max_active: int | None = None, min_eval_points: int = 6, tol: float = 0.1,
           n_boot: int = 200, skip_after: int | None = None, poll_timeout: float = 5.0,
           clock: str = "auto", confirm: bool = False,
           backend: str = "local", progress: Callable[[str], None] | None = None,
           on_update: Callable[[AdaptiveResult], None] | None = None) -> AdaptiveResult:
    """Run the adaptive decision loop (module docstring) over ``trials`` (ordered by the ladder; the first
    configuration is the plan's reference) on ``executor`` and return its record.

    ``budget``: the most retained samples a trial may spend; ``chunk``: samples per start / extension (default
    budget / 8, at least B); ``max_active``: configurations running at once (default all; 1 runs the ladder one
    configuration after the other, the doubling order); ``min_eval_points``: evaluations every seed of a
    configuration needs before a fitted prediction may stop it; ``skip_after``: skip a configuration
    not started yet once that many batches between the lead and it have lost (None, the default: never; step 4 of
    the module docstring); ``tol``, ``n_boot``, ``clock``: as
    :func:`rlbatch.plan.plan_runs`; ``confirm``: run a configuration that reached the target on until its
    samples-to-target interval closes above (narrower intervals for its rN, at the samples past its crossing; off by
    default: a trial stops at its first evaluation at or above the target, as the demo's and the ideal race's do,
    issue 36). ``on_update`` is called with the record so far after every re-plan (to write
    ``adaptive.json`` as it goes). Raises :class:`UserError` for an empty ladder or a bad parameter."""
    trials = list(trials)
    if not trials:
        raise UserError("an adaptive sweep needs at least one trial", field="batches")
    if budget < 1:
        raise UserError(f"budget must be >= 1 sample, got {budget}", field="samples")
    if skip_after is not None and skip_after < 1:
        raise UserError(f"skip_after must be >= 1 lost batch, got {skip_after}", field="skip_after")
    if min_eval_points < 3:
        raise UserError(f"min_eval_points must be >= 3 (a curve fit needs them), got {min_eval_points}",
                        field="min_eval_points")
    say = progress or (lambda _m: None)
    configs: dict[str, list[TrialRef]] = {}
    for t in trials:
        configs.setdefault(t.config, []).append(t)
    order = list(configs)
    batch = {c: configs[c][0].batch_size for c in order}
    step = {c: max(1, batch[c]) for c in order}
    chunk_of = {c: max(step[c], int(math.ceil((chunk or budget / 8) / step[c])) * step[c]) for c in order}
    state: dict[str, str] = {c: "pending" for c in order}   # pending | active | <outcome>
    reason: dict[str, str] = {}
    asked: dict[str, int] = {}  # run_id -> samples asked for so far
    runs: dict[str, Any] = {}
    decisions: list[Decision] = []
    last_plan: dict[str, Any] | None = None
    event = 0
    limit = len(order) if not max_active else max(1, int(max_active))

    def cand(plan, c):
        if plan is None:
            return None
        ids = {t.run_id for t in configs[c]}
        for x in plan["candidates"]:
            if x.get("runs") and set(x["runs"]) == ids:
                return x
            if not x.get("runs") and state[c] == "pending" and x["batch_size"] == batch[c]:
                return x
        return None

    def record(action, c, why, outcome=None, evidence=None):
        s = sum(run_samples(runs.get(t.run_id)) for t in configs[c])
        decisions.append(Decision(event, action, c, [t.run_id for t in configs[c]], why, outcome, s,
                                  evidence or {}))
        if action in ("stop", "skip"):
            say(f"B={batch[c]} {c}: {outcome} after {s:.0f} samples over its {len(configs[c])} seed(s): {why}")

    def start(c, why):
        state[c] = "active"
        for t in configs[c]:
            asked[t.run_id] = executor.start(t, min(budget, chunk_of[c]))
        record("start", c, why)

    def finish(c, outcome, why, evidence):
        state[c], reason[c] = outcome, why
        if outcome != SKIPPED:
            for t in configs[c]:
                executor.stop(t, why)
        record("skip" if outcome == SKIPPED else "stop", c, why, outcome, evidence)

    for c in order[:limit]:
        start(c, "probe" if limit > 1 else "first configuration of the ladder")
    fresh: dict[str, set[str]] = {c: set() for c in order}
    plan, best, best_cfg, now = None, None, None, None
    while any(state[c] in ("active", "pending") for c in order):  # a pending one starts when a slot frees
        new = executor.poll(poll_timeout)
        for rid in new:
            r = executor.read(rid)
            if r is not None:
                runs[rid] = r
                fresh[next(t.config for t in trials if t.run_id == rid)].add(rid)
        active = [c for c in order if state[c] == "active"]
        for c in active:  # a measured outcome needs no plan
            rs = [runs.get(t.run_id) for t in configs[c]]
            ci = measured(rs, target, metric, closed=confirm) if fresh[c] else None
            if ci is not None:
                finish(c, REACHED, "every seed reached the target: samples-to-target measured (95% interval "
                                   f"{_samples_iv(ci)})",
                       {"samples": [run_samples(r) for r in rs], "samples_to_target_ci": ci,
                        "eval_points": min(eval_points(r, metric) for r in rs)})
        # the race: a configuration already slower than the best measured time-to-target is stopped (no plan needed)
        if any(fresh.values()):
            clk = clock if clock != "auto" else clock_basis([r for r in runs.values() if r is not None])
            now = race({c: [runs.get(t.run_id) for t in configs[c]] for c in order
                        if state[c] not in ("pending", SKIPPED)}, target, metric, clk, reference=order[0])
            for c in [c for c in order if state[c] == "active"]:
                v = now.verdict(c)
                if v is not None:
                    rs = [runs.get(t.run_id) for t in configs[c]]
                    finish(c, v[0], v[1], {"time_floor_s": now.floors[c][0], "best": now.best,
                                           "best_time_to_target_s": now.best_s, "clock": clk,
                                           "samples": [run_samples(r) for r in rs],
                                           "eval_points": min(eval_points(r, metric) for r in rs)})
        active = [c for c in order if state[c] == "active"]
        # re-plan once every running trial has new data (a round) or is idle (waits for a decision)
        ready = all(all(t.run_id in fresh[c] or executor.idle(t.run_id) for t in configs[c]) for c in active) \
            and any(fresh[c] for c in order)
        if ready:
            event += 1
            for c in order:
                fresh[c] = set()
            have = [runs[t.run_id] for c in order for t in configs[c] if t.run_id in runs
                    and eval_points(runs[t.run_id], metric) > 0]
            pending_b = sorted({batch[c] for c in order if state[c] == "pending"})
            plan = None
            if len({r.meta.batch_size for r in have}) >= 2 or (have and pending_b):
                try:
                    plan = plan_runs(have, target, metric=metric, candidates=pending_b or None, tol=tol, n_boot=n_boot,
                                     extend=False, clock=clock)
                    last_plan = plan
                except UserError:
                    plan = None
            best = _best(plan) if plan else None
            crossed = earliest_crossing(have, target, metric)
            best_cfg = next((c for c in order if best is not None and best.get("runs")
                             and set(best["runs"]) == {t.run_id for t in configs[c]}), None)
            for c in active:
                rs = [runs.get(t.run_id) for t in configs[c]]
                x = cand(plan, c)
                ev = _evidence(x, best)
                npts = min(eval_points(r, metric) for r in rs)
                ev.update(eval_points=npts, samples=[run_samples(r) for r in rs])
                if c == order[0]:
                    continue  # the reference (the ladder's first configuration) runs to its target or budget
                v = stop_verdict(x, best if c != best_cfg else None, npts, min_eval_points,
                                 reference=plan.get("reference") if plan else None,
                                 samples=min(run_samples(r) for r in rs), crossed_at=crossed)
                if v is not None:
                    finish(c, v[0], v[1], ev)
            # the best is decided once nothing else is left to compare with
            active = [c for c in order if state[c] == "active"]
            # (not while another configuration's measured time-to-target is still to beat: then it races on)
            if len(active) == 1 and not any(state[c] == "pending" for c in order) and active[0] == best_cfg \
                    and len(order) > 1 and (now is None or now.best in (None, active[0])):
                c = active[0]
                finish(c, DECIDED, "every other configuration is decided (stopped, reached or skipped): the best "
                                   "predicted time-to-target", _evidence(cand(plan, c), best))
        # configurations not started yet: skip the ones that cannot win, start the next ones
        # configurations not started yet: start the next one when a slot is free; with skip_after, climb above the
        # lead (the best measured time-to-target, else the plan's best): skip once skip_after batches between the
        # lead and it lost, and start it only when no batch between the lead and it is still running
        lead = batch[now.best] if now is not None and now.best is not None else (
            best["batch_size"] if best is not None else None)
        lost = [batch[c] for c in order if state[c] in (CANNOT_WIN, NEVER)]
        for c in order:
            if state[c] != "pending":
                continue
            if skip_after and lead is not None and \
                    len(between := sorted(b for b in lost if lead < b < batch[c])) >= skip_after:
                finish(c, SKIPPED, f"smaller batches above the best, B={', '.join(map(str, between))}, already lost "
                                   f"to B={lead} (time-to-target taken as unimodal in B; skipped after {skip_after} "
                                   "losses)", _evidence(cand(plan, c), best))
        while sum(state[c] == "active" for c in order) < limit and any(state[c] == "pending" for c in order):
            c = next(c for c in order if state[c] == "pending")
            if skip_after and lead is not None and any(state[a] == "active" and lead < batch[a] < batch[c]
                                                     for a in order):
                break
            start(c, "a slot is free")
        # extend the active ones whose executor is idle
        for c in [c for c in order if state[c] == "active"]:
            for t in configs[c]:
                if not executor.idle(t.run_id):
                    continue
                got = run_samples(runs.get(t.run_id))
                n = asked[t.run_id] if got >= budget or asked[t.run_id] >= budget else \
                    executor.start(t, min(budget, asked[t.run_id] + chunk_of[c]))
                if n <= asked[t.run_id]:  # nothing more to run: its budget (or its job, or its stored log) is spent
                    for u in configs[c]:  # the last lines a job wrote before it ended
                        r = executor.read(u.run_id)
                        if r is not None:
                            runs[u.run_id] = r
                    rs = [runs.get(u.run_id) for u in configs[c]]
                    ev = {**_evidence(cand(plan, c), best), "samples": [run_samples(r) for r in rs]}
                    if all(reached(r, target, metric) for r in rs):
                        ci = measured(rs, target, metric)
                        finish(c, REACHED, "every seed reached the target by the end of its budget: samples-to-"
                                           f"target measured (95% interval {_samples_iv(ci)})", ev)
                    else:
                        finish(c, BUDGET, f"spent its budget of {min(budget, max(n, got)):.0f} samples without "
                                          "reaching the target", ev)
                    break
                asked[t.run_id] = n
                record("extend", c, f"undecided: extended to {n} samples", evidence=_evidence(cand(plan, c), best))
        if on_update is not None and ready:
            on_update(_result(executor, configs, order, state, reason, runs, decisions, last_plan, target, metric,
                              backend, event, batch))
    # what every trial spent: its run as it stands after the stops (a stopped chunk may have written past the
    # evaluation the loop stopped it on: issue 27, a Ray task cancelled mid-chunk), then the final plan over every run
    for t in trials:
        r = executor.read(t.run_id) if state[t.config] != SKIPPED else None
        if r is not None:
            runs[t.run_id] = r
    have = [runs[t.run_id] for c in order for t in configs[c] if t.run_id in runs]
    final = last_plan
    if len({r.meta.batch_size for r in have}) >= 2:
        try:
            final = plan_runs(have, target, metric=metric, tol=tol, n_boot=n_boot, extend=False, clock=clock)
        except UserError:
            pass
    final = _loop_pick(final, {c: cand(final, c) for c in order}, state)
    res = _result(executor, configs, order, state, reason, runs, decisions, final, target, metric, backend, event,
                  batch, done=True)
    if clock == "auto" and have:
        res.clock = clock_basis(have)
    return res


def _loop_pick(plan: dict[str, Any] | None, cands: dict[str, dict[str, Any] | None],
               state: dict[str, str]) -> dict[str, Any] | None:
    """The final plan with its pick among the configurations the loop did not stop as ``never reaches`` or
    ``cannot win`` (nor skip): the final plan re-fits everything that ran, and a trial stopped early can look
    better there (e.g. its fit open above, the noise model standing in) than the verdict that stopped it, which
    was on the evidence the loop acted on. ``cands``: {configuration: its candidate in ``plan``}. Returns the plan
    unchanged when its pick is allowed, else a copy with ``recommended`` / ``recommended_batch_size`` the allowed
    candidate of the smallest predicted relative time (None when there is none) and ``pick_note`` saying why."""
    if plan is None:
        return None
    lost = {c for c, st in state.items() if st in (NEVER, CANNOT_WIN, SKIPPED)}
    rec = plan.get("recommended")
    by_run = {x["run"]: c for c, x in cands.items() if x is not None and x.get("run") is not None}
    if by_run.get(rec) not in lost:
        return plan
    ok = [x for c, x in cands.items() if x is not None and c not in lost and x.get("runs")
          and x.get("predicted_relative_time") is not None]
    best = min(ok, key=lambda x: (x["predicted_relative_time"], x["batch_size"] or 0), default=None)
    return {**plan, "recommended": best["run"] if best else None,
            "recommended_batch_size": best["batch_size"] if best else None,
            "within_noise": [w for w in plan.get("within_noise") or [] if by_run.get(w) not in lost],
            "pick_note": f"the final plan ranked {rec} first, which the loop had stopped ({state[by_run[rec]]}); "
                         "picked among the configurations it did not stop"}


def _samples_iv(ci) -> str:
    return format_interval(ci, ".0f", sep="-", unbounded="open above", missing="none yet")


def _iv(ci) -> str:
    return f"[{format_interval(ci, sep=', ', unbounded='open')}]" if ci else "-"


def _result(executor, configs, order, state, reason, runs, decisions, plan, target, metric, backend, event, batch,
            done: bool = False) -> AdaptiveResult:
    have = [r for r in runs.values() if r is not None]
    clk = clock_basis(have) if have else "wall"
    outcomes = []
    for c in order:
        x = None
        if plan is not None:
            ids = {t.run_id for t in configs[c]}
            x = next((k for k in plan["candidates"] if k.get("runs") and set(k["runs"]) == ids), None)
        for t in configs[c]:
            r = runs.get(t.run_id)
            outcomes.append(TrialOutcome(
                run_id=t.run_id, config=c, batch_size=batch[c], state=state[c], samples=run_samples(r),
                time_s=run_seconds(r, clk), decided_by=reason.get(c, state[c]),
                relative_time=x.get("predicted_relative_time") if x else None, interval=x.get("interval") if x else None,
                rN=x.get("rN") if x else None, rN_source=x.get("rN_source") if x else None,
                resume=executor.resume_hint(t) if state[c] not in (SKIPPED, "pending") else None))
    ended = [d for d in decisions if d.action in ("stop", "skip")]
    if done:
        why = ("every configuration was decided: " + "; ".join(f"{d.config} {d.outcome}" for d in ended)) if ended \
            else "no trial ran"
    else:
        why = "running"
    return AdaptiveResult(backend=backend, target=target, metric=metric, clock=clk,
                          reference=plan.get("reference") if plan else None,
                          recommended=plan.get("recommended") if plan else None,
                          recommended_batch_size=plan.get("recommended_batch_size") if plan else None,
                          within_noise=list(plan.get("within_noise") or []) if plan else [],
                          samples_spent=float(sum(o.samples for o in outcomes)),
                          time_spent_s=float(sum(o.time_s for o in outcomes)), stopped_because=why,
                          trials=outcomes, decisions=list(decisions), plan=plan, replans=event)
