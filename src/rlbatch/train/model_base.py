"""What every model preset builds on (:mod:`rlbatch.train.models`, :mod:`rlbatch.train.gpu_model`, the TRL
entry point): the cache directory, the character-level tokenizer of the ``arithmetic`` presets, supervised
(warm-start) batches, and atomic saves of a model directory."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from rlbatch.train.tasks import ARITH_CHARS


def cache_root() -> Path:
    """``$RLBATCH_CACHE`` or ``~/.cache/rlbatch``."""
    return Path(os.environ.get("RLBATCH_CACHE") or Path.home() / ".cache" / "rlbatch")


def char_tokenizer():
    """A character-level ``PreTrainedTokenizerFast`` over the ``arithmetic`` alphabet: ``<pad>`` (0), ``<eos>``
    (1), ``<unk>`` (2), then ``0-9 + =``. Padding side: left (for batched generation)."""
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in ARITH_CHARS:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
                                   padding_side="left")
    return fast


def sft_batch(items, tokenizer, device) -> tuple[Any, Any]:
    """``(input_ids, labels)`` [n, T] on ``device`` (None: torch's default) for supervised steps on ``items``: prompt + answer + EOS, right
    padded; labels -100 on the prompt and the padding (the loss is on the answer tokens and EOS only)."""
    ids, labels = [], []
    for it in items:
        p = tokenizer(it.prompt, add_special_tokens=False)["input_ids"]
        a = tokenizer(it.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        ids.append(p + a)
        labels.append([-100] * len(p) + a)
    n = max(len(x) for x in ids)
    x = torch.tensor([s + [tokenizer.pad_token_id] * (n - len(s)) for s in ids], device=device)
    y = torch.tensor([s + [-100] * (n - len(s)) for s in labels], device=device)
    return x, y


def save_pretrained_atomic(model, tok, target: Path) -> None:
    """Save ``model`` and ``tok`` (``save_pretrained``) as directory ``target`` atomically: into a temp directory
    beside it, then renamed into place; if another process finished ``target`` first, keep theirs."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if target.exists():  # another process finished first
            shutil.rmtree(tmp)
            return
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
