"""Asynchronous vs synchronous rollouts on the tiny preset: retained samples per wall-clock second, same work
(same steps, B, model, task, seed), measured side by side in one process with the configurations interleaved
(sync, K=1, sync, K=2, sync, K=1 + partial, sync, ...): each asynchronous run is compared with the mean of the
synchronous runs just before and after it, so machine load that drifts over minutes hits each pair alike.

    .venv/bin/python benchmarks/async_vs_sync.py                 # B = 64 (P 8 x G 8), 12 steps, 3 rounds
    .venv/bin/python benchmarks/async_vs_sync.py --steps 20 --rounds 5 --batch 64
    .venv/bin/python benchmarks/async_vs_sync.py --model gpu-small --device cuda --precision bf16 --batch 1024 \
        --micro-batch-size 2048 --configs k1 --json async.json      # on one GPU (benchmarks/gpu_study.sh)

On a GPU the generation process shares the GPU with the trainer (its weights arrive through CUDA IPC), so the
overlap is of two processes' kernels on one device, not of two CPU cores.

Prints one line per configuration and ``async_speedup=X.XX`` (K = 1 against the synchronous loop with one torch
thread: the generation process adds a second thread on the second core, which is the point of the overlap) plus
``async_speedup_k2=``, ``async_speedup_partial=`` and, with ``--with-sync2``, ``async_speedup_vs_sync2=`` (the
synchronous loop given both cores as two torch threads, against its neighbouring one-thread runs). Throughput excludes step 1 (the pipeline's warm-up) and evaluation;
the generation process's start-up (spawn, imports) is set-up, like loading the model, and not counted. Ratios are
medians over rounds of the per-round ratio; the spread is printed beside them. The load average is printed
because other processes on the machine distort the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path


def run_once(name: str, opts: dict, args, model_tok, task, tmp: Path, rnd: int, tag: str = "") -> tuple[float, float]:
    import copy

    from rlbatch.scaling import scaled_lr
    from rlbatch.train.config import make_config
    from rlbatch.train.trainer import train

    cfg = make_config(model=args.model, task="arithmetic", prompts_per_step=args.batch // args.group,
                      group_size=args.group, lr=scaled_lr(args.batch, args.base_batch, args.base_lr, "sqrt"),
                      samples=10**9, max_steps=args.steps, seed=rnd, max_new_tokens=args.max_new_tokens,
                      eval_every=args.eval_every, eval_size=64, checkpoint_every=10**6, device=args.device,
                      precision=args.precision, micro_batch_size=args.micro_batch_size, **opts)
    out = train(cfg, tmp / f"{name}-{rnd}{tag}", model_tok=(copy.deepcopy(model_tok[0]), model_tok[1]), task=task)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    first, rows = rows[0], rows[1:]  # step 1: pipeline warm-up
    retained = sum(r["batch/retained"] for r in rows)
    # the fair clock: time/wall_s, which charges the generator's busy seconds during evaluations (issue 44); the old
    # one: the steps' own seconds, where generation during an evaluation was free
    fair = rows[-1]["time/wall_s"] - first["time/wall_s"]
    old = sum(r["time/step_s"] for r in rows)
    return retained / fair, retained / old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64, help="B = P x G responses per step")
    ap.add_argument("--group", type=int, default=8, help="G responses per prompt")
    ap.add_argument("--steps", type=int, default=12, help="optimizer steps per run (same work for every config)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of every configuration")
    ap.add_argument("--max-new-tokens", type=int, default=5, help="response cap (the tiny preset's answers: 3-4)")
    ap.add_argument("--partial-tokens", type=int, default=2, help="T of the partial-rollout configuration")
    ap.add_argument("--with-sync2", action="store_true", help="also the synchronous loop with two torch threads")
    ap.add_argument("--model", default="tiny", help="model preset (tiny, gpu-small, gpu-small-toy) or directory")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="the trainer's precision")
    ap.add_argument("--micro-batch-size", type=int, default=None, help="responses per micro-batch (a cap)")
    ap.add_argument("--configs", default="k1,k2,partial",
                    help="asynchronous configurations to compare with the synchronous loop: k1, k2, partial")
    ap.add_argument("--json", default=None, help="also write the throughputs and ratios here (JSON)")
    ap.add_argument("--eval-every", type=int, default=10**9,
                    help="retained samples between evaluations (default: none). With evaluations on, the asynchronous "
                         "generator keeps decoding while the trainer evaluates: the fair clock charges that time, the "
                         "old clock did not; both speed-ups are printed")
    args = ap.parse_args()
    from rlbatch.study.demo import DEMOS

    # the lr of the model's demo study at this B under the sqrt rule (tiny: lr0 1e-4 at B0 16)
    base = DEMOS.get(args.model, DEMOS["tiny"])
    args.base_batch, args.base_lr = base["base_batch"], base["base_lr"]

    import torch

    from rlbatch.train.models import load_model
    from rlbatch.train.tasks import get_task

    model_tok = load_model(args.model, args.device)
    task = get_task("arithmetic", seed=0, eval_size=64)
    known = {"k1": {"async_rollouts": 1}, "k2": {"async_rollouts": 2},
             "partial": {"async_rollouts": 1, "partial_rollout_tokens": args.partial_tokens}}
    names = [c for c in args.configs.split(",") if c]
    if not names or any(c not in known for c in names):
        ap.error(f"--configs: choose among {', '.join(known)}")
    configs = {c: known[c] for c in names}
    if args.with_sync2:
        configs["sync2"] = {"threads": 2}
    # every configuration runs between two synchronous runs and is compared with their mean: load that drifts
    # over the minutes of the benchmark hits each pair alike
    res: dict[str, list[float]] = {k: [] for k in ["sync", *configs]}
    ratios: dict[str, list[float]] = {k: [] for k in configs}
    old_ratios: dict[str, list[float]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory() as d:
        for rnd in range(args.rounds):
            prev, prev_old = run_once("sync", {"threads": 1}, args, model_tok, task, Path(d), rnd, "a")
            res["sync"].append(prev)
            for name, opts in configs.items():
                x, x_old = run_once(name, {"threads": 1, **opts}, args, model_tok, task, Path(d), rnd)
                torch.set_num_threads(1)
                nxt, nxt_old = run_once("sync", {"threads": 1}, args, model_tok, task, Path(d), rnd, name)
                res[name].append(x)
                res["sync"].append(nxt)
                ratios[name].append(x / ((prev + nxt) / 2))
                old_ratios[name].append(x_old / ((prev_old + nxt_old) / 2))
                prev, prev_old = nxt, nxt_old
            print(f"round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in res.items()), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; B={args.batch}, {args.steps} steps, "
          f"{args.rounds} rounds; retained samples per wall second (median): "
          + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in res.items()))

    def ratio(a: str) -> tuple[float, float, float]:
        rs = ratios[a]
        return statistics.median(rs), min(rs), max(rs)

    summary = {"model": args.model, "device": args.device, "precision": args.precision, "batch": args.batch,
               "group": args.group, "steps": args.steps, "rounds": args.rounds, "eval_every": args.eval_every,
               "throughput_median": {k: statistics.median(v) for k, v in res.items()}, "throughput": res,
               "ratios": ratios, "ratios_old_clock": old_ratios}
    evals = args.eval_every < 10**9
    for label, a in (("async_speedup", "k1"), ("async_speedup_k2", "k2"), ("async_speedup_partial", "partial"),
                     ("async_speedup_vs_sync2", "sync2")):
        if a in ratios:
            med, lo, hi = ratio(a)
            old = old_ratios[a]
            print(f"{label}={med:.2f}  (rounds: {lo:.2f}-{hi:.2f})"
                  + (f"; on the old clock (generation during evaluation free): {statistics.median(old):.2f} "
                     f"({min(old):.2f}-{max(old):.2f})" if evals else ""))
            summary[label] = {"median": med, "min": lo, "max": hi, "old_clock_median": statistics.median(old)}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
