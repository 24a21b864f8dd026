import json
import math
import subprocess
import sys
from functools import partial

import pandas as pd
import pytest

from conftest import PAPER_CSV
from rlbatch.errors import UserError
from rlbatch.report.plan import plan_section
from rlbatch.analysis.noise_model import fit_b_noise, noise_model_rn
from rlbatch.plan import (_headline, plan_runs, plan_table, profile_timings,
                          truncate_runs)
from rlbatch.readers import load
from rlbatch.analysis.accounting import account_runs
from rlbatch.backends.synthetic import SyntheticModel, synthetic_trial
from rlbatch.study.ladder import build_ladder

TARGET = 0.7
MODEL = SyntheticModel()


def rlbatch(*args):
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", *map(str, args)], capture_output=True, text=True)


def by_run(plan):
    return {c["run"] if c["run"] is not None else c["batch_size"]: c for c in plan["candidates"]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A synthetic full sweep: B = 128..4096 (sqrt rule), 3 seeds each, every trial long enough to reach 0.7."""
    root = tmp_path_factory.mktemp("sweep")
    budget = int(1.2 * MODEL.samples_to_target(4096, TARGET))
    for t in build_ladder(base_batch=128, base_lr=1e-6, batches=[128, 256, 512, 1024, 2048, 4096], samples=budget,
                          seeds=3):
        synthetic_trial(t, root / t.run_id, MODEL)
    return root


# --------------------------------------------------------------------------------------------------- the paper table
def test_paper_table_recommends_p1024_and_rejects_for_the_papers_reason():
    res = rlbatch("plan", PAPER_CSV, "--reference", "P128", "--target", "0.77", "--format", "json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["recommended"] == "P1024" and plan["reference"] == "P128" and plan["target"] == 0.77
    c = by_run(plan)
    for key in ("rN", "rN_ci", "rN_source", "relative_throughput", "throughput_source", "predicted_relative_time",
                "interval", "aligned", "verdict", "sentence"):
        assert key in c["P2048"]
    # the paper's numbers: relative time = rN / relative throughput
    assert round(c["P1024"]["predicted_relative_time"], 2) == 0.71
    assert round(c["P2048"]["predicted_relative_time"], 2) == 1.23
    assert round(c["P256-fixed-lr"]["predicted_relative_time"], 2) == 1.42
    for name in ("P2048", "P256-fixed-lr"):  # throughput gain below rN; a table of point values has no interval
        assert c[name]["verdict"] == "slower (point estimate)" and c[name]["rejected"] is True
        assert c[name]["relative_throughput"] < c[name]["rN"]
        assert "does not beat" in c[name]["sentence"] and "throughput gain below rN" in c[name]["sentence"]
    assert c["P256"]["verdict"] == "faster (point estimate)" and c["P128"]["verdict"] == "reference"
    assert [c[n]["aligned"] for n in ("P128", "P256", "P1024", "P2048", "P256-fixed-lr")] == [True, True, True,
                                                                                              False, False]
    assert c["P256-fixed-lr"]["on_lr_rule"] is False and "off the square-root LR rule" in c["P256-fixed-lr"]["sentence"]
    # every member, as the table marks them (newcomer try-out, finding 5: [1024, 8192] read as omitting P256)
    assert plan["aligned_family"] == [1024, 2048, 8192]


def test_paper_table_without_target_and_markdown():
    res = rlbatch("plan", PAPER_CSV, "--reference", "P128", "--format", "markdown")
    assert res.returncode == 0, res.stderr
    assert "**Pick: P1024 (B=8192)" in res.stdout
    assert "P2048 (B=16384) is outside the aligned family (rN 1.60 > 1.10, a point value without an interval)" in res.stdout


def test_table_candidates_from_noise_model_and_interpolated_throughput():
    from rlbatch.analysis.table import read_accounting_csv

    plan = plan_table(read_accounting_csv(PAPER_CSV), "P128", candidates=[4096])
    c = by_run(plan)[4096]
    assert c["rN_source"] == "noise-model" and c["throughput_source"] == "interpolated"
    bn = plan["b_noise"]["value"]
    assert c["rN"] == pytest.approx(noise_model_rn(4096, 1024, bn))
    # log-log interpolation between P256 (B=2048, 1.247x) and P1024 (B=8192, 1.413x): the geometric mean at B=4096
    assert c["relative_throughput"] == pytest.approx(math.sqrt(1.24737945 * 1.41330166), rel=1e-6)


# --------------------------------------------------------------------------------------------------- the noise model
def test_noise_model_by_hand():
    assert noise_model_rn(2048, 1024, 1024) == pytest.approx(1.5)  # (1 + 2) / (1 + 1)
    assert noise_model_rn(4096, 1024, math.inf) == 1.0
    pts = [(b, noise_model_rn(b, 128, 2048)) for b in (256, 1024, 4096)]
    assert fit_b_noise(pts, 128) == pytest.approx(2048, rel=1e-3)
    assert math.isinf(fit_b_noise([(256, 1.0), (512, 0.99)], 128))
    assert math.isnan(fit_b_noise([], 128))


# --------------------------------------------------------------------------------------------------- runs
def test_full_sweep_measured_rn_matches_the_model(sweep):
    runs = load(sweep)
    plan = plan_runs(runs, TARGET)
    c = by_run(plan)
    assert plan["reference"] == "B128-G8-sqrt" and c["B128-G8-sqrt"]["runs"] == [f"B128-G8-sqrt-s{i}" for i in range(3)]
    for p, b in ((32, 256), (128, 1024), (512, 4096)):
        got = c[f"B{b}-G8-sqrt"]
        want = noise_model_rn(b, 128, MODEL.b_noise)
        assert got["rN_source"] == "measured" and got["throughput_source"] == "measured"
        assert got["rN"] == pytest.approx(want, rel=0.08)
        assert got["rN_ci"][0] <= got["rN"] <= got["rN_ci"][1]
        want_x = (b / MODEL.step_time(b)) / (128 / MODEL.step_time(128))
        assert got["relative_throughput"] == pytest.approx(want_x, rel=0.03)
    assert plan["recommended"] == "B2048-G8-sqrt"  # B* = sqrt(20 * 2048 / 0.01) ~ 2024: the ladder's best is 2048
    assert plan["b_noise"]["source"] == "fit to rN" and plan["b_noise"]["value"] == pytest.approx(2048, rel=0.15)
    extra = [x for x in plan["candidates"] if x["run"] is None]
    assert [x["batch_size"] for x in extra] == [8192, 16384]
    assert all(x["rN_source"] == "noise-model" and x["throughput_source"] == "model" for x in extra)
    assert c["B128-G8-sqrt"]["verdict"] == "reference" and c["B1024-G8-sqrt"]["aligned"] is False
    # one aligned family on every page (newcomer finding 19): the plan's is the accounting's equivalence-tested one
    # (B256's rN ~ 1.06 with 3 seeds: its 90% interval is wider than [0.91, 1.10], so not shown aligned)
    from rlbatch.analysis.decision import aligned_family
    acc = account_runs(runs, TARGET, reference="B128-G8-sqrt")
    fam = aligned_family(acc["rows"], "B128-G8-sqrt")
    assert plan["aligned_family"] == fam["batches"]
    assert [b for b in sorted(x["batch_size"] for x in plan["candidates"] if x["aligned"])] == fam["batches"]


def test_plan_from_first_30_percent_picks_a_batch_within_10_percent(sweep):
    runs = load(sweep)
    acc = account_runs(runs, TARGET, reference="B128-G8-sqrt-s0")
    rows = acc["rows"]
    acc = pd.DataFrame(rows)
    # measured time-to-target per batch (mean over seeds, relative to the reference)
    acc["batch_size"] = acc["batch_size"].astype(int)
    measured = acc.groupby("batch_size")["relative_time"].mean()
    short = truncate_runs(runs, 0.3)
    assert all(r.metrics["samples/retained"].max() <= 0.3 * f.metrics["samples/retained"].max() + 1e-9
               for r, f in zip(short, runs))
    plan = plan_runs(short, TARGET)
    assert any(c["rN_source"] == "fit" for c in plan["candidates"])
    pick = plan["recommended_batch_size"]
    assert measured[pick] <= 1.10 * measured.min()


def test_truncate_runs_copies(sweep):
    runs = load(sweep)[:1]
    n = len(runs[0].metrics)
    cut = truncate_runs(runs, 0.5)[0]
    assert len(runs[0].metrics) == n and cut.meta.status == "running"
    assert cut.evals["samples/retained"].max() <= 0.5 * runs[0].metrics["samples/retained"].max()
    with pytest.raises(UserError, match="fraction"):
        truncate_runs(runs, 0)


def test_one_probe_with_noise_metrics_and_a_profile(sweep, tmp_path):
    runs = [r for r in load(sweep) if r.run_id == "B128-G8-sqrt-s0"]
    profile = {"batches": [{"batch_size": b, "gen_s": MODEL.gen_s, "update_s": MODEL.train_s_per_response * b}
                           for b in (128, 512, 2048)]}
    assert len(profile_timings(profile)) == 3
    plan = plan_runs(runs, TARGET, candidates=[1024, 2048, 4096], profile=profile)
    assert plan["b_noise"]["source"] == "B_simple" and plan["b_noise"]["value"] == pytest.approx(2048, rel=0.01)
    c = by_run(plan)
    assert c[2048]["rN"] == pytest.approx(noise_model_rn(2048, 128, 2048), rel=0.01)
    assert c[2048]["throughput_source"] == "profile"
    # the noise model alone predicts B = 2048 fastest, but a batch without a run gets no verdict and is never the
    # pick (newcomer try-out, finding 3: single-batch plans called B = 128 faster where it was measured 1.39x slower):
    # the headline names it as worth a probe
    assert c[2048]["verdict"] == "undetermined" and "a probe at B=2048 would measure it" in c[2048]["sentence"]
    assert plan["recommended"] == "B128-G8-sqrt-s0"
    assert "On the noise model alone B=1024, B=2048 and B=4096 would be faster still" in _headline(plan)


def test_errors_say_what_is_missing(sweep):
    runs = load(sweep)
    one_b = [r for r in runs if r.meta.batch_size == 128]
    with pytest.raises(UserError, match="two or more batch sizes"):
        plan_runs(one_b, TARGET)
    mixed = load(sweep)[:4]
    mixed[1].meta.model = "other-model"
    with pytest.raises(UserError, match="disagree on model"):
        plan_runs(mixed, TARGET)
    with pytest.raises(UserError, match="reward/xyz"):
        plan_runs(runs, TARGET, metric="reward/xyz")
    with pytest.raises(UserError, match="unknown reference"):
        plan_runs(runs, TARGET, reference="nope")
    with pytest.raises(UserError, match="--target is required"):
        plan_runs(runs, None)
    blind = load(sweep)
    for r in blind:
        r.metrics = r.metrics.drop(columns=[c for c in r.metrics.columns if c.startswith("time/")])
    with pytest.raises(UserError, match="--profile"):
        plan_runs(blind, TARGET)


def test_cli_on_sweep_dir_and_error_exit(sweep):
    res = rlbatch("plan", sweep, "--target", TARGET, "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["recommended"] == "B2048-G8-sqrt"
    bad = rlbatch("plan", sweep, "--target", TARGET, "--reference", "P999")
    assert bad.returncode == 2 and "unknown reference" in bad.stderr and "Traceback" not in bad.stderr


def test_plan_section_in_report(sweep, tmp_path):
    from rlbatch.report import build_report

    runs = [r for r in load(sweep) if r.meta.seed == 0]
    sec = plan_section(plan_runs(runs, target=TARGET), runs)
    assert set(sec) == {"title", "markdown", "figures", "captions", "json_key", "json"} and sec["json_key"] == "plan"
    # the plan's pick has the smallest point estimate; unrun extrapolations lie within noise of it
    assert sec["markdown"].startswith("**Pick: B2048-G8-sqrt-s0 (B=2048), predicted")
    out = build_report(runs, tmp_path / "rep", target=TARGET, sections=[sec])
    assert out["plan"]["recommended"] == "B2048-G8-sqrt-s0"


# --------------------------------------------------------------------------------------------------- adaptive sweep
@pytest.mark.parametrize("max_active", [1, None])
def test_adaptive_sweep_stops_at_the_right_batch(tmp_path, max_active):
    """The doubling ladder, one configuration after the other stopping at the first loss (max_active=1,
    skip_after=1: the paper's doubling; the synthetic model's time-to-target is unimodal in B) or all probed together
    (None)."""
    from rlbatch.study.run import adaptive_sweep

    # by hand: T(B) ~ (1 + B/2048)(20/B + 0.01): B=512 0.0488, 1024 0.0443, 2048 0.0395 (best), 4096 0.0447,
    # 8192 0.0622 (evaluations every 4096 samples keep the fits cheap)
    model = SyntheticModel(eval_every=4096)
    ladder = [512 * 2 ** k for k in range(5)]
    assert min(ladder, key=lambda b: model.time_to_target(b, TARGET)) == 2048
    budget = int(1.15 * model.samples_to_target(8192, TARGET))
    res = adaptive_sweep(partial(synthetic_trial, model=model),
                         {"prompts_per_step": 64, "group_size": 8, "lr": 1e-6, "samples": budget, "seed": 0},
                         tmp_path, target=TARGET, max_doublings=4, max_active=max_active, n_boot=30,
                         skip_after=1 if max_active == 1 else None)
    assert res.recommended_batch_size == 2048
    states = {t.batch_size: t.state for t in res.trials}
    assert [t.batch_size for t in res.trials] == ladder
    # every configuration ended with a recorded outcome; none ran past its budget
    assert set(states.values()) <= {"reached", "cannot win", "never reaches", "decided", "budget", "skipped"}
    assert all(t.samples <= budget + t.batch_size for t in res.trials)
    # one seed per batch size: a measured trial has no interval until the ladder can show the run-to-run spread
    # (issue 43: never the evaluation noise alone), so the plan stops nothing on a prediction here; the race does
    # (exact, on the trials' own clocks): B = 8192 has spent more seconds than B = 2048 needed
    assert states[8192] == "cannot win"
    assert all(states[b] == "reached" for b in ladder[:4])
    full = sum(math.ceil(budget / b) * b for b in ladder)
    assert res.samples_spent < 0.5 * full
    stops = [d for d in res.decisions if d.action in ("stop", "skip")]
    assert sorted(d.config for d in stops) == sorted(t.config for t in res.trials)
    assert all(d.reason and d.outcome for d in stops)
    # trials carry the square-root LR
    t = load(tmp_path / "B2048-G8-sqrt-s0")[0]
    assert t.meta.lr == pytest.approx(1e-6 * math.sqrt(4))


def test_adaptive_sweep_base_without_budget_ends_on_budget(tmp_path):
    from rlbatch.study.run import adaptive_sweep

    res = adaptive_sweep(partial(synthetic_trial, model=MODEL),
                         {"prompts_per_step": 16, "group_size": 8, "lr": 1e-6, "samples": 4096}, tmp_path,
                         target=TARGET, max_doublings=0, n_boot=20)
    (t,) = res.trials
    assert t.state == "budget" and t.samples == 4096 and "4096 samples" in t.decided_by


def test_fixed_lr_control_is_outside_the_aligned_family(tmp_path):
    budget = int(1.2 * MODEL.samples_to_target(512, TARGET))
    for t in build_ladder(base_batch=128, base_lr=1e-6, batches=[128, 256, 512], samples=budget,
                          fixed_lr_control=256):
        synthetic_trial(t, tmp_path / t.run_id, MODEL)
    plan = plan_runs(load(tmp_path), TARGET, n_boot=50)
    c = by_run(plan)
    assert c["B256-G8-fixed-s0"]["on_lr_rule"] is False and c["B256-G8-fixed-s0"]["aligned"] is False
    # on the rule, but one seed and no spread: not shown aligned, as the accounting's family section says (it was
    # "inside" by the point rule of an accounting table; researcher finding 7, rerun)
    assert c["B256-G8-sqrt-s0"]["on_lr_rule"] is True and c["B256-G8-sqrt-s0"]["aligned"] is False
    assert "not shown aligned (rN" in c["B256-G8-sqrt-s0"]["sentence"]
    assert "off the square-root LR rule" in c["B256-G8-fixed-s0"]["sentence"]
    assert plan["b_noise"]["batch_sizes"] == [256, 512]  # the control is not used to fit B_noise


def test_markdown_names_a_one_member_family_in_words():
    from rlbatch.analysis.table import read_accounting_csv
    from rlbatch.plan import plan_table, to_markdown

    plan = plan_table(read_accounting_csv(PAPER_CSV), "P128")
    md = to_markdown(plan)
    assert "only for a point value without an interval): B = 1024, B = 2048, B = 8192." in md
    md1 = to_markdown({**plan, "aligned_family": [16]})
    assert "without an interval): only B = 16." in md1 and "B = 16 to 16" not in md1


def test_a_pick_within_noise_of_the_reference_is_named_a_best_estimate():
    """Issue 38 (noticed with issue 37's rule): the tutorial's 1-seed sweep had plan say "Pick: B256 ... 0.62x
    (0.30-1.10)" where analyze said no batch beats the reference beyond noise. An interval that contains 1 is a best
    estimate, in plan as in analyze; one wholly below 1 stays a pick."""
    from rlbatch.plan import _headline

    def plan(iv):
        return {"recommended": "B256", "reference": "B16", "target": 0.35, "metric": "eval/score",
                "within_noise": [], "b_noise": {}, "candidates": [
                    {"run": "B16", "batch_size": 16, "predicted_relative_time": 1.0, "interval": [1.0, 1.0]},
                    {"run": "B256", "batch_size": 256, "predicted_relative_time": 0.62, "interval": iv}]}

    assert _headline(plan([0.30, 1.10])).startswith(
        "No batch is predicted to beat the reference beyond noise. Best estimate: B256 (B=256), predicted 0.62x "
        "(95% interval 0.30-1.10)")
    assert _headline(plan([0.30, 0.90])).startswith("Pick: B256 (B=256), predicted 0.62x (95% interval 0.30-0.90)")


def test_the_plans_grade_of_a_measured_rn_is_the_accountings():
    # researcher finding 7, seen again on the 2026-12-07 demo (seed set 0): B = 256's rN 1.35, 90% equivalence interval
    # 1.04-1.75, 95% simultaneous 0.81-2.07: the accounting says "not distinguishable from 1" (penalised needs the
    # simultaneous interval above 1), the plan said "penalised" from the 90% interval alone
    from rlbatch.plan_finish import candidate_alignment

    c = {"on_lr_rule": True, "rN": 1.35, "rN_test": [1.04, 1.75], "rN_ci": [0.81, 2.07]}
    assert candidate_alignment(c, 0.1) == "not distinguishable from 1"
    assert candidate_alignment({**c, "rN_ci": [1.03, 2.81]}, 0.1) == "penalised"
    assert candidate_alignment({**c, "rN": 1.0, "rN_test": [0.95, 1.06]}, 0.1) == "aligned"
    assert candidate_alignment({"on_lr_rule": True, "rN": 1.8, "rN_ci": [1.2, 2.5]}, 0.1) == "penalised"  # a fit
    assert candidate_alignment({"on_lr_rule": False, "rN": 2.3}, 0.1) == "off the LR rule"
    assert candidate_alignment({"on_lr_rule": True, "rN": 1.05}, 0.1) == "within tolerance (point value)"
