"""``rlbatch demo``: a real batch-size study end to end — a sweep under the square-root LR rule plus a fixed-LR
control, several seeds, then the report (accounting, curves, grad norm vs B, time split, recommendation).

Presets: ``tiny`` (the default; minutes on 2 CPU cores) and ``smollm2-135m`` (the real pretrained model on
reasoning-gym ``chain_sum``; meant for a GPU, very slow on CPU).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError

#: The demo studies. ``lr0`` for tiny was chosen by a small scan at B0=16 (1e-4 learns fastest; 4e-4 degrades,
#: 1e-3 collapses the policy). Grad clipping at 1.0 is on (norms are ~2-5, so it clips most steps; with Adam this
#: rescales the gradient and barely changes the update).
#:
#: The tiny ladder reaches past the critical batch: B = 16 ... 4096 on the square-root rule. An exploratory sweep
#: (2 seeds, 2026-12-01) gave rN 1.37 / 1.72 / 1.55 / 1.97 at B = 128 / 256 / 512 / 1024 against B = 16 while the
#: throughput gain on 2 CPU cores levels off at ~1.7-1.9x from B = 128 on, so the family ends early and only a batch
#: whose rN clearly exceeds ~1.9 is slower beyond noise: B = 2048. Issue 16's faster update (prompt sharing) raised
#: the throughput gain of the large batches to ~2.4x, and B = 2048 (rN 2.82) became within noise (1.16, 0.88-1.54),
#: so the ladder now goes to B = 4096 (rN ~4 predicted). Every trial has the same retained-sample budget
#: (65,536, room for rN ~ 6.8 at B0's ~9.6k samples-to-target) and stops at its first evaluation at or above the
#: target (``stop_at_target``, hold 1): samples-to-target is that first crossing either way, and the small batches,
#: the expensive ones per sample, no longer run past it. 512 held-out items per evaluation (binomial sd ~0.02
#: near the target, below the spread across seeds) halve the evaluation cost of the large batches, which evaluate
#: every step or two.
DEMOS: dict[str, dict[str, Any]] = {
    "tiny": dict(model="tiny", task="arithmetic", base_batch=16, base_lr=1e-4,
                 batches=[16, 32, 64, 128, 256, 512, 1024, 2048, 4096], rule="sqrt", fixed_lr_control=128,
                 group_sizes=[8], seeds=3, samples=65536, target=0.45,
                 options=dict(eval_every=1024, eval_size=512, eval_batch_size=512, max_new_tokens=5,
                              micro_batch_size=8, max_grad_norm=1.0, checkpoint_every=50, stop_at_target=0.45,
                              stop_hold=1)),
    # Not yet run end to end (no GPU was available when it was written): lr0 and the target are first guesses.
    "smollm2-135m": dict(model="smollm2-135m", task="chain_sum", base_batch=32, base_lr=5e-6,
                         batches=[32, 64, 128, 256], rule="sqrt", fixed_lr_control=64, group_sizes=[8], seeds=1,
                         samples=16384, target=0.3,
                         options=dict(eval_every=1024, eval_size=128, eval_batch_size=64, max_new_tokens=64,
                                      micro_batch_size=8, max_grad_norm=1.0, checkpoint_every=5)),
}

#: PPO studies (``rlbatch demo --algo ppo``): key ``<preset>-ppo``. A P ladder with G = 1 (B = P responses per
#: update), a value model copied from the policy, GAE with gamma = lambda = 1, the sqrt rule applied to the actor
#: (base_lr) and to the critic (options.critic_base_lr) from the same B0. lr0 = 1e-4 from a scan at B0 = 16
#: (1e-4: 0.283 -> 0.41 in 6144 samples; 3e-4 dropped to 0.12 before recovering to 0.28); critic lr0 = 1e-3.
PPO_DEMOS: dict[str, dict[str, Any]] = {
    "tiny": dict(model="tiny", task="arithmetic", base_batch=16, base_lr=1e-4, batches=[16, 32, 64, 128],
                 rule="sqrt", fixed_lr_control=128, group_sizes=[1], seeds=2, samples=12288, target=0.42,
                 options=dict(algo="ppo", critic_base_lr=1e-3, gamma=1.0, lam=1.0, value_clip=0.2,
                              eval_every=1024, eval_size=1024, eval_batch_size=512, max_new_tokens=5,
                              micro_batch_size=8, max_grad_norm=1.0, checkpoint_every=50)),
}


def run_demo(out: Path | str = "runs/demo", *, preset: str = "tiny", seeds: int | None = None,
             samples: int | None = None, workers: int | None = None, device: str = "cpu",
             progress: bool = True, algo: str = "grpo", backend: str = "local", seed_offset: int = 0) -> dict:
    """Run the demo study of ``preset`` into ``out`` (resumable: finished trials are skipped) and write the report.
    ``backend``: ``local`` (our trainer) or ``trl`` (each trial with TRL's GRPOTrainer, GRPO only).
    ``seed_offset``: the seed set (seeds ``seed_offset`` .. ``seed_offset + seeds - 1``; another offset, another
    independent repetition of the whole study).
    Returns the report's JSON object plus ``demo_seconds``. Raises :class:`UserError` for an unknown preset or
    backend."""
    from rlbatch.sweep.local import plan_trials, run_sweep
    from rlbatch.sweep.study import report_sweep

    if backend not in ("local", "trl") or (backend == "trl" and algo != "grpo"):
        raise UserError(f"demo --backend must be local, or trl with --algo grpo; got {backend!r} / {algo!r}",
                        field="backend")
    table = PPO_DEMOS if algo == "ppo" else DEMOS
    if algo not in ("grpo", "ppo"):
        raise UserError(f"--algo must be grpo or ppo, got {algo!r}", field="algo")
    if preset not in table:
        raise UserError(f"unknown {algo} demo preset {preset!r}; choose one of {', '.join(table)}",
                        field="preset")
    d = dict(table[preset])
    if seeds is not None:
        d["seeds"] = seeds
    if samples is not None:
        d["samples"] = samples
    opts = dict(d["options"], device=device)
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    t0 = time.perf_counter()
    specs = plan_trials(base_batch=d["base_batch"], base_lr=d["base_lr"], batches=d["batches"], rule=d["rule"],
                        group_sizes=d["group_sizes"], seeds=d["seeds"], fixed_lr_control=d["fixed_lr_control"],
                        samples=d["samples"], model=d["model"], task=d["task"], options=opts,
                        seed_offset=seed_offset)
    settings = {k: v for k, v in d.items() if k != "options"} | {"options": opts, "preset": preset,
                                                                 "workers": workers, "algo": algo,
                                                                 "seed_offset": seed_offset}
    run_sweep(specs, out, workers=workers, threads=1, settings=settings | {"backend": backend}, progress=progress,
              runner=backend)
    rep = report_sweep(out, target=d["target"], title=f"rlbatch demo: {algo.upper()} batch-size study ({preset} preset, "
                       f"{d['task']}, sqrt LR rule + fixed-LR control, {d['seeds']} seed(s)"
                       + (f" from seed {seed_offset}" if seed_offset else "") + ")")
    rep["demo_seconds"] = time.perf_counter() - t0
    rep["demo_cost"] = demo_cost(out)
    return rep


def demo_cost(out: Path | str) -> dict[str, float]:
    """What the study cost, summed over its trials (``out/trials/*``): ``train_cpu_s`` (the trainer's process CPU
    seconds over its steps, ``time/cpu_s``), ``eval_s`` (evaluation seconds, ``time/eval_s``) and ``trials``. On a
    shared machine the wall-clock of the demo stretches with the load; these sums do not (CPU time) or much less."""
    import json

    cpu = ev = 0.0
    n = 0
    for d in sorted(Path(out, "trials").glob("*")):
        m, e = d / "metrics.jsonl", d / "eval.jsonl"
        if not m.is_file():
            continue
        n += 1
        for path, key in ((m, "time/cpu_s"), (e, "time/eval_s")):
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    v = json.loads(line).get(key)
                except json.JSONDecodeError:
                    continue  # a truncated last line
                if isinstance(v, (int, float)):
                    if key == "time/cpu_s":
                        cpu += v
                    else:
                        ev += v
    return {"trials": n, "train_cpu_s": cpu, "eval_s": ev}
