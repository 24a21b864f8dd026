"""The ``rlbatch`` command line (Typer). Every command: ``--help``, ``--format table|json|markdown`` where it
prints results, and one-line errors with exit code 2 for bad input (:class:`rlbatch.errors.UserError`)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from rlbatch.errors import UserError
from rlbatch.output import console, markdown_table, markdown_text, print_json, rich_table

app = typer.Typer(
    name="rlbatch",
    help="Which RL batch size reaches your target score soonest on your hardware? "
    "Align (square-root LR rule, curves on the retained-sample axis), then accelerate "
    "(a larger batch wins iff its throughput gain beats its samples-to-target penalty rN).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


#: The paper's accounting table (Li et al. 2026, Qwen3-8B GRPO: P = 128 ... 2048 at G = 8 and a fixed-LR control),
#: package data; ``rlbatch account --paper`` reads it, with P128 as the default reference.
PAPER_TABLE = Path(__file__).parent / "data" / "hunyuan_grpo_accounting.csv"
PAPER_REFERENCE = "P128"


# --------------------------------------------------------------------------------------------------- lr
@app.command("lr")
def lr_cmd(
    base_batch: int = typer.Option(..., "--base-batch", help="B0: responses per update (P x G) of the tuned run."),
    base_lr: float = typer.Option(..., "--base-lr", help="lr0: the learning rate tuned at B0."),
    batches: str = typer.Option(..., "--batches", help="Comma-separated batch sizes B to scale to, e.g. 2048,8192."),
    rule: str = typer.Option("sqrt", "--rule", help="sqrt (Adam, Malladi et al. 2022), linear (SGD, Goyal et al. "
                             "2017) or none (fixed LR control)."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Learning rate for each batch size under a scaling rule (the paper's "align" step)."""
    from rlbatch.scaling import lr_table, parse_int_list, scaled_lr

    scaled_lr(base_batch, base_batch, base_lr, rule)  # validates inputs and rule
    rows = lr_table(base_batch, base_lr, parse_int_list(batches), rule)
    cols = [("batch_size", "B", None), ("batch_ratio", "B/B0", ".4g"), ("lr", "lr", ".4g"),
            ("lr_ratio", "lr/lr0", ".4g")]
    if fmt is Format.json:
        print_json(rows)
    elif fmt is Format.markdown:
        print(markdown_table(rows, cols))
    else:
        console().print(rich_table(rows, cols, title=f"{rule} rule from B0={base_batch}, lr0={base_lr:g}"))


# --------------------------------------------------------------------------------------------------- account
def _print_accounting(rows, reference: str, fmt: Format, title: str = "End-to-end accounting") -> None:
    from rlbatch.analysis.accounting import fastest, to_json_rows, verdict

    recs = rows.to_dict(orient="records")
    nr = "not reached"
    cols = [("run", "run", None), ("batch_size", "B", None), ("samples_to_target", "samples-to-target", ".6g"),
            ("rN", "rN", ".2f"), ("relative_throughput", "rel. throughput", ".2f"),
            ("relative_time", "rel. time-to-target", ".2f"), ("faster_than_reference", "faster", None)]
    best = fastest(rows)
    if fmt is Format.json:
        print_json(to_json_rows(rows))
        return
    if fmt is Format.markdown:
        print(markdown_table(recs, cols, none=nr))
        print()
        for r in recs:
            print(f"- {verdict(r, reference)}")
        if best:
            print(f"\n**Fastest to target: {best}.**")
        return
    con = console()
    con.print(rich_table(recs, cols, title=f"{title} (reference {reference})", none=nr))
    for r in recs:
        con.print(f"  {verdict(r, reference)}")
    if best:
        con.print(f"[bold]Fastest to target: {best}[/bold]")


@app.command("account")
def account_cmd(
    table: Optional[Path] = typer.Argument(None, help="CSV with columns run, prompts_per_step, group_size, lr, "
                                           "samples_to_target and wall_clock_h (or wall_clock_s / "
                                           "throughput_samples_per_s). Omit it with --paper."),
    paper: bool = typer.Option(False, "--paper", help="Use the paper's table (Li et al. 2026, shipped with rlbatch; "
                               f"reference {PAPER_REFERENCE} unless --reference is given) instead of a CSV."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Run to compare against (rN = 1 by "
                                            "definition). Required with a CSV."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """End-to-end accounting: rN, relative throughput, relative time-to-target, and whether each run is faster
    than the reference (faster iff relative throughput > rN)."""
    from rlbatch.analysis.accounting import account, read_accounting_csv

    if paper == (table is not None):
        raise UserError("give either a CSV table or --paper (the paper's table), not both" if paper else
                        "give a CSV table, or --paper for the paper's table", field="table")
    if paper:
        table, reference = PAPER_TABLE, reference or PAPER_REFERENCE
    elif reference is None:
        raise UserError("--reference is required with a CSV table (the run to compare against)", field="reference")
    rows = account(read_accounting_csv(table), reference)
    rows = rows.sort_values("batch_size", kind="stable", na_position="last").reset_index(drop=True)  # by B, as numbers
    _print_accounting(rows, reference, fmt)


# --------------------------------------------------------------------------------------------------- train (issue 4)
def _quiet_transformers() -> None:
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


# Options shared by `train` and `sweep` (one definition, the same help in both)
GAMMA = typer.Option(1.0, "--gamma", help="PPO: GAE discount.")
LAM = typer.Option(1.0, "--lam", help="PPO: GAE lambda.")
VALUE_CLIP = typer.Option(0.2, "--value-clip", help="PPO: value-loss clip range (0: off).")
CRITIC_WARMUP_STEPS = typer.Option(0, "--critic-warmup-steps", help="PPO: critic-only steps first.")
ASYNC_ROLLOUTS = typer.Option(0, "--async-rollouts", help="K: generation runs in its own process up to K policy "
                              "versions ahead of the update (0: synchronous). GRPO.")
PARTIAL_ROLLOUT_TOKENS = typer.Option(None, "--partial-rollout-tokens", help="T: each round decodes at most T new "
                                      "tokens per response; unfinished ones continue under the next version.")
ROLLOUT_THREADS = typer.Option(1, "--rollout-threads", help="Torch threads of the generation process (with "
                               "--async-rollouts / --partial-rollout-tokens).")
PRECISION = typer.Option("fp32", "--precision", help="fp32, or bf16: generation, evaluation and the update's forward "
                         "passes under bfloat16 autocast, weights and Adam state in float32 (for GPUs).")


@app.command("train")
def train_cmd(
    model: str = typer.Option("tiny", "--model", help="Preset (tiny, tiny-random, smollm2-135m) or a local Hugging "
                              "Face model directory."),
    task: str = typer.Option("arithmetic", "--task", help="arithmetic, gsm8k, a reasoning-gym name (chain_sum, "
                             "basic_arithmetic, countdown, ...) or a verl-schema parquet/jsonl path."),
    prompts_per_step: int = typer.Option(16, "--prompts-per-step", "-P", help="P: prompts per step."),
    group_size: int = typer.Option(8, "--group-size", "-G", help="G: responses per prompt."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate (else from --base-batch/--base-lr/--rule)."),
    base_batch: Optional[int] = typer.Option(None, "--base-batch", help="B0 of the LR rule."),
    base_lr: Optional[float] = typer.Option(None, "--base-lr", help="lr0 of the LR rule (with neither --lr nor a "
                                            "base: the preset's demo calibration, tiny: B0 16, lr0 5e-5)."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule when --lr is not given: sqrt, linear, none."),
    samples: int = typer.Option(4096, "--samples", help="Retained-sample budget."),
    out: Path = typer.Option(..., "--out", help="Run directory to write."),
    seed: int = typer.Option(0, "--seed"),
    micro_batch_size: Optional[int] = typer.Option(None, "--micro-batch-size", help="Responses per micro-batch "
                                                   "(must divide P x G; default gcd(P x G, 8)). GRPO lays them out "
                                                   "by prompt: whole groups, or one group split over several."),
    micro_batch_tokens: Optional[int] = typer.Option(None, "--micro-batch-tokens", help="Token budget of a "
                                                     "micro-batch (padded prompt + response tokens): fewer responses "
                                                     "per pass when sequences are long (default: no budget)."),
    max_concurrent_sequences: Optional[int] = typer.Option(None, "--max-concurrent-sequences", help="Sequences "
                                                           "generated at once; the KV cache never holds more "
                                                           "(default: fitted to memory)."),
    mini_batch_size: Optional[int] = typer.Option(None, "--mini-batch-size", help="Responses per optimizer update M "
                                                  "(divides P x G; GRPO: a multiple of G); the LR rule applies to "
                                                  "M. Default: the whole batch, one update per step."),
    ppo_epochs: int = typer.Option(1, "--ppo-epochs", help="Passes over each rollout batch (P x G / M updates "
                                   "each)."),
    filter_groups: bool = typer.Option(True, "--filter-groups/--no-filter-groups", help="GRPO: drop groups whose "
                                       "rewards are all equal before the update (--no-filter-groups trains every "
                                       "response, as TRL)."),
    share_prompts: bool = typer.Option(True, "--share-prompts/--no-share-prompts", help="Update: run each "
                                       "prompt once per micro-batch with its responses packed after it (block "
                                       "attention mask; same loss and gradient, fewer FLOPs) where that is "
                                       "cheaper; --no-share-prompts: one padded row per response, as TRL."),
    temperature: float = typer.Option(1.0, "--temperature", help="Sampling temperature (the loss's "
                                      "log-probabilities use it too)."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", help="Cap on generated tokens per "
                                                 "response (default per task: arithmetic 5, reasoning-gym 256, "
                                                 "gsm8k and verl files 512)."),
    eval_every: int = typer.Option(2048, "--eval-every", help="Retained samples between greedy evaluations."),
    eval_size: Optional[int] = typer.Option(None, "--eval-size", help="Held-out items (default: 512 arithmetic, "
                                            "256 otherwise)."),
    checkpoint_every: int = typer.Option(10, "--checkpoint-every", help="Steps between checkpoints."),
    kl_coef: float = typer.Option(0.0, "--kl-coef", help="KL-to-reference weight (0: off, no reference model)."),
    max_grad_norm: float = typer.Option(1.0, "--max-grad-norm", help="Gradient clipping threshold (0: off)."),
    target: Optional[float] = typer.Option(None, "--stop-at-target", help="Stop once eval/score >= this ..."),
    hold: int = typer.Option(2, "--stop-hold", help="... for this many consecutive evaluations."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after this many steps."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its last checkpoint."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format of the final summary."),
    algo: str = typer.Option("grpo", "--algo", help="grpo, or ppo (value model + GAE; use -G 1)."),
    critic_model: Optional[str] = typer.Option(None, "--critic-model", help="PPO: separate critic model (preset "
                                               "or directory, same vocabulary); default a copy of the policy."),
    critic_lr: Optional[float] = typer.Option(None, "--critic-lr", help="PPO: critic learning rate (else from "
                                              "--critic-base-lr under --rule, else the actor's lr)."),
    critic_base_lr: Optional[float] = typer.Option(None, "--critic-base-lr", help="PPO: critic lr0 at --base-batch."),
    gamma: float = GAMMA,
    lam: float = LAM,
    value_clip: float = VALUE_CLIP,
    critic_warmup_steps: int = CRITIC_WARMUP_STEPS,
    async_rollouts: int = ASYNC_ROLLOUTS,
    partial_rollout_tokens: Optional[int] = PARTIAL_ROLLOUT_TOKENS,
    rollout_threads: int = ROLLOUT_THREADS,
    precision: str = PRECISION,
) -> None:
    """Train with GRPO (or PPO with --algo ppo): one optimizer step per P x G rollout batch, metrics in
    DIR/metrics.jsonl (canonical names), greedy evaluations in DIR/eval.jsonl, checkpoints for --resume."""
    _quiet_transformers()
    from rlbatch.train.tasks import default_max_new_tokens
    from rlbatch.train.trainer import make_config, train

    if lr is None and base_batch is None and base_lr is None and algo == "grpo":
        from rlbatch.study.demo import DEMOS

        d = DEMOS.get(model)
        if d is not None and d["task"] == task:  # the preset's calibrated base: its demo study's B0 and lr0
            base_batch, base_lr = d["base_batch"], d["base_lr"]
            typer.echo(f"lr: the {rule} rule from the {model} demo's base B0={base_batch}, lr0={base_lr:g} (give "
                       "--lr, or --base-batch and --base-lr, to choose)", err=True)
    cfg = make_config(model=model, task=task, prompts_per_step=prompts_per_step, group_size=group_size, lr=lr,
                      lr_rule=rule if lr is None else None, base_batch=base_batch, base_lr=base_lr, samples=samples,
                      seed=seed, micro_batch_size=micro_batch_size,
                      max_new_tokens=max_new_tokens or default_max_new_tokens(task),
                      micro_batch_tokens=micro_batch_tokens, max_concurrent_sequences=max_concurrent_sequences,
                      mini_batch_size=mini_batch_size, ppo_epochs=ppo_epochs, filter_groups=filter_groups,
                      share_prompts=share_prompts, temperature=temperature, eval_every=eval_every, eval_size=eval_size,
                      checkpoint_every=checkpoint_every, kl_coef=kl_coef,
                      max_grad_norm=max_grad_norm or None, stop_at_target=target, stop_hold=hold,
                      max_steps=max_steps, device=device, precision=precision,
                      **_ppo_fields(algo, critic_model, critic_lr, critic_base_lr, gamma, lam, value_clip,
                                    critic_warmup_steps),
                      **_async_fields(async_rollouts, partial_rollout_tokens, rollout_threads))
    run_dir = train(cfg, out, resume=resume, progress=fmt is Format.table)
    from rlbatch.runstore import read_run

    run = read_run(run_dir)
    m, e = run.metrics, run.evals
    row = {"run": run.run_id, "status": run.meta.status, "stop_reason": run.meta.stop_reason,
           "steps": int(m["step"].iloc[-1]) if len(m) else 0,
           "samples_retained": int(m["samples/retained"].iloc[-1]) if len(m) else 0,
           "samples_generated": int(m["samples/generated"].iloc[-1]) if len(m) else 0,
           "lr": run.meta.lr, "first_eval_score": float(e["eval/score"].iloc[0]) if len(e) else None,
           "last_eval_score": float(e["eval/score"].iloc[-1]) if len(e) else None,
           "mean_step_s": float(m["time/step_s"].mean()) if len(m) else None,
           "wall_clock_s": float(m["time/wall_s"].iloc[-1]) if len(m) else None,
           "peak_memory_mib": _mib(getattr(run.meta, "peak_memory_bytes", None)),
           "peak_kv_cache_mib": _mib(getattr(run.meta, "peak_kv_cache_bytes", None)), "run_dir": str(run_dir)}
    cols = [(k, k, None) for k in row]
    if fmt is Format.json:
        print_json(row)
    elif fmt is Format.markdown:
        print(markdown_table([row], cols))
    else:
        kv = [{"field": k, "value": v} for k, v in row.items()]
        console().print(rich_table(kv, [("field", "field", None), ("value", "value", None)], title=f"{cfg.algo.upper()} run"))


def _async_fields(k: int, t: Optional[int], threads: int) -> dict:
    """TrainConfig fields of the asynchronous-rollout flags (none when they are off, so configs stay as before)."""
    if not k and t is None:
        return {}
    return dict(async_rollouts=k, partial_rollout_tokens=t, rollout_threads=threads)


def _mib(n) -> float | None:
    return None if n is None else round(float(n) / 2**20, 1)


def _ppo_fields(algo, critic_model, critic_lr, critic_base_lr, gamma, lam, value_clip, warmup) -> dict:
    """TrainConfig fields of the PPO flags (only the algorithm for GRPO)."""
    from rlbatch.errors import UserError

    if algo not in ("grpo", "ppo"):
        raise UserError(f"--algo must be grpo or ppo, got {algo!r}", field="algo")
    if algo == "grpo":
        return {}
    return dict(algo=algo, critic_model=critic_model, critic_lr=critic_lr, critic_base_lr=critic_base_lr,
                gamma=gamma, lam=lam, value_clip=value_clip or None, critic_warmup_steps=warmup)


@app.command("sweep")
def sweep_cmd(
    base_batch: int = typer.Option(..., "--base-batch", help="B0: the reference batch (responses per update)."),
    base_lr: float = typer.Option(..., "--base-lr", help="lr0: the learning rate tuned at B0."),
    batches: str = typer.Option(..., "--batches", help="Comma-separated batch sizes B, e.g. 16,32,64,128."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule: sqrt, linear or none."),
    fixed_lr_control: Optional[int] = typer.Option(None, "--fixed-lr-control", help="Also run this B at lr0."),
    group_sizes: Optional[str] = typer.Option(None, "--group-sizes", help="Comma-separated G values (P = B / G); "
                                              "default 8 for grpo, 1 for ppo."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per configuration."),
    samples: Optional[int] = typer.Option(None, "--samples", help="local/ray/trl: budget of every trial in "
                                          "retained responses (as everywhere in rlbatch)."),
    generated_samples: Optional[int] = typer.Option(None, "--generated-samples", help="verl/openrlhf (and trl with "
                                                    "--dry-run/--submit): budget of every trial in generated "
                                                    "responses (steps = ceil(N / B); a launched framework cannot "
                                                    "stop at a retained count)."),
    target: Optional[float] = typer.Option(None, "--target", help="Target held-out score (required for local, ray "
                                           "and --adaptive)."),
    stop_at_target: bool = typer.Option(False, "--stop-at-target", help="Stop a trial once the target is reached "
                                        "and held (--stop-hold evaluations)."),
    hold: int = typer.Option(2, "--stop-hold"),
    out: Path = typer.Option(..., "--out", help="Sweep directory (trials/, sweep.json, report.*)."),
    backend: str = typer.Option("local", "--backend", help="local (processes here), ray (Ray tasks), trl (each "
                                "trial with TRL's GRPOTrainer here; with --dry-run/--submit: launch it), or launch "
                                "the study on verl or openrlhf."),
    adaptive: bool = typer.Option(False, "--adaptive", help="Decide early, on every backend: re-plan at every new "
                                  "evaluation and stop a configuration once its predicted time-to-target interval "
                                  "lies above the best's (or its outcome is decided); every decision with its "
                                  "reason and evidence in OUT/adaptive.json. verl/openrlhf: the trials are launched "
                                  "here (or as Ray jobs with --submit) and watched through their logs."),
    chunk_samples: Optional[int] = typer.Option(None, "--chunk-samples", help="--adaptive (local/ray/trl): retained "
                                                "samples per start or extension of a trial (default --samples / 8); "
                                                "the plan is re-made after every round of new evaluations."),
    address: Optional[str] = typer.Option(None, "--address", help="ray: cluster to join (auto, HOST:6379, "
                                          "ray://HOST:10001); verl/openrlhf/trl --submit: http://HEAD:8265."),
    cpus_per_trial: float = typer.Option(1, "--cpus-per-trial", help="ray: CPUs requested per trial."),
    gpus_per_trial: float = typer.Option(0, "--gpus-per-trial", help="ray: GPUs requested per trial."),
    max_retries: int = typer.Option(2, "--max-retries", help="ray: resubmissions of a failed trial."),
    verl_config: Optional[Path] = typer.Option(None, "--verl-config", "--base-config", help="verl/openrlhf/trl: "
                                               "your base settings (Hydra overrides, flags or a GRPOConfig YAML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="verl/openrlhf/trl: print the commands; write nothing."),
    submit: bool = typer.Option(False, "--submit", help="verl/openrlhf/trl: submit each trial as a Ray job to "
                                "--address."),
    model: str = typer.Option("tiny", "--model", help="Preset or model directory."),
    task: str = typer.Option("arithmetic", "--task", help="Task name or path."),
    micro_batch_size: Optional[int] = typer.Option(None, "--micro-batch-size"),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", help="Cap on generated tokens per "
                                                 "response (default per task: arithmetic 5, reasoning-gym 256, "
                                                 "gsm8k and verl files 512)."),
    eval_every: int = typer.Option(2048, "--eval-every", help="Retained samples between evaluations."),
    eval_size: Optional[int] = typer.Option(None, "--eval-size"),
    workers: int = typer.Option(1, "--workers", help="Trial processes in parallel (1 torch thread each)."),
    device: str = typer.Option("cpu", "--device"),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format of the accounting."),
    algo: str = typer.Option("grpo", "--algo", help="grpo or ppo."),
    critic_model: Optional[str] = typer.Option(None, "--critic-model", help="PPO: separate critic model."),
    critic_base_lr: Optional[float] = typer.Option(None, "--critic-base-lr", help="PPO: critic lr0 at B0 (scaled "
                                                   "by --rule like the actor's; default: the actor's lr)."),
    gamma: float = GAMMA,
    lam: float = LAM,
    value_clip: float = VALUE_CLIP,
    critic_warmup_steps: int = CRITIC_WARMUP_STEPS,
    async_rollouts: int = ASYNC_ROLLOUTS,
    partial_rollout_tokens: Optional[int] = PARTIAL_ROLLOUT_TOKENS,
    rollout_threads: int = ROLLOUT_THREADS,
    precision: str = PRECISION,
) -> None:
    """Batch-size sweep: every B under the LR rule (+ a fixed-LR control) to the same sample budget, resumable
    (finished trials are skipped; local and ray share sweep.json), then the report (report.html, report.md,
    report.json in --out). --backend trl runs every trial with TRL's GRPOTrainer (same manifest and report);
    --backend verl|openrlhf (and trl with --dry-run/--submit) launches the study there instead (as rlbatch launch)."""
    _quiet_transformers()
    from rlbatch.study.ladder import build_ladder
    from rlbatch.study.run import launched, run_study
    from rlbatch.train.tasks import default_max_new_tokens

    is_launch = launched(backend, dry_run, submit)
    samples = _budget(backend, samples, generated_samples, launched=is_launch)
    opts = dict(micro_batch_size=micro_batch_size, max_new_tokens=max_new_tokens or default_max_new_tokens(task),
                eval_every=eval_every,
                eval_size=eval_size, device=device,
                **_ppo_fields(algo, critic_model, None, critic_base_lr, gamma, lam, value_clip, critic_warmup_steps),
                **_async_fields(async_rollouts, partial_rollout_tokens, rollout_threads))
    if precision != "fp32":  # our trainer's option (local, ray); fp32 leaves every backend's options as they were
        opts["precision"] = precision
    if stop_at_target and target is not None:
        opts.update(stop_at_target=target, stop_hold=hold)
    ladder = build_ladder(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                          group_sizes=group_sizes or ("1" if algo == "ppo" else "8"), seeds=seeds,
                          fixed_lr_control=fixed_lr_control, samples=samples,
                          budget="generated" if is_launch else "retained", model=model, task=task, options=opts)
    res = run_study(ladder, backend=backend, out=out, target=target, workers=workers, adaptive=adaptive,
                    address=address, cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                    max_retries=max_retries, base_config=verl_config, dry_run=dry_run, submit=submit,
                    progress=fmt is Format.table,
                    adaptive_options={"chunk": chunk_samples} if chunk_samples else None)
    if res["kind"] == "launch":
        _print_launch(res["launch"], backend, out, dry_run, fmt)
        return
    if res["kind"] == "adaptive" and fmt is not Format.json:
        a = res["adaptive"]
        print(f"adaptive: recommended {a['recommended']} ({a['stopped_because']}); "
              f"{a['samples_spent']:.0f} retained samples spent")
    _print_sweep_report(res["report"], fmt, out)


def _budget(backend: str, samples: int | None, generated: int | None, *, launched: bool) -> int:
    """The trial budget of ``rlbatch sweep``: ``--samples`` (retained responses) for the backends that train and
    stop at a retained count (local, ray, and trl, which trains with TRL's GRPOTrainer), ``--generated-samples``
    (generated responses) when the study is launched on a framework (verl, openrlhf, trl with --dry-run/--submit);
    the other flag is an error."""
    from rlbatch.errors import UserError

    if launched:
        if samples is not None:
            raise UserError(f"--samples counts retained responses, which {backend} cannot stop at; give "
                            "--generated-samples N (generated responses per trial; steps = ceil(N / B))",
                            field="samples")
        if generated is None:
            raise UserError(f"--backend {backend} needs --generated-samples N (generated responses per trial)",
                            field="generated_samples")
        return generated
    if generated is not None:
        raise UserError(f"--generated-samples applies to launched studies (--backend verl, openrlhf, or trl with "
                        f"--dry-run/--submit); --backend {backend} trains to --samples retained responses",
                        field="generated_samples")
    if samples is None:
        raise UserError("--samples N (retained responses per trial) is required", field="samples")
    return samples


def _print_sweep_report(rep: dict, fmt: Format, out: Path) -> None:
    from rlbatch.report import accounting_columns, with_ci_cells

    rows = with_ci_cells(rep.get("accounting") or [])
    cols = accounting_columns(combined=True)
    if fmt is Format.json:
        print_json(rep)
        return
    family = (rep.get("aligned_family") or {}).get("statement")
    if fmt is Format.markdown:
        print(markdown_table(rows, cols, none="not reached"))
        print(f"\n{rep.get('recommendation') or ''}\n")
        if family:
            print(f"{family}\n")
        print(f"Report: {out}/report.html, report.md, report.json")
        return
    con = console()
    con.print(rich_table(rows, cols, title="End-to-end accounting (seeds of a configuration averaged)",
                         none="not reached"))
    con.print(markdown_text(rep.get("recommendation") or ""))
    if family:
        con.print(markdown_text(family))
    con.print(f"Report: {out}/report.html, {out}/report.md, {out}/report.json", markup=False)


@app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output directory (resumable)."),
    preset: str = typer.Option("tiny", "--preset", help="tiny (minutes on 2 CPU cores), smollm2-135m "
                                "(GPU), gpu-small (one GPU, ~5 min on an H200) or gpu-small-toy (its CPU "
                                "rehearsal)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per configuration (default: the preset's)."),
    seed_offset: int = typer.Option(0, "--seed-offset", help="First seed: seeds OFFSET .. OFFSET+seeds-1 (another "
                                    "offset repeats the whole study on an independent seed set; use another --out)."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Retained-response budget per trial (default: "
                                          "the preset's; tiny trials stop at the target before it)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Parallel trial processes (default min(2, CPUs))."),
    device: str = typer.Option("cpu", "--device"),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
    algo: str = typer.Option("grpo", "--algo", help="grpo, or ppo (the preset's PPO study: G = 1, value model)."),
    backend: str = typer.Option("local", "--backend", help="local (our trainer) or trl (every trial with TRL's "
                                "GRPOTrainer; GRPO only; needs rlbatch[trl])."),
) -> None:
    """The main job: a real batch-size study on the tiny preset (B = 16 to 2048 on the square-root LR rule, past
    the critical batch, plus a fixed-LR control at B = 256, 3 seeds, target 0.37), then the report: the accounting,
    where the aligned family ends, the rejected larger batches and the recommendation. --seed-offset repeats it on
    another seed set."""
    _quiet_transformers()
    from rlbatch.study.demo import run_demo

    rep = run_demo(out, preset=preset, seeds=seeds, samples=samples, workers=workers, device=device,
                   progress=fmt is Format.table, algo=algo, backend=backend, seed_offset=seed_offset)
    _print_sweep_report(rep, fmt, out)
    if fmt is not Format.json:
        c = rep.get("demo_cost") or {}
        print(f"demo finished in {rep['demo_seconds']:.0f} s"
              + (f" ({c['trials']} trials: {c['train_cpu_s']:.0f} CPU-s of training steps and {c['eval_s']:.0f} s "
                 "of evaluation in all)" if c.get("trials") else ""))


# --------------------------------------------------------------------------------------------------- profile
@app.command("profile")
def profile_cmd(
    model: str = typer.Option(..., "--model", help="Model preset (tiny, smollm2-135m, gpu-small, "
                              "gpu-small-toy) or a local Hugging Face model directory."),
    batches: str = typer.Option("1,2,4,8,16", "--batches", help="Comma-separated batch sizes (sequences)."),
    new_tokens: Optional[int] = typer.Option(None, "--new-tokens", help="Tokens decoded per sequence (exactly; no "
                                             "early stop). Default 64, fewer when the model's context is shorter "
                                             "(tiny: 16)."),
    prompt_tokens: Optional[int] = typer.Option(None, "--prompt-tokens", help="Prompt length in tokens (random "
                                                "token ids). Default 64, fewer when the model's context is shorter "
                                                "(tiny: 15)."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: cuda when available)."),
    bandwidth_gbs: Optional[float] = typer.Option(None, "--bandwidth-gbs", help="Memory bandwidth in GB/s "
                                                  "(default: measured with a tensor copy)."),
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="Peak TFLOP/s (default: measured "
                                                "with a matmul)."),
    update: bool = typer.Option(True, "--update/--no-update", help="Also time one update per batch size."),
    repeats: int = typer.Option(1, "--repeats", help="Time each measurement this many times and keep the best."),
    out: Path = typer.Option(Path("runs/profile"), "--out", help="Directory for <model>.json and <model>.png."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Decode throughput, prefill time and one update's time per batch size, beside a roofline lower bound from
    parameter bytes, KV-cache bytes per token, memory bandwidth and peak FLOP/s (no training)."""
    _quiet_transformers()
    from rich.console import Console
    from rich.progress import Progress

    from rlbatch.profile import COLUMNS, json_rows, run_profile, save_profile
    from rlbatch.scaling import parse_int_list

    sizes = parse_int_list(batches)
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"profiling {model}", total=len(sizes))
        prof = run_profile(model, sizes, new_tokens=new_tokens, prompt_tokens=prompt_tokens, device=device,
                           bandwidth_gbs=bandwidth_gbs, peak_tflops=peak_tflops, update=update,
                           repeats=repeats,
                           progress=lambda _b: bar.advance(task))
    jpath, fpath = save_profile(prof, out)
    if fmt is Format.json:
        print_json(json_rows(prof))
        return
    head = (f"{model} on {prof['device_name']} ({prof['dtype']}): bandwidth {prof['bandwidth_gbs']:.3g} GB/s "
            f"({prof['bandwidth_source']}), peak {prof['peak_tflops']:.3g} TFLOP/s ({prof['peak_source']}); "
            f"{prof['shape']['param_bytes'] / 1e6:.3g} MB of parameters, "
            f"{prof['shape']['kv_bytes_per_token'] / 1e3:.3g} kB KV cache per token")
    if fmt is Format.markdown:
        print(head + "\n")
        print(markdown_table(prof["batches"], COLUMNS))
    else:
        con = console()
        con.print(rich_table(prof["batches"], COLUMNS, title=head))
        window = (prof.get("gen_window") or {}).get("window")
        if window:
            con.print(f"  generation time grows sublinearly in B from {window[0]} to {window[1]}")
        con.print(f"  saved {jpath} and {fpath}")

# --------------------------------------------------------------------------------------------------- analyze
@app.command("analyze")
def analyze_cmd(
    paths: list[Path] = typer.Argument(..., help="Logs: verl console logs, verl JSONL, TensorBoard dirs, TRL "
                                       "trainer_state.json, W&B/CSV/JSONL exports, run dirs or sweep dirs."),
    target: Optional[float] = typer.Option(None, "--target", help="Target score: adds samples-to-target, the "
                                           "accounting and a recommendation."),
    metric: str = typer.Option("eval/score", "--metric", help="Metric the target applies to (eval/score, "
                               "reward/mean, ...)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference run for rN (default: the "
                                            "smallest batch that reached the target)."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override run metadata: RUN:field=value or "
                                             "field=value for all runs (prompts_per_step, group_size, lr, ...)."),
    mapping: Optional[list[str]] = typer.Option(None, "--map", help="Map a foreign metric name: foreign=canonical "
                                                "(e.g. acc=eval/score). Repeatable."),
    log_format: Optional[str] = typer.Option(None, "--log-format", help="Input format instead of detecting it: "
                                             "verl, verl-jsonl, tensorboard, trl, wandb-csv, csv, jsonl, rlbatch, wandb (W&B "
                                             "run directories), mlflow (mlruns/ or mlflow.db)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write report.html, report.md (+PNG) and report.json "
                                       "here."),
    ema: Optional[float] = typer.Option(None, "--ema", help="Smooth the metric with an EMA of this weight in [0, 1) "
                                        "(TensorBoard's convention) before finding samples-to-target."),
    sustained: bool = typer.Option(False, "--sustained", help="Count a target as reached only if the score stays at "
                                   "or above it afterwards."),
    clock: str = typer.Option("auto", "--clock", help="Clock for time-to-target and throughput: auto (process CPU "
                              "time for runs on a CPU device that log time/cpu_s, where parallel trials share the "
                              "cores; else wall-clock), wall or cpu."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Read RL training logs (verl, TRL, OpenRLHF/TensorBoard, W&B, CSV/JSONL, rlbatch runs) and summarise each
    run; with --target, the end-to-end accounting (rN vs throughput gain) and which batch size is fastest."""
    from rlbatch.analyze import analyze, print_analysis

    result = analyze(paths, target=target, metric=metric, reference=reference, out=out, log_format=log_format,
                     mapping=mapping, sets=sets, ema=ema, sustained=sustained, clock=clock)
    print_analysis(result, fmt.value)

# --------------------------------------------------------------------------------------------------- inspect
@app.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="A log (any format, a notebook, a directory of logs) or a launch: a "
                                "verl / OpenRLHF / TRL command line (a shell script) or config (YAML/JSON)."),
    batches: Optional[str] = typer.Option(None, "--batch", help="For a launch: comma-separated batch sizes B "
                                          "(responses per update) to give the rule's learning rate for (default: "
                                          "half and double the launch's B)."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule for --batch: sqrt (the paper's), linear or none."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="As in analyze: RUN:field=value."),
    mapping: Optional[list[str]] = typer.Option(None, "--map", help="As in analyze: foreign=canonical."),
    log_format: Optional[str] = typer.Option(None, "--log-format", help="Input format instead of detecting it."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format (table and markdown print text)."),
) -> None:
    """Say what a log holds and where each number came from (format, step counters, which name became which
    metric, where P, G and lr came from), what is missing and the exact flag that supplies it; for a verl /
    OpenRLHF / TRL launch, its batch in framework-neutral terms and the learning rate the rule gives for another
    batch."""
    from rlbatch.explain import inspect_path, print_inspection
    from rlbatch.scaling import parse_int_list

    res = inspect_path(path, log_format=log_format, mapping=mapping, sets=sets,
                       batches=parse_int_list(batches, "batch") if batches else None, rule=rule)
    print_inspection(res, fmt.value)

# --------------------------------------------------------------------------------------------------- launch
class LaunchBackend(str, Enum):
    verl = "verl"
    openrlhf = "openrlhf"
    trl = "trl"


@app.command("launch")
def launch_cmd(
    backend: LaunchBackend = typer.Option(..., "--backend", help="Framework to launch the study on."),
    base_batch: int = typer.Option(..., "--base-batch", help="B0: responses per update (P x G) of the tuned run."),
    base_lr: float = typer.Option(..., "--base-lr", help="lr0: the learning rate tuned at B0."),
    batches: str = typer.Option(..., "--batches", help="Comma-separated batch sizes B (responses per update)."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule: sqrt (the paper's), linear or none."),
    group_size: int = typer.Option(..., "--group-size", help="G: responses per prompt (P = B / G)."),
    samples: int = typer.Option(..., "--generated-samples", help="Budget of generated responses per trial "
                                "(steps = ceil(N / B); a launched framework cannot stop at a retained count, which "
                                "is what --samples means elsewhere)."),
    out: Path = typer.Option(..., "--out", help="Sweep directory (on a filesystem the cluster shares)."),
    base_config: Optional[Path] = typer.Option(None, "--base-config", "--verl-config",
                                               help="Your base settings: Hydra overrides (verl), flags (OpenRLHF) "
                                               "or a GRPOConfig YAML (TRL); one per line or YAML."),
    fixed_lr_control: Optional[int] = typer.Option(None, "--fixed-lr-control", help="Add the control: this batch "
                                                   "size trained with the unscaled lr0."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per batch size."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the commands; write nothing."),
    submit: bool = typer.Option(False, "--submit", help="Submit each trial as a Ray job to --address."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray dashboard, e.g. http://HEAD:8265."),
    project: str = typer.Option("rlbatch", "--project", help="verl trainer.project_name (names the log folder)."),
    num_processes: int = typer.Option(1, "--num-processes", help="TRL: processes (GPUs) for accelerate launch."),
    trl_script: str = typer.Option("train_grpo.py", "--trl-script", help="TRL: your GRPO script (reads --config)."),
    critic_lr: Optional[float] = typer.Option(None, "--critic-lr", help="OpenRLHF PPO: the critic's lr0 at B0."),
    openrlhf_flags: str = typer.Option("dotted", "--openrlhf-flags", help="OpenRLHF flag names: dotted "
                                       "(>= 0.10.2, --rollout.batch_size) or flat (<= 0.10.1)."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Launch the study on verl, OpenRLHF or TRL: one command per trial with P = B/G, G, the scaled learning rate and
    steps from the sample budget. Writes OUT/launch.sh + OUT/trials/*.sh + OUT/plan.json (default), prints the
    commands (--dry-run) or submits them as Ray jobs (--submit --address). Then: rlbatch analyze OUT/logs.
    The same as rlbatch sweep --backend verl|openrlhf|trl (kept as an alias with the launcher-only options)."""
    from rlbatch.backends.launch import launch
    from rlbatch.study.ladder import build_ladder

    ladder = build_ladder(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                          group_sizes=[group_size], seeds=seeds, fixed_lr_control=fixed_lr_control, samples=samples,
                          budget="generated")
    res = launch(ladder, backend=backend.value, out=out, base_config=base_config, dry_run=dry_run, submit=submit,
                 address=address, project=project, num_processes=num_processes, trl_script=trl_script,
                 base_critic_lr=critic_lr, openrlhf_flags=openrlhf_flags)
    _print_launch(res, backend.value, out, dry_run, fmt)


def _print_launch(res: dict, backend: str, out: Path, dry_run: bool, fmt: Format) -> None:
    from rlbatch.backends.launch import format_dry_run

    plans = res["plans"]
    if fmt is Format.json:
        print_json({"trials": plans, "launch_script": res["launch_script"], "jobs": res["jobs"]})
        return
    if dry_run:
        print(format_dry_run(plans), end="")
        return
    jobs = {j["run_id"]: j["job_id"] for j in res["jobs"]}
    rows = [{**p, "job_id": jobs.get(p["run_id"])} for p in plans]
    cols = [("run_id", "trial", None), ("prompts_per_step", "P", None), ("group_size", "G", None),
            ("batch_size", "B", None), ("lr", "lr", ".4g"), ("steps", "steps", None), ("log_path", "log", None)]
    if jobs:
        cols.append(("job_id", "Ray job", None))
    if fmt is Format.markdown:
        print(markdown_table(rows, cols))
    else:
        console().print(rich_table(rows, cols, title=f"{backend}: {len(plans)} trials"))
    if not jobs:
        print(f"Run: bash {res['launch_script']}   (re-run to resume; then: rlbatch analyze {Path(out) / 'logs'})")


# --------------------------------------------------------------------------------------------------- plan
@app.command("plan")
def plan_cmd(
    paths: list[Path] = typer.Argument(..., help="Runs: run dirs, a sweep dir, any logs rlbatch analyze reads; or "
                                       "one accounting table (CSV with samples_to_target, as rlbatch account)."),
    target: Optional[float] = typer.Option(None, "--target", help="Target score (required for runs; a table is "
                                           "already at its target)."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference run, configuration or batch size "
                                            "(default: as rlbatch analyze, the smallest batch that reached the "
                                            "target)."),
    candidates: Optional[str] = typer.Option(None, "--candidates", help="Comma-separated batch sizes to predict "
                                             "besides the runs' own, e.g. 2048,4096."),
    profile: Optional[Path] = typer.Option(None, "--profile", help="Throughput profile JSON (rlbatch profile) for "
                                           "every candidate's throughput."),
    metric: str = typer.Option("eval/score", "--metric", help="Metric the target applies to."),
    tolerance: float = typer.Option(0.1, "--tolerance", help="Aligned family: rN <= 1 + tolerance."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Override run metadata: RUN:field=value."),
    mapping: Optional[list[str]] = typer.Option(None, "--map", help="Map a foreign metric name: foreign=canonical."),
    log_format: Optional[str] = typer.Option(None, "--log-format", help="Input log format instead of detecting it."),
    clock: str = typer.Option("auto", "--clock", help="Clock for time-to-target and throughput: auto (process CPU "
                              "time for runs on a CPU device that log time/cpu_s, where parallel trials share the "
                              "cores; else wall-clock), wall or cpu."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Align, then accelerate: predict each candidate batch's time-to-target (rN / throughput gain, with an
    interval) from finished runs or short probes and a throughput model, and recommend the fastest."""
    from rlbatch.plan import make_plan, print_plan
    from rlbatch.scaling import parse_int_list

    plan = make_plan(paths, target=target, reference=reference, profile=profile, metric=metric, tol=tolerance,
                     candidates=parse_int_list(candidates, "candidates") if candidates else None,
                     log_format=log_format, sets=sets, mapping=mapping, clock=clock)
    print_plan(plan, fmt.value)


def _one_line_help() -> None:
    """Each command's help as flowing text: the docstring's source line breaks removed (rich keeps them, which
    breaks lines mid-sentence in ``--help``), and its first sentence as the one-line summary in ``rlbatch --help``."""
    import re

    for info in app.registered_commands:
        doc = info.help or (info.callback.__doc__ if info.callback else None)
        if not doc:
            continue
        info.help = " ".join(doc.split())
        first = re.split(r"(?<=\.)\s", info.help, maxsplit=1)[0]
        info.short_help = info.short_help or first


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
    """Warnings as the user sees them: the project's own (``UserWarning``: readers, options) as one line
    ``rlbatch: warning: ...``; the numerical libraries' (numpy / pandas ``RuntimeWarning``, ``FutureWarning``, ...)
    never raw: the results they concern already say what is missing (None, "—", "not reached")."""
    if issubclass(category, UserWarning) and not str(filename).replace("\\", "/").count("/matplotlib/"):
        print(f"rlbatch: warning: {str(message).splitlines()[0]}", file=sys.stderr)


@app.command("watch")
def watch_cmd(
    path: Path = typer.Argument(..., help="A running job or sweep: a run directory, a sweep directory (trials/), "
                                "or any log rlbatch analyze reads (verl file logger JSONL, TensorBoard events, ...)."),
    target: Optional[float] = typer.Option(None, "--target", help="Target score: predicted samples-to-target and "
                                           "time-to-target (with intervals), and for a sweep the plan's ranking."),
    fmt: str = typer.Option("auto", "--format", help="auto (a live table in a terminal, one line per update when "
                            "piped), live, lines, or json (one JSON object per update)."),
    once: bool = typer.Option(False, "--once", help="Print one update and exit."),
    interval: float = typer.Option(5.0, "--interval", help="Seconds between checks for new lines."),
    max_updates: Optional[int] = typer.Option(None, "--max-updates", help="Exit after this many updates."),
    metric: str = typer.Option("eval/score", "--metric", help="Metric the target applies to."),
    log_format: Optional[str] = typer.Option(None, "--log-format", help="Input log format instead of detecting it."),
    prompts_per_step: Optional[int] = typer.Option(None, "--prompts-per-step", help="P for logs that lack it."),
    group_size: Optional[int] = typer.Option(None, "--group-size", help="G for logs that lack it."),
) -> None:
    """Live view of one running job or a whole sweep, re-read as it grows: score vs retained samples with the fitted
    curve, predicted samples-to-target and time-to-target with intervals, throughput so far, and for a sweep the
    plan's ranking and which trials the adaptive loop would stop. Only reads: nothing is written to PATH."""
    from rlbatch.watch import watch

    watch(path, target=target, fmt=fmt, once=once, interval=interval, max_updates=max_updates, metric=metric,
          log_format=log_format, prompts_per_step=prompts_per_step, group_size=group_size)



def main() -> None:
    """Console entry point: runs the Typer app. A :class:`UserError` prints one line and exits with code 2; so
    does a usage error (unknown option, missing argument, bad value: click's message and the command's ``--help``
    on one line); warnings go through :func:`_show_warning`."""
    import warnings

    try:  # typer >= 0.20 carries its own copy of click
        from typer._click import exceptions as click
    except ImportError:  # pragma: no cover - older typer on click
        from click import exceptions as click

    warnings.showwarning = _show_warning
    try:
        rv = app(standalone_mode=False)
    except UserError as err:
        print(f"rlbatch: error: {err}", file=sys.stderr)
        sys.exit(2)
    except click.UsageError as err:
        names, c = [], err.ctx
        while c is not None and c.parent is not None:  # the subcommands, without how the program was started
            names.append(c.info_name)
            c = c.parent
        cmd = " ".join(["rlbatch"] + names[::-1])
        msg = " ".join(err.format_message().split())
        print(f"rlbatch: error: {msg} (see '{cmd} --help')", file=sys.stderr)
        sys.exit(2)
    except click.ClickException as err:
        print(f"rlbatch: error: {' '.join(err.format_message().split())}", file=sys.stderr)
        sys.exit(err.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        print("rlbatch: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


_one_line_help()  # after every command is registered

if __name__ == "__main__":
    main()

