"""Rollouts: prompt rendering, KV-cache batched generation (sampling or greedy), scoring, greedy evaluation.

Generation is a plain loop over ``model(..., past_key_values=cache)`` with left padding and explicit position ids,
sampling with a caller-owned ``torch.Generator`` so that a run is reproducible from its seed and resumable.
"""

from __future__ import annotations

import inspect
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np
import torch

from rlbatch.train.tasks import Item, Task


def render_prompt(item: Item, tokenizer) -> list[int]:
    """Token ids of a prompt: chat messages go through the tokenizer's chat template when it has one (with the
    generation prompt), otherwise their contents are joined; plain text is tokenised as is (no special tokens)."""
    prompt = item.prompt
    if isinstance(prompt, list):
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        else:
            text = "\n".join(m["content"] for m in prompt) + "\n"
    else:
        text = prompt
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class Rollout:
    """A batch of N sequences: ``prompt_ids`` [N, L] left-padded with ``prompt_mask`` [N, L]; ``response_ids``
    [N, T] with ``response_mask`` [N, T] (1 up to and including EOS, 0 after); ``texts`` the decoded responses."""

    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    texts: list[str]

    def select(self, idx: torch.Tensor | list[int]) -> "Rollout":
        idx = torch.as_tensor(idx, dtype=torch.long)
        texts = [self.texts[i] for i in idx.tolist()]
        idx = idx.to(self.prompt_ids.device)
        return Rollout(self.prompt_ids[idx], self.prompt_mask[idx], self.response_ids[idx], self.response_mask[idx],
                       texts)

    @property
    def input_ids(self) -> torch.Tensor:
        return torch.cat([self.prompt_ids, self.response_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:
        return torch.cat([self.prompt_mask, self.response_mask], dim=1)


def pad_rows(seqs: list[list], value, dtype, left: bool = False):
    """Token lists as one padded numpy array [N, max len] (``value`` in the padding, on the left with ``left``) and
    its 0/1 mask, built in one scatter rather than a tensor per row."""
    lens = np.fromiter((len(x) for x in seqs), dtype=np.int64, count=len(seqs))
    n = int(lens.max()) if len(seqs) else 0
    out = np.full((len(seqs), n), value, dtype=dtype)
    cols = np.arange(n)[None, :]
    mask = (cols >= n - lens[:, None]) if left else (cols < lens[:, None])
    flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=dtype, count=int(lens.sum()))
    out[mask] = flat  # row-major: each row's tokens in order
    return out, mask.astype(np.int64)


def left_pad(seqs: list[list[int]], pad_id: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids [N, L] and mask [N, L] (long tensors on ``device``) of token lists."""
    ids, mask = pad_rows(seqs, pad_id, "int64", left=True)
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids for a left-padded attention mask: 0 at the first real token."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def cache_kwarg(model) -> str:
    """Name of the KV-cache argument: ``cache`` (transformers >= 5.2x) or ``past_key_values`` (older)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def cache_of(out):
    """The KV cache a forward pass returned (``out.cache``, or ``out.past_key_values`` before transformers 5.2x)."""
    c = getattr(out, "cache", None)
    return c if c is not None else out.past_key_values


def kv_bytes_per_sequence(model, context: int) -> int:
    """Bytes of KV cache one sequence of ``context`` tokens holds in ``model`` (keys and values of every layer, in the
    parameters' dtype): ``2 x n_layer x n_kv_heads x head_dim x context x bytes``, from the model's config."""
    c = model.config
    layers = int(getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer"))
    hidden = int(getattr(c, "hidden_size", None) or getattr(c, "n_embd"))
    heads = int(getattr(c, "num_attention_heads", None) or getattr(c, "n_head"))
    kv_heads = int(getattr(c, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(c, "head_dim", None) or hidden // heads)
    item = next(model.parameters()).element_size()
    return 2 * layers * kv_heads * head_dim * int(context) * item


def fitted_concurrency(model, context: int, budget_bytes: int | None = None) -> int:
    """Default ``--max-concurrent-sequences``: how many sequences of ``context`` tokens fit in ``budget_bytes`` of KV
    cache plus three fp32 rows of logits each (default budget: a quarter of the GPU's total memory on CUDA, of the
    machine's RAM on CPU: totals, not what is free now, so a resumed run chunks, and samples, exactly as before).
    At least 1."""
    dev = next(model.parameters()).device
    if budget_bytes is None:
        if dev.type == "cuda":
            budget_bytes = torch.cuda.get_device_properties(dev).total_memory // 4
        else:
            try:
                budget_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
            except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
                budget_bytes = 2**31
    vocab = int(getattr(model.config, "vocab_size", 0) or 0)
    per = kv_bytes_per_sequence(model, context) + 4 * vocab * 3  # logits, probabilities, their float copy
    return max(1, int(budget_bytes // max(per, 1)))


@dataclass
class GenStats:
    """What one :func:`generate` call held at most: ``peak_kv_bytes`` (KV cache plus the step's logits, measured on
    the tensors themselves), ``peak_sequences`` (rows in flight at once), ``chunks`` (generation passes)."""

    peak_kv_bytes: int = 0
    peak_sequences: int = 0
    chunks: int = 0


def _cache_nbytes(past) -> int:
    layers = getattr(past, "layers", None)
    if layers is not None:
        return sum(int(x.keys.nbytes) + int(x.values.nbytes) for x in layers
                   if getattr(x, "keys", None) is not None and x.keys.dim() > 0)
    return sum(int(t.nbytes) for kv in past for t in kv)  # pragma: no cover - legacy tuple caches


#: A sampling rule of the decode loop: ``sample(logits [N, V], generator) -> (tokens [N], log-probabilities [N])``.
Sampler = Callable[[torch.Tensor, "torch.Generator | None"], tuple[torch.Tensor, torch.Tensor]]


def greedy_sample(logits: torch.Tensor, generator=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The argmax tokens [N] (evaluation); log-probabilities not recorded (0)."""
    return logits.argmax(-1), torch.zeros(logits.shape[0], device=logits.device)


def sampling(temperature: float) -> Sampler:
    """Sampling at ``temperature`` from the full distribution (no top-k / top-p): ``softmax(logits / temperature)``
    in float32, one ``torch.multinomial`` draw per row with the caller's generator; the drawn tokens'
    log-probabilities come back as ``log p``."""
    def sample(logits, generator):
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator)
        return nxt.squeeze(1), probs.gather(-1, nxt).squeeze(1).log()
    return sample


def behaviour_sampling(temperature: float) -> Sampler:
    """Sampling at ``temperature`` that records the behaviour policy's log-probabilities exactly as the loss computes
    them (``log_softmax(logits / temperature)[token]``, the function of :func:`rlbatch.train.grpo.token_logprobs`),
    drawing from their exponential: the asynchronous rollouts' sampler (their importance ratio is taken against these
    values). The synchronous loop keeps :func:`sampling` (the same distribution, rounded differently; its published
    runs were sampled with it)."""
    def sample(logits, generator):
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        nxt = torch.multinomial(logp.exp(), 1, generator=generator)
        return nxt.squeeze(1), logp.gather(-1, nxt).squeeze(1)
    return sample


@dataclass
class Decoded:
    """What :func:`decode` produced for N rows, T = the steps it took: ``tokens`` [N, T] (pad after a row's end),
    ``mask`` [N, T] (1 up to and including EOS or the row's limit), ``logprobs`` [N, T] (the sampler's, 0 past a
    row's end), ``eos`` [N] (the row ended with EOS)."""

    tokens: torch.Tensor
    mask: torch.Tensor
    logprobs: torch.Tensor
    eos: torch.Tensor


@torch.inference_mode()
def decode(model, ids: torch.Tensor, mask: torch.Tensor, expand: torch.Tensor, limits: list[int], *, eos: int,
           pad: int, sample: Sampler, generator=None, stats: GenStats | None = None) -> Decoded:
    """THE decode loop (every rollout, evaluation and asynchronous piece): continue N sequences whose distinct
    prefixes are ``ids`` / ``mask`` [U, L] (left-padded; a group's prompt, or a prompt + response so far) and whose
    prefix rows are ``expand`` [N], by at most ``limits[i]`` new tokens each, stopping a row at EOS.

    One prefill of the U prefixes (the LM head on the last position only), the KV cache expanded to the N rows, then
    one forward per token with explicit position ids; ``sample(logits, generator)`` picks the tokens. Rows that have
    finished are dropped from the batch (and their cache) once they are a quarter of it; the loop ends when every
    row has. ``stats`` collects the peak KV-cache bytes (plus the step's logits) and rows in flight. Returns a
    :class:`Decoded` on the model's device."""
    stats = stats if stats is not None else GenStats()
    device = ids.device
    n, L = int(expand.numel()), ids.shape[1]
    steps = int(max(limits))
    pos0 = positions(mask)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos0, use_cache=True, logits_to_keep=1)
    past, logits = cache_of(out), out.logits[:, -1, :]
    if ids.shape[0] != n:
        past.reorder_cache(expand)
        logits = logits.index_select(0, expand)
    full = torch.ones((n, L + steps), dtype=mask.dtype, device=device)
    full[:, :L] = mask.index_select(0, expand)
    pos = pos0[:, -1:].index_select(0, expand)
    lim = torch.as_tensor(limits, device=device)
    act = torch.arange(n, device=device)  # batch row -> sequence
    done = torch.zeros(n, dtype=torch.bool, device=device)
    toks = torch.full((n, steps), pad, dtype=torch.long, device=device)
    keep = torch.zeros((n, steps), dtype=torch.long, device=device)
    lps = torch.zeros((n, steps), dtype=torch.float32, device=device)
    eos_hit = torch.zeros(n, dtype=torch.bool, device=device)
    kw = cache_kwarg(model)
    for t in range(steps):
        b = int(act.numel())
        stats.peak_sequences = max(stats.peak_sequences, b)
        stats.peak_kv_bytes = max(stats.peak_kv_bytes, _cache_nbytes(past) + 3 * int(logits.nbytes))
        done = done | (lim <= t)
        nxt, lp = sample(logits, generator)
        alive = ~done
        nxt = nxt.masked_fill(done, pad)
        toks[act, t], keep[act, t], lps[act, t] = nxt, alive.long(), lp.float()
        eos_hit[act] = eos_hit[act] | (alive & (nxt == eos))
        done = done | (nxt == eos) | (lim <= t + 1)
        n_done = int(done.sum())
        if t == steps - 1 or n_done == b:
            break
        if 4 * n_done >= b:  # drop the finished rows: they would only be computed and masked
            sel = torch.nonzero(~done, as_tuple=False).squeeze(1)
            past.reorder_cache(sel)
            act, nxt, done, pos, full, lim = act[sel], nxt[sel], done[sel], pos[sel], full[sel], lim[sel]
        pos = pos + 1
        out = model(input_ids=nxt.masked_fill(done, pad)[:, None], attention_mask=full[:, :L + t + 1],
                    position_ids=pos, use_cache=True, **{kw: past})
        past, logits = cache_of(out), out.logits[:, -1, :]
    T = t + 1
    return Decoded(toks[:, :T], keep[:, :T], lps[:, :T], eos_hit)


def generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, *, temperature: float = 1.0,
             greedy: bool = False, generator: torch.Generator | None = None, num_samples: int = 1,
             max_concurrent: int | None = None, stats: GenStats | None = None,
             sample: Sampler | None = None) -> Rollout:
    """Generate ``num_samples`` responses per prompt (rows grouped: prompt p's are rows ``p*n .. p*n+n-1``) with
    :func:`decode`.

    ``sample``: the sampling rule, by default :func:`sampling` at ``temperature``, or :func:`greedy_sample` with
    ``greedy``. Stops at EOS or after ``max_new_tokens``, and as soon as every sequence has hit EOS (so the response
    is only as wide as its longest member). Scale: rows go through in chunks of at most ``max_concurrent`` (None:
    all at once), so the KV cache never holds more; each distinct prompt of a chunk is prefilled once and its cache
    expanded to its samples. ``stats`` (a :class:`GenStats`) is filled with the peak KV-cache bytes and rows in
    flight. Returns a :class:`Rollout` on the model's device (ordinary tensors, usable in a later autograd forward),
    every chunk padded to one width (prompts left, responses right).
    """
    n = int(num_samples)
    rows = len(prompts) * n
    cap = rows if max_concurrent is None else max(1, int(max_concurrent))
    stats = stats if stats is not None else GenStats()
    sample = sample or (greedy_sample if greedy else sampling(temperature))
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id
    parts = []
    for lo in range(0, rows, cap):  # rows lo .. hi-1: row r is sample r % n of prompt r // n
        hi = min(rows, lo + cap)
        stats.chunks += 1
        p_lo, p_hi = lo // n, (hi - 1) // n + 1
        uniq, uniq_mask = left_pad(prompts[p_lo:p_hi], pad, device)
        expand = torch.arange(lo, hi, device=device) // n - p_lo  # row -> its prompt within the chunk
        d = decode(model, uniq, uniq_mask, expand, [max_new_tokens] * (hi - lo), eos=tokenizer.eos_token_id,
                   pad=pad, sample=sample, generator=generator, stats=stats)
        parts.append((uniq.index_select(0, expand), uniq_mask.index_select(0, expand), d.tokens, d.mask))
    L = max(p[0].shape[1] for p in parts)
    T = max(p[2].shape[1] for p in parts)

    def widen(t, width, value, left):
        if t.shape[1] == width:
            return t.clone()  # leave inference mode
        fill = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype, device=t.device)
        return torch.cat([fill, t] if left else [t, fill], dim=1)

    ids = torch.cat([widen(p[0], L, pad, True) for p in parts])
    prompt_mask = torch.cat([widen(p[1], L, 0, True) for p in parts])
    resp = torch.cat([widen(p[2], T, pad, False) for p in parts])
    rmask = torch.cat([widen(p[3], T, 0, False) for p in parts])
    rows_ = [r[m.bool()].tolist() for r, m in zip(resp.cpu(), rmask.cpu())]
    texts = tokenizer.batch_decode(rows_, skip_special_tokens=True)
    return Rollout(ids, prompt_mask, resp, rmask, texts)


def _no_passes(rows: list[int]) -> None:
    return None


@dataclass
class Batch:
    """One step's rollout batch as a rollout source delivers it: ``items`` [B] and ``rollout`` [B] (rows grouped by
    prompt: prompt p's G responses are rows p*G .. p*G+G-1), ``rewards`` [B] (float32), the behaviour policy's
    log-probabilities [B, T] recorded at sampling time (asynchronous rollouts; None: the current policy sampled
    it), ``prepared_passes(rows)`` (the update's passes laid out ahead for retained ``rows``, or None), and the
    seconds spent waiting for the batch (``gen_s``) and scoring it (``reward_s``)."""

    items: list[Item]
    rollout: Rollout
    rewards: torch.Tensor
    behaviour_logp: torch.Tensor | None = None
    prepared_passes: Callable[[list[int]], list | None] = field(default=_no_passes)
    gen_s: float = 0.0
    reward_s: float = 0.0


class RolloutSource(Protocol):
    """Where the training loop gets each step's batch: :class:`SyncRollouts` (generated on demand with the current
    weights) or :class:`rlbatch.train.async_rollout.AsyncRollouts` (decoded ahead in its own process, up to K policy
    versions behind)."""

    def get(self, step: int) -> Batch:
        """Step ``step``'s batch (prompts drawn by :meth:`rlbatch.train.tasks.Task.step_prompts`), scored."""

    def publish(self, step: int, model, snapshot: bool = False) -> None:
        """After update ``step``: the new weights (policy version ``step``); ``snapshot``: a checkpoint follows."""

    def step_metrics(self, cpu_s: float) -> dict[str, Any]:
        """The source's own metrics-line entries for the step just taken (``cpu_s``: the trainer's CPU seconds)."""

    def busy_seconds(self) -> float:
        """Seconds the source has spent generating in the background so far (0 for the synchronous source: it
        generates only inside a step). The trainer charges what accrues during an evaluation to the clock."""

    def checkpoint(self) -> dict[str, Any]:
        """What a checkpoint must keep to resume the source exactly (``{}`` when nothing)."""

    def close(self) -> None:
        """Release the source's resources (processes)."""


def rollout_step(model, tok, task, cfg, step: int, stats=None, sample: Sampler | None = None):
    """Sample P prompts for ``step`` and G responses each. Returns ``(items [B], rollout [B])``, grouped
    contiguously (responses of prompt p are rows p*G .. p*G+G-1), in chunks of at most
    ``cfg.max_concurrent_sequences`` rows; ``stats`` (:class:`GenStats`) collects the peak KV-cache bytes;
    ``sample``: the sampling rule (default :func:`sampling` at ``cfg.temperature``)."""
    prompts = task.step_prompts(cfg.seed, step, cfg.prompts_per_step)
    items = [it for it in prompts for _ in range(cfg.group_size)]
    ids = [render_prompt(it, tok) for it in prompts]  # tokenised and prefilled once per prompt
    gen = torch.Generator(device=cfg.device).manual_seed(int(cfg.seed) * 1_000_003 + step)
    ro = generate(model, tok, ids, cfg.max_new_tokens, temperature=cfg.temperature, generator=gen,
                  num_samples=cfg.group_size, max_concurrent=cfg.max_concurrent_sequences, stats=stats, sample=sample)
    return items, ro


class SyncRollouts:
    """The synchronous rollout source: step s's batch is generated when the loop asks for it, with the weights of
    the moment (version s-1), and scored by the task's verifier (:func:`rollout_step`, :func:`score`); ``sample``:
    the sampling rule (default :func:`sampling` at ``cfg.temperature``)."""

    def __init__(self, model, tok, task: Task, cfg, stats: GenStats | None = None, sample: Sampler | None = None):
        self.model, self.tok, self.task, self.cfg, self.stats = model, tok, task, cfg, stats
        self.sample = sample or sampling(cfg.temperature)

    def get(self, step: int) -> Batch:
        t0 = time.perf_counter()
        items, ro = rollout_step(self.model, self.tok, self.task, self.cfg, step, self.stats, self.sample)
        t1 = time.perf_counter()
        rewards = score(self.task, items, ro.texts)
        return Batch(items, ro, rewards, gen_s=t1 - t0, reward_s=time.perf_counter() - t1)

    def publish(self, step: int, model, snapshot: bool = False) -> None:
        pass  # the next batch is generated with ``model`` itself

    def step_metrics(self, cpu_s: float) -> dict[str, Any]:
        return {}

    def busy_seconds(self) -> float:
        return 0.0

    def checkpoint(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def score(task: Task, items: list[Item], texts: list[str]) -> torch.Tensor:
    """Rewards [N] (float32) from the task's verifier, one per (item, response text)."""
    return torch.tensor([task.score(it, tx) for it, tx in zip(items, texts)], dtype=torch.float32)


@torch.no_grad()
def evaluate(model, tokenizer, task: Task, max_new_tokens: int, batch_size: int = 256,
             max_concurrent: int | None = None, sample: Sampler = greedy_sample) -> tuple[float, int, float]:
    """Greedy accuracy on the task's fixed held-out set: ``(mean score in [0, 1], number of items, seconds)``;
    ``sample``: :func:`greedy_sample` (or a wrapper of it, e.g. with a fault point)."""
    t0 = time.perf_counter()
    items = task.eval_items
    total = 0.0
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        ro = generate(model, tokenizer, [render_prompt(it, tokenizer) for it in chunk], max_new_tokens,
                      max_concurrent=max_concurrent, sample=sample)
        total += float(score(task, chunk, ro.texts).sum())
    return total / max(len(items), 1), len(items), time.perf_counter() - t0
