"""Asynchronous rollouts with partial rollouts: generation runs in its own process (its own torch threads, its own
weight snapshot refreshed after every update) up to K policy versions ahead of the update, and long responses are
decoded in pieces of at most T tokens across policy versions. The trainer's loss then takes its importance ratio
against the behaviour log-probabilities recorded token by token at sampling time.

The schedule is fixed by step numbers, never by timing (so a run is reproducible and resumable). Policy version v is
the weights after v optimizer steps; step s trains batch s and turns version s-1 into s. With ``K`` =
``async_rollouts`` and ``n = ceil(max_new_tokens / T)`` pieces per response (n = 1 without partial rollouts),
generation works in *rounds*: round r runs on version max(0, r) and decodes piece j (j = 0..n-1) of batch
b = r + K + n - j, at most T new tokens for every response of b not yet finished (EOS or max_new_tokens). So batch
b's last piece runs on version b-1-K (K versions behind the update that trains it; K = 0 without partial rollouts is
the synchronous loop) and its first piece on version b-K-n (clamped at 0). Round r needs version r, published after
update r, and runs while update r+1 is computed: that is the overlap. A piece continues a response under newer
weights by re-encoding its prompt and tokens so far with them (no stale KV cache); every token's log-probability
is recorded under the version that sampled it: ``log softmax(logits / temperature)[token]``, the same function as
the loss's :func:`rlbatch.train.grpo.token_logprobs`.

Per step the trainer logs (DESIGN.md names): ``rollout/staleness_mean``, ``rollout/staleness_max`` (policy versions
between a response's first token and the version its update starts from: (s-1) - max(0, s-K-n); 0 in the
synchronous loop, >= 1 with K >= 1), ``rollout/staleness_token_mean`` (the same per token), ``rollout/partial_frac``
(responses whose tokens came from more than one version), ``rollout/version_span_max`` (the most versions
between one response's first and last token), ``time/overlap_s`` (generation seconds that ran while
the trainer scored and updated), ``time/gen_busy_s`` (generation seconds during the whole step); ``time/gen_s`` is
the time the trainer waited for its batch and ``time/cpu_s`` adds the generation process's CPU seconds.

Resume ("exact" with asynchrony): a checkpoint after step s holds the model at version s and the generation state
after a round R (s-1 or s): the responses in flight with their tokens, log-probabilities and versions, and the
finished batches not yet trained. Every round is a pure function of its inputs (seeded by (seed, round)), so a
resumed run produces the same batches, metrics and evaluations as an uninterrupted one with the same seed (timing
aside) on CPU; what it cannot reproduce is wall-clock time. Sources: one-step off-policy and partial rollouts as in
verl (``async_training.staleness_threshold``, ``partial_rollout``), Kimi k1.5 (Kimi Team 2025, sec. 2.6.2) and AReaL
(Fu et al. 2025, decoupled PPO with the behaviour policy's log-probabilities).
"""

from __future__ import annotations

import copy
import gc
import math
import multiprocessing as mp
import os
import pickle
import queue
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as tmp

from rlbatch.errors import UserError
from rlbatch.procs import die_with_parent
from rlbatch.train.grpo import (PackingPlan, PreparedPass, prepare_passes, retained_rows,
                                token_budget_micro)
from rlbatch.train.precision import precision_context
from rlbatch.train.rollout import Batch, Rollout, behaviour_sampling, decode, left_pad, pad_rows, render_prompt, score

CKPT_KEY = "async_rollouts"
#: The arrays of a :class:`rlbatch.train.grpo.PackingPlan` the generation process sends (numpy) with a batch.
PLAN_ARRAYS = ("src_row", "src_col", "pos", "seg", "row", "col", "ids", "mask")


def enabled(cfg) -> bool:
    """True when the trainer should use the asynchronous generator (``async_rollouts`` >= 1 or partial rollouts)."""
    return bool(getattr(cfg, "async_rollouts", 0)) or bool(getattr(cfg, "partial_rollout_tokens", None))


def check_config(cfg) -> None:
    """:class:`UserError` for asynchronous settings the trainer does not support (PPO)."""
    if enabled(cfg) and cfg.algo != "grpo":
        raise UserError("--async-rollouts / --partial-rollout-tokens are implemented for GRPO only",
                        field="async_rollouts")


#: TrainConfig fields of the asynchronous rollouts (a sweep runs its ladder with and without them).
ASYNC_FIELDS = ("async_rollouts", "partial_rollout_tokens", "rollout_threads")


def run_tag(options: dict) -> str:
    """Run-id suffix of an asynchronous configuration: ``-stale1`` (K = 1), ``-stale1t2`` (K = 1, pieces of T = 2
    tokens); ``""`` for the synchronous loop. It sorts after the seed suffix (``B64-G8-sqrt-s0`` <
    ``B64-G8-sqrt-stale1-s0``), so at equal B the accounting's default reference is the synchronous run."""
    k, t = int(options.get("async_rollouts") or 0), options.get("partial_rollout_tokens")
    if not k and not t:
        return ""
    return f"-stale{k}" + (f"t{int(t)}" if t else "")


def sweep_variants(options: dict | None) -> list[tuple[str, dict]]:
    """The ladders a sweep runs: ``[("", options)]``; with asynchronous settings in ``options`` the synchronous
    ladder (the options without them: the same run ids as a synchronous sweep, so finished ones are reused) and the
    asynchronous one (run ids with :func:`run_tag`), so the report can compare them at each B."""
    options = dict(options or {})
    tag = run_tag(options)
    if not tag:
        return [("", {k: v for k, v in options.items() if k not in ASYNC_FIELDS})]
    return [("", {k: v for k, v in options.items() if k not in ASYNC_FIELDS}), (tag, options)]


@dataclass(frozen=True)
class Schedule:
    """Which batch piece each round decodes (module docstring). ``lag`` = K, ``chunks`` = n, ``chunk_tokens`` = T."""

    lag: int
    chunks: int
    chunk_tokens: int
    max_new: int

    @staticmethod
    def of(cfg) -> "Schedule":
        T = cfg.partial_rollout_tokens or cfg.max_new_tokens
        T = min(T, cfg.max_new_tokens)
        return Schedule(int(cfg.async_rollouts), math.ceil(cfg.max_new_tokens / T), T, cfg.max_new_tokens)

    def first_round(self, b: int) -> int:
        """Round of batch ``b``'s first piece (may be negative: warm-up rounds on version 0)."""
        return b - self.lag - self.chunks

    def new_batch(self, r: int) -> int:
        """The batch whose first piece round ``r`` decodes."""
        return r + self.lag + self.chunks

    def pieces(self, r: int) -> list[tuple[int, int]]:
        """``(batch, piece)`` pairs decoded in round ``r``, batch >= 1."""
        return [(b, j) for j in range(self.chunks) if (b := self.new_batch(r) - j) >= 1]

    def staleness(self, b: int) -> int:
        """Versions between batch ``b``'s first token and the version its update starts from (b - 1)."""
        return (b - 1) - max(0, self.first_round(b))

    def key(self) -> tuple[int, int, int]:
        return (self.lag, self.chunks, self.chunk_tokens)


# --------------------------------------------------------------------------------------------------- decoding
def decode_piece(model, prefixes: list[list[int]], limits: list[int], eos: int, pad: int, temperature: float,
                 generator) -> tuple[list[list[int]], list[list[float]], list[bool]]:
    """Continue each of N sequences (``prefixes``: prompt + response so far) by at most ``limits[i]`` sampled tokens
    (stopping at EOS) under ``model``, with a fresh KV cache (:func:`rlbatch.train.rollout.decode`, each distinct
    prefix encoded once: a group's G responses share the prompt in the first piece). Returns per sequence the new
    tokens, their log-probabilities ``log softmax(logits / temperature)[token]`` (natural log, recorded at sampling
    time: :func:`rlbatch.train.rollout.behaviour_sampling` with ``generator``) and whether it ended with EOS."""
    device = next(model.parameters()).device
    first: dict[tuple, int] = {}
    expand = [first.setdefault(tuple(p), len(first)) for p in prefixes]
    u_ids, u_mask = left_pad([list(k) for k in first], pad, device)
    d = decode(model, u_ids, u_mask, torch.tensor(expand, device=device), limits, eos=eos, pad=pad,
               sample=behaviour_sampling(temperature), generator=generator)
    toks, lps, n_new = d.tokens.cpu(), d.logprobs.cpu(), d.mask.sum(dim=1).tolist()
    return ([toks[i, :k].tolist() for i, k in enumerate(n_new)], [lps[i, :k].tolist() for i, k in enumerate(n_new)],
            d.eos.tolist())


def _round_seed(seed: int, r: int) -> int:
    return int(np.random.SeedSequence([int(seed) % 2**32, r + 2**31]).generate_state(1)[0])


def run_round(model, sched: Schedule, r: int, version: int, inflight: dict, prompts: dict, eos: int, pad: int,
              temperature: float, seed: int) -> list[tuple[int, dict]]:
    """Decode round ``r`` on ``model`` (policy ``version``), updating ``inflight`` (batch -> state: ``prompt``,
    ``resp``, ``logp``, ``ver`` row lists, ``done`` flags) in place; a batch whose first piece this is is created from
    ``prompts[b]`` (row token lists; popped). Returns the batches finished in this round as ``(b, state)``."""
    rows = []
    for b, j in sched.pieces(r):
        if j == 0:
            ps = prompts.pop(b)
            inflight[b] = {"prompt": ps, "resp": [[] for _ in ps], "logp": [[] for _ in ps],
                           "ver": [[] for _ in ps], "done": [False] * len(ps), "round": None}
        st = inflight.get(b)
        if st is None:
            continue  # finished in an earlier piece
        rows += [(b, i) for i, d in enumerate(st["done"]) if not d]
    finished = []
    if rows:
        prefixes = [inflight[b]["prompt"][i] + inflight[b]["resp"][i] for b, i in rows]
        limits = [min(sched.chunk_tokens, sched.max_new - len(inflight[b]["resp"][i])) for b, i in rows]
        gen = torch.Generator().manual_seed(_round_seed(seed, r))
        toks, lps, eos_hit = decode_piece(model, prefixes, limits, eos, pad, temperature, gen)
        for (b, i), t, lp, e in zip(rows, toks, lps, eos_hit):
            st = inflight[b]
            st["resp"][i] += t
            st["logp"][i] += lp
            st["ver"][i] += [version] * len(t)
            st["done"][i] = bool(e) or len(st["resp"][i]) >= sched.max_new
    for b in sorted(inflight):
        st = inflight[b]
        if all(st["done"]):
            st["round"] = r
            finished.append((b, inflight.pop(b)))
    return finished


# --------------------------------------------------------------------------------------------------- batches
def batch_rollout(st: dict, pad: int, device, texts: list[str] | None = None, tok=None):
    """The :class:`rlbatch.train.rollout.Rollout` of a finished batch state ``st`` (``prompt``, ``resp``, ``logp``
    row lists) and its behaviour log-probabilities [B, T] (0 past a response's end), built in one numpy scatter per
    array; ``texts`` given, or decoded with ``tok``."""
    p_ids, p_mask = left_pad(st["prompt"], pad, device)
    r_ids, r_mask = pad_rows(st["resp"], pad, "int64")
    blp, _ = pad_rows(st["logp"], 0.0, "float32")
    if r_ids.shape[1] == 0:  # every response empty: one masked column, as generate gives
        r_ids, r_mask, blp = (np.zeros((len(st["resp"]), 1), x.dtype) + v for x, v in ((r_ids, pad), (r_mask, 0),
                                                                                    (blp, 0.0)))
    r_ids, r_mask, blp = (torch.from_numpy(x).to(device) for x in (r_ids, r_mask, blp))
    if texts is None:
        texts = tok.batch_decode(st["resp"], skip_special_tokens=True)
    return Rollout(p_ids, p_mask, r_ids, r_mask, texts), blp


def _prep_options(cfg, task, tok, micro: int | None) -> dict | None:
    """What the generation process needs to score its batches and lay out their update ahead (None when the task
    cannot be sent to another process, e.g. a scorer that is a closure: the trainer then does it all)."""
    try:
        pickle.dumps((task, tok))
    except Exception:  # noqa: BLE001 - any pickling failure: no preparation, same results
        return None
    single = cfg.algo == "grpo" and cfg.ppo_epochs == 1 and cfg.update_batch == cfg.batch_size and micro
    return {"task": task, "tok": tok, "seed": cfg.seed, "P": cfg.prompts_per_step, "G": cfg.group_size,
            "filter": cfg.filter_groups, "micro": micro, "micro_tokens": cfg.micro_batch_tokens,
            "split": cfg.noise_split_groups, "share": cfg.share_prompts, "single": bool(single)}


def prepare_batch(model, o: dict, b: int, st: dict) -> dict:
    """In the generation process, for finished batch ``b``: its texts, its rewards (the task's scorer on the
    prompts of step b, drawn as the trainer draws them) and, for a single-update GRPO step, the retained rows and
    every micro-batch pass's trim bounds and packing plan (:func:`rlbatch.train.grpo.prepare_passes`, numpy
    arrays): work that needs no weights, taken off the trainer's critical path. The trainer computes the same
    functions of the same data when this is missing, so results do not depend on it."""
    task, G = o["task"], o["G"]
    items = [it for it in task.step_prompts(o["seed"], b, o["P"]) for _ in range(G)]
    texts = o["tok"].batch_decode(st["resp"], skip_special_tokens=True)
    rewards = score(task, items, texts)
    out: dict[str, Any] = {"texts": texts, "rewards": rewards.tolist(), "passes": None}
    if not o["single"]:
        return out
    _, _, rows = retained_rows(rewards, G, o["filter"])
    out["rows"] = [int(x) for x in rows]
    if not len(rows):
        return out
    ro, _ = batch_rollout(st, o["tok"].pad_token_id, "cpu", texts)
    kept = ro.select(rows)
    m = token_budget_micro(kept, o["micro"], o["micro_tokens"])
    out["passes"] = [(p.lo, p.hi, None if p.plan is None else
                      {**{k: getattr(p.plan, k).numpy() for k in PLAN_ARRAYS}, "keep": p.plan.keep}, p.rows)
                     for p in prepare_passes(model, kept, m, G, o["split"], o["share"], inputs=True)]
    return out


# --------------------------------------------------------------------------------------------------- the process
def _child(snap, opts: dict, cmd_q, res_q, shared, lock, ack) -> None:
    """The generation process: rounds on its own copy of the weights, commands from the trainer on ``cmd_q``
    (``weights`` v, ``snapshot``, ``stop``), results on ``res_q`` (``batch``, ``state``, ``error``)."""
    die_with_parent(opts["parent_pid"])  # Linux: SIGKILLed by the kernel when the trainer dies (kill -9 too)
    try:
        with precision_context(opts.get("precision", "fp32"), opts.get("device", "cpu")):  # as the trainer's
            _child_loop(snap, opts, cmd_q, res_q, shared, lock, ack)
    except BaseException:  # noqa: BLE001 - report to the trainer, which raises it
        res_q.put(("error", traceback.format_exc()))


def _child_loop(snap, opts: dict, cmd_q, res_q, shared, lock, ack) -> None:
    """The body of :func:`_child` (inside the run's precision context)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # its own cores only: no tokenizer thread pool
    torch.set_num_threads(opts["threads"])
    snap_on_cuda = next(snap.parameters()).is_cuda  # a CUDA snapshot arrives through CUDA IPC
    model = copy.deepcopy(snap)  # own storage: the trainer rewrites ``snap`` between versions
    model.requires_grad_(False)
    model.eval()
    sched = Schedule(*opts["schedule"], opts["max_new"])
    inflight, prompts = opts["inflight"], dict(opts["prompts"])
    nxt, version = opts["next_round"], opts["version"]
    parent = mp.parent_process()
    gc.freeze()  # the model, task and tokenizer are long-lived: no full collection rescans them mid-round
    res_q.put(("ready",))
    while True:
        while nxt <= version:
            c0 = time.process_time()
            with lock:
                shared[1] = time.perf_counter()
            done = run_round(model, sched, nxt, max(0, nxt), inflight, prompts, opts["eos"], opts["pad"],
                             opts["temperature"], opts["seed"])
            with lock:
                shared[0] += time.perf_counter() - shared[1]
                shared[1] = -1.0
                shared[2] += time.process_time() - c0
            for b, st in done:
                prep = prepare_batch(model, opts["prep"], b, st) if opts.get("prep") else None
                res_q.put(("batch", b, st, prep))
            nxt += 1
        try:
            msg = cmd_q.get(timeout=1.0)
        except Exception:  # queue.Empty: check the trainer is still there (a kill -9 leaves us orphaned)
            if parent is not None and not parent.is_alive():
                os._exit(0)  # nobody reads the results any more: do not wait to flush them
            continue
        if msg[0] == "weights":
            _, v, b, ids = msg
            with torch.no_grad():
                for dst, src in zip(model.state_dict().values(), snap.state_dict().values()):
                    dst.copy_(src)
            if snap_on_cuda:  # the copy must be complete before the ack lets the trainer rewrite ``snap``
                torch.cuda.synchronize()
            version = v
            ack.value = v
            prompts[b] = [x for x in ids for _ in range(opts["group_size"])]  # P prompts -> P x G rows
        elif msg[0] == "snapshot":
            res_q.put(("state", nxt - 1, copy.deepcopy(inflight)))
        elif msg[0] == "stop":
            return


class AsyncRollouts:
    """The trainer's side of the asynchronous generator (one per run). ``start_step`` is the number of steps
    already taken (0, or the step of the checkpoint resumed from, whose generation state is ``saved``)."""

    def __init__(self, cfg, model, tok, task, start_step: int = 0, saved: dict | None = None,
                 micro: int | None = None):
        self.cfg, self.tok, self.task = cfg, tok, task
        self.prepared_of: dict[int, dict | None] = {}
        self.prepared: dict | None = None
        self.sched = Schedule.of(cfg)
        self.pending: dict[int, dict] = {}
        self.state_msg = None
        self.snap_requested = False
        self.ready = False
        s = int(start_step)
        if s > 0 and saved is None:
            raise UserError("the checkpoint has no asynchronous-rollout state: resume with the --async-rollouts / "
                            "--partial-rollout-tokens the run was started with", field="async_rollouts")
        if saved is not None:
            if tuple(saved["schedule"]) != self.sched.key():
                raise UserError(f"the checkpoint was written with (async_rollouts, pieces, piece tokens) = "
                                f"{tuple(saved['schedule'])}, this run asks for {self.sched.key()}: resume with the "
                                "settings the run was started with", field="async_rollouts")
            after, inflight = int(saved["after_round"]), saved["inflight"]
            self.pending = {int(b): p for b, p in saved["pending"].items() if int(b) > s}
        else:
            after, inflight = self.sched.first_round(1) - 1, {}
        G = int(cfg.group_size)
        prompts = {self.sched.new_batch(r): [x for x in self._prompt_ids(self.sched.new_batch(r)) for _ in range(G)]
                   for r in range(after + 1, s + 1)}
        ctx = tmp.get_context("spawn")
        self.snap = copy.deepcopy(model).requires_grad_(False)
        self._pairs = None
        self.snap.share_memory()
        self.shared = ctx.Array("d", [0.0, -1.0, 0.0], lock=False)  # busy seconds, busy since, CPU seconds
        self.lock = ctx.Lock()
        self.ack = ctx.Value("i", s)
        self.cmd_q, self.res_q = ctx.Queue(), ctx.Queue()
        opts = {"threads": int(getattr(cfg, "rollout_threads", 1) or 1), "schedule": self.sched.key(),
                "max_new": self.sched.max_new, "inflight": inflight, "prompts": prompts, "next_round": after + 1,
                "group_size": G,
                "version": s, "eos": tok.eos_token_id, "pad": tok.pad_token_id, "temperature": cfg.temperature,
                "seed": cfg.seed, "parent_pid": os.getpid(),
                "prep": _prep_options(cfg, task, tok, micro), "precision": getattr(cfg, "precision", "fp32"),
                "device": str(getattr(cfg, "device", "cpu"))}


        self.proc = ctx.Process(target=_child, args=(self.snap, opts, self.cmd_q, self.res_q, self.shared,
                                                     self.lock, self.ack), daemon=True, name="rlbatch-rollouts")
        self.proc.start()
        # start-up (spawn, imports, weight copy) is set-up like loading the model: not part of any step's time
        while not self.ready:
            self._recv()
        self._mark0 = self._mark1 = self._busy()

    # ------------------------------------------------------------------ helpers
    def _prompt_ids(self, b: int) -> list[list[int]]:
        """Token ids of step ``b``'s P prompts (the generator expands each to its G rows)."""
        return [render_prompt(it, self.tok) for it in self._items(b, per_prompt=True)]

    def _items(self, b: int, per_prompt: bool = False):
        # the prompts of step b, drawn exactly as the synchronous loop draws them (rollout.rollout_step)
        prompts = self.task.step_prompts(self.cfg.seed, b, self.cfg.prompts_per_step)
        return prompts if per_prompt else [it for it in prompts for _ in range(self.cfg.group_size)]

    def _busy(self) -> tuple[float, float]:
        with self.lock:
            now = time.perf_counter()
            busy = self.shared[0] + (now - self.shared[1] if self.shared[1] >= 0 else 0.0)
            return busy, self.shared[2]

    def _recv(self) -> None:
        while True:
            try:
                msg = self.res_q.get(timeout=1.0)
                break
            except queue.Empty:
                if not self.proc.is_alive():
                    raise RuntimeError(f"the rollout process died (exit code {self.proc.exitcode})") from None
        if msg[0] == "batch":
            self.pending[int(msg[1])] = msg[2]
            self.prepared_of[int(msg[1])] = msg[3]
        elif msg[0] == "state":
            self.state_msg = (int(msg[1]), msg[2])
        elif msg[0] == "ready":
            self.ready = True
        elif msg[0] == "error":
            raise RuntimeError("the rollout process failed:\n" + msg[1])

    # ------------------------------------------------------------------ the trainer's hooks
    def get(self, step: int) -> Batch:
        """Block until batch ``step`` is decoded; the :class:`rlbatch.train.rollout.Batch` with its rewards (scored
        by the generator, or here when it could not), the recorded log-probabilities of its response tokens [B, T]
        (0 past a response's end) and the update's passes the generator laid out (:meth:`prepared_passes`).
        ``gen_s``: the seconds waited for the batch."""
        t0 = time.perf_counter()
        items, ro, blp = self._take(step)
        t1 = time.perf_counter()
        rewards = self.prepared_rewards()
        if rewards is None:
            rewards = score(self.task, items, ro.texts)
        return Batch(items, ro, rewards, blp, self.prepared_passes, gen_s=t1 - t0, reward_s=time.perf_counter() - t1)

    def _take(self, step: int):
        """``(items [B], rollout [B], behaviour_logp [B, T])`` of batch ``step`` once decoded: the rollout as
        :func:`rlbatch.train.rollout.rollout_step` gives it (rows grouped by prompt)."""
        self._mark0 = self._busy()
        while step not in self.pending:
            self._recv()
        st = self.pending.pop(step)
        self.prepared = self.prepared_of.pop(step, None)
        ro, blp = batch_rollout(st, self.tok.pad_token_id, self.cfg.device,
                                self.prepared["texts"] if self.prepared else None, self.tok)
        first = [v[0] if v else step - 1 for v in st["ver"]]
        tok_stale = [(step - 1) - x for v in st["ver"] for x in v]
        self._info = {"rollout/staleness_mean": float(np.mean([(step - 1) - f for f in first])),
                      "rollout/staleness_max": int(max((step - 1) - f for f in first)),
                      "rollout/staleness_token_mean": float(np.mean(tok_stale)) if tok_stale else 0.0,
                      "rollout/partial_frac": float(np.mean([len(set(v)) > 1 for v in st["ver"]])),
                      "rollout/version_span_max": int(max((v[-1] - v[0]) if v else 0 for v in st["ver"])),
                      "rollout/policy_version_min": int(min(first))}
        self._mark1 = self._busy()
        return self._items(step), ro, blp

    def prepared_rewards(self):
        """The rewards [B] the generator computed for the batch :meth:`get` returned last (None: not prepared)."""
        p = self.prepared
        return None if p is None else torch.tensor(p["rewards"], dtype=torch.float32)

    def prepared_passes(self, rows) -> list | None:
        """The update's passes (:class:`rlbatch.train.grpo.PreparedPass`, on the run's device) the generator laid
        out for that batch, when its retained rows are ``rows`` (the trainer's own filtering of the same rewards);
        else None."""
        p = self.prepared
        if p is None or p.get("passes") is None or p.get("rows") != [int(x) for x in rows]:
            return None
        dev = self.cfg.device
        out = []
        for lo, hi, plan, n in p["passes"]:
            if plan is not None:
                plan = PackingPlan(keep=plan["keep"], **{k: torch.from_numpy(plan[k]).to(dev) for k in PLAN_ARRAYS})
            out.append(PreparedPass(lo, hi, plan, n))
        return out

    def publish(self, step: int, model, snapshot: bool = False) -> None:
        """After update ``step``: hand version ``step`` to the generator (after it has taken version step-1 into
        its own copy) with the prompts of the batch it starts next; ``snapshot`` first asks for its state (for the
        checkpoint of this step)."""
        self._mark2 = self._busy()
        if snapshot and not self.snap_requested:
            self.cmd_q.put(("snapshot",))
            self.snap_requested = True
        while self.ack.value < step - 1:
            if not self.proc.is_alive():
                self._recv()  # raises with the child's error
            time.sleep(0.0005)
        if self._pairs is None:  # the snapshot's tensors and the model's, in one order (fixed for the run)
            self._pairs = ([t for t in self.snap.state_dict().values()], [t for t in model.state_dict().values()])
        with torch.no_grad():
            torch._foreach_copy_(*self._pairs)
        if self._pairs[0] and self._pairs[0][0].is_cuda:  # the generator reads ``snap`` through CUDA IPC, on its
            torch.cuda.synchronize()  # own stream: the copy must be complete before the message says so
        b = self.sched.new_batch(step)
        self.cmd_q.put(("weights", step, b, self._prompt_ids(b)))

    def step_metrics(self, main_cpu_s: float) -> dict[str, Any]:
        """The step's asynchronous metrics (module docstring), from the marks taken in :meth:`get` and
        :meth:`publish`; ``main_cpu_s`` is the trainer's own CPU seconds of the step."""
        busy0, cpu0 = self._mark0
        busy1, _ = self._mark1
        busy2, cpu2 = self._mark2
        return {**self._info, "time/overlap_s": busy2 - busy1, "time/gen_busy_s": busy2 - busy0,
                "time/cpu_s": main_cpu_s + (cpu2 - cpu0), "rollout/async_lag": self.sched.lag,
                "rollout/pieces": self.sched.chunks}

    def busy_seconds(self) -> float:
        """The generator's busy seconds so far (it keeps decoding while the trainer evaluates: the trainer charges
        what accrues during an evaluation to the clock, issue 44)."""
        return self._busy()[0]

    def checkpoint(self) -> dict:
        """The generation state for the checkpoint (``{CKPT_KEY: ...}``): after the last round the generator
        finished before the snapshot request (asked now unless :meth:`publish` already did)."""
        if not self.snap_requested:
            self.cmd_q.put(("snapshot",))
            self.snap_requested = True
        while self.state_msg is None:
            self._recv()
        after, inflight = self.state_msg
        self.state_msg, self.snap_requested = None, False
        pending = {b: p for b, p in self.pending.items() if p["round"] <= after}
        return {CKPT_KEY: {"schedule": self.sched.key(), "after_round": after, "inflight": inflight,
                           "pending": pending}}

    def close(self) -> None:
        """Stop the generator process (waits briefly, then terminates it)."""
        try:
            self.cmd_q.put(("stop",))
            self.proc.join(timeout=5)
        finally:
            if self.proc.is_alive():
                self.proc.terminate()
                self.proc.join(timeout=5)
