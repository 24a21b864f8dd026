"""The step state shared by the trainer and the TRL callback (rlbatch.train.state.StepState): counting a step, the
evaluation schedule, and the checkpoint's dict with the DESIGN.md names as keys (checkpoints written before the
dataclass existed load unchanged)."""

import pytest

pytest.importorskip("torch")

from rlbatch.train.state import StepState  # noqa: E402


def test_advance_counts_a_step_and_empty_steps():
    s = StepState()
    s.advance(1, retained=12, generated=16, tokens_generated=40, tokens_trained=30, seconds=0.5)
    s.advance(2, retained=0, generated=16, tokens_generated=35, tokens_trained=0, seconds=0.25)
    assert (s.step, s.samples_retained, s.samples_generated) == (2, 12, 32)
    assert (s.tokens_generated, s.tokens_trained, s.wall_s, s.empty) == (75, 30, 0.75, 1)
    assert s.counters() == {"step": 2, "samples/retained": 12, "samples/generated": 32, "tokens/generated": 75,
                            "tokens/trained": 30}
    s.advance(3, retained=4, generated=16, tokens_generated=1, tokens_trained=1, seconds=0.0)
    assert s.empty == 0


def test_eval_schedule_and_hold():
    s = StepState(next_eval=64)
    s.advance(1, 100, 100, 0, 0, 1.0)
    assert s.eval_due()
    line = s.eval_line(0.5, 32, 0.1, target=0.5)
    assert line == {"step": 1, "samples/retained": 100, "samples/generated": 100, "eval/score": 0.5, "eval/n": 32,
                    "time/eval_s": 0.1, "time/wall_s": 1.0}
    assert (s.last_eval, s.last_eval_step, s.hold) == (0.5, 1, 1)
    s.schedule_next_eval(64)
    assert s.next_eval == 128 and not s.eval_due()  # 64 -> 128: the first point past 100 retained samples
    s.eval_line(0.25, 32, 0.1, target=0.5)
    assert s.hold == 0  # below the target: the count starts again


def test_checkpoint_dict_keeps_the_design_names():
    old = {"step": 6, "samples/retained": 40, "samples/generated": 48, "tokens/generated": 200, "tokens/trained": 150,
           "time/wall_s": 3.5, "next_eval": 64, "hold": 0, "metrics_lines": 6, "eval_lines": 2, "last_eval": 0.25}
    s = StepState.from_dict(old)  # a checkpoint without the keys an older trainer set only later ("empty", ...)
    assert (s.step, s.samples_retained, s.wall_s, s.eval_lines, s.last_eval_step, s.empty) == (6, 40, 3.5, 2, None, 0)
    assert StepState.from_dict(s.to_dict()) == s
    assert {k: s.to_dict()[k] for k in old} == old
