"""``rlbatch train --batch auto``: the online batch controller inside the trainer (issue 55).

The controller (:class:`rlbatch.study.auto_batch.Controller`: probes at the neighbouring batch sizes, then a decision
every ``auto_window`` steps from the window's noise scale and the time model of every step so far, moving to the
batch of highest predicted goodput when it gains more than 5% also at the end of B_noise's interval) chooses the
batch of each step. The trainer applies it:

- **P changes, G stays**: the batch is P x G responses; the candidates are P0 x 2^k x G (P0 the start) between
  ``batch_min`` (default 2 G: the noise statistics need two prompts) and ``batch_max`` (default 64 x the start),
  every one a multiple of the micro-batch. Generation runs in chunks of the fitted ``max_concurrent_sequences`` and
  the update in micro-batches, so a larger batch needs more time, not more memory.
- **The learning rate follows the square-root rule** (Li et al. 2026): lr(B) = lr0 x sqrt(B / B0) with the run's
  base (``--base-batch`` / ``--base-lr``) when given, else the start batch and its learning rate.
- **Noise scale**: the actor's two-batch statistics of each step (``noise/grad_sq_small``, ``noise/grad_sq_big``,
  ``noise/b_small``, ``noise/b_big``, in retained responses), converted to generated responses by the window's
  retained share. PPO: the actor's as well (the policy's progress sets time-to-target; the critic's noise scale is
  logged, ``noise/critic_b_simple``, and not used). A step whose statistics are not finite (one group retained) is
  timed but not used for B_noise.
- **Record**: every decision, with its evidence (B_noise and its interval, the time model, the predicted relative
  time of each candidate), one line of ``controller.jsonl`` in the run directory; each step's batch and learning
  rate are in ``metrics.jsonl`` (``batch/generated``, ``lr``). The controller's state is in the checkpoint, so a
  killed run resumes with it (the lines of ``controller.jsonl`` past the checkpoint are dropped, as the metrics').

Synchronous rollouts only: an asynchronous generator decodes the next batches ahead, at the old size.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.runstore import JsonlWriter, finite_record, truncate_lines
from rlbatch.scaling import scaled_lr
from rlbatch.study.auto_batch import Controller, choice_json

#: the run directory's record of the controller's decisions
CONTROLLER_JSONL = "controller.jsonl"
#: the checkpoint's key for the controller's state
CKPT_KEY = "auto_batch"


def check(cfg: Any) -> None:
    """Refuse settings ``--batch auto`` cannot honour (one line, the field named)."""
    if cfg.batch != "auto":
        return
    if cfg.async_rollouts or cfg.partial_rollout_tokens:
        raise UserError("--batch auto needs synchronous rollouts: an asynchronous generator decodes ahead at the "
                        "old batch size", field="batch")
    if cfg.mini_batch_size is not None:
        raise UserError("--batch auto makes one update per rollout batch: leave --mini-batch-size out", field="batch")
    lo, hi = bounds(cfg)
    if not lo <= cfg.batch_size <= hi:
        raise UserError(f"--batch auto: the start batch P x G = {cfg.batch_size} lies outside --batch-min "
                        f"{lo} .. --batch-max {hi}", field="batch_min")
    if len(candidates(cfg)) < 2:
        raise UserError(f"--batch auto: only one batch size fits between {lo} and {hi}: nothing to choose",
                        field="batch_max")


def bounds(cfg: Any) -> tuple[int, int]:
    return (cfg.batch_min or 2 * cfg.group_size), (cfg.batch_max or 64 * cfg.batch_size)


def candidates(cfg: Any) -> list[int]:
    """P0 x 2^k x G within the bounds (responses), P0 the start's prompts per step; each a multiple of the
    micro-batch when one is set."""
    lo, hi = bounds(cfg)
    p0, g = cfg.prompts_per_step, cfg.group_size
    ps = {p0}
    p = p0
    while p % 2 == 0 and p // 2 * g >= lo:
        p //= 2
        ps.add(p)
    p = p0
    while 2 * p * g <= hi:
        p *= 2
        ps.add(p)
    micro = cfg.micro_batch_size
    return sorted(q * g for q in ps if lo <= q * g <= hi and q >= 2 and (micro is None or (q * g) % micro == 0))


def controller_summary(run_dir: Path, metrics: Any = None) -> dict[str, Any] | None:
    """What ``rlbatch inspect`` says of a ``--batch auto`` run: its decisions (DIR/:data:`CONTROLLER_JSONL`), how
    many moved, the batch over the run as spans of steps (from ``metrics``' ``batch/generated``, the batch each step
    trained at) and the last B_noise with its interval; None for a run without a controller record."""
    import json

    path = Path(run_dir) / CONTROLLER_JSONL
    if not path.exists():
        return None
    dec = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    spans: list[list[int]] = []  # [batch, first step, last step]
    if metrics is not None and "batch/generated" in getattr(metrics, "columns", ()):
        for s, b in zip(metrics["step"].astype(int), metrics["batch/generated"].astype(int)):
            if spans and spans[-1][0] == b and spans[-1][2] == s - 1:
                spans[-1][2] = s
            else:
                spans.append([b, s, s])
    last = dec[-1] if dec else None
    return {"decisions": len(dec), "moves": sum(bool(d.get("moved")) for d in dec), "spans": spans,
            "last_b_noise": last.get("b_noise") if last else None,
            "last_b_noise_ci": last.get("b_noise_ci") if last else None, "file": str(path)}


class AutoBatch:
    """The trainer's side of ``--batch auto``: :meth:`before_step` sets the step's P, learning rate and
    micro-batch; :meth:`after_step` gives the controller the step's row and records a decision."""

    def __init__(self, cfg: Any, learner: Any, out: Path, state: dict[str, Any] | None, decisions_kept: int = 0):
        self.cfg, self.learner, self.out = cfg, learner, out
        self.b0, self.lr0 = ((cfg.base_batch, cfg.base_lr) if cfg.base_batch and cfg.base_lr
                             else (cfg.update_batch, learner.lr))
        self.controller = (Controller.from_state(state) if state else
                           Controller(cfg.batch_size, candidates(cfg), window=cfg.auto_window, seed=cfg.seed))
        truncate_lines(out / CONTROLLER_JSONL, len(self.controller.decisions))
        self.writer = JsonlWriter(out / CONTROLLER_JSONL)
        self.batch = cfg.batch_size
        self.retained: list[float] = []

    def lr_at(self, batch: int) -> float:
        return scaled_lr(batch, self.b0, self.lr0, "sqrt")

    def before_step(self) -> None:
        b = self.controller.next_batch()
        self.batch = b
        self.cfg.prompts_per_step = b // self.cfg.group_size
        self.learner.lr = self.lr_at(b)
        if self.cfg.micro_batch_size is None:
            self.learner.micro = self.cfg.resolved_micro()

    def after_step(self, line: dict[str, Any]) -> dict[str, Any] | None:
        """Observe the step's metrics ``line``; returns the decision's record when one was made."""
        gen = float(line.get("batch/generated") or self.batch)
        ret = float(line.get("batch/retained") or 0.0)
        share = ret / gen if gen > 0 else 1.0
        keys = ("noise/grad_sq_small", "noise/grad_sq_big", "noise/b_small", "noise/b_big")
        vals = [line.get(k) for k in keys]
        ok = all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals) and share > 0 \
            and vals[2] < vals[3]
        row = {"step_s": float(line["time/step_s"])}
        if ok:  # in generated responses: B_noise (retained) over the step's retained share
            row.update(g_small_sq=float(vals[0]), g_big_sq=float(vals[1]), b_small=float(vals[2]) / share,
                       b_big=float(vals[3]) / share)
        choice = self.controller.observe(self.batch, row)
        if choice is None:
            return None
        # strict JSON: a B_noise not bounded above is null
        rec = finite_record({**choice_json(choice), "lr": self.lr_at(choice.batch),
                             "unit": "generated responses (P x G)"})
        self.writer.append(rec)
        return rec

    def state(self) -> dict[str, Any]:
        return {CKPT_KEY: self.controller.to_state()}

    def close(self) -> None:
        self.writer.close()


__all__ = ["CKPT_KEY", "CONTROLLER_JSONL", "AutoBatch", "bounds", "candidates", "check"]
