import pandas as pd
import pytest

from rlbatch.analysis.curves import ema_smooth, samples_to_target, summarize_run
from rlbatch.runstore import Run, RunMeta


def frame(ys, xs=(0, 100, 200, 300)):
    return pd.DataFrame({"samples/retained": list(xs), "eval/score": list(ys)})


def test_first_crossing_interpolates():
    # between (100, 0.3) and (200, 0.5): 100 + (0.4 - 0.3) / 0.2 * 100 = 150
    assert samples_to_target(frame([0.1, 0.3, 0.5, 0.4]), 0.4) == pytest.approx(150.0)


def test_sustained_crossing_waits_for_the_last_one():
    df = frame([0.1, 0.5, 0.3, 0.6])
    assert samples_to_target(df, 0.4) == pytest.approx(75.0)  # 0 + 0.3 / 0.4 * 100
    assert samples_to_target(df, 0.4, sustained=True) == pytest.approx(200 + 0.1 / 0.3 * 100)


def test_never_reached_is_none_and_start_above_is_first_x():
    assert samples_to_target(frame([0.1, 0.2, 0.3, 0.35]), 0.4) is None
    assert samples_to_target(frame([0.1, 0.5, 0.3, 0.3]), 0.4, sustained=True) is None
    assert samples_to_target(frame([0.5, 0.6, 0.7, 0.8], xs=(10, 20, 30, 40)), 0.4) == 10.0
    assert samples_to_target(pd.DataFrame(), 0.4) is None
    assert samples_to_target(frame([0.1, 0.2, 0.3, 0.4]), 0.4, metric="missing") is None


def test_ema_smoothing():
    assert list(ema_smooth([0.0, 1.0, 1.0, 1.0], 0.5)) == [0.0, 0.5, 0.75, 0.875]
    # smoothed crosses 0.7 between (100, 0.5) and (200, 0.75): 100 + 0.2 / 0.25 * 100 = 180
    assert samples_to_target(frame([0.0, 1.0, 1.0, 1.0]), 0.7, ema=0.5) == pytest.approx(180.0)
    with pytest.raises(ValueError):
        ema_smooth([1.0], 1.0)


def test_unsorted_and_missing_rows():
    df = pd.DataFrame({"samples/retained": [200, 0, 100, 300], "eval/score": [0.5, 0.1, None, 0.6]})
    # drop the missing point: between (0, 0.1) and (200, 0.5) -> 0.3 / 0.4 * 200 = 150
    assert samples_to_target(df, 0.4) == pytest.approx(150.0)


def test_summarize_run():
    meta = RunMeta(run_id="r", prompts_per_step=4, group_size=2, lr=1e-5)
    metrics = pd.DataFrame({"step": [1, 2], "samples/retained": [8.0, 16.0], "time/wall_s": [10.0, 30.0],
                            "time/gen_s": [4.0, 8.0], "time/step_s": [10.0, 20.0], "grad_norm/actor": [1.0, 3.0]})
    evals = pd.DataFrame({"step": [2], "samples/retained": [16.0], "eval/score": [0.25]})
    s = summarize_run(Run(meta=meta, metrics=metrics, evals=evals))
    assert s["batch_size"] == 8 and s["steps"] == 2 and s["samples_retained"] == 16.0
    assert s["wall_clock_s"] == 30.0 and s["gen_time_share"] == pytest.approx(12 / 30)
    assert s["throughput_samples_per_s"] == pytest.approx(16 / 30)
    assert s["grad_norm_actor_mean"] == 2.0 and s["grad_norm_critic_mean"] is None
    assert s["last_eval_score"] == 0.25 and s["eval_points"] == 1
