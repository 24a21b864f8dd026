"""The TRL training entry point rlbatch ships: one GRPO run with TRL's ``GRPOTrainer`` on an rlbatch task and model,
written as a run-store directory by :mod:`rlbatch.integrations.trl_callback` (``rlbatch sweep --backend trl`` runs one per
trial, in its own process; no user script is needed).

    python -m rlbatch.integrations.trl_train --out runs/t1 --model tiny --task arithmetic -P 16 -G 8 --lr 1e-4 \\
        --samples 8192 [--micro-batch-size 8 --max-new-tokens 5 --eval-every 1024 --eval-size 1024 ...]
    python -m rlbatch.integrations.trl_train --spec trial.json --out runs/t1     # a sweep trial (TrialSpec JSON)

The options are those of our trainer (:class:`rlbatch.train.config.TrainConfig`, same defaults), mapped onto
``GRPOConfig`` (trl 1.16):

- P, G: ``num_generations`` = G and ``generation_batch_size`` = B = P x G completions, one generation batch per
  optimizer step (``per_device_train_batch_size`` = the micro-batch m, ``gradient_accumulation_steps`` = B / m,
  ``steps_per_generation`` = B / m, ``num_iterations`` = 1);
- the lr (the rule's scaled lr for a sweep trial), constant (``lr_scheduler_type="constant"``, no warm-up), AdamW with
  our betas / eps / weight decay; ``max_grad_norm``; ``epsilon`` = clip_eps; ``beta`` = kl_coef;
  ``loss_type="dapo"`` (token-level mean over the batch: our normalisation); ``scale_rewards="group"``;
  sampling at ``temperature``, ``top_p=1``, ``top_k=0``, ``max_completion_length`` = max_new_tokens; fp32;
- prompts: step s uses the P prompts ``task.sample(numpy.random.default_rng([seed, s]), P)``, exactly our trainer's
  (``shuffle_dataset=False``); the task's scorer is the reward function;
- the model: a preset is saved once as a Hugging Face model directory (``$RLBATCH_CACHE/hf/<preset>``) and loaded
  from there; a local model directory is used as is; on CUDA with vLLM installed, ``use_vllm=True`` in colocate mode;
- budget: training stops once ``samples`` retained responses were trained on (``max_steps``, when given, is a cap);
- evaluation: our greedy held-out evaluation (:func:`rlbatch.train.rollout.evaluate`) at the start, every
  ``eval_every`` retained samples and at the end;
- checkpoints: TRL's own (``OUT/checkpoints/checkpoint-N``, every ``checkpoint_every`` steps, the last 2 kept);
  running the same command again resumes from the newest one, or returns at once if ``run.json`` says finished.

Exit code 2 with one line on stderr for bad options (a :class:`rlbatch.errors.UserError`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from rlbatch.cli_options import RULE
from rlbatch.errors import UserError
from rlbatch.scaling import RULES
from rlbatch.study.demo import DEMOS
from rlbatch.study.ladder import TrialSpec
from rlbatch.train.config import add_config_arguments, lr_fields, make_config, trainer_fields

CHECKPOINTS = "checkpoints"


def hf_model_dir(model: str) -> Path:
    """The Hugging Face model directory of ``model``: a preset (``tiny``, ``tiny-random``, ``smollm2-135m``) is
    built by :func:`rlbatch.train.models.load_model` and saved once (model + tokenizer) under
    ``$RLBATCH_CACHE/hf/<preset>``; anything else must be an existing model directory and is returned as is."""
    from rlbatch.train.model_base import cache_root, save_pretrained_atomic
    from rlbatch.train.models import PRESETS, load_model

    if model not in PRESETS:
        path = Path(model).expanduser()
        if not (path / "config.json").is_file():
            raise UserError(f"unknown model {model!r}: not a preset ({', '.join(PRESETS)}) nor a model directory",
                            field="model")
        return path
    from rlbatch.train.models import TINY_VERSION

    target = cache_root() / "hf" / (f"{model}-{TINY_VERSION}" if model.startswith("tiny") else model)
    if not (target / "config.json").is_file():
        m, tok = load_model(model)
        save_pretrained_atomic(m, tok, target)
    return target


def build_dataset(task, cfg, steps: int):
    """``datasets.Dataset`` with the prompts of steps 1..``steps`` in order (P per step, as our trainer draws
    them) and their index ``item`` into the returned item list. Returns ``(dataset, items)``."""
    from datasets import Dataset

    items = []
    for s in range(1, steps + 1):
        items += task.step_prompts(cfg.seed, s, cfg.prompts_per_step)
    return Dataset.from_dict({"prompt": [it.prompt for it in items], "item": list(range(len(items)))}), items


def reward_function(task, items):
    """The task's verifier as a TRL reward function (``reward(prompts, completions, item, **kw) -> [float]``);
    conversational completions (lists of messages) are scored on the assistant's text."""
    def rlbatch_task(prompts, completions, item, **kw):
        out = []
        for i, c in zip(item, completions):
            text = c[-1]["content"] if isinstance(c, list) else c
            out.append(float(task.score(items[int(i)], text)))
        return out

    return rlbatch_task


def grpo_config(cfg, out: Path, max_steps: int, device: str):
    """The ``GRPOConfig`` of one run (see the module docstring for the mapping)."""
    from trl import GRPOConfig

    micro = cfg.resolved_micro()
    b = cfg.batch_size
    use_vllm = device.startswith("cuda") and importlib.util.find_spec("vllm") is not None
    return GRPOConfig(
        output_dir=str(out / CHECKPOINTS), run_name=cfg.run_id or out.name,
        per_device_train_batch_size=micro, gradient_accumulation_steps=b // micro, num_generations=cfg.group_size,
        generation_batch_size=b, num_iterations=1, max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature, top_p=1.0, top_k=0, learning_rate=cfg.resolved_lr(),
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=cfg.weight_decay, adam_beta1=cfg.adam_betas[0],
        adam_beta2=cfg.adam_betas[1], adam_epsilon=cfg.adam_eps, max_grad_norm=cfg.max_grad_norm or 0.0,
        max_steps=max_steps, beta=cfg.kl_coef, epsilon=cfg.clip_eps, loss_type="dapo", scale_rewards="group",
        bf16=False, fp16=False, gradient_checkpointing=False, logging_steps=1, report_to=[],
        save_strategy="steps", save_steps=cfg.checkpoint_every, save_total_limit=2, shuffle_dataset=False,
        seed=cfg.seed, use_cpu=device == "cpu", dataloader_num_workers=0, disable_tqdm=True,
        log_completions=False, use_vllm=use_vllm, **({"vllm_mode": "colocate"} if use_vllm else {}))


def train_trl(cfg, out_dir: Path | str) -> Path:
    """Run (or resume) one GRPO run with TRL as configured by ``cfg`` (a :class:`rlbatch.train.config.TrainConfig`)
    into the run-store directory ``out_dir``; returns it. Returns at once when ``run.json`` says finished."""
    import torch
    from transformers.trainer_callback import PrinterCallback
    from transformers.trainer_utils import get_last_checkpoint
    from trl import GRPOTrainer

    from rlbatch.integrations.trl_callback import attach
    from rlbatch.runstore import is_run_dir, read_meta
    from rlbatch.train.models import load_model
    from rlbatch.train.rollout import evaluate
    from rlbatch.train.tasks import get_task

    out = Path(out_dir)
    if is_run_dir(out) and read_meta(out).status == "finished":
        return out
    if cfg.algo != "grpo":
        raise UserError("the TRL backend runs GRPO (TRL's GRPOTrainer); use --backend local for PPO", field="algo")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    lr, micro = cfg.resolved_lr(), cfg.resolved_micro()
    if micro > cfg.batch_size:
        raise UserError(f"micro-batch {micro} exceeds B = {cfg.batch_size}", field="micro_batch_size")
    task = get_task(cfg.task, seed=cfg.split_seed, eval_size=cfg.eval_size)
    model, tok = load_model(str(hf_model_dir(cfg.model)), cfg.device)
    # the retained-sample budget ends the run; the step cap only sizes the prompt list (>= 25% retention)
    max_steps = cfg.max_steps or 4 * math.ceil(cfg.samples / cfg.batch_size) + 8
    ds, items = build_dataset(task, cfg, max_steps)
    args = grpo_config(cfg, out, max_steps, cfg.device)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward_function(task, items)], args=args, train_dataset=ds,
                          processing_class=tok)
    trainer.remove_callback(PrinterCallback)  # TRL's per-step log dict on stdout: the run store has it all
    meta = dict(model=cfg.model, task=cfg.task, lr_rule=cfg.lr_rule, base_batch=cfg.base_batch,
                base_lr=cfg.base_lr, config=cfg.model_dump(mode="json"), train_prompts=task.train_size,
                eval_items=len(task.eval_items), trl_vllm=bool(args.use_vllm))
    assert lr == args.learning_rate

    def eval_fn(m):
        score, n, _ = evaluate(m, tok, task, cfg.max_new_tokens, cfg.eval_batch_size)
        return score, n

    attach(trainer, out, run_id=cfg.run_id or out.name, meta=meta, eval_fn=eval_fn, eval_every=cfg.eval_every,
           max_samples=cfg.samples)
    last = get_last_checkpoint(str(out / CHECKPOINTS)) if (out / CHECKPOINTS).is_dir() else None
    trainer.train(resume_from_checkpoint=last)
    return out


#: The TrainConfig fields the TRL entry point takes as flags (same names, types, defaults and help as rlbatch train).
TRL_FIELDS = ("model", "task", "prompts_per_step", "group_size", "lr", "base_batch", "base_lr", "samples", "seed",
              "micro_batch_size", "max_new_tokens", "eval_every", "eval_size", "max_grad_norm", "checkpoint_every",
              "max_steps", "device", "threads", "run_id")


def parser() -> argparse.ArgumentParser:
    """The entry point's argparse: ``--out``, ``--spec``, ``--rule`` and the :data:`TRL_FIELDS` options, built from
    the same definitions as ``rlbatch train`` (:func:`rlbatch.train.config.add_config_arguments`, ``--rule`` from
    :data:`rlbatch.cli_options.RULE`)."""
    ap = argparse.ArgumentParser(prog="python -m rlbatch.integrations.trl_train",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="run-store directory to write (resumed if it exists)")
    ap.add_argument("--spec", default=None, help="a sweep trial (rlbatch.backends.local.TrialSpec JSON); the flags "
                    "below are then ignored")
    ap.add_argument("--rule", default=RULE.default, choices=list(RULES), help=RULE.help)
    add_config_arguments(ap, TRL_FIELDS)
    return ap


def config_from_args(a: argparse.Namespace):
    """The :class:`rlbatch.train.config.TrainConfig` of the command line (``--spec`` or the flags): the learning
    rate, the preset's calibrated base and the per-task token cap as ``rlbatch train`` resolves them."""
    if a.spec:
        try:
            spec = TrialSpec(**json.loads(Path(a.spec).read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError) as err:
            raise UserError(f"not a trial spec: {str(err).splitlines()[0]}", path=a.spec) from None
        return spec.train_config()
    lr_set, note = lr_fields(model=a.model, task=a.task, algo="grpo", lr=a.lr, rule=a.rule, base_batch=a.base_batch,
                             base_lr=a.base_lr, calibration=DEMOS.get(a.model))
    if note:
        print(note, file=sys.stderr)
    settings = {n: getattr(a, n) for n in TRL_FIELDS if n not in ("model", "task", *lr_set)}
    return make_config(model=a.model, task=a.task, **lr_set, **trainer_fields(a.task, "grpo", settings))


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_DISABLED", "true")
    try:
        if importlib.util.find_spec("trl") is None:
            raise UserError("the TRL backend needs TRL: pip install 'rlbatch[trl]'")
        train_trl(config_from_args(a), a.out)
    except UserError as err:
        print(f"rlbatch: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
