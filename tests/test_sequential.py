"""The group-sequential MAMS design (rlbatch.analysis.sequential): calibration, operating characteristics, the fixed
one-sided Dunnett design it reduces to, and the seed counts for a planned power.

Monte Carlo tolerances: with n simulations a probability p has sd sqrt(p(1-p)/n) (0.0015 for p=0.05, n=20,000;
0.002 for p=0.9); the calibrated C carries its own error (the attained error rate of C from 40,000 null studies has
sd 0.0011; C itself sd about 0.012). The tolerances below are 4-5 sd or more."""

import math

import numpy as np
import pytest

from rlbatch.analysis.sequential import Design, calibrate, dunnett_critical, fixed_power, seeds_for_power, simulate

SIGMA = 0.275
TWO_X = -math.log(2.0)
ONE_RUNG = [TWO_X] + [0.0] * 6  # one configuration 2x faster, six equal to the reference (K = 8)
LADDER = list(np.log([0.8, 0.65, 0.55, 0.5, 0.6, 0.8, 1.2]))  # a realistic batch-size ladder, reference = 1


@pytest.fixture(scope="module")
def design():
    return calibrate((2, 4, 6), futility=1.0, alpha=0.05, n_configs=8)


@pytest.fixture(scope="module")
def one_stage():
    return calibrate((3,), futility=-math.inf, alpha=0.05, n_configs=8)


def test_calibration_shape_cache_and_validation(design):
    assert isinstance(design, Design) and design.looks == (2, 4, 6) and design.n_configs == 8
    assert 2.3 < design.C < 2.7  # computed 2.499 (seed 0)
    # O'Brien-Fleming: -C sqrt(n_max / n_j); the last look's bound is -C
    assert design.efficacy_bound(2) == pytest.approx(-design.C)
    assert design.efficacy_bound(0) == pytest.approx(-design.C * math.sqrt(3))
    assert design.tail(0, 8) < design.tail(1, 24) < design.tail(2, 40) < 0.05
    # deterministic and cached: the same object, whatever sequence type the looks come in
    assert calibrate([2, 4, 6], 1.0) is design
    with pytest.raises(ValueError):
        calibrate((1, 2))
    with pytest.raises(ValueError):
        calibrate((4, 2))


def test_familywise_error_under_global_null(design):
    r = simulate(design, [0.0] * 7, sigma=SIGMA, n_sim=20_000, seed=101)  # independent of the calibration's seed
    assert abs(r["fw"] - 0.05) <= 0.01, r["fw"]  # computed 0.047
    assert r["power"].max() <= 0.02  # each configuration's share of the error
    assert r["p_stop"].sum() == pytest.approx(1.0)
    assert r["expected_runs"] < 8 * 4  # binding futility stops most null studies early (computed 21.2)
    # sigma and the common level do not matter: the statistic is scale and location free
    r2 = simulate(design, [0.0] * 7, sigma=3.0, n_sim=20_000, seed=101)
    assert r2["fw"] == r["fw"]


def test_power_and_runs_one_fast_configuration(design):
    r = simulate(design, ONE_RUNG, sigma=SIGMA, n_sim=20_000, seed=102)
    assert r["power"][0] >= 0.85, r["power"]  # review and computed: 0.91
    assert r["expected_runs"] <= 27, r["expected_runs"]  # review and computed: 24.1
    assert r["fw"] <= 0.06
    assert r["max_runs"] == 48 and r["runs_max_seen"] <= 48 and 16 <= r["runs_p90"] <= 48
    # the sequential design beats the fixed 3-seed design at about the same expected cost
    fx = fixed_power(3, ONE_RUNG, SIGMA, n_configs=8)
    assert r["power"][0] > fx["power"][0] + 0.15


def test_one_stage_is_the_fixed_one_sided_dunnett(one_stage):
    exact = dunnett_critical(8, 16)  # 7 comparisons, df = 8 * (3 - 1) = 16
    assert 2.4 <= exact <= 2.6  # computed 2.558
    # an independent Monte Carlo of the same critical value, drawn differently (raw seeds, direct quantile)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((200_000, 8, 3))
    m, v = x.mean(2), x.var(2, ddof=1).mean(1)
    tmin = ((m[:, 1:] - m[:, :1]) / np.sqrt(v * 2 / 3)[:, None]).min(1)
    mc = -np.quantile(tmin, 0.05)
    assert abs(mc - exact) < 0.03  # MC sd about 0.006
    assert abs(one_stage.C - mc) < 0.05  # calibrate's own Monte Carlo (computed 2.532)
    assert abs(one_stage.efficacy_bound(0) + one_stage.C) < 1e-12
    r = simulate(one_stage, ONE_RUNG, sigma=SIGMA, n_sim=20_000, seed=103)
    assert r["expected_runs"] == 24 and r["p_stop"].tolist() == [1.0]
    assert abs(r["power"][0] - 0.70) <= 0.03, r["power"]  # computed 0.71 (with C = 2.532)


def test_fixed_power_and_seeds_for_power():
    fx = fixed_power(3, ONE_RUNG, SIGMA, n_configs=8)
    assert abs(fx["power"][0] - 0.70) <= 0.03  # simulated 0.697; exact (noncentral t) 0.699
    assert fx["power_exact"][0] == pytest.approx(0.6986, abs=0.002)
    assert abs(fx["power"][0] - fx["power_exact"][0]) < 0.015
    assert fx["runs"] == 24 and fx["fw"] <= 0.05 + 0.006  # six nulls: a little under alpha (computed 0.044)
    # the per-comparison tail of the Dunnett bound is a null configuration's chance of a false claim
    null_tail = Design((3,), -math.inf, 0.05, 8, fx["critical"]).tail(0, 16)
    assert fx["power_exact"][1] == pytest.approx(null_tail, rel=1e-6)
    # powers computed: n=3 0.699, n=4 0.852, n=5 0.932
    assert seeds_for_power(TWO_X, SIGMA, 0.8) == 4
    assert seeds_for_power(TWO_X, SIGMA, 0.9) == 5
    assert seeds_for_power(TWO_X, SIGMA, 0.9, sigma_df=16) == 6  # an uncertain spread asks for more
    assert seeds_for_power(-0.2, SIGMA, 0.8, max_seeds=30) is None


def test_realistic_ladder(design):
    r = simulate(design, LADDER, sigma=SIGMA, n_sim=20_000, seed=104)
    fx = fixed_power(3, LADDER, SIGMA)
    print(f"ladder: power of the 0.5x configuration {r['power'][3]:.3f} (fixed 3 seeds {fx['power'][3]:.3f}), "
          f"expected runs {r['expected_runs']:.1f}, p90 {r['runs_p90']:.0f}")
    assert abs(r["power"][3] - 0.916) <= 0.02  # computed 0.916 (40,000 simulations)
    assert abs(r["expected_runs"] - 31.9) <= 0.6  # computed 31.86
    assert np.all(r["power"][:6] > fx["power"][:6])  # every faster rung is found more often than with fixed 3
    assert r["fw"] <= 0.01  # the one slower configuration (1.2x) is almost never called faster
