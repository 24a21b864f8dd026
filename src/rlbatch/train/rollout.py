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


def left_pad(seqs: list[list[int]], pad_id: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(seqs), n), dtype=torch.long, device=device)
    for i, s in enumerate(seqs):
        if s:
            ids[i, n - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, n - len(s):] = 1
    return ids, mask


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


def generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int, *, temperature: float = 1.0,
             greedy: bool = False, generator: torch.Generator | None = None) -> Rollout:
    """Generate one response per prompt (repeat a prompt G times for a group) with a KV cache.

    Sampling at ``temperature`` from the full distribution (no top-k/top-p), or argmax if ``greedy``. Stops at EOS
    or after ``max_new_tokens``, and as soon as every sequence has hit EOS (so the response is only as wide as its
    longest member). Runs under ``torch.inference_mode``; the LM head runs only on the last prompt position at
    prefill; the attention mask is allocated once. Returns a :class:`Rollout` on the model's device (ordinary
    tensors, usable in a later autograd forward).
    """
    with torch.inference_mode():
        ids, prompt_mask, resp, rmask = _generate(model, tokenizer, prompts, max_new_tokens, temperature, greedy,
                                                  generator)
    ids, prompt_mask, resp, rmask = (t.clone() for t in (ids, prompt_mask, resp, rmask))  # leave inference mode
    rows = [r[m.bool()].tolist() for r, m in zip(resp.cpu(), rmask.cpu())]
    texts = tokenizer.batch_decode(rows, skip_special_tokens=True)
    return Rollout(ids, prompt_mask, resp, rmask, texts)


def _generate(model, tokenizer, prompts, max_new_tokens, temperature, greedy, generator):
    device = next(model.parameters()).device
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    ids, prompt_mask = left_pad(prompts, pad, device)
    n, L = ids.shape
    mask = torch.ones((n, L + max_new_tokens), dtype=prompt_mask.dtype, device=device)
    mask[:, :L] = prompt_mask
    ckw = _cache_kw(model)
    pos = positions(prompt_mask)
    out = model(input_ids=ids, attention_mask=prompt_mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    past = _cache_of(out)
    logits = out.logits[:, -1, :]
    pos = pos[:, -1:]
    done = torch.zeros(n, dtype=torch.bool, device=device)
    toks = torch.full((n, max_new_tokens), pad, dtype=torch.long, device=device)
    keep = torch.zeros((n, max_new_tokens), dtype=torch.long, device=device)
    t_end = max_new_tokens
    for t in range(max_new_tokens):
        fault("gen")
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        nxt = nxt.masked_fill(done, pad)
        keep[:, t] = (~done).long()
        toks[:, t] = nxt
        done = done | (nxt == eos)
        if t == max_new_tokens - 1:
            break
        if bool(done.all()):
            t_end = t + 1
            break
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
def evaluate(model, tokenizer, task: Task, max_new_tokens: int, batch_size: int = 256) -> tuple[float, int, float]:
    """Greedy accuracy on the task's fixed held-out set: ``(mean score in [0, 1], number of items, seconds)``."""
    t0 = time.perf_counter()
    items = task.eval_items
    total = 0.0
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        ro = generate(model, tokenizer, [render_prompt(it, tokenizer) for it in chunk], max_new_tokens, greedy=True)
        total += float(score(task, chunk, ro.texts).sum())
    return total / max(len(items), 1), len(items), time.perf_counter() - t0
