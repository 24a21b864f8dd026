"""One analysis pass over a set of runs: the :class:`Study` every reader of the analysis shares.

The report, ``rlbatch analyze``, ``rlbatch plan``, the asynchronous-rollout section and the G x P equivalence all
need the same bootstrapped estimate of each configuration (samples-to-target, time-to-target, throughput and their
replicates, :func:`rlbatch.analysis.accounting.estimate_configuration`) and the same accounting
(:func:`rlbatch.analysis.accounting.accounting_summary`). A :class:`Study` computes each once: a configuration's
estimate is memoised by its runs and settings (its bootstrap seed comes from its name, so the estimate does not
depend on which other configurations it is analysed with: the memo returns exactly what a fresh call would), and the
accounting is computed on first use and kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Sequence

from rlbatch.analysis.accounting import (N_BOOT, account_runs, accounting_summary, comparison_groups,
                                         comparison_spread, estimate_configuration, summary_of)
from rlbatch.analysis.asynchrony import async_comparison, synchronous
from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.decision import TOLERANCE, aligned_family
from rlbatch.analysis.interval import SpreadPrior
from rlbatch.analysis.noise_summary import noise_summary
from rlbatch.analysis.shape import ReferenceShape
from rlbatch.analysis.results import Comparison, Configuration
from rlbatch.analysis.summaries import configuration_summaries, run_summaries, seed_rows
from rlbatch.analysis.throughput import clock_basis, configuration_timings
from rlbatch.analysis.throughput_summary import throughput_summary
from rlbatch.errors import UserError
from rlbatch.runstore import Run


@dataclass(frozen=True)
class Study:
    """The runs and the settings of one analysis, with the estimates and the accounting computed once.

    ``runs``: the run-store runs (seeds of a configuration grouped by :func:`rlbatch.analysis.curves.group_seeds`);
    ``target``: score of ``metric`` to reach (None: no accounting); ``reference``: a configuration, run id or batch
    size (default: the smallest batch that reached the target); ``ema`` / ``sustained``: how a crossing is found;
    ``clock``: ``auto``, ``wall`` or ``cpu`` as asked (:attr:`basis` is the one used); ``n_boot``: bootstrap
    replicates per configuration; ``sequential``: the record of the sequential study that collected the runs
    (``OUT/sequential.json``, :meth:`rlbatch.study.sequential.SequentialResult.to_json`), whose last look the
    decision repeats: its boundary's tail for "faster", only its claims called faster, its pick (one answer on every
    page, issue 52); :meth:`of` keeps it only for the study's own question (its target, metric and reference, no
    EMA, not sustained)."""

    runs: tuple[Run, ...]
    target: float | None
    metric: str = "eval/score"
    reference: Any = None
    ema: float | None = None
    sustained: bool = False
    clock: str = "auto"
    n_boot: int = N_BOOT
    sequential: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, runs: Sequence[Run], target: float | None, metric: str = "eval/score", reference: Any = None, *,
           ema: float | None = None, sustained: bool = False, clock: str = "auto", n_boot: int | None = None,
           sequential: dict[str, Any] | None = None) -> "Study":
        """A study of ``runs`` (any sequence) with these settings (``n_boot``: default the sequential study's, else
        :data:`N_BOOT`)."""
        d = (sequential or {}).get("design") or {}
        if sequential and (d.get("target") != target or d.get("metric", "eval/score") != metric or ema is not None
                           or sustained or reference not in (None, sequential.get("reference"))):
            sequential = None  # another question than the one the study decided: analysed as a fixed design
        if sequential and not sequential.get("looks"):
            sequential = None  # the study stopped before its first look decided anything (e.g. no comparison)
        if reference is None and sequential:
            reference = sequential.get("reference")
        if n_boot is None:
            n_boot = int(d.get("n_boot") or N_BOOT) if sequential else N_BOOT
        return cls(tuple(runs), target, metric, reference, ema, sustained, clock, n_boot, sequential)

    @cached_property
    def basis(self) -> str:
        """The clock every time of the study is on (:func:`rlbatch.analysis.throughput.clock_basis`)."""
        return clock_basis(list(self.runs), self.clock) if self.runs else "wall"

    @cached_property
    def groups(self) -> dict[str, list[Run]]:
        """Configurations (name -> its seeds), :func:`rlbatch.analysis.curves.group_seeds`."""
        return group_seeds(list(self.runs))

    def estimate(self, runs: Sequence[Run], target: float | None, metric: str = "eval/score", *,
                 ema: float | None = None, sustained: bool = False, clock: str = "wall", n_boot: int = N_BOOT,
                 seed: int | None = None, name: str | None = None,
                 spread: SpreadPrior | None = None, shape: ReferenceShape | None = None) -> dict[str, Any]:
        """:func:`rlbatch.analysis.accounting.estimate_configuration` (same arguments, same result), computed once
        per study for each set of runs and arguments. The returned dict is shared: read it, do not change it."""
        runs = list(runs)
        key = (tuple(r.run_id for r in runs), target, metric, ema, sustained, clock, n_boot, seed, name,
               spread.key if spread is not None else None, shape.key if shape is not None else None)
        if key not in self.memo:
            self.memo[key] = estimate_configuration(runs, target, metric, ema=ema, sustained=sustained, clock=clock,
                                                    n_boot=n_boot, seed=seed, name=name, spread=spread, shape=shape)
        return self.memo[key]

    def configuration_estimate(self, runs: Sequence[Run]) -> dict[str, Any]:
        """The accounting's estimate of the configuration whose seeds are ``runs`` (:meth:`estimate` with the
        study's settings and the configuration's name in :attr:`groups`; runs that are not one configuration of the
        study are estimated as a configuration of their own, named after the first)."""
        ids = [r.run_id for r in runs]
        name = next((n for n, rs in self.groups.items() if [r.run_id for r in rs] == ids), None)
        try:
            acc = self.accounted
        except UserError:  # e.g. the reference never reached the target: each configuration on its own
            acc = None
        if name is not None and acc is not None and name in acc["estimates"] \
                and acc["estimates"][name]["runs"] == ids:
            return acc["estimates"][name]  # the accounting's own (a bound from the reference's shape included)
        spread = next((sp for members, sp in self.spreads if ids and ids[0] in members), None) if name else None
        return self.estimate(runs, self.target, self.metric, ema=self.ema, sustained=self.sustained,
                             clock=self.basis, n_boot=self.n_boot, name=name, spread=spread)

    @cached_property
    def spreads(self) -> list[tuple[frozenset, SpreadPrior | None]]:
        """Per comparison group (:func:`rlbatch.analysis.accounting.comparison_groups`): its run ids and the seed
        spread prior the accounting takes from its configurations (:func:`rlbatch.analysis.accounting.comparison_spread`),
        so that a configuration's estimate is the same wherever the study gives it."""
        if self.target is None:
            return []
        return [(frozenset(r.run_id for r in rs),
                 comparison_spread(group_seeds(rs), self.target, self.metric, ema=self.ema, sustained=self.sustained,
                                   clock=self.basis))
                for rs in comparison_groups(list(self.runs)).values()]

    @cached_property
    def accounted(self) -> dict[str, Any] | None:
        """:func:`rlbatch.analysis.accounting.account_runs` of the study's runs at :attr:`target`, computed once,
        when they are of one model / task / algorithm (else None, and without a target). Raises
        :class:`rlbatch.errors.UserError` as that function (on first use)."""
        if self.target is None or len(comparison_groups(self.runs)) != 1:
            return None
        seq = self.sequential if self.sequential and self.sequential.get("looks") else {}  # no look: no decision
        return account_runs(list(self.runs), self.target, self.metric, self.reference, ema=self.ema,
                            sustained=self.sustained, clock=self.clock, n_boot=self.n_boot, estimate=self.estimate,
                            faster_tail=seq["looks"][-1]["tail"] if seq else None, called=seq.get("faster"),
                            sequential_stop=seq.get("stop"))

    @cached_property
    def accounting(self) -> dict[str, Any] | None:
        """The accounting as ``rlbatch analyze`` and the report give it
        (:func:`rlbatch.analysis.accounting.accounting_summary`: per comparison group) at :attr:`target`, computed
        once; None without a target. Raises :class:`rlbatch.errors.UserError` as that function (on first use)."""
        if self.target is None:
            return None
        if self.accounted is not None:
            return summary_of(self.accounted)
        return accounting_summary(list(self.runs), self.target, self.metric, self.reference, ema=self.ema,
                                  sustained=self.sustained, clock=self.clock, n_boot=self.n_boot,
                                  estimate=self.estimate)

    @cached_property
    def synchronous_runs(self) -> list[Run]:
        """The study's synchronous runs (all of them when none is: :func:`rlbatch.analysis.asynchrony.synchronous`):
        what the noise fit, the throughput model, the plan and the aligned family are computed on."""
        return synchronous(list(self.runs))

    @cached_property
    def async_comparison(self) -> tuple[list[dict[str, Any]], str | None] | None:
        """Each asynchronous configuration against its synchronous partner at the same B, wall clock
        (:func:`rlbatch.analysis.asynchrony.async_comparison`, on this study's estimates): ``(rows, reference)``,
        or None when no run is asynchronous."""
        return async_comparison(list(self.runs), self.target, self.metric, n_boot=self.n_boot,
                                estimate=self.estimate)

    @cached_property
    def timings(self) -> list[dict[str, Any]]:
        """Each configuration's seconds per optimizer step by phase over its seeds' whole runs, on :attr:`basis`
        (:func:`rlbatch.analysis.throughput.configuration_timings`)."""
        return configuration_timings(self.groups, self.basis)

    def throughput(self, runs: Sequence[Run]) -> dict[str, Any]:
        """The throughput result over ``runs`` (those of this study the report fits the time model on:
        synchronous) on :attr:`basis`, with :attr:`timings` of the configurations they belong to
        (:func:`rlbatch.analysis.throughput_summary.throughput_summary`), computed once per runs."""
        key = ("throughput", tuple(r.run_id for r in runs))
        if key not in self.memo:
            ids = {r.run_id for r in runs}
            timing = [t for t in self.timings if any(r.run_id in ids for r in self.groups[t["config"]])]
            self.memo[key] = throughput_summary(list(runs), self.basis, timing)
        return self.memo[key]

    def noise(self, runs: Sequence[Run], family: Sequence[int] | None = None) -> dict[str, Any]:
        """The gradient-noise result over ``runs`` (those of this study the report fits noise on: on the LR rule,
        synchronous), the slope over the aligned ``family``'s batch sizes
        (:func:`rlbatch.analysis.noise_summary.noise_summary`, its G x P rN from this study's estimates), computed
        once per runs and family."""
        key = ("noise", tuple(r.run_id for r in runs), tuple(family) if family else None)
        if key not in self.memo:
            self.memo[key] = noise_summary(list(runs), self.target, self.metric, family,
                                           estimate=self.configuration_estimate)
        return self.memo[key]

    @cached_property
    def run_summaries(self) -> list[dict[str, Any]]:
        """Each run's whole-run summary (steps, samples, time and throughput on the study's clock, grad norms, last
        score; :func:`rlbatch.analysis.summaries.run_summaries`), in the study's run order."""
        return run_summaries(list(self.runs), self.clock)

    @property
    def _rows(self) -> list[dict[str, Any]]:
        return self.accounting["accounting"] if self.target is not None else []

    @cached_property
    def configuration_summaries(self) -> list[dict[str, Any]]:
        """Per configuration, means over each seed's whole run on :attr:`basis`, with the accounting's per-seed
        samples-to-target (:func:`rlbatch.analysis.summaries.configuration_summaries`)."""
        return configuration_summaries(self.groups, self._rows, self.metric, self.basis)

    @cached_property
    def seed_rows(self) -> list[dict[str, Any]]:
        """Per configuration, its seeds and their samples-to-target (:func:`rlbatch.analysis.summaries.seed_rows`)."""
        return seed_rows(self.groups, self._rows, self.metric)

    @cached_property
    def family(self) -> dict[str, Any] | None:
        """Where the aligned family ends (:func:`rlbatch.analysis.decision.aligned_family`, tolerance
        :data:`rlbatch.analysis.decision.TOLERANCE`) over the accounting rows of the synchronous runs (an
        asynchronous run at the same B is another system, newcomer finding 20), against the accounting's
        reference; None without a target, without a reference or for runs of several models / tasks /
        algorithms."""
        acc = self.accounting
        if acc is None or "comparisons" in acc:
            return None
        rows = acc["accounting"]
        sync_ids = {r.run_id for r in self.synchronous_runs}
        family_rows = [r for r in rows if set(r.get("runs") or [r["run"]]) <= sync_ids] or rows
        return aligned_family(family_rows, acc["reference"], TOLERANCE)

    @cached_property
    def configurations(self) -> dict[str, Configuration]:
        """Each configuration at the target, typed (:class:`rlbatch.analysis.results.Configuration`), from the
        accounting's estimates; {} without a target or when the runs are of several models / tasks /
        algorithms."""
        acc = self.accounted
        return {} if acc is None else {n: Configuration.from_estimate(e) for n, e in acc["estimates"].items()}

    @cached_property
    def comparisons(self) -> dict[str, Comparison]:
        """Each configuration against the reference, typed (:class:`rlbatch.analysis.results.Comparison`), from the
        accounting's rows; {} as :attr:`configurations`."""
        acc = self.accounted
        return {} if acc is None else {r["run"]: Comparison.from_row(r, acc["reference"]) for r in acc["rows"]}
