"""The command line's one vocabulary (src/rlbatch/cli_options.py, src/rlbatch/train/config.py): every option that two
commands share has one name, one type and one default; every TrainConfig field a command exposes carries the
config's default and help; the old spellings still work for one release, hidden, with one deprecation line; the TRL
entry point's argparse is built from the same definitions; CLI startup imports no heavy library."""

import importlib
import re
import subprocess
import sys
import types
import typing
from collections import defaultdict

import pytest
import typer
from typer.testing import CliRunner

from rlbatch import cli
from rlbatch.cli_options import DEPRECATED, RULE, rewrite_deprecated
from rlbatch.integrations.trl_train import TRL_FIELDS, config_from_args, parser
from rlbatch.train.config import TrainConfig, option_spec

#: (command, long flag) -> why the option deliberately differs from the other commands' option of that name.
EXCEPTIONS = {
    ("launch", "--backend"): "a choice of the three launch frameworks, required (sweep/demo: any backend, local)",
    ("train", "--base-batch"): "optional in train (an explicit --lr, or the preset's calibrated base); required "
                               "where a study is built on it (lr, sweep, launch)",
    ("train", "--base-lr"): "as --base-batch",
    ("inspect", "--batches"): "optional: default half and double the inspected launch's B",
    ("profile", "--device"): "default None = cuda when available: a profile measures the accelerator",
    ("watch", "--format"): "watch's own modes (auto, live, lines, json)",
    ("sweep", "--generated-samples"): "the budget kind follows the backend (rlbatch.train.config.trial_budget)",
    ("watch", "--group-size"): "a metadata override for logs that lack G (None = read it from the log)",
    ("sweep", "--group-size"): "G or a comma list of G values (also --group-sizes): a sweep may cross G with B",
    ("watch", "--prompts-per-step"): "a metadata override for logs that lack P (None = read it from the log)",
    ("demo", "--out"): "the demo writes runs/demo by default",
    ("profile", "--out"): "the profile writes runs/profile by default",
    ("analyze", "--out"): "optional report directory",
    ("sweep", "--samples"): "the study budget: --samples or --generated-samples by backend (trial_budget)",
    ("demo", "--samples"): "default None = the preset's study budget",
    ("demo", "--seeds"): "default None = the preset's seeds",
    ("demo", "--workers"): "default None = min(2, CPUs)",
}


def _type(param) -> str:
    ann = param.type_descriptor.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    return getattr(ann, "__name__", str(ann))


def _long(param) -> str:
    return next(o for o in param.opts if o.startswith("--"))


def _options():
    """{long flag: {command: click option}} over every command of the rlbatch app."""
    group = typer.main.get_command(cli.app)
    by = defaultdict(dict)
    for name, cmd in group.commands.items():
        for p in cmd.params:
            if p.param_type_name == "option" and p.name != "help":
                by[_long(p)][name] = p
    return by


def _signature(p):
    return (_type(p), "REQUIRED" if p.required else p.default, tuple(sorted(p.opts + p.secondary_opts)))


def test_shared_options_have_one_name_type_and_default():
    by = _options()
    assert {"train", "sweep", "demo", "launch", "profile", "inspect"} <= {c for d in by.values() for c in d}
    shared = 0
    for flag, cmds in by.items():
        if len(cmds) < 2:
            continue
        shared += 1
        kept = {c: _signature(p) for c, p in cmds.items() if (c, flag) not in EXCEPTIONS}
        assert len(set(kept.values())) <= 1, f"{flag} differs between commands: {kept}"
    assert shared >= 40  # e.g. --model, --group-size, --rule, --batches, --target, ... (a real walk, not empty)
    for (cmd, flag), why in EXCEPTIONS.items():  # every exception is live: the option exists and does differ
        assert cmd in by[flag], f"stale exception {cmd} {flag} ({why})"
        others = {_signature(p) for c, p in by[flag].items() if c != cmd and (c, flag) not in EXCEPTIONS}
        assert _signature(by[flag][cmd]) not in others, f"{cmd} {flag} no longer differs: drop its exception"
    # a short flag names one option everywhere
    shorts = defaultdict(set)
    for flag, cmds in by.items():
        for p in cmds.values():
            for o in p.opts:
                if not o.startswith("--"):
                    shorts[o].add(flag)
    assert all(len(v) == 1 for v in shorts.values()), shorts
    assert shorts["-G"] == {"--group-size"} and shorts["-P"] == {"--prompts-per-step"}


def test_config_fields_use_the_config_default_and_help():
    """Every option named like a TrainConfig field (its flag from option_spec) takes the field's help, type and
    default (or is required: --base-batch / --base-lr where a study is built on them) in every command that has it
    (the listed exceptions are study settings that share the flag)."""
    flags = {}
    for name in TrainConfig.model_fields:
        if name != "adam_betas":
            spec = option_spec(name)
            flags[spec.flags[0].split("/")[0]] = spec
    by = _options()
    seen = defaultdict(set)
    for flag, cmds in by.items():
        spec = flags.get(flag)
        if spec is None:
            continue
        for cmd, p in cmds.items():
            if (cmd, flag) in EXCEPTIONS:
                continue
            assert p.required or p.default == spec.default, (cmd, flag, p.default, spec.default)
            assert p.help == spec.help, (cmd, flag)
            assert _type(p) == spec.type.__name__, (cmd, flag)
            seen[cmd].add(spec.field)
    # the settings train has, sweep now has too (all but the per-run ones: the ladder sets P, G, lr and seed)
    per_run = {"prompts_per_step", "group_size", "lr", "base_batch", "base_lr", "seed", "critic_lr",
               "mini_batch_size", "samples",
               "batch", "batch_min", "batch_max", "auto_window"}  # --batch auto: one run; a ladder fixes each B
    assert seen["train"] - per_run <= seen["sweep"], seen["train"] - per_run - seen["sweep"]
    assert {"model", "device", "algo"} <= seen["demo"] and {"group_size", "critic_base_lr"} <= seen["launch"]
    # max_new_tokens: the command line's default is the task's cap (None), the library's a fixed 8
    assert option_spec("max_new_tokens").default is None and TrainConfig().max_new_tokens == 8


def test_trl_entry_point_takes_the_same_options():
    ap = parser()
    acts = {a.dest: a for a in ap._actions}
    for name in TRL_FIELDS:
        spec = option_spec(name)
        assert acts[name].option_strings == list(spec.flags) and acts[name].default == spec.default
        assert acts[name].type is spec.type and acts[name].help == spec.help
    assert acts["rule"].default == RULE.default == "sqrt"
    cfg = config_from_args(ap.parse_args(["--out", "x", "--lr", "1e-4", "--task", "chain_sum", "-G", "4"]))
    assert (cfg.lr, cfg.lr_rule, cfg.group_size, cfg.max_new_tokens) == (1e-4, None, 4, 256)
    cfg = config_from_args(ap.parse_args(["--out", "x"]))  # as rlbatch train: the tiny demo's base, sqrt rule
    assert (cfg.base_batch, cfg.base_lr, cfg.lr_rule, cfg.max_new_tokens) == (16, 5e-5, "sqrt", 5)


# ----------------------------------------------------------------------------------------- deprecated spellings
class _Captured(Exception):
    pass


def _capture(monkeypatch, target: str, key: str | None = None):
    """Replace ``<target>`` in the module the command imports it from on use (the CLI keeps pandas- and torch-heavy
    imports out of its startup) by a function that records its arguments and stops the command."""
    seen = {}

    def fake(*args, **kw):
        seen.update(kw, args=args)
        raise _Captured

    monkeypatch.setattr(importlib.import_module(HOME[target]), target, fake)
    return seen


#: Where each command's working function lives (the CLI imports it from there when the command runs).
HOME = {"run_study": "rlbatch.study.run", "launch": "rlbatch.backends.launch", "run_demo": "rlbatch.study.demo",
        "run_profile": "rlbatch.profile", "inspect_path": "rlbatch.explain"}


def _invoke(*args):
    res = CliRunner().invoke(cli.app, list(map(str, args)))
    assert isinstance(res.exception, _Captured), res.output
    return res


def _deprecation(res, old: str) -> None:
    lines = [ln for ln in res.stderr.splitlines() if "deprecated" in ln]
    assert len(lines) == 1 and f" {old}" in lines[0] and "next release" in lines[0], res.stderr


def test_old_spellings_are_hidden():
    """An old spelling is no option of its command (so not in --help); its replacement is."""
    group = typer.main.get_command(cli.app)
    for cmd, aliases in DEPRECATED.items():
        opts = {o for p in group.commands[cmd].params for o in p.opts + p.secondary_opts}
        res = CliRunner().invoke(cli.app, [cmd, "--help"], env={"COLUMNS": "250"})
        assert res.exit_code == 0
        for old, alias in aliases.items():
            assert old not in opts and alias.new in opts, (cmd, old)
            assert not re.search(rf"(?<![\w-]){old}(?![\w-])", res.output), (cmd, old)


def test_train_stop_at_target_alias(monkeypatch, tmp_path):
    import rlbatch.train.trainer as trainer

    seen = {}

    def fake_train(cfg, out, **kw):
        seen["cfg"] = cfg
        raise _Captured

    monkeypatch.setattr(trainer, "train", fake_train)
    res = _invoke("train", "--out", tmp_path / "r", "--lr", "1e-4", "--stop-at-target", "0.4", "--stop-hold", "3")
    _deprecation(res, "--stop-at-target")
    assert (seen["cfg"].stop_at_target, seen["cfg"].stop_hold) == (0.4, 3)
    res = _invoke("train", "--out", tmp_path / "r", "--lr", "1e-4", "--target", "0.5", "--stop-on-target")
    assert seen["cfg"].stop_at_target == 0.5 and "deprecated" not in res.stderr
    res = _invoke("train", "--out", tmp_path / "r", "--lr", "1e-4")
    assert seen["cfg"].stop_at_target is None
    res = CliRunner().invoke(cli.app, ["train", "--out", str(tmp_path / "r"), "--lr", "1e-4", "--stop-on-target"])
    assert "--stop-on-target needs --target" in str(res.exception)
    res = CliRunner().invoke(cli.app, ["train", "--out", str(tmp_path / "r"), "--lr", "1e-4", "--target", "0.5"])
    assert "add --stop-on-target" in str(res.exception)


SWEEP = ["sweep", "--base-batch", "16", "--base-lr", "1e-4", "--batches", "16,32", "--samples", "64", "--target",
         "0.3"]


def _trial_options(seen) -> dict:
    """The trainer options every trial of the ladder handed to run_study carries (one ladder, one set)."""
    ladder = seen["args"][0]
    assert len({repr(t.options) for t in ladder}) == 1
    return ladder[0].options


def test_sweep_aliases_and_new_trainer_options(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, "run_study")
    res = _invoke(*SWEEP, "--out", tmp_path, "--stop-at-target")
    _deprecation(res, "--stop-at-target")
    assert _trial_options(seen)["stop_at_target"] == 0.3 and _trial_options(seen)["stop_hold"] == 2
    # defaults: the trial options are exactly what they were before the sweep took train's settings
    _invoke(*SWEEP, "--out", tmp_path)
    assert set(_trial_options(seen)) == {"micro_batch_size", "max_new_tokens", "eval_every", "eval_size", "device"}
    _invoke(*SWEEP, "--out", tmp_path, "--temperature", "0.7", "--kl-coef", "0.1", "--no-share-prompts",
            "--max-grad-norm", "0", "--ppo-epochs", "2", "--max-steps", "9", "--checkpoint-every", "3",
            "--micro-batch-tokens", "512", "--max-concurrent-sequences", "64", "--no-filter-groups")
    o = _trial_options(seen)
    assert (o["temperature"], o["kl_coef"], o["share_prompts"], o["max_grad_norm"], o["ppo_epochs"]) == \
        (0.7, 0.1, False, None, 2)
    assert (o["max_steps"], o["checkpoint_every"], o["micro_batch_tokens"], o["max_concurrent_sequences"],
            o["filter_groups"]) == (9, 3, 512, 64, False)
    res = _invoke(*SWEEP, "--out", tmp_path, "--verl-config", tmp_path / "base.txt")
    _deprecation(res, "--verl-config")
    assert seen["base_config"] == tmp_path / "base.txt"


LAUNCH = ["launch", "--backend", "openrlhf", "--base-batch", "64", "--base-lr", "1e-6", "--batches", "64,128",
          "--generated-samples", "1024"]


def test_launch_critic_lr_alias(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, "launch")
    res = _invoke(*LAUNCH, "--out", tmp_path, "--critic-lr", "2e-6")
    _deprecation(res, "--critic-lr")
    assert seen["base_critic_lr"] == 2e-6 and {t.group_size for t in seen["args"][0]} == {8}  # -G defaults to the config's G
    _invoke(*LAUNCH, "--out", tmp_path, "--critic-base-lr", "3e-6", "-G", "4")
    assert seen["base_critic_lr"] == 3e-6 and {t.group_size for t in seen["args"][0]} == {4}
    res = _invoke(*LAUNCH, "--out", tmp_path, "--verl-config=b.txt")
    _deprecation(res, "--verl-config")
    assert str(seen["base_config"]) == "b.txt"


def test_demo_preset_alias(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, "run_demo")
    res = _invoke("demo", "--out", tmp_path, "--preset", "gpu-small-toy")
    _deprecation(res, "--preset")
    assert seen["preset"] == "gpu-small-toy"
    _invoke("demo", "--out", tmp_path, "--model", "tiny")
    assert seen["preset"] == "tiny"


def test_profile_batches_alias(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, "run_profile")
    res = _invoke("profile", "--model", "tiny", "--batches", "1,2", "--out", tmp_path)
    _deprecation(res, "--batches")
    assert seen["args"][1] == [1, 2]
    _invoke("profile", "--sequences", "4,8", "--out", tmp_path)
    assert seen["args"] == ("tiny", [4, 8])  # --model defaults to the config's, as everywhere


def test_inspect_batch_alias(monkeypatch, tmp_path):
    seen = _capture(monkeypatch, "inspect_path")
    res = _invoke("inspect", tmp_path, "--batch", "512,1024")
    _deprecation(res, "--batch")
    assert seen["batches"] == [512, 1024]


def test_rewrite_deprecated_leaves_values_and_the_rest_alone():
    warned = []
    assert rewrite_deprecated("train", ["--stop-at-target=0.4", "--out", "--stop-at-target"], warned.append) == \
        ["--target=0.4", "--stop-on-target", "--out", "--target", "--stop-on-target"]
    assert len(warned) == 1
    assert rewrite_deprecated("sweep", ["--out", "d", "--", "--stop-at-target"], warned.append) == \
        ["--out", "d", "--", "--stop-at-target"]
    assert rewrite_deprecated("lr", ["--batches", "16"], warned.append) == ["--batches", "16"]
    assert len(warned) == 1


# ----------------------------------------------------------------------------------------- startup
@pytest.mark.parametrize("args", [["--help"], ["lr", "--base-batch", "16", "--base-lr", "1e-4", "--batches", "64"]])
def test_startup_imports_no_heavy_library(args):
    code = ("import sys\nimport rlbatch.cli as c\nsys.argv = ['rlbatch', *sys.argv[1:]]\ntry:\n    c.main()\n"
            "except SystemExit:\n    pass\nheavy = ('torch', 'transformers', 'ray', 'matplotlib')\n"
            "print('HEAVY', sorted(m for m in heavy if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600)
    assert "HEAVY []" in r.stdout, r.stdout[-500:] + r.stderr[-500:]
