"""The decisions' calibration, small (issue 43; benchmarks/calibration.py runs 200+ studies per scenario and
writes benchmarks/results/calibration.md). Synthetic studies with a known truth (rlbatch.study.calibration), fixed
seeds; each scenario class has a bound the code before issue 43 failed by far (its value in the comment) and the
calibrated code meets with room for the Monte Carlo noise of a dozen studies."""

import math
from dataclasses import replace

import numpy as np
import pytest

from rlbatch.study.calibration import (Scenario, analyze_study, run_one, scenarios, score_study, simulate_study,
                                       summarize, write_study)

N = 12
SC = {s.name: s for s in scenarios()}


def rates(name, n=N, **changes):
    sc = replace(SC[name], **changes) if changes else SC[name]
    res = [run_one(sc, seed, in_memory=True) for seed in range(n)]
    m = summarize(sc, res)
    # the trend of rN with B on identical curves: median rN of the three largest batches over that of the three
    # smallest (pooled over the studies, robust with a dozen studies; old code: ~1.3 at evaluation sd 0.03)
    rn = {b: [c["rN"] for r in res for c in r["configs"] if c["batch_size"] == b and c["rN"]] for b in sc.batches}
    lo = np.median([v for b in sc.batches[1:4] for v in rn[b]])
    hi = np.median([v for b in sc.batches[-3:] for v in rn[b]])
    m["trend"] = hi / lo
    m["median_rN"] = float(np.median([v for vs in rn.values() for v in vs]))
    return m


def test_one_seed_per_configuration_calls_nothing_false():
    # one run per batch size (what users bring): the old intervals held evaluation noise alone, familywise false
    # "faster"/"slower" 0.80 over 200 studies and the headline's false "faster" 0.34
    m = rates("null, 1 seed")
    assert m["familywise_false"] <= 2 / N and m["headline_false_faster"] <= 1 / N
    assert m["cover_rN"][0] >= 0.9 and m["cover_time"][0] >= 0.9  # (old: 0.75, 0.74)


def test_three_seeds_ladder_errs_at_most_as_often_as_it_says():
    # old: familywise 0.26, headline false faster 0.13, median rN rising to 1.11 at B = 2048
    m = rates("null, 3 seeds")
    assert m["familywise_false"] <= 2 / N and m["headline_false_faster"] <= 1 / N
    assert 0.85 <= m["median_rN"] <= 1.15, m  # a dozen studies share a dozen references: the median is noisy
    assert m["best_set_coverage"] == 1.0


@pytest.mark.parametrize("name", ["null, 3 seeds, every 2 steps", "null, 3 seeds, eval sd 0.03",
                                  "null, 3 seeds, stop rule"])
def test_samples_to_target_does_not_depend_on_the_evaluation_spacing_or_noise(name):
    # old: median rN at B = 2048 1.42 (every 2 steps), 1.35 (eval sd 0.03): the first noisy crossing of the densely
    # evaluated reference is early and a chord across a coarse gap late
    m = rates(name)
    assert 0.85 <= m["median_rN"] <= 1.15 and 0.85 <= m["trend"] <= 1.15, m
    assert m["familywise_false"] <= 2 / N


@pytest.mark.parametrize("name", ["null, 3 seeds, B=256 3x noisier", "null, 3 seeds, spread rising with B"])
def test_spreads_that_differ_keep_their_intervals(name):
    # old: the 3x noisier configuration's rN covered 0.79 of the time, familywise 0.35
    m = rates(name, n=16)
    assert m["cover_rN"][1] >= 0.85 and m["cover_time"][1] >= 0.85  # the worst batch size's coverage
    assert m["familywise_false"] <= 2 / 16


def test_censored_seeds_make_a_configuration_undetermined_not_rejected():
    # budget 1.3x the typical samples-to-target: some seeds do not reach it. Old: 0.91 of studies had a false
    # "not reached" rejection of an equal configuration
    m = rates("null, 3 seeds, censoring")
    assert m["familywise_false"] <= 2 / N
    sc = SC["null, 3 seeds, censoring"]
    res = [run_one(sc, seed, in_memory=True) for seed in range(4)]
    verdicts = {c["verdict"] for r in res for c in r["configs"]}
    assert "undetermined" in verdicts and "not reached" not in verdicts


def test_a_truly_faster_configuration_is_found():
    # B = 256 twice as fast (throughput 2x): with 5 seeds found in 0.85 of 100 studies (benchmark); the truly
    # fastest is always in the "may be fastest" set
    m = rates("B=256 2x faster, 5 seeds")
    assert m["power"] >= 0.5 and m["best_set_coverage"] == 1.0 and m["wrong_direction"] == 0


def test_the_benchmark_reads_the_files_as_analyze_does(tmp_path):
    # the benchmark's path (run-store directories read by the readers) gives the in-memory answer
    sc = SC["null, 3 seeds"]
    write_study(simulate_study(sc, 3), tmp_path)
    on_disk = score_study(sc, analyze_study(tmp_path, sc.target))
    assert on_disk == run_one(sc, 3, in_memory=True)
