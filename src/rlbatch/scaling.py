"""Learning-rate rules and batch ladders ("align": retune only Adam's learning rate when the batch changes).

The batch unit B is retained training responses per optimizer update (P prompts x G responses per prompt).
"""

from __future__ import annotations

import math
from typing import Iterable

from rlbatch.errors import UserError

RULES: dict[str, str] = {
    "sqrt": "lr(B) = lr0 * sqrt(B / B0)  (Malladi et al. 2022, square-root scaling for Adam; used by the paper)",
    "linear": "lr(B) = lr0 * B / B0  (Goyal et al. 2017, linear scaling for SGD)",
    "none": "lr(B) = lr0  (fixed learning rate: the paper's control)",
}


def scaled_lr(batch_size: float, base_batch: float, base_lr: float, rule: str = "sqrt") -> float:
    """Learning rate for ``batch_size`` given the base point (``base_batch`` = B0, ``base_lr`` = lr0).

    Rules: ``sqrt`` lr0*sqrt(B/B0) (Malladi et al. 2022, Adam; the paper's eq. for eta(B)), ``linear`` lr0*B/B0
    (Goyal et al. 2017, SGD), ``none`` lr0. Units: B and B0 in responses per update; lr in the optimizer's units.

    Raises :class:`UserError` for an unknown rule or non-positive inputs.
    """
    if rule not in RULES:
        raise UserError(f"unknown learning-rate rule {rule!r}; choose one of {', '.join(RULES)}", field="rule")
    for name, value in (("batch_size", batch_size), ("base_batch", base_batch), ("base_lr", base_lr)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UserError(f"{name} must be a positive number, got {value!r}", field=name)
    ratio = batch_size / base_batch
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    if rule == "linear":
        return base_lr * ratio
    return base_lr


def batch_ladder(base_batch: int, doublings: int = 4, factor: int = 2) -> list[int]:
    """A geometric batch ladder ``[B0, B0*f, B0*f^2, ...]`` with ``doublings`` steps above B0 (default f=2)."""
    if base_batch < 1 or doublings < 0 or factor < 2:
        raise UserError("batch ladder needs base_batch >= 1, doublings >= 0, factor >= 2")
    return [base_batch * factor**k for k in range(doublings + 1)]


def lr_table(base_batch: int, base_lr: float, batches: Iterable[int], rule: str = "sqrt") -> list[dict]:
    """One row per batch: ``batch_size``, ``lr``, ``batch_ratio`` (B/B0), ``lr_ratio`` (lr/lr0), ``rule``."""
    rows = []
    for b in batches:
        lr = scaled_lr(b, base_batch, base_lr, rule)
        rows.append({"batch_size": int(b), "lr": lr, "batch_ratio": b / base_batch, "lr_ratio": lr / base_lr,
                     "rule": rule})
    return rows


def parse_int_list(text: str, name: str = "batches") -> list[int]:
    """Parse ``"2048,8192,16384"`` into ints (each >= 1). Raises :class:`UserError` naming the option."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise UserError(f"--{name}: {part!r} is not an integer") from None
        if value < 1:
            raise UserError(f"--{name}: {value} must be >= 1")
        out.append(value)
    if not out:
        raise UserError(f"--{name}: give at least one value, e.g. 256,512,1024")
    return out
