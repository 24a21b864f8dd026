"""The online batch controller's loop (issue 55): one run that finds its batch, on any environment that trains a step.

Every ``window`` steps the controller estimates the noise scale B_noise from the window's gradient statistics (the
simple noise scale from two batch sizes inside each step, :func:`rlbatch.analysis.noise.noise_estimates`, the
window's |G|^2 and tr(Sigma) averaged before dividing, with a 90% interval from a bootstrap over the window's steps),
fits the time per step against B over every step timed so far (:func:`rlbatch.analysis.goodput.fit_time_model`;
before the first decision it runs ``probe_steps`` at the neighbouring candidates so that two batch sizes are timed),
and moves to the candidate of highest predicted goodput when :func:`rlbatch.analysis.goodput.choose_batch` says so.
Every decision is kept with its evidence (:class:`ControllerResult`).

An environment (:class:`Environment`) trains one step at a batch and returns its timing and gradient statistics.
:class:`SyntheticEnvironment` is the synthetic backend's model (:class:`rlbatch.backends.synthetic.SyntheticModel`:
B_simple = b_noise, step time gen_s + train_s_per_response x B, so the best batch is B* = sqrt(gen_s x b_noise /
train_s_per_response)) with per-step noise on the squared gradient norms and the time.

The trainer's ``--batch auto`` runs the same :class:`Controller` one step at a time (:mod:`rlbatch.train.auto`).
Not yet: the advisory mode (the TRL callback, ``watch``) and the evaluation on the demo task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from rlbatch.analysis.goodput import THRESHOLD, Choice, TimeModel, choose_batch, fit_time_model
from rlbatch.analysis.noise import noise_estimates
from rlbatch.backends.synthetic import SyntheticModel

#: the level of B_noise's interval (two-sided; each move is tested at one end: one-sided 95%)
LEVEL = 0.90
#: B_noise where the window resolves no noise (tr(Sigma) not above 0), in responses
FLOOR = 1e-6
#: a decision looks at most this factor away from the current batch (a trust region for the fitted time model)
REACH = 4.0


class Environment(Protocol):
    def step(self, batch: int) -> dict[str, float]:
        """Train one step at ``batch`` retained responses; returns ``step_s`` (seconds), ``b_small``, ``b_big``
        (the two batch sizes of the noise statistics, responses) and ``g_small_sq``, ``g_big_sq`` (the squared
        norms of the mean gradient over them)."""


@dataclass
class SyntheticEnvironment:
    """The synthetic backend's model as a step-by-step environment: ``noise`` is the relative (log-normal) noise of
    each squared gradient norm, the time noise is the model's ``time_noise``; ``group_size`` is the small batch of
    the noise statistics (one group)."""

    model: SyntheticModel
    seed: int = 0
    noise: float = 0.05
    group_size: int = 8
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def step(self, batch: int) -> dict[str, float]:
        m, r = self.model, self.rng
        g2, trace = 1.0, m.b_noise  # |G|^2 = 1, tr(Sigma) = b_noise: B_simple = b_noise
        return {"step_s": m.step_time(batch) * (1 + r.normal(0.0, m.time_noise)),
                "b_small": float(self.group_size), "b_big": float(batch),
                "g_small_sq": (g2 + trace / self.group_size) * math.exp(r.normal(0.0, self.noise)),
                "g_big_sq": (g2 + trace / batch) * math.exp(r.normal(0.0, self.noise))}


def b_noise_window(rows: Sequence[dict[str, float]], n_boot: int = 500, level: float = LEVEL,
                   seed: int = 0) -> tuple[float, tuple[float, float]]:
    """B_noise from steps' gradient statistics (``rows`` as :meth:`Environment.step` returns them): tr(Sigma) and
    |G|^2 per step (McCandlish et al. 2018, appendix A), averaged over the steps, then divided; its ``level``
    interval by a bootstrap over the steps. An average |G|^2 not above 0 gives inf (the noise scale is not bounded
    above by these steps); a tr(Sigma) not above 0 gives :data:`FLOOR` (no noise resolved: the smallest batch is the
    most efficient)."""
    est = np.array([noise_estimates(r["g_small_sq"], r["g_big_sq"], r["b_small"], r["b_big"]) for r in rows])

    def ratio(e: np.ndarray) -> float:
        g2, tr = e[..., 0].mean(-1), e[..., 1].mean(-1)
        return np.where(g2 > 0, np.maximum(tr, FLOOR * g2) / np.where(g2 > 0, g2, 1.0), np.inf)

    point = float(ratio(est))
    idx = np.random.default_rng(seed).integers(0, len(est), (n_boot, len(est)))
    boot = ratio(est[idx])
    a = (1 - level) / 2
    return point, (float(np.quantile(boot, a, method="lower")), float(np.quantile(boot, 1 - a, method="higher")))


@dataclass
class ControllerResult:
    """``schedule``: the batch of each step (index = step); ``decisions``: every :class:`Choice`, at its ``step``;
    ``settled``: the batch of the last step; ``moves``: how many decisions moved the batch."""

    schedule: list[int]
    decisions: list[Choice]

    @property
    def settled(self) -> int:
        return self.schedule[-1]

    @property
    def moves(self) -> int:
        return sum(d.moved for d in self.decisions)

    def to_json(self) -> dict[str, Any]:
        return {"settled": self.settled, "moves": self.moves, "schedule": self.schedule,
                "decisions": [choice_json(d) for d in self.decisions]}


#: the keys of a step's row the controller keeps (:meth:`Environment.step`)
ROW_KEYS = ("step_s", "b_small", "b_big", "g_small_sq", "g_big_sq")


class Controller:
    """The controller's state, one step at a time (module docstring): :meth:`next_batch` says the batch of the next
    step, :meth:`observe` takes that step's row and returns the :class:`Choice` made after it (every ``window``
    steps at the current batch), or None. ``start`` is one of ``candidates``; the probes (``probe_steps`` at the
    candidates next to ``start``) come first and count as steps. A decision considers the candidates within a
    factor ``reach`` of the current batch: the time model is a line fitted near the batches timed so far, and a
    noisy slope near 0 would otherwise send the batch to the largest candidate in one move (seen: 16 -> 16,384 ->
    128 at b_noise 4). :meth:`to_state` / :meth:`from_state`: everything it holds, as JSON (a checkpoint's)."""

    def __init__(self, start: int, candidates: Sequence[int], *, window: int = 20, probe_steps: int = 3,
                 threshold: float = THRESHOLD, reach: float = REACH, seed: int = 0):
        self.candidates = sorted(set(int(c) for c in candidates))
        if start not in self.candidates:
            raise ValueError(f"start batch {start} is not among the candidates {self.candidates}")
        if window < 2:
            raise ValueError(f"window must be at least 2 steps, got {window}")
        self.window, self.threshold, self.reach, self.seed = int(window), float(threshold), float(reach), int(seed)
        i = self.candidates.index(start)
        self.probes = [self.candidates[j] for j in (i - 1, i + 1) if 0 <= j < len(self.candidates)
                       for _ in range(probe_steps)]
        self.batch = int(start)
        self.schedule: list[int] = []
        self.timed_b: list[float] = []
        self.timed_t: list[float] = []
        self.recent: list[dict[str, float]] = []
        self.since = 0  # steps at the current batch since the last decision
        self.decisions: list[Choice] = []

    def next_batch(self) -> int:
        """The batch of the next step: the next probe, else the current batch."""
        return self.probes[0] if self.probes else self.batch

    def observe(self, batch: int, row: dict[str, float]) -> Choice | None:
        """Record one step trained at ``batch`` (``row``: its :data:`ROW_KEYS`; only ``step_s`` where its gradient
        statistics are unusable: timed, not used for B_noise); after ``window`` steps at the current batch (two of
        them with statistics at least), decide (the move, if any, applies from the next step) and return the
        decision."""
        self.schedule.append(int(batch))
        self.timed_b.append(float(batch))
        self.timed_t.append(float(row["step_s"]))
        if self.probes:
            self.probes.pop(0)
            return None
        self.since += 1
        if all(k in row for k in ROW_KEYS):
            self.recent.append({k: float(row[k]) for k in ROW_KEYS})
        if self.since < self.window or len(self.recent) < 2:
            return None
        point, ci = b_noise_window(self.recent, seed=self.seed + len(self.schedule))
        near = [c for c in self.candidates if self.batch / self.reach <= c <= self.batch * self.reach]
        choice = choose_batch(self.batch, near, point, fit_time_model(self.timed_b, self.timed_t), ci,
                              self.threshold)
        choice = Choice(**{**choice.__dict__, "step": len(self.schedule)})
        self.decisions.append(choice)
        if choice.moved:
            self.batch = choice.batch
        self.recent, self.since = [], 0
        return choice

    def result(self) -> ControllerResult:
        return ControllerResult(list(self.schedule), list(self.decisions))

    def to_state(self) -> dict[str, Any]:
        return {"candidates": self.candidates, "window": self.window, "threshold": self.threshold,
                "reach": self.reach, "seed": self.seed, "probes": self.probes, "batch": self.batch,
                "schedule": self.schedule, "timed_b": self.timed_b, "timed_t": self.timed_t, "recent": self.recent,
                "since": self.since,
                "decisions": [choice_json(d) for d in self.decisions]}

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> "Controller":
        c = cls(int(s["batch"]), s["candidates"], window=int(s["window"]), probe_steps=0,
                threshold=float(s["threshold"]), reach=float(s["reach"]), seed=int(s["seed"]))
        c.probes = [int(b) for b in s["probes"]]
        c.schedule = [int(b) for b in s["schedule"]]
        c.timed_b, c.timed_t = [float(b) for b in s["timed_b"]], [float(t) for t in s["timed_t"]]
        c.recent = [dict(r) for r in s["recent"]]
        c.since = int(s.get("since", len(c.recent)))
        c.decisions = [choice_of(d) for d in s["decisions"]]
        return c


def choice_json(d: Choice) -> dict[str, Any]:
    """One decision with its evidence, as JSON (the run store's ``controller.jsonl`` line, :class:`ControllerResult`)."""
    return {"step": d.step, "batch": d.batch, "current": d.current, "moved": d.moved, "gain": d.gain,
            "gain_at_bound": d.gain_at_bound, "b_noise": d.b_noise, "b_noise_ci": list(d.b_noise_ci),
            "time": [d.time.intercept, d.time.slope], "time_points": d.time.n_points,
            "time_batches": list(d.time.batches), "relative_time": {str(k): v for k, v in d.relative_time.items()},
            "why": d.why}


def choice_of(j: dict[str, Any]) -> Choice:
    """The :class:`Choice` of a :func:`choice_json` line."""
    return Choice(int(j["batch"]), int(j["current"]), bool(j["moved"]), float(j["gain"]), float(j["gain_at_bound"]),
                  {int(k): float(v) for k, v in j["relative_time"].items()}, float(j["b_noise"]),
                  (float(j["b_noise_ci"][0]), float(j["b_noise_ci"][1])), TimeModel(float(j["time"][0]), float(j["time"][1]), int(j.get("time_points") or 0),
                                    tuple(int(b) for b in j.get("time_batches") or ())), j.get("why", ""),
                  j.get("step"))


def run_controller(env: Environment, start: int, candidates: Sequence[int], steps: int, *, window: int = 20,
                   probe_steps: int = 3, threshold: float = THRESHOLD, reach: float = REACH,
                   seed: int = 0) -> ControllerResult:
    """Train ``steps`` steps on ``env`` from batch ``start`` (one of ``candidates``) under a :class:`Controller`."""
    c = Controller(start, candidates, window=window, probe_steps=probe_steps, threshold=threshold, reach=reach,
                   seed=seed)
    while len(c.schedule) < steps:
        b = c.next_batch()
        c.observe(b, env.step(b))
    return c.result()


def optimum(model: SyntheticModel) -> float:
    """B* = sqrt(gen_s x b_noise / train_s_per_response): the batch of highest goodput under the synthetic model."""
    return math.sqrt(model.gen_s * model.b_noise / model.train_s_per_response)
