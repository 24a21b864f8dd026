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


def test_every_page_repeats_the_sequential_studys_last_look():
    # near-ties (B = 128 0.55x, B = 256 0.5x; the benchmark's scenario), study seed 0: three looks; B64 was called
    # faster at an earlier look and got no more seeds while the reference did: at the last look its interval reaches 1. The report
    # and analyze re-analysed every run at the fixed design's level and could name another pick than the study
    # (the demo: B = 128 in the sequential section, B = 64 in the headline). With the record, the page's decision is
    # the last look's: its boundary, the study's claims (B64 included), its pick.
    from rlbatch.analysis.decision import FASTER, decide
    from rlbatch.analysis.study import Study

    sc = replace(Scenario("null, 3 seeds"), name="near-ties (B=128 0.55x, B=256 0.5x)", gain={128: 1 / 0.55, 256: 2.0}, null=False)
    res, runner = simulate_sequential(sc, 0)
    rec = res.to_json()
    assert len(res.looks) == 3 and "B64-G8-sqrt" in res.faster
    acc = Study.of(runner.runs(), sc.target, sequential=rec).accounted
    dec = acc["decision"]
    assert {n for n, v in dec.verdicts.items() if v.label == FASTER} == set(res.faster)
    assert dec.verdicts["B64-G8-sqrt"].why.startswith(f"called faster at look {res.faster['B64-G8-sqrt'] + 1}")
    assert dec.pick == acc["headline"]["pick"] == res.pick
    if len(dec.may_be_fastest) > 1:  # why the set was not separated is the study's stop, not "run more seeds"
        assert any(f"the sequential study stopped there ({res.stop})." in x for x in acc["headline"]["lines"])
    # without the study's claims the same look's boundary does not call B64 faster: the record is what decides it
    free = decide(acc["estimates"], res.reference, faster_tail=res.looks[-1].tail)
    assert free.verdicts["B64-G8-sqrt"].label != FASTER
    # no claims: nothing faster, the pick is a best estimate that does not beat the reference
    none = decide(acc["estimates"], res.reference, faster_tail=res.looks[-1].tail, called={})
    assert not any(v.label == FASTER for v in none.verdicts.values()) and not none.beats_reference
    # another question than the study's (another target) is analysed as a fixed design
    assert Study.of(runner.runs(), sc.target + 0.01, sequential=rec).sequential is None
    assert Study.of(runner.runs(), sc.target, reference="B32-G8-sqrt", sequential=rec).sequential is None


def test_a_malformed_sequential_record_is_one_error_naming_the_file(tmp_path):
    from rlbatch.errors import UserError
    from rlbatch.runstore import sequential_record

    assert sequential_record(tmp_path) is None
    (tmp_path / "sequential.json").write_text('{"faster": {}, "looks": [{"index": 0}]}\n', encoding="utf-8")
    with pytest.raises(UserError, match="not a sequential study's record") as err:
        sequential_record(tmp_path / "trials")  # found beside OUT/trials, as the timing pass's blocks are
    assert str(tmp_path / "sequential.json") in str(err.value)


def _est(t: float, log_sd: float, n: int = 4000) -> dict:
    import numpy as np
    z = np.random.default_rng(int(t * 1000) + int(log_sd * 100)).standard_normal(n)
    return {"time_to_target_s": t, "_replicates": {"T": t * np.exp(log_sd * z)}}


def test_the_zone_stop_needs_the_rest_shown_within_the_zone_not_only_estimated_there():
    """A near-tie (estimated 0.92x the time of the one called faster, within the 20% zone) stops the study only when
    its interval shows it no more than 20% faster (ratio's 10% end >= 1 / 1.2): with wide replicates (log-sd 0.3
    each) it may well be the faster one, and the study goes on (the point-estimate rule stopped, and picked the slower
    of two near-ties one time in five on the paper-shaped ladder)."""
    from rlbatch.study.sequential import _within_zone

    wide = {"ref": _est(100.0, 0.3), "a": _est(55.0, 0.3), "b": _est(50.6, 0.3)}
    assert not _within_zone(["b"], {"a": 0}, wide, "ref", 0.2)
    narrow = {"ref": _est(100.0, 0.02), "a": _est(55.0, 0.02), "b": _est(50.6, 0.02)}
    assert _within_zone(["b"], {"a": 0}, narrow, "ref", 0.2)
    # clearly faster than the one called (0.7x its time) is outside the zone however narrow
    narrow["b"] = _est(38.5, 0.02)
    assert not _within_zone(["b"], {"a": 0}, narrow, "ref", 0.2)
    # an active one without a time-to-target (censored) never lets the study stop for the zone
    narrow["b"] = {"time_to_target_s": None, "_replicates": {"T": None}}
    assert not _within_zone(["b"], {"a": 0}, narrow, "ref", 0.2)
