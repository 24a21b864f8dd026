"""Readers, fourth round (issue 53): rules learned from ../shared/logs/cases5, each on files written here (no
third-party log in the repository): a learning rate stated in a run name, a W&B chart export of one metric with one
column per run, the peak of a linear schedule the log does not show, and a custom loop's argparse dump with no group
argument (G = 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlbatch.readers import load
from rlbatch.readers.names import lr_in_name
from rlbatch.readers.schedule import lr_schedule


@pytest.mark.parametrize("name, lr", [("lr_sweep_3e-5", 3e-5), ("no_baseline_lr1.5e-5", 1.5e-5),
                                      ("B256-lr1e-5-s0", 1e-5), ("run-lr-2e-4", 2e-4), ("lr=0.0001", 1e-4),
                                      ("no_baseline", None), ("reinforce_baseline", None), ("lr0.5x", None),
                                      ("clr_5e-5_x", None), ("lr10", None), ("warmup_1e-5_3e-5_lr", None)])
def test_a_learning_rate_in_a_run_name(name, lr):
    got = lr_in_name(name)
    assert (got and got[0]) == lr  # two numbers in scientific notation: which is the lr is not evident


def test_a_long_export_takes_each_runs_lr_from_its_name_when_it_logs_none(tmp_path):
    p = tmp_path / "sweep.csv"
    rows = ["run_name,metric,step,value"] + [f"{r},{m},{s},{v}" for r in ("lr_sweep_1e-5", "lr_sweep_3e-5")
                                             for s in range(0, 8) for m, v in (("train/entropy", 1 - s / 10),
                                                                               ("eval/reward", s / 10))]
    p.write_text("\n".join(rows) + "\n")
    runs = load(p)
    assert [r.meta.lr for r in runs] == [1e-5, 3e-5]
    assert any("from the run name 'lr_sweep_3e-5'" in n for n in runs[1].notes)


def test_a_wide_chart_export_is_one_run_per_column(tmp_path):
    p = tmp_path / "export.csv"
    lines = ["Step,14b,1.7b"] + [f"{s},{0.5 + s / 100},{(0.4 + s / 100) if s % 4 == 0 else ''}" for s in range(13)]
    p.write_text("\n".join(lines) + "\n")
    runs = load(p)
    assert [r.run_id for r in runs] == ["14b", "1.7b"]
    last = runs[1]
    assert last.evals["eval/score"].iloc[-1] == pytest.approx(0.52)  # 1.7b at Step 12
    assert len(last.metrics) == 4 and any("metric is not named" in n for n in last.notes)
    # a table whose columns are metrics is not a chart export
    q = tmp_path / "metrics.csv"
    q.write_text("Step,loss,reward\n1,0.5,0.1\n2,0.4,0.2\n")
    assert len(load(q)) == 1


def test_the_peak_of_a_linear_decay_that_began_before_the_first_logged_step():
    # a TRL trainer_state logged every 5 steps of a 20-step linear decay from 1e-6 (the rate logged at step s is
    # the one step s used: 1e-6 x (1 - (s - 1) / 20)): the largest logged value is 8e-7
    s = np.array([5, 10, 15, 20.0])
    got = lr_schedule(s, 1e-6 * (1 - (s - 1) / 20))
    assert got["peak"] == pytest.approx(8e-7) and got["schedule_peak"] == pytest.approx(1e-6)
    # warm-up over 20 steps to 5e-5 then linear decay to 0 at 221, logged every 5 steps: the lines meet at step 21
    s = np.arange(5, 205, 5.0)
    lr = np.where(s <= 21, 5e-5 * (s - 1) / 20, 5e-5 * (221 - s) / 200)
    got = lr_schedule(s, lr)
    assert got["schedule_peak"] == pytest.approx(5e-5, rel=1e-6) and got["peak"] < 4.95e-5
    # a constant rate and a decay to a floor (not to 0 at the end) keep the logged peak
    assert "schedule_peak" not in lr_schedule(s, np.full(len(s), 1e-6))
    assert "schedule_peak" not in lr_schedule(s, 1e-6 * (1 - s / 1000))


def _loop_log(tmp_path, args):
    p = tmp_path / "training_log.jsonl"
    recs = [{"type": "config", "argv": ["train.py", "--batch-size", str(args["batch_size"])], "args": args}]
    recs += [{"step": s, "cumulative_examples": s * args["batch_size"], "mean_reward": 0.1 * s, "loss": 0.5,
              "accuracy": 0.4 + 0.01 * s} for s in range(20, 101, 20)]
    p.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return load(p)[0]


def test_an_argparse_dump_without_a_group_argument_samples_each_example_once(tmp_path):
    run = _loop_log(tmp_path, {"model": "m", "steps": 100, "batch_size": 8, "lr": 1e-5, "seed": 7})
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (8, 1, 1e-5)
    assert any("each example is sampled once" in n for n in run.notes)


@pytest.mark.parametrize("extra", [{"num_generations": 8}, {"samples_per_prompt": 4}, {"n": 4}, {"group": 4}])
def test_an_argparse_dump_with_a_group_argument_is_not_g_1(tmp_path, extra):
    run = _loop_log(tmp_path, {"model": "m", "steps": 100, "batch_size": 8, "lr": 1e-5, **extra})
    assert run.meta.group_size != 1


@pytest.mark.parametrize("column", ["train/critic_loss", "critic/vf_loss", "loss/value_avg", "value_loss",
                                    "critic/value_loss"])
def test_a_log_with_a_value_function_loss_is_ppo_with_g_1_by_default(tmp_path, column):
    """Item 3 of issue 53: a log that does not name its algorithm but logs a value loss trains a critic (PPO), and
    with no group size G = 1 is assumed and flagged as a default (OpenRLHF's critic_loss, verl's critic/vf_loss, TRL
    PPOTrainer's loss/value_avg)."""
    p = tmp_path / "run.csv"
    p.write_text(f"step,{column},train/reward,eval/accuracy\n" + "".join(
        f"{s},{1 / s},{s / 10},{s / 10 if s % 2 == 0 else ''}\n" for s in range(1, 7)))
    (run,) = load(p)
    assert run.meta.algorithm == "ppo"
    assert run.meta.group_size == 1 and run.meta.group_size_source == "PPO default"
    assert any(f"value-function loss ('{column}')" in n for n in run.notes)


@pytest.mark.parametrize("column", ["loss", "train/policy_loss", "train/kl_loss", "eval/value_accuracy"])
def test_a_log_without_a_value_loss_stays_grpo(tmp_path, column):
    p = tmp_path / "run.csv"
    p.write_text(f"step,{column},train/reward,eval/accuracy\n" + "".join(
        f"{s},{1 / s},{s / 10},{s / 10 if s % 2 == 0 else ''}\n" for s in range(1, 7)))
    (run,) = load(p)
    assert run.meta.algorithm == "grpo" and not any("PPO" in n for n in run.notes)
