"""The seed effect of a study that ran the same seed ids at every batch size (issue 52, item 3):
rlbatch.analysis.seed_effect, checked by hand and on the stored demo sweep."""

import math
from pathlib import Path

import pytest

from rlbatch.analysis.seed_effect import seed_effect


def test_the_two_way_analysis_by_hand():
    """log S = [[0, 0.2], [0.5, 0.7], [1.0, 1.4]] (3 configurations x seeds 0, 1). By hand: grand mean 0.6333, seed
    effects -0.1333 / +0.1333, MS_seed = 3 x 2 x 0.01778 / 1 = 0.1067; residuals +-0.0333 (twice) and +-0.0667,
    SS 0.01333 on 2 df, MS 0.00667; F = 16.0; var_seed = (0.1067 - 0.00667) / 3 = 0.0333, share 0.833; p of F(1, 2)
    at 16 = P(|t_2| > 4) = 1 - 4 / sqrt(18) = 0.0572."""
    t = {c: {s: math.exp(v) for s, v in enumerate(row)} for c, row in
         {"a": [0.0, 0.2], "b": [0.5, 0.7], "c": [1.0, 1.4]}.items()}
    fx = seed_effect(t)
    assert fx.seeds == (0, 1) and fx.configs == 3 and fx.df == (1, 2)
    assert fx.F == pytest.approx(16.0, rel=1e-9)
    assert fx.share == pytest.approx(0.8333, abs=1e-4)
    assert fx.p == pytest.approx(1 - 4 / math.sqrt(18), abs=1e-9)
    assert not fx.shared and "treat the seeds as independent" in fx.sentence()


def test_a_shared_seed_is_said_to_make_the_comparisons_conservative():
    """Seed 1 is 40% slower than seed 0 at every one of four batch sizes (residuals +-0.01): F is large, p < 0.05."""
    base = [1000.0, 2000.0, 3000.0, 4000.0]
    t = {f"B{i}": {0: b * math.exp(0.01 * (-1) ** i), 1: 1.4 * b, 2: 1.1 * b * math.exp(-0.01 * (-1) ** i)}
         for i, b in enumerate(base)}
    fx = seed_effect(t)
    assert fx.shared and fx.share > 0.95 and fx.p < 0.001
    assert "the seeds are shared, so the comparisons" in fx.sentence() and "conservative here" in fx.sentence()


def test_too_little_to_tell_gives_none():
    assert seed_effect({"a": {0: 1.0, 1: 2.0}, "b": {0: 1.0, 1: 2.0}}) is None  # two configurations
    assert seed_effect({"a": {0: 1.0}, "b": {0: 2.0}, "c": {0: 3.0}}) is None  # one seed each
    # unreached seeds are left out: the block is seeds 0, 1 of a, b, c
    fx = seed_effect({"a": {0: 1.0, 1: 2.0, 2: None}, "b": {0: 1.5, 1: 2.5, 2: 1.0}, "c": {0: 2.0, 1: 2.2, 2: 3.0}})
    assert fx.seeds == (0, 1) and fx.configs == 3


def test_the_stored_demo_sweep_states_its_seed_effect(tmp_path):
    """tests/data/demo_sweep (5 configurations x seeds 0-2, target 0.45): F = 1.11 on 2 and 8 df, p = 0.37, share
    2% (computed by a separate two-way ANOVA script on analyze's per-seed samples-to-target); said in the
    recommendation and in the headline's JSON."""
    import warnings

    from _stored_sweeps import unpack
    from rlbatch.analysis.study import Study
    from rlbatch.readers.collect import load_all

    trials = unpack(Path(__file__).resolve().parent / "data" / "demo_sweep" / "trials.tar.gz", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([trials])
        acc = Study.of(runs, 0.45).accounting
    fx = acc["headline"]["seed_effect"]
    assert fx["seeds"] == [0, 1, 2] and fx["configs"] == 5 and fx["df"] == [2, 8]
    assert round(fx["F"], 2) == 1.11 and round(fx["p"], 2) == 0.37 and round(fx["share"], 2) == 0.02
    assert "Seeds: the same seed ids (0, 1, 2) ran at 5 configurations" in acc["recommendation"]


def test_the_block_is_the_largest_complete_one_over_seed_subsets():
    """Review: configurations with seed sets {0,1,2}, {0,1,3}, {0,1,2} share seeds 0 and 1 (a 3 x 2 block); the
    old search tried only whole seed sets of one configuration and found none. Two configurations x 6 seeds are
    not a block (fewer than 3 configurations); five x 2 are."""
    t = {"A": {0: 1.0, 1: 1.3, 2: 1.1}, "B": {0: 2.0, 1: 2.5, 3: 2.2}, "C": {0: 3.0, 1: 3.1, 2: 3.3}}
    fx = seed_effect(t)
    assert fx is not None and fx.seeds == (0, 1) and fx.configs == 3
    six = {c: {s: 1.0 + 0.1 * s + i + 0.01 * (s * i % 3) for s in range(6)} for i, c in enumerate("XY")}
    five = {c: {s: 1.0 + i + 0.05 * s + 0.01 * (i % 2) * s for s in (10, 11)} for i, c in enumerate("abcde")}
    fx = seed_effect({**six, **five})
    assert fx is not None and fx.configs == 5 and fx.seeds == (10, 11)
    # an exact fit (seed and configuration effects only) has no residual spread: no F
    assert seed_effect({c: {s: (1 + i) * (1 + s) for s in range(3)} for i, c in enumerate("pqr")}) is None
