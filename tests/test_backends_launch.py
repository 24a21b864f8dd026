"""Generated verl / OpenRLHF / TRL launches: golden files, the per-trial values (P, G, lr per rule, steps from the
budget), base configurations, and the log-path round trip.

Option names are checked against the projects' own definitions (stored versions read while writing this):
- verl: github.com/verl-project/verl @ 01d4d7666c376398ba44d1130ffe7f9245c78e13,
  verl/trainer/config/_generated_ppo_trainer.yaml: data.train_batch_size, actor_rollout_ref.rollout.n,
  actor_rollout_ref.actor.optim.lr, actor_rollout_ref.actor.ppo_mini_batch_size, trainer.total_training_steps,
  trainer.logger, trainer.project_name, trainer.experiment_name, trainer.default_local_dir, trainer.resume_mode,
  trainer.save_freq, ray_kwargs.ray_init.runtime_env; verl/workers/fsdp_workers.py ("normalize config":
  ppo_mini_batch_size *= rollout.n, i.e. it counts prompts like data.train_batch_size);
  verl/utils/tracking.py @ 047621b2583780b8ebda21126e75f5bf48dea7b9 (FileLogger: VERL_FILE_LOGGER_PATH, else
  $VERL_FILE_LOGGER_ROOT/<project_name>/<experiment_name>.jsonl; lines {"step": N, "data": {...}}).
- OpenRLHF: github.com/OpenRLHF/OpenRLHF @ 021d1b09641902f7f06dc42331c75b37793ca950, openrlhf/cli/train_ppo_ray.py:
  --rollout_batch_size, --n_samples_per_prompt, --train_batch_size, --micro_train_batch_size,
  --actor_learning_rate, --critic_learning_rate, --num_episodes, --max_samples, --max_epochs, --use_tensorboard,
  --wandb_run_name, --ckpt_path, --load_checkpoint, --save_steps, --logging_steps, --seed, --advantage_estimator
  (choices include group_norm); openrlhf/trainer/ppo_trainer.py (TensorBoard dir = use_tensorboard/wandb_run_name).
- TRL: github.com/huggingface/trl @ 006d32c9bf5da698815726ebd0de78b404e8163d, trl/trainer/grpo_config.py:
  num_generations, generation_batch_size / steps_per_generation (default: one generation batch per optimizer step),
  num_iterations; transformers TrainingArguments (5.x): per_device_train_batch_size, gradient_accumulation_steps,
  learning_rate, max_steps, logging_steps, output_dir, run_name, report_to, save_steps, seed (no logging_dir:
  transformers/integrations/integration_utils.py reads TENSORBOARD_LOGGING_DIR).

Regenerate the golden files after an intended change with ``RLBATCH_UPDATE_GOLDEN=1 pytest tests/test_backends_launch.py``.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlbatch.errors import UserError
from rlbatch.backends.launch import format_dry_run, launch, plan_ladder, trial_script, write_launch
from rlbatch.backends.launch_plan import expected_log_path
from rlbatch.study.ladder import build_ladder

GOLDEN = Path(__file__).parent / "golden"
OUT = "/shared/study"  # plans are pure functions of the trials and this path; nothing is written there


def study():
    # B0 = 512 responses (P=64, G=8) tuned at lr0 = 1e-6; ladder 512, 1024, 2048; budget 100k responses;
    # fixed-LR control at B = 2048
    return ladder([512, 1024, 2048], 100_000, fixed_lr_control=2048)


def ladder(batches, samples, **kw):
    """The launched study's ladder: B0 = 512 (G = 8) at lr0 = 1e-6, a budget of generated responses."""
    return build_ladder(base_batch=512, base_lr=1e-6, batches=batches, group_sizes=[8], samples=samples,
                        budget="generated", **kw)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RLBATCH_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with RLBATCH_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def test_ladder_values():
    trials = study()
    assert [t.run_id for t in trials] == ["B512-G8-sqrt-s0", "B1024-G8-sqrt-s0", "B2048-G8-sqrt-s0",
                                            "B2048-G8-fixed-s0"]
    assert [t.prompts_per_step for t in trials] == [64, 128, 256, 256]
    # sqrt rule: lr0 * sqrt(B / B0); the control keeps lr0 at its batch
    assert [t.lr for t in trials] == pytest.approx([1e-6, math.sqrt(2) * 1e-6, 2e-6, 1e-6], rel=1e-12)
    # steps = ceil(100000 / B): 195.3 -> 196, 97.7 -> 98, 48.8 -> 49
    assert [t.steps for t in trials] == [196, 98, 49, 49]
    assert len(ladder([512], 1000, seeds=3)) == 3
    with pytest.raises(UserError, match="multiple of the group size"):
        ladder([500], 1000)


def _hydra(plan) -> dict:
    return dict(a.split("=", 1) for a in plan["command"][3:])


def test_verl_golden_and_values():
    plans = plan_ladder(study(), "verl", OUT)
    check_golden("verl_dry_run.txt", format_dry_run(plans))
    for plan, trial in zip(plans, study()):
        o = _hydra(plan)
        assert plan["command"][:3] == ["python3", "-m", "verl.trainer.main_ppo"]
        assert int(o["data.train_batch_size"]) == trial.prompts_per_step  # P (prompts)
        assert int(o["actor_rollout_ref.rollout.n"]) == 8  # G
        assert float(o["actor_rollout_ref.actor.optim.lr"]) == trial.lr  # exact round trip
        # mini-batch = P prompts -> one optimizer update per step
        assert int(o["actor_rollout_ref.actor.ppo_mini_batch_size"]) == trial.prompts_per_step
        assert plan["updates_per_step"] == 1
        assert int(o["trainer.total_training_steps"]) == math.ceil(100_000 / trial.batch_size)
        assert o["trainer.logger"] == "[console,file]"
        assert o["trainer.experiment_name"] == trial.run_id and o["trainer.project_name"] == "rlbatch"
        assert plan["env"]["VERL_FILE_LOGGER_PATH"] == plan["log_path"]
        assert o["++ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"] == plan["log_path"]


@pytest.mark.parametrize("dialect", ["dotted", "flat"])
def test_openrlhf_golden_and_values(dialect):
    from rlbatch.backends.launch_openrlhf import flag

    plans = plan_ladder(study(), "openrlhf", OUT, openrlhf_flags=dialect)
    check_golden(f"openrlhf_{dialect}_dry_run.txt", format_dry_run(plans))
    for plan, trial in zip(plans, study()):
        cmd = plan["command"]
        given = {cmd[i][2:]: cmd[i + 1] for i in range(3, len(cmd) - 1) if cmd[i].startswith("--")}
        v = lambda role: given[flag(role, dialect)]  # noqa: E731
        assert cmd[:3] == ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
        assert int(v("rollout_batch")) == trial.prompts_per_step
        assert int(v("n_samples")) == 8
        assert int(v("train_batch")) == trial.batch_size  # one update per rollout
        assert float(v("actor_lr")) == trial.lr
        # steps = num_episodes * max_samples / rollout batch (max_samples counts prompts)
        assert int(v("num_episodes")) * int(v("max_samples")) // trial.prompts_per_step == trial.steps
        assert Path(v("tensorboard")) / v("run_name") == Path(plan["log_path"])
    assert flag("rollout_batch", "dotted") == "rollout.batch_size"  # OpenRLHF >= 0.10.2
    assert flag("rollout_batch", "flat") == "rollout_batch_size"  # OpenRLHF <= 0.10.1


def test_trl_golden_and_values():
    plans = plan_ladder(study(), "trl", OUT, num_processes=2)
    check_golden("trl_dry_run.txt", format_dry_run(plans))
    for plan, trial in zip(plans, study()):
        (path, text), = plan["files"].items()
        cfg = yaml.safe_load(text)
        assert cfg["num_generations"] == 8
        # effective batch in completions = per_device x processes x accumulation = B
        assert cfg["per_device_train_batch_size"] * 2 * cfg["gradient_accumulation_steps"] == trial.batch_size
        assert cfg["learning_rate"] == trial.lr and cfg["max_steps"] == trial.steps
        assert cfg["logging_steps"] == 1 and "tensorboard" in cfg["report_to"]
        assert plan["command"][:4] == ["accelerate", "launch", "--num_processes", "2"]
        assert plan["command"][-2:] == ["--config", path]
        assert plan["env"]["TENSORBOARD_LOGGING_DIR"] == plan["log_path"]


def test_verl_base_overrides_merge_and_conflicts(tmp_path):
    base = tmp_path / "base.txt"
    base.write_text("# my verl setup\nactor_rollout_ref.model.path=Qwen/Qwen2.5-7B\n"
                    "trainer.logger=['console','wandb']\nactor_rollout_ref.actor.ppo_mini_batch_size=32\n"
                    "trainer.nnodes=2\n")
    (plan,) = plan_ladder(study()[:1], "verl", OUT, base_config=base)
    o = _hydra(plan)
    assert o["actor_rollout_ref.model.path"] == "Qwen/Qwen2.5-7B" and o["trainer.nnodes"] == "2"
    assert o["trainer.logger"] == "[console,wandb,file]"  # the file logger is always added
    assert plan["updates_per_step"] == 2  # told otherwise: P=64 prompts / mini 32
    assert len(plan["command"]) == len(set(a.split("=", 1)[0] for a in plan["command"]))  # no key twice

    yml = tmp_path / "base.yaml"
    yml.write_text("trainer:\n  n_gpus_per_node: 8\nactor_rollout_ref:\n  model:\n    path: /models/q\n")
    o = _hydra(plan_ladder(study()[:1], "verl", OUT, base_config=yml)[0])
    assert o["trainer.n_gpus_per_node"] == "8" and o["actor_rollout_ref.model.path"] == "/models/q"

    bad = tmp_path / "bad.txt"
    bad.write_text("trainer.nnodes=1\n\ndata.train_batch_size=1024\n")
    with pytest.raises(UserError, match=r"bad.txt:3: 'data.train_batch_size' is set per trial"):
        plan_ladder(study()[:1], "verl", OUT, base_config=bad)
    bad.write_text("actor_rollout_ref.actor.ppo_mini_batch_size=48\n")
    with pytest.raises(UserError, match="must divide P=64"):
        plan_ladder(study()[:1], "verl", OUT, base_config=bad)
    bad.write_text("no equals sign here\n")
    with pytest.raises(UserError, match="bad.txt:1"):
        plan_ladder(study()[:1], "verl", OUT, base_config=bad)


def test_openrlhf_and_trl_base_configs(tmp_path):
    flags = tmp_path / "flags.txt"
    flags.write_text("--actor.model_name_or_path Qwen/Qwen2.5-7B\n--ds.packing_samples\n--critic.adam.lr 9e-6\n"
                     "--algo.advantage.estimator gae\n")
    (plan,) = plan_ladder(study()[1:2], "openrlhf", OUT, base_config=flags)
    cmd = plan["command"]
    assert "--ds.packing_samples" in cmd and cmd[cmd.index("--actor.model_name_or_path") + 1] == "Qwen/Qwen2.5-7B"
    # the critic's lr0 is scaled by the same rule: 9e-6 * sqrt(1024 / 512)
    assert float(cmd[cmd.index("--critic.adam.lr") + 1]) == pytest.approx(9e-6 * math.sqrt(2), rel=1e-12)
    assert cmd[cmd.index("--algo.advantage.estimator") + 1] == "gae"
    flags.write_text("--rollout.batch_size 7\n")
    with pytest.raises(UserError, match="flags.txt:1"):
        plan_ladder(study()[:1], "openrlhf", OUT, base_config=flags)
    flags.write_text("pretrain: Qwen/Qwen2.5-7B\nbf16: true\ncritic_learning_rate: 9.0e-6\n")  # YAML, flat flags
    (plan,) = plan_ladder(study()[1:2], "openrlhf", OUT, base_config=flags.rename(tmp_path / "flags.yaml"),
                          openrlhf_flags="flat")
    cmd = plan["command"]
    assert "--bf16" in cmd and cmd[cmd.index("--pretrain") + 1] == "Qwen/Qwen2.5-7B"
    assert float(cmd[cmd.index("--critic_learning_rate") + 1]) == pytest.approx(9e-6 * math.sqrt(2), rel=1e-12)

    cfg = tmp_path / "grpo.yaml"
    cfg.write_text("model_name_or_path: Qwen/Qwen2.5-0.5B\nper_device_train_batch_size: 16\nreport_to: wandb\n")
    (plan,) = plan_ladder(study()[:1], "trl", OUT, base_config=cfg)
    got = yaml.safe_load(next(iter(plan["files"].values())))
    assert got["per_device_train_batch_size"] == 16 and got["gradient_accumulation_steps"] == 32
    assert got["report_to"] == ["wandb", "tensorboard"] and got["model_name_or_path"] == "Qwen/Qwen2.5-0.5B"
    cfg.write_text("learning_rate: 1e-5\n")
    with pytest.raises(UserError, match="learning_rate"):
        plan_ladder(study()[:1], "trl", OUT, base_config=cfg)


def test_round_trip_log_path(tmp_path):
    """The experiment name and log path the verl generator writes are exactly where the reader side looks:
    verl's FileLogger with VERL_FILE_LOGGER_PATH writes there; without it (an older launcher that only exported
    VERL_FILE_LOGGER_ROOT) FileLogger's own rule root/project/experiment.jsonl gives the same path."""
    trial = study()[1]
    (plan,) = plan_ladder([trial], "verl", tmp_path)
    o = _hydra(plan)
    log = expected_log_path(trial, tmp_path)
    assert Path(plan["log_path"]) == log == tmp_path.resolve() / "logs" / "rlbatch" / "B1024-G8-sqrt-s0.jsonl"
    # FileLogger's fallback rule (verl/utils/tracking.py): ROOT / project_name / f"{experiment_name}.jsonl"
    root = Path(plan["env"]["VERL_FILE_LOGGER_ROOT"])
    assert root / o["trainer.project_name"] / f"{o['trainer.experiment_name']}.jsonl" == log
    # the script exports the path the logger reads
    script = trial_script(plan)
    assert f"export VERL_FILE_LOGGER_PATH={shlex.quote(str(log))}" in script
    # a tiny verl file-logger JSONL at that path (what FileLogger.log writes: {"step": N, "data": {...}})
    log.parent.mkdir(parents=True)
    lines = [{"step": s, "data": {"actor/lr": trial.lr, "critic/score/mean": 0.1 * s, "timing_s/gen": 1.5,
                                  "actor/grad_norm": 0.5}} for s in (1, 2, 3)]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and rows[0]["data"]["actor/lr"] == trial.lr
    # plan.json records where each trial's log appears
    write_launch([plan], tmp_path)
    recorded = json.loads((tmp_path / "plan.json").read_text())["trials"][0]
    assert recorded["log_path"] == str(log) and recorded["log_format"] == "verl-file"
    # the reader side: rlbatch analyze finds the run under the trial's id, with its steps and learning rate
    from rlbatch.readers import detect_format, load

    (run,) = load(log)
    assert run.run_id == trial.run_id and detect_format(log) == "verl-jsonl"
    assert list(run.metrics["step"]) == [1, 2, 3]
    assert run.meta.lr == pytest.approx(trial.lr)


def test_write_launch_scripts_run_and_resume(tmp_path):
    """launch.sh runs each trial script once; a re-run skips trials that finished (their .done marker)."""
    plans = plan_ladder(study()[:2], "verl", tmp_path)
    for p in plans:  # replace the trainer by a stub that records its arguments
        p["command"] = ["python3", "-c", "import sys, os; open(os.environ['VERL_FILE_LOGGER_PATH'], 'a')"
                        ".write(' '.join(sys.argv[1:]) + '\\n')", *p["command"][3:]]
    launch_sh = write_launch(plans, tmp_path)
    assert launch_sh == tmp_path.resolve() / "launch.sh"
    r = subprocess.run(["bash", str(launch_sh)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    for p in plans:
        assert Path(p["done_marker"]).exists()
        assert "data.train_batch_size=%d" % p["prompts_per_step"] in Path(p["log_path"]).read_text()
    r = subprocess.run(["bash", str(launch_sh)], capture_output=True, text=True, timeout=600)
    assert r.stdout.count("skip") == 2


def test_launch_options():
    with pytest.raises(UserError, match="--submit needs --address"):
        launch(ladder([512], 1000), backend="verl", out=OUT, submit=True)
    with pytest.raises(UserError, match="unknown launch backend"):
        plan_ladder(study(), "megatron", OUT)
    res = launch(ladder([512, 1024], 4096, rule="linear"), backend="verl", out=OUT, dry_run=True)
    assert [p["lr"] for p in res["plans"]] == [1e-6, 2e-6] and res["launch_script"] is None


def test_cli_launch_dry_run_and_write(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    base = [sys.executable, "-m", "rlbatch.cli", "launch", "--backend", "verl", "--base-batch", "512",
            "--base-lr", "1e-6", "--batches", "512,1024", "--group-size", "8", "--generated-samples", "100000",
            "--out", str(tmp_path)]
    r = subprocess.run([*base, "--dry-run"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "actor_rollout_ref.actor.optim.lr=1.4142135623730952e-06" in r.stdout
    assert not (tmp_path / "launch.sh").exists()
    r = subprocess.run([*base, "--format", "json"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [t["steps"] for t in out["trials"]] == [196, 98] and (tmp_path / "launch.sh").exists()
    r = subprocess.run([*base, "--batches", "500"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2 and "multiple of the group size" in r.stderr and "Traceback" not in r.stderr


def test_submit_uses_job_submission_client(tmp_path, monkeypatch):
    """--submit: one Ray job per trial running its script, with the plan's environment in the job's runtime env
    (ray.job_submission.JobSubmissionClient.submit_job(entrypoint=..., runtime_env=..., metadata=...))."""
    pytest.importorskip("ray")
    import ray.job_submission as js

    calls = []

    class FakeClient:
        def __init__(self, address):
            calls.append(("init", address))

        def submit_job(self, **kw):
            calls.append(("submit", kw))
            return f"raysubmit_{len(calls)}"

    monkeypatch.setattr(js, "JobSubmissionClient", FakeClient)
    res = launch(ladder([512, 1024], 100_000), backend="verl", out=tmp_path, submit=True, address="http://head:8265")
    assert calls[0] == ("init", "http://head:8265")
    subs = [c[1] for c in calls[1:]]
    assert [s["entrypoint"] for s in subs] == [f"bash {p['script']}" for p in res["plans"]]
    assert all(Path(p["script"]).is_file() for p in res["plans"])  # written before submission (shared FS)
    assert [s["runtime_env"]["env_vars"]["VERL_FILE_LOGGER_PATH"] for s in subs] == \
        [p["log_path"] for p in res["plans"]]
    assert json.loads((tmp_path / "jobs.json").read_text())[1]["job_id"] == "raysubmit_3"


def test_missing_ray_is_a_user_error(monkeypatch, tmp_path):
    import sys as _sys

    from rlbatch.backends.ray import run_sweep_ray

    for name in ("ray", "ray.job_submission"):  # import ray -> ImportError, even if a test imported it before
        monkeypatch.setitem(_sys.modules, name, None)
    with pytest.raises(UserError, match=r"pip install 'rlbatch\[ray\]'"):
        run_sweep_ray(study()[:1], tmp_path, trial_fn=lambda s, d: d)
    with pytest.raises(UserError, match=r"rlbatch\[ray\]"):
        launch(ladder([512], 1000), backend="verl", out=tmp_path, submit=True, address="http://head:8265")
