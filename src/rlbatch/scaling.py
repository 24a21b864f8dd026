"""Learning-rate rules and batch ladders ("align": retune only Adam's learning rate when the batch changes).

The batch unit B is retained training responses per optimizer update (P prompts x G responses per prompt).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

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


#: plain-words name of each detected retuning (``LRRetuning.rule``), as ``rlbatch analyze`` states it
RETUNING_LABELS: dict[str, str] = {
    "sqrt": "square-root rule",
    "linear": "linear rule",
    "none": "fixed LR (not retuned)",
    "other": "not by a known rule",
}


@dataclass(frozen=True)
class LRRetuning:
    """How a set of runs set the learning rate across batch sizes (:func:`detect_lr_rule`).

    ``rule``: ``sqrt`` / ``linear`` / ``none`` (the :data:`RULES` whose lr(B) every run matches within
    ``tolerance``), ``other`` (lr varies with B but by no known rule), or None (cannot tell: fewer than two batch
    sizes with a known learning rate). ``label``: the plain-words name (:data:`RETUNING_LABELS`, or why it cannot
    be told). ``base_batch`` / ``base_lr``: B0 and lr0, the smallest batch and its learning rate. ``exponent``:
    the least-squares slope of log lr on log B (0 fixed, 0.5 square-root, 1 linear); ``deviation``: per rule, the
    largest relative difference |lr / lr_rule(B) - 1| over the runs; ``points``: the (B, lr) pairs, ascending;
    ``ambiguous``: more than one rule fits (batches too close together to tell them apart).
    """

    rule: str | None
    label: str
    base_batch: int | None = None
    base_lr: float | None = None
    exponent: float | None = None
    deviation: dict[str, float] = field(default_factory=dict)
    points: tuple[tuple[int, float], ...] = ()
    tolerance: float = 0.05
    ambiguous: bool = False

    def sentence(self) -> str:
        """One sentence for a recommendation: how the learning rate was set and what that means for rN
        (Li et al. 2026: "align" first; a fixed-LR ladder is the paper's control, where rN measures the missing LR
        retuning as much as the batch)."""
        if self.rule is None:
            return f"Learning-rate retuning across batch sizes: {self.label}."
        bs = sorted({b for b, _ in self.points})
        span = f"B={bs[0]} to B={bs[-1]}"
        expo = f"; fitted lr ∝ B^{self.exponent:.2f}" if self.exponent is not None else ""
        if self.rule == "none":
            return (f"Learning rate: fixed LR (not retuned) — {self.base_lr:.3g} at every batch ({span}). This is the "
                    "paper's control case: its rN measures the missing LR rule, not the batch; rerun the larger "
                    f"batches with lr = {self.base_lr:.3g} x sqrt(B / {self.base_batch}) (`rlbatch sweep --rule "
                    "sqrt`) before concluding that they need more samples.")
        if self.rule == "sqrt":
            return (f"Learning rate: retuned by the square-root rule (lr = {self.base_lr:.3g} x sqrt(B / "
                    f"{self.base_batch}) over {span}{expo}), the paper's alignment: rN measures the batch.")
        if self.rule == "linear":
            return (f"Learning rate: retuned by the linear rule (lr = {self.base_lr:.3g} x B / {self.base_batch} over "
                    f"{span}{expo}); the paper aligns Adam with the square-root rule, so rN here measures the "
                    "linear rule's larger steps as well as the batch.")
        pts = ", ".join(f"B={b}: {lr:.3g}" for b, lr in self.points)
        return (f"Learning rate: changed with the batch but not by a known rule ({pts}{expo}); rN mixes the batch "
                "with the learning-rate choice.")


def detect_lr_rule(points: Sequence[tuple[float | None, float | None]], tolerance: float = 0.05) -> LRRetuning:
    """Which learning-rate rule, if any, a set of runs followed across batch sizes.

    ``points``: (B, lr) per run or configuration, B in responses per optimizer update (the batch of the rule,
    DESIGN.md: the mini-batch when a rollout is split into several updates), lr the peak learning rate; pairs with
    a missing or non-positive value are ignored, duplicates (seeds) merged. B0 and lr0 are the smallest batch and
    its learning rate; a rule fits when every run's lr is within ``tolerance`` (relative) of
    :func:`scaled_lr` (B, B0, lr0, rule): ``none`` lr = lr0 (the paper's fixed-LR control), ``sqrt``
    lr0 * sqrt(B / B0) (Malladi et al. 2022; the paper's rule), ``linear`` lr0 * B / B0 (Goyal et al. 2017).
    Of several fitting rules the one with the smallest deviation wins (``ambiguous`` set). Two learning rates at
    one batch size, or none fitting, give ``other``; fewer than two batch sizes give ``rule=None``.
    """
    pts: set[tuple[int, float]] = set()
    for b, lr in points:
        if b is None or lr is None:
            continue
        b, lr = float(b), float(lr)
        if math.isfinite(b) and math.isfinite(lr) and b > 0 and lr > 0:
            pts.add((int(round(b)), lr))
    uniq: list[tuple[int, float]] = []
    for b, lr in sorted(pts):  # seeds of one configuration: one point per (B, lr within tolerance)
        if not uniq or uniq[-1][0] != b or abs(lr / uniq[-1][1] - 1) > tolerance:
            uniq.append((b, lr))
    batches = sorted({b for b, _ in uniq})
    if len(batches) < 2:
        why = ("no learning rate known" if not uniq else f"one batch size only (B={batches[0]})")
        return LRRetuning(None, f"cannot tell ({why})", points=tuple(uniq), tolerance=tolerance)
    b0 = batches[0]
    lrs0 = [lr for b, lr in uniq if b == b0]
    lr0 = lrs0[0]
    xs = [math.log(b / b0) for b, _ in uniq]
    ys = [math.log(lr / lr0) for _, lr in uniq]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    expo = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else None
    dev = {rule: max(abs(lr / scaled_lr(b, b0, lr0, rule) - 1) for b, lr in uniq) for rule in RULES}
    fits = sorted((d, r) for r, d in dev.items() if d <= tolerance)
    if len({b for b, _ in uniq}) < len(uniq) or not fits:  # several lrs at one batch: an LR sweep, no rule
        rule, amb = "other", False
    else:
        rule, amb = fits[0][1], len(fits) > 1
    return LRRetuning(rule, RETUNING_LABELS[rule], b0, lr0, expo, dev, tuple(uniq), tolerance, amb)
