"""Trials trained here: worker processes on this machine, each trial with rlbatch's trainer (``runner="local"``) or
with TRL's ``GRPOTrainer`` (``runner="trl"``, :mod:`rlbatch.backends.local_trl`), into ``OUT/trials/<run_id>``, with
the study's manifest ``OUT/sweep.json`` (:mod:`rlbatch.study.manifest`, shared with :mod:`rlbatch.backends.ray`, so a
sweep started with one backend resumes with the other).

Trials run in worker processes (``workers``, each with ``threads`` torch threads) that are reused across trials, so
torch/transformers are imported once per worker, not once per trial. Only the parent writes ``sweep.json``.
A trial whose state is ``finished`` (and whose run directory says so) is never rerun; an interrupted one resumes
from its last checkpoint.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path
from typing import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from rlbatch.backends.local_trl import run_trial_trl
from rlbatch.errors import Interrupted, UserError
from rlbatch.procs import die_with_parent
from rlbatch.progress import After, Eta, EtaColumn
from rlbatch.runstore import check_writable, lock_run_dir, remove_stale_temps
from rlbatch.study.ladder import TrialSpec, trial_order
from rlbatch.study.manifest import TRIALS_DIR, read_manifest, short_error, trial_finished, write_manifest


def run_trial(spec: TrialSpec, run_dir: Path | str) -> Path:
    """Train one trial into ``run_dir`` (resuming it if it was interrupted; returning at once if finished)."""
    # lazy here and below: the trainer imports torch, which the launch backends and `rlbatch --help` must not pay for
    from rlbatch.train.trainer import train

    return train(spec.train_config(), run_dir, resume=True)


# --------------------------------------------------------------------------------------------------- workers
def _init_worker(threads: int, parent_pid: int | None = None, in_process: bool = False) -> None:
    """Set up a process that trains: a pool worker ignores Ctrl-C (the parent's to handle: it stops the workers);
    ``in_process`` (one worker: the sweep's own process) keeps it, so Ctrl-C interrupts the sweep."""
    if not in_process:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_pid is not None:
        die_with_parent(parent_pid)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore")
    import torch  # lazy: only a worker that trains pays for torch (see run_trial)

    torch.set_num_threads(threads)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Stop a pool's workers now (Ctrl-C): their trials resume from their checkpoints on the next run."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    # let the pool's manager thread see its workers gone and close its wakeup pipe now: left running, it can close
    # the pipe while the interpreter's exit hook writes to it, and Ctrl-C then ends with "Exception ignored ...
    # OSError: [Errno 9] Bad file descriptor" under the one line (CPython 3.11's concurrent.futures; a fresh-clone
    # test_ctrl_c_is_one_line_early_and_mid_sweep caught it once in four runs). Bounded: never a hang on Ctrl-C.
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is not None:
        manager.join(timeout=30)


def _prepare(model: str, device: str = "cpu") -> str:
    """Build the model cache once (e.g. the tiny preset's warm start) before trials start in parallel, on the
    trials' ``device`` (the GPU presets warm-start on it: :mod:`rlbatch.train.gpu_model`)."""
    from rlbatch.train.models import load_model  # lazy: imports torch (see run_trial)

    load_model(model, device)
    return model


def prepare_here(model: str, device: str = "cpu", threads: int = 1) -> None:
    """Make this process a trial worker (``threads`` torch threads, warnings off) and build the model cache once:
    what the adaptive loop needs before it trains trials here in chunks. Ctrl-C still interrupts it."""
    _init_worker(threads, in_process=True)
    _prepare(model, device)


def _work(spec_json: dict, run_dir: str, runner: str = "local") -> tuple[str, str, str | None, float]:
    t0 = time.perf_counter()
    spec = TrialSpec(**spec_json)
    try:
        if runner == "trl":  # TRL's GRPOTrainer in a subprocess (rlbatch.backends.local_trl)
            run_trial_trl(spec, run_dir)
        else:
            run_trial(spec, run_dir)
        return spec.run_id, "finished", None, time.perf_counter() - t0
    except Exception as err:  # a failed trial must not stop the sweep; its state records why
        return spec.run_id, "failed", f"{type(err).__name__}: {err}"[:500], time.perf_counter() - t0


def run_sweep(specs: list[TrialSpec], out: Path | str, *, workers: int = 1, threads: int = 1,
              settings: dict | None = None, progress: bool = True, runner: str = "local",
              after: After | None = None, clock: Callable[[], float] = time.monotonic) -> dict:
    """Run every trial of ``specs`` not yet finished into ``out/trials/<run_id>``, keeping ``out/sweep.json``
    (the specs and each trial's state ``pending|running|finished|failed``). Trials of an existing manifest are kept
    (matched by run id) and new ones appended, so a re-run skips finished trials and resumes the others.
    ``runner``: ``local`` (our trainer) or ``trl`` (each trial with TRL's GRPOTrainer,
    :mod:`rlbatch.backends.local_trl`);
    it is the manifest's ``backend``. ``progress``: a live bar on a terminal, else one plain line per trial (flushed),
    each with the time elapsed and left (:class:`rlbatch.progress.Eta` on ``clock``); the time left includes
    ``after``, what the command does once the trials end (default: the report over the sweep's trials; the demo adds
    its timing pass). Returns the manifest."""

    out = Path(out)
    check_writable(out)
    lock = lock_run_dir(out)  # one sweep process per directory; released on exit, even by kill -9
    try:
        remove_stale_temps(out)  # a killed manifest write's temp file
        return _run_sweep(specs, out, workers, threads, settings, progress, runner, after, clock)
    finally:
        if lock is not None:
            lock.close()


def _run_sweep(specs: list[TrialSpec], out: Path, workers: int, threads: int, settings: dict | None,
               progress: bool, runner: str = "local", after: After | None = None,
               clock: Callable[[], float] = time.monotonic) -> dict:
    manifest = read_manifest(out) or {"version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                      "settings": settings or {}, "trials": []}
    if settings:
        manifest["settings"] = settings
    manifest["backend"] = runner
    known = {t["spec"].run_id: t for t in manifest["trials"]}
    for spec in specs:
        if spec.run_id in known:
            if known[spec.run_id]["spec"] != spec and not trial_finished(out, known[spec.run_id]):
                known[spec.run_id]["spec"] = spec
        else:
            entry = {"run_id": spec.run_id, "spec": spec, "state": "pending",
                     "run_dir": f"{TRIALS_DIR}/{spec.run_id}", "attempts": 0, "error": None, "seconds": None}
            manifest["trials"].append(entry)
            known[spec.run_id] = entry
    order = [s.run_id for s in trial_order(specs)]
    manifest["order"] = order  # the order trials run in: seed-major rounds, each shuffled (a fixed seed)
    todo = [known[r] for r in order if not trial_finished(out, known[r])]
    for entry in todo:
        entry["state"] = "pending"
    write_manifest(out, manifest)
    skipped = len(specs) - len(todo)
    if not todo:
        if progress:
            print(f"sweep: all {len(specs)} trials already finished in {out}", flush=True)
        return manifest

    after = after if after is not None else After()  # the report over the sweep's trials follows
    if after.report and after.runs is None:
        after = replace(after, runs=len(manifest["trials"]))
    eta = Eta(len(todo), name="trials", after=after, clock=clock)
    bar = None
    if progress and sys.stdout.isatty():  # a log file or pipe gets no live bar: one plain line per trial instead
        bar = Progress(TextColumn("[bold]sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                       EtaColumn(eta))
        bar.start()
        tid = bar.add_task("trials", total=len(todo), info=f"{skipped} already finished" if skipped else "")

    def done(run_id: str, state: str, error: str | None, secs: float) -> None:
        entry = known[run_id]
        entry.update(state=state, error=error, seconds=round(secs, 2), attempts=int(entry.get("attempts") or 0) + 1)
        write_manifest(out, manifest)
        why = f": {short_error(error)}" if error else ""
        eta.advance()
        if bar is not None:
            bar.update(tid, advance=1, info=f"{run_id}: {state} ({secs:.0f} s)")
            if why:  # a failure says why above the live bar (its state and error are in sweep.json too)
                bar.console.print(f"sweep: {run_id}: failed{why}", highlight=False, soft_wrap=True)
        elif progress:
            print(f"sweep: {eta.done}/{len(todo)} {run_id}: {state} ({secs:.0f} s; {eta.text()}){why}", flush=True)

    try:
        if workers <= 1:
            _init_worker(threads, in_process=True)  # (it ignored Ctrl-C here: a 1-worker sweep ran to its end)
            _prepare(todo[0]["spec"].model, todo[0]["spec"].options.get("device", "cpu"))
            for entry in todo:
                entry["state"] = "running"
                write_manifest(out, manifest)
                done(*_work(entry["spec"].model_dump(mode="json"), str(out / entry["run_dir"]), runner))
        else:
            try:
                ctx = mp.get_context("spawn")
                with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                         initargs=(threads, os.getpid())) as pool:
                    # the workers start (spawn) on the first submit with Ctrl-C ignored, inherited from here: a
                    # terminal's Ctrl-C reaches every process of the group, and a worker still importing torch
                    # would print its own traceback; the parent stops them (below). Blocked as well as ignored
                    # here, so that a Ctrl-C during the spawn is held, not lost (Linux never discards a blocked
                    # signal), and delivered to the restored handler when unblocked: it used to be dropped, and a
                    # sweep interrupted then ran to its end (seen on a busy machine). Blocking holds it for this thread
                    # only: where the process has other threads (rich's refresh thread on a terminal), one delivered
                    # to another thread in this window is still lost, and a second Ctrl-C stops the sweep
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
                    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
                    try:
                        first = pool.submit(_prepare, todo[0]["spec"].model,
                                            todo[0]["spec"].options.get("device", "cpu"))
                    except BaseException:
                        signal.signal(signal.SIGINT, handler)
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
                        raise
                    signal.signal(signal.SIGINT, handler)
                    try:
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a held Ctrl-C raises here
                        first.result()
                    except KeyboardInterrupt:
                        _stop_workers(pool)
                        raise
                    queue = list(todo)  # in the study's interleaved order (trial_order, recorded in the manifest)
                    running = {}
                    try:
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
                    except KeyboardInterrupt:
                        _stop_workers(pool)  # else leaving the pool waits for the running trials to end
                        raise
            except BrokenProcessPool:  # a worker was killed: its trial resumes from its checkpoint next time
                raise UserError("a worker process died (killed or out of memory); run the same command again to "
                                "resume the unfinished trials", path=str(out)) from None
    except KeyboardInterrupt:
        kept = sum(1 for e in manifest["trials"] if e.get("state") == "finished")
        interrupted = Interrupted(f"interrupted: rerun the same command to resume ({kept} of "
                                  f"{len(manifest['trials'])} trials kept in {out})")
        raise interrupted from None
    finally:
        if bar is not None:
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
