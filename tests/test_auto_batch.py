"""The online batch controller's core (issue 55): goodput, the move with hysteresis and B_noise's interval, and the
loop on the synthetic backend's model, whose best batch is known: B* = sqrt(gen_s x b_noise / train_s_per_response)
(McCandlish et al. 2018, eq. 2.11 with step time gen_s + train_s x B). Hand values in each test."""

import math

import pytest

from rlbatch.analysis.goodput import TimeModel, choose_batch, fit_time_model, goodput, relative_time
from rlbatch.backends.synthetic import SyntheticModel
from rlbatch.study.auto_batch import SyntheticEnvironment, b_noise_window, optimum, run_controller

POW2 = [2 ** k for k in range(4, 15)]  # 16 .. 16,384
EXACT = TimeModel(20.0, 0.01, 10, (64, 128))  # the synthetic model's default: 20 s generation, 0.01 s per response


def test_goodput_by_hand():
    # against B = 64 at B_noise 1024: rN(1024) = (1 + 1) / (1 + 1/16) = 1.882, throughput 1024 / 30.24 = 33.86 per s,
    # so goodput 17.99 of B = 64's samples per second; B = 2048: rN 3 / 1.0625 = 2.824, 2048 / 40.48 = 50.59, 17.92
    assert goodput(1024, EXACT, 1024, 64) == pytest.approx(1024 / 30.24 / (2 / (17 / 16)))
    assert goodput(2048, EXACT, 1024, 64) == pytest.approx(2048 / 40.48 / (3 / (17 / 16)))
    # relative time = rN / relative throughput = the inverse ratio of the goodputs
    assert relative_time(1024, EXACT, 1024, 64) == pytest.approx(goodput(64, EXACT, 1024, 64)
                                                               / goodput(1024, EXACT, 1024, 64))
    assert relative_time(16, EXACT, math.inf, 64) == pytest.approx((64 / 20.64) / (16 / 20.16))  # no penalty
    assert optimum(SyntheticModel(b_noise=1024)) == pytest.approx(math.sqrt(20 * 1024 / 0.01))  # 1,431


def test_the_move_goes_to_the_highest_goodput_with_hysteresis():
    up = choose_batch(64, POW2, 1024.0, EXACT)
    assert up.moved and up.batch == 1024 and up.gain == pytest.approx(goodput(1024, EXACT, 1024, 64)
                                                                       / goodput(64, EXACT, 1024, 64) - 1)
    # at B = 2048 the best is 1024 by 0.4% (16.93 / 16.86): below the 5% threshold, it stays
    stay = choose_batch(2048, POW2, 1024.0, EXACT)
    assert not stay.moved and stay.batch == 2048 and stay.gain == pytest.approx(0.0042, abs=1e-3)
    assert "not more than the 5% threshold" in stay.why


def test_a_move_up_needs_a_gain_at_the_lower_end_of_b_noise():
    # from 256: 1024 wins at B_noise 1024, but at the interval's lower end 100 it loses (3.01 against 3.19 samples/s)
    c = choose_batch(256, POW2, 1024.0, EXACT, b_noise_ci=(100.0, 5000.0))
    assert not c.moved and c.gain > 0.05 and c.gain_at_bound < 0 and "lower end (100)" in c.why
    # an interval open above (|G|^2 not shown positive) still moves up as far as its lower end supports
    assert choose_batch(64, POW2, math.inf, EXACT, b_noise_ci=(1024.0, math.inf)).moved


def test_time_model_by_hand():
    t = fit_time_model([64, 128, 256], [20.64, 21.28, 22.56])
    assert t.intercept == pytest.approx(20.0) and t.slope == pytest.approx(0.01) and t.batches == (64, 128, 256)
    assert fit_time_model([64, 128], [21.0, 20.0]).slope == 0.0  # a falling time is noise: flat, the mean
    with pytest.raises(ValueError, match="two or more batch sizes"):
        fit_time_model([64, 64], [20.0, 21.0])


def test_b_noise_from_a_window_of_steps():
    m = SyntheticModel(b_noise=1024)
    env = SyntheticEnvironment(m, noise=0.0)
    point, (lo, hi) = b_noise_window([env.step(256) for _ in range(10)])
    assert point == pytest.approx(1024) and lo == pytest.approx(1024) and hi == pytest.approx(1024)
    # |G|^2 estimated below 0 ((256 x 2 - 8 x 100) / 248 < 0): not bounded above
    rows = [{"b_small": 8.0, "b_big": 256.0, "g_small_sq": 100.0, "g_big_sq": 2.0}] * 5
    assert b_noise_window(rows)[0] == math.inf
    # tr(Sigma) estimated below 0 (the big batch's norm above the small one's): no noise resolved, the floor
    rows = [{"b_small": 8.0, "b_big": 256.0, "g_small_sq": 1.0, "g_big_sq": 2.0}] * 5
    assert b_noise_window(rows)[0] == pytest.approx(1e-6)
    assert not choose_batch(64, POW2, 1e-6, EXACT).batch > 64  # then the smallest step time wins: never up


@pytest.mark.parametrize("b_noise", [256, 1024, 4096, 16384])
def test_the_controller_settles_within_1_5x_of_the_best_batch(b_noise):
    m = SyntheticModel(b_noise=b_noise)
    res = run_controller(SyntheticEnvironment(m, seed=0), 64, POW2, steps=300)
    assert 1 / 1.5 <= res.settled / optimum(m) <= 1.5, res.to_json()["decisions"]
    late = [d for d in res.decisions if d.step > 150]
    assert late and not any(d.moved for d in late)  # settled: no move in the second half
    assert all(d.batch <= 4 * d.current for d in res.decisions)  # never more than REACH per move


def test_the_controller_stays_where_moving_is_wrong():
    # B_noise 4 and 0.1 s of generation: B* = sqrt(0.1 x 4 / 0.01) = 6.3, below the smallest batch: stay at 16
    m = SyntheticModel(b_noise=4, gen_s=0.1)
    res = run_controller(SyntheticEnvironment(m, seed=1), 16, POW2, steps=200)
    assert res.moves == 0 and set(res.schedule[-150:]) == {16} and len(res.decisions) >= 5
