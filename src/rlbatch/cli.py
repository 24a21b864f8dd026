"""The ``rlbatch`` command line (Typer). Every command: ``--help``, ``--format table|json|markdown`` where it
prints results, and one-line errors with exit code 2 for bad input (:class:`rlbatch.errors.UserError`)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from rlbatch.errors import UserError
from rlbatch.output import markdown_table, print_json, rich_table, console

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


PAPER_TABLE = Path(__file__).parent / "data" / "hunyuan_grpo_accounting.csv"


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
    table: Path = typer.Argument(..., help="CSV with columns run, prompts_per_step, group_size, lr, "
                                 "samples_to_target and wall_clock_h (or wall_clock_s / throughput_samples_per_s)."),
    reference: str = typer.Option(..., "--reference", help="Run to compare against (rN = 1 by definition)."),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """End-to-end accounting: rN, relative throughput, relative time-to-target, and whether each run is faster
    than the reference (faster iff relative throughput > rN)."""
    from rlbatch.analysis.accounting import account, read_accounting_csv

    rows = account(read_accounting_csv(table), reference)
    _print_accounting(rows, reference, fmt)


# --------------------------------------------------------------------------------------------------- train (issue 4)
def _quiet_transformers() -> None:
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


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
    base_lr: Optional[float] = typer.Option(None, "--base-lr", help="lr0 of the LR rule."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule when --lr is not given: sqrt, linear, none."),
    samples: int = typer.Option(4096, "--samples", help="Retained-sample budget."),
    out: Path = typer.Option(..., "--out", help="Run directory to write."),
    seed: int = typer.Option(0, "--seed"),
    micro_batch_size: Optional[int] = typer.Option(None, "--micro-batch-size", help="Responses per micro-batch "
                                                   "(must divide P x G; default gcd(P x G, 8))."),
    max_new_tokens: int = typer.Option(8, "--max-new-tokens", help="Cap on generated tokens per response."),
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
) -> None:
    """Train with GRPO: one optimizer step per P x G rollout batch, metrics in DIR/metrics.jsonl (canonical names),
    greedy evaluations in DIR/eval.jsonl, checkpoints for --resume."""
    _quiet_transformers()
    from rlbatch.train.trainer import make_config, train

    cfg = make_config(model=model, task=task, prompts_per_step=prompts_per_step, group_size=group_size, lr=lr,
                      lr_rule=rule if lr is None else None, base_batch=base_batch, base_lr=base_lr, samples=samples,
                      seed=seed, micro_batch_size=micro_batch_size, max_new_tokens=max_new_tokens,
                      eval_every=eval_every, eval_size=eval_size, checkpoint_every=checkpoint_every, kl_coef=kl_coef,
                      max_grad_norm=max_grad_norm or None, stop_at_target=target, stop_hold=hold,
                      max_steps=max_steps, device=device)
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
           "wall_clock_s": float(m["time/wall_s"].iloc[-1]) if len(m) else None, "run_dir": str(run_dir)}
    cols = [(k, k, None) for k in row]
    if fmt is Format.json:
        print_json(row)
    elif fmt is Format.markdown:
        print(markdown_table([row], cols))
    else:
        kv = [{"field": k, "value": v} for k, v in row.items()]
        console().print(rich_table(kv, [("field", "field", None), ("value", "value", None)], title="GRPO run"))


@app.command("sweep")
def sweep_cmd(
    base_batch: int = typer.Option(..., "--base-batch", help="B0: the reference batch (responses per update)."),
    base_lr: float = typer.Option(..., "--base-lr", help="lr0: the learning rate tuned at B0."),
    batches: str = typer.Option(..., "--batches", help="Comma-separated batch sizes B, e.g. 16,32,64,128."),
    rule: str = typer.Option("sqrt", "--rule", help="LR rule: sqrt, linear or none."),
    fixed_lr_control: Optional[int] = typer.Option(None, "--fixed-lr-control", help="Also run this B at lr0."),
    group_sizes: str = typer.Option("8", "--group-sizes", help="Comma-separated G values (P = B / G)."),
    seeds: int = typer.Option(1, "--seeds", help="Seeds per configuration."),
    samples: int = typer.Option(..., "--samples", help="Retained-sample budget of every trial."),
    target: float = typer.Option(..., "--target", help="Target held-out score for samples-/time-to-target."),
    stop_at_target: bool = typer.Option(False, "--stop-at-target", help="Stop a trial once the target is reached "
                                        "and held (--stop-hold evaluations)."),
    hold: int = typer.Option(2, "--stop-hold"),
    out: Path = typer.Option(..., "--out", help="Sweep directory (trials/, sweep.json, report.*)."),
    model: str = typer.Option("tiny", "--model", help="Preset or model directory."),
    task: str = typer.Option("arithmetic", "--task", help="Task name or path."),
    micro_batch_size: Optional[int] = typer.Option(None, "--micro-batch-size"),
    max_new_tokens: int = typer.Option(8, "--max-new-tokens"),
    eval_every: int = typer.Option(2048, "--eval-every", help="Retained samples between evaluations."),
    eval_size: Optional[int] = typer.Option(None, "--eval-size"),
    workers: int = typer.Option(1, "--workers", help="Trial processes in parallel (1 torch thread each)."),
    device: str = typer.Option("cpu", "--device"),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format of the accounting."),
) -> None:
    """Batch-size sweep: every B under the LR rule (+ a fixed-LR control) to the same retained-sample budget,
    resumable (finished trials are skipped), then the report (report.html, report.md, report.json in --out)."""
    _quiet_transformers()
    from rlbatch.scaling import parse_int_list, scaled_lr
    from rlbatch.sweep.local import plan_trials, run_sweep
    from rlbatch.sweep.study import report_sweep

    scaled_lr(base_batch, base_batch, base_lr, rule)
    opts = dict(micro_batch_size=micro_batch_size, max_new_tokens=max_new_tokens, eval_every=eval_every,
                eval_size=eval_size, device=device)
    if stop_at_target:
        opts.update(stop_at_target=target, stop_hold=hold)
    specs = plan_trials(base_batch=base_batch, base_lr=base_lr, batches=parse_int_list(batches), rule=rule,
                        group_sizes=parse_int_list(group_sizes, "group-sizes"), seeds=seeds,
                        fixed_lr_control=fixed_lr_control, samples=samples, model=model, task=task, options=opts)
    settings = dict(base_batch=base_batch, base_lr=base_lr, batches=parse_int_list(batches), rule=rule,
                    fixed_lr_control=fixed_lr_control, seeds=seeds, samples=samples, target=target, model=model,
                    task=task, options=opts, workers=workers)
    run_sweep(specs, out, workers=workers, threads=1, settings=settings, progress=fmt is Format.table)
    rep = report_sweep(out, target=target, title=f"rlbatch sweep ({model}, {task})")
    _print_sweep_report(rep, fmt, out)


def _print_sweep_report(rep: dict, fmt: Format, out: Path) -> None:
    rows = rep.get("accounting") or []
    cols = [("run", "run", None), ("batch_size", "B", None), ("samples_to_target", "samples-to-target", ".0f"),
            ("rN", "rN", ".2f"), ("relative_throughput", "rel. throughput", ".2f"),
            ("relative_time", "rel. time-to-target", ".2f"), ("faster_than_reference", "faster", None)]
    if fmt is Format.json:
        print_json(rep)
        return
    if fmt is Format.markdown:
        print(markdown_table(rows, cols, none="not reached"))
        print(f"\n{rep.get('recommendation') or ''}\n\nReport: {out}/report.html, report.md, report.json")
        return
    con = console()
    con.print(rich_table(rows, cols, title="End-to-end accounting (seed-averaged)", none="not reached"))
    con.print(rep.get("recommendation") or "")
    con.print(f"Report: {out}/report.html, {out}/report.md, {out}/report.json")


@app.command("demo")
def demo_cmd(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="Output directory (resumable)."),
    preset: str = typer.Option("tiny", "--preset", help="tiny (minutes on 2 CPU cores) or smollm2-135m (GPU)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seeds per configuration (default: the preset's)."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Retained-sample budget per trial."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Parallel trial processes (default min(2, CPUs))."),
    device: str = typer.Option("cpu", "--device"),
    fmt: Format = typer.Option(Format.table, "--format", help="Output format."),
) -> None:
    """The main job: a real batch-size study (sqrt LR rule at 4 batch sizes + a fixed-LR control, several seeds)
    on the tiny preset, then the report with the accounting and the recommendation."""
    _quiet_transformers()
    from rlbatch.sweep.demo import run_demo

    rep = run_demo(out, preset=preset, seeds=seeds, samples=samples, workers=workers, device=device,
                   progress=fmt is Format.table)
    _print_sweep_report(rep, fmt, out)
    if fmt is not Format.json:
        print(f"demo finished in {rep['demo_seconds']:.0f} s")


def main() -> None:
    """Console entry point: runs the Typer app; a :class:`UserError` prints one line and exits with code 2."""
    try:
        app()
    except UserError as err:
        print(f"rlbatch: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("rlbatch: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
