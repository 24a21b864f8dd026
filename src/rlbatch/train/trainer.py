"""The GRPO training loop: rollout -> score -> advantages/filter -> one optimizer step per rollout batch, logging
every canonical metric of DESIGN.md into a run directory, greedy evaluation every N retained samples, atomic
checkpoints and exact resume.

Reproducibility: the prompts of step s are drawn with ``numpy.random.default_rng([seed, s])`` and the responses
sampled with a ``torch.Generator`` seeded from ``(seed, s)``, so a run's data depend only on its seed and step; a
checkpoint (model, optimizer, RNG states, data-sampler position = step, counters, metrics/eval line counts) lets
``resume=True`` continue a killed run with metrics identical (timing aside) to an uninterrupted run on CPU.

With ``algo="ppo"`` the same loop runs PPO: the update step is :func:`rlbatch.train.ppo.ppo_step` (value model, GAE,
separate critic optimizer), every response is kept (no group filtering), and the checkpoint also holds the critic
and its optimizer.
"""

from __future__ import annotations

import math
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlbatch.errors import UserError
from rlbatch.runstore import (EVAL_JSONL, METRICS_JSONL, JsonlWriter, make_meta, read_meta, update_meta, write_error,
                              write_meta)
from rlbatch.train.config import TrainConfig

CHECKPOINT = "checkpoint.pt"
LOCK = ".lock"
#: Metric keys that measure time (excluded when comparing a resumed run with an uninterrupted one).
TIME_KEYS = ("time/gen_s", "time/reward_s", "time/train_s", "time/step_s", "time/cpu_s", "time/wall_s",
             "time/eval_s")


# --------------------------------------------------------------------------------------------------- helpers
def _clean(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in rec.items()}


def check_writable(out: Path) -> None:
    """Create ``out`` and check a file can be written there; :class:`UserError` otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise UserError(f"output directory is not writable ({err.strerror})", path=str(out)) from None


def _truncate_lines(path: Path, n: int) -> None:
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines = [x for x in lines if x.endswith("\n")]
    if len(lines) != n:
        from rlbatch.runstore import atomic_write_text

        atomic_write_text(path, "".join(lines[:n]))


def lock_run_dir(out: Path):
    """Take an exclusive lock on ``out/.lock`` for this process (released when it exits, even by ``kill -9``), so
    two trainers never write one run directory; :class:`UserError` if another process holds it. Returns the open
    file (keep it open while training); None where ``fcntl`` is unavailable."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    fh = open(out / LOCK, "a+")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise UserError(f"directory is in use by another rlbatch process (pid {holder})", path=str(out)) from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def remove_stale_temps(out: Path) -> None:
    """Remove temp files a killed writer left behind (``.checkpoint.pt.tmp``, ``.run.json.*.tmp``,
    ``.metrics.jsonl.*.tmp``, ...); call only while holding the run directory's lock."""
    for p in out.glob(".*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


def _rng_states() -> dict:
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _set_rng_states(s: dict) -> None:
    import torch

    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])


class _Sink:
    """The checkpoint's file as ``torch.save`` sees it: passes writes through, keeps the ``OSError`` of a failed
    write (torch reports it as a bare ``RuntimeError``) and hosts the ``ckpt_write`` / ``enospc_checkpoint``
    fault points (:mod:`rlbatch.faults`), which fire on the third write, with part of the file on disk."""

    def __init__(self, fh):
        from rlbatch import faults

        self.fh, self.n, self.error = fh, 0, None
        self.kill, self.full = faults.armed("ckpt_write"), faults.armed("enospc_checkpoint")

    def write(self, data) -> int:
        from rlbatch import faults

        self.n += 1
        try:
            if self.n == 3 and (self.kill or self.full):
                self.fh.write(data[: len(data) // 2])
                self.fh.flush()
                if self.kill:
                    os.fsync(self.fh.fileno())
                    faults.kill()
                raise faults.enospc()
            return self.fh.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.fh.flush()


def save_checkpoint(out: Path, model, optimizer, state: dict, extra: dict | None = None) -> None:
    """Atomically write ``out/checkpoint.pt`` (temp file + fsync + rename + directory fsync): model and optimizer
    state dicts, RNG states and the loop ``state`` (step = data-sampler position, counters, metrics/eval line
    counts). A kill at any moment leaves the previous checkpoint in place and loadable (at worst a stale
    ``.checkpoint.pt.tmp``, removed on resume). A failed write (disk full) removes the temp file and raises
    ``OSError`` naming ``out/checkpoint.pt``; the previous checkpoint stays."""
    import torch

    from rlbatch import faults
    from rlbatch.runstore import _fsync_dir

    final = out / CHECKPOINT
    tmp = out / f".{CHECKPOINT}.tmp"
    sink = None
    try:
        with open(tmp, "wb") as fh:
            sink = _Sink(fh)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": _rng_states(),
                        "state": state, **(extra or {})}, sink)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except (OSError, RuntimeError) as err:
        try:
            tmp.unlink()
        except OSError:
            pass
        cause = err if isinstance(err, OSError) else (sink.error if sink is not None else None)
        if cause is None:
            raise
        raise OSError(cause.errno, cause.strerror, str(final)) from None
    _fsync_dir(out)
    faults.fault("ckpt_done")


def load_checkpoint(path: Path, device: str) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`; :class:`UserError` naming the file if unreadable."""
    import torch

    try:
        return torch.load(path, map_location=device, weights_only=False)
    except Exception as err:  # noqa: BLE001 - truncated or foreign file
        raise UserError(f"cannot read checkpoint ({type(err).__name__}: {str(err).splitlines()[0][:200]}); move it "
                        "away to restart the run from scratch", path=str(path)) from None


def _software() -> dict:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}


# --------------------------------------------------------------------------------------------------- the loop
def rollout_step(model, tok, task, cfg: TrainConfig, step: int, stats=None):
    """Sample P prompts for ``step`` and G responses each. Returns ``(items [B], rollout [B])``, grouped
    contiguously (responses of prompt p are rows p*G .. p*G+G-1), in chunks of at most
    ``cfg.max_concurrent_sequences`` rows; ``stats`` (:class:`rlbatch.train.rollout.GenStats`) collects the peak
    KV-cache bytes."""
    import torch

    from rlbatch.train.rollout import generate, render_prompt

    prompts = task.step_prompts(cfg.seed, step, cfg.prompts_per_step)
    items = [it for it in prompts for _ in range(cfg.group_size)]
    ids = [render_prompt(it, tok) for it in prompts]  # tokenised and prefilled once per prompt
    gen = torch.Generator(device=cfg.device).manual_seed(int(cfg.seed) * 1_000_003 + step)
    ro = generate(model, tok, ids, cfg.max_new_tokens, temperature=cfg.temperature, generator=gen,
                  num_samples=cfg.group_size, max_concurrent=cfg.max_concurrent_sequences, stats=stats)
    return items, ro


def grpo_update(model, optimizer, lr: float, kept, adv, cfg: TrainConfig, micro: int, ref_model=None,
                old_logp=None, prepared=None):
    """The GRPO updates of one step on the retained rollout ``kept`` ([B_ret, ...], rows grouped by prompt) with
    advantages ``adv`` [B_ret]: ``cfg.ppo_epochs`` passes over mini-batches of ``cfg.update_batch`` responses (whole
    groups, in order; the last one smaller when filtering left fewer), one optimizer step each, every update's loss
    a token mean over its own mini-batch. With more than one update the old policy's log-probabilities are
    computed once first (:func:`rlbatch.train.grpo.old_logprobs`), so the ratio clip binds from the second update
    on; with one (the default) the old policy is the current one, as before. ``old_logp`` [B_ret, T] (asynchronous
    rollouts, :mod:`rlbatch.train.async_rollout`): the behaviour policy's log-probabilities recorded at sampling
    time, the old policy of every update instead. Micro-batches: ``micro`` responses,
    fewer under ``cfg.micro_batch_tokens`` (:func:`rlbatch.train.grpo.token_budget_micro`). ``prepared``: the
    passes' trim bounds and packing plans computed ahead (asynchronous rollouts), used for a single update.

    Returns ``(metrics, tokens trained)``: ``grad_norm/actor``, ``noise/*`` and ``grad_clipped`` of the *first*
    update (on-policy, batch M: the grad-norm fit's and noise scale's inputs), ``loss`` the mean over updates,
    ``clip_frac`` (and ``kl``) over all updates' tokens, ``train/updates``, ``train/micro_batches`` (all passes).
    Raises :class:`rlbatch.train.grpo.NonFiniteError` on a NaN/Inf loss or gradient (nothing of that update applied).
    """
    import numpy as np
    import torch

    from rlbatch.train.grpo import (NonFiniteError, accumulate_gradients, grpo_noise_metrics, old_logprobs,
                                    optimizer_step, token_budget_micro)

    G = cfg.group_size
    n = int(kept.response_ids.shape[0])
    m = token_budget_micro(kept, micro, cfg.micro_batch_tokens)
    M = cfg.update_batch
    minis = [np.arange(i, min(i + M, n)) for i in range(0, n, M)]
    old = old_logp  # asynchronous rollouts: the behaviour policy's recorded log-probs [B_ret, T]
    if old is None and (cfg.ppo_epochs > 1 or len(minis) > 1):
        old = old_logprobs(model, kept, m, cfg.temperature, cfg.share_prompts)
    rec: dict[str, Any] = {}
    losses, clipped, kl, toks, passes, clipped_any = [], 0.0, 0.0, 0, 0, False
    for _ in range(cfg.ppo_epochs):
        for idx in minis:
            sub = kept if len(minis) == 1 else kept.select(idx)
            i = torch.as_tensor(idx, device=adv.device)
            gr = accumulate_gradients(model, sub, adv[i], m, cfg.clip_eps, ref_model, cfg.kl_coef, group_size=G,
                                      split_groups=cfg.noise_split_groups, temperature=cfg.temperature,
                                      old_logp=None if old is None else old[i.to(old.device)],
                                      share_prompts=cfg.share_prompts,
                                      prepared=prepared if len(minis) == 1 and cfg.ppo_epochs == 1 else None)
            if not math.isfinite(gr.loss):
                raise NonFiniteError(f"non-finite loss ({gr.loss})")
            gnorm = optimizer_step(model, optimizer, lr, cfg.max_grad_norm, gr.grad_sq_big)
            if not rec:
                rec = {"grad_norm/actor": gnorm, **grpo_noise_metrics(gr, len(idx))}
            losses.append(gr.loss)
            clipped += gr.stats["clipped"]
            kl += gr.stats.get("kl", 0.0)
            toks += gr.n_tokens
            passes += gr.n_micro
            clipped_any = clipped_any or bool(cfg.max_grad_norm and gnorm > cfg.max_grad_norm)
    rec.update({"loss": float(np.mean(losses)), "train/micro_batches": passes, "train/updates": len(losses),
                "clip_frac": clipped / max(toks, 1), "grad_clipped": clipped_any})
    if cfg.kl_coef > 0:
        rec["kl"] = kl / max(toks, 1)
    return rec, int(kept.response_mask.sum())


def train(cfg: TrainConfig, out_dir: Path | str, *, resume: bool = False, progress: bool = False,
          model_tok=None, task=None) -> Path:
    """Run (or resume) GRPO as configured, writing the run directory ``out_dir``; returns it.

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
    import torch

    from rlbatch.train.tasks import get_task

    out = Path(out_dir)
    # what the user named first: an unknown --task or --model fails before any other setting is checked
    task = task or get_task(cfg.task, seed=cfg.split_seed, eval_size=cfg.eval_size)
    if model_tok is None:
        from rlbatch.train.models import load_model

        model_tok = load_model(cfg.model, cfg.device)
    cfg.check_updates()
    lr = cfg.resolved_lr()
    micro = cfg.resolved_micro()
    from rlbatch.train import async_rollout

    async_rollout.check_config(cfg)  # async hook
    if cfg.algo == "ppo":
        cfg.resolved_critic_lr()  # PPO hook: a bad critic-lr configuration fails before anything is written
    ckpt_path = out / CHECKPOINT
    if not resume and ((out / METRICS_JSONL).exists() or ckpt_path.exists()):
        raise UserError("already holds a run; pass --resume to continue it or choose another --out", path=str(out))
    if resume and (out / "run.json").exists() and read_meta(out).status == "finished":
        done = read_meta(out)
        # a run that stopped on its budget continues when asked for a larger one (adaptive sweeps); else it is done
        if not (done.stop_reason == "retained-sample budget reached" and ckpt_path.exists()
                and (getattr(done, "samples_retained", None) or 0) < cfg.samples):
            return out
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    else:  # asynchronous rollouts: leave the generation process its cores (torch's default takes them all)
        from rlbatch.train.async_rollout import default_trainer_threads

        n = default_trainer_threads(cfg)
        if n:
            torch.set_num_threads(n)

    existed = out.exists()
    check_writable(out)
    lock = lock_run_dir(out)
    try:
        with precision_context(cfg.precision, cfg.device):
            return _train(cfg, out, lr, micro, resume, progress, model_tok, task)
    finally:
        if lock is not None:  # no stale lock: removed while still held, then released
            (out / LOCK).unlink(missing_ok=True)
            lock.close()
            if not existed and out.is_dir() and not any(out.iterdir()):
                out.rmdir()  # a run that failed before writing anything leaves no empty directory


def _train(cfg: TrainConfig, out: Path, lr: float, micro: int, resume: bool, progress: bool, model_tok,
           task) -> Path:
    import torch

    from rlbatch import faults
    from rlbatch.train.grpo import NonFiniteError, make_adamw, retained_rows
    from rlbatch.train.models import load_model
    from rlbatch.train.rollout import GenStats, evaluate, fitted_concurrency, score

    ckpt_path = out / CHECKPOINT
    remove_stale_temps(out)
    model, tok = model_tok or load_model(cfg.model, cfg.device)
    model.to(cfg.device)
    model.eval()  # dropout off for rollouts and updates (the tiny preset has none; standard in RL fine-tuning)
    ref_model = None
    if cfg.kl_coef > 0:
        import copy

        ref_model = copy.deepcopy(model).requires_grad_(False)
    optimizer = make_adamw(model.parameters(), lr=lr, betas=cfg.adam_betas, eps=cfg.adam_eps,
                           weight_decay=cfg.weight_decay)
    ppo = None  # PPO hook: critic + its optimizer (rlbatch.train.ppo)
    if cfg.algo == "ppo":
        from rlbatch.train import ppo as ppo_mod

        ppo = ppo_mod.setup(cfg, model, tok)

    state = {"step": 0, "samples/retained": 0, "samples/generated": 0, "tokens/generated": 0, "tokens/trained": 0,
             "time/wall_s": 0.0, "next_eval": 0, "hold": 0, "metrics_lines": 0, "eval_lines": 0, "last_eval": None}
    saved = {"step": None}  # step of the last checkpoint on disk (for error messages)
    if resume and ckpt_path.exists():
        ck = load_checkpoint(ckpt_path, cfg.device)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        _set_rng_states(ck["rng"])
        if ppo is not None:
            ppo_mod.load_state_dict(ppo, ck)
        state = ck["state"]
        saved["step"] = state["step"]
        if ref_model is not None:  # the reference is the initial policy: rebuild it from the preset
            ref_model.load_state_dict(load_model(cfg.model, cfg.device)[0].state_dict())
    else:
        random.seed(cfg.seed)
        np.random.seed(cfg.seed % 2**32)
        torch.manual_seed(cfg.seed)

    def kept_note() -> str:
        ck = (f"the last checkpoint (step {saved['step']}) is intact" if saved["step"] is not None
              else "no checkpoint yet")
        return f"; earlier lines are intact, {ck}; free space and rerun with --resume"

    meta_fields = dict(run_id=cfg.run_id or out.name or "run", algorithm=cfg.algo, model=cfg.model, task=cfg.task,
                       prompts_per_step=cfg.prompts_per_step, group_size=cfg.group_size, lr=lr,
                       lr_rule=cfg.lr_rule, base_batch=cfg.base_batch, base_lr=cfg.base_lr, seed=cfg.seed,
                       backend="rlbatch",
                       hardware={"device": cfg.device, "cpu_count": os.cpu_count(),
                                 "torch_threads": torch.get_num_threads(), "machine": platform.machine()},
                       software=_software(), status="running", stop_reason=None,
                       config=cfg.model_dump(mode="json"), micro_batch_size=micro,
                       batch_size=cfg.update_batch, rollout_batch_size=cfg.batch_size, ppo_epochs=cfg.ppo_epochs,
                       train_prompts=task.train_size, eval_items=len(task.eval_items),
                       **({"critic_lr": ppo.lr, "critic_base_lr": cfg.critic_base_lr} if ppo else {}))
    meta = make_meta(out / "run.json", **meta_fields)
    try:
        _truncate_lines(out / METRICS_JSONL, state["metrics_lines"])
        _truncate_lines(out / EVAL_JSONL, state["eval_lines"])
        write_meta(out, meta)
        metrics = JsonlWriter(out / METRICS_JSONL)
        evals = JsonlWriter(out / EVAL_JSONL)
    except OSError as err:
        raise write_error(err, out, kept_note()) from None
    G = cfg.group_size
    gen_stats = GenStats()
    if cfg.max_concurrent_sequences is None:  # fitted to memory: prompt of the task's longest item + response
        cfg = cfg.model_copy(update={"max_concurrent_sequences": fitted_concurrency(
            model, _context_of(model, tok, task, cfg))})
    cuda = cfg.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    # async hook: the generation process (rlbatch.train.async_rollout), None for the synchronous loop
    from rlbatch.train import async_rollout

    pipe = (async_rollout.AsyncRollouts(cfg, model, tok, task, state["step"], ck.get(async_rollout.CKPT_KEY)
                                        if resume and ckpt_path.exists() else None, micro=micro)
            if async_rollout.enabled(cfg) else None)

    def ckpt_extra() -> dict | None:
        extra = {**(ppo_mod.state_dict(ppo) if ppo else {}), **(pipe.checkpoint() if pipe else {})}
        return extra or None

    bar = _Progress(cfg.samples, out.name) if progress else None
    t_start = time.perf_counter()
    stop_reason = "retained-sample budget reached"

    def run_eval() -> float:
        sc, n, dt = evaluate(model, tok, task, cfg.max_new_tokens, cfg.eval_batch_size,
                             max_concurrent=cfg.max_concurrent_sequences)
        evals.append(_clean({"step": state["step"], "samples/retained": state["samples/retained"],
                             "samples/generated": state["samples/generated"], "eval/score": sc, "eval/n": n,
                             "time/eval_s": dt, "time/wall_s": state["time/wall_s"]}))
        state["eval_lines"] += 1
        state["last_eval"] = sc
        state["last_eval_step"] = state["step"]
        if cfg.stop_at_target is not None:
            state["hold"] = state["hold"] + 1 if sc >= cfg.stop_at_target else 0
        return sc

    try:
        faults.set_step(state["step"], meta.run_id)
        if state["step"] == 0 and state["eval_lines"] == 0:
            run_eval()
            state["next_eval"] = cfg.eval_every
        while True:
            if cfg.stop_at_target is not None and state["hold"] >= cfg.stop_hold:
                stop_reason = f"target {cfg.stop_at_target:g} reached and held for {cfg.stop_hold} evaluations"
                break
            if state["samples/retained"] >= cfg.samples:
                break
            if cfg.max_steps is not None and state["step"] >= cfg.max_steps:
                stop_reason = f"max_steps {cfg.max_steps} reached"
                break
            if cfg.max_time_s is not None and state["time/wall_s"] >= cfg.max_time_s:
                stop_reason = f"max_time_s {cfg.max_time_s:g} reached"
                break
            if state.get("empty", 0) >= cfg.max_empty_steps:
                stop_reason = (f"no learning signal: {cfg.max_empty_steps} consecutive steps had every group "
                               f"filtered (all rewards equal)")
                break
            step = state["step"] + 1
            faults.set_step(step, meta.run_id)
            t0, c0 = time.perf_counter(), time.process_time()
            behaviour_logp = None
            if pipe is not None:  # async hook: the batch decoded ahead, with its recorded log-probabilities
                items, ro, behaviour_logp = pipe.get(step)
            else:
                items, ro = rollout_step(model, tok, task, cfg, step, gen_stats)
            t1 = time.perf_counter()
            rewards = pipe.prepared_rewards() if pipe is not None else None  # async hook: scored ahead
            if rewards is None:
                rewards = score(task, items, ro.texts)
            t2 = time.perf_counter()
            rec: dict[str, Any] = {}
            if ppo is not None:  # PPO hook: every response is kept (B_train = P x G)
                keep = torch.ones(cfg.prompts_per_step, dtype=torch.bool)
                b_ret = len(items)
                try:
                    rec, n_tok = ppo_mod.ppo_step(model, optimizer, lr, ppo, ro, rewards, cfg, micro, step, ref_model)
                except NonFiniteError as err:
                    raise _diverged(out, step, err, saved["step"]) from None
            else:
                adv, keep, rows = retained_rows(rewards, G, cfg.filter_groups)
                b_ret = int(rows.numel())
            if ppo is None and b_ret > 0:
                try:
                    ahead = pipe.prepared_passes(rows.tolist()) if pipe is not None else None  # async hook
                    rec, n_tok = grpo_update(model, optimizer, lr, ro.select(rows), adv.view(-1)[rows], cfg, micro,
                                             ref_model, old_logp=None if behaviour_logp is None  # async hook
                                             else behaviour_logp[rows], prepared=ahead)
                except NonFiniteError as err:
                    raise _diverged(out, step, err, saved["step"]) from None
            elif ppo is None:
                n_tok = 0  # every group filtered: nothing to learn from, no optimizer step
            faults.fault("optim")
            if pipe is not None:  # async hook: hand the new version to the generator
                pipe.publish(step, model, snapshot=step % cfg.checkpoint_every == 0)
            if cuda:  # the optimizer step's kernels run asynchronously: count them in this step's update time
                torch.cuda.synchronize()
            t3, c3 = time.perf_counter(), time.process_time()
            gen_tok = int(ro.response_mask.sum())
            state["step"] = step
            state["empty"] = 0 if b_ret else state.get("empty", 0) + 1
            state["samples/retained"] += b_ret
            state["samples/generated"] += len(items)
            state["tokens/generated"] += gen_tok
            state["tokens/trained"] += n_tok
            state["time/wall_s"] += t3 - t0
            line = {"step": step, "samples/retained": state["samples/retained"],
                    "samples/generated": state["samples/generated"], "tokens/generated": state["tokens/generated"],
                    "tokens/trained": state["tokens/trained"], "time/gen_s": t1 - t0, "time/reward_s": t2 - t1,
                    "time/train_s": t3 - t2, "time/step_s": t3 - t0, "time/cpu_s": c3 - c0,
                    "time/wall_s": state["time/wall_s"],
                    "reward/mean": float(rewards.mean()), "reward/std": float(rewards.std()) if len(rewards) > 1
                    else 0.0, "lr": lr, "batch/retained": b_ret, "batch/generated": len(items),
                    "groups/retained": int(keep.sum()), "groups/generated": int(keep.numel()),
                    "response_length/mean": gen_tok / len(items), **rec}
            if pipe is not None:  # async hook: staleness, partial fraction, overlap
                line.update(pipe.step_metrics(c3 - c0))
            metrics.append(_clean(line))
            state["metrics_lines"] += 1
            if state["samples/retained"] >= state["next_eval"]:
                run_eval()
                while state["next_eval"] <= state["samples/retained"]:
                    state["next_eval"] += cfg.eval_every
            if step % cfg.checkpoint_every == 0:
                save_checkpoint(out, model, optimizer, state, ckpt_extra())
                saved["step"] = step
            if bar:
                bar.update(state, float(rewards.mean()), time.perf_counter() - t_start)
        if state.get("last_eval_step") != state["step"]:
            run_eval()
        save_checkpoint(out, model, optimizer, state, ckpt_extra())
        saved["step"] = state["step"]
        update_meta(out, status="finished", stop_reason=stop_reason, steps=state["step"],
                    samples_retained=state["samples/retained"], samples_generated=state["samples/generated"],
                    max_concurrent_sequences=cfg.max_concurrent_sequences, **peak_memory(cfg.device, gen_stats))
    except BaseException as err:
        final = write_error(err, out, kept_note()) if isinstance(err, OSError) else err
        try:
            why = str(final) if isinstance(final, UserError) else f"{type(err).__name__}: {err}"
            update_meta(out, status="failed", stop_reason=why[:500])
        except Exception:
            pass
        if final is not err:
            raise final from None
        raise
    finally:
        if pipe is not None:
            pipe.close()
        metrics.close()
        evals.close()
        if bar:
            bar.close()
    return out


def precision_context(precision: str, device: str):
    """The context the trainer's forward passes run in: ``torch.autocast(device type, torch.bfloat16)`` for
    ``precision="bf16"`` (matmuls and attention in bfloat16, softmax / log-softmax / norms in float32, parameters
    untouched: mixed precision as in Micikevicius et al. 2018, without a loss scale, which bfloat16's float32
    exponent range makes unnecessary; the weights are cast afresh in every forward), a no-op context for ``"fp32"``. Raises :class:`UserError` for another value.
    The asynchronous generation process enters the same context (:mod:`rlbatch.train.async_rollout`)."""
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise UserError(f"--precision must be fp32 or bf16, got {precision!r}", field="precision")
    # cache_enabled=False: the loop runs in one autocast region, and autocast's cache of bfloat16 weight copies lives
    # until the region exits, so it would keep serving the weights of before the first optimizer step
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False)


def _context_of(model, tok, task, cfg: TrainConfig) -> int:
    """Tokens one sequence may hold, for the fitted ``max_concurrent_sequences``: the longest of the first 256
    training prompts plus ``max_new_tokens``."""
    from itertools import islice

    from rlbatch.train.rollout import render_prompt

    longest = max((len(render_prompt(it, tok)) for it in islice(task.train, 256)), default=1)
    return longest + cfg.max_new_tokens


def peak_memory(device: str, gen_stats) -> dict:
    """Peak memory of the run so far, bytes: ``peak_memory_bytes`` (CUDA: ``torch.cuda.max_memory_allocated``; CPU:
    the process's peak resident set, ``ru_maxrss``) and ``peak_kv_cache_bytes`` (the largest KV cache plus logits a
    generation step held, measured on the tensors: :class:`rlbatch.train.rollout.GenStats`)."""
    import torch

    if device.startswith("cuda"):
        peak = int(torch.cuda.max_memory_allocated())
    else:
        import resource

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
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[info]}"), TimeElapsedColumn())
        self.p.start()
        self.t = self.p.add_task(name or "train", total=total, info="")

    def update(self, state: dict, reward: float, elapsed: float) -> None:
        ev = state.get("last_eval")
        ev_s = f"{ev:.3f}" if ev is not None else "—"
        info = f"step {state['step']}  reward {reward:.3f}  eval {ev_s}  " \
               f"{state['samples/retained'] / max(state['time/wall_s'], 1e-9):.1f} samples/s"
        self.p.update(self.t, completed=min(state["samples/retained"], self.p.tasks[0].total), info=info)

    def close(self) -> None:
        self.p.stop()
