"""Rollouts: prompt rendering, KV-cache batched generation (sampling or greedy), scoring, greedy evaluation.

Generation is a plain loop over ``model(..., past_key_values=cache)`` with left padding and explicit position ids,
sampling with a caller-owned ``torch.Generator`` so that a run is reproducible from its seed and resumable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from rlbatch.faults import fault
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
    import itertools

    import numpy as np

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


def _cache_kw(model) -> str:
    """Name of the KV-cache argument: ``cache`` (transformers >= 5.2x) or ``past_key_values`` (older)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _cache_of(out):
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
            import os

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


def generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, *, temperature: float = 1.0,
             greedy: bool = False, generator: torch.Generator | None = None, num_samples: int = 1,
             max_concurrent: int | None = None, stats: GenStats | None = None) -> Rollout:
    """Generate ``num_samples`` responses per prompt (rows grouped: prompt p's are rows ``p*n .. p*n+n-1``) with a
    KV cache.

    Sampling at ``temperature`` from the full distribution (no top-k/top-p), or argmax if ``greedy``. Stops at EOS
    or after ``max_new_tokens``, and as soon as every sequence has hit EOS (so the response is only as wide as its
    longest member). Scale and speed: rows go through in chunks of at most ``max_concurrent`` (None: all at once),
    so the KV cache never holds more; each distinct prompt of a chunk is prefilled once and its cache expanded to
    its samples; sequences that have finished are dropped from the batch (and their cache) once they are a quarter
    of it. Runs under ``torch.inference_mode``; the LM head runs only on the last prompt position at prefill.
    ``stats`` (a :class:`GenStats`) is filled with the peak KV-cache bytes and rows in flight. Returns a
    :class:`Rollout` on the model's device (ordinary tensors, usable in a later autograd forward), every chunk
    padded to one width (prompts left, responses right).
    """
    n = int(num_samples)
    rows = len(prompts) * n
    cap = rows if max_concurrent is None else max(1, int(max_concurrent))
    stats = stats if stats is not None else GenStats()
    parts = []
    with torch.inference_mode():
        for lo in range(0, rows, cap):
            stats.chunks += 1
            parts.append(_generate(model, tokenizer, prompts, n, lo, min(rows, lo + cap), max_new_tokens,
                                   temperature, greedy, generator, stats))
    pad = tokenizer.pad_token_id
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


def _generate(model, tokenizer, prompts, n_samples, lo, hi, max_new_tokens, temperature, greedy, generator,
              stats: GenStats):
    """Rows ``lo .. hi-1`` of the grouped batch (row r is sample ``r % n`` of prompt ``r // n``)."""
    device = next(model.parameters()).device
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    p_lo, p_hi = lo // n_samples, (hi - 1) // n_samples + 1
    uniq, uniq_mask = left_pad(prompts[p_lo:p_hi], pad, device)
    n, L = hi - lo, uniq.shape[1]
    expand = torch.arange(lo, hi, device=device) // n_samples - p_lo  # row -> its prompt within the chunk
    ckw = _cache_kw(model)
    upos = positions(uniq_mask)
    out = model(input_ids=uniq, attention_mask=uniq_mask, position_ids=upos, use_cache=True, logits_to_keep=1)
    past = _cache_of(out)
    logits = out.logits[:, -1, :]
    if n_samples > 1 or uniq.shape[0] != n:
        past.reorder_cache(expand)
        logits = logits.index_select(0, expand)
    ids, prompt_mask = uniq.index_select(0, expand), uniq_mask.index_select(0, expand)
    mask = torch.ones((n, L + max_new_tokens), dtype=prompt_mask.dtype, device=device)
    mask[:, :L] = prompt_mask
    pos = upos[:, -1:].index_select(0, expand)
    act = torch.arange(n, device=device)  # batch row -> chunk row
    fin = torch.zeros(n, dtype=torch.bool, device=device)  # finished, among the batch rows
    toks = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=device)
    keep = torch.zeros((n, max_new_tokens), dtype=torch.long, device=device)
    t_end = max_new_tokens
    for t in range(max_new_tokens):
        fault("gen")
        b = int(act.numel())
        stats.peak_sequences = max(stats.peak_sequences, b)
        stats.peak_kv_bytes = max(stats.peak_kv_bytes, _cache_nbytes(past) + 3 * int(logits.nbytes))
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        nxt = nxt.masked_fill(fin, pad)
        toks[act, t] = nxt
        keep[act, t] = (~fin).long()
        fin = fin | (nxt == eos)
        if t == max_new_tokens - 1:
            break
        n_fin = int(fin.sum())
        if n_fin == b:
            t_end = t + 1
            break
        if 4 * n_fin >= b:  # drop the finished rows: they would only be computed and masked
            sel = torch.nonzero(~fin, as_tuple=False).squeeze(1)
            past.reorder_cache(sel)
            act, nxt, fin, pos, mask = act[sel], nxt[sel], fin[sel], pos[sel], mask[sel]
        pos = pos + 1
        out = model(input_ids=nxt[:, None], attention_mask=mask[:, :L + t + 1], position_ids=pos, use_cache=True,
                    **{ckw: past})
        past = _cache_of(out)
        logits = out.logits[:, -1, :]
    return ids, prompt_mask, toks[:, :t_end], keep[:, :t_end]


def score(task: Task, items: list[Item], texts: list[str]) -> torch.Tensor:
    """Rewards [N] (float32) from the task's verifier, one per (item, response text)."""
    return torch.tensor([task.score(it, tx) for it, tx in zip(items, texts)], dtype=torch.float32)


@torch.no_grad()
def evaluate(model, tokenizer, task: Task, max_new_tokens: int, batch_size: int = 256,
             max_concurrent: int | None = None) -> tuple[float, int, float]:
    """Greedy accuracy on the task's fixed held-out set: ``(mean score in [0, 1], number of items, seconds)``."""
    t0 = time.perf_counter()
    items = task.eval_items
    total = 0.0
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        ro = generate(model, tokenizer, [render_prompt(it, tokenizer) for it in chunk], max_new_tokens, greedy=True,
                      max_concurrent=max_concurrent)
        total += float(score(task, chunk, ro.texts).sum())
    return total / max(len(items), 1), len(items), time.perf_counter() - t0
