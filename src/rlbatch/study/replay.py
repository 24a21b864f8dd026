"""A finished sweep replayed as live jobs, decided by the adaptive loop: what the adaptive sweep would have spent and
picked had it watched those trials as they ran.

Every stored run becomes a launched job (:class:`rlbatch.backends.executors.ReplayJob`) whose log (verl's file logger
JSONL, or the run store itself) is written line by line in the order of the runs' own clocks (all trials start
together, as a cluster running the ladder in parallel would), and :func:`rlbatch.study.adaptive.decide` watches the
logs through :class:`rlbatch.backends.executors.LogExecutor`, exactly as it watches a launched verl job; a stopped job
writes nothing more, so the samples and seconds it spent are those of the lines it let through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from rlbatch.backends.executors import LogExecutor, ReplayFeed
from rlbatch.errors import UserError
from rlbatch.runstore import Run
from rlbatch.study.adaptive import AdaptiveResult, TrialRef, decide, run_samples
from rlbatch.study.ladder import config_id


def ladder_runs(runs: Sequence[Run], rules: Sequence[str] = ("sqrt",)) -> list[Run]:
    """The runs of a sweep's ladder: those on an LR rule in ``rules`` (the fixed-LR control is a diagnostic, not a
    candidate), ordered by batch size then run id (the first configuration is the plan's reference). Raises
    :class:`UserError` when none is left or a batch size is unknown."""
    out = [r for r in runs if (r.meta.lr_rule or "sqrt") in rules]
    if not out:
        raise UserError(f"no run on the LR rule(s) {', '.join(rules)} to replay", field="lr_rule")
    bad = [r.run_id for r in out if not r.meta.batch_size]
    if bad:
        raise UserError(f"batch size unknown for {', '.join(bad)}", field="batch_size")
    return sorted(out, key=lambda r: (r.meta.batch_size, r.run_id))


def replay_sweep(runs: Sequence[Run], out_dir: Path | str, *, target: float, fmt: str = "verl-jsonl",
                 metric: str = "eval/score", min_eval_points: int = 6, n_boot: int = 200, tol: float = 0.1,
                 progress: Callable[[str], None] | None = None, **kw: Any) -> AdaptiveResult:
    """Replay ``runs`` (a finished sweep; see :func:`ladder_runs`) as live jobs writing ``fmt`` logs into
    ``out_dir`` and decide them with :func:`rlbatch.study.adaptive.decide` (``budget`` = the longest run's
    samples; each job runs to its stored end unless stopped). The trials' configurations group seeds as
    :func:`rlbatch.study.ladder.config_id` (``B64-G8-sqrt-s1`` -> ``B64-G8-sqrt``). ``kw``: further options of
    :func:`decide`. Returns its record (backend ``replay:<fmt>``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    feed = ReplayFeed(out, fmt, metric)
    trials = []
    for r in runs:
        job = feed.job(r, r.run_id)
        m = r.meta
        spec = {"log_path": str(job.log_path), "log_format": fmt, "prompts_per_step": m.prompts_per_step,
                "group_size": m.group_size, "batch_size": m.batch_size, "lr": m.lr, "lr_rule": m.lr_rule, "base_batch": m.base_batch,
                "base_lr": m.base_lr, "seed": m.seed, "samples": int(run_samples(r)) if fmt == "rlbatch" else
                int(len(r.metrics) * m.batch_size), "job": job}
        trials.append(TrialRef(run_id=r.run_id, batch_size=int(m.batch_size), config=config_id(r.run_id), spec=spec))
    ex = LogExecutor(trials, feed=feed)
    return decide(ex, trials, target=target, metric=metric, budget=max(t.spec["samples"] for t in trials),
                  min_eval_points=min_eval_points, n_boot=n_boot, tol=tol, backend=f"replay:{fmt}",
                  progress=progress, **kw)
