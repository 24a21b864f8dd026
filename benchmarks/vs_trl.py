"""Our GRPO trainer against TRL's ``GRPOTrainer``, side by side on this machine: retained samples per second, the
share of step time in generation (+ scoring) and in the update, and the reward curves on the sample axis.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vs_trl.py [--preset tiny|smollm2-135m] [--batches 16,64,256]
        [--samples 4096 | --steps N] [--threads 1] [--json OUT.json] [--ours-only]

Both trainers run in fresh subprocesses, one after the other (never concurrently), pinned to the same thread count
(``torch.set_num_threads`` and ``OMP_NUM_THREADS``), on the same model (the preset), task (``arithmetic``: plain
prompts, no chat template, the same scorer), prompts in the same order (step s draws its P prompts with
``numpy.random.default_rng([seed, s])`` in both), P, G, new-token cap, fp32, AdamW at the same constant LR
(``sqrt`` rule from the demo's base), clip 0.2, grad-norm clip 1.0, no KL (``beta=0``: no reference model).

TRL at its fastest on this CPU (trl 1.16.0): ``bf16=False, gradient_checkpointing=False`` (its defaults are 4-9x
slower here), ``loss_type="dapo"`` (token-level mean, as ours), ``per_device_train_batch_size`` = our micro-batch and
``gradient_accumulation_steps`` = B / micro, so one generation batch of B = one optimizer update. TRL's own
``step_time`` leaves out the optimizer step and it reports generation time only to W&B/MLflow, so it is timed from
outside: a callback's wall clock from ``on_step_begin`` to ``on_step_end`` (includes generation, loss, backward,
optimizer step) and a wrapper around ``_generate_and_score_completions`` (generation + scoring).
Ours: the trainer's own ``time/step_s`` (generation + scoring + update; evaluation and checkpoints excluded) and
``time/gen_s + time/reward_s``. The first step of each run is a warm-up and is left out of the rates.

Equal work (the headline): our trainer with group filtering OFF (``filter_groups=False``) trains every one of the
B responses, as TRL does (zero advantage for groups whose rewards are all equal), and without the within-prompt
noise split (``noise_split_groups=0``: the extra half-group backward our trainer runs by default, for a diagnostic
TRL does not compute; the per-micro-batch gradient norms of ``noise/b_simple`` stay), with the same loss: clipped
surrogate, token-level mean over all B responses' tokens (TRL's ``dapo`` normalisation), same micro-batch. Both do
one rollout of B and one optimizer update per step, so the ratio of generated (= trained) samples per second is the
ratio of step times: ``ratio_vs_trl_equal_work=X.XX B=N`` for each B, and ``ratio_vs_trl_equal_work_min=X.XX``
(the bar is the minimum), with the ratio of each back-to-back repeat pair as its uncertainty
(``ratio_vs_trl_equal_work_paired``: median and range). Our update packs each group's responses after one copy of
its prompt (``share_prompts``, a block attention mask: the same loss and gradient up to float rounding, fewer FLOPs,
as generation prefills each prompt once); TRL runs one padded row per response. The ratio without that packing is
printed separately: ``ratio_vs_trl_no_prompt_sharing=X.XX B=N``. Separately, ours with the noise split on (our default diagnostics, more work than TRL):
``ratio_vs_trl_with_noise_split=X.XX B=N``; and ours with filtering ON (our default: drops all-equal groups before the
update, so it trains fewer responses): ``ratio_vs_trl_filtering_on=X.XX B=N`` (generated samples/s, TRL with its
own default of training every response). Retained samples (responses in groups whose rewards are not all equal)
are counted the same way for both and reported as rates.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv[:-1] else str(ROOT / "src")
sys.path.insert(0, _SRC)

PRESETS = {
    # model, default batches, main batch, G, new-token cap, base batch and LR of the sqrt rule (as the demo), samples
    "tiny": dict(batches=[16, 64, 256], main=64, G=8, new_tokens=8, base_batch=16, base_lr=1e-4, samples=4096,
                 reward="exact"),
    "smollm2-135m": dict(batches=[16], main=16, G=8, new_tokens=16, base_batch=32, base_lr=5e-6, samples=64,
                         reward="partial"),
}


# --------------------------------------------------------------------------------------------------- workers
def _setup(threads: int):
    import torch

    torch.set_num_threads(threads)
    return torch


def _summary(steps: list[dict], wall: float) -> dict:
    """Rates over the steps after the first (warm-up)."""
    s = steps[1:] if len(steps) > 1 else steps
    t = sum(x["step_s"] for x in s)
    return {"steps": len(steps), "wall_s": wall,
            "step_s": t / len(s), "gen_share": sum(x["gen_s"] for x in s) / t,
            "update_share": sum(x["update_s"] for x in s) / t,
            "retained_per_s": sum(x["retained"] for x in s) / t,
            "generated_per_s": sum(x["generated"] for x in s) / t,
            "steps_detail": steps}


def bench_task(a):
    """The ``arithmetic`` task; with ``--reward partial`` its exact-match scorer plus 0.25 when the response starts
    with a digit (SmolLM2 never gets the reversed sums exactly in a few steps: with all rewards 0 every group is
    filtered, ours skips every update and the comparison would measure generation only)."""
    from rlbatch.train.tasks import Task, get_task

    task = get_task("arithmetic", seed=0, eval_size=32)
    if a.reward == "exact":
        return task

    def partial(item, completion: str) -> float:
        exact = task.score(item, completion)
        return exact if exact > 0 else 0.25 * float(completion.strip()[:1].isdigit())

    return Task(task.name, train=task.train, eval_items=task.eval_items, scorer=partial)


def worker_ours(a, filter_groups: bool = True, noise_split: bool = True, share_prompts: bool = True) -> dict:
    torch = _setup(a.threads)
    from rlbatch.train.models import load_model
    from rlbatch.train.config import make_config
    from rlbatch.train.trainer import train

    P = a.batch // a.G
    mt = load_model(a.preset)
    task = bench_task(a)
    cfg = make_config(model=a.preset, task="arithmetic", prompts_per_step=P, group_size=a.G, lr=a.lr,
                      samples=10**9, max_steps=a.steps, max_new_tokens=a.new_tokens, temperature=1.0,
                      clip_eps=0.2, kl_coef=0.0, max_grad_norm=1.0, eval_every=10**9, eval_size=32,
                      checkpoint_every=10**6, seed=a.seed, threads=a.threads, micro_batch_size=a.micro,
                      filter_groups=filter_groups, noise_split_groups=1 if noise_split else 0,
                      share_prompts=share_prompts)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        train(cfg, Path(d) / "run", model_tok=mt, task=task)
        wall = time.perf_counter() - t0
        lines = [json.loads(x) for x in (Path(d) / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [{"step_s": m["time/step_s"], "gen_s": m["time/gen_s"] + m["time/reward_s"],
              "update_s": m["time/train_s"], "retained": m["batch/retained"], "generated": m["batch/generated"],
              "reward": m["reward/mean"]} for m in lines]
    return {"trainer": ("rlbatch" if filter_groups else "rlbatch-nofilter") + ("" if noise_split else "-nosplit")
            + ("" if share_prompts else "-noshare"),
            "torch_threads": torch.get_num_threads(), **_summary(steps, wall)}


def worker_trl(a) -> dict:
    torch = _setup(a.threads)
    import numpy as np
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlbatch.train.models import load_model

    P = a.batch // a.G
    model, tok = load_model(a.preset)
    task = bench_task(a)
    items = []
    for s in range(1, a.steps + 1):  # the same prompts, in the same order, as our trainer's steps 1..N
        items += task.sample(np.random.default_rng([a.seed, s]), P)
    ds = Dataset.from_dict({"prompt": [it.prompt for it in items], "item": list(range(len(items)))})
    steps: list[dict] = []
    cur: dict = {}

    def reward(prompts, completions, item, **kw):
        r = [task.score(items[i], c) for i, c in zip(item, completions)]
        g = np.asarray(r, dtype=float).reshape(-1, a.G)
        cur["retained"] = cur.get("retained", 0) + int((g.max(1) != g.min(1)).sum()) * a.G
        cur["generated"] = cur.get("generated", 0) + len(r)
        cur["reward_sum"] = cur.get("reward_sum", 0.0) + float(np.sum(r))
        return r

    class Timed(GRPOTrainer):
        def _generate_and_score_completions(self, *args, **kw):
            t = time.perf_counter()
            out = super()._generate_and_score_completions(*args, **kw)
            cur["gen_s"] = cur.get("gen_s", 0.0) + time.perf_counter() - t
            return out

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            cur.clear()
            cur["t0"] = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            dt = time.perf_counter() - cur["t0"]
            steps.append({"step_s": dt, "gen_s": cur.get("gen_s", 0.0), "update_s": dt - cur.get("gen_s", 0.0),
                          "retained": cur.get("retained", 0), "generated": cur.get("generated", 0),
                          "reward": cur.get("reward_sum", 0.0) / max(cur.get("generated", 1), 1)})

    with tempfile.TemporaryDirectory() as d:
        args = GRPOConfig(output_dir=d, per_device_train_batch_size=a.micro,
                          gradient_accumulation_steps=a.batch // a.micro, num_generations=a.G,
                          max_completion_length=a.new_tokens, temperature=1.0, top_p=1.0, top_k=0,
                          learning_rate=a.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
                          adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, max_grad_norm=1.0,
                          max_steps=a.steps, beta=0.0, epsilon=0.2, loss_type="dapo", scale_rewards="group",
                          bf16=False, fp16=False, gradient_checkpointing=False, logging_steps=1, report_to=[],
                          save_strategy="no", shuffle_dataset=False, seed=a.seed, use_cpu=True,
                          dataloader_num_workers=0, disable_tqdm=True, log_completions=False)
        tr = Timed(model=model, reward_funcs=[reward], args=args, train_dataset=ds, processing_class=tok,
                   callbacks=[Clock()])
        t0 = time.perf_counter()
        tr.train()
        wall = time.perf_counter() - t0
    return {"trainer": "trl", "torch_threads": torch.get_num_threads(), **_summary(steps, wall)}


# --------------------------------------------------------------------------------------------------- driver
def machine() -> dict:
    import torch

    def sh(cmd):
        try:
            return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:
            return ""

    try:
        import trl

        trl_v = trl.__version__
    except ImportError:
        trl_v = None
    return {"lscpu": sh("lscpu | head -20"), "mem": sh("free -g | head -2"), "torch": torch.__version__,
            "trl": trl_v, "python": platform.python_version(), "loadavg_before": os.getloadavg()}


def run_worker(kind: str, a, batch: int, steps: int) -> dict:
    if kind == "before_nofilter":
        b = argparse.Namespace(**{**vars(a), "src": a.before_src})
        return run_worker("ours_nofilter", b, batch, steps)
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads),
           "PYTHONPATH": a.src, "TOKENIZERS_PARALLELISM": "false", "WANDB_DISABLED": "true"}
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, __file__, "--src", a.src, "--worker", kind, "--preset", a.preset, "--batch", str(batch),
           "--steps", str(steps), "--threads", str(a.threads), "--lr", str(lr_for(a, batch)), "--G", str(a.G),
           "--new-tokens", str(a.new_tokens), "--micro", str(a.micro), "--seed", str(a.seed), "--reward", a.reward,
           "--out", out]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(r.stdout[-3000:] + r.stderr[-6000:])
        raise SystemExit(f"{kind} worker failed at B={batch}")
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    return res


def lr_for(a, batch: int) -> float:
    from rlbatch.scaling import scaled_lr

    d = PRESETS[a.preset]
    return a.lr or scaled_lr(batch, d["base_batch"], d["base_lr"], "sqrt")


def curve(res: dict, every: int = 1000) -> list[tuple[int, float]]:
    """Mean reward per ``every`` generated samples (bins by cumulative samples at the end of each step)."""
    bins: dict[int, list[float]] = {}
    n = 0
    for s in res["steps_detail"]:
        bins.setdefault(n // every, []).append(s["reward"])
        n += s["generated"]
    return [(k * every, sum(v) / len(v)) for k, v in sorted(bins.items())]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny", choices=list(PRESETS))
    ap.add_argument("--batches", default=None, help="comma-separated B = P x G (default: the preset's)")
    ap.add_argument("--samples", type=int, default=None, help="generated samples per run (steps = samples / B)")
    ap.add_argument("--steps", type=int, default=None, help="steps per run (overrides --samples)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--G", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--micro", type=int, default=8, help="responses per micro-batch, both trainers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reward", choices=["exact", "partial"], default=None,
                    help="arithmetic scorer: exact match, or + 0.25 for a leading digit (default: the preset's)")
    ap.add_argument("--repeats", type=int, default=2, help="alternate ours/TRL this many times, keep each one's best "
                    "(fastest) run: the CPU may be shared")
    ap.add_argument("--ours-only", action="store_true", help="skip TRL (before/after measurements of our trainer)")
    ap.add_argument("--src", default=str(ROOT / "src"), help="our trainer's source tree (a before/after A/B: point it "
                    "at another checkout's src)")
    ap.add_argument("--before-src", default=None, help="also run our trainer from this source tree (another "
                    "checkout's src), equal work, interleaved: the before/after ratio in the same run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", choices=["ours", "ours_nofilter", "ours_nosplit", "ours_noshare", "trl"], default=None,
                    help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    d = PRESETS[a.preset]
    a.G = a.G or d["G"]
    a.new_tokens = a.new_tokens or d["new_tokens"]
    a.reward = a.reward or d["reward"]
    if a.worker:
        res = (worker_trl(a) if a.worker == "trl" else
               worker_ours(a, filter_groups=a.worker == "ours",
                           noise_split=a.worker not in ("ours_nosplit", "ours_noshare"),
                           share_prompts=a.worker != "ours_noshare"))
        Path(a.out).write_text(json.dumps(res))
        return
    batches = [int(x) for x in a.batches.split(",")] if a.batches else d["batches"]
    mach = machine()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {mach['torch']}, trl {mach['trl']}, "
          f"{a.threads} thread(s) per trainer, load average before {mach['loadavg_before'][0]:.2f}")
    print(f"preset {a.preset}, G={a.G}, new-token cap {a.new_tokens}, micro-batch {a.micro}, fp32, "
          f"sqrt-rule LR from B0={d['base_batch']}, lr0={d['base_lr']:g}, reward {a.reward}")
    rows = []
    kinds = [("ours_nosplit", "rlbatch (equal work)"), ("trl", "trl"),
             ("ours_noshare", "(no prompt sharing)"), ("ours_nofilter", "rlbatch (+noise split)"),
             ("ours", "rlbatch (filter on)")]
    if a.ours_only:
        kinds = [k for k in kinds if k[0] != "trl"]
    if a.before_src:  # our trainer at another checkout, equal work, interleaved with the rest: before/after
        kinds.insert(1, ("before_nofilter", "before (no filter)"))
    for b in batches:
        steps = a.steps or max(4, (a.samples or d["samples"]) // b)
        runs: dict[str, list] = {k: [] for k, _ in kinds}
        for _ in range(a.repeats):  # interleaved: a load change hits all three alike
            for k, _ in kinds:
                runs[k].append(run_worker(k, a, b, steps))
        row = {"batch": b, "steps": steps, "lr": lr_for(a, b)}
        for k, name in kinds:
            r = min(runs[k], key=lambda x: x["step_s"])
            r["all_step_s"] = [x["step_s"] for x in runs[k]]
            row[k] = r
            print(f"B={b:>4} {name:>20}: {r['step_s']:.4f} s/step, {r['retained_per_s']:7.1f} retained/s, "
                  f"{r['generated_per_s']:7.1f} generated/s, generation {100 * r['gen_share']:4.1f}%, "
                  f"update {100 * r['update_share']:4.1f}% ({r['steps']} steps; s/step of each repeat: "
                  + ", ".join(f"{x:.4f}" for x in r["all_step_s"]) + ")")
        rows.append(row)
        if "trl" in row:
            t, o, f = row["trl"], row["ours_nosplit"], row["ours"]
            row["ratio_equal_work"] = o["generated_per_s"] / t["generated_per_s"]
            # the uncertainty: the ratio of each repeat's pair (run back to back), its median and range
            pr = sorted(t_s / o_s for o_s, t_s in zip(o["all_step_s"], t["all_step_s"]))
            row["ratio_equal_work_paired"] = pr
            row["ratio_no_prompt_sharing"] = row["ours_noshare"]["generated_per_s"] / t["generated_per_s"]
            row["ratio_with_noise_split"] = row["ours_nofilter"]["generated_per_s"] / t["generated_per_s"]
            row["ratio_filtering_on"] = f["generated_per_s"] / t["generated_per_s"]
            if "before_nofilter" in row:
                row["ratio_equal_work_before"] = row["before_nofilter"]["generated_per_s"] / t["generated_per_s"]
                print(f"B={b:>4}   before (same run): equal work x{row['ratio_equal_work_before']:.2f}; "
                      f"after/before x{o['generated_per_s'] / row['before_nofilter']['generated_per_s']:.2f}")
            print(f"B={b:>4}   ratio (generated/s): equal work x{row['ratio_equal_work']:.2f} (repeat by repeat "
                  + ", ".join(f"{x:.2f}" for x in pr) + f"), without prompt sharing x{row['ratio_no_prompt_sharing']:.2f}"
                  f", with our noise split x{row['ratio_with_noise_split']:.2f}, filtering on "
                  f"x{row['ratio_filtering_on']:.2f}")
            for k, other in (("ours_nosplit", "equal work"), ("ours", "filter on")):
                co, ct = curve(row[k]), curve(t)
                print(f"B={b:>4}   mean reward per 1k generated samples (rlbatch {other} | trl): "
                      + ", ".join(f"{kk // 1000}-{kk // 1000 + 1}k {x:.3f}|{y:.3f}" for (kk, x), (_, y) in zip(co, ct)))
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"machine": mach, "preset": a.preset, "G": a.G,
                                            "new_tokens": a.new_tokens, "micro": a.micro, "threads": a.threads,
                                            "rows": rows}, indent=1) + "\n")
    if not a.ours_only:
        for r in rows:
            print(f"ratio_vs_trl_equal_work={r['ratio_equal_work']:.2f} B={r['batch']}")
        for r in rows:
            pr = r["ratio_equal_work_paired"]
            print(f"ratio_vs_trl_equal_work_paired={pr[len(pr) // 2]:.2f} B={r['batch']} (median of {len(pr)} "
                  f"back-to-back pairs, range {pr[0]:.2f}-{pr[-1]:.2f})")
        for r in rows:
            print(f"ratio_vs_trl_no_prompt_sharing={r['ratio_no_prompt_sharing']:.2f} B={r['batch']}")
        for r in rows:
            print(f"ratio_vs_trl_with_noise_split={r['ratio_with_noise_split']:.2f} B={r['batch']}")
        for r in rows:
            print(f"ratio_vs_trl_filtering_on={r['ratio_filtering_on']:.2f} B={r['batch']}")
        print(f"ratio_vs_trl_equal_work_min={min(r['ratio_equal_work'] for r in rows):.2f}")
        for r in rows:
            if "ratio_equal_work_before" in r:
                print(f"ratio_vs_trl_equal_work_before={r['ratio_equal_work_before']:.2f} B={r['batch']}")
    else:
        for r in rows:
            print(f"ours_generated_per_s={r['ours_nosplit']['generated_per_s']:.1f} B={r['batch']}")

if __name__ == "__main__":
    main()
