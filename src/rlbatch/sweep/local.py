"""Local batch-size sweeps: one trial per (batch size, group size, seed) under an LR rule, plus an optional fixed-LR
control, every trial trained to the same retained-sample budget; a resumable manifest (``sweep.json``); then the
report.

The manifest is shared by every backend that runs the trainer (this one and :mod:`rlbatch.sweep.ray`):
``{"version", "created", "backend": "local"|"ray", "settings": {...}, "trials": [{"run_id", "spec" (TrialSpec
fields), "state": pending|running|finished|failed, "run_dir" ("trials/<run_id>", relative to the sweep directory),
"attempts", "error", "seconds"}]}``, so a sweep started with one backend resumes with the other.

Trials run in worker processes (``workers``, each with ``threads`` torch threads) that are reused across trials, so
torch/transformers are imported once per worker, not once per trial. Only the parent writes ``sweep.json``.
A trial whose state is ``finished`` (and whose run directory says so) is never rerun; an interrupted one resumes
from its last checkpoint.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlbatch.errors import UserError
from rlbatch.procs import die_with_parent
from rlbatch.runstore import (atomic_write_text, check_writable, is_run_dir, lock_run_dir, read_meta,
                              remove_stale_temps)

SWEEP_JSON = "sweep.json"
TRIALS_DIR = "trials"


class TrialSpec(BaseModel):
    """One trial of a sweep. ``lr`` is the learning rate actually used (``scaled_lr`` of B = P x G from
    ``base_batch``/``base_lr`` under ``lr_rule``; ``none`` for the fixed-LR control). ``options`` are further
    :class:`rlbatch.train.trainer.TrainConfig` fields (eval_every, eval_size, max_new_tokens, micro_batch_size,
    stop_at_target, stop_hold, max_grad_norm, max_steps, ...)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    model: str = "tiny"
    task: str = "arithmetic"
    prompts_per_step: int = Field(ge=1)
    group_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    lr_rule: Literal["sqrt", "linear", "none"]
    base_batch: int = Field(ge=1)
    base_lr: float = Field(gt=0)
    samples: int = Field(ge=1)
    seed: int = 0
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def config_id(self) -> str:
        """The trial's configuration without the seed (trials of one configuration differ only in seed)."""
        return config_id(self.run_id)

    def train_config(self):
        from rlbatch.train.trainer import make_config

        return make_config(model=self.model, task=self.task, prompts_per_step=self.prompts_per_step,
                           group_size=self.group_size, lr=self.lr, lr_rule=self.lr_rule, base_batch=self.base_batch,
                           base_lr=self.base_lr, samples=self.samples, seed=self.seed,
                           run_id=self.run_id, **self.options)


def config_id(run_id: str) -> str:
    """``B64-G8-sqrt-s2`` -> ``B64-G8-sqrt``."""
    head, _, tail = run_id.rpartition("-s")
    return head if head and tail.isdigit() else run_id


def plan_trials(*, base_batch: int, base_lr: float, batches: list[int], rule: str = "sqrt",
                group_sizes: list[int] | None = None, seeds: int = 1, fixed_lr_control: int | None = None,
                samples: int, model: str = "tiny", task: str = "arithmetic",
                options: dict[str, Any] | None = None, seed_offset: int = 0) -> list[TrialSpec]:
    """The trials of a sweep: for every B in ``batches`` (B0 is added when missing: it is the reference) and every
    G in ``group_sizes`` that divides B, P = B / G and lr = ``scaled_lr(B, B0, lr0, rule)``; plus, if asked, the
    fixed-LR control at B = ``fixed_lr_control`` with lr = lr0 (rule ``none``). Each configuration is repeated for
    seeds ``seed_offset`` .. ``seed_offset + seeds - 1`` (another seed set: another offset). Run ids: ``B{B}-G{G}-{rule}-s{seed}`` and ``B{B}-G{G}-fixed-s{seed}``.

    Raises :class:`UserError` for a G that divides no B, non-positive numbers, or an unknown rule.
    """
    from rlbatch.scaling import scaled_lr

    group_sizes = group_sizes or [8]
    if seeds < 1:
        raise UserError("--seeds must be >= 1", field="seeds")
    if seed_offset < 0:
        raise UserError("--seed-offset must be >= 0", field="seed_offset")
    if samples < 1:
        raise UserError("--samples must be >= 1", field="samples")
    bs = sorted(set([base_batch, *batches]))
    configs: list[tuple[int, int, str, float]] = []
    for b in bs:
        for g in group_sizes:
            if b % g == 0:
                configs.append((b, g, rule, scaled_lr(b, base_batch, base_lr, rule)))
    if fixed_lr_control is not None:
        for g in group_sizes:
            if fixed_lr_control % g == 0:
                configs.append((fixed_lr_control, g, "none", base_lr))
    if not configs:
        raise UserError(f"no batch size in {bs} is divisible by a group size in {group_sizes}", field="group_sizes")
    from rlbatch.train.async_rollout import sweep_variants

    specs = []
    for suffix, opts in sweep_variants(options):  # async hook: the synchronous ladder, then the asynchronous one
        for b, g, r, lr in configs:
            for s in range(seed_offset, seed_offset + seeds):
                tag = "fixed" if r == "none" else r
                specs.append(TrialSpec(run_id=f"B{b}-G{g}-{tag}{suffix}-s{s}", model=model, task=task,
                                       prompts_per_step=b // g, group_size=g, lr=lr, lr_rule=r, base_batch=base_batch,
                                       base_lr=base_lr, samples=samples, seed=s, options=opts))
    specs[0].train_config()  # validate the trainer options once, before anything runs
    return specs


def run_trial(spec: TrialSpec, run_dir: Path | str) -> Path:
    """Train one trial into ``run_dir`` (resuming it if it was interrupted; returning at once if finished)."""
    from rlbatch.train.trainer import train

    return train(spec.train_config(), run_dir, resume=True)


# --------------------------------------------------------------------------------------------------- manifest
def read_manifest(out: Path) -> dict | None:
    path = out / SWEEP_JSON
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["trials"] = [{**t, "spec": TrialSpec(**t["spec"])} for t in data["trials"]]
        return data
    except (json.JSONDecodeError, KeyError, TypeError, ValidationError) as err:
        raise UserError(f"malformed sweep manifest ({str(err).splitlines()[0]}); move it away to start afresh",
                        path=str(path)) from None


def write_manifest(out: Path, manifest: dict) -> None:
    """Write ``out/sweep.json`` atomically; :class:`UserError` naming it if it cannot be written (disk full)."""
    from rlbatch.runstore import write_error

    data = {**manifest, "trials": [{"run_id": t["spec"].run_id, **t, "spec": t["spec"].model_dump(mode="json")}
                                   for t in manifest["trials"]]}
    try:
        atomic_write_text(out / SWEEP_JSON, json.dumps(data, indent=2) + "\n")
    except OSError as err:
        raise write_error(err, out / SWEEP_JSON, "; the previous sweep.json is intact") from None


def _trial_finished(out: Path, entry: dict) -> bool:
    run_dir = out / entry["run_dir"]
    return entry.get("state") == "finished" and is_run_dir(run_dir) and read_meta(run_dir).status == "finished"


# --------------------------------------------------------------------------------------------------- workers
def _init_worker(threads: int, parent_pid: int | None = None) -> None:
    if parent_pid is not None:
        die_with_parent(parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(threads)


def _prepare(model: str, device: str = "cpu") -> str:
    """Build the model cache once (e.g. the tiny preset's warm start) before trials start in parallel, on the
    trials' ``device`` (the GPU presets warm-start on it: :mod:`rlbatch.train.gpu_model`)."""
    from rlbatch.train.models import load_model

    load_model(model, device)
    return model


def _work(spec_json: dict, run_dir: str, runner: str = "local") -> tuple[str, str, str | None, float]:
    t0 = time.perf_counter()
    spec = TrialSpec(**spec_json)
    try:
        if runner == "trl":  # TRL's GRPOTrainer in a subprocess (rlbatch.sweep.trl.run_trial_trl)
            from rlbatch.sweep.trl import run_trial_trl

            run_trial_trl(spec, run_dir)
        else:
            run_trial(spec, run_dir)
        return spec.run_id, "finished", None, time.perf_counter() - t0
    except Exception as err:  # a failed trial must not stop the sweep; its state records why
        return spec.run_id, "failed", f"{type(err).__name__}: {err}"[:500], time.perf_counter() - t0


def run_sweep(specs: list[TrialSpec], out: Path | str, *, workers: int = 1, threads: int = 1,
              settings: dict | None = None, progress: bool = True, runner: str = "local") -> dict:
    """Run every trial of ``specs`` not yet finished into ``out/trials/<run_id>``, keeping ``out/sweep.json``
    (the specs and each trial's state ``pending|running|finished|failed``). Trials of an existing manifest are kept
    (matched by run id) and new ones appended, so a re-run skips finished trials and resumes the others.
    ``runner``: ``local`` (our trainer) or ``trl`` (each trial with TRL's GRPOTrainer, :mod:`rlbatch.sweep.trl`);
    it is the manifest's ``backend``. Returns the manifest."""
    out = Path(out)
    check_writable(out)
    lock = lock_run_dir(out)  # one sweep process per directory; released on exit, even by kill -9
    try:
        remove_stale_temps(out)  # a killed manifest write's temp file
        return _run_sweep(specs, out, workers, threads, settings, progress, runner)
    finally:
        if lock is not None:
            lock.close()


def _run_sweep(specs: list[TrialSpec], out: Path, workers: int, threads: int, settings: dict | None,
               progress: bool, runner: str = "local") -> dict:
    manifest = read_manifest(out) or {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                      "settings": settings or {}, "trials": []}
    if settings:
        manifest["settings"] = settings
    manifest["backend"] = runner
    known = {t["spec"].run_id: t for t in manifest["trials"]}
    for spec in specs:
        if spec.run_id in known:
            if known[spec.run_id]["spec"] != spec and not _trial_finished(out, known[spec.run_id]):
                known[spec.run_id]["spec"] = spec
        else:
            entry = {"run_id": spec.run_id, "spec": spec, "state": "pending",
                     "run_dir": f"{TRIALS_DIR}/{spec.run_id}", "attempts": 0, "error": None, "seconds": None}
            manifest["trials"].append(entry)
            known[spec.run_id] = entry
    todo = [known[s.run_id] for s in specs if not _trial_finished(out, known[s.run_id])]
    for entry in todo:
        entry["state"] = "pending"
    write_manifest(out, manifest)
    skipped = len(specs) - len(todo)
    if not todo:
        if progress:
            print(f"sweep: all {len(specs)} trials already finished in {out}")
        return manifest

    bar = None
    if progress:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                       TimeElapsedColumn())
        bar.start()
        tid = bar.add_task("trials", total=len(todo), info=f"{skipped} already finished" if skipped else "")

    def done(run_id: str, state: str, error: str | None, secs: float) -> None:
        entry = known[run_id]
        entry.update(state=state, error=error, seconds=round(secs, 2), attempts=int(entry.get("attempts") or 0) + 1)
        write_manifest(out, manifest)
        if bar:
            bar.update(tid, advance=1, info=f"{run_id}: {state} ({secs:.0f} s)")
            if not sys.stdout.isatty():  # a log file gets no live bar: one plain line per trial instead
                n = sum(1 for e in todo if e["state"] in ("finished", "failed"))
                print(f"sweep: {n}/{len(todo)} {run_id}: {state} ({secs:.0f} s)", flush=True)

    try:
        if workers <= 1:
            _init_worker(threads)
            _prepare(todo[0]["spec"].model, todo[0]["spec"].options.get("device", "cpu"))
            for entry in todo:
                entry["state"] = "running"
                write_manifest(out, manifest)
                done(*_work(entry["spec"].model_dump(mode="json"), str(out / entry["run_dir"]), runner))
        else:
            import multiprocessing as mp
            from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
            from concurrent.futures.process import BrokenProcessPool

            try:
                ctx = mp.get_context("spawn")
                with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                         initargs=(threads, os.getpid())) as pool:
                    pool.submit(_prepare, todo[0]["spec"].model,
                                todo[0]["spec"].options.get("device", "cpu")).result()
                    queue = list(todo)
                    # longest trials (smallest B: most steps) first, so the tail is short
                    queue.sort(key=lambda e: (e["spec"].batch_size, e["spec"].run_id))
                    running = {}
                    while queue or running:
                        while queue and len(running) < workers:
                            entry = queue.pop(0)
                            entry["state"] = "running"
                            write_manifest(out, manifest)
                            fut = pool.submit(_work, entry["spec"].model_dump(mode="json"),
                                              str(out / entry["run_dir"]), runner)
                            running[fut] = entry
                        finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                        for fut in finished:
                            running.pop(fut)
                            done(*fut.result())
            except BrokenProcessPool:  # a worker was killed: its trial resumes from its checkpoint next time
                raise UserError("a worker process died (killed or out of memory); run the same command again to "
                                "resume the unfinished trials", path=str(out)) from None
    finally:
        if bar:
            bar.stop()
        for entry in manifest["trials"]:
            if entry["state"] == "running":
                entry["state"] = "pending"  # interrupted: resumes from its checkpoint next time
        in_flight = sys.exc_info()[0] is not None
        try:
            write_manifest(out, manifest)
        except UserError:
            if not in_flight:  # else keep the error already on its way out
                raise
    return manifest
