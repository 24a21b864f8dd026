"""Trial executors of the adaptive loop (:func:`rlbatch.study.adaptive.decide`): where trials run, behind one small
interface.

Every executor has

- ``start(trial, samples) -> int``: start the trial, or extend it, to ``samples`` retained samples; returns the
  samples it will run to (a launched job runs to its own budget; a value no larger than before means there is
  nothing more to run);
- ``poll(timeout) -> list[run_id]``: wait (at most ``timeout`` seconds, or one event of a replay) and return the
  trials with new data in their run store or log;
- ``read(run_id) -> Run | None``: the trial as the readers see it now (None before it logged anything);
- ``idle(run_id) -> bool``: the trial is not running (its chunk is done, its job ended, or it was stopped);
- ``stop(trial, reason)``: stop it with the engine's own mechanism; a stopped trial is resumable;
- ``resume_hint(trial) -> str``: how to continue it.

:class:`ChunkExecutor`: a resumable trial function run in chunks here, one chunk per poll (the local trainer, TRL's
entry point, the synthetic trial). :class:`RayExecutor`: each chunk a Ray task; the run directories (a shared
filesystem) are re-read as they grow; stop = ``ray.cancel`` (the trial resumes from its checkpoint).
:class:`LogExecutor`: launched jobs (verl, OpenRLHF, TRL scripts) whose logs (verl's file logger JSONL,
TensorBoard event files, a run store) are re-read as they grow; the jobs are :class:`ProcessJob` (a trial script of
``rlbatch launch``; stop = SIGTERM to its process group, re-running the script resumes from the trial's checkpoint:
``trainer.resume_mode=auto``), :class:`RayJob` (Ray job submission; stop = ``stop_job``) or :class:`ReplayJob`
(a stored run fed line by line in timestamp order by a :class:`ReplayFeed`: a live job as the loop sees it).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from rlbatch.backends.ray import default_trial_fn, execute_trial, import_ray
from rlbatch.errors import UserError
from rlbatch.readers import load
from rlbatch.runstore import Run, write_meta


def _read_store(run_dir: Path) -> Run | None:
    if not (run_dir / "run.json").is_file():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return load(run_dir, "rlbatch")[0]
        except UserError:
            return None


def _signature(path: Path) -> tuple:
    """What changes when a log grows: (name, size, mtime) of the file, or of every file under a directory."""
    if path.is_file():
        st = path.stat()
        return ((path.name, st.st_size, st.st_mtime_ns),)
    if path.is_dir():
        out = []
        for p in sorted(path.rglob("*")):
            if p.is_file():
                st = p.stat()
                out.append((str(p.relative_to(path)), st.st_size, st.st_mtime_ns))
        return tuple(out)
    return ()


def _with_samples(spec: Any, samples: int, batch_size: int, make: type | None) -> Any:
    if hasattr(spec, "model_copy"):
        return spec.model_copy(update={"samples": int(samples)})
    d = {**dict(spec), "samples": int(samples)}
    if "steps" in d:
        d["steps"] = math.ceil(samples / batch_size)
    return make(**d) if make is not None else d


class ChunkExecutor:
    """A resumable trial function ``run_fn(spec, run_dir)`` (calling it again with a larger ``spec.samples``
    continues the same run) run here, one chunk per :meth:`poll`: the queued trial with the fewest samples asked
    goes next (every configuration gets its probe before any is extended). Trials live in ``sweep_dir/<run_id>``.
    ``make``: the spec type to build from a dict spec (e.g. :class:`rlbatch.backends.local.TrialSpec`)."""

    def __init__(self, run_fn: Callable[[Any, Path], Any], sweep_dir: Path, make: type | None = None):
        self.run_fn, self.dir, self.make = run_fn, Path(sweep_dir), make
        self.queue: dict[str, tuple[Any, int]] = {}
        self.asked: dict[str, int] = {}

    def start(self, trial, samples: int) -> int:
        self.queue[trial.run_id] = (trial, int(samples))
        self.asked[trial.run_id] = int(samples)
        return int(samples)

    def poll(self, timeout: float = 0) -> list[str]:
        if not self.queue:
            return []
        rid = min(self.queue, key=lambda r: (self.queue[r][1], list(self.queue).index(r)))
        trial, samples = self.queue.pop(rid)
        self.run_fn(_with_samples(trial.spec, samples, trial.batch_size, self.make), self.dir / rid)
        return [rid]

    def read(self, run_id: str) -> Run | None:
        return _read_store(self.dir / run_id)

    def idle(self, run_id: str) -> bool:
        return run_id not in self.queue

    def stop(self, trial, reason: str) -> None:
        self.queue.pop(trial.run_id, None)

    def resume_hint(self, trial) -> str:
        return (f"{self.dir / trial.run_id}: trained again with a larger budget it continues from its last "
                "checkpoint (rlbatch sweep with the same --out resumes it)")


class RayExecutor:
    """Each chunk of a trial is a Ray task (``trial_fn(spec_dict, run_dir)``, resumable; default the embedded
    trainer, :func:`rlbatch.backends.ray.default_trial_fn`) with ``cpus_per_trial`` / ``gpus_per_trial``; Ray runs
    as many at once as the cluster has room for. :meth:`poll` waits for a task to end and re-reads the run
    directories (``sweep_dir`` must be shared by every node) for new evaluations while tasks run. :meth:`stop`
    cancels the task (``ray.cancel(force=True)``): the trial resumes from its last checkpoint. A task that fails is
    resubmitted up to ``max_retries`` times, then raises :class:`UserError` naming the trial."""

    def __init__(self, sweep_dir: Path, *, trial_fn: Callable | None = None, cpus_per_trial: float = 1,
                 gpus_per_trial: float = 0, max_retries: int = 2):
        self.ray = import_ray()
        self.dir = Path(sweep_dir).resolve()
        self.trial_fn = trial_fn or default_trial_fn
        self.remote = self.ray.remote(execute_trial).options(num_cpus=cpus_per_trial, num_gpus=gpus_per_trial,
                                                        max_retries=0, retry_exceptions=False)
        self.inflight: dict[Any, str] = {}
        self.trials: dict[str, Any] = {}
        self.asked: dict[str, int] = {}
        self.failures: dict[str, int] = {}
        self.max_retries = max_retries
        self.seen: dict[str, tuple] = {}

    def _submit(self, rid: str) -> None:
        t = self.trials[rid]
        spec = _with_samples(t.spec, self.asked[rid], t.batch_size, None)
        spec = spec.model_dump(mode="json") if hasattr(spec, "model_dump") else spec
        self.inflight[self.remote.remote(self.trial_fn, spec, str(self.dir / rid))] = rid

    def start(self, trial, samples: int) -> int:
        self.trials[trial.run_id] = trial
        self.asked[trial.run_id] = int(samples)
        self._submit(trial.run_id)
        return int(samples)

    def poll(self, timeout: float = 5.0) -> list[str]:
        changed: set[str] = set()
        if self.inflight:
            done, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=timeout)
            for ref in done:
                rid = self.inflight.pop(ref)
                try:
                    self.ray.get(ref)
                except Exception as err:  # worker crash, node loss, or the trial raised
                    self.failures[rid] = self.failures.get(rid, 0) + 1
                    if self.failures[rid] > self.max_retries:
                        raise UserError(f"trial {rid} failed {self.failures[rid]} times on Ray: "
                                        f"{type(err).__name__}: {str(err).strip().splitlines()[-1:]}") from None
                    self._submit(rid)
                changed.add(rid)
        for rid in self.trials:
            sig = _signature(self.dir / rid / "eval.jsonl")
            if sig and sig != self.seen.get(rid):
                self.seen[rid] = sig
                changed.add(rid)
        return sorted(changed)

    def read(self, run_id: str) -> Run | None:
        return _read_store(self.dir / run_id)

    def idle(self, run_id: str) -> bool:
        return run_id not in self.inflight.values()

    def stop(self, trial, reason: str) -> None:
        for ref, rid in list(self.inflight.items()):
            if rid == trial.run_id:
                self.ray.cancel(ref, force=True)
                self.inflight.pop(ref)
                try:  # wait until the task is gone: nothing is written into the trial after stop returns
                    self.ray.get(ref, timeout=30)
                except Exception:  # TaskCancelledError / WorkerCrashedError: the cancel took; a timeout: it did not
                    pass

    def resume_hint(self, trial) -> str:
        return f"{self.dir / trial.run_id}: resubmitted with a larger budget it continues from its last checkpoint"


# --------------------------------------------------------------------------------------------------- launched jobs
class ProcessJob:
    """A trial script run here as its own process group (``bash SCRIPT``, output to ``SCRIPT.log``); stop sends
    SIGTERM to the group (then SIGKILL after ``grace_s``). verl (``trainer.resume_mode=auto``), OpenRLHF
    (``--load_checkpoint``) and TRL (the trial's newest checkpoint) resume when the script runs again."""

    def __init__(self, script: Path | str, grace_s: float = 30.0):
        self.script, self.grace_s, self.proc = Path(script), grace_s, None

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = open(self.script.with_suffix(".log"), "ab")
        self.proc = subprocess.Popen(["bash", str(self.script)], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if not self.running():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(self.grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def resume_hint(self) -> str:
        return f"bash {self.script} (resumes from the trial's last checkpoint)"


class RayJob:
    """A trial submitted with Ray's job submission API (``JobSubmissionClient(address).submit_job``, as
    ``rlbatch launch --submit`` does); stop = ``stop_job``; submitting the same entrypoint again resumes it."""

    def __init__(self, client: Any, entrypoint: str, runtime_env: dict | None = None):
        self.client, self.entrypoint, self.runtime_env, self.job_id = client, entrypoint, runtime_env, None

    def start(self) -> None:
        if self.running():
            return
        self.job_id = self.client.submit_job(entrypoint=self.entrypoint, runtime_env=self.runtime_env)

    def running(self) -> bool:
        if self.job_id is None:
            return False
        status = str(self.client.get_job_status(self.job_id))
        return status.split(".")[-1] in ("PENDING", "RUNNING")

    def stop(self) -> None:
        if self.running():
            self.client.stop_job(self.job_id)

    def resume_hint(self) -> str:
        return f"ray job submit -- {self.entrypoint} (resumes from the trial's last checkpoint)"


def verl_records(run: Run, task: str = "task", metric: str = "eval/score") -> list[tuple[float, bool, dict]]:
    """A run-store run as the lines verl's file logger would have written (``{"step": N, "data": {...}}``,
    ``verl/utils/tracking.py``), each with the run's clock at that line and whether it holds a validation score:
    per step ``timing_s/step``, ``timing_s/gen``, ``timing_s/update_actor``, ``actor/lr``, ``actor/grad_norm``,
    ``critic/score/mean``; the validation score as ``val-core/<task>/reward/mean@1`` in the record of the step it
    followed (step 0: before training). Returns ``[(seconds, has_eval, record)]`` in step order."""
    m, ev = run.metrics, run.evals
    names = {"time/step_s": "timing_s/step", "time/gen_s": "timing_s/gen", "time/train_s": "timing_s/update_actor",
             "lr": "actor/lr", "grad_norm/actor": "actor/grad_norm", "reward/mean": "critic/score/mean"}
    scores = {}
    if len(ev) and metric in ev.columns:
        for _, r in ev.iterrows():
            if pd.notna(r[metric]):
                scores[int(r["step"])] = float(r[metric])
    out: list[tuple[float, bool, dict]] = []
    if 0 in scores:
        out.append((0.0, True, {"step": 0, "data": {f"val-core/{task}/reward/mean@1": scores[0]}}))
    wall = pd.to_numeric(m["time/wall_s"], errors="coerce") if "time/wall_s" in m else \
        pd.to_numeric(m["time/step_s"], errors="coerce").cumsum()
    for i, r in m.iterrows():
        data = {v: float(r[k]) for k, v in names.items() if k in m.columns and pd.notna(r[k])}
        if "lr" not in m.columns and run.meta.lr:
            data["actor/lr"] = float(run.meta.lr)
        s = int(r["step"])
        if s in scores:
            data[f"val-core/{task}/reward/mean@1"] = scores[s]
        out.append((float(wall.iloc[i]), s in scores, {"step": s, "data": data}))
    return out


def store_records(run: Run, metric: str = "eval/score") -> list[tuple[float, bool, dict]]:
    """A run-store run as its own lines, in the order it wrote them: ``(seconds, is_eval, {"file": "metrics" |
    "eval", "line": {...}})``; an evaluation sits at its ``time/wall_s`` (else at the step it followed)."""
    m, ev = run.metrics, run.evals
    wall = pd.to_numeric(m["time/wall_s"], errors="coerce") if "time/wall_s" in m else \
        pd.to_numeric(m["time/step_s"], errors="coerce").cumsum()
    at = dict(zip(m["step"].astype(int), wall))
    out = []
    for i, r in m.iterrows():
        out.append((float(wall.iloc[i]), False, {"file": "metrics", "line": _clean(r)}))
    for _, r in ev.iterrows():
        t = r.get("time/wall_s")
        t = float(t) if t is not None and pd.notna(t) else float(at.get(int(r["step"]), 0.0))
        out.append((t + 1e-9, pd.notna(r.get(metric)), {"file": "eval", "line": _clean(r)}))
    out.sort(key=lambda x: x[0])
    return out


def _clean(row: pd.Series) -> dict:
    out = {}
    for k, v in row.items():
        if v is None or (isinstance(v, float) and not math.isfinite(v)) or (not isinstance(v, str) and pd.isna(v)):
            continue
        out[k] = v.item() if isinstance(v, np.generic) else v
    return out


class ReplayFeed:
    """Stored runs fed as live jobs would write them: every launched :class:`ReplayJob` has its lines (verl's
    file logger JSONL, ``fmt="verl-jsonl"``, or the run store itself, ``fmt="rlbatch"``) released at its launch
    time plus each line's own clock (``time/wall_s``: the trials run in parallel from their launch), in the order of
    those times across all jobs. :meth:`advance` moves the clock to the next evaluation of any running job and writes
    every line due by then; nothing is written for a stopped job, so what the loop spends is what it let run."""

    def __init__(self, out_dir: Path, fmt: str = "verl-jsonl", metric: str = "eval/score"):
        if fmt not in ("verl-jsonl", "rlbatch"):
            raise UserError(f"replay format must be verl-jsonl or rlbatch, got {fmt!r}", field="fmt")
        self.dir, self.fmt, self.metric = Path(out_dir), fmt, metric
        self.now = 0.0
        self.jobs: list[ReplayJob] = []

    def job(self, run: Run, run_id: str) -> "ReplayJob":
        recs = verl_records(run, run.meta.task or "task", self.metric) if self.fmt == "verl-jsonl" \
            else store_records(run, self.metric)
        j = ReplayJob(self, run, run_id, recs)
        self.jobs.append(j)
        return j

    def advance(self) -> bool:
        """Release the lines up to the next evaluation of any running job; False when no job is running."""
        live = [j for j in self.jobs if j.running()]
        if not live:
            return False
        nxt = min(j.next_eval_time() for j in live)
        if not math.isfinite(nxt):
            nxt = max(j.last_time() for j in live)
        self.now = max(self.now, nxt)
        for j in live:
            j.release(self.now)
        return True


class ReplayJob:
    """One stored run replayed through a :class:`ReplayFeed` as a launched job; stopping keeps its position, so
    starting it again resumes where it stopped (as verl resumes from its checkpoint)."""

    def __init__(self, feed: ReplayFeed, run: Run, run_id: str, records: list[tuple[float, bool, dict]]):
        self.feed, self.run, self.run_id, self.recs = feed, run, run_id, records
        self.pos, self.offset, self.live = 0, 0.0, False
        self.log_path = feed.dir / (f"{run_id}.jsonl" if feed.fmt == "verl-jsonl" else run_id)

    def start(self) -> None:
        if self.live or self.pos >= len(self.recs):
            return
        done_t = self.recs[self.pos - 1][0] if self.pos else 0.0
        self.offset = self.feed.now - done_t
        self.live = True
        if self.feed.fmt == "rlbatch" and not (self.log_path / "run.json").exists():
            self.log_path.mkdir(parents=True, exist_ok=True)
            write_meta(self.log_path, self.run.meta.model_copy(update={"run_id": self.run_id, "status": "running"}))

    def running(self) -> bool:
        return self.live and self.pos < len(self.recs)

    def next_eval_time(self) -> float:
        return next((t + self.offset for t, e, _ in self.recs[self.pos:] if e), math.inf)

    def last_time(self) -> float:
        return self.recs[-1][0] + self.offset

    def release(self, now: float) -> None:
        lines: dict[Path, list[str]] = {}
        while self.pos < len(self.recs) and self.recs[self.pos][0] + self.offset <= now + 1e-9:
            _, _, rec = self.recs[self.pos]
            if self.feed.fmt == "verl-jsonl":
                path, obj = self.log_path, rec
            else:
                path, obj = self.log_path / f"{rec['file']}.jsonl", rec["line"]
            lines.setdefault(path, []).append(json.dumps(obj) + "\n")
            self.pos += 1
        for path, ls in lines.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.writelines(ls)

    def stop(self) -> None:
        self.live = False

    def resume_hint(self) -> str:
        return f"replay of {self.run_id}: started again it continues from line {self.pos}"


class LogExecutor:
    """Launched jobs watched through their logs. ``trials``' specs are dicts with ``log_path``, ``log_format``
    (a reader format: ``verl-jsonl``, ``tensorboard``, ``rlbatch``, ...), ``prompts_per_step``, ``group_size``, ``lr``
    and optionally ``lr_rule``, ``base_batch``, ``base_lr``, ``seed``, ``samples`` (the job's budget) and
    ``job`` (a :class:`ProcessJob`, :class:`RayJob` or :class:`ReplayJob`). A job runs to its own budget: starting
    it launches it (or resumes a stopped one); extending is not possible, so :meth:`start` returns the job's budget.
    :meth:`poll` waits ``interval`` seconds (a replay: releases the next evaluation instead) and returns the
    trials whose log changed."""

    def __init__(self, trials: list, *, feed: ReplayFeed | None = None, interval: float = 10.0):
        self.trials = {t.run_id: t for t in trials}
        self.feed, self.interval = feed, interval
        self.seen: dict[str, tuple] = {}
        self.stopped: set[str] = set()

    def _job(self, rid: str):
        return self.trials[rid].spec["job"]

    def start(self, trial, samples: int) -> int:
        self.stopped.discard(trial.run_id)
        self._job(trial.run_id).start()
        return int(trial.spec.get("samples") or samples)

    def poll(self, timeout: float = 10.0) -> list[str]:
        if self.feed is not None:
            self.feed.advance()
        else:
            time.sleep(min(timeout, self.interval))
        changed = []
        for rid, t in self.trials.items():
            sig = _signature(Path(t.spec["log_path"]))
            if sig and sig != self.seen.get(rid):
                self.seen[rid] = sig
                changed.append(rid)
        return changed

    def read(self, run_id: str) -> Run | None:
        s = self.trials[run_id].spec
        path = Path(s["log_path"])
        if not path.exists():
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                runs = load(path, s.get("log_format"), prompts_per_step=s["prompts_per_step"],
                            group_size=s["group_size"])
            except UserError:
                return None
        if not runs:
            return None
        r = runs[0]
        upd = {"run_id": run_id, "lr": s.get("lr") or r.meta.lr}
        for k in ("lr_rule", "base_batch", "base_lr", "seed"):
            if s.get(k) is not None:
                upd[k] = s[k]
        b, rollout = s.get("batch_size"), r.meta.rollout_batch_size or r.meta.batch_size
        if b and b != r.meta.batch_size:  # an update batch below P x G (mini-batches): the trial's B, not P x G
            upd["batch_size"] = int(b)
            upd["rollout_batch_size"] = rollout
        r.meta = r.meta.model_copy(update=upd)
        return r

    def idle(self, run_id: str) -> bool:
        return not self._job(run_id).running()

    def stop(self, trial, reason: str) -> None:
        self.stopped.add(trial.run_id)
        self._job(trial.run_id).stop()

    def resume_hint(self, trial) -> str:
        return self._job(trial.run_id).resume_hint()
