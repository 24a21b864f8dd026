"""Log lines quoted in public GitHub issues of the RL frameworks, kept in tests/data/readers_real/ (sources in its README), values read by hand."""

from pathlib import Path

import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.readers import detect_format, load

DATA = Path(__file__).parent / "data" / "readers_real"


def test_openr1_255_warmup_lr_is_the_peak_of_the_logged_values():
    p = DATA / "openr1_issue255_grpo_console_warmup.log"
    assert detect_format(p) == "trl-console"
    (run,) = load(p)
    s = summarize_run(run)
    # line 1 'learning_rate': 1.5384615384615387e-06, line 2: 3.0769230769230774e-06 (warm-up still rising)
    assert s["lr"] == 3.0769230769230774e-06
    sched = run.meta.lr_schedule
    assert sched["first"] == 1.5384615384615387e-06 and sched["decay"] == "still rising"
    assert any("still rising" in n for n in run.notes)
    # 'epoch': 0.01 (line 1), 0.02 (line 2): evenly spaced, epoch / 0.01 = 1, 2 -> logging intervals 1, 2
    assert run.meta.step_source == "epoch growth" and list(run.metrics["step"]) == [1, 2]
    # 'grad_norm': 0.7982587522423048 (line 1); 'reward': 0.6940873321145773 (line 2)
    assert run.metrics["grad_norm/actor"].iloc[0] == 0.7982587522423048
    assert s["reward_mean_last"] == 0.6940873321145773


def test_openr1_239_epoch_zero_records_counted():
    (run,) = load(DATA / "openr1_issue239_grpo_console_epoch0.log")
    # both lines 'epoch': 0.0: nothing to infer the cadence from -> records counted, said in a note
    assert run.meta.step_source == "records counted" and list(run.metrics["step"]) == [1, 2]
    # 'learning_rate' 5.521811154058532e-07 (line 1) < 6.626173384870238e-07 (line 2): the peak of the logged values
    assert run.meta.lr == 6.626173384870238e-07
    # 'grad_norm': 0.9503731084601761 (line 1), 0.4910426002806111 (line 2)
    assert run.metrics["grad_norm/actor"].tolist() == [0.9503731084601761, 0.4910426002806111]


def test_msswift_5890_logging_jsonl_step_from_global_step_over_max_steps():
    p = DATA / "msswift_issue5890_logging.jsonl"
    (run,) = load(p)
    s = summarize_run(run)
    # "global_step/max_steps": "2/4389" -> step 2; "grad_norm": 0.03865505; "learning_rate": 1e-08; "reward": 0.65625
    assert list(run.metrics["step"]) == [2]
    assert run.metrics["grad_norm/actor"].iloc[0] == 0.03865505 and s["reward_mean_last"] == 0.65625
    assert s["lr"] == pytest.approx(1e-08)
