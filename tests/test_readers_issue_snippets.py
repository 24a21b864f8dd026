"""The shapes of log lines users paste into the RL frameworks' issues, written here with values of our own (the
pasted lines themselves are third-party and stay out of the repository): TRL GRPOTrainer console dicts during a
warm-up (huggingface/open-r1 issue 255's shape), console dicts whose rounded epoch does not grow (open-r1 issue
239's), and an ms-swift ``logging.jsonl`` record whose step is only in ``"global_step/max_steps"`` (ms-swift issue
5890's)."""

import json

import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.readers import detect_format, load


def _trl_dict(loss, grad, lr, reward, epoch):
    return (f"{{'loss': {loss}, 'grad_norm': {grad}, 'learning_rate': {lr}, 'rewards/accuracy_reward': 0.2, "
            f"'rewards/format_reward': 0.5, 'reward': {reward}, 'reward_std': 0.5, 'completion_length': 400.25, "
            f"'kl': 0.0002, 'epoch': {epoch}}}\n")


def test_warmup_lr_is_the_peak_of_the_logged_values(tmp_path):
    p = tmp_path / "warmup.log"
    p.write_text(_trl_dict(0.0, 0.75, 1.25e-06, 0.625, 0.01) + _trl_dict(0.0003, 0.8125, 2.5e-06, 0.71875, 0.02))
    assert detect_format(p) == "trl-console"
    (run,) = load(p)
    s = summarize_run(run)
    # the second learning_rate (2.5e-06) is larger: the warm-up is still rising at the end of the paste
    assert s["lr"] == 2.5e-06
    sched = run.meta.lr_schedule
    assert sched["first"] == 1.25e-06 and sched["decay"] == "still rising"
    assert any("still rising" in n for n in run.notes)
    # epochs 0.01 and 0.02: evenly spaced -> logging intervals 1, 2
    assert run.meta.step_source == "epoch growth" and list(run.metrics["step"]) == [1, 2]
    assert run.metrics["grad_norm/actor"].iloc[0] == 0.75
    assert s["reward_mean_last"] == 0.71875


def test_epoch_zero_records_counted(tmp_path):
    p = tmp_path / "epoch0.log"
    p.write_text(_trl_dict(0.0, 0.9375, 5.5e-07, 0.875, 0.0) + _trl_dict(0.0, 0.4375, 6.5e-07, 0.6875, 0.0))
    (run,) = load(p)
    # both records at epoch 0.0: nothing to infer the cadence from -> records counted, said in a note
    assert run.meta.step_source == "records counted" and list(run.metrics["step"]) == [1, 2]
    assert run.meta.lr == 6.5e-07  # the peak of the logged values
    assert run.metrics["grad_norm/actor"].tolist() == [0.9375, 0.4375]


def test_msswift_logging_jsonl_step_from_global_step_over_max_steps(tmp_path):
    p = tmp_path / "logging.jsonl"
    rec = {"loss": 1e-08, "grad_norm": 0.046875, "learning_rate": 1e-08, "reward": 0.59375, "reward_std": 0.125,
           "frac_reward_zero_std": 0.5, "completions/mean_length": 2048.5, "kl": 0.0, "epoch": 0.0005,
           "global_step/max_steps": "2/4000", "percentage": "0.05%", "elapsed_time": "6m 50s",
           "remaining_time": "10d 9h 50m 13s", "train_speed(iter/s)": 0.004878}
    p.write_text(json.dumps(rec) + "\n")
    (run,) = load(p)
    s = summarize_run(run)
    assert list(run.metrics["step"]) == [2]
    assert run.metrics["grad_norm/actor"].iloc[0] == 0.046875 and s["reward_mean_last"] == 0.59375
    assert s["lr"] == pytest.approx(1e-08)
