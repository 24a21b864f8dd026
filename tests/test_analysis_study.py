"""One analysis core and one pass (rlbatch.analysis.study). Every command takes samples-to-target, time-to-target,
throughput, rN, relative time and the verdict from rlbatch.analysis.accounting; these tests pin the values by hand,
check that analyze, plan and the report agree on the stored demo sweep, and that a report bootstraps each
configuration once and runs the accounting once (the Study)."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlbatch.analysis.curves import crossing_of, curve

import rlbatch.analysis.accounting as accounting
from _stored_sweeps import unpack
from rlbatch.analysis.accounting import account_runs, estimate_configuration
from rlbatch.analysis.interval import moderated_spread, spread_prior
from rlbatch.analysis.study import Study
from rlbatch.analysis.throughput import clock_basis, fit_throughput_model, predict, step_timings
from rlbatch.analyze import analyze
from rlbatch.plan import make_plan, plan_runs
from rlbatch.readers.collect import load_all
from rlbatch.report import build_report
from rlbatch.runstore import Run, make_meta

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"


def linear_run(run_id, b, *, slope=1e-4, start=0.2, steps=40, eval_every=None, step_s=1.0, seed=0, lr=None,
               hardware=None, model="m", task="t", algorithm="grpo", cpu=None, evals_at_zero=True, extra=None):
    """A run whose score rises linearly in retained samples (score = start + slope x samples), evaluated every
    ``eval_every`` samples (default: every step), each step ``step_s`` wall seconds."""
    s = np.arange(1, steps + 1)
    m = pd.DataFrame({"step": s, "samples/retained": s * b, "samples/generated": s * b,
                      "time/step_s": step_s, "time/wall_s": s * step_s})
    if cpu is not None:
        m["time/cpu_s"] = cpu
    for k, v in (extra or {}).items():
        m[k] = v
    every = eval_every or b
    xs = np.arange(0 if evals_at_zero else every, steps * b + 1, every)
    ev = pd.DataFrame({"step": xs // b, "samples/retained": xs, "eval/score": start + slope * xs, "eval/n": 1000})
    meta = make_meta(run_id=run_id, prompts_per_step=b // 8, group_size=8, lr=lr or 1e-4 * math.sqrt(b / 64),
                     lr_rule="sqrt", seed=seed, model=model, task=task, algorithm=algorithm,
                     hardware=hardware or {"device": "cuda"})
    return Run(meta=meta, metrics=m, evals=ev)


def test_identical_curves_at_different_batch_sizes_have_rn_one_everywhere():
    # the same score-vs-samples line at B=64 (evaluated every 1024 samples) and B=4096 (every 4096): target 0.7 is
    # crossed at 5000 samples, between B=4096's evaluations at 4096 and 8192: the same samples-to-target for both
    a = linear_run("B64", 64, steps=128, eval_every=1024)
    b = linear_run("B4096", 4096, steps=4, eval_every=4096)
    acc = account_runs([a, b], 0.7, clock="wall", n_boot=200)
    rows = {r["run"]: r for r in acc["rows"]}
    assert rows["B64"]["samples_to_target"] == pytest.approx(5000.0)
    assert rows["B4096"]["samples_to_target"] == pytest.approx(5000.0)
    assert rows["B4096"]["rN"] == pytest.approx(1.0)
    # target 0.3 is crossed at 1000 samples, before B=4096's first evaluation after 0 and between B=64's evaluations
    # at 0 and 1024: both only "at most" (a chord from 0 is no estimate: statistics review 2, N1); B=4096's bound
    # is 4096 samples
    assert crossing_of(curve(b, "eval/score"), 0.3).at_most == 4096.0
    assert crossing_of(curve(a, "eval/score"), 0.3).at_most == 1024.0
    plan = plan_runs([a, b], 0.7, extend=False, n_boot=200, clock="wall")
    c = {x["run"]: x for x in plan["candidates"]}
    assert c["B4096"]["rN"] == pytest.approx(1.0) and c["B4096"]["rN_source"] == "measured"


def test_a_run_at_the_target_at_its_first_evaluation_counts_as_reached():
    ref = linear_run("B64", 64, steps=100)
    at_zero = linear_run("B128", 128, start=0.5, steps=50)            # 0.5 >= 0.3 at 0 samples
    first = linear_run("B256", 256, start=0.5, steps=25, evals_at_zero=False)  # first evaluation at 256 samples
    first.meta.status = "finished"
    rows = {r["run"]: r for r in account_runs([ref, at_zero, first], 0.3, clock="wall", n_boot=100)["rows"]}
    assert rows["B128"]["reached"] and rows["B128"]["samples_to_target"] == 0.0 and rows["B128"]["rN"] == 0.0
    # at the target at its first evaluation after 0: only S <= 256 is known (S = 256 would be a value that grows with
    # the evaluation spacing), so no samples-to-target and no verdict
    assert not rows["B256"]["reached"] and rows["B256"]["samples_to_target"] is None
    assert rows["B256"]["at_most"] == [256.0] and rows["B256"]["verdict"] == "undetermined"


def test_time_to_target_is_the_clock_at_the_crossing():
    # 64 samples per step; steps take 1 s except step 10 (5 s); the score crosses 0.3 at 1000 samples = step 15.625
    r = linear_run("B64", 64, steps=40)
    r.metrics.loc[9, "time/step_s"] = 5.0
    r.metrics["time/wall_s"] = r.metrics["time/step_s"].cumsum()
    e = estimate_configuration([r], 0.3, clock="wall", n_boot=0)
    # the local quadratic in log samples follows a straight line in samples to 0.4% over a factor 2 either side
    s = e["samples_to_target"]
    assert s == pytest.approx(1000.0, rel=0.005)
    assert e["time_to_target_s"] == pytest.approx(s / 64 + 4.0)       # the clock there, not S / average throughput
    assert e["throughput_samples_per_s"] == pytest.approx(s / (s / 64 + 4.0))


def test_seeds_are_combined_per_seed_not_on_the_averaged_curve():
    # three seeds crossing at 800, 1000 and 2000 samples: their geometric mean (the typical run) is
    # (800 x 1000 x 2000)^(1/3) = 1169.6; the seed-averaged curve would cross earlier (pulled up by the fast seeds)
    runs = [linear_run(f"B64-s{i}", 64, slope=0.1 / s2t, seed=i, steps=80) for i, s2t in enumerate((800, 1000, 2000))]
    e = estimate_configuration(runs, 0.3, clock="wall", n_boot=2000)
    per = e["samples_to_target_per_seed"]
    assert per == pytest.approx([800, 1000, 2000], rel=0.01)
    assert e["samples_to_target"] == pytest.approx(float(np.exp(np.mean(np.log(per)))))
    assert e["samples_to_target"] == pytest.approx(1169.6, rel=0.01)
    # the 95% interval over 3 seeds: Student's t (2 degrees of freedom, t = 4.303) on the log scale around it,
    # 1169.6 x exp(-+ 4.303 x sd(log S) / sqrt(3)) = 356 .. 3840, wider than the seeds' own spread (resampling them
    # gave 800 .. 2000, an interval that understated the uncertainty)
    lo, hi = e["samples_to_target_ci"]
    se = np.std(np.log(per), ddof=1) / np.sqrt(3)
    assert lo == pytest.approx(e["samples_to_target"] * np.exp(-4.303 * se), rel=0.05)
    assert hi == pytest.approx(e["samples_to_target"] * np.exp(4.303 * se), rel=0.05)


def test_fewer_seeds_give_wider_intervals():
    # issue 37 (5): two seeds with the same spread as three give a wider interval (t with 1 degree of freedom), and
    # never one narrower than the seeds' own range
    runs3 = [linear_run(f"B64-s{i}", 64, slope=0.1 / s2t, seed=i, steps=80) for i, s2t in enumerate((900, 1000, 1100))]
    e3 = estimate_configuration(runs3, 0.3, clock="wall", n_boot=2000)
    e2 = estimate_configuration(runs3[:2], 0.3, clock="wall", n_boot=2000)
    w3 = e3["samples_to_target_ci"][1] / e3["samples_to_target_ci"][0]
    w2 = e2["samples_to_target_ci"][1] / e2["samples_to_target_ci"][0]
    assert w2 > w3 > 1
    assert e2["samples_to_target_ci"][0] < 900 and e2["samples_to_target_ci"][1] > 1000


def test_spread_prior_by_hand():
    # four configurations whose 3 seeds have the same log spread (logs 0, a, 2a: sample variance a^2): their log
    # variances agree exactly (Smyth 2004: the excess variance of e = log s^2 - digamma(1) + log(1) is
    # -trigamma(1) < 0), so the prior is their pooled spread a, worth their summed 4 x 2 = 8 degrees of freedom
    a = 0.2
    groups = [np.exp(c + np.array([0.0, a, 2 * a])) for c in (0.0, 1.0, 2.0, 3.0)]
    times = [g[::-1] for g in groups]  # the same spread, in another order (throughput S / T then varies too)
    pr = spread_prior(groups, times)
    assert pr.n_configurations == 4 and pr.S_d0 == pr.T_d0 == 8
    assert pr.S_s0 == pytest.approx(a, rel=1e-9)
    s, df = moderated_spread(np.log(groups[0]), pr.S_d0, pr.S_s0)
    assert s == pytest.approx(a) and df == 10  # (8 a^2 + 2 a^2) / 10, 8 + 2 degrees of freedom
    # spreads that differ (log sd 0.05, 0.1, 0.4, 0.8): a finite prior; each configuration's moderated spread lies
    # between its own and s0, with d0 + 2 degrees of freedom
    het = [np.exp(sd * np.array([-1.0, 0.0, 1.0])) for sd in (0.05, 0.1, 0.4, 0.8)]
    pr = spread_prior(het, [g[::-1] for g in het])
    assert 0 < pr.S_d0 < 8
    for g, sd in zip(het, (0.05, 0.1, 0.4, 0.8)):
        s, df = moderated_spread(np.log(g), pr.S_d0, pr.S_s0)
        assert min(sd, pr.S_s0) <= s <= max(sd, pr.S_s0) and df == pytest.approx(pr.S_d0 + 2)
    # fewer than three configurations with two or more seeds: no prior, each keeps its own
    assert spread_prior(groups[:2], times[:2]) is None
    assert spread_prior([g[:1] for g in groups], [g[:1] for g in times]) is None


def test_moderated_intervals_are_narrower_than_own_t_and_follow_the_seed_count():
    # 4 configurations of 3 seeds at the same log spread: moderated by the prior (worth their 8 degrees of freedom
    # here) the interval is narrower than each one's own t (2 df); the same configuration with 2 seeds is wider than
    # with 3 under the same prior
    runs = [linear_run(f"B{b}-s{i}", b, slope=0.1 / s2t, seed=i, steps=80, step_s=1 + 0.1 * i * (i - 1))
            for b in (16, 32, 64, 128) for i, s2t in enumerate((900, 1000, 1100))]
    groups = accounting.group_seeds(runs)
    spread = accounting.comparison_spread(groups, 0.3, clock="wall")
    assert spread is not None and spread.S_d0 == 8 and spread.source == "seeds"
    own = estimate_configuration(groups["B64"], 0.3, clock="wall", n_boot=2000)
    pooled = estimate_configuration(groups["B64"], 0.3, clock="wall", n_boot=2000, spread=spread)
    two = estimate_configuration(groups["B64"][:2], 0.3, clock="wall", n_boot=2000, spread=spread)
    w = {k: e["samples_to_target_ci"][1] / e["samples_to_target_ci"][0] for k, e in
         (("own", own), ("pooled", pooled), ("two", two))}
    assert w["own"] > w["pooled"] > 1 and w["two"] > w["pooled"]
    assert own["spread"]["S"] == "own" and pooled["spread"]["S"] == "moderated"


def test_ppo_critic_warmup_samples_are_not_policy_samples():
    # 5 critic-only steps of 64 responses (320 samples) before the actor starts: the curve's x starts after them
    r = linear_run("ppo", 64, steps=40, algorithm="ppo")
    r.metrics["actor_updated"] = r.metrics["step"] > 5
    r.evals["samples/retained"] = np.where(r.evals["samples/retained"] <= 320, r.evals["samples/retained"],
                                           r.evals["samples/retained"])
    r.evals["eval/score"] = 0.2 + 1e-4 * np.clip(r.evals["samples/retained"] - 320, 0, None)
    e = estimate_configuration([r], 0.3, clock="wall", n_boot=0)
    s = e["samples_to_target"]
    assert s == pytest.approx(1000.0, rel=0.005)                     # 1320 logged, minus the 320 of warm-up
    assert e["time_to_target_s"] == pytest.approx((s + 320) / 64)    # the warm-up's time still counts


def test_cpu_clock_on_a_shared_cpu():
    hw = {"device": "cpu"}
    a = linear_run("a", 64, hardware=hw, cpu=0.5, step_s=1.5)  # wall stretched by a neighbour, CPU time not
    b = linear_run("b", 128, hardware=hw, cpu=0.5, step_s=1.0)
    assert clock_basis([a, b]) == "cpu"
    assert clock_basis([a, linear_run("g", 64)]) == "wall"            # a GPU run: wall-clock
    rows = {r["run"]: r for r in account_runs([a, b], 0.3, n_boot=0)["rows"]}
    assert rows["b"]["relative_throughput"] == pytest.approx(2.0)     # same CPU seconds per step, twice the samples
    rows = {r["run"]: r for r in account_runs([a, b], 0.3, clock="wall", n_boot=0)["rows"]}
    assert rows["b"]["relative_throughput"] == pytest.approx(3.0)
    # an asynchronous run (generation in its own process, time/overlap_s logged) among them: wall-clock, where the
    # overlap shows (its CPU time adds the generation process's seconds), as the report's async section measures
    c = linear_run("c", 128, hardware=hw, cpu=0.9, step_s=1.0)
    c.metrics["time/overlap_s"] = 0.4
    assert clock_basis([a, c]) == "wall" and clock_basis([a, c], "cpu") == "cpu"
    rows = {r["run"]: r for r in account_runs([a, c], 0.3, n_boot=0)["rows"]}
    assert rows["c"]["relative_throughput"] == pytest.approx(3.0)


def test_throughput_model_passes_through_the_measured_interval_and_counts_filtering():
    rng = np.random.default_rng(0)
    runs = []
    for b, t, frac in ((16, 0.4, 0.6), (32, 0.5, 0.65), (64, 0.7, 0.7), (128, 1.1, 0.75)):
        for seed in range(3):
            r = linear_run(f"B{b}-s{seed}", b, steps=60, seed=seed)
            dt = t * (1 + 0.1 * rng.standard_normal(60)).clip(0.5)
            kept = np.round(b * frac * (1 + 0.1 * rng.standard_normal(60)) / 8) * 8
            r.metrics["time/step_s"] = dt
            r.metrics["time/wall_s"] = dt.cumsum()
            r.metrics["samples/retained"] = kept.cumsum()
            r.metrics["time/gen_s"], r.metrics["time/train_s"] = 0.5 * dt, 0.5 * dt
            runs.append(r)
    model = fit_throughput_model(step_timings(runs, clock="wall"))
    pred = {p["batch_size"]: p for p in predict(model, [16, 32, 64, 128, 256])}
    for b in (16, 32, 64, 128):
        e = estimate_configuration([r for r in runs if r.meta.batch_size == b], None, clock="wall", n_boot=500)
        lo, hi = e["throughput_ci"]
        assert lo <= pred[b]["throughput_samples_per_s"] <= hi, (b, pred[b], e["throughput_ci"])
        assert pred[b]["retained_fraction"] < 0.8                      # not all of P x G is retained
    assert pred[256]["extrapolated"] and pred[256]["retained_fraction"] == pytest.approx(pred[128]["retained_fraction"])


def test_overlapping_intervals_are_called_within_noise():
    # two seeds each; B=128 and B=256 both faster than B=64, by amounts within each other's seed noise
    runs = []
    for b, s2ts in ((64, (1000, 1100)), (128, (900, 1300)), (256, (1000, 1400))):
        runs += [linear_run(f"B{b}-s{i}", b, slope=0.1 / s, seed=i, steps=4000 // b + 40, step_s=b / 64 * 0.6)
                 for i, s in enumerate(s2ts)]
    acc = account_runs(runs, 0.3, clock="wall", n_boot=2000)
    # none is faster than another beyond noise: all three may be the fastest (multiple comparisons with the best)
    assert "May be the fastest" in acc["recommendation"]
    assert set(acc["headline"]["best_set"]) == {"B64", "B128", "B256"}
    assert set(acc["within_noise"]) | {acc["best"]} == {"B64", "B128", "B256"}


def test_analyze_does_not_compare_runs_of_different_models(tmp_path):
    from rlbatch.runstore import write_run

    for r in (linear_run("a64", 64, model="m1"), linear_run("a128", 128, model="m1"),
              linear_run("b64", 64, model="m2", task="other")):
        write_run(tmp_path / r.run_id, r)
    res = analyze([tmp_path], target=0.3)
    assert len(res["comparisons"]) == 2
    assert "not compared with each other" in res["recommendation"]
    assert {r["comparison"] for r in res["accounting"]} == {"m1 / t / grpo", "m2 / other / grpo"}
    b64 = next(r for r in res["accounting"] if r["run"] == "b64")
    assert b64["rN"] == 1.0 and b64["verdict"] == "reference"          # its own group's reference, not a64
    res = analyze([tmp_path], target=0.3, reference="a128")           # a run reference applies to its own group
    refs = {c["model"]: c["reference"] for c in res["comparisons"]}
    assert refs == {"m1": "a128", "m2": "b64"}
    from rlbatch.errors import UserError

    with pytest.raises(UserError, match="unknown reference"):
        analyze([tmp_path], target=0.3, reference="nope")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo_sweep")
    unpack(DATA / "trials.tar.gz", root)
    return root / "trials"


def test_analyze_plan_and_report_give_one_number_per_quantity(demo_dir, tmp_path):
    target = json.loads((DATA / "settings.json").read_text())["target"]
    acc = analyze([demo_dir], target=target)
    plan = make_plan([demo_dir], target=target)
    cand = {c["run"]: c for c in plan["candidates"] if c["run"]}
    assert len(acc["accounting"]) == 5
    for row in acc["accounting"]:
        c = cand[row["run"]]
        for key in ("rN", "relative_throughput", "relative_time"):
            assert c[key] == pytest.approx(row[key], abs=1e-9), (row["run"], key)
        assert c["rN_ci"] == pytest.approx(row["rN_ci"], abs=1e-9)
    rep = analyze([demo_dir], target=target, out=tmp_path / "rep")
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    pc = {c["run"]: c for c in report["plan"]["candidates"] if c["run"]}
    for row in report["accounting"]:
        assert row["rN_ci"] is not None and row["throughput_ci"] is not None
        assert row["rN"] == pytest.approx(next(r for r in acc["accounting"] if r["run"] == row["run"])["rN"])
        assert pc[row["run"]]["relative_time"] == pytest.approx(row["relative_time"], abs=1e-9)
    assert rep["reference"] == "B16-G8-sqrt"
    # hand-checked from the stored trials: seed samples-to-target of B16 (eval.jsonl, linear between evaluations)
    b16 = next(r for r in acc["accounting"] if r["run"] == "B16-G8-sqrt")
    assert b16["samples_to_target"] == pytest.approx(np.exp(np.mean(np.log(b16["samples_to_target_per_seed"]))))
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "geometric mean of their samples-to-target" in md


# --- one pass: the Study
DEMO_CPU = Path(__file__).resolve().parent / "data" / "demo_sweep_cpu" / "trials.tar.gz"


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo_cpu")
    unpack(DEMO_CPU, root)
    runs, _ = load_all([root / "trials"])
    return runs


def count_calls(monkeypatch, name):
    """Replace ``rlbatch.analysis.accounting.<name>`` in every rlbatch module that holds it; return the list of
    the targets it was called with."""
    orig = getattr(accounting, name)
    seen = []

    def counted(*args, **kwargs):
        seen.append(args[1] if len(args) > 1 else kwargs.get("target"))
        return orig(*args, **kwargs)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("rlbatch") and getattr(mod, name, None) is orig:
            monkeypatch.setattr(mod, name, counted)
    return seen


def test_report_runs_the_accounting_once_and_bootstraps_each_configuration_once(demo_runs, tmp_path, monkeypatch):
    accounted = count_calls(monkeypatch, "account_runs")
    estimated = count_calls(monkeypatch, "estimate_configuration")
    res = build_report(demo_runs, tmp_path, target=0.45)
    n_configs = len(Study.of(demo_runs, 0.45).groups)
    assert n_configs == 5  # B = 16, 32, 64, 128 on the square-root rule and the fixed-LR control at B = 128
    assert len(accounted) == 1
    assert sum(t is not None for t in estimated) == n_configs  # at the target: once per configuration
    # the plan section reads the same accounting: its measured candidates carry the accounting's numbers
    rows = {r["run"]: r for r in res["accounting"]}
    for c in res["plan"]["candidates"]:
        if c["run"] in rows and c["rN_source"] == "measured":
            assert c["rN"] == rows[c["run"]]["rN"] and c["rN_ci"] == rows[c["run"]]["rN_ci"]


def test_study_estimate_is_the_accounting_estimate_computed_once(demo_runs, monkeypatch):
    study = Study.of(demo_runs, 0.45)
    name, rs = next(iter(study.groups.items()))
    # the accounting's estimate: the seed spread moderated by the comparison's configurations
    spread = accounting.comparison_spread(study.groups, 0.45, clock=study.basis)
    # the 4 configurations of 3 seeds on the square-root rule: the fixed-LR control is moderated by their prior but
    # does not shape it
    assert spread is not None and spread.n_configurations == 4
    fresh = accounting.estimate_configuration(rs, 0.45, clock=study.basis, name=name, spread=spread)
    assert fresh["spread"] == {"S": "moderated", "T": "moderated", "X": "moderated"}
    estimated = count_calls(monkeypatch, "estimate_configuration")
    a = study.configuration_estimate(rs)
    b = study.configuration_estimate(rs)
    # the accounting's own estimate (every configuration estimated once for it; a bound from the reference's shape
    # would be in it), so a page asking for one configuration shows the accounting's number
    assert a is b and a is study.accounted["estimates"][name] and len(estimated) == len(study.groups)
    assert a["samples_to_target"] == fresh["samples_to_target"] and a["samples_to_target_ci"] == fresh[
        "samples_to_target_ci"]
    assert study.accounting is study.accounting
    assert len(estimated) == len(study.groups)  # the accounting reused the one already made


def test_faster_than_reference_and_the_verdict_cannot_disagree(demo_runs):
    """faster_than_reference is the verdict "faster" (95% interval of the relative time wholly below 1), not the
    point estimate: on the stored CPU demo the fixed-LR control at B = 128 has a relative time below 1 whose
    interval contains 1, so it is within noise and not faster."""
    study = Study.of(demo_runs, 0.45)
    comps = study.comparisons
    assert len(comps) == 5
    for c in comps.values():
        assert c.faster_than_reference == (c.verdict == "faster")
        if c.verdict == "within noise":
            assert c.relative_time.lo <= 1 <= c.relative_time.hi
    fixed = comps["B128-G8-fixed"]
    assert fixed.relative_time.value < 1 and fixed.verdict == "within noise" and not fixed.faster_than_reference
    conf = study.configurations["B128-G8-fixed"]
    assert conf.reached and conf.throughput.source == "measured: to target"
    assert conf.samples_to_target.lo <= conf.samples_to_target.value <= conf.samples_to_target.hi
