"""The generated launches checked by the frameworks' *released* packages, and their loggers' output read back.

Run by default (``make test`` installs the pinned packages: ``pip install --no-deps verl==0.9.1 openrlhf==0.11.2``
plus hydra-core / omegaconf / orjson from the ``dev`` extra; TRL from the ``trl`` extra). A test skips only when its
package is not installed, and says so (``-ra`` prints the reason). Nothing here imports verl's or OpenRLHF's
package ``__init__`` (they pull in their GPU stacks: tensordict, ray, vllm, deepspeed); the files used are read from
the installed package directory:

- verl: every Hydra override composes against the package's own ``verl/trainer/config/ppo_trainer.yaml`` in struct
  mode (an unknown or mistyped key fails) and yields the intended values; a run logged by verl's own ``FileLogger``
  (``verl/utils/tracking.py``, loaded from its file) at the plan's ``VERL_FILE_LOGGER_PATH`` is read back by
  ``rlbatch analyze`` (accounting rows for both trials).
- OpenRLHF: every command parses with the argparse parser of the package's ``openrlhf/cli/train_ppo_ray.py`` (its
  ``__main__`` block up to ``parse_args``, run without the module's ray imports); a run logged by OpenRLHF's own
  ``TensorboardLogger`` (``openrlhf/utils/logging_utils.py``) into the plan's TensorBoard directory is read back.
- TRL: the YAML builds a ``trl.GRPOConfig`` whose generation batch is B and one generation per optimizer step.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from _framework_sources import openrlhf_parser, package_file
from rlbatch.backends.launch import plan_ladder
from rlbatch.study.ladder import build_ladder





def load_file_module(name: str, path: Path):
    """Import one module from its file (its package's ``__init__`` is not run)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def trials():
    return build_ladder(base_batch=512, base_lr=1e-6, batches=[512, 1024], group_sizes=[8], samples=100_000,
                        budget="generated")


# --------------------------------------------------------------------------------------------------- verl
def test_verl_schema_overrides_compose(tmp_path):
    hydra = pytest.importorskip("hydra", reason="hydra-core is not installed (it is in the dev extra)")
    cfg_dir = package_file("verl", "trainer/config/ppo_trainer.yaml").parent
    with hydra.initialize_config_dir(config_dir=str(cfg_dir), version_base=None):
        for t, p in zip(trials(), plan_ladder(trials(), "verl", tmp_path / "study")):
            c = hydra.compose(config_name="ppo_trainer", overrides=p["command"][3:], return_hydra_config=True)
            assert c.data.train_batch_size == t.prompts_per_step and c.actor_rollout_ref.rollout.n == 8
            assert c.actor_rollout_ref.actor.optim.lr == t.lr
            assert c.actor_rollout_ref.actor.ppo_mini_batch_size == t.prompts_per_step
            assert c.trainer.total_training_steps == t.steps and "file" in list(c.trainer.logger)
            assert c.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH == p["log_path"]
        # a mistyped key is refused by verl's schema (struct mode): the check can fail
        with pytest.raises(Exception, match="train_batch_sz"):
            hydra.compose(config_name="ppo_trainer", overrides=["data.train_batch_sz=4"])


STEPS = 60


def _synthetic_score(step: int, batch: int) -> float:
    """A learning curve linear on the sample axis: score 0.5 at 25,000 samples for B = 512 and at 30,000 (1.2x)
    for B = 1024, so linear interpolation between evaluation points is exact."""
    return step * batch / (50_000.0 * (1.2 if batch > 512 else 1.0))


def check_accounting(res: dict, run_ids: list[str]) -> None:
    """Accounting rows for both trials, with the hand-computed samples-to-target, rN and the batch sizes."""
    rows = {r["run"]: r for r in res["accounting"]}
    assert set(rows) == set(run_ids)
    small, big = rows[run_ids[0]], rows[run_ids[1]]
    assert (small["batch_size"], big["batch_size"]) == (512, 1024)
    assert small["samples_to_target"] == pytest.approx(25_000) and big["samples_to_target"] == pytest.approx(30_000)
    assert big["rN"] == pytest.approx(1.2)
    assert small["throughput_samples_per_s"] > 0 and big["throughput_samples_per_s"] > 0


def test_verl_schema_file_logger_round_trip(tmp_path, monkeypatch):
    pytest.importorskip("orjson", reason="orjson (verl's FileLogger writer) is not installed (dev extra)")
    tracking = load_file_module("verl_tracking_file", package_file("verl", "utils/tracking.py"))
    from rlbatch.analyze import analyze

    plans = plan_ladder(trials(), "verl", tmp_path)
    for t, p in zip(trials(), plans):
        monkeypatch.setenv("VERL_FILE_LOGGER_PATH", p["log_path"])
        Path(p["log_path"]).parent.mkdir(parents=True, exist_ok=True)
        logger = tracking.FileLogger(project_name="rlbatch", experiment_name=t.run_id)
        for s in range(1, STEPS + 1):
            data = {"actor/lr": t.lr, "critic/score/mean": 0.1, "timing_s/gen": 2.0 + t.batch_size / 1024,
                    "timing_s/update_actor": t.batch_size / 512, "timing_s/step": 3.0 + t.batch_size / 400,
                    "actor/grad_norm": 1.0 / math.sqrt(t.batch_size), "training/global_step": s}
            if s % 5 == 0:
                data["val-core/arith/reward/mean@1"] = _synthetic_score(s, t.batch_size)
            logger.log(data=data, step=s)
        logger.finish()
    sets = [f"{t.run_id}:prompts_per_step={t.prompts_per_step}" for t in trials()] + \
           [f"{t.run_id}:group_size=8" for t in trials()]
    res = analyze([Path(p["log_path"]) for p in plans], target=0.5, sets=sets)
    check_accounting(res, [t.run_id for t in trials()])


# --------------------------------------------------------------------------------------------------- OpenRLHF


def test_openrlhf_schema_commands_parse(tmp_path):
    from rlbatch.backends.launch_openrlhf import flag

    parser = openrlhf_parser()
    dialect = "dotted" if any("--rollout.batch_size" in a.option_strings for a in parser._actions) else "flat"
    assert dialect == "dotted"  # OpenRLHF >= 0.10.2
    for t, p in zip(trials(), plan_ladder(trials(), "openrlhf", tmp_path, openrlhf_flags=dialect)):
        args = vars(parser.parse_args(p["command"][3:]))
        assert args[flag("rollout_batch", dialect)] == t.prompts_per_step
        assert args[flag("n_samples", dialect)] == 8
        assert args[flag("train_batch", dialect)] == t.batch_size
        assert args[flag("actor_lr", dialect)] == t.lr
        assert args[flag("max_samples", dialect)] == t.steps * t.prompts_per_step
    with pytest.raises(SystemExit):  # an unknown flag is refused: the check can fail
        parser.parse_args(["--rollout.batch_sz", "4"])


def test_openrlhf_schema_tensorboard_round_trip(tmp_path):
    pytest.importorskip("torch.utils.tensorboard", reason="tensorboard is not installed")
    lu = load_file_module("openrlhf_logging_utils_file", package_file("openrlhf", "utils/logging_utils.py"))
    from rlbatch.analyze import analyze

    plans = plan_ladder(trials(), "openrlhf", tmp_path)
    for t, p in zip(trials(), plans):
        log = Path(p["log_path"])  # = tensorboard_dir / run_name, where OpenRLHF's TensorboardLogger writes
        args = SimpleNamespace(logger=SimpleNamespace(tensorboard_dir=str(log.parent),
                                                      wandb=SimpleNamespace(run_name=log.name)))
        tb = lu.TensorboardLogger(args)
        for s in range(1, STEPS + 1):
            tb.log_train(s, {"reward": 0.1, "actor_lr": t.lr, "timing/generation": 2.0,
                             "timing/ppo_train": t.batch_size / 512, "timing/step_total": 3.0,
                             "policy_loss": 0.0, "generated_samples": ["1+1=2", 1.0]})
            if s % 5 == 0:
                tb.log_eval(s, {"arith_pass1": _synthetic_score(s, t.batch_size)})
        tb.close()
        assert list(log.glob("events.out.tfevents.*"))
    sets = [f"{p['run_id']}:prompts_per_step={t.prompts_per_step}" for t, p in zip(trials(), plans)] + \
           [f"{p['run_id']}:group_size=8" for p in plans]
    res = analyze([Path(p["log_path"]) for p in plans], target=0.5, sets=sets)
    check_accounting(res, [p["run_id"] for p in plans])


# --------------------------------------------------------------------------------------------------- TRL
def test_trl_schema_config_builds(tmp_path):
    trl = pytest.importorskip("trl", reason="trl is not installed (pip install 'rlbatch[trl]')")
    for t, p in zip(trials(), plan_ladder(trials(), "trl", tmp_path)):
        cfg = yaml.safe_load(next(iter(p["files"].values())))
        c = trl.GRPOConfig(**cfg, bf16=False, use_cpu=True)
        assert c.generation_batch_size == t.batch_size and c.num_generations == 8
        assert c.steps_per_generation == c.gradient_accumulation_steps  # one generation batch per update
        assert c.learning_rate == t.lr and c.max_steps == t.steps
