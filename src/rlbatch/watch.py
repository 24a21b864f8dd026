"""``rlbatch watch RUN_OR_LOG``: a live view of one running job or a whole sweep, re-read as it grows.

Each update reads the path again with the readers (a run store, a sweep tree, or any log format they know) and
shows, per configuration (the seeds of one batch size and LR rule): the score against retained samples with the
fitted curve (ScaleRL's saturating form, :func:`rlbatch.analysis.fit.fit_groups`, the plan's fit), the predicted
samples-to-target with its 95% interval (measured with its 95% interval once every seed reached the target:
:func:`rlbatch.analysis.accounting.estimate_configuration`), the throughput so far
(:func:`rlbatch.analysis.throughput.run_throughput` on the accounting's clock) and the predicted time-to-target =
samples-to-target / throughput (Li et al. 2026; the throughput taken as exact, as the plan does). For a sweep (two or
more batch sizes) also the plan's ranking (:func:`rlbatch.plan.plan_runs`: predicted relative time-to-target and its
interval) and which configurations the adaptive loop would stop now (:func:`rlbatch.study.adaptive.race`, then
:func:`rlbatch.study.adaptive.stop_verdict`); for an adaptive sweep (its ``adaptive.json``, rewritten after every
re-plan) the configurations the loop already ended, with its outcome and reason. Piped, each update is one line per
configuration. It ends when every trial has finished.

It only reads: nothing is written into the watched directory.
"""

from __future__ import annotations

import codecs
import io
import json
import math
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Group
from rich.live import Live
from rich.table import Table

from rlbatch.analysis.curves import metric_frame
from rlbatch.analysis.fit import fit_groups, sigmoid
from rlbatch.analysis.headline import time_text
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.results import at_most_only
from rlbatch.analysis.study import Study
from rlbatch.analysis.throughput import run_throughput
from rlbatch.errors import UserError
from rlbatch.output import Stages
from rlbatch.plan import plan_runs
from rlbatch.readers.collect import load_all
from rlbatch.readers.generic import missing_fields
from rlbatch.runstore import Run, lock_holder, sequential_of
from rlbatch.study.adaptive import earliest_crossing, eval_points, race, run_samples, stop_verdict

SPARK = "▁▂▃▄▅▆▇█"


@dataclass
class ConfigView:
    """One configuration at one update: ``samples`` (retained samples of its furthest seed),
    ``scores`` [(samples, score)] of its first seed, ``fitted`` [(samples, fitted score)] of the fit up to the
    predicted crossing, ``samples_to_target`` (+ ``_ci``, ``source``: measured | fit | never | open | at most: then
    ``samples_to_target`` and ``time_to_target_s`` are the accounting's upper bounds, every seed at the target by its
    first evaluation after 0),
    ``throughput_samples_per_s``, ``time_to_target_s`` (+ ``_ci``), ``elapsed_s``."""

    config: str
    runs: list[str]
    batch_size: int | None
    samples: float
    eval_points: int
    score: float | None
    scores: list[tuple[float, float]]
    fitted: list[tuple[float, float]] = field(default_factory=list)
    samples_to_target: float | None = None
    samples_to_target_ci: list[float | None] | None = None
    source: str | None = None
    throughput_samples_per_s: float | None = None
    elapsed_s: float | None = None
    time_to_target_s: float | None = None
    time_to_target_ci: list[float | None] | None = None
    why: str | None = None


@dataclass
class WatchUpdate:
    """One update of ``rlbatch watch`` (``--format json`` prints :meth:`to_json`, one object per line)."""

    update: int
    path: str
    target: float | None
    metric: str
    clock: str
    configs: list[ConfigView]
    recommended: Any = None
    ranking: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    #: {configuration: "outcome: why"} of the configurations an adaptive sweep's loop has ended (its adaptive.json)
    stopped: dict[str, str] = field(default_factory=dict)
    #: every trial has finished (run directories no longer running, the adaptive loop done): nothing more will come
    finished: bool = False
    #: the analyze headline's "what would decide" for an undecided comparison (issue 52), else None
    would_decide: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fin(x: Any) -> float | None:
    return float(x) if x is not None and math.isfinite(float(x)) else None


def _ci(ci) -> list[float | None] | None:
    return [_fin(ci[0]), _fin(ci[1])] if ci else None


def snapshot(path: Path | str, *, target: float | None, metric: str = "eval/score", update: int = 0,
             log_format: str | None = None, prompts_per_step: int | None = None, group_size: int | None = None,
             n_boot: int = 100) -> WatchUpdate:
    """Read ``path`` once and compute the view (:func:`predict`). Nothing readable yet is not an error: the update
    then carries a ``note`` and no configurations."""

    path = Path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            runs, _ = load_all([path], log_format=log_format, prompts_per_step=prompts_per_step,
                               group_size=group_size)
        except UserError as err:
            if not may_appear(path):  # what analyze, inspect and plan refuse: the same error (exit 2)
                raise
            stopped = interrupted(path, [])
            partial = [p for p in ([path] if path.is_file() else sorted(path.rglob("*"))) if _only_partial_line(p)]
            why = (f"{', '.join(p.name for p in partial[:3])}{' ...' if len(partial) > 3 else ''} "
                   f"{'holds' if len(partial) == 1 else 'hold'} only a first line still being written (no line end "
                   "yet)") if partial else str(err)
            return WatchUpdate(update, str(path), target, metric, "wall", [], finished=stopped is not None,
                               note=stopped or f"waiting for a training log to appear (Ctrl-C to stop): {why}")
    up = predict(runs, target=target, metric=metric, update=update, path=str(path), n_boot=n_boot,
                 sequential=sequential_of([path]))
    missing = sorted({f"--{f.replace('_', '-')}" for r in runs for f in missing_fields(r)
                      if f in ("prompts_per_step", "group_size")})
    if missing:
        hint = (f"{' and '.join(missing)} missing: without P and G the log's samples cannot be counted; give them "
                "(as for rlbatch analyze)")
        up.note = hint if up.note is None else f"{up.note}; {hint}"
    loop = loop_record(path)
    if loop is not None:
        with_loop(up, loop)
    up.finished = bool(runs) and all(finished(r) for r in runs) and (loop is None or loop.get("stopped_because")
                                                                     not in (None, "running"))
    if not up.finished:
        stopped = interrupted(path, runs)
        if stopped is not None:
            up.finished = True
            up.note = stopped if up.note is None else f"{up.note}; {stopped}"
    return up


def _sweep_dir(path: Path) -> Path | None:
    for d in (path, path.parent):
        if d.is_dir() and (d / "sweep.json").is_file():
            return d
    return None


#: the longest first line (bytes) still taken for one being written: past it, a file without a line end is a file
PARTIAL_LINE_MAX = 1 << 20


def _only_partial_line(path: Path) -> bool:
    """Whether the file ``path`` holds only a first line still being written (researcher tryout finding 14: a
    just-started log caught mid-write, ``{"step": 1, "eval/sc``): text without any line end that is not a complete
    JSON document (a ``.json`` file written without a final newline is complete). Binary data (a NUL or another
    control character) is not a line; neither is more than :data:`PARTIAL_LINE_MAX` bytes."""
    try:
        if not path.is_file() or not 0 < path.stat().st_size <= PARTIAL_LINE_MAX:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    if b"\n" in data or b"\r" in data.rstrip(b"\r"):
        return False
    try:  # the write may stop inside a multi-byte character: an incomplete last sequence is still text
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    if any(ord(c) < 32 and c not in "\t\r\x0c" for c in text):
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _not_started(path: Path) -> bool:
    """An empty file, or one whose only line is still being written (:func:`_only_partial_line`)."""
    try:
        return path.stat().st_size == 0 or _only_partial_line(path)
    except OSError:
        return False


def may_appear(path: Path) -> bool:
    """Whether a training log may still appear at ``path``, so that nothing readable yet is a wait, not an error:
    an empty file, a file whose only line is still being written (no line end yet), a directory holding nothing else,
    a sweep's directory (its ``sweep.json``) or ``trials/``, or a directory a live rlbatch process holds (its
    ``.lock``). A file or a directory of files no reader knows (a complete line no reader knows included) is an
    error, as for ``rlbatch analyze``."""
    if path.is_file():
        return _not_started(path)
    if _sweep_dir(path) is not None or lock_holder(path) is not None:
        return True
    return all(_not_started(p) for p in path.rglob("*") if p.is_file() and p.name != ".lock")


def interrupted(path: Path, runs: list[Run]) -> str | None:
    """A one-line note when nothing at ``path`` is running any more although not every trial finished (a sweep or
    run stopped by Ctrl-C or killed): no live process on this machine holds the sweep's or a running run's lock
    (:func:`rlbatch.runstore.lock_holder`). None while something runs, when it cannot be told (a Ray sweep, a log of
    another framework), or when there is nothing of rlbatch's at ``path``."""
    sweep = _sweep_dir(path)
    if sweep is not None:
        try:
            rec = json.loads((sweep / "sweep.json").read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or rec.get("backend") == "ray" or lock_holder(sweep) is not None:
            return None
        trials = [t for t in rec.get("trials") or [] if isinstance(t, dict)]
        if any(lock_holder(sweep / str(t.get("run_dir") or "")) is not None for t in trials if t.get("run_dir")):
            return None
        left = [t for t in trials if t.get("state") != "finished"]
        if not left:
            return None
        if any(lock_holder(r.path) is not None for r in runs if r.path is not None):
            return None
        return (f"no trial is running: the sweep in {sweep} was interrupted ({len(trials) - len(left)} of "
                f"{len(trials)} trials finished); rerun the same command to resume it")
    ours = [r for r in runs if r.meta.source_format in (None, "rlbatch") and r.path is not None]
    if not ours or len(ours) != len(runs):
        return None
    running = [r for r in ours if r.meta.status == "running"]
    if not running or any(lock_holder(r.path) is not None for r in running):
        return None
    names = ", ".join(r.run_id for r in running[:3]) + (" ..." if len(running) > 3 else "")
    return (f"no trial is running: {names} stopped before finishing (no process holds the run directory); rerun "
            "the same command with --resume to continue")


def loop_record(path: Path) -> dict[str, Any] | None:
    """The adaptive loop's record (``adaptive.json``, rewritten after every re-plan) of the sweep at ``path`` (the
    sweep's directory or its ``trials/``); None when there is none or it cannot be read (yet)."""
    for d in (path, path.parent):
        f = d / "adaptive.json"
        if d.is_dir() and f.is_file():
            try:
                rec = json.loads(f.read_text())
            except (OSError, ValueError):
                return None
            return rec if isinstance(rec, dict) else None
    return None


def with_loop(up: WatchUpdate, loop: dict[str, Any]) -> None:
    """Put the adaptive loop's own decisions into ``up``: the configurations it ended (stopped early, reached,
    skipped, out of budget) with its reason, in place of what the watcher would decide (one decision rule: the
    loop's, as the report shows it)."""
    ended = {str(t["run_id"]): f"{t['state']}: {t.get('decided_by') or t['state']}"
             for t in loop.get("trials") or [] if isinstance(t, dict) and t.get("run_id")
             and t.get("state") not in (None, "active", "pending")}
    for v in up.configs:  # a configuration here is named as the study names it (one seed: by its run)
        if v.runs and all(r in ended for r in v.runs):
            up.stopped[v.config] = ended[v.runs[0]]
    for r in up.ranking:
        if r["config"] in up.stopped:
            r["would_stop"] = False
            r["why"] = f"ended by the adaptive loop, {up.stopped[r['config']]}"


def predict(runs: list, *, target: float | None, metric: str = "eval/score", update: int = 0, path: str = "",
            n_boot: int = 100, sequential: dict[str, Any] | None = None) -> WatchUpdate:
    """The view of ``runs`` (run-store :class:`rlbatch.runstore.Run` objects; module docstring): per configuration
    the scores, the fitted curve, samples-to-target and time-to-target with intervals, the throughput so far; for two
    or more batch sizes the plan's ranking with the adaptive loop's verdict. ``sequential``: the record of the
    sequential study that ran them (its decision is the page's, :class:`rlbatch.analysis.study.Study`)."""

    runs = [r for r in runs if len(r.metrics)]
    if not runs:
        return WatchUpdate(update, str(path), target, metric, "wall", [], note="no training step logged yet")
    # the estimates the plan's ranking reads too, with the accounting's own number of draws, so that a finished
    # configuration shows the intervals analyze shows (newcomer finding 9); ``n_boot`` is the curve fits' only
    study = Study.of(runs, target, metric, sequential=sequential)
    clock = study.basis
    groups = study.groups
    # the curve fits: only of the configurations not measured to the target (researcher finding 10: watch fitted
    # every configuration, 9x analyze's time on a finished sweep), and the plan's own fits where there is a plan, so
    # that a fitted samples-to-target is one number on the screen (house review: watch and the plan showed two)
    plan = plan_error = None
    if target is not None and len({r.meta.batch_size for r in runs}) >= 2:
        try:
            plan = plan_runs(runs, target, metric=metric, n_boot=n_boot, extend=False, study=study)
        except UserError as err:
            plan_error = err
    fits: dict[str, Any] = {}
    if target is not None:
        open_ = {n: rs for n, rs in groups.items() if not _measured(study.configuration_estimate(rs))}
        if plan is not None:
            fits = {c["run"]: _plan_fit(c["fit"]) for c in plan["candidates"] if c.get("fit") and c["run"] in open_}
        todo = {n: rs for n, rs in open_.items() if n not in fits}  # no plan, or one the plan does not fit
        if todo:
            try:
                fits.update(fit_groups(todo, target, metric, n_boot=n_boot))
            except (UserError, ValueError):
                pass
    views = []
    for name, rs in groups.items():
        df = metric_frame(rs[0], metric)
        pts = [(float(x), float(y)) for x, y in zip(df.get("samples/retained", []), df.get(metric, []))
               if y == y and x == x] if metric in df.columns else []
        xs = [run_throughput(r, clock) for r in rs]
        thr = [x["throughput_samples_per_s"] for x in xs]
        throughput = sum(thr) / len(thr) if all(thr) else None
        secs = [x["seconds"] for x in xs]
        v = ConfigView(config=name, runs=[r.run_id for r in rs], batch_size=rs[0].meta.batch_size,
                       samples=max(run_samples(r) for r in rs), eval_points=len(pts),
                       score=pts[-1][1] if pts else None, scores=pts, throughput_samples_per_s=throughput,
                       elapsed_s=max(secs) if all(s is not None for s in secs) else None)
        fr = fits.get(name)
        if target is not None:
            est = study.configuration_estimate(rs)
            if est["reached"]:
                v.samples_to_target, v.samples_to_target_ci, v.source = (est["samples_to_target"],
                                                                         _ci(est["samples_to_target_ci"]), "measured")
                v.time_to_target_s, v.time_to_target_ci = est["time_to_target_s"], _ci(est["time_to_target_ci"])
                if est.get("throughput_samples_per_s"):  # at the target: the accounting's throughput, one number
                    v.throughput_samples_per_s = est["throughput_samples_per_s"]
            elif at_most_only(est):  # at the target by the first evaluation: the accounting's upper bounds (N1)
                v.samples_to_target, v.source = est["samples_to_target_at_most"], "at most"
                v.time_to_target_s = est.get("time_to_target_at_most")
                if est.get("throughput_samples_per_s"):
                    v.throughput_samples_per_s = est["throughput_samples_per_s"]
            elif fr is not None:
                v.samples_to_target = _fin(fr.get("samples_to_target"))
                v.samples_to_target_ci = _ci(fr.get("samples_to_target_ci"))
                v.source = "fit" if v.samples_to_target is not None else (
                    "open" if fr.get("status") == "undetermined" else "never")
                v.why = fr.get("reason")
            else:
                v.why = "too few evaluations past the start to fit the curve"
            if v.source not in ("measured", "at most") and v.samples_to_target is not None and throughput:
                # time-to-target = samples-to-target / throughput (the throughput so far, taken as exact)
                v.time_to_target_s = v.samples_to_target / throughput
                v.time_to_target_ci = [c / throughput if c is not None else None
                                       for c in (v.samples_to_target_ci or [None, None])]
        if fr is not None and fr.get("params"):
            p = fr["params"]
            end = max(v.samples, v.samples_to_target or 0.0) * 1.05
            grid = [end * (i + 1) / 24 for i in range(24)]
            v.fitted = [(g, float(sigmoid(g, p["R0"], p["A"], p["C_mid"], p["b"]))) for g in grid]
        views.append(v)
    up = WatchUpdate(update, str(path), target, metric, clock, views)
    if plan_error is not None:
        up.note = f"no plan yet: {plan_error}"
    elif plan is not None:
        up.recommended = plan["recommended"]
        up.would_decide = plan.get("would_decide")
        best = next((c for c in plan["candidates"] if c["run"] == plan["recommended"]), None)
        crossed = earliest_crossing(runs, target, metric)
        now = race(groups, target, metric, clock, reference=plan.get("reference"))
        final = _final_verdicts(study)
        # the ladder's reference is its smallest batch on the LR rule (B0), whichever seed reached first: it
        # runs to the target and is never stopped (docs/commands/sweep.md; newcomer finding 9)
        b0 = min((c["batch_size"] for c in plan["candidates"] if c["run"] in groups and c["batch_size"]
                  and c.get("on_lr_rule", True)), default=None)
        for c in plan["candidates"]:
            n = min((eval_points(r, metric) for r in groups.get(c["run"], [])), default=0)
            done = c["run"] in groups and all(finished(r) for r in groups[c["run"]])
            if done or (b0 is not None and c["batch_size"] == b0 and c.get("on_lr_rule", True)):
                verdict = None  # finished: the report's verdict, the one rule for finished runs
            else:
                verdict = now.verdict(c["run"]) or stop_verdict(
                    c, best, n, reference=plan.get("reference"), crossed_at=crossed,
                    samples=min((run_samples(r) for r in groups.get(c["run"], [])), default=0.0))
            up.ranking.append({"config": c["run"], "batch_size": c["batch_size"],
                               "predicted_relative_time": c["predicted_relative_time"],
                               "interval": c["interval"], "relative_time_at_most": c.get("relative_time_at_most"),
                               "relative_time_at_most_hi": c.get("relative_time_at_most_hi"),
                               "rN": c["rN"], "rN_source": c["rN_source"],
                               "relative_throughput": c["relative_throughput"],
                               "would_stop": verdict is not None,
                               "why": f"{verdict[0]}: {verdict[1]}" if verdict else
                               (f"finished: {final.get(c['run'], 'no verdict')}" if done else None)})
        up.ranking.sort(key=lambda r: (r["predicted_relative_time"] is None and r["relative_time_at_most"] is None,
                                       r["predicted_relative_time"] or r["relative_time_at_most"] or 0))
    return up


def _measured(est: dict[str, Any]) -> bool:
    """Whether the accounting gives a configuration's samples-to-target (every seed reached it, or reached it before
    its first evaluation: an upper bound), so no curve fit is needed."""
    return bool(est.get("reached")) or at_most_only(est)


def _plan_fit(f: dict[str, Any]) -> dict[str, Any]:
    """A plan candidate's fit (:func:`rlbatch.plan_finish._fit_json`) in :func:`rlbatch.analysis.fit.fit_groups`'
    shape, as this module reads it."""
    return {**f, "params": {k: f[k] for k in ("R0", "A", "C_mid", "b")}}


def finished(run: Run) -> bool:
    """Whether a run has finished, as far as its files say: a run directory of this tool whose ``run.json`` is no
    longer ``running``. A log of another framework does not say: watched live, it counts as running."""
    return run.meta.source_format in (None, "rlbatch") and run.meta.status != "running"


def _final_verdicts(study: Study) -> dict[str, str]:
    """{configuration: the report's verdict in words} from the study's accounting (the pick, another member of the
    "may be fastest" set, or the accounting's verdict): what ``watch`` shows for configurations that finished, so that it and the report
    give one answer. {} when there is no accounting (no reference reached the target)."""
    try:
        acc = study.accounted
    except UserError:
        return {}
    if not acc:
        return {}
    h = acc.get("headline") or {}
    out = {}
    for r in acc["rows"]:
        name = r["run"]
        v = str(r.get("verdict"))  # the accounting's verdict, as every page words it; then its place in the answer
        out[name] = (f"{v} (the pick)" if name == h.get("pick") else f"{v} (may be the fastest too)"
                     if name in (h.get("within_noise") or []) else v)
    return out


# --------------------------------------------------------------------------------------------------- rendering
def _num(x: float | None, spec: str = ".0f") -> str:
    return "-" if x is None else format(x, spec)


def _iv(ci, spec: str = ".0f") -> str:
    return f" [{format_interval(ci, spec, sep=', ', unbounded='open', missing='-')}]" if ci else ""


def spark(values: list[float], lo: float, hi: float) -> str:
    """A sparkline of ``values`` on the scale [lo, hi]."""
    if not values:
        return ""
    span = (hi - lo) or 1.0
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int((v - lo) / span * (len(SPARK) - 1) + 0.5)))]
                   for v in values)


def legend(up: WatchUpdate) -> str:
    """What the short names of a piped update line mean, printed once before the first (newcomer finding 9)."""
    names = ["S = retained samples so far", "score = the last evaluation"]
    if up.target is not None:
        names += ["S* = samples-to-target [95% interval] (measured or fitted; 'not yet known' before a fit can "
                  "tell)", "T* = time-to-target"]
    names.append("X = retained samples per second (to the target where measured, else so far)")
    if any(r.get("predicted_relative_time") is not None for r in up.ranking):
        names.append("rel.time = predicted time-to-target over the reference's [95% interval]")
    return "watch: " + ", ".join(names)


def line(up: WatchUpdate) -> str:
    """The update as plain text for a pipe or a log file: one line per configuration (its samples, score,
    predictions, throughput and, for a sweep, its rank and what the adaptive loop did or would do), then one line
    with the plan's best."""
    if not up.configs:
        return f"update {up.update}: {up.note}"
    rank = {r["config"]: r for r in up.ranking}
    out = []
    for v in up.configs:
        s = f"update {up.update}: {v.config} S={v.samples:.0f} score={_num(v.score, '.3f')}"
        if up.target is not None and v.samples_to_target is None and v.time_to_target_s is None and \
                v.source in (None, "never", "open"):  # (researcher finding 16: not "- (-)")
            s += {None: " S*=not yet known T*=not yet known", "never": " S*=never (its fit levels off below the "
                  "target)", "open": f" S*=open{_iv(v.samples_to_target_ci)} T*=open"}[v.source]
        elif up.target is not None and v.source == "at most":
            s += (f" S*≤{_num(v.samples_to_target)} T*≤{_num(v.time_to_target_s, '.1f')}s (at most: every seed at the "
                  "target by its first evaluation)")
        elif up.target is not None:
            s += (f" S*={_num(v.samples_to_target)}{_iv(v.samples_to_target_ci)} ({v.source or '-'})"
                  f" T*={_num(v.time_to_target_s, '.1f')}s{_iv(v.time_to_target_ci, '.1f')}")
        s += f" X={_num(v.throughput_samples_per_s, '.1f')}/s"
        r = rank.get(v.config)
        if r is not None and r.get("predicted_relative_time") is not None:
            s += f" rel.time={r['predicted_relative_time']:.2f}{_iv(r['interval'], '.2f')}"
        elif r is not None and r.get("relative_time_at_most") is not None:
            s += " rel.time " + time_text(r)
        if v.config in up.stopped:
            s += f" | {up.stopped[v.config]}"
        elif r is not None and r["would_stop"]:
            s += f" | would stop: {r['why']}"
        out.append(s)
    if up.recommended is not None:
        out.append(f"update {up.update}: best {up.recommended}" + (" (finished)" if up.finished and not up.note
                                                                    else ""))
    if up.would_decide:
        out.append(f"update {up.update}: {up.would_decide}")
    if up.note:
        out.append(f"update {up.update}: {up.note}")
    return "\n".join(out)


def render(up: WatchUpdate):
    """The rich renderable of an update: one table of the configurations (score sparkline, fitted curve
    sparkline, predictions) and, for a sweep, the ranking."""

    t = Table(title=f"rlbatch watch {up.path} (update {up.update}, target {up.target}, clock {up.clock})")
    for col in ("configuration", "B", "samples", "score", "score vs samples (fit)", "samples-to-target",
                "throughput /s", "time-to-target s"):
        t.add_column(col)
    ys = [y for v in up.configs for _, y in v.scores + v.fitted]
    lo, hi = (min(ys), max(ys + ([up.target] if up.target is not None else []))) if ys else (0.0, 1.0)
    for v in up.configs:
        t.add_row(v.config, str(v.batch_size), f"{v.samples:.0f}", _num(v.score, ".3f"),
                  spark([y for _, y in v.scores[-24:]], lo, hi) + (" | " + spark([y for _, y in v.fitted], lo, hi)
                                                                   if v.fitted else ""),
                  f"≤ {_num(v.samples_to_target)} (at most)" if v.source == "at most" else
                  f"{_num(v.samples_to_target)}{_iv(v.samples_to_target_ci)} {v.source or ''}",
                  _num(v.throughput_samples_per_s, ".1f"),
                  f"≤ {_num(v.time_to_target_s, '.1f')}" if v.source == "at most" else
                  f"{_num(v.time_to_target_s, '.1f')}{_iv(v.time_to_target_ci, '.1f')}")
    parts: list[Any] = [t]
    if up.ranking:
        r = Table(title=f"plan: best {up.recommended}")
        for col in ("configuration", "relative time", "interval", "rN (source)", "stopped / would stop"):
            r.add_column(col)
        for x in up.ranking:
            bounded = x["predicted_relative_time"] is None and x.get("relative_time_at_most") is not None
            r.add_row(str(x["config"]), time_text(x) if bounded else _num(x["predicted_relative_time"], ".2f"),
                      "" if bounded else _iv(x["interval"], ".2f"),
                      f"{_num(x['rN'], '.2f')} ({x['rN_source']})", x["why"] or "")
        parts.append(r)
    if up.would_decide:
        parts.append(up.would_decide)
    if up.note:
        parts.append(up.note)
    return Group(*parts)


def _signature(path: Path) -> tuple:
    if path.is_file():
        st = path.stat()
        return ((st.st_size, st.st_mtime_ns),)
    loop = path.parent / "adaptive.json"  # watching a sweep's trials/: its loop record lies beside them
    extra = ((str(loop), loop.stat().st_size, loop.stat().st_mtime_ns),) if loop.is_file() else ()
    return extra + tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*")) if p.is_file())


def watch(path: Path | str, *, target: float | None = None, fmt: str = "auto", once: bool = False,
          interval: float = 5.0, max_updates: int | None = None, metric: str = "eval/score",
          log_format: str | None = None, prompts_per_step: int | None = None, group_size: int | None = None,
          n_boot: int = 100, emit: Callable[[WatchUpdate], None] | None = None) -> list[WatchUpdate]:
    """Watch ``path`` until every trial has finished (:func:`finished`; an adaptive sweep's loop done), until
    interrupted, for ``max_updates`` checks, or once (``once``). Every ``interval`` seconds the files under ``path``
    are checked, and a new update is computed and shown when they changed; a check without change counts toward
    ``max_updates`` too (a finished log never changes). ``fmt``: ``live`` (rich Live in a terminal),
    ``lines`` (one plain line per update), ``json`` (one JSON object per update), ``auto`` (live on a terminal,
    else lines). ``emit`` replaces the printing (tests). Returns the updates. Raises :class:`UserError` when the
    path does not exist or an option is out of range."""
    path = Path(path)
    if not path.exists():
        raise UserError("no such file or directory", path=str(path))
    if interval <= 0:
        raise UserError(f"--interval must be > 0, got {interval}", field="interval")
    if max_updates is not None and max_updates < 1:
        raise UserError(f"--max-updates must be >= 1, got {max_updates}", field="max-updates")
    if fmt == "auto":
        fmt = "live" if sys.stdout.isatty() else "lines"
    if fmt not in ("live", "lines", "json"):
        raise UserError(f"unknown --format {fmt!r} for watch: live, lines or json", field="format")
    limit = 1 if once else max_updates
    updates: list[WatchUpdate] = []
    live = None
    if emit is None and fmt == "live":

        live = Live(refresh_per_second=2)
        live.start()

    shown_legend: list[bool] = []  # the legend is printed once, before the first update with configurations

    def show(up: WatchUpdate) -> None:
        if emit is not None:
            emit(up)
        elif live is not None:
            live.update(render(up))
        elif fmt == "json":
            print(json.dumps(up.to_json(), default=str), flush=True)
        else:
            if up.configs and not shown_legend:
                shown_legend.append(True)
                print(legend(up), flush=True)
            print(line(up), flush=True)

    seen = None
    ticks = 0
    try:
        while limit is None or ticks < limit:
            ticks += 1  # every check counts toward max_updates, also when nothing changed (a finished log)
            sig = _signature(path)
            if sig != seen:
                seen = sig
                with Stages("watch", stream=None if emit is None else io.StringIO()) as stage:
                    stage(f"reading {path} for update {len(updates) + 1}")  # on stderr once it takes 2 s
                    up = snapshot(path, target=target, metric=metric, update=len(updates) + 1,
                                  log_format=log_format, prompts_per_step=prompts_per_step, group_size=group_size,
                                  n_boot=n_boot)
                updates.append(up)
                show(up)
                if up.finished:  # every trial has finished: nothing more will come
                    break
            if limit is not None and ticks >= limit:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if live is not None:
            live.stop()
    return updates
