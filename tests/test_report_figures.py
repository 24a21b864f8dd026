"""The report's figures (issue 35): at most a handful of curves per panel (small multiples with the reference in
each), legends that cover no data, durations with two significant figures, and every figure of a real report
screenshotted by Chromium and not blank."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from _stored_sweeps import unpack
from rlbatch.readers.collect import load_all
from rlbatch.report import _duration, build_report
from rlbatch.report.figures import MAX_LINES, figure_problems, legend_covers, new_figure, score_vs
from rlbatch.runstore import Run, RunMeta
from test_report import _chromium_or_skip

DEMO_CPU = Path(__file__).parent / "data" / "demo_sweep_cpu" / "trials.tar.gz"


def _run(rid: str, b: int, slope: float, lr_rule: str = "sqrt") -> Run:
    x = np.arange(0, 41) * 256.0
    meta = RunMeta(run_id=rid, batch_size=b, prompts_per_step=b // 8, group_size=8, lr=1e-4, lr_rule=lr_rule)
    ev = pd.DataFrame({"step": np.arange(41), "samples/retained": x, "eval/score": 0.2 + slope * x})
    return Run(meta=meta, metrics=ev[["step", "samples/retained"]].copy(), evals=ev)


def test_ten_configurations_go_into_small_multiples_with_the_reference_in_each():
    runs = [_run(f"B{b}", b, 1e-5 / (1 + i)) for i, b in enumerate((16, 32, 64, 128, 256, 512, 1024, 2048, 4096))]
    runs.append(_run("B256-fixed", 256, 4e-6, lr_rule="none"))
    fig = score_vs(runs, "samples/retained", target=0.25, reference="B16")
    axes = [a for a in fig.get_axes() if a.get_visible()]
    assert len(axes) == 3  # 9 others in panels of 3, plus the reference in each: 4 curves per panel
    for ax in axes:
        curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
        assert len(curves) <= MAX_LINES
        assert curves[0].get_label().startswith("reference: B16") and curves[0].get_color() == "black"
    labels = {ln.get_label() for ax in axes for ln in ax.get_lines()}
    assert all(any(lab.startswith(r.run_id + " ") or lab.startswith("reference: " + r.run_id) for lab in labels)
               for r in runs)
    assert figure_problems(fig) == []


def test_a_legend_over_the_data_is_a_problem():
    fig = new_figure()
    ax = fig.add_subplot()
    xs = np.linspace(0, 1, 50)
    ax.plot(xs, np.full(50, 0.95), "o", label="points along the top")
    ax.set_ylim(0, 1)
    leg = ax.legend(loc="upper center")
    assert legend_covers(ax, leg) > 0
    assert any("legend covers" in p for p in figure_problems(fig))
    leg.remove()
    ax.legend(loc="lower center")
    assert figure_problems(fig) == []


def test_plan_fit_figure_says_when_the_asymptote_is_the_bound_and_its_legend_covers_no_point():
    """Newcomer finding 24: B4096's fit read "A=1.00" (the asymptote pinned at the score ceiling, the fit's bound)
    and the legend hid its highest point."""
    from rlbatch.analysis.fit import fitted_curve
    from rlbatch.report.plan import fit_figure

    def cand(run: str, a: float, ci: list[float]) -> dict:
        fit = {"R0": 0.2, "A": a, "C_mid": 2000.0, "b": 1.5, "x_max": 3000.0, "A_ci": ci}
        return {"run": run, "batch_size": 64, "runs": [], "predicted_samples_to_target": 5000,
                "fit": {**fit, "curve": fitted_curve(fit, 3000.0, 5000)}}

    fig = fit_figure({"target": 0.4, "candidates": [cand("B64", 1.0, [0.5, 1.0]), cand("B128", 0.6, [0.55, 0.71])]})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["B64 (A at the bound 1.00: not measured)",
                                                                     "B128 (A=0.60, 95% 0.55-0.71)"]
    assert legend_covers(ax, ax.get_legend()) == 0 and figure_problems(fig) == []


@pytest.mark.parametrize("seconds, text", [(0.0012, "1.2 ms"), (0.085, "85 ms"), (0.5, "500 ms"), (3.14159, "3.1 s"),
                                           (4.96, "5.0 s"), (42.4, "42 s"), (121, "2.0 min"), (7300, "2.03 h")])
def test_durations_keep_two_significant_figures(seconds, text):
    # issue 35: a time-to-target column of "3 s" to "7 s" hid the differences it exists to show
    assert _duration(seconds) == text


def test_every_figure_of_a_real_report_screenshots_whole_in_chromium(tmp_path):
    """The stored CPU demo sweep (5 configurations): no figure has a problem (clipped interval, legend over data,
    more than MAX_LINES + 1 curves in a panel); each figure, opened alone in headless Chromium and screenshotted,
    is neither blank nor mostly empty."""
    exe = _chromium_or_skip()
    unpack(DEMO_CPU, tmp_path)
    runs, _ = load_all([tmp_path / "trials"])
    out = tmp_path / "report"
    res = build_report(runs, out, target=0.45)
    assert res["figure_problems"] == {}, res["figure_problems"]
    assert len(res["figures"]) >= 6
    with tempfile.TemporaryDirectory() as profile:
        for name in res["figures"]:
            w, h = Image.open(out / name).size
            page = out / f"{name}.html"
            page.write_text(f'<html><body style="margin:0;background:#fff"><img src="{name}"></body></html>')
            shot = out / f"{name}.shot.png"
            proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                   f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={w},{h}",
                                   f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0 and shot.is_file(), (name, proc.stderr[-1000:])
            gray = np.asarray(Image.open(shot).convert("L"))
            assert len(np.unique(gray)) > 10, name            # not a blank page
            assert (gray < 200).mean() > 0.02, name           # ink: axes, text and curves, not an empty frame
