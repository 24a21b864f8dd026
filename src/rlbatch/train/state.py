"""What one training step hands to the next, shared by our trainer (:mod:`rlbatch.train.trainer`) and the TRL
callback (:mod:`rlbatch.integrations.trl_callback`): the run's counters (:class:`StepState`), the policy and what updates
it (:class:`Learner`), and what an update did (:class:`UpdateResult`); a step's batch is
:class:`rlbatch.train.rollout.Batch`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: StepState attribute -> its key in a checkpoint's ``state`` dict and in the metrics/eval lines (DESIGN.md names).
_KEYS = {"step": "step", "samples_retained": "samples/retained", "samples_generated": "samples/generated",
         "tokens_generated": "tokens/generated", "tokens_trained": "tokens/trained", "wall_s": "time/wall_s",
         "next_eval": "next_eval", "hold": "hold", "metrics_lines": "metrics_lines", "eval_lines": "eval_lines",
         "last_eval": "last_eval", "last_eval_step": "last_eval_step", "empty": "empty"}


@dataclass
class StepState:
    """The run's counters after ``step`` optimizer steps (``step`` is also the data sampler's position):
    cumulative retained / generated responses and tokens, wall-clock seconds without evaluation, the retained-sample
    count of the next evaluation, consecutive evaluations at or above the target (``hold``), lines written to
    metrics.jsonl / eval.jsonl, the last evaluation's score and step, consecutive steps with nothing retained
    (``empty``). A checkpoint keeps it as :meth:`to_dict` (the DESIGN.md names as keys)."""

    step: int = 0
    samples_retained: int = 0
    samples_generated: int = 0
    tokens_generated: int = 0
    tokens_trained: int = 0
    wall_s: float = 0.0
    next_eval: float = 0
    hold: int = 0
    metrics_lines: int = 0
    eval_lines: int = 0
    last_eval: float | None = None
    last_eval_step: int | None = None
    empty: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint's ``state`` dict (keys: ``step``, ``samples/retained``, ..., ``time/wall_s``, ...)."""
        return {key: getattr(self, attr) for attr, key in _KEYS.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StepState":
        """Inverse of :meth:`to_dict`; missing keys keep their defaults."""
        return cls(**{attr: d[key] for attr, key in _KEYS.items() if key in d})

    def advance(self, step: int, retained: int, generated: int, tokens_generated: int, tokens_trained: int,
                seconds: float) -> None:
        """Count optimizer step ``step``: ``retained`` / ``generated`` responses, their tokens, its seconds."""
        self.step = step
        self.empty = 0 if retained else self.empty + 1
        self.samples_retained += retained
        self.samples_generated += generated
        self.tokens_generated += tokens_generated
        self.tokens_trained += tokens_trained
        self.wall_s += seconds

    def counters(self) -> dict[str, Any]:
        """The cumulative part of a metrics line: ``step``, ``samples/*``, ``tokens/*`` (``time/wall_s`` is
        written after the step's own timings)."""
        return {"step": self.step, "samples/retained": self.samples_retained,
                "samples/generated": self.samples_generated, "tokens/generated": self.tokens_generated,
                "tokens/trained": self.tokens_trained}

    def eval_due(self) -> bool:
        """True when the retained samples have reached the next evaluation point."""
        return self.samples_retained >= self.next_eval

    def eval_line(self, score: float, n: int, seconds: float, target: float | None = None) -> dict[str, Any]:
        """Record an evaluation of ``n`` items scoring ``score`` in ``seconds`` at this step (and, with a
        ``target``, the count of consecutive evaluations at or above it); returns its eval.jsonl line."""
        self.last_eval, self.last_eval_step = score, self.step
        if target is not None:
            self.hold = self.hold + 1 if score >= target else 0
        return {"step": self.step, "samples/retained": self.samples_retained,
                "samples/generated": self.samples_generated, "eval/score": score, "eval/n": n,
                "time/eval_s": seconds, "time/wall_s": self.wall_s}

    def schedule_next_eval(self, every: int) -> None:
        """Move the next evaluation point past the retained samples, in steps of ``every``."""
        while self.next_eval <= self.samples_retained:
            self.next_eval += every


@dataclass
class UpdateResult:
    """What an update function (:func:`rlbatch.train.grpo.grpo_update`, :func:`rlbatch.train.ppo.ppo_update`) did
    with a batch: ``metrics`` (its metrics-line entries: grad norms, losses, noise inputs, ...), ``retained``
    responses trained on, ``groups_retained`` of ``groups`` prompts, ``tokens_trained``."""

    metrics: dict[str, Any]
    retained: int
    groups_retained: int
    groups: int
    tokens_trained: int


@dataclass
class Learner:
    """The policy being trained and what an update function needs besides the batch: its ``optimizer`` and
    learning rate ``lr``, the run's ``cfg`` (:class:`rlbatch.train.config.TrainConfig`), ``micro`` (responses per
    micro-batch), the frozen ``ref_model`` of the KL term (None without one), PPO's ``critic``
    (:class:`rlbatch.train.ppo.PPOParts`; None for GRPO) and ``backward(loss, params) -> loss``, each
    micro-batch's backward pass (None: :func:`rlbatch.train.grpo.backward_pass`; the trainer's carries the armed
    fault points)."""

    model: Any
    optimizer: Any
    lr: float
    cfg: Any
    micro: int
    ref_model: Any = None
    critic: Any = None
    backward: Any = None
