"""The decision's corrections of issue 52 (statistics review 2, N1, N3, N4, N5, N6) and "what would decide", on
configurations built by hand: replicates of the log relative time with a known centre and spread, so each verdict
can be computed on paper (normal quantiles)."""

import math

import numpy as np
import pytest
from scipy import stats

from rlbatch.analysis.decision import (ALPHA_FASTER, FASTER, NOT_DISTINGUISHABLE, PENALISED, UNDETERMINED,
                                       WITHIN_NOISE, decide, split_tails)
from rlbatch.analysis.would_decide import ZONE, plan_seeds
from rlbatch.analysis.sequential import seeds_for_power

N = 20000
Z = stats.norm.ppf((np.arange(N) + 0.5) / N)  # stratified standard normal quantiles


def reps(mu, sd=1.0, perm=0):
    """exp(mu + sd z), z in a fixed random order (replicate i of different configurations independent)."""
    z = np.random.default_rng(perm).permutation(Z)
    return np.exp(mu + sd * z)


def est(name, b, mu=None, *, sd=1.0, perm=1, low=None, high=None, seeds=3, spread=None):
    """One configuration: measured (``mu``: log time), censored (``low``: log lower bound) or reached before its
    first evaluation (``high``: log upper bound)."""
    e = {"config": name, "batch_size": b, "n_seeds": seeds, "reached": mu is not None, "stopped": None,
         "unfinished": [], "at_most": [], "_replicates": {}, "spread_sd": spread and {"T": spread[0]},
         "spread_df": spread and {"T": spread[1]}}
    if mu is not None:
        r = reps(mu, sd, perm)
        e.update(samples_to_target=math.exp(mu), time_to_target_s=math.exp(mu), throughput_samples_per_s=1.0,
                 n_reached=seeds)
        e["_replicates"] = {"S": r, "T": r, "X": np.ones(N)}
    elif low is not None:
        e.update(samples_to_target=None, time_to_target_s=None, throughput_samples_per_s=1.0, n_reached=seeds - 1,
                 samples_to_target_at_least=math.exp(low), time_to_target_at_least=math.exp(low))
        r = reps(low, sd, perm)
        e["_replicates"] = {"S_low": r, "T_low": r, "X": np.ones(N)}
    else:
        e.update(samples_to_target=None, time_to_target_s=None, throughput_samples_per_s=1.0, n_reached=seeds,
                 at_most=[1.0], samples_to_target_at_most=math.exp(high), time_to_target_at_most=math.exp(high))
        r = reps(high, sd, perm)
        e["_replicates"] = {"S_high": r, "T_high": r, "X": np.ones(N)}
    return e


def ref():
    e = est("ref", 16, 0.0)
    e["_replicates"] = {"S": np.ones(N), "T": np.ones(N), "X": np.ones(N)}  # the comparison's spread sits in c
    return e


def test_faster_is_one_sided_at_four_percent_with_one_comparison():
    # one comparison: the upper end is the 96% quantile: mu + 1.751 sd; two-sided 95% would need mu + 1.960 < 0
    assert split_tails([reps(0.0)], 0.95) == pytest.approx((0.01, 0.04))
    near = decide({"ref": ref(), "c": est("c", 64, -1.85)}, "ref")
    assert near.verdicts["c"].label == FASTER and near.beats_reference and near.pick == "c"
    assert near.verdicts["c"].relative_time.hi == pytest.approx(math.exp(-1.85 + stats.norm.ppf(0.96)), rel=2e-3)
    assert near.may_be_fastest == ("c",)  # the reference is out exactly when something is faster (N5)
    short = decide({"ref": ref(), "c": est("c", 64, -1.70)}, "ref")
    assert short.verdicts["c"].label == WITHIN_NOISE and not short.beats_reference
    # nothing faster: the reference stays in the set, and the pick is the best estimate, which does not beat it
    assert "ref" in short.may_be_fastest and short.pick == "c"
    # "slower" needs the lower end (1% quantile) above 1: mu - 2.326 sd > 0
    assert decide({"ref": ref(), "c": est("c", 64, 2.40)}, "ref").verdicts["c"].label == "slower"
    assert decide({"ref": ref(), "c": est("c", 64, 2.20)}, "ref").verdicts["c"].label == WITHIN_NOISE


def test_the_pick_is_the_smallest_upper_end_not_the_smallest_estimate():
    # c1: estimate 0.30x but a wide interval; c2: 0.45x with a narrow one: the safe pick is c2 (N6)
    d = decide({"ref": ref(), "c1": est("c1", 32, math.log(0.30), sd=1.2, perm=2),
                "c2": est("c2", 64, math.log(0.45), sd=0.2, perm=3)}, "ref")
    assert d.verdicts["c2"].label == FASTER
    assert d.verdicts["c2"].relative_time.hi < d.verdicts["c1"].relative_time.hi
    assert d.pick == "c2"


def test_a_censored_configuration_stays_in_the_set_unless_its_lower_bound_is_beaten():
    # c measured at 0.2x; cens has at least 0.3x (lower bound; log difference 0.41 against an sd of 0.42): not
    # beaten beyond noise, so it stays (N3)
    ests = {"ref": ref(), "c": est("c", 64, math.log(0.2), sd=0.3, perm=2),
            "cens": est("cens", 1024, low=math.log(0.3), sd=0.3, perm=3)}
    d = decide(ests, "ref")
    assert "cens" in d.may_be_fastest and d.verdicts["cens"].label == UNDETERMINED
    # its lower bound at 3x: beaten by c (0.2x) beyond noise, out
    ests["cens"] = est("cens", 1024, low=math.log(3.0), sd=0.3, perm=3)
    assert "cens" not in decide(ests, "ref").may_be_fastest


def test_reaching_the_target_before_the_first_evaluation_is_an_upper_bound_that_can_show_faster():
    # at most 0.1x the reference's time (upper bound), log-sd 1: its 96% end 0.1 e^1.751 = 0.58 < 1: faster (N1)
    d = decide({"ref": ref(), "early": est("early", 2048, high=math.log(0.1))}, "ref")
    v = d.verdicts["early"]
    assert v.label == FASTER and v.relative_time_at_most.hi == pytest.approx(0.1 * math.exp(stats.norm.ppf(0.96)),
                                                                            rel=3e-3)
    assert "before their first evaluation" in v.why and d.pick == "early" and d.beats_reference
    # at most 0.5x: not shown faster, undetermined, and never out of "may be fastest" (no lower bound)
    d = decide({"ref": ref(), "c": est("c", 64, math.log(0.05), sd=0.2, perm=2),
                "early": est("early", 2048, high=math.log(0.5))}, "ref")
    assert d.verdicts["early"].label == UNDETERMINED and "early" in d.may_be_fastest


def test_nothing_shown_faster_picks_a_bounded_configuration_at_its_bound():
    # early: at most 0.5x (log-sd 1: not shown faster); c: 0.8x measured, not shown faster either. The best estimate
    # counts early at its bound, 0.5 < 0.8: early is picked (its true time is no larger), never c
    d = decide({"ref": ref(), "c": est("c", 64, math.log(0.8), sd=1.0, perm=2),
                "early": est("early", 2048, high=math.log(0.5))}, "ref")
    assert d.verdicts["early"].label == UNDETERMINED and d.verdicts["c"].label == WITHIN_NOISE
    assert d.pick == "early" and not d.beats_reference
    # its bound at 0.9x, above c's 0.8x estimate: c, the smaller estimate, is the pick
    d = decide({"ref": ref(), "c": est("c", 64, math.log(0.8), sd=1.0, perm=2),
                "early": est("early", 2048, high=math.log(0.9))}, "ref")
    assert d.pick == "c"


def test_penalised_needs_the_simultaneous_lower_end_above_one():
    # 8 comparisons of rN, one at log rN 1.8 sd 1: the 90% marginal interval (lower end 1.8 - 1.645) lies above 1,
    # the 95% simultaneous one (lower end ~1.8 - 2.7) does not: not penalised (N4)
    ests = {"ref": ref(), **{f"c{i}": est(f"c{i}", 32 * 2 ** i, 0.0, perm=10 + i) for i in range(7)}}
    ests["c7"] = est("c7", 4096, 1.8, perm=30)
    v = decide(ests, "ref").verdicts["c7"]
    assert v.rN_test[0] > 1 and v.rN.lo < 1 and v.alignment == NOT_DISTINGUISHABLE
    ests["c7"] = est("c7", 4096, 3.5, perm=30)
    assert decide(ests, "ref").verdicts["c7"].alignment == PENALISED


def test_what_would_decide_counts_the_seeds_of_the_one_sided_test():
    ests = {"ref": ref(), "c": est("c", 64, math.log(0.6), spread=(0.3, 16.0), perm=2),
            "tie": est("tie", 128, math.log(0.97), spread=(0.3, 16.0), perm=3)}
    d = decide(ests, "ref")
    assert not d.beats_reference
    plans = {p.config: p for p in d.would_decide}
    want = seeds_for_power(math.log(0.6), 0.3, 0.8, n_configs=3, alpha=ALPHA_FASTER, sigma_df=16.0)
    assert plans["c"].seeds[0.8] == want and plans["c"].seeds[0.9] >= want
    assert plans["c"].more_runs(0.8) == 2 * (want - 3)
    assert plans["tie"].seeds == {} and f"{ZONE:.0%} indifference zone" in plans["tie"].reason
    assert plan_seeds(ests, None, ["c"], 2, ALPHA_FASTER) == ()


def test_an_interval_end_past_floating_point_is_infinite_not_an_error():
    # a relative time's replicates from a spread on ~1.4 df (2 seeds, barely moderated) reach log ratios past 709:
    # the sequential calibration crashed with OverflowError at math.exp; the end is +inf (open above)
    import numpy as np

    from rlbatch.analysis.decision import _interval, _upper

    assert _interval(np.array([-800.0, 0.0, 1.0, 900.0]), 0.0, 0.0) == (0.0, float("inf"))
    # an at-most bound's upper end too (the calibration's second crash)
    up = _upper({"t": 2.0}, {"t": 1.0}, "t", "t", np.array([0.0, 1.0, 900.0]), 0.0)
    assert up.value == 2.0 and up.hi == float("inf")


def test_a_batch_first_evaluated_after_its_crossing_is_bounded_by_the_reference_shape():
    """The calibration's "crossing before the first evaluation" study (every 4 steps; B = 2048 truly 3x faster,
    every B on the same curve, ~2,730 samples to the target) at study seed 1, 3 seeds. B = 2048's seeds are first
    evaluated at 8,192 samples, above the target, so each is only known to be at most 8,192 (3x the truth): that
    bound never shows it faster. Their scores there (~0.46 of the plateau's 0.48) bound each seed's S at about half
    (4,423 on the geometric mean, by the reference's curve shape), and the relative time's 95% upper end is 0.75:
    faster. The same study without the throughput gain is not called faster (upper end above 1)."""
    import warnings
    from dataclasses import replace

    from rlbatch.analysis.accounting import account_runs
    from rlbatch.study.calibration import Scenario, SimulatedRunner

    sc = Scenario("crossing", eval_steps=4, gain={2048: 3.0}, null=False)
    for scenario, faster in ((sc, True), (replace(sc, gain={}, null=True), False)):
        runner = SimulatedRunner(scenario, 1)
        runner.ensure({n: 3 for n in runner.names})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc = account_runs(runner.runs(), scenario.target, reference=list(runner.names)[0], n_boot=2000)
        row = next(r for r in acc["rows"] if r["batch_size"] == 2048)
        assert row["at_most_by_shape"] == 3 and len(row["at_most"]) == 3
        assert 3000 < row["samples_to_target_at_most"] < 6000  # not 8,192: tightened, and above the truth's 2,730
        assert (row["verdict"] == "faster") is faster
        assert "against the reference's curve shape" in row["why"]
        if faster:
            assert row["relative_time_at_most_hi"] < 1
        else:
            assert row["relative_time_at_most_hi"] > 1


def test_the_headline_names_a_bounded_pick_by_its_bound_and_claims_nothing():
    from rlbatch.analysis.headline import headline

    rows = [{"run": "ref", "batch_size": 16, "reached": True, "relative_time": 1.0, "rN": 1.0, "n_seeds": 3},
            {"run": "c", "batch_size": 64, "reached": True, "relative_time": 0.8, "relative_time_ci": [0.3, 2.1],
             "relative_throughput": 2.0, "relative_throughput_ci": [1.9, 2.1], "rN": 2.5, "rN_ci": [1.0, 6.0],
             "n_seeds": 3},
            {"run": "early", "batch_size": 2048, "reached": False, "relative_time": None,
             "relative_time_at_most": 0.5, "relative_time_at_most_hi": 1.4, "rN_at_most": 4.0, "at_most": [1, 2, 3],
             "at_most_by_shape": 3, "n_seeds": 3}]
    h = headline(rows, "ref", "eval/score", 0.45, pick="early", may_be_fastest=["ref", "c", "early"])
    first = h["lines"][0]
    assert first.startswith("**No batch is shown to beat the reference")
    assert "at most 0.50x (95% upper end 1.40)" in first and "does not exclude 1" in first
    assert h["pick"] == "early" and not h["beats_reference"]


@pytest.mark.parametrize("study_seed, faster", [(2, False), (3, True)])
def test_a_bounded_pick_is_one_pick_on_every_page(tmp_path, study_seed, faster):
    """The crossing-before-the-first-evaluation study (every 4 steps, B = 2048 truly 3x faster) at two study seeds,
    3 seeds each: at seed 3 B = 2048 is shown faster by its upper bound; at seed 2 it is not, and its bound (0.66x)
    is below every measured estimate, so it is the best estimate. Before, analyze named it while plan ranked it
    "undetermined" from the noise model (seed 3: "no batch beats the reference", best B = 256), watch showed a lower
    bound ("S*=open [2145, open]") and "what would decide" said the reference was the best estimate. Now analyze
    (JSON, Markdown), plan and watch name the one pick, with the accounting's verdict and bound."""
    import warnings

    from rlbatch.analysis.study import Study
    from rlbatch.plan import make_plan
    from rlbatch.readers.collect import load_all
    from rlbatch.study.calibration import Scenario, SimulatedRunner, write_study
    from rlbatch.watch import line, snapshot

    sc = Scenario("crossing", eval_steps=4, gain={2048: 3.0}, null=False)
    runner = SimulatedRunner(sc, study_seed)
    runner.ensure({n: 3 for n in runner.names})
    out = write_study(runner.runs(), tmp_path / "study")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([out])
        acc = Study.of(runs, sc.target).accounted
        row = next(r for r in acc["rows"] if r["batch_size"] == 2048)
        assert acc["headline"]["pick"] == row["run"] and row["relative_time"] is None
        assert (row["verdict"] == "faster") is faster and acc["headline"]["beats_reference"] is faster
        at_most = f"at most {row['relative_time_at_most']:.2f}"[:-1]  # rounded up on the pages: compare 1 digit
        plan = make_plan([out], target=sc.target)
        cand = next(c for c in plan["candidates"] if c["run"] == row["run"])
        assert plan["recommended"] == row["run"] and cand["pick"] and cand["verdict"] == row["verdict"]
        assert cand["relative_time_at_most"] == row["relative_time_at_most"]
        assert at_most in cand["sentence"] and "before its first evaluation" in cand["sentence"]
        up = snapshot(out, target=sc.target)
        assert up.recommended == row["run"]
        text = line(up)
        assert f"{row['run']} S=" in text and "S*≤" in text and "open [" not in text.split(row["run"] + " S=")[1]
        if not faster:
            assert "(at most 0.6" in (up.would_decide or "")  # planned at its bound, not "the reference is best"
