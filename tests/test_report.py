"""build_report: the files, the JSON contract, sections, the recommendation, and a headless-Chromium render."""

import base64
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
from html import unescape as html_unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _stored_sweeps import unpack
from rlbatch.errors import UserError
from rlbatch.report import build_report
from rlbatch.report.figures import new_figure
from rlbatch.runstore import Run, RunMeta


def make_run(rid, p, g, steps, per_step_s, reach_at, grad):
    """Score rises linearly in retained samples to 0.8 at ``reach_at`` x 1000 samples; fixed time per step."""
    b = p * g
    meta = RunMeta(run_id=rid, prompts_per_step=p, group_size=g, lr=1e-6 * (b / 64) ** 0.5, hardware="1 x H100")
    s = np.arange(1, steps + 1)
    metrics = pd.DataFrame({"step": s, "samples/retained": s * b, "time/gen_s": per_step_s * 0.6,
                            "time/train_s": per_step_s * 0.3, "time/step_s": per_step_s,
                            "time/wall_s": s * per_step_s, "grad_norm/actor": grad * np.ones(steps)})
    es = s[::2]
    score = np.minimum(0.8, es * b / (reach_at * 1000) * 0.8)
    evals = pd.DataFrame({"step": es, "samples/retained": es * b, "time/wall_s": es * per_step_s,
                          "eval/score": score})
    run = Run(meta=meta, metrics=metrics, evals=evals)
    run.meta.samples_source = "log"
    return run


def runs3():
    # B = 64, 128, 256; grad norm ~ B^-1/2; B=128 needs 1.2x the samples at 1.8x the throughput (faster),
    # B=256 needs 2.0x the samples at 1.9x the throughput (slower)
    return [make_run("b64", 16, 4, 200, 10.0, 5, 1.0),
            make_run("b128", 32, 4, 100, 128 / 64 * 10.0 / 1.8, 6, 1 / 2 ** 0.5),
            make_run("b256", 64, 4, 50, 256 / 64 * 10.0 / 1.9, 10, 0.5)]


def test_build_report_contract(tmp_path):
    fig = new_figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    section = {"title": "Noise scale", "markdown": "B_simple is **1234**.", "figures": {"b simple": fig},
               "json_key": "custom", "json": {"b_simple": 1234}}
    res = build_report(runs3(), tmp_path, target=0.6, sections=[section], extra_json={"extra": 1})
    for f in ("report.html", "report.md", "report.json", "fig_score_vs_samples.png", "fig_score_vs_time.png",
              "fig_gradient_noise_and_the_critical_batch_grad_norm_vs_batch.png", "fig_time_per_step.png", "fig_noise_scale_b_simple.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["runs"] == res["runs"] and res["custom"] == {"b_simple": 1234} and res["extra"] == 1
    acc = {r["run"]: r for r in res["accounting"]}
    assert res["reference"] == "b64" and acc["b64"]["rN"] == 1.0
    # samples-to-target at 0.6: 0.75 of reach_at x 1000 -> 3750, 4500, 7500 (curves are linear before 0.8; the
    # local fit around the crossing reaches into the flat part past 0.8, within 1%)
    assert acc["b128"]["samples_to_target"] == pytest.approx(4500, rel=0.01)
    assert acc["b128"]["rN"] == pytest.approx(1.2, rel=0.01)
    assert acc["b128"]["relative_throughput"] == pytest.approx(1.8, rel=0.01)
    # one run per batch size and three batch sizes: no seed-to-seed spread to judge them by (it needs three
    # configurations of two or more seeds, or four batch sizes on one rule), so no interval and no verdict; the
    # point estimates say b128 is the fastest (1.2 / 1.8 = 0.67x) and b256 about even (2.0 / 1.9)
    assert acc["b128"]["verdict"] == acc["b256"]["verdict"] == "undetermined"
    assert acc["b128"]["relative_time_ci"] is None and not acc["b128"]["faster_than_reference"]
    assert res["recommendation"].startswith("**No batch is shown to beat the reference b64 (B=64)**")
    h = res["headline"]
    assert h["pick"] == "b128" and h["best_set"] == ["b64", "b128", "b256"] and len(h["lines"]) == 5
    assert "The best point estimate is b128 (B=128): 0.67x" in h["lines"][0]
    assert h["lines"][2] == "Rejected: none (no configuration is slower than the reference beyond noise)."
    assert h["lines"][3].startswith("Undetermined: b128 (B=128), b256 (B=256): no seed-to-seed spread")
    # what would decide (issue 52): with no spread at all, the least that measures one
    assert h["lines"][4].startswith("No seed-to-seed spread to judge or plan by: run a second seed")
    assert h["bullets"][0].startswith("b256 is undetermined")
    assert res["noise"]["actor"]["slope"] == pytest.approx(-0.5)  # grad ~ B^-1/2 planted in runs3()
    assert res["noise"]["actor"]["knee_batch"] is None
    assert res["throughput"]["model"] is not None
    md = (tmp_path / "report.md").read_text()
    assert "## Noise scale" in md and "B_simple is **1234**." in md and "(fig_noise_scale_b_simple.png)" in md
    html = (tmp_path / "report.html").read_text()
    assert "<strong>1234</strong>" in html and 'src="fig_' not in html  # all figures embedded
    # 3 built-in + noise (grad norm vs B) + throughput + plan + the caller's section
    assert len(re.findall(r'<img src="data:image/png;base64,', html)) == 7 == len(res["figures"])


def test_no_target_and_none_reached(tmp_path):
    res = build_report(runs3(), tmp_path / "a")
    assert "accounting" not in res and res["recommendation"] is None
    res = build_report(runs3(), tmp_path / "b", target=0.95)
    assert [r["reached"] for r in res["accounting"]] == [False, False, False]
    assert res["recommendation"].startswith("No run reached eval/score ≥ 0.95")
    with pytest.raises(UserError, match="unknown reference"):
        build_report(runs3(), tmp_path / "c", target=0.6, reference="nope")
    with pytest.raises(UserError, match="no runs"):
        build_report([], tmp_path / "d")


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHECK = """<script>window.addEventListener('load', () => {
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0).length;
  document.body.setAttribute('data-imgcheck', imgs.length + ':' + ok);
  const page = document.body.getBoundingClientRect();
  const wide = [...document.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > page.right + 1
                                                                 || t.scrollWidth > t.clientWidth + 1);
  document.body.setAttribute('data-tablecheck', document.querySelectorAll('table').length + ':' + wide.length);
  const caps = [...document.querySelectorAll('p > em')].map(e => e.textContent.trim());
  document.body.setAttribute('data-captions', JSON.stringify(caps));
  document.body.setAttribute('data-pagewidth', String(document.documentElement.scrollWidth) + ':' +
                             String(window.innerWidth));
});</script>"""

#: A code identifier: what a figure caption must not be (``grad_norm_vs_batch``, ``eval/score``).
IDENTIFIER = re.compile(r"[A-Za-z0-9_./\-]+")


def test_html_renders_in_headless_chromium(tmp_path):
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium (.ci/run does, as root) to render the HTML report")
        pytest.skip("chromium is not installed (apt-get install chromium) - cannot render the HTML report")
    from PIL import Image

    n = len(build_report(runs3(), tmp_path, target=0.6)["figures"])
    assert n >= 5
    page = tmp_path / "check.html"
    page.write_text((tmp_path / "report.html").read_text().replace("</body>", CHECK + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
             "--window-size=800,1000", "--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    m = re.search(r'data-imgcheck="(\d+):(\d+)"', dom)
    assert m, "the page's load handler did not run"
    assert m.group(1) == m.group(2) == str(n), m.group(0)  # every figure decoded with a nonzero size
    # no table wider than the page (an 800 px window): wide tables wrap their cells
    t = re.search(r'data-tablecheck="(\d+):(\d+)"', dom)
    assert t and int(t.group(1)) >= 4 and t.group(2) == "0", t.group(0) if t else dom[-2000:]
    pw = re.search(r'data-pagewidth="(\d+):(\d+)"', dom)
    assert int(pw.group(1)) <= int(pw.group(2)), pw.group(0)  # no horizontal scrolling of the page
    # every figure has a caption in words, none is a code identifier
    caps = json.loads(html_unescape(re.search(r'data-captions="([^"]*)"', dom).group(1)))
    assert len(caps) == n, caps
    for c in caps:
        assert not IDENTIFIER.fullmatch(c) and len(c.split()) >= 4, c
    srcs = re.findall(r'<img[^>]*src="data:image/png;base64,([^"]+)"', dom)
    assert len(srcs) == n
    for s in srcs:
        im = Image.open(io.BytesIO(base64.b64decode(s)))
        assert im.format == "PNG" and im.width > 100 and im.height > 100
        assert len(np.unique(np.asarray(im.convert("L")))) > 10  # not a blank image


def _chromium_or_skip() -> str:
    exe = chromium()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium (.ci/run does, as root) to render the HTML report")
        pytest.skip("chromium is not installed (apt-get install chromium) - cannot render the HTML report")
    return exe


def test_demo_page_in_chromium_has_one_value_per_quantity_and_whole_figures(tmp_path):
    """On the stored demo sweep rendered by Chromium: every figure decodes; no figure clips an interval or
    stops a curve short of the crossing the accounting reports (:func:`rlbatch.report.figures.figure_problems`,
    recorded in report.json as the page is drawn); the tables of the rendered DOM show one value per quantity
    (tests/_page_check.py); the headline is its lines (three or more), then a list. A full-page screenshot is written beside
    the report (and copied to ``$RLBATCH_SCREENSHOTS`` when set)."""

    from _page_check import conflicts, page_values
    from rlbatch.readers.collect import load_all

    exe = _chromium_or_skip()
    unpack(Path(__file__).parent / "data" / "demo_sweep_cpu" / "trials.tar.gz", tmp_path)
    runs, _ = load_all([tmp_path / "trials"])
    out = tmp_path / "report"
    res = build_report(runs, out, target=0.45)
    assert res["figure_problems"] == {}, res["figure_problems"]
    page = out / "check.html"
    page.write_text((out / "report.html").read_text().replace("</body>", CHECK + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  f"--user-data-dir={profile}", "--hide-scrollbars", "--virtual-time-budget=10000"]
        proc = subprocess.run(common + ["--window-size=1200,1000", "--dump-dom", page.as_uri()],
                              capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-2000:]
        shot = out / "page.png"
        subprocess.run(common + ["--window-size=1200,9000", f"--screenshot={shot}", (out / "report.html").as_uri()],
                       capture_output=True, text=True, timeout=180)
    dom = proc.stdout
    m = re.search(r'data-imgcheck="(\d+):(\d+)"', dom)
    assert m and m.group(1) == m.group(2) == str(len(res["figures"])), m.group(0) if m else dom[-500:]
    t = re.search(r'data-tablecheck="(\d+):(\d+)"', dom)
    assert t and t.group(2) == "0", t.group(0)  # no table wider than the page
    found = page_values(dom)
    assert not conflicts(found), conflicts(found)
    assert sum(len(v) > 1 for v in found.values()) >= 10  # quantities that do appear in several places
    head = re.search(r"<h2>Recommendation</h2>\s*<p>(.*?)</p>\s*<ul>", dom, re.S)
    # the headline's lines (the three of the verdict, then the LR answer and what would decide, as report.md has
    # them), one hard line break between each, then a list
    md_head = (out / "report.md").read_text().split("## Recommendation\n\n", 1)[1].split("\n\n", 1)[0]
    assert head and head.group(1).count("<br") == md_head.count("  \n") >= 2, head.group(1) if head else dom[:3000]
    from PIL import Image

    im = Image.open(shot)
    assert im.size == (1200, 9000) and len(np.unique(np.asarray(im.convert("L")))) > 50
    if os.environ.get("RLBATCH_SCREENSHOTS"):
        shutil.copy(shot, Path(os.environ["RLBATCH_SCREENSHOTS"]) / "demo_report_full.png")
