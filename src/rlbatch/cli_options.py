"""The command line's one vocabulary: every option that several ``rlbatch`` commands take is defined here once.

- :data:`CONFIG` holds one Typer option per :class:`rlbatch.train.config.TrainConfig` field, built from the field
  (:func:`rlbatch.train.config.option_spec`: flag, default, help), as ``transformers.HfArgumentParser`` builds
  argparse from a dataclass; ``train``, ``sweep``, ``demo``, ``launch`` and ``profile`` take their trainer settings
  from it, so a setting has one name, one type, one default and one help everywhere (the TRL entry point builds
  its argparse from the same specs). In a signature: ``temperature: float = CONFIG.temperature``.
- The study options (``--base-batch``, ``--batches``, ``--rule``, ``--target``, ...) are the constants below.
- :data:`DEPRECATED`: old spellings, accepted for one release as hidden aliases (not in ``--help``) that print one
  deprecation line on stderr; :class:`AliasGroup` rewrites them before a command parses its arguments.

Names: a list-valued option is the plural of its scalar (``--group-sizes`` is comma-separated G values where
``--group-size`` / ``-G`` is one G; ``--batches`` comma-separated B); ``--target`` is always the held-out score.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import typer
from typer.core import TyperGroup

from rlbatch.train.config import TrainConfig, option_spec


def config_option(name: str, **kw: Any) -> Any:
    """The Typer option of :class:`TrainConfig` field ``name``: its flags, default and help
    (:func:`rlbatch.train.config.option_spec`); ``kw`` passes further ``typer.Option`` settings."""
    spec = option_spec(name)
    return typer.Option(spec.default, *spec.flags, help=spec.help, **kw)


#: One option per TrainConfig field with a command-line form (all but ``adam_betas``).
CONFIG = SimpleNamespace(**{n: config_option(n) for n in TrainConfig.model_fields if n != "adam_betas"})

# ----------------------------------------------------------------------------------------- study options
# the LR rule's base: TrainConfig fields, required where a study is built on them (lr, sweep, launch)
BASE_BATCH = typer.Option(..., "--base-batch", help=option_spec("base_batch").help)
BASE_LR = typer.Option(..., "--base-lr", help=option_spec("base_lr").help)
BATCHES = typer.Option(..., "--batches", help="Comma-separated batch sizes B (responses per update), e.g. "
                       "16,32,64,128.")
RULE = typer.Option("sqrt", "--rule", help="LR rule: sqrt (Adam, Malladi et al. 2022; the paper's), linear (SGD, "
                    "Goyal et al. 2017) or none (fixed-LR control); an explicit --lr wins.")
GROUP_SIZES = typer.Option(None, "--group-sizes", help="Comma-separated G values (P = B / G); default 8 for grpo, "
                           "1 for ppo.")
TARGET = typer.Option(None, "--target", help="Target held-out score (eval/score).")
STOP_ON_TARGET = typer.Option(False, "--stop-on-target", help="Stop a run once --target is reached and held for "
                              "--stop-hold evaluations.")
FIXED_LR_CONTROL = typer.Option(None, "--fixed-lr-control", help="Add the control: this batch size trained with the "
                                "unscaled lr0.")
SEEDS = typer.Option(1, "--seeds", help="Seeds per configuration.")
ADDRESS = typer.Option(None, "--address", help="ray: cluster to join (auto, HOST:6379, ray://HOST:10001); "
                       "verl/openrlhf/trl --submit: the Ray dashboard, http://HEAD:8265.")
DRY_RUN = typer.Option(False, "--dry-run", help="verl/openrlhf/trl: print the commands; write nothing.")
SUBMIT = typer.Option(False, "--submit", help="verl/openrlhf/trl: submit each trial as a Ray job to --address.")
BASE_CONFIG = typer.Option(None, "--base-config", help="verl/openrlhf/trl: your base settings: Hydra overrides "
                           "(verl), flags (OpenRLHF) or a GRPOConfig YAML (TRL); one per line or YAML.")


# ----------------------------------------------------------------------------------------- deprecated spellings
@dataclass(frozen=True)
class Alias:
    """An old spelling: replaced by ``new`` (which takes the old one's value when ``value``), then ``then`` (flags
    the old spelling implied)."""

    new: str
    value: bool = True
    then: tuple[str, ...] = ()

    def words(self, old: str) -> tuple[str, str]:
        """The old and the new spelling, in words (for the deprecation line)."""
        x = " X" if self.value else ""
        return old + x, " ".join([self.new + x, *self.then])


#: command -> {old spelling: its replacement}; each old spelling is accepted (hidden) for one release.
DEPRECATED: dict[str, dict[str, Alias]] = {
    "train": {"--stop-at-target": Alias("--target", then=("--stop-on-target",))},
    "sweep": {"--stop-at-target": Alias("--stop-on-target", value=False), "--verl-config": Alias("--base-config")},
    "launch": {"--critic-lr": Alias("--critic-base-lr"), "--verl-config": Alias("--base-config")},
    "demo": {"--preset": Alias("--model")},
    "profile": {"--batches": Alias("--sequences")},
    "inspect": {"--batch": Alias("--batches")},
}


def rewrite_deprecated(command: str, args: list[str], warn=None) -> list[str]:
    """``args`` of ``command`` with every deprecated spelling (:data:`DEPRECATED`, also ``--old=value``) replaced by
    its new one; ``warn(line)`` (default: print to stderr) gets one deprecation line per old spelling used. Nothing
    after ``--`` is touched."""
    table = DEPRECATED.get(command, {})
    out: list[str] = []
    pending: tuple[str, ...] = ()
    warned: set[str] = set()
    rest = iter(args)
    for tok in rest:
        if tok == "--":
            out += [tok, *pending, *rest]
            pending = ()
            break
        old, eq, val = tok.partition("=")
        alias = table.get(old)
        if alias is None:
            out.append(tok)
            if pending:
                out += pending
                pending = ()
            continue
        if old not in warned:
            warned.add(old)
            was, now = alias.words(old)
            line = f"rlbatch: deprecated: '{command} {was}' is now '{now}'; the old spelling goes in the next release"
            (warn or (lambda s: print(s, file=sys.stderr)))(line)
        if not alias.value or eq:
            out += [alias.new + (f"={val}" if eq else ""), *alias.then]
        else:  # the value is the next token: the implied flags go after it
            out.append(alias.new)
            pending = alias.then
    return out + list(pending)


class AliasGroup(TyperGroup):
    """The ``rlbatch`` group: a command's deprecated spellings (:data:`DEPRECATED`) are rewritten to the new ones,
    with one deprecation line on stderr, before the command parses its arguments."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        return name, cmd, rewrite_deprecated(name or "", rest)
