"""Typed results of the analysis: an :class:`Estimate` (a number, its interval and where it came from), one
:class:`Configuration` (its seeds' samples-to-target, time-to-target and throughput) and its :class:`Comparison`
with the reference (rN, relative throughput, relative time, the verdict).

Measured and predicted values share :class:`Estimate` and say which they are in ``source``. The JSON of
``rlbatch analyze`` / ``plan`` / report.json keeps its flat keys (``rN``, ``rN_ci``, ``rN_source``, ...):
:meth:`Estimate.flat` writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

#: Level of the accounting's intervals (95% percentile bootstrap).
ACCOUNTING_LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """``value`` with its interval ``[lo, hi]`` at ``level`` (e.g. 0.95; ``hi`` None or +inf: open above; ``level``
    None: no interval) and its
    ``source``: ``measured`` (from the runs: the accounting's bootstrap) or how it was predicted (``fit``: the
    saturating fit of a curve; ``noise-model``: McCandlish et al. 2018; ``model`` / ``profile``: the throughput
    model; ``table``, ``interpolated``). ``value`` None: unknown (e.g. not reached)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    level: float | None = None
    source: str | None = "measured"

    @classmethod
    def of(cls, value: float | None, ci: Any = None, level: float | None = ACCOUNTING_LEVEL,
           source: str | None = "measured") -> "Estimate":
        """From a value and an interval as the JSON holds it (``[lo, hi]`` or None)."""
        lo, hi = (ci[0], ci[1]) if ci else (None, None)
        return cls(value, lo, hi, level if ci else None, source)

    @property
    def ci(self) -> list[float | None] | None:
        """The interval as JSON holds it: ``[lo, hi]``, or None without one."""
        return None if self.level is None else [self.lo, self.hi]

    @property
    def predicted(self) -> bool:
        """Whether the value is a prediction (not measured from the runs)."""
        return self.source is not None and self.source != "measured"

    def flat(self, key: str, *, source: bool = False) -> dict[str, Any]:
        """``{key: value, key_ci: [lo, hi] | None}`` (and ``key_source`` with ``source``): the JSON's flat form."""
        out: dict[str, Any] = {key: self.value, f"{key}_ci": self.ci}
        if source:
            out[f"{key}_source"] = self.source
        return out


@dataclass(frozen=True, eq=False)
class Replicates:
    """The bootstrap replicates of one configuration (arrays of equal length, or None): samples-to-target ``S``,
    time-to-target ``T``, throughput ``X``; ratios of two configurations take each side's independently."""

    S: np.ndarray | None = None
    T: np.ndarray | None = None
    X: np.ndarray | None = None


@dataclass(frozen=True)
class Configuration:
    """One configuration (the seeds of one setting, :func:`rlbatch.analysis.curves.group_seeds`) at the target:
    :func:`rlbatch.analysis.accounting.estimate_configuration` typed. ``throughput`` is to the target when it was
    reached (``source`` ``measured: to target``), else over the whole run (``measured: whole run``)."""

    name: str
    batch_size: int | None
    prompts_per_step: int | None
    group_size: int | None
    lr: float | None
    lr_rule: str | None
    runs: tuple[str, ...]
    n_seeds: int
    n_reached: int
    reached: bool
    samples_to_target: Estimate
    samples_to_target_per_seed: tuple[float | None, ...]
    time_to_target: Estimate
    throughput: Estimate
    best_score: float | None
    clock: str
    replicates: Replicates = field(default_factory=Replicates, repr=False, compare=False)

    @classmethod
    def from_estimate(cls, est: dict[str, Any]) -> "Configuration":
        """From :func:`rlbatch.analysis.accounting.estimate_configuration`'s dict."""
        reps = est.get("_replicates") or {}
        return cls(name=est["config"], batch_size=est["batch_size"], prompts_per_step=est["prompts_per_step"],
                   group_size=est["group_size"], lr=est["lr"], lr_rule=est["lr_rule"], runs=tuple(est["runs"]),
                   n_seeds=est["n_seeds"], n_reached=est["n_reached"], reached=est["reached"],
                   samples_to_target=Estimate.of(est["samples_to_target"], est["samples_to_target_ci"]),
                   samples_to_target_per_seed=tuple(est["samples_to_target_per_seed"]),
                   time_to_target=Estimate.of(est["time_to_target_s"], est["time_to_target_ci"]),
                   throughput=Estimate.of(est["throughput_samples_per_s"], est["throughput_ci"],
                                          source=f"measured: {est['throughput_window']}"),
                   best_score=est["best_score"], clock=est["clock"],
                   replicates=Replicates(reps.get("S"), reps.get("T"), reps.get("X")))


@dataclass(frozen=True)
class Comparison:
    """One configuration against the reference (an accounting row, :func:`rlbatch.analysis.accounting.compare`
    and :func:`rlbatch.analysis.accounting.verdict_label`): rN, relative throughput and relative time with their
    95% intervals, the verdict and ``faster_than_reference`` (the verdict is ``faster``: the two cannot
    disagree)."""

    config: str
    reference: str | None
    rN: Estimate
    relative_throughput: Estimate
    relative_time: Estimate
    verdict: str
    faster_than_reference: bool

    @classmethod
    def from_row(cls, row: dict[str, Any], reference: str | None) -> "Comparison":
        """From one accounting row (:func:`rlbatch.analysis.accounting.account_runs`)."""
        return cls(config=row["run"], reference=reference, rN=Estimate.of(row["rN"], row.get("rN_ci")),
                   relative_throughput=Estimate.of(row["relative_throughput"], row.get("relative_throughput_ci")),
                   relative_time=Estimate.of(row["relative_time"], row.get("relative_time_ci")),
                   verdict=row["verdict"], faster_than_reference=row["faster_than_reference"])


def at_most_only(e: Mapping[str, Any]) -> bool:
    """Whether a configuration's estimate (:func:`rlbatch.analysis.estimate.estimate_configuration`'s dict) is known
    only by upper bounds: every seed reached the target, some before their first evaluation after 0
    (interval-censored, S in (0, x1], statistics review 2, N1), none stopped or unfinished."""
    return bool(e.get("at_most")) and e.get("samples_to_target_at_most") is not None and not e.get("stopped") \
        and not e.get("unfinished")
