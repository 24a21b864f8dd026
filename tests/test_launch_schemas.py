"""Optional: check the generated launches against the frameworks' *released* option schemas.

Skipped unless ``RLBATCH_FRAMEWORK_WHEELS`` names a directory holding wheels fetched with
``pip download --no-deps verl openrlhf trl accelerate`` (nothing is installed; the wheels are read as zip files):
- verl: every Hydra override composes against the wheel's ``verl/trainer/config/ppo_trainer.yaml`` in struct mode
  (needs ``hydra-core`` importable) and yields the intended values;
- OpenRLHF: the command parses with the argparse parser of the wheel's ``openrlhf/cli/train_ppo_ray.py``;
- TRL: the YAML builds a ``trl.GRPOConfig`` whose generation batch is B and one generation per optimizer step.
Last run by hand (2026-11-30) with verl 0.9.1, OpenRLHF 0.11.2 (dotted flags) and 0.10.0 (flat), TRL 1.16.0 +
transformers 5.24: all pass.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from rlbatch.sweep.trials import make_trials
from rlbatch.sweep.launch import plan_trials

WHEELS = os.environ.get("RLBATCH_FRAMEWORK_WHEELS")
pytestmark = pytest.mark.skipif(not WHEELS, reason="set RLBATCH_FRAMEWORK_WHEELS to a directory of wheels")


def _wheel(name: str) -> Path:
    found = sorted(Path(WHEELS).glob(f"{name}-*.whl"))
    if not found:
        pytest.skip(f"no {name} wheel in {WHEELS}")
    return found[-1]


def _extract(name: str, dest: Path) -> Path:
    with zipfile.ZipFile(_wheel(name)) as z:
        z.extractall(dest)
    return dest


def trials():
    return make_trials(512, 1e-6, [512, 1024], "sqrt", 8, 100_000)


def test_verl_overrides_compose(tmp_path):
    hydra = pytest.importorskip("hydra")
    root = _extract("verl", tmp_path)
    cfg_dir = next(root.rglob("verl/trainer/config/ppo_trainer.yaml")).parent
    with hydra.initialize_config_dir(config_dir=str(cfg_dir), version_base=None):
        for t, p in zip(trials(), plan_trials(trials(), "verl", tmp_path / "study")):
            c = hydra.compose(config_name="ppo_trainer", overrides=p["command"][3:], return_hydra_config=True)
            assert c.data.train_batch_size == t["prompts_per_step"] and c.actor_rollout_ref.rollout.n == 8
            assert c.actor_rollout_ref.actor.optim.lr == t["lr"]
            assert c.actor_rollout_ref.actor.ppo_mini_batch_size == t["prompts_per_step"]
            assert c.trainer.total_training_steps == t["steps"] and "file" in list(c.trainer.logger)
            assert c.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH == p["log_path"]


def _openrlhf_parser(whl: Path) -> argparse.ArgumentParser:
    with zipfile.ZipFile(whl) as z:
        src = z.read(next(n for n in z.namelist() if n.endswith("cli/train_ppo_ray.py"))).decode()
    main = [n for n in ast.parse(src).body if isinstance(n, ast.If)][-1]
    body = []
    for st in main.body:
        if isinstance(st, ast.Assign) and "parse_args" in ast.unparse(st):
            break
        body.append(st)
    ns: dict = {"argparse": argparse, "datetime": datetime}
    exec(compile(ast.Module(body=body, type_ignores=[]), "train_ppo_ray", "exec"), ns)
    return ns["parser"]


def test_openrlhf_commands_parse(tmp_path):
    from rlbatch.sweep.openrlhf import flag

    for whl in sorted(Path(WHEELS).glob("openrlhf-*.whl")):
        parser = _openrlhf_parser(whl)
        dialect = "dotted" if any("--rollout.batch_size" in a.option_strings for a in parser._actions) else "flat"
        for t, p in zip(trials(), plan_trials(trials(), "openrlhf", tmp_path, openrlhf_flags=dialect)):
            args = vars(parser.parse_args(p["command"][3:]))
            assert args[flag("rollout_batch", dialect)] == t["prompts_per_step"]
            assert args[flag("n_samples", dialect)] == 8
            assert args[flag("train_batch", dialect)] == t["batch_size"]
            assert args[flag("actor_lr", dialect)] == t["lr"]
            assert args[flag("max_samples", dialect)] == t["steps"] * t["prompts_per_step"]


def test_trl_config_builds(tmp_path):
    root = _extract("trl", tmp_path / "trl")
    for extra in ("accelerate",):
        if list(Path(WHEELS).glob(f"{extra}-*.whl")):
            _extract(extra, tmp_path / extra)
            sys.path.insert(0, str(tmp_path / extra))
    sys.path.insert(0, str(root))
    try:
        from trl.trainer.grpo_config import GRPOConfig
    except ImportError as err:
        pytest.skip(f"trl not importable here: {err}")
    for t, p in zip(trials(), plan_trials(trials(), "trl", tmp_path)):
        cfg = yaml.safe_load(next(iter(p["files"].values())))
        c = GRPOConfig(**cfg, bf16=False)
        assert c.generation_batch_size == t["batch_size"] and c.num_generations == 8
        assert c.steps_per_generation == c.gradient_accumulation_steps  # one generation batch per update
        assert c.learning_rate == t["lr"] and c.max_steps == t["steps"]
