"""The researcher tryout's findings (../shared/reviews/researcher-tryout.md, issue 56), each checked on the repo's
own example logs with values read by hand from them.

examples/logs/verl: B64/B128/B256, verl console logs, validation every 5 steps and none at step 0
(B64.log line 6: step 5, val-core/openai/gsm8k/reward/mean@1 0.2486; B256: step 5, 1,280 retained samples, 0.356).
"""

from pathlib import Path

from _cli import run_in_process

VERL = Path(__file__).resolve().parents[1] / "examples" / "logs" / "verl"


def _json(monkeypatch, capsys, *args):
    import json

    code, out, err = run_in_process(monkeypatch, capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_finding_1_a_run_above_the_target_at_its_first_evaluation_is_bounded_not_unreached(monkeypatch, capsys):
    from rlbatch.report import with_ci_cells

    d = _json(monkeypatch, capsys, "analyze", VERL, "--target", "0.32")
    row = next(r for r in d["accounting"] if r["run"] == "B256")
    assert row["at_most"] == [1280.0] and row["samples_to_target_at_most"] == 1280.0
    assert row["n_reached"] == row["n_seeds"] == 1  # it reached the target (rerun: "n_reached": 0 beside at_most)
    cells = with_ci_cells([row])[0]
    assert cells["samples_to_target_cell"] == "≤ 1,280"
    assert cells["rN_cell"].startswith("≤ ") and cells["relative_time_cell"].startswith("≤ ")
    # the table's bound and the text's are one number, rounded outward (up for an upper bound)
    assert f"rN {cells['rN_cell']}" in d["recommendation"]
    assert "0 of 1 seeds reached" not in d["recommendation"]
    code, out, _ = run_in_process(monkeypatch, capsys, "analyze", VERL, "--target", "0.32")
    assert code == 0 and "≤ 1,280" in out


def test_finding_1_a_target_below_every_start_is_refused_with_one_line(monkeypatch, capsys):
    for t in ("0.2", "-3"):
        code, out, err = run_in_process(monkeypatch, capsys, "analyze", VERL, f"--target={t}")
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "at or below every run's first evaluation" in err and "0.2486, B64" in err
    code, _, err = run_in_process(monkeypatch, capsys, "plan", VERL, "--target=0.2")
    assert code == 2 and "0.2486" in err


def test_finding_2_a_point_value_table_is_never_within_noise(monkeypatch, capsys):
    # the paper's accounting table (Table 2, bundled): P256 0.80x, P2048 1.23x the reference P128's time
    code, out, err = run_in_process(monkeypatch, capsys, "account", "--paper", "--format", "markdown")
    assert code == 0, err
    assert "within noise" not in out
    assert "P256 is faster by its point estimates" in out and "0.80x" in out
    assert "P2048 is slower by its point estimates" in out and "1.23x" in out


def test_finding_12_without_a_batch_size_samples_to_target_is_unknown_not_unreached(monkeypatch, capsys, tmp_path):
    for b, scores in ((64, (0.2, 0.3, 0.45, 0.56)), (128, (0.2, 0.35, 0.5, 0.6))):  # both pass 0.5: no P, no G
        (tmp_path / f"bs{b}.csv").write_text("step,val_acc,step_time_s\n" + "".join(
            f"{10 * (i + 1)},{s},{1 + b / 128}\n" for i, s in enumerate(scores)))
    code, out, _ = run_in_process(monkeypatch, capsys, "analyze", tmp_path, "--target", "0.5")
    assert code == 0
    assert "unknown (no batch size)" in out and "not reached" not in out
    assert "no batch size in the logs" in out


def test_finding_13_a_run_cut_short_is_said_to_end_early_not_to_have_run_its_budget():
    import dataclasses
    import warnings

    from rlbatch.study.calibration import Scenario, analyze_runs, simulate_study

    sc = Scenario("finding 13", seeds=2, batches=(16, 64, 256), budget=10240)
    runs = simulate_study(sc, 0)
    cut = []
    for r in runs:  # B=256 seed 1 "crashes" at 1,024 retained samples (4 steps), far before the target (~2,700)
        if r.run_id == "B256-G8-sqrt-s1":
            r = dataclasses.replace(r, metrics=r.metrics[r.metrics["samples/retained"] <= 1024],
                                    evals=r.evals[r.evals["samples/retained"] <= 1024])
        cut.append(r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = analyze_runs(cut, sc.target)
    row = next(r for r in acc["accounting"] if r["batch_size"] == 256)
    assert row["verdict"] == "undetermined" and row["n_reached"] == 1
    assert "its log ends at 1,024 retained samples, less than the others' (up to 10,240)" in row["why"]
    assert "may have crashed" in row["why"] and "ran its budget" not in acc["recommendation"]
    # the plan names the same "may be the fastest" set (rerun, stop 64: the cut-short B = 256 was left out of the
    # plan's "May be as fast as the pick", while analyze had it)
    from rlbatch.plan import plan_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_runs(cut, sc.target, extend=False)
    names = {r["run"] for r in acc["accounting"] if r.get("may_be_fastest")}
    assert set(plan["within_noise"]) | {plan["recommended"]} == names, (plan["within_noise"], names)


def test_finding_5_a_one_seed_fitted_interval_carries_the_seed_spread_or_is_not_given():
    import math

    from rlbatch.plan import _with_seed_spread

    ests = {"a": {"spread_sd": {"S": 0.3}}, "b": {"spread_sd": None}}
    lo, hi = _with_seed_spread([0.60, 0.74], 0.64, 1, 1, ests)  # the tryout's live [0.60, 0.74] around 0.64
    w = 1.959964 * 0.3 * math.sqrt(2)  # hand: 0.8316 on the log scale, in quadrature with the fit's own
    assert math.isclose(lo, 0.64 * math.exp(-math.hypot(math.log(0.64 / 0.60), w)), rel_tol=1e-12)
    assert math.isclose(hi, 0.64 * math.exp(math.hypot(math.log(0.74 / 0.64), w)), rel_tol=1e-12)
    assert 0.27 < lo < 0.29 and 1.48 < hi < 1.50 and lo < 1.06 / 1.6 and hi > 1.06  # covers the measured 1.06
    assert _with_seed_spread([0.60, 0.74], 0.64, 1, 1, {"b": {"spread_sd": None}}) is None  # no spread: none
    assert _with_seed_spread([0.60, 0.74], 0.64, 3, 3, ests) == [0.60, 0.74]  # seeds bootstrapped: as it was
    # a noise-model interval (B_noise's alone) never holds the seeds: widened at 3 seeds too, by sqrt(2/3)
    lo3, hi3 = _with_seed_spread([1.0, 1.3], 1.1, 3, 3, ests, seeds_in_ci=False)
    w3 = 1.959964 * 0.3 * math.sqrt(2 / 3)
    assert math.isclose(hi3, 1.1 * math.exp(math.hypot(math.log(1.3 / 1.1), w3)), rel_tol=1e-12) and lo3 < 1.0


def test_finding_5_a_one_seed_noise_model_prediction_has_no_interval_without_a_spread(tmp_path):
    """The tryout's rerun (stop 64): a one-seed B = 64 early in a sweep, its rN from the noise model, showed
    rel.time 0.71 [0.62, 0.82] in watch (B_noise's interval alone) and measured 1.04. The stored demo sweep's first
    seed, B = 64 and 128 cut to their first 3%: their rN comes from the noise model, and with one seed everywhere
    there is no spread, so no interval (as analyze)."""
    import warnings

    from _stored_sweeps import unpack
    from rlbatch.plan import plan_runs, truncate_runs
    from rlbatch.readers.collect import load_all
    from rlbatch.watch import line, predict

    trials = unpack(Path(__file__).resolve().parent / "data" / "demo_sweep" / "trials.tar.gz", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([trials])
        runs = [truncate_runs([r], 0.03)[0] if ("B64" in r.run_id or "B128-G8-sqrt" in r.run_id) else r
                for r in runs if r.run_id.endswith("-s0")]
        plan = plan_runs(runs, 0.45, extend=False)
        c = next(c for c in plan["candidates"] if c["run"] == "B64-G8-sqrt-s0")
        assert c["rN_source"] == "noise-model" and c["rN"] > 1 and c["rN_ci"] is None and c["interval"] is None
        text = line(predict(runs, target=0.45))
    b64 = next(s for s in text.splitlines() if "B64-G8-sqrt-s0 S=" in s)
    assert "rel.time=" in b64 and "rel.time=" + f"{c['predicted_relative_time']:.2f}" in b64 and "[" not in \
        b64.split("rel.time=")[1]


def _lr_study(rn_fixed, control=True, seeds=3):
    """B = 16, 64, 256 on the square-root rule (simulated, 3 seeds) and, with ``control``, B = 256 at the
    reference's LR whose true samples-to-target is ``rn_fixed`` x the rule's."""
    import warnings
    from dataclasses import replace

    import numpy as np

    from rlbatch.runstore import Run
    from rlbatch.study.calibration import Scenario, analyze_runs, simulate_run, simulate_study

    sc = Scenario("lr answer", seeds=seeds, batches=(16, 64, 256))
    runs = simulate_study(sc, 0)
    if control:
        fx, rng = replace(sc, name="lr answer fixed", rn={256: rn_fixed}), np.random.default_rng(100)
        for i in range(seeds):
            r = simulate_run(fx, 256, i, rng)
            meta = r.meta.model_copy(update={"run_id": f"B256-G8-fixed-s{i}", "lr_rule": "none", "lr": 5e-5})
            runs.append(Run(meta=meta, metrics=r.metrics, evals=r.evals))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze_runs(runs, sc.target)


def test_finding_9_the_learning_rate_question_is_answered_in_one_line():
    acc = _lr_study(1.8)  # the fixed LR truly needs 1.8x the samples at B = 256
    ans = acc["headline"]["lr_answer"]
    assert ans["batch_size"] == 256 and ans["control"] == "B256-G8-fixed" and ans["scaled"] == "B256-G8-sqrt"
    assert 1.4 < ans["ratio"] < 2.3 and ans["ratio_ci"][0] > 1
    assert ans["sentence"].endswith("scale the learning rate (the square-root rule saves samples beyond noise).")
    assert ans["sentence"] in acc["recommendation"]
    # the same ratio as the table's samples-to-target of the two (one estimate per configuration)
    rows = {r["run"]: r for r in acc["accounting"]}
    assert abs(rows["B256-G8-fixed"]["samples_to_target"] / rows["B256-G8-sqrt"]["samples_to_target"]
               - ans["ratio"]) < 1e-9 * ans["ratio"]
    same = _lr_study(1.0)["headline"]["lr_answer"]  # no true difference: the words say it is not settled
    assert "within noise at these seeds" in same["sentence"] and same["ratio_ci"][0] < 1 < same["ratio_ci"][1]
    none = _lr_study(1.0, control=False)["headline"]["lr_answer"]  # no control: which run would answer
    assert "Not answered by these runs" in none["sentence"] and "B = 256" in none["sentence"]


def test_findings_7_and_8_one_meaning_of_aligned_and_intervals_labelled():
    import warnings

    from rlbatch.analysis.decision import NOT_DISTINGUISHABLE
    from rlbatch.plan import plan_runs
    from rlbatch.plan_output import to_markdown
    from rlbatch.report import accounting_columns
    from rlbatch.study.calibration import Scenario, simulate_study

    sc = Scenario("findings 7 and 8", seeds=3, batches=(16, 64, 256))  # every rN truly 1; 3 seeds cannot show it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_runs(simulate_study(sc, 0), sc.target)
    undist = [c for c in plan["candidates"] if c["alignment"] == NOT_DISTINGUISHABLE]
    assert undist, [(c["batch_size"], c["alignment"]) for c in plan["candidates"]]
    for c in undist:  # "not shown aligned", never "outside" or a bare "no"
        assert c["aligned"] is False and "not shown aligned: not distinguishable from 1" in c["sentence"]
        assert "outside the aligned family" not in c["sentence"]
    assert "rN vs 1 (alignment)" in to_markdown(plan) and NOT_DISTINGUISHABLE in to_markdown(plan)
    heads = [h for _, h, _ in accounting_columns(combined=True)]
    assert "rN (95% simultaneous)" in heads and "rel. time-to-target (95% simultaneous)" in heads


def test_finding_8_a_censored_bound_is_one_number_in_analyze_and_plan():
    import re
    import warnings

    from rlbatch.plan import plan_runs
    from rlbatch.study.calibration import Scenario, analyze_runs, simulate_study

    sc = Scenario("f8", seeds=3, batches=(16, 64, 256), rn={256: 4.0}, budget=6144)  # B=256 mostly censored
    runs = simulate_study(sc, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = analyze_runs(runs, sc.target)
        plan = plan_runs(runs, sc.target)
    said = re.search(r"B256-G8-sqrt \(B=256\): [^.]*?rN > ([\d.]+), relative time > ([\d.]+)", acc["recommendation"])
    c = next(x for x in plan["candidates"] if x["batch_size"] == 256)
    assert said and f"rN > {said[1]}" in c["sentence"] and f"relative time > {said[2]}" in c["sentence"]


def test_finding_16_a_warning_shows_a_value_as_logged_not_a_numpy_repr(tmp_path):
    import warnings

    from rlbatch.readers.collect import load_all

    (tmp_path / "big.csv").write_text("step,loss,val_acc\n1,0.5,0.2\n2,0.4,0.3\n1e18,0.3,0.4\n")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        _, msgs = load_all([tmp_path / "big.csv"])
    text = " ".join([str(w.message) for w in got] + [str(m) for m in msgs])
    assert "(first: 1e+18); skipped" in text and "np.float64" not in text


def test_finding_16_watch_says_not_yet_known_in_words():
    from rlbatch.watch import ConfigView, WatchUpdate, line

    v = ConfigView("B64", ["B64-s0"], 64, 1048.0, 3, 0.281, [(0.0, 0.2), (1048.0, 0.281)])
    up = WatchUpdate(7, "runs/x", 0.35, "eval/score", "wall", [v])
    assert "S*=not yet known T*=not yet known" in line(up) and "S*=- (-)" not in line(up)
    v.source = "never"
    assert "S*=never (its fit levels off below the target)" in line(up)


def test_finding_7_the_noise_section_does_not_call_the_undistinguished_range_the_aligned_family():
    from rlbatch.report.sections import NO_PENALTY, b_simple_vs_family, knee_vs_family

    s = knee_vs_family({"knee_batch": 1024, "doublings": [{"ratio": 0.83}]}, [16, 32, 64, 512])
    assert NO_PENALTY in s and "up to B = 512" in s and "aligned family" not in s
    s = b_simple_vs_family({"measurable": True, "b_simple": 5000.0}, [16, 32, 64, 512])
    assert "exceeds the range where rN is not shown above 1" in s and "aligned family" not in s


def test_finding_8_where_an_interval_is_not_the_configurations_own_spread_is_said_beside_it(tmp_path):
    """Finding 8's last part: an interval whose seed spread is not the configuration's own was explained only at
    the foot of the page. The stored demo sweep (target 0.45): B = 64's three times-to-target scatter more than the
    others' allow (log-sd 0.53; the others are moderated to 0.30), so its relative-time interval uses its own spread
    on 2 df: 0.02-2.97, against rN 0.59-1.25. The headline says so, in analyze and in the report."""
    import warnings

    from _stored_sweeps import unpack
    from rlbatch.analysis.study import Study
    from rlbatch.readers.collect import load_all

    trials = unpack(Path(__file__).resolve().parent / "data" / "demo_sweep" / "trials.tar.gz", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([trials])
        acc = Study.of(runs, 0.45).accounting
    b64 = next(r for r in acc["accounting"] if r["run"] == "B64-G8-sqrt")
    assert b64["spread"]["T"].startswith("own (wider") and round(b64["spread_sd"]["T"], 2) == 0.53
    lo, hi = b64["relative_time_ci"]
    assert lo < 0.05 and hi > 2.5  # the wide interval the rerun asked about
    text = acc["headline"]["spread_text"]
    assert "B64-G8-sqrt (B=64)'s times-to-target scatter more across its 3 seeds" in text
    assert "relative time interval uses its own spread on 2 degrees of freedom" in text
    assert text in acc["recommendation"]  # the recommendation analyze and the report print
    assert "B32" not in text and "B128" not in text  # the others use a spread close to their own


def test_finding_8_one_seed_and_agreeing_seeds_are_named_with_the_spread_they_borrow():
    """Hand-made rows: a one-seed configuration borrows the others' spread; three seeds that agree within 3%
    (log-sd 0.015) whose moderated spread is 0.19 are named with both numbers; seeds whose own spread is close to
    the one used (0.17 against 0.19) are not."""
    from rlbatch.analysis.headline import spread_text

    def row(run, b, seeds, how, sd):
        return {"run": run, "batch_size": b, "reached": True, "n_seeds": len(seeds), "samples_to_target_per_seed":
                seeds, "spread": {"S": how, "T": how, "X": how}, "spread_sd": {"S": sd, "T": sd, "X": 0.05},
                "spread_df": {"S": 16.0, "T": 16.0, "X": 16.0}}

    text = spread_text([row("one", 32, [1000.0], "moderated", 0.21),
                        row("agree", 64, [3710.0, 3760.0, 3820.0], "moderated", 0.19),
                        row("scatter", 128, [3000.0, 3600.0, 4200.0], "moderated", 0.19)])
    assert text.startswith("Seed spread behind the intervals: ")
    assert "one (B=32) has one seed: its intervals use the spread of the other configurations' seeds (log-sd 0.21" \
        in text
    assert "agree (B=64)'s 3 seeds agree within 3% (log-sd 0.01), but its intervals use 0.19" in text
    assert "scatter" not in text
    assert spread_text([row("scatter", 128, [3000.0, 3600.0, 4200.0], "moderated", 0.19)]) is None


def test_finding_13_where_a_log_ends_is_the_runs_tables_number():
    """Rerun of finding 13: the plan said "its log ends at 15,104" where the runs table showed 15,360 for the same
    run: the end was taken from the run's clock (rows with a time), the table from its last logged retained
    samples. A run cut at 1,024 retained samples whose last step logs no time: both say 1,024."""
    import dataclasses
    import warnings

    import numpy as np

    from rlbatch.analysis.summaries import seed_rows
    from rlbatch.study.calibration import Scenario, analyze_runs, simulate_study

    sc = Scenario("finding 13", seeds=2, batches=(16, 64, 256), budget=10240)
    cut = []
    for r in simulate_study(sc, 0):
        if r.run_id == "B256-G8-sqrt-s1":
            m = r.metrics[r.metrics["samples/retained"] <= 1024].copy()
            m.loc[m.index[-1], [c for c in m.columns if c.startswith("time/")]] = np.nan  # last step: no time
            r = dataclasses.replace(r, metrics=m, evals=r.evals[r.evals["samples/retained"] <= 1024])
        cut.append(r)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        acc = analyze_runs(cut, sc.target)
    row = next(r for r in acc["accounting"] if r["batch_size"] == 256)
    shown = next(s for s in seed_rows({"x": [r for r in cut if r.run_id == "B256-G8-sqrt-s1"]})
                 if s["config"] == "x")["samples_retained"]
    assert shown == 1024.0
    assert f"its log ends at {shown:,.0f} retained samples" in row["why"], row["why"]


def test_finding_8_the_spread_sentence_names_the_interval_each_spread_enters():
    """Review: samples-to-target's own spread enters rN's interval, not the relative time's (that one rests on the
    times-to-target); a two-seed configuration's own spread is half-pooled, not 'its own on 2 df'."""
    from rlbatch.analysis.headline import spread_text

    row = {"run": "B64", "batch_size": 64, "reached": True, "n_seeds": 3, "samples_to_target_per_seed": [1, 2, 4],
           "spread": {"S": "own (wider than the others')", "T": "moderated", "X": "moderated"},
           "spread_sd": {"S": 0.69, "T": 0.2, "X": 0.05}, "spread_df": {"S": 2.0, "T": 16.0, "X": 16.0}}
    text = spread_text([row])
    assert "samples-to-target scatter more across its 3 seeds" in text
    assert "its rN interval uses its own spread on 2 degrees of freedom" in text and "relative time" not in text
    two = {**row, "n_seeds": 2, "samples_to_target_per_seed": [1, 3],
           "spread": {"S": "moderated", "T": "own (wider than the others'), moderated by 1 df of the others'",
                      "X": "moderated"}, "spread_sd": {"S": 0.2, "T": 0.5, "X": 0.05},
           "spread_df": {"S": 16.0, "T": 2.0, "X": 16.0}}
    text = spread_text([two])
    assert "relative time interval uses its own spread half-pooled with the others' (1 degree of freedom of its " \
           "own and 1 of theirs)" in text, text
