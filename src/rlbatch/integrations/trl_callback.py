"""An rlbatch callback for TRL's ``GRPOTrainer``: the run, as it trains, written as an rlbatch run-store directory
(``run.json``, ``metrics.jsonl``, ``eval.jsonl``; DESIGN.md) that ``rlbatch analyze`` reads like our own trainer's.

Use it in any TRL script, one line after building the trainer::

    from rlbatch.integrations.trl_callback import attach
    trainer = GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=...)
    attach(trainer, "runs/my-run")            # optional: eval_fn=..., eval_every=..., meta={...}
    trainer.train()

Per optimizer step it logs the canonical metrics, including what TRL does not log:

- ``time/gen_s`` (generation, ``_generate_and_score_completions`` less scoring), ``time/reward_s``
  (``_calculate_rewards``), ``time/train_s`` (the rest of the step: forward/backward of every micro-batch and the
  optimizer step), ``time/step_s`` (``on_step_begin`` to ``on_step_end``), ``time/cpu_s``, ``time/wall_s``
  (cumulative, evaluation excluded);
- ``batch/generated`` / ``batch/retained`` and the cumulative ``samples/*``: responses generated, and responses in
  groups whose rewards are not all equal (TRL keeps zero-std groups in the batch with advantage 0; with ``beta = 0``
  they carry no gradient, so only the retained ones are training responses, as in our trainer), ``groups/*``;
- ``grad_norm/actor``: the pre-clip norm of the accumulated gradient (``Trainer._get_grad_norm``'s value);
- the gradient-noise inputs ``noise/*`` as :func:`rlbatch.train.grpo.grpo_noise_metrics` defines them, from the
  micro-batch gradients.

How the micro-batch gradients are read (TRL 1.16 / transformers 5): a tensor hook on every trainable parameter
(``Tensor.register_hook``) receives that parameter's gradient of each backward pass *before* it is added to
``p.grad``, i.e. exactly the micro-batch's contribution c_u; the hook sums |c_u|^2 (no copy of the gradient is
kept). When a micro-batch holds part of one prompt's group (per-device batch m < G), the parts of the group are also
summed into one gradient-sized buffer to get the prompt's gradient (as our trainer does). Micro-batches are laid
out by prompt: TRL shuffles the generation batch before cutting it into micro-batches; with one optimizer step per
generation batch (``steps_per_generation == gradient_accumulation_steps`` and ``num_iterations == 1``, the study's
setting) the order of the micro-batches cannot change the update, so for this trainer only the shuffle is skipped
and completions stay in TRL's sampler order (the G completions of a prompt are consecutive). Otherwise the shuffle
is kept and the ``noise/*`` inputs are not logged (the layout is random). Nor are they on a step where some
parameter's hook fired twice in one backward pass (its gradient arrived in parts, e.g. reentrant gradient
checkpointing across a tied weight): the sum of the parts' squares is not the square of their sum.

The unit of the noise inputs is the *mean* gradient over a set's retained responses, as in our trainer: with TRL's
``loss_type="dapo"`` (token-level mean over the generation batch: ``num_items_in_batch`` tokens, our trainer's
normalisation) a contribution c_u times ``N_tokens / T_retained(u)`` is the token-mean gradient of u's retained
responses, and the pre-clip gradient times ``N_tokens / T_retained`` that of the step; with ``grpo`` / ``dr_grpo``
(a per-response mean) the factors are counted in responses instead. Other loss types log no ``noise/*``. Exact for
``beta = 0`` (no KL term, so filtered responses contribute nothing); one process (with several, each process sees
its own shard and only the main process writes).

Also: ``reward/mean``, ``reward/std``, ``lr`` (the optimizer's, at the update), ``tokens/*``,
``response_length/mean``, ``grad_clipped``. Evaluation: ``eval_fn(model) -> (score in [0, 1], n_items)``, called at
the start, every ``eval_every`` retained samples and at the end, is written to ``eval.jsonl``. ``max_samples`` stops
training once that many retained samples were trained on (the study's retained-sample budget).

Resuming (``trainer.train(resume_from_checkpoint=...)``): the lines after the checkpoint's step are dropped from
``metrics.jsonl`` / ``eval.jsonl`` and the counters continue from the last kept line.

Everything else of the user's run is unchanged: the hooks only read gradients; the instance-level wrappers
(``_generate_and_score_completions``, ``_calculate_rewards``, ``training_step``, ``_get_grad_norm``,
``_prepare_inputs``) call TRL's own methods and return their results untouched.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import transformers
from transformers import TrainerCallback

from rlbatch.errors import UserError
from rlbatch.readers.collect import load_all
from rlbatch.runstore import JsonlWriter, atomic_write_text, finite_record, make_meta, update_meta, write_meta
from rlbatch.train.grpo import GradResult, grpo_noise_metrics, harmonic_mean
from rlbatch.train.state import StepState
from rlbatch.watch import line as watch_line
from rlbatch.watch import predict

_SKIP_SHUFFLE = threading.local()  # set while an attached trainer prepares its inputs (see _patch_shuffle)


def _patch_shuffle() -> None:
    """Wrap ``trl.trainer.grpo_trainer.shuffle_sequence_dict`` once: it returns its input unchanged while an
    attached trainer with one update per generation batch is inside ``_prepare_inputs``, else shuffles as before."""
    import trl.trainer.grpo_trainer as gt

    if getattr(gt.shuffle_sequence_dict, "_rlbatch", False):
        return
    orig = gt.shuffle_sequence_dict

    def shuffle_sequence_dict(batch, *a, **kw):
        if getattr(_SKIP_SHUFFLE, "on", False):
            return batch
        return orig(batch, *a, **kw)

    shuffle_sequence_dict._rlbatch = True  # type: ignore[attr-defined]
    gt.shuffle_sequence_dict = shuffle_sequence_dict


def _truncate_jsonl(path: Path, keep: Callable[[dict], bool]) -> list[dict]:
    """Keep the leading lines of ``path`` for which ``keep`` holds (a resumed run drops what came after its
    checkpoint); returns them."""
    if not path.exists():
        return []
    kept, lines = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            break
        if not keep(rec):
            break
        kept.append(rec)
        lines.append(line)
    atomic_write_text(path, "".join(x + "\n" for x in lines))
    return kept


class RlbatchCallback(TrainerCallback):
    """Writes the run-store directory ``out_dir`` of a TRL ``GRPOTrainer`` run (see the module docstring).

    Build it with :func:`attach`, which also installs the timers and gradient hooks on the trainer; a callback
    passed to the trainer without :func:`attach` raises :class:`UserError` at ``on_train_begin``.

    ``meta``: extra ``run.json`` fields (model, task, lr_rule, base_batch, base_lr, ...; P, G, lr and seed come from
    the trainer's arguments). ``eval_fn(model) -> (score, n)``: the held-out evaluation; ``eval_every``: retained
    samples between evaluations (default: none besides start and end). ``max_samples``: retained-sample budget
    (training stops once it is reached; default: TRL's ``max_steps``).

    The live prediction (with ``target``): after every evaluation, this run's predicted samples-to-target and
    time-to-target with their intervals (:func:`rlbatch.watch.predict`, as ``rlbatch watch`` shows them) are passed
    to ``log`` (default: print one line). ``compare_with``: run directories, sweeps or logs of the other
    configurations of the study (re-read at each evaluation); with them the plan ranks this run among them, and with
    ``stop_when_cannot_win=True`` (opt-in) ``control.should_training_stop`` is set once the adaptive loop's rule
    (:func:`rlbatch.study.adaptive.stop_verdict`) says this run cannot win or never reaches the target (the reason
    goes to ``run.json``'s ``stop_reason``; the run stays resumable from its checkpoints)."""

    def __init__(self, out_dir: Path | str, *, run_id: str | None = None, meta: dict[str, Any] | None = None,
                 eval_fn: Callable[[Any], tuple[float, int]] | None = None, eval_every: int | None = None,
                 max_samples: int | None = None, target: float | None = None,
                 compare_with: list[Path | str] | None = None, stop_when_cannot_win: bool = False,
                 log: Callable[[str], None] | None = None, n_boot: int = 100):
        self.out = Path(out_dir)
        self.run_id = run_id or self.out.name or "run"
        self.meta = dict(meta or {})
        self.eval_fn, self.eval_every, self.max_samples = eval_fn, eval_every, max_samples
        if stop_when_cannot_win and (target is None or not compare_with):
            raise UserError("stop_when_cannot_win needs target= and compare_with= (the other configurations' runs: "
                            "a run cannot lose without something to lose to)", field="stop_when_cannot_win")
        self.target, self.compare_with = target, [Path(p) for p in compare_with or []]
        self.stop_when_cannot_win, self.n_boot = stop_when_cannot_win, n_boot
        self.log = log or (lambda m: print(m, flush=True))
        self.prediction = None
        self.trainer = None
        self.cur: dict[str, Any] = {}
        self.state = StepState()
        self.stop_reason: str | None = None
        self._metrics = self._evals = None

    # ------------------------------------------------------------------------------------------- instrumentation
    def instrument(self, trainer) -> None:
        """Install the timers, the reward capture, the gradient hooks and the layout switch on ``trainer``."""
        self.trainer = trainer
        args = trainer.args
        self.G = int(args.num_generations)
        self.m = int(args.per_device_train_batch_size)
        self.k = int(args.gradient_accumulation_steps)
        self.one_update = (int(args.steps_per_generation) == self.k and int(getattr(args, "num_iterations", 1)) == 1)
        self.loss_type = str(getattr(args, "loss_type", "dapo"))
        layout_ok = self.m % self.G == 0 or self.G % self.m == 0
        self.noise_ok = (self.one_update and layout_ok and self.loss_type in ("dapo", "grpo", "dr_grpo")
                         and float(getattr(args, "beta", 0.0)) == 0.0)
        self.split = self.m < self.G
        if self.one_update:
            _patch_shuffle()
        cb = self
        gen0, rew0, step0 = trainer._generate_and_score_completions, trainer._calculate_rewards, trainer.training_step
        norm0, prep0 = trainer._get_grad_norm, trainer._prepare_inputs

        def timed(fn, key: str, seen):
            """``fn`` with its seconds added to ``cb.cur[key]`` and its output passed to ``seen`` in training."""
            def wrapper(*a, **kw):
                t = time.perf_counter()
                out = fn(*a, **kw)
                cb.cur[key] = cb.cur.get(key, 0.0) + time.perf_counter() - t
                if cb.trainer.model.training:
                    seen(out)
                return out
            return wrapper

        _generate_and_score_completions = timed(gen0, "gen_total", cb._on_generation)
        _calculate_rewards = timed(rew0, "reward_s", cb._on_rewards)

        def _prepare_inputs(*a, **kw):
            _SKIP_SHUFFLE.on = cb.one_update
            try:
                return prep0(*a, **kw)
            finally:
                _SKIP_SHUFFLE.on = False

        def training_step(model, inputs, num_items_in_batch=None, *a, **kw):
            cb._micro_begin()
            out = step0(model, inputs, num_items_in_batch, *a, **kw)
            cb._micro_end()
            return out

        def _get_grad_norm(*a, **kw):
            gn = norm0(*a, **kw)
            try:
                cb.cur["grad_norm"] = float(gn)
            except (TypeError, ValueError):
                pass
            return gn

        trainer._generate_and_score_completions = _generate_and_score_completions
        trainer._calculate_rewards = _calculate_rewards
        trainer._prepare_inputs = _prepare_inputs
        trainer.training_step = training_step
        trainer._get_grad_norm = _get_grad_norm
        self.params = [p for p in trainer.model.parameters() if p.requires_grad]
        self._sq: list = []
        self._fired: set[int] = set()
        self._buf: list | None = None
        for i, p in enumerate(self.params):
            p.register_hook(self._hook(i))

    def _hook(self, i: int):
        def hook(g):
            if self.cur.get("in_micro"):
                if i in self._fired:  # a second partial gradient in one backward (e.g. reentrant checkpointing)
                    self.cur["hook_multi"] = True
                self._fired.add(i)
                self._sq.append(g.detach().float().pow(2).sum())
                if self._buf is not None:
                    if self._buf[i] is None:
                        self._buf[i] = g.detach().float().clone()
                    else:
                        self._buf[i].add_(g.detach().float())
            return None
        return hook

    def _on_rewards(self, rewards_per_func) -> None:
        tr = self.trainer
        w = tr.reward_weights.to(rewards_per_func.device)
        r = (rewards_per_func * w.unsqueeze(0)).nansum(dim=1).float().cpu()
        g = r.view(-1, self.G)
        std = g.std(dim=1) if self.G > 1 else torch.zeros(g.shape[0])
        keep = ~torch.isclose(std, torch.zeros_like(std))  # TRL's own zero-std test (frac_reward_zero_std)
        self.cur.update(rewards=r, keep=keep)

    def _on_generation(self, out: dict) -> None:
        mask = out["completion_mask"].detach()
        lens = mask.sum(dim=1).float().cpu()
        self.cur["lens"] = lens
        n_items = out.get("num_items_in_batch")
        self.cur["n_items"] = float(n_items) if n_items is not None else float(lens.sum())
        self.cur["row"] = 0
        self._start_group()  # generation runs inside the first micro-batch's training_step

    def _start_group(self) -> None:
        """At the first part of a retained group (m < G): start the buffer of the group's gradient."""
        keep, row = self.cur.get("keep"), self.cur.get("row", 0)
        if self.noise_ok and self.split and keep is not None and row % self.G == 0 and row // self.G < len(keep):
            self._buf = [None] * len(self.params) if bool(keep[row // self.G]) else None

    def _micro_begin(self) -> None:
        self._sq = []
        self._fired: set[int] = set()
        self._start_group()
        self.cur["in_micro"] = True

    def _micro_end(self) -> None:
        self.cur["in_micro"] = False
        if "lens" not in self.cur or "keep" not in self.cur:
            return
        row = self.cur.get("row", 0)
        rows = range(row, row + self.m)
        self.cur["row"] = row + self.m
        keep_rows = [bool(self.cur["keep"][i // self.G]) for i in rows if i < len(self.cur["lens"])]
        r_u = sum(keep_rows)
        t_u = float(sum(float(self.cur["lens"][i]) for i, k in zip(rows, keep_rows) if k))
        sq = float(torch.stack(self._sq).sum()) if self._sq else 0.0
        self._sq = []
        self.cur.setdefault("micro", []).append((sq, t_u, r_u))
        if self._buf is not None and (row + self.m) % self.G == 0:  # the group's last part
            bsq = float(sum(float(b.pow(2).sum()) for b in self._buf if b is not None))
            g0 = row + self.m - self.G
            t_p = float(self.cur["lens"][g0:g0 + self.G].sum())
            self.cur.setdefault("prompt_units", []).append((bsq, t_p, self.G))
            self._buf = None

    # ------------------------------------------------------------------------------------------- noise inputs
    def _scale(self, tokens: float, responses: int) -> float:
        """Factor turning a contribution to the accumulated gradient into the mean gradient over a set's retained
        responses (``tokens`` retained tokens, ``responses`` retained responses; see the module docstring)."""
        if self.loss_type == "dapo":
            return self.cur["n_items"] / max(tokens, 1.0)
        return self.m * self.k / max(responses, 1)  # grpo / dr_grpo: mean over m responses, / k micro-batches

    def _noise(self, b_ret: int, t_ret: float) -> dict[str, float]:
        gn = self.cur.get("grad_norm")
        if not self.noise_ok or gn is None or b_ret == 0 or self.cur.get("hook_multi"):
            return {}  # hook_multi: a parameter's gradient came in parts, so |c_u|^2 is not the sum of the hooks'

        micro = [(sq * self._scale(t, r) ** 2, r) for sq, t, r in self.cur.get("micro", []) if r > 0]
        big = gn ** 2 * self._scale(t_ret, b_ret) ** 2
        if self.split:
            parts = micro
            prompts = [(sq * self._scale(t, r) ** 2, r) for sq, t, r in self.cur.get("prompt_units", [])]
            units = prompts
        else:
            parts, prompts, units = [], [], micro
        if not units:
            return {}
        mean = lambda xs: float(sum(x for x, _ in xs) / len(xs)) if xs else float("nan")  # noqa: E731
        res = GradResult(loss=float("nan"), grad_sq_small=mean(units), grad_sq_big=big,
                         b_small=harmonic_mean([r for _, r in units]), n_micro=len(self.cur.get("micro", [])),
                         n_tokens=int(t_ret), stats={}, grad_sq_micro=mean(parts), grad_sq_prompt=mean(prompts),
                         b_micro=harmonic_mean([r for _, r in parts]), group_size=self.G, prompts=b_ret // self.G,
                         split_prompts=len(prompts))
        return grpo_noise_metrics(res, b_ret)

    # ------------------------------------------------------------------------------------------- callbacks
    def _write_eval(self, model) -> None:
        if self.eval_fn is None:
            return
        was_training = model.training
        model.eval()
        t = time.perf_counter()
        score, n = self.eval_fn(model)
        dt = time.perf_counter() - t
        if was_training:
            model.train()
        self._evals.append(finite_record(self.state.eval_line(float(score), int(n), dt)))

    def on_train_begin(self, args, state, control, model=None, **kw):
        if self.trainer is None:
            raise UserError("RlbatchCallback needs the trainer: use rlbatch.integrations.trl_callback.attach(trainer, OUT) "
                            "instead of passing the callback to GRPOTrainer(callbacks=...)")
        if not state.is_world_process_zero:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        step0 = int(state.global_step)
        st = StepState()
        if step0 > 0:  # resumed from a checkpoint: keep the lines up to its step
            kept = _truncate_jsonl(self.out / "metrics.jsonl", lambda r: int(r.get("step", 0)) <= step0)
            evals = _truncate_jsonl(self.out / "eval.jsonl", lambda r: int(r.get("step", 0)) <= step0)
            if kept:
                st = StepState.from_dict({k: v for k, v in kept[-1].items() if k in st.counters() or
                                          k == "time/wall_s"})
            if evals:
                st.last_eval_step = evals[-1]["step"]
                ev = self.eval_every or 0
                st.next_eval = (st.samples_retained // ev + 1) * ev if ev else float("inf")
        else:
            for name in ("metrics.jsonl", "eval.jsonl"):
                (self.out / name).unlink(missing_ok=True)
        self.state = st
        import trl  # the optional dependency this module adapts to: imported when a run starts

        G = self.G
        gen_batch = int(args.generation_batch_size)
        fields = dict(run_id=self.run_id, algorithm="grpo", prompts_per_step=gen_batch // G, group_size=G,
                      lr=float(args.learning_rate), seed=int(args.seed), backend="trl",
                      hardware={"device": str(args.device), "cpu_count": os.cpu_count(),
                                "torch_threads": torch.get_num_threads(), "machine": platform.machine()},
                      software={"trl": trl.__version__, "transformers": transformers.__version__,
                                "torch": torch.__version__, "python": platform.python_version()},
                      status="running", stop_reason=None, micro_batch_size=self.m,
                      trl={"loss_type": self.loss_type, "beta": float(getattr(args, "beta", 0.0)),
                           "gradient_accumulation_steps": self.k, "max_grad_norm": args.max_grad_norm,
                           "noise_logged": self.noise_ok})
        fields.update(self.meta)
        write_meta(self.out, make_meta(self.out / "run.json", **fields))
        self._metrics = JsonlWriter(self.out / "metrics.jsonl")
        self._evals = JsonlWriter(self.out / "eval.jsonl")
        if step0 == 0:
            self._write_eval(model)
            st.next_eval = self.eval_every or float("inf")

    def on_step_begin(self, args, state, control, **kw):
        self.cur = {"t0": time.perf_counter(), "c0": time.process_time()}
        self._buf = None

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kw):
        if optimizer is not None:
            self.cur["lr"] = float(optimizer.param_groups[0]["lr"])

    def on_step_end(self, args, state, control, model=None, **kw):
        t1, c1 = time.perf_counter(), time.process_time()
        cur, st = self.cur, self.state
        if not state.is_world_process_zero or "keep" not in cur or self._metrics is None:
            return
        step_s = t1 - cur["t0"]
        gen_total, reward_s = cur.get("gen_total", 0.0), cur.get("reward_s", 0.0)
        keep, rewards, lens = cur["keep"], cur["rewards"], cur["lens"]
        rows_keep = keep.repeat_interleave(self.G)
        b_gen, b_ret = int(rewards.numel()), int(rows_keep.sum())
        t_gen, t_ret = float(lens.sum()), float(lens[rows_keep].sum())
        st.advance(int(state.global_step), b_ret, b_gen, int(t_gen), int(t_ret), step_s)
        gn = cur.get("grad_norm")
        line = {**st.counters(), "time/gen_s": gen_total - reward_s, "time/reward_s": reward_s,
                "time/train_s": step_s - gen_total, "time/step_s": step_s, "time/cpu_s": c1 - cur["c0"],
                "time/wall_s": st.wall_s, "reward/mean": float(torch.nanmean(rewards)),
                "reward/std": float(rewards.std()) if b_gen > 1 else 0.0, "lr": cur.get("lr"),
                "batch/retained": b_ret, "batch/generated": b_gen, "groups/retained": int(keep.sum()),
                "groups/generated": int(keep.numel()), "response_length/mean": t_gen / max(b_gen, 1),
                "train/micro_batches": len(cur.get("micro", [])), "grad_norm/actor": gn,
                "grad_clipped": bool(args.max_grad_norm and gn is not None and gn > args.max_grad_norm),
                **self._noise(b_ret, t_ret)}
        self._metrics.append(finite_record(line))
        if st.eval_due():
            self._write_eval(model)
            st.schedule_next_eval(self.eval_every)
            if self.target is not None and self.eval_fn is not None:
                self.check_plan(control)
        if self.max_samples is not None and st.samples_retained >= self.max_samples:
            control.should_training_stop = True
            self.stop_reason = "retained-sample budget reached"

    def check_plan(self, control) -> Any:
        """Re-read this run (and ``compare_with``), log the live prediction and, opted in, stop the trainer when the
        run cannot win (class docstring). Returns the :class:`rlbatch.watch.WatchUpdate`."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                runs, _ = load_all([self.out, *self.compare_with])
            except UserError as err:
                self.log(f"rlbatch: no prediction yet ({err})")
                return None
        up = predict(runs, target=self.target, n_boot=self.n_boot, path=str(self.out))
        self.prediction = up
        self.log("rlbatch: " + watch_line(up))
        mine = next((v for v in up.configs if self.run_id in v.runs), None)
        verdict = next((r for r in up.ranking if mine is not None and r["config"] == mine.config), None)
        if self.stop_when_cannot_win and verdict is not None and verdict["would_stop"]:
            control.should_training_stop = True
            self.stop_reason = f"adaptive: {verdict['why']}"
            self.log(f"rlbatch: stopping {self.run_id}: {verdict['why']}")
        return up

    def on_train_end(self, args, state, control, model=None, **kw):
        if not state.is_world_process_zero or self._metrics is None:
            return
        st = self.state
        if st.last_eval_step != st.step:
            self._write_eval(model)
        self._metrics.close()
        self._evals.close()
        reason = self.stop_reason or f"max_steps {args.max_steps} reached"
        update_meta(self.out, status="finished", stop_reason=reason, steps=st.step,
                    samples_retained=st.samples_retained, samples_generated=st.samples_generated)


def attach(trainer, out_dir: Path | str, **kw: Any) -> RlbatchCallback:
    """Build an :class:`RlbatchCallback` writing ``out_dir``, install its instrumentation on ``trainer`` (a TRL
    ``GRPOTrainer``) and add it to the trainer's callbacks. Keyword arguments as :class:`RlbatchCallback`.
    Returns the callback."""
    cb = RlbatchCallback(out_dir, **kw)
    cb.instrument(trainer)
    trainer.add_callback(cb)
    return cb
