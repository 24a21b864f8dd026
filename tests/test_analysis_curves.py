import numpy as np
import pandas as pd
import pytest

from rlbatch.analysis.curves import crossing_of, ema_positions, ema_smooth, samples_to_target, summarize_run
from rlbatch.runstore import Run, RunMeta


def frame(ys, xs=(0, 100, 200, 300)):
    return pd.DataFrame({"samples/retained": list(xs), "eval/score": list(ys)})


def test_crossing_between_two_points_is_interpolated_on_log_samples():
    # (100, 0.3) and (200, 0.5) bracket 0.4; the local line through them on log samples: 100 * 2 ** 0.5
    assert samples_to_target(frame([0.1, 0.3, 0.5, 0.4]), 0.4) == pytest.approx(100 * 2 ** 0.5)


def test_a_noise_spike_is_pooled_not_taken_as_the_crossing():
    # the monotone fit pools 0.5 and 0.3 into 0.4, reached at x = 100, the first evaluation after 0: S is only
    # known to be at most 100 (interval-censored; a chord from (0, 0.1) would say 100 and scale with the spacing:
    # statistics review 2, N1)
    df = frame([0.1, 0.5, 0.3, 0.6])
    assert samples_to_target(df, 0.4) is None and crossing_of(df, 0.4).at_most == 100.0
    # sustained: from the last point below the target on, (200, 0.3) to (300, 0.6) on log samples
    assert samples_to_target(df, 0.4, sustained=True) == pytest.approx(200 * 1.5 ** (1 / 3))


def test_never_reached_is_none_and_at_the_target_at_the_first_evaluation_is_only_a_bound():
    assert samples_to_target(frame([0.1, 0.2, 0.3, 0.35]), 0.4) is None
    assert crossing_of(frame([0.1, 0.2, 0.3, 0.35]), 0.4).censored_at == 300
    assert samples_to_target(frame([0.1, 0.5, 0.3, 0.3]), 0.4, sustained=True) is None
    # already above the target at its first evaluation (x = 10 > 0): S <= 10, not S = 10 (a value that would scale
    # with the evaluation spacing)
    c = crossing_of(frame([0.5, 0.6, 0.7, 0.8], xs=(10, 20, 30, 40)), 0.4)
    assert c.samples is None and c.at_most == 10.0
    assert samples_to_target(frame([0.5, 0.6, 0.7, 0.8]), 0.4) == 0.0  # evaluated at 0 and there already
    assert samples_to_target(pd.DataFrame(), 0.4) is None
    assert samples_to_target(frame([0.1, 0.2, 0.3, 0.4]), 0.4, metric="missing") is None


def test_ema_is_placed_where_it_averages():
    assert list(ema_smooth([0.0, 1.0, 1.0, 1.0], 0.5)) == [0.0, 0.5, 0.75, 0.875]
    assert list(ema_positions([0, 100, 200, 300], 0.5)) == [0.0, 50.0, 125.0, 212.5]
    # the smoothed curve crosses 0.7 between (50, 0.5) and (125, 0.75), its lag-corrected positions; the parabola
    # through those and (212.5, 0.875) reaches 0.7 at 106.3 (not 180, where the lagging EMA would put it)
    a2, a1, a0 = np.polyfit([50, 125, 212.5], [0.5, 0.75, 0.875], 2)
    want = (-a1 + np.sqrt(a1 ** 2 - 4 * a2 * (a0 - 0.7))) / (2 * a2)  # the root between 50 and 125
    assert 50 < want < 125 and want == pytest.approx(106.3, abs=0.1)
    assert samples_to_target(frame([0.0, 1.0, 1.0, 1.0]), 0.7, ema=0.5) == pytest.approx(want)
    with pytest.raises(ValueError):
        ema_smooth([1.0], 1.0)


def test_unsorted_and_missing_rows():
    df = pd.DataFrame({"samples/retained": [200, 0, 100, 300], "eval/score": [0.5, 0.1, None, 0.6]})
    # drop the missing point: between (0, 0.1) and (200, 0.5), the first evaluation after 0: at most 200 (N1)
    assert samples_to_target(df, 0.4) is None and crossing_of(df, 0.4).at_most == 200.0
    # sorted, with the point at 100 kept: between (100, 0.3) and (200, 0.5), refined by the local quadratic
    df2 = pd.DataFrame({"samples/retained": [200, 0, 100, 300], "eval/score": [0.5, 0.1, 0.3, 0.6]})
    assert 100 < samples_to_target(df2, 0.4) < 200


def test_a_decline_after_the_peak_does_not_pull_the_fit_down():
    # reaches 0.5 at 300, then collapses: the monotone fit keeps the rise (up to the peak); the curve through (100,
    # 0.2), (200, 0.35) and (300, 0.5) is a straight line, crossing 0.4 at 200 + 0.05 / 0.15 x 100
    ys = [0.1, 0.2, 0.35, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    df = frame(ys, xs=[100 * i for i in range(len(ys))])
    assert samples_to_target(df, 0.4) == pytest.approx(200 + 0.05 / 0.15 * 100, rel=1e-6)


def test_the_crossing_does_not_depend_on_the_evaluation_spacing_or_noise():
    # one smooth curve (the demo's shape: 0.37 at 3500 ln(24/11) samples) evaluated every 64, 256, 1024 and 2048
    # samples: the crossing stays within 2% of the truth (the first evaluation above the target would move by a
    # whole spacing, and a chord across a coarse gap of this concave curve lies late)
    truth = 3500 * np.log(0.24 / 0.11)
    for dx in (64, 256, 1024, 2048):
        xs = np.arange(0, 12001, dx, dtype=float)
        c = samples_to_target(frame(0.24 + 0.24 * (1 - np.exp(-xs / 3500)), xs), 0.37)
        assert c == pytest.approx(truth, rel=0.02), dx
    # with evaluation noise (sd 0.015, every 256 samples) the median over 200 curves is within 3% of the truth,
    # where the first noisy evaluation above it is 6% early
    rng = np.random.default_rng(0)
    xs = np.arange(0, 12001, 256, dtype=float)
    est = [samples_to_target(frame(0.24 + 0.24 * (1 - np.exp(-xs / 3500)) + rng.normal(0, 0.015, len(xs)), xs),
                             0.37) for _ in range(200)]
    assert np.median(est) == pytest.approx(truth, rel=0.03)


def test_evaluation_items_weight_the_fit():
    # two evaluations at 200: one of 1,000 items at 0.5 and one of 10 items at 0.1; the monotone fit follows the
    # larger one (a weighted pool of 0.5 and 0.1 is 0.496), so 0.4 is crossed before 200
    df = pd.DataFrame({"samples/retained": [0, 100, 200, 300], "eval/score": [0.1, 0.3, 0.5, 0.35],
                       "eval/n": [1000, 1000, 1000, 10]})
    assert samples_to_target(df, 0.4) == pytest.approx(100 * 2 ** 0.5, rel=1e-3)


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
