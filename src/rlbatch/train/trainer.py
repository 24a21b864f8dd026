"""The training loop, top to bottom in :func:`run_loop`: a rollout source gives step s's scored batch
(:class:`rlbatch.train.rollout.SyncRollouts`, or :class:`rlbatch.train.async_rollout.AsyncRollouts` decoding ahead
in its own process), the algorithm's update function trains on it (:func:`rlbatch.train.grpo.grpo_update`: group
advantages, filtering, one optimizer step per rollout batch or per mini-batch; :func:`rlbatch.train.ppo.ppo_update`:
value model, GAE, a separate critic optimizer), and the run's counters (:class:`rlbatch.train.state.StepState`) go
into a run directory with every canonical metric of DESIGN.md, greedy evaluations every N retained samples, atomic
checkpoints and exact resume (:mod:`rlbatch.runstore`). Everything that differs between GRPO and PPO, synchronous
and asynchronous rollouts, or CPU and CUDA is chosen once, in :func:`setup`.

Reproducibility: the prompts of step s are drawn with ``numpy.random.default_rng([seed, s])`` and the responses
sampled with a ``torch.Generator`` seeded from ``(seed, s)``, so a run's data depend only on its seed and step; a
checkpoint (model, optimizer, RNG states, data-sampler position = step, counters, metrics/eval line counts) lets
``resume=True`` continue a killed run with metrics identical (timing aside) to an uninterrupted run on CPU.
"""

from __future__ import annotations

import copy
import math
import os
import platform
import random
import resource
import time
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import transformers
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rlbatch import faults
from rlbatch.errors import UserError
from rlbatch.procs import threads_beside
from rlbatch.runstore import (CHECKPOINT, EVAL_JSONL, METRICS_JSONL, JsonlWriter, check_writable,
                              finite_record, lock_run_dir, make_meta, read_meta, remove_stale_temps, truncate_lines,
                              unlock_run_dir, update_meta, write_error, write_meta)
from rlbatch.train.checkpoint import load_checkpoint, save_checkpoint, set_rng_states
from rlbatch.train import async_rollout, ppo, tasks
from rlbatch.train import auto as auto_batch
from rlbatch.train.grpo import NonFiniteError, backward_pass, grpo_update, make_adamw
from rlbatch.train.models import load_model
from rlbatch.train.precision import precision_context
from rlbatch.train.rollout import (Batch, GenStats, RolloutSource, Sampler, SyncRollouts, evaluate,
                                   fitted_concurrency, greedy_sample, render_prompt, sampling)
from rlbatch.train.config import TrainConfig
from rlbatch.train.state import Learner, StepState, UpdateResult

#: The update function of each algorithm: ``update(learner, batch, step) -> UpdateResult``.
UPDATES: dict[str, Callable[[Learner, Batch, int], UpdateResult]] = {"grpo": grpo_update, "ppo": ppo.ppo_update}




# --------------------------------------------------------------------------------------------------- entry point
def train(cfg: TrainConfig, out_dir: Path | str, *, resume: bool = False, progress: bool = False,
          model_tok=None, task=None) -> Path:
    """Run (or resume) GRPO or PPO as configured, writing the run directory ``out_dir``; returns it.

    ``model_tok``/``task`` may be passed pre-built (tests, sweeps); otherwise ``load_model(cfg.model)`` and
    ``get_task(cfg.task, seed=cfg.split_seed)``. Stops when ``samples/retained`` reaches ``cfg.samples``, the
    target is reached and held (``stop_at_target``), or ``max_steps``/``max_time_s`` is hit; ``run.json`` records
    the reason. Raises :class:`UserError` for bad configuration or an existing run without ``resume``.

    Faults: a kill at any point (``kill -9``) loses at most the steps since the last checkpoint; ``resume=True``
    drops their lines and recomputes them, giving metrics identical (timing aside) to an uninterrupted run on CPU.
    The directory is locked (``.lock``) while training. A NaN/Inf loss or gradient raises :class:`UserError`
    before the step is logged or checkpointed (run.json: ``failed`` with the reason; the last checkpoint stays);
    a failed write (disk full, unwritable) raises :class:`UserError` naming the file, earlier lines and the last
    checkpoint intact.
    """
    out = Path(out_dir)
    # what the user named first: an unknown --task or --model fails before any other setting is checked
    task = task or tasks.get_task(cfg.task, seed=cfg.split_seed, eval_size=cfg.eval_size)
    model_tok = model_tok or load_model(cfg.model, cfg.device)
    cfg.check_updates()
    auto_batch.check(cfg)
    lr, micro = cfg.resolved_lr(), cfg.resolved_micro()
    async_rollout.check_config(cfg)
    cfg.resolved_critic_lr()  # a bad critic-lr configuration fails before anything is written (PPO; GRPO: the lr)
    ckpt_path = out / CHECKPOINT
    if not resume and ((out / METRICS_JSONL).exists() or ckpt_path.exists()):
        raise UserError("already holds a run; pass --resume to continue it or choose another --out", path=str(out))
    if resume and (out / "run.json").exists() and read_meta(out).status == "finished":
        done = read_meta(out)
        # a run that stopped on its budget continues when asked for a larger one (adaptive sweeps); else it is done
        if not (done.stop_reason == "retained-sample budget reached" and ckpt_path.exists()
                and (getattr(done, "samples_retained", None) or 0) < cfg.samples):
            return out
    threads = cfg.threads or default_trainer_threads(cfg)
    if threads:
        torch.set_num_threads(threads)
    existed = out.exists()
    check_writable(out)
    lock = lock_run_dir(out)
    try:
        with precision_context(cfg.precision, cfg.device):
            return run_loop(setup(cfg, out, lr, micro, resume, progress, model_tok, task))
    finally:
        unlock_run_dir(out, lock, existed)


def default_trainer_threads(cfg: TrainConfig) -> int | None:
    """The trainer's torch threads when ``cfg.threads`` is not given: with asynchronous rollouts the usable cores
    less the generation process's ``rollout_threads`` (:func:`rlbatch.procs.threads_beside`), so the two processes
    do not oversubscribe the machine; None (torch's default) for the synchronous loop."""
    return threads_beside(cfg.rollout_threads) if async_rollout.enabled(cfg) else None


# --------------------------------------------------------------------------------------------------- the loop
def run_loop(r: "Run") -> Path:
    """Train until :func:`stop_reason` says stop: each step gets its scored batch from the rollout source, updates
    the policy with the algorithm's update function, logs one metrics line, evaluates every ``eval_every``
    retained samples and checkpoints every ``checkpoint_every`` steps; then a last evaluation and checkpoint and
    ``run.json`` finished. Returns the run directory."""
    cfg, state = r.cfg, r.state
    try:
        if state.step == 0 and state.eval_lines == 0:
            r.evaluate()
            state.next_eval = cfg.eval_every
        while (why := stop_reason(cfg, state)) is None:
            step = state.step + 1
            if r.auto is not None:  # --batch auto: this step's P, learning rate and micro-batch
                r.auto.before_step()
            t0, c0 = time.perf_counter(), time.process_time()
            batch = r.next_batch(step)  # sampled and scored (synchronously, or decoded ahead)
            t2 = time.perf_counter()
            upd = r.update(r.learner, batch, step)  # GRPO or PPO: zero or more optimizer steps
            r.source.publish(step, r.learner.model, snapshot=step % cfg.checkpoint_every == 0)
            r.settle()  # CUDA: the optimizer step's kernels count in this step's update time
            t3, c3 = time.perf_counter(), time.process_time()
            gen_tok = int(batch.rollout.response_mask.sum())
            state.advance(step, upd.retained, len(batch.items), gen_tok, upd.tokens_trained, t3 - t0)
            line = metrics_line(state, batch, upd, r.learner.lr, gen_tok, step_s=t3 - t0, train_s=t3 - t2,
                                cpu_s=c3 - c0)
            r.log_metrics({**line, **r.source.step_metrics(c3 - c0)})
            if r.auto is not None:
                r.auto.after_step(line)
            if state.eval_due():
                r.evaluate()
                state.schedule_next_eval(cfg.eval_every)
            if step % cfg.checkpoint_every == 0:
                r.checkpoint()
            r.progress.update(state, float(batch.rewards.mean()))
        if state.last_eval_step != state.step:
            r.evaluate()
        r.checkpoint()
        update_meta(r.out, status="finished", stop_reason=why, steps=state.step,
                    samples_retained=state.samples_retained, samples_generated=state.samples_generated,
                    max_concurrent_sequences=cfg.max_concurrent_sequences, **peak_memory(cfg.device, r.gen_stats))
    except BaseException as err:
        final = r.failed(err)
        if final is not err:
            raise final from None
        raise
    finally:
        r.close()
    return r.out


def stop_reason(cfg: TrainConfig, state: StepState) -> str | None:
    """Why the run stops before step ``state.step + 1`` (the sentence run.json records), or None to go on: the
    target reached and held, the retained-sample budget, ``max_steps``, ``max_time_s``, or ``max_empty_steps``
    steps in a row with every group filtered."""
    if cfg.stop_at_target is not None and state.hold >= cfg.stop_hold:
        return f"target {cfg.stop_at_target:g} reached and held for {cfg.stop_hold} evaluations"
    if state.samples_retained >= cfg.samples:
        return "retained-sample budget reached"
    if cfg.max_steps is not None and state.step >= cfg.max_steps:
        return f"max_steps {cfg.max_steps} reached"
    if cfg.max_time_s is not None and state.wall_s >= cfg.max_time_s:
        return f"max_time_s {cfg.max_time_s:g} reached"
    if state.empty >= cfg.max_empty_steps:
        return (f"no learning signal: {cfg.max_empty_steps} consecutive steps had every group filtered (all "
                "rewards equal)")
    return None


def metrics_line(state: StepState, batch: Batch, upd: UpdateResult, lr: float, gen_tokens: int, *, step_s: float,
                 train_s: float, cpu_s: float) -> dict[str, Any]:
    """The metrics.jsonl line of the step ``state`` has just counted (DESIGN.md names; seconds; ``gen_tokens``:
    the batch's response tokens): counters, timings (generation and scoring from the batch, ``train_s`` the
    update, ``step_s`` the whole step, ``cpu_s`` the trainer's CPU seconds), reward mean/std over the batch,
    ``lr``, batch and group sizes before/after filtering, mean response length, then the update's own metrics."""
    n, rewards = len(batch.items), batch.rewards
    return {**state.counters(), "time/gen_s": batch.gen_s, "time/reward_s": batch.reward_s, "time/train_s": train_s,
            "time/step_s": step_s, "time/cpu_s": cpu_s, "time/wall_s": state.wall_s,
            "reward/mean": float(rewards.mean()), "reward/std": float(rewards.std()) if len(rewards) > 1 else 0.0,
            "lr": lr, "batch/retained": upd.retained, "batch/generated": n, "groups/retained": upd.groups_retained,
            "groups/generated": upd.groups, "response_length/mean": gen_tokens / n, **upd.metrics}


# --------------------------------------------------------------------------------------------------- set-up
@dataclass
class Run:
    """Everything :func:`run_loop` uses, built once by :func:`setup`: the configuration (with the fitted
    ``max_concurrent_sequences``), the run directory and its writers, the counters, the learner, the rollout source
    and ``next_batch`` (its ``get``, counting fault steps when faults are armed), the update function and
    ``algo_state`` (what the checkpoint keeps besides the policy: PPO's critic and its optimizer),
    ``settle`` (waits for queued CUDA kernels; a no-op on CPU), the evaluation's inputs (``greedy``: its sampler,
    with the ``gen`` fault point when armed) and the progress display."""

    cfg: TrainConfig
    out: Path
    run_id: str
    state: StepState
    learner: Learner
    source: RolloutSource
    next_batch: Callable[[int], Batch]
    update: Callable[[Learner, Batch, int], UpdateResult]
    algo_state: Callable[[], dict[str, Any]]
    settle: Callable[[], None]
    greedy: Sampler
    tok: Any
    task: Any
    gen_stats: GenStats
    metrics: JsonlWriter
    evals: JsonlWriter
    progress: Any
    saved_step: int | None = None
    auto: Any = None  # --batch auto: rlbatch.train.auto.AutoBatch

    def evaluate(self) -> float:
        """Greedy evaluation on the task's held-out items; one eval.jsonl line. Evaluation time is off the clock,
        but an asynchronous generator keeps decoding meanwhile: its busy seconds during the evaluation are charged
        to the clock (``time/wall_s`` from here on; ``time/gen_during_eval_s`` in the eval line), so that work done
        off the clock is not free (statistics review finding 8; issue 44)."""
        busy = getattr(self.source, "busy_seconds", lambda: 0.0)
        busy0 = busy()
        sc, n, dt = evaluate(self.learner.model, self.tok, self.task, self.cfg.max_new_tokens,
                             self.cfg.eval_batch_size, max_concurrent=self.cfg.max_concurrent_sequences,
                             sample=self.greedy)
        charge = max(0.0, busy() - busy0)
        self.state.wall_s += charge
        line = self.state.eval_line(sc, n, dt, self.cfg.stop_at_target)
        if charge:
            line["time/gen_during_eval_s"] = charge
        self.evals.append(finite_record(line))
        self.state.eval_lines += 1
        return sc

    def log_metrics(self, line: dict[str, Any]) -> None:
        self.metrics.append(finite_record(line))
        self.state.metrics_lines += 1

    def checkpoint(self) -> None:
        """Save the checkpoint of this step (the learner, the counters, the algorithm's and the source's state)."""
        extra = {**self.algo_state(), **self.source.checkpoint(), **(self.auto.state() if self.auto else {})}
        save_checkpoint(self.out, self.learner.model, self.learner.optimizer, self.state.to_dict(), extra or None)
        self.saved_step = self.state.step

    def kept_note(self) -> str:
        ck = (f"the last checkpoint (step {self.saved_step}) is intact" if self.saved_step is not None
              else "no checkpoint yet")
        return f"; earlier lines are intact, {ck}; free space and rerun with --resume"

    def failed(self, err: BaseException) -> BaseException:
        """Record the failure in run.json; returns the error to raise (a :class:`UserError` for a failed write or a
        diverged step, else ``err`` itself)."""
        if isinstance(err, OSError):
            final = write_error(err, self.out, self.kept_note())
        elif isinstance(err, NonFiniteError):
            final = _diverged(self.out, self.state.step + 1, err, self.saved_step)
        else:
            final = err
        try:
            why = str(final) if isinstance(final, UserError) else f"{type(err).__name__}: {err}"
            update_meta(self.out, status="failed", stop_reason=why[:500])
        except Exception:
            pass
        return final

    def close(self) -> None:
        if self.auto is not None:
            self.auto.close()
        self.source.close()
        self.metrics.close()
        self.evals.close()
        self.progress.close()


def setup(cfg: TrainConfig, out: Path, lr: float, micro: int, resume: bool, progress: bool, model_tok,
          task) -> Run:
    """Build the :class:`Run` of ``cfg`` in ``out``: the model (and a frozen reference copy with a KL term), AdamW,
    PPO's critic, the counters (fresh and seeded, or restored with the RNG states from the checkpoint), run.json and
    the metrics/eval writers (lines past the checkpoint dropped), the fitted generation concurrency, the rollout
    source (asynchronous with ``async_rollouts`` / ``partial_rollout_tokens``) and the update of ``cfg.algo``, with
    the fault points (:mod:`rlbatch.faults`) wrapped around them when ``RLBATCH_FAULT`` is set."""
    ckpt_path = out / CHECKPOINT
    remove_stale_temps(out)
    model, tok = model_tok
    model.to(cfg.device)
    model.eval()  # dropout off for rollouts and updates (the tiny preset has none; standard in RL fine-tuning)
    ref_model = copy.deepcopy(model).requires_grad_(False) if cfg.kl_coef > 0 else None
    optimizer = make_adamw(model.parameters(), lr=lr, betas=cfg.adam_betas, eps=cfg.adam_eps,
                           weight_decay=cfg.weight_decay)
    critic = ppo.setup(cfg, model, tok) if cfg.algo == "ppo" else None
    learner = Learner(model, optimizer, lr, cfg, micro, ref_model, critic, faults.around_backward(backward_pass))
    state, saved, ck = StepState(), None, {}
    if resume and ckpt_path.exists():
        ck = load_checkpoint(ckpt_path, cfg.device)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        set_rng_states(ck["rng"])
        if critic is not None:
            ppo.load_state_dict(critic, ck)
        state = StepState.from_dict(ck["state"])
        saved = state.step
        if ref_model is not None:  # the reference is the initial policy: rebuild it from the preset
            ref_model.load_state_dict(load_model(cfg.model, cfg.device)[0].state_dict())
    else:
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        torch.manual_seed(cfg.seed)
    run_id = cfg.run_id or out.name or "run"
    meta = make_meta(out / "run.json", **_meta_fields(cfg, run_id, lr, micro, task, critic))
    try:
        truncate_lines(out / METRICS_JSONL, state.metrics_lines)
        truncate_lines(out / EVAL_JSONL, state.eval_lines)
        write_meta(out, meta)
        metrics, evals = JsonlWriter(out / METRICS_JSONL), JsonlWriter(out / EVAL_JSONL)
    except OSError as err:
        note = f"the last checkpoint (step {saved}) is intact" if saved is not None else "no checkpoint yet"
        raise write_error(err, out, f"; earlier lines are intact, {note}; free space and rerun with --resume") \
            from None
    gen_stats = GenStats()
    if cfg.max_concurrent_sequences is None:  # fitted to memory: prompt of the task's longest item + response
        cfg = cfg.model_copy(update={"max_concurrent_sequences": fitted_concurrency(
            model, _context_of(model, tok, task, cfg))})
        learner.cfg = cfg
    cuda = cfg.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    source = (async_rollout.AsyncRollouts(cfg, model, tok, task, state.step, ck.get(async_rollout.CKPT_KEY)
                                          if ck else None, micro=micro)
              if async_rollout.enabled(cfg)
              else SyncRollouts(model, tok, task, cfg, gen_stats, faults.before("gen", sampling(cfg.temperature))))
    faults.set_step(state.step, meta.run_id)
    auto = None
    if cfg.batch == "auto":
        auto = auto_batch.AutoBatch(cfg, learner, out, ck.get(auto_batch.CKPT_KEY) if ck else None)
    return Run(cfg=cfg, out=out, run_id=meta.run_id, state=state, learner=learner, source=source,
               next_batch=faults.counting_steps(source.get, meta.run_id),
               update=faults.then("optim", UPDATES[cfg.algo]),
               algo_state=partial(ppo.state_dict, critic) if critic is not None else dict,
               settle=torch.cuda.synchronize if cuda else _nothing, greedy=faults.before("gen", greedy_sample),
               tok=tok, task=task, gen_stats=gen_stats, metrics=metrics, evals=evals,
               progress=_Progress(cfg.samples, out.name) if progress else _NoProgress(), saved_step=saved, auto=auto)


def _nothing() -> None:
    pass


def _meta_fields(cfg: TrainConfig, run_id: str, lr: float, micro: int, task, critic) -> dict[str, Any]:
    """run.json's fields of a trainer run (DESIGN.md: run store)."""
    return dict(run_id=run_id, algorithm=cfg.algo, model=cfg.model, task=cfg.task,
                prompts_per_step=cfg.prompts_per_step, group_size=cfg.group_size, lr=lr,
                lr_rule=cfg.lr_rule, base_batch=cfg.base_batch, base_lr=cfg.base_lr, seed=cfg.seed,
                backend="rlbatch",
                hardware={"device": cfg.device, "cpu_count": os.cpu_count(),
                          "torch_threads": torch.get_num_threads(), "machine": platform.machine()},
                software=_software(), status="running", stop_reason=None,
                config=cfg.model_dump(mode="json"), micro_batch_size=micro,
                batch_size=cfg.update_batch, rollout_batch_size=cfg.batch_size, ppo_epochs=cfg.ppo_epochs,
                train_prompts=task.train_size, eval_items=len(task.eval_items),
                **({"critic_lr": critic.lr, "critic_base_lr": cfg.critic_base_lr} if critic is not None else {}))


def _software() -> dict:
    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}


def _context_of(model, tok, task, cfg: TrainConfig) -> int:
    """Tokens one sequence may hold, for the fitted ``max_concurrent_sequences``: the longest of the first 256
    training prompts plus ``max_new_tokens``."""
    longest = max((len(render_prompt(it, tok)) for it in islice(task.train, 256)), default=1)
    return longest + cfg.max_new_tokens


def peak_memory(device: str, gen_stats) -> dict:
    """Peak memory of the run so far, bytes: ``peak_memory_bytes`` (CUDA: ``torch.cuda.max_memory_allocated``; CPU:
    the process's peak resident set, ``ru_maxrss``) and ``peak_kv_cache_bytes`` (the largest KV cache plus logits a
    generation step held, measured on the tensors: :class:`rlbatch.train.rollout.GenStats`)."""
    if device.startswith("cuda"):
        peak = int(torch.cuda.max_memory_allocated())
    else:
        peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # kB on Linux
    return {"peak_memory_bytes": peak, "peak_kv_cache_bytes": int(gen_stats.peak_kv_bytes),
            "peak_concurrent_sequences": int(gen_stats.peak_sequences)}


def _diverged(out: Path, step: int, err: Exception, saved_step: int | None) -> UserError:
    ck = (f"the last good checkpoint (step {saved_step}) is kept" if saved_step is not None
          else "no checkpoint had been written yet")
    return UserError(f"training diverged at step {step}: {err}; the step was neither logged nor checkpointed and "
                     f"{ck} (lower the learning rate or clip gradients with --max-grad-norm)", path=str(out))


class _Progress:
    """A rich progress bar over retained samples showing reward, last eval score and samples/s."""

    def __init__(self, total: int, name: str):
        self.p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[info]}"), TimeElapsedColumn())
        self.p.start()
        self.t = self.p.add_task(name or "train", total=total, info="")

    def update(self, state: StepState, reward: float) -> None:
        ev = state.last_eval
        ev_s = f"{ev:.3f}" if ev is not None else "—"
        info = f"step {state.step}  reward {reward:.3f}  eval {ev_s}  " \
               f"{state.samples_retained / max(state.wall_s, 1e-9):.1f} samples/s"
        self.p.update(self.t, completed=min(state.samples_retained, self.p.tasks[0].total), info=info)

    def close(self) -> None:
        self.p.stop()


class _NoProgress:
    """No progress display (``progress=False``)."""

    def update(self, state: StepState, reward: float) -> None:
        pass

    def close(self) -> None:
        pass
