"""The report page a reader trusts at a glance, on the stored demo sweep (tests/data/demo_sweep_cpu, see
its README): one value per quantity on the page, curves that reach the crossings the accounting reports, intervals
never clipped, a throughput split that adds up on the accounting's clock, the noise slope over the aligned family,
and a headline of three lines then bullets.

The page checker (:func:`page_values`, :func:`conflicts`) reads the report's HTML tables; the Chromium test in
tests/test_report.py runs the same checker on the rendered DOM."""

from pathlib import Path

import numpy as np
import pytest

from _page_check import conflicts, page_values
from _stored_sweeps import unpack
from rlbatch.analysis.curves import group_seeds
from rlbatch.analysis.interval import format_interval
from rlbatch.analysis.throughput import configuration_timings
from rlbatch.readers.collect import load_all
from rlbatch.report import build_report
from rlbatch.report.figures import figure_problems, new_figure, score_vs

DEMO = Path(__file__).parent / "data" / "demo_sweep_cpu" / "trials.tar.gz"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``(report JSON, report dir, runs)`` of the stored demo sweep at its target 0.45."""
    d = tmp_path_factory.mktemp("demo")
    unpack(DEMO, d)
    runs, _ = load_all([d / "trials"])
    out = d / "report"
    return build_report(runs, out, target=0.45), out, runs


def test_the_checker_finds_two_values_for_one_quantity():
    page = ("<table><tr><th>configuration</th><th>rN (95% CI)</th></tr><tr><td>B32</td><td>1.05 (0.73–1.34)</td>"
            "</tr></table><table><tr><th>candidate</th><th>rN</th><th>rN interval</th></tr><tr><td>B32</td>"
            "<td>1.07</td><td>0.73-1.34</td></tr></table>")
    bad = conflicts(page_values(page))
    assert len(bad) == 1 and bad[0].startswith("B32 / rN:")
    assert not conflicts(page_values(page.replace("1.07", "1.05")))


# ------------------------------------------------------------------------------------------------ the demo page
def test_every_quantity_on_the_page_has_one_value(demo):
    res, out, _ = demo
    html = (out / "report.html").read_text()
    found = page_values(html)
    assert not conflicts(found), conflicts(found)
    # quantities that do appear in more than one place (else the check above checks nothing)
    several = {k for k, v in found.items() if len(v) > 1}
    assert ("B64-G8-sqrt", "rN") in several and ("B64-G8-sqrt", "whole-run throughput") in several
    assert ("B64-G8-sqrt", "relative time interval") in several or ("B64-G8-sqrt", "relative time") in several
    # the headline's numbers are the accounting table's
    acc = {r["run"]: r for r in res["accounting"]}
    pick = acc[res["headline"]["pick"]]
    lo, hi = pick["relative_time_ci"]
    assert f"{pick['relative_time']:.2f}x (95% CI {format_interval([lo, hi])})" in res["headline"]["lines"][0]
    assert found[(pick["run"], "relative time")][0][1] == (round(pick["relative_time"], 2),)
    for b in res["headline"]["bullets"]:
        if b.startswith("Seeds: "):  # the study's note on shared seed ids (issue 52), not a configuration
            continue
        run = b.split(" ", 1)[0]
        r = acc[run]
        lo, hi = r["relative_time_ci"]
        assert f"{r['relative_time']:.2f}x (95% CI {format_interval([lo, hi])}) the reference's" in b, b


def test_one_clock_stated_once_and_used_by_every_table(demo):
    res, out, runs = demo
    md = (out / "report.md").read_text()
    assert res["clock"] == "cpu" and md.count("**Clock.**") == 1
    assert "process CPU time" in md.split("## Recommendation")[0]
    # the configuration table's time is the CPU clock over each seed's whole run: hand-computed from the logs
    groups = group_seeds(runs)
    conf = {c["config"]: c for c in res["configurations"]}
    for name, rs in groups.items():
        def whole(r):  # step 1 counts as a typical step: the median of the next ten (issue 44, warm-up)
            t = r.metrics["time/cpu_s"].to_numpy(dtype=float)
            return t[1:].sum() + (np.median(t[1:11]) if len(t) >= 3 else t[0])

        cpu = np.exp(np.mean(np.log([whole(r) for r in rs])))  # geometric mean over seeds
        assert conf[name]["seconds"] == pytest.approx(cpu, rel=1e-9)
        assert conf[name]["steps"] == pytest.approx(np.mean([len(r.metrics) for r in rs]))
        last = np.mean([r.evals["eval/score"].dropna().iloc[-1] for r in rs])
        assert conf[name]["last_score_mean"] == pytest.approx(last)  # each seed's own last evaluation
        retained = np.mean([r.metrics["samples/retained"].iloc[-1] for r in rs])
        assert conf[name]["samples_retained"] == pytest.approx(retained)
    # every seed reached 0.45, so the mean of each seed's last score is not cut below the target
    assert all(r["reached"] for r in res["accounting"])
    assert min(c["last_score_mean"] for c in conf.values()) > 0.45


def test_throughput_parts_add_up_to_the_step_on_the_accounting_clock(demo):
    res, _, runs = demo
    rows = configuration_timings(group_seeds(runs), "cpu")
    shown = res["throughput"]["configurations"]  # JSON: NaN (no scoring time logged) becomes None
    assert [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()} for r in rows] == shown
    conf = {c["config"]: c for c in res["configurations"]}
    for r in rows:
        parts = [r[k] for k in ("gen_s", "reward_s", "train_s", "other_s") if np.isfinite(r[k])]
        assert sum(parts) == pytest.approx(r["step_s"], rel=1e-12)
        assert r["gen_s"] > 0 and r["train_s"] > 0 and r["other_s"] >= -1e-12
        # whole-run throughput = retained samples per step / seconds per step = the configuration table's
        assert conf[r["config"]]["throughput_samples_per_s"] == pytest.approx(r["samples"] / r["seconds"])


def test_noise_slope_over_the_aligned_family_and_b_simple_for_every_batch(demo):
    res, _, runs = demo
    fam = res["aligned_family"]["undistinguished"]  # where rN is not shown above 1
    actor = res["noise"]["actor"]
    assert actor["fit_range"] == "given" and actor["fit_batches"] == fam and len(fam) >= 2
    assert all(np.isfinite(actor["slope_ci"]))
    bs = sorted({r.meta.batch_size for r in runs})
    rows = {r["batch_size"]: r for r in res["noise"]["b_simple_by_batch"]}
    assert sorted(rows) == bs
    for b, r in rows.items():  # an interval, or the reason there is none
        assert r["ci"] is not None or (r["reason"] and len(r["reason"]) > 20), r


def test_headline_three_lines_then_bullets_and_the_pick_marked(demo):
    res, out, _ = demo
    h = res["headline"]
    # the verdict's three lines, then (issue 56) the LR answer and (issue 52) what would decide where they apply
    assert len(h["lines"]) >= 3 and h["pick"] is not None
    assert all(ln.startswith(("Scale the learning rate", "What would decide", "No seed-to-seed spread",
                              "Seed spread behind the intervals",
                              "Undetermined:")) for ln in h["lines"][3:]), h["lines"][3:]
    # the pick, or (issue 37) the best estimate when it is within noise of the reference, said as such
    assert h["lines"][0].startswith(f"**Pick: {h['pick']}") or (
        h["lines"][0].startswith("**No batch beats the reference") and f"The best estimate is {h['pick']}" in
        h["lines"][0] and not h["beats_reference"])
    assert h["lines"][1].startswith("May be the fastest (95%, multiple comparisons with the best)")
    assert h["pick"] in h["best_set"] and set(h["within_noise"]) == set(h["best_set"]) - {h["pick"]}
    assert h["lines"][2].startswith("Rejected:")
    md = (out / "report.md").read_text()
    head = md.split("## Recommendation", 1)[1].split("### Accounting", 1)[0]
    paragraphs = [p for p in head.strip().split("\n\n") if p.strip()]
    assert paragraphs[0].count("\n") == len(h["lines"]) - 1  # the lines
    assert all(line.startswith("- ") for line in paragraphs[1].splitlines())  # then the bullets
    assert md.count("(pick)") >= 1 and f"**{h['pick']}** (pick)" in md  # marked in the accounting table
    # the intervals are said once to be simultaneous, and the "may be fastest" set is defined there
    assert md.count("95% simultaneous over the configurations compared with the reference") == 1
    assert "within noise of each other" not in md


def test_figures_reach_every_crossing_and_clip_no_interval(demo):
    res, out, _ = demo
    assert res["figure_problems"] == {}
    assert {"fig_score_vs_samples.png", "fig_score_vs_time.png"} <= set(res["figures"])


def test_figure_checker_flags_a_clipped_interval_and_a_curve_short_of_its_crossing():
    fig = new_figure()
    ax = fig.add_subplot()
    ax.errorbar([1.0, 2.0], [1.0, 1.0], yerr=[[0.1, 0.1], [0.1, 3.0]], fmt="o", label="rN")
    ax.set_ylim(0.5, 2.0)  # the second interval reaches 4.0: clipped
    assert any("outside the axes" in p for p in figure_problems(fig))
    ax.set_ylim(0.5, 4.5)
    assert figure_problems(fig) == []
    # a curve that stops at 3000 samples while the accounting puts its crossing at 4000
    from rlbatch.runstore import Run, make_meta
    import pandas as pd

    run = Run(meta=make_meta(run_id="B64", batch_size=64), metrics=pd.DataFrame({"step": [1]}),
              evals=pd.DataFrame({"samples/retained": [0.0, 1000, 3000], "eval/score": [0.1, 0.3, 0.4]}))
    f = score_vs([run], "samples/retained", target=0.5, crossings={"B64": (4000.0, [3500.0, 4500.0])})
    assert any("short of its crossing" in p for p in figure_problems(f))
    f = score_vs([run], "samples/retained", target=0.35, crossings={"B64": (2000.0, [1500.0, None])})
    assert figure_problems(f) == []  # an open interval: an arrow, nothing clipped


def test_b_simple_per_batch_pools_steps_and_says_why_when_it_has_no_value():
    """|G|^2 = 1 and tr(Sigma) = 100 planted in every step (small batch 8, big batch 64: |g_8|^2 = 1 + 100/8,
    |g_64|^2 = 1 + 100/64): B_simple = 100 exactly, with a zero-width interval; a batch whose |G|^2 estimate is
    negative on average has no value, and the reason says so."""
    import pandas as pd

    from rlbatch.analysis.noise import b_simple_by_batch
    from rlbatch.runstore import Run, make_meta

    def noisy(rid, b, g2, seed):
        n = 40
        m = pd.DataFrame({"step": np.arange(1, n + 1), "noise/b_small": 8.0, "noise/b_big": 64.0,
                          "noise/grad_sq_small": g2 + 100 / 8, "noise/grad_sq_big": g2 + 100 / 64})
        return Run(meta=make_meta(run_id=rid, batch_size=b, seed=seed), metrics=m)

    rows = b_simple_by_batch([noisy("a0", 64, 1.0, 0), noisy("a1", 64, 1.0, 1), noisy("b0", 128, -0.5, 0)],
                             n_boot=200)
    assert [r["batch_size"] for r in rows] == [64, 128]
    assert rows[0]["b_simple"] == pytest.approx(100.0) and rows[0]["ci"] == pytest.approx([100.0, 100.0])
    assert rows[0]["n_runs"] == 2 and rows[0]["steps"] == 80
    assert rows[1]["b_simple"] is None and rows[1]["ci"] is None and "not positive" in rows[1]["reason"]


def test_seed_mean_curve_runs_to_the_last_point_any_seed_has():
    """Two seeds, one stopped at 2000 samples (score 0.2 + 1e-4 x samples) and one run to 4000 (0.1 + 1e-4 x
    samples), 100 samples per step at 0.5 s per step on the wall clock: the mean is 0.15 + 1e-4 x samples to 2000,
    then the longer seed alone to 4000; the clock column is each seed's time at those samples."""
    import pandas as pd

    from rlbatch.analysis.curves import CLOCK_X, aggregate_seeds
    from rlbatch.runstore import Run, make_meta

    def seed(rid, n_steps, start):
        s = np.arange(1, n_steps + 1)
        m = pd.DataFrame({"step": s, "samples/retained": 100.0 * s, "time/wall_s": 0.5 * s})
        xs = np.arange(0, 100 * n_steps + 1, 500.0)
        ev = pd.DataFrame({"samples/retained": xs, "eval/score": start + 1e-4 * xs})
        return Run(meta=make_meta(run_id=rid, batch_size=100), metrics=m, evals=ev)

    agg = aggregate_seeds([seed("c-s0", 20, 0.2), seed("c-s1", 40, 0.1)], "c", clock="wall").evals
    assert agg["samples/retained"].max() == 4000
    at = agg.set_index("samples/retained")
    assert at.loc[1000, "eval/score"] == pytest.approx(0.25) and at.loc[1000, "n_seeds"] == 2
    assert at.loc[3000, "eval/score"] == pytest.approx(0.4) and at.loc[3000, "n_seeds"] == 1
    assert at.loc[1000, "eval/score_min"] == pytest.approx(0.2) and at.loc[1000, "eval/score_max"] == pytest.approx(0.3)
    assert at.loc[3000, CLOCK_X] == pytest.approx(15.0) and at.loc[1000, CLOCK_X] == pytest.approx(5.0)


def test_no_impossible_interval_is_printed(demo, tmp_path):
    """Issue 46 item 4 (newcomer findings 8, 10): no "∞", no interval from 0.00 and no "slower" whose lower end
    prints as 1.00, in the report of the stored demo sweep and in one whose larger batches were stopped early
    (open intervals: their time-to-target is only bounded below)."""
    import re

    def check(text: str) -> None:
        assert "∞" not in text
        assert not re.search(r"(?<![\d.])0\.00[–-]", text), re.search(r".{60}(?<![\d.])0\.00[–-].{20}", text)
        for m in re.finditer(r"\((?:95% CI )?(1\.00)[–-]\d[^)]*\)[^\n|]{0,40}slower", text):
            raise AssertionError(f"a 'slower' with a lower end of 1.00: {m.group(0)}")

    _, out, runs = demo
    check((out / "report.md").read_text())
    check((out / "report.html").read_text())
    cut = []
    for r in runs:  # stop the larger batches before the target: censored, open-ended intervals
        if (r.meta.batch_size or 0) >= 64:
            keep = r.evals["samples/retained"] <= float(r.evals["samples/retained"].min()) * 1.5
            r.evals = r.evals[keep].reset_index(drop=True)
            r.metrics = r.metrics[r.metrics["samples/retained"] <= float(r.evals["samples/retained"].max())]
        cut.append(r)
    build_report(cut, tmp_path / "cut", target=0.45)
    check((tmp_path / "cut" / "report.md").read_text())
