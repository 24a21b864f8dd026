"""The sequential study (rlbatch.study.sequential.run_sequential) on the calibration simulator: each look spends the
design's per-comparison error, whatever spread df the tool's estimate of a configuration happens to have."""

from dataclasses import replace

import pytest

from rlbatch.analysis.sequential import calibrate
from rlbatch.study.calibration import Scenario, simulate_sequential


def test_first_look_spends_the_designs_error_not_a_two_seed_spreads():
    # null, seed log-sd 0.1, study seed 0: at the first look (2 seeds) the relative time's spread is barely moderated
    # (df ~1.4); the look's tail read at that df was 0.041 (the fixed test's, not O'Brien-Fleming's ~0.001) and
    # B128 was called faster with every configuration equal. The tail is the design's at the pooled df (8 x 1).
    sc = replace(Scenario("null, 3 seeds"), name="null, seed log-sd 0.1", seed_sd=0.1)
    res, runner = simulate_sequential(sc, 0)
    names = list(runner.names)
    design = calibrate((2, 4, 6), futility=1.0, alpha=0.04, n_configs=len(names))
    assert res.looks[0].tail == pytest.approx(design.tail(0, len(names) * 1))
    assert res.looks[0].tail < 0.002
    assert not res.faster and not res.decided  # nothing is faster: nothing called faster
    for lk in res.looks[1:]:  # later looks: the pooled df grows with the seeds, the boundary relaxes
        assert lk.tail > res.looks[0].tail


def test_a_reference_seed_that_never_reaches_the_target_ends_the_study_without_a_claim():
    # censoring (every run's budget 1.3x the samples-to-target), study seed 1: a reference seed ran out before the
    # target at the first look; the study said so and stopped (it crashed with the analysis' UserError before)
    res, runner = simulate_sequential(replace(Scenario("null, 3 seeds"), name="censoring (budget 1.3x S)",
                                              budget=3584), 1)
    names = list(runner.names)
    assert res.stop.startswith("no comparison: reference 'B16-G8-sqrt' never reached the target")
    assert not res.faster and res.pick == names[0] and set(res.may_be_fastest) == set(names)
