"""'What would decide' keeps its word (issue 52, done-when): the runs it suggests for an undecided 3-seed study,
run in simulation where the contender's true relative time is its estimate, call it faster about as often as the
stated power (within 0.1); an undecided one-seed study is told what would decide too."""

import warnings

from rlbatch.study.calibration import Scenario, analyze_runs, simulate_plan, simulate_study

# a three-rung ladder, B=256 truly 1.6x faster, no clock drift (the plan's sd is the seeds')
SC = Scenario("wd", seeds=3, batches=(16, 64, 256), gain={256: 1.6}, null=False, run_drift=0.0,
              step_jitter=0.0)


def _headline(sc, study_seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = analyze_runs(simulate_study(sc, study_seed), sc.target)
    return acc["headline"], acc["recommendation"]


def test_the_suggested_runs_reach_the_stated_power_in_simulation():
    head, text = _headline(SC, 1)  # study seed 1: undecided at 3 seeds (B=256 estimated 0.61x, sd 0.29 on 6 df)
    assert not head["beats_reference"]
    plan = head["would_decide"][0]
    assert plan["batch_size"] == 256 and plan["claim"] == "faster" and plan["seeds"]["0.80"] is not None
    assert "What would decide" in text and "B=256" in text.split("What would decide")[1]
    realised = simulate_plan(SC, plan, "0.80", studies=40, seed=3)
    assert abs(realised - 0.80) <= 0.10, (plan, realised)


def test_an_undecided_one_seed_ladder_is_told_what_would_decide():
    sc = Scenario("wd1", seeds=1, gain={256: 1.6}, null=False)
    head, text = _headline(sc, 3)  # the reference is the best estimate: the others would have to be shown slower
    assert not head["beats_reference"]
    assert head["would_decide"] and all(p["claim"] == "slower" for p in head["would_decide"])
    assert all(p["relative_time"] > 1 for p in head["would_decide"])
    assert "What would decide (the reference is the best estimate" in text
    small = Scenario("would decide, 1 seed, 3 rungs", seeds=1, batches=(16, 64, 256), null=False)
    _, text = _headline(small, 3)  # no spread at all: the line says how to measure one
    assert "run a second seed (a distinct seed" in text


def test_plan_and_watch_show_the_same_what_would_decide_as_analyze(tmp_path):
    from rlbatch.plan import plan_runs
    from rlbatch.plan_output import to_markdown
    from rlbatch.study.calibration import write_study
    from rlbatch.watch import line, snapshot

    runs = simulate_study(SC, 1)
    head, _ = _headline(SC, 1)
    text = head["would_decide_text"]
    assert text.startswith("What would decide") and "B=256" in text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_runs(runs, SC.target)  # the default replicates, as analyze
        assert plan["would_decide"] == text and text in to_markdown(plan)
        up = snapshot(write_study(runs, tmp_path / "study") / "trials", target=SC.target, n_boot=20)
    assert up.would_decide == text and text in line(up)
