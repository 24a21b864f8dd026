"""The ``rlbatch`` command line (Typer). Every command: ``--help``, ``--format table|json|markdown`` where it
prints results, and one-line errors with exit code 2 for bad input (:class:`rlbatch.errors.UserError`)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import Progress

from rlbatch.cli_options import (ADDRESS, BASE_BATCH, BASE_CONFIG, BASE_LR, BATCHES, CLOCK, CONFIG, DRY_RUN, EMA,
                                 LOG_FORMAT, MAPPING, METRIC, REFERENCE, SETS, SUSTAINED,
                                 FIXED_LR_CONTROL, GROUP_SIZES, RULE, RULE_OR_LR, SEEDS, STOP_ON_TARGET, SUBMIT,
                                 SWEEP_SETTINGS, TARGET, TRAIN_SETTINGS, AliasGroup, with_config_options)
from rlbatch import __version__
from rlbatch.cli_print import Format, print_accounting, print_launch, print_sweep_report
from rlbatch.errors import Interrupted, UserError
from rlbatch.output import Stages, console, markdown_table, print_json, rich_table
from rlbatch.scaling import lr_table, parse_int_list, scaled_lr
from rlbatch.train.config import (check_device, check_score_target, lr_fields, make_config, stop_fields,
                                   trainer_fields, trial_budget)

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click
except ImportError:  # pragma: no cover - older typer on click
    from click import exceptions as click

app = typer.Typer(
    name="rlbatch",
    help="Which RL batch size reaches your target score soonest on your hardware? "
    "Align (square-root LR rule, curves on the retained-sample axis), then accelerate "
    "(a larger batch wins iff its throughput gain beats its samples-to-target penalty rN).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: wraps at the terminal's width, never truncates an option's name
    add_completion=False,
    cls=AliasGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"rlbatch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Which RL batch size reaches your target score soonest on your hardware? Align (square-root LR rule, curves
    on the retained-sample axis), then accelerate (a larger batch wins iff its throughput gain beats its
    samples-to-target penalty rN)."""


#: The paper's accounting table (Li et al. 2026, Qwen3-8B GRPO: P = 128 ... 2048 at G = 8 and a fixed-LR control),
#: package data; ``rlbatch account --paper`` reads it, with P128 as the default reference.
PAPER_TABLE = Path(__file__).parent / "data" / "hunyuan_grpo_accounting.csv"
PAPER_REFERENCE = "P128"


# --------------------------------------------------------------------------------------------------- lr
@app.command("lr")
def lr_cmd(
    base_batch: int = BASE_BATCH,
    base_lr: float = BASE_LR,
    batches: str = BATCHES,
    rule: str = RULE,
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Learning rate for each batch size under a scaling rule (the paper's "align" step)."""

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
    from rlbatch.analysis.table import account, read_accounting_csv  # on use: --help loads no pandas

    if paper == (table is not None):
        raise UserError("give either a CSV table or --paper (the paper's table), not both" if paper else
                        "give a CSV table, or --paper for the paper's table", field="table")
    if paper:
        table, reference = PAPER_TABLE, reference or PAPER_REFERENCE
    elif reference is None:
        raise UserError("--reference is required with a CSV table (the run to compare against)", field="reference")
    rows = account(read_accounting_csv(table), reference)
    rows = rows.sort_values("batch_size", kind="stable", na_position="last").reset_index(drop=True)  # by B, as numbers
    print_accounting(rows, reference, fmt)


# --------------------------------------------------------------------------------------------------- train (issue 4)
def _quiet_transformers() -> None:

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


@app.command("train")
@with_config_options(TRAIN_SETTINGS)
def train_cmd(
    out: Path = typer.Option(..., "--out", help="Run directory to write."),
    model: str = CONFIG.model,
    task: str = CONFIG.task,
    algo: str = CONFIG.algo,
    lr: Optional[float] = CONFIG.lr,
    base_batch: Optional[int] = CONFIG.base_batch,
    base_lr: Optional[float] = CONFIG.base_lr,
    rule: str = RULE_OR_LR,
    target: Optional[float] = TARGET,
    stop_on_target: bool = STOP_ON_TARGET,
    stop_hold: int = CONFIG.stop_hold,
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out from its last checkpoint."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format of the final summary."),
    settings: dict = None,
) -> None:
    """Train with GRPO (or PPO with --algo ppo): one optimizer step per P x G rollout batch, metrics in
    DIR/metrics.jsonl (canonical names), greedy evaluations in DIR/eval.jsonl, checkpoints for --resume."""
    from rlbatch.study.demo import DEMOS  # on use: --help loads no pandas / torch
    from rlbatch.runstore import read_run  # on use: --help loads no pandas / torch
    _quiet_transformers()
    if target is not None and not stop_on_target:
        raise UserError("rlbatch train uses --target only to stop at it: add --stop-on-target", field="target")
    check_score_target(target)
    lr_set, note = lr_fields(model=model, task=task, algo=algo, lr=lr, rule=rule, base_batch=base_batch,
                             base_lr=base_lr, calibration=DEMOS.get(model))
    if note:
        typer.echo(note, err=True)
    cfg = make_config(model=model, task=task, **lr_set, **trainer_fields(task, algo, settings),
                      **stop_fields(target, stop_on_target, stop_hold))
    check_device(cfg.device)
    from rlbatch.train.trainer import train  # imports torch: after the options are checked (a typo fails fast)

    was_done = resume and (Path(out) / "run.json").exists() and read_run(out).meta.status == "finished"
    steps_before = len(read_run(out).metrics) if was_done else None
    run_dir = train(cfg, out, resume=resume, progress=fmt is Format.table)
    run = read_run(run_dir)
    m, e = run.metrics, run.evals
    if was_done and len(m) == steps_before:  # newcomer finding 21: say it, do not just reprint the summary
        typer.echo(f"rlbatch: {out} had already finished ({run.meta.stop_reason}): nothing to resume; its summary:",
                   err=True)
    extra = getattr(run.meta, "model_extra", None) or {}
    critic_lr = extra.get("critic_lr", getattr(run.meta, "critic_lr", None))
    row = {"run": run.run_id, "status": run.meta.status, "stop_reason": run.meta.stop_reason,
           "steps": int(m["step"].iloc[-1]) if len(m) else 0,
           "samples_retained": int(m["samples/retained"].iloc[-1]) if len(m) else 0,
           "samples_generated": int(m["samples/generated"].iloc[-1]) if len(m) else 0,
           "lr": run.meta.lr, **({"critic_lr": critic_lr} if critic_lr is not None else {}),
           "first_eval_score": float(e["eval/score"].iloc[0]) if len(e) else None,
           "last_eval_score": float(e["eval/score"].iloc[-1]) if len(e) else None,
           "mean_step_s": float(m["time/step_s"].mean()) if len(m) else None,
           "wall_clock_s": float(m["time/wall_s"].iloc[-1]) if len(m) else None,
           "peak_memory_mib": _mib(getattr(run.meta, "peak_memory_bytes", None)),
           # an asynchronous run decodes in its generation process, whose KV cache this process does not see
           "peak_kv_cache_mib": (None if cfg.async_rollouts else _mib(getattr(run.meta, "peak_kv_cache_bytes", None))),
           "run_dir": str(run_dir)}
    cols = [(k, k, None) for k in row]
    if fmt is Format.json:
        print_json(row)
    elif fmt is Format.markdown:
        print(markdown_table([row], cols))
    else:
        kv = [{"field": k, "value": v} for k, v in row.items()]
        console().print(rich_table(kv, [("field", "field", None), ("value", "value", None)], title=f"{cfg.algo.upper()} run"))


def _mib(n) -> float | None:
    return None if n is None else round(float(n) / 2**20, 1)


@app.command("sweep")
@with_config_options(SWEEP_SETTINGS, into="trainer", hidden=True)
def sweep_cmd(
    base_batch: int = BASE_BATCH,
    base_lr: float = BASE_LR,
    batches: str = BATCHES,
    rule: str = RULE,
    fixed_lr_control: Optional[int] = FIXED_LR_CONTROL,
    group_sizes: Optional[str] = GROUP_SIZES,
    seeds: int = SEEDS,
    samples: Optional[int] = typer.Option(None, "--samples", help="local/ray/trl: budget of every trial in "
                                          "retained responses (as everywhere in rlbatch)."),
    generated_samples: Optional[int] = typer.Option(None, "--generated-samples", help="verl/openrlhf (and trl with "
                                                    "--dry-run/--submit): budget of every trial in generated "
                                                    "responses (steps = ceil(N / B); a launched framework cannot "
                                                    "stop at a retained count)."),
    target: Optional[float] = TARGET,
    stop_on_target: bool = STOP_ON_TARGET,
    hold: int = CONFIG.stop_hold,
    out: Path = typer.Option(..., "--out", help="Sweep directory (trials/, sweep.json, report.*)."),
    backend: str = typer.Option("local", "--backend", help="local (processes here), ray (Ray tasks), trl (each "
                                "trial with TRL's GRPOTrainer here; with --dry-run/--submit: launch it), or launch "
                                "the study on verl or openrlhf."),
    adaptive: bool = typer.Option(False, "--adaptive", help="Decide early, on every backend: re-plan at every new "
                                  "evaluation and stop a configuration once its predicted time-to-target interval "
                                  "lies above the best's (or its outcome is decided); every decision with its "
                                  "reason and evidence in OUT/adaptive.json. verl/openrlhf: the trials are launched "
                                  "here (or as Ray jobs with --submit) and watched through their logs. Its stops are "
                                  "predictions, not error-controlled tests (a stopped batch stays 'may be the "
                                  "fastest' unless beaten beyond noise): for seeds spent with a false 'faster' held "
                                  "at 5%, use --sequential."),
    chunk_samples: Optional[int] = typer.Option(None, "--chunk-samples", help="--adaptive (local/ray/trl): retained "
                                                "samples per start or extension of a trial (default --samples / 8); "
                                                "the plan is re-made after every round of new evaluations."),
    max_active: Optional[int] = typer.Option(None, "--max-active", min=1, help="--adaptive: configurations running "
                                             "at once (default all, launched together); with fewer, the next one "
                                             "in ladder order starts when a slot frees and races against the best "
                                             "time-to-target measured so far."),
    sequential: bool = typer.Option(False, "--sequential", help="local/trl/ray: the sequential study (as rlbatch "
                                    "demo runs it): 2 seeds per configuration, then 4, then 6 only for those still "
                                    "in the race; a configuration is called faster only past a boundary that keeps "
                                    "a false 'faster' at 5% over every look; the record in OUT/sequential.json, "
                                    "which the report then decides from. Replaces --seeds."),
    confirm: bool = typer.Option(False, "--confirm", help="--adaptive: run a configuration that reached the target "
                                 "on until its samples-to-target interval closes above (narrower rN intervals, at "
                                 "the samples past its crossing); default: it stops once three evaluations lie at "
                                 "or after its crossing."),
    force: bool = typer.Option(False, "--force", help="When --out holds a study of other settings: start over there, "
                               "the old study moved whole into OUT/replaced-<time>/ (default: refuse, naming the "
                               "settings that differ)."),
    address: Optional[str] = ADDRESS,
    cpus_per_trial: float = typer.Option(1, "--cpus-per-trial", help="ray: CPUs requested per trial."),
    gpus_per_trial: float = typer.Option(0, "--gpus-per-trial", help="ray: GPUs requested per trial."),
    max_retries: int = typer.Option(2, "--max-retries", help="ray: resubmissions of a failed trial."),
    verl_config: Optional[Path] = BASE_CONFIG,
    dry_run: bool = DRY_RUN,
    submit: bool = SUBMIT,
    model: str = CONFIG.model,
    task: str = CONFIG.task,
    workers: int = typer.Option(1, "--workers", min=1, help="Trial processes in parallel (1 torch thread each)."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format of the accounting."),
    algo: str = CONFIG.algo,
    trainer: dict = None,
) -> None:
    """Batch-size sweep: every B under the LR rule (+ a fixed-LR control) to the same sample budget, resumable
    (finished trials are skipped; local and ray share sweep.json), then the report (report.html, report.md,
    report.json in --out). --backend trl runs every trial with TRL's GRPOTrainer (same manifest and report);
    --backend verl|openrlhf (and trl with --dry-run/--submit) launches the study there instead (as rlbatch launch).
    --target is required for local, ray and --adaptive. Every trainer option of rlbatch train (--max-new-tokens,
    --eval-every, --device, ...) is taken too and applies to every trial: see rlbatch train --help."""
    _quiet_transformers()
    from rlbatch.study.ladder import build_ladder  # on use: --help loads no pandas / torch
    from rlbatch.study.run import launched, run_study  # on use: --help loads no pandas / torch
    from rlbatch.train.tasks import check_task  # on use: --help loads no numpy

    is_launch = launched(backend, dry_run, submit)
    if not is_launch:
        check_score_target(target)
        check_task(task)  # a mistyped --task is one line before anything is written, not a failure per trial
    samples = trial_budget(backend, samples, generated_samples, launched=is_launch)
    if sequential:
        from rlbatch.study.sequential import LOOKS

        if seeds not in (1, max(LOOKS)):
            raise UserError(f"--seeds sets the fixed design; --sequential spends {', '.join(map(str, LOOKS))} seeds "
                            "per configuration as its looks need: drop --seeds", field="seeds")
        seeds = max(LOOKS)
    opts = {**trainer_fields(task, algo, trainer, changed_only=True), **stop_fields(target, stop_on_target, hold)}
    ladder = build_ladder(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                          group_sizes=group_sizes or ("1" if algo == "ppo" else "8"), seeds=seeds,
                          fixed_lr_control=fixed_lr_control, samples=samples,
                          budget="generated" if is_launch else "retained", model=model, task=task, options=opts)
    res = run_study(ladder, backend=backend, out=out, target=target, workers=workers, adaptive=adaptive,
                    address=address, cpus_per_trial=cpus_per_trial, gpus_per_trial=gpus_per_trial,
                    max_retries=max_retries, base_config=verl_config, dry_run=dry_run, submit=submit,
                    progress=fmt is Format.table,
                    adaptive_options={k: v for k, v in (("chunk", chunk_samples), ("max_active", max_active),
                                                        ("confirm", confirm)) if v}, force=force,
                    sequential=sequential)
    if res["kind"] == "launch":
        print_launch(res["launch"], backend, out, dry_run, fmt)
        return
    if res["kind"] == "adaptive" and fmt is not Format.json:
        a = res["adaptive"]
        print(f"adaptive: recommended {a['recommended']} ({a['stopped_because']}); "
              f"{a['samples_spent']:.0f} retained samples spent")
    print_sweep_report(res["report"], fmt, out)


@app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output directory (resumable)."),
    model: str = CONFIG.model,
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per configuration: the fixed design (default: "
                                        "tiny's sequential study, 2 then 4 then 6 seeds where the decision needs "
                                        "them; the other presets' seeds)."),
    seed_offset: int = typer.Option(0, "--seed-offset", help="First seed: seeds OFFSET .. OFFSET+seeds-1 (another "
                                    "offset repeats the whole study on an independent seed set; use another --out)."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Retained-response budget per trial (default: "
                                          "the preset's; tiny trials stop at the target before it)."),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="Parallel trial processes (default min(2, CPUs))."),
    device: str = CONFIG.device,
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
    algo: str = CONFIG.algo,
    backend: str = typer.Option("local", "--backend", help="local (our trainer) or trl (every trial with TRL's "
                                "GRPOTrainer; GRPO only; needs the trl extra: pip install -e \".[trl]\")."),
    force: bool = typer.Option(False, "--force", help="When --out holds a study of other settings: start over there, "
                               "the old study moved whole into OUT/replaced-<time>/ (default: refuse, naming the "
                               "settings that differ)."),
    timing_rounds: Optional[int] = typer.Option(None, "--timing-rounds", min=0, help="After the study (before "
                                                "the sequential study, whose looks then use it), every "
                                                "configuration's step time measured again in this many rounds of "
                                                "short blocks interleaved across the configurations (the throughput "
                                                "the verdicts use; 0: the study's own step times; default 2 for "
                                                "the sequential study, else 3)."),
) -> None:
    """The main job: a real batch-size study on the tiny preset (B = 16 to 4096 on the square-root LR rule, past
    the critical batch, plus a fixed-LR control at B = 256, target 0.37; a sequential study: 2 seeds each, then
    more only for the batches still in the race, OUT/sequential.json), then the report: the accounting,
    where the aligned family ends, the rejected larger batches and the recommendation. --seed-offset repeats it on
    another seed set. --model: tiny (minutes on 2 CPU cores), smollm2-135m (GPU), gpu-small (one GPU, ~5 min on
    an H200) or gpu-small-toy (its CPU rehearsal); --algo ppo: the preset's PPO study (G = 1, value model)."""
    from rlbatch.study.demo import run_demo  # on use: --help loads no pandas / torch
    _quiet_transformers()

    rep = run_demo(out, preset=model, seeds=seeds, samples=samples, workers=workers, device=device,
                   progress=fmt is Format.table, algo=algo, backend=backend, seed_offset=seed_offset,
                   timing_rounds=timing_rounds, force=force)
    print_sweep_report(rep, fmt, out)
    if fmt is not Format.json:
        c = rep.get("demo_cost") or {}
        print(f"demo finished in {rep['demo_seconds']:.0f} s"
              + (f" ({c['trials']} trials: {c['train_cpu_s']:.0f} CPU-s of training steps and {c['eval_s']:.0f} s "
                 "of evaluation in all)" if c.get("trials") else ""))


# --------------------------------------------------------------------------------------------------- profile
@app.command("profile")
def profile_cmd(
    model: str = CONFIG.model,
    sequences: str = typer.Option("1,2,4,8,16", "--sequences", help="Comma-separated numbers of sequences decoded "
                                  "(and updated) at once."),
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
    from rlbatch.profile import COLUMNS, json_rows, run_profile, save_profile  # on use: --help loads no pandas / torch
    _quiet_transformers()

    sizes = parse_int_list(sequences, "sequences")
    if device:
        check_device(device)  # before the progress bar: an error is one line, no blank line before it
    tty = sys.stderr.isatty()  # a bar on a terminal; piped, plain stage lines (a bar there is one long line)
    with Progress(console=Console(stderr=True), transient=True, disable=not tty) as bar, \
            (contextlib.nullcontext(lambda _s: None) if tty else Stages(f"profile {model}")) as stage:
        task = bar.add_task(f"profiling {model}", total=len(sizes))
        stage(f"loading the model, then {len(sizes)} batch sizes")

        def advance(b: int) -> None:
            bar.advance(task)
            stage(f"B = {b} done ({bar.tasks[0].completed:.0f} of {len(sizes)})")

        prof = run_profile(model, sizes, new_tokens=new_tokens, prompt_tokens=prompt_tokens, device=device,
                           bandwidth_gbs=bandwidth_gbs, peak_tflops=peak_tflops, update=update,
                           repeats=repeats, progress=advance)
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
    metric: str = METRIC,
    reference: Optional[str] = REFERENCE,
    sets: Optional[list[str]] = SETS,
    mapping: Optional[list[str]] = MAPPING,
    log_format: Optional[str] = LOG_FORMAT,
    out: Optional[Path] = typer.Option(None, "--out", help="Write report.html, report.md (+PNG) and report.json "
                                       "here."),
    ema: Optional[float] = EMA,
    sustained: bool = SUSTAINED,
    clock: str = CLOCK,
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Read RL training logs (verl, TRL, OpenRLHF/TensorBoard, W&B, CSV/JSONL, rlbatch runs) and summarise each
    run; with --target, the end-to-end accounting (rN vs throughput gain) and which batch size is fastest."""
    from rlbatch.analyze import analyze, print_analysis  # on use: --help loads no pandas / scipy / matplotlib

    with Stages("analyze") as stage:  # a line on stderr once it takes 2 s, then each stage
        result = analyze(paths, target=target, metric=metric, reference=reference, out=out, log_format=log_format,
                         mapping=mapping, sets=sets, ema=ema, sustained=sustained, clock=clock, stage=stage)
    print_analysis(result, fmt.value)

# --------------------------------------------------------------------------------------------------- inspect
@app.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="A log (any format, a notebook, a directory of logs) or a launch: a "
                                "verl / OpenRLHF / TRL command line (a shell script) or config (YAML/JSON)."),
    batches: Optional[str] = typer.Option(None, "--batches", help="For a launch: comma-separated batch sizes B "
                                          "(responses per update) to give the rule's learning rate for (default: "
                                          "half and double the launch's B)."),
    rule: str = RULE,
    sets: Optional[list[str]] = SETS,
    mapping: Optional[list[str]] = MAPPING,
    log_format: Optional[str] = LOG_FORMAT,
    fmt: Format = typer.Option(Format.table, "--format", help="Output format (table and markdown print text)."),
) -> None:
    """Say what a log holds and where each number came from (format, step counters, which name became which
    metric, where P, G and lr came from), what is missing and the exact flag that supplies it; for a verl /
    OpenRLHF / TRL launch, its batch in framework-neutral terms and the learning rate the rule gives for another
    batch."""
    from rlbatch.explain import inspect_path, print_inspection  # on use: --help loads no pandas / torch
    res = inspect_path(path, log_format=log_format, mapping=mapping, sets=sets,
                       batches=parse_int_list(batches, "batches") if batches else None, rule=rule)
    print_inspection(res, fmt.value)

# --------------------------------------------------------------------------------------------------- launch
class LaunchBackend(str, Enum):
    verl = "verl"
    openrlhf = "openrlhf"
    trl = "trl"


@app.command("launch")
def launch_cmd(
    backend: LaunchBackend = typer.Option(..., "--backend", help="Framework to launch the study on."),
    base_batch: int = BASE_BATCH,
    base_lr: float = BASE_LR,
    batches: str = BATCHES,
    rule: str = RULE,
    group_size: int = CONFIG.group_size,
    samples: int = typer.Option(..., "--generated-samples", help="Budget of generated responses per trial "
                                "(steps = ceil(N / B); a launched framework cannot stop at a retained count, which "
                                "is what --samples means elsewhere)."),
    out: Path = typer.Option(..., "--out", help="Sweep directory (on a filesystem the cluster shares)."),
    base_config: Optional[Path] = BASE_CONFIG,
    fixed_lr_control: Optional[int] = FIXED_LR_CONTROL,
    seeds: int = SEEDS,
    dry_run: bool = DRY_RUN,
    submit: bool = SUBMIT,
    address: Optional[str] = ADDRESS,
    project: str = typer.Option("rlbatch", "--project", help="verl trainer.project_name (names the log folder)."),
    num_processes: int = typer.Option(1, "--num-processes", help="TRL: processes (GPUs) for accelerate launch."),
    trl_script: str = typer.Option("train_grpo.py", "--trl-script", help="TRL: your GRPO script (reads --config)."),
    critic_base_lr: Optional[float] = CONFIG.critic_base_lr,
    openrlhf_flags: str = typer.Option("dotted", "--openrlhf-flags", help="OpenRLHF flag names: dotted "
                                       "(>= 0.10.2, --rollout.batch_size) or flat (<= 0.10.1)."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Launch the study on verl, OpenRLHF or TRL: one command per trial with P = B/G, G, the scaled learning rate and
    steps from the sample budget. Writes OUT/launch.sh + OUT/trials/*.sh + OUT/plan.json (default), prints the
    commands (--dry-run) or submits them as Ray jobs (--submit --address). Then: rlbatch analyze OUT/logs.
    The same as rlbatch sweep --backend verl|openrlhf|trl (kept as an alias with the launcher-only options)."""
    from rlbatch.backends.launch import launch  # on use: --help loads no pandas / torch
    from rlbatch.study.ladder import build_ladder  # on use: --help loads no pandas / torch

    ladder = build_ladder(base_batch=base_batch, base_lr=base_lr, batches=batches, rule=rule,
                          group_sizes=[group_size], seeds=seeds, fixed_lr_control=fixed_lr_control, samples=samples,
                          budget="generated")
    res = launch(ladder, backend=backend.value, out=out, base_config=base_config, dry_run=dry_run, submit=submit,
                 address=address, project=project, num_processes=num_processes, trl_script=trl_script,
                 base_critic_lr=critic_base_lr, openrlhf_flags=openrlhf_flags)
    print_launch(res, backend.value, out, dry_run, fmt)


# --------------------------------------------------------------------------------------------------- plan
@app.command("plan")
def plan_cmd(
    paths: list[Path] = typer.Argument(..., help="Runs: run dirs, a sweep dir, any logs rlbatch analyze reads; or "
                                       "one accounting table (CSV with samples_to_target, as rlbatch account)."),
    target: Optional[float] = typer.Option(None, "--target", help="Target score (required for runs; a table is "
                                           "already at its target)."),
    reference: Optional[str] = REFERENCE,
    candidates: Optional[str] = typer.Option(None, "--candidates", help="Comma-separated batch sizes to predict "
                                             "besides the runs' own, e.g. 2048,4096."),
    profile: Optional[Path] = typer.Option(None, "--profile", help="Throughput profile JSON (rlbatch profile) for "
                                           "every candidate's throughput."),
    metric: str = METRIC,
    tolerance: float = typer.Option(0.1, "--tolerance", help="Aligned family: rN <= 1 + tolerance."),
    sets: Optional[list[str]] = SETS,
    mapping: Optional[list[str]] = MAPPING,
    log_format: Optional[str] = LOG_FORMAT,
    clock: str = CLOCK,
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """Align, then accelerate: predict each candidate batch's time-to-target (rN / throughput gain, with an
    interval) from finished runs or short probes and a throughput model, and recommend the fastest."""
    from rlbatch.plan import make_plan, print_plan  # on use: --help loads no pandas / scipy

    cands = parse_int_list(candidates, "candidates") if candidates else None
    with Stages("plan") as stage:  # a line on stderr once it takes 2 s, then every 10 s (finding 10: 14 s silent)
        stage("reading the runs, estimating each configuration and predicting the candidates")
        plan = make_plan(paths, target=target, reference=reference, profile=profile, metric=metric, tol=tolerance,
                         candidates=cands, log_format=log_format, sets=sets, mapping=mapping, clock=clock)
    print_plan(plan, fmt.value)


def _one_line_help() -> None:
    """Each command's help as flowing text: the docstring's source line breaks removed (rich keeps them, which
    breaks lines mid-sentence in ``--help``), and its first sentence as the one-line summary in ``rlbatch --help``."""
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
    max_updates: Optional[int] = typer.Option(None, "--max-updates", help="Exit after this many checks "
                                              "(--interval apart; a check without new lines counts too). Without it, "
                                              "watch exits once every trial has finished."),
    metric: str = METRIC,
    log_format: Optional[str] = LOG_FORMAT,
    prompts_per_step: Optional[int] = typer.Option(None, "--prompts-per-step", help="P for logs that lack it."),
    group_size: Optional[int] = typer.Option(None, "--group-size", help="G for logs that lack it."),
) -> None:
    """Live view of one running job or a whole sweep, re-read as it grows: score vs retained samples with the fitted
    curve, predicted samples-to-target and time-to-target with intervals, throughput so far, and for a sweep the
    plan's ranking and which trials the adaptive loop stopped (from the sweep's adaptive.json, with its reason) or
    would stop. Piped: one line per configuration per update, where S is the retained samples so far, S* the
    samples-to-target [95% interval] (measured, or predicted by the fit), T* the time-to-target in seconds, X the
    throughput in retained samples per second and rel.time the plan's time-to-target relative to the reference.
    Exits when every trial has finished (rlbatch run directories; a foreign log does not say, so watch it with
    --max-updates or Ctrl-C), or, with one line saying so, when a local sweep or run was interrupted (no process
    holds it). Only reads: nothing is written to PATH."""
    from rlbatch.watch import watch  # on use: --help loads no pandas / scipy

    watch(path, target=target, fmt=fmt, once=once, interval=interval, max_updates=max_updates, metric=metric,
          log_format=log_format, prompts_per_step=prompts_per_step, group_size=group_size)



def main() -> None:
    """Console entry point: runs the Typer app. A :class:`UserError` prints one line and exits with code 2; so
    does a usage error (unknown option, missing argument, bad value: click's message and the command's ``--help``
    on one line); warnings go through :func:`_show_warning`."""
    warnings.showwarning = _show_warning
    # no library notices in the user's terminal (transformers' attention-mask advice and the like: rlbatch passes
    # its masks), and no progress bars of a library written as one long line into a pipe or file (newcomer finding
    # 22); a user's own setting of these variables wins
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if not sys.stderr.isatty():
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
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
    except Interrupted as err:
        print(f"rlbatch: {err}", file=sys.stderr)
        sys.exit(130)
    except (KeyboardInterrupt, typer.Abort):
        print("rlbatch: interrupted", file=sys.stderr)
        sys.exit(130)
    if rv == 130:  # Ctrl-C that the command-line framework caught itself (it returns 130 without a word)
        print("rlbatch: interrupted", file=sys.stderr)
    sys.exit(rv if isinstance(rv, int) else 0)


_one_line_help()  # after every command is registered

if __name__ == "__main__":
    main()

