"""The study result: the one object every page renders (issue 54).

The data's path: readers -> run store (:class:`rlbatch.runstore.Run`) -> :class:`rlbatch.analysis.study.Study`
(the accounting and decision, the noise summary, the throughput model, the asynchronous comparison, each computed
once) -> :class:`StudyResult` (the study and its plan, :func:`rlbatch.plan.plan_runs`) -> renderers (the report,
``analyze``, ``plan``, ``watch``), which compute nothing.

The plan sits above the study (it reads the study's accounting and estimates), so the study cannot hold it without
an import circle; this module is the layer above both. The report takes a :class:`StudyResult`, and builds one
only when its caller gave none (as it builds a :class:`Study` then).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rlbatch.analysis.study import Study
from rlbatch.errors import UserError
from rlbatch.plan import plan_runs
from rlbatch.runstore import Run


@dataclass(frozen=True)
class StudyResult:
    """``study``: the analysis (:class:`rlbatch.analysis.study.Study`); ``plan``: :func:`rlbatch.plan.plan_runs`'s
    output over the study's synchronous runs against the accounting's reference (None without a target or when
    there is no plan); ``plan_error``: why there is none (a :class:`rlbatch.errors.UserError`'s message)."""

    study: Study
    plan: dict[str, Any] | None = None
    plan_error: str | None = None

    @classmethod
    def of(cls, runs: Sequence[Run], target: float | None, metric: str = "eval/score", reference: Any = None, *,
           ema: float | None = None, sustained: bool = False, clock: str = "auto",
           study: Study | None = None) -> "StudyResult":
        """The result of ``runs`` (``study``: an already built :class:`Study` of them, which then sets the target,
        metric, reference and clock)."""
        study = study or Study.of(list(runs), target, metric, reference, ema=ema, sustained=sustained, clock=clock)
        if study.target is None:
            return cls(study)
        ref = study.accounting.get("reference") or study.reference
        try:
            plan = plan_runs(list(study.synchronous_runs), study.target, metric=study.metric, reference=ref,
                             clock=study.clock, study=study)
        except UserError as err:
            return cls(study, None, str(err))
        return cls(study, plan)

    @classmethod
    def of_study(cls, study: Study) -> "StudyResult":
        """The result of an already built ``study`` (its runs, target, metric, reference and clock)."""
        return cls.of(study.runs, study.target, study=study)


__all__ = ["StudyResult"]
