"""scripts/screenshots.py (researcher tryout finding 15): the docs' screenshots regenerated from a current report in
a headless browser; without one it says so (exit 3) and leaves them alone. No browser is started here."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shots():
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PAGE = ("<!DOCTYPE html>\n<html><head><style>x</style></head>\n<body>\n<h1>rlbatch demo</h1>\n<p>Clock.</p>\n"
        "<h2>Recommendation</h2>\n<p>Pick</p>\n<h2>Configurations (20 runs in 10 configurations)</h2>\n<p>c</p>\n"
        "<h2>Figures</h2>\n<p>f</p>\n<h2>Gradient noise and the critical batch</h2>\n<p>g</p>\n"
        "<h2>Throughput vs batch size</h2>\n<p>t</p>\n<h2>Plan: align, then accelerate</h2>\n<p>p</p>\n"
        "<h2>Sequential study</h2>\n<p>s</p>\n</body></html>\n")


def test_the_page_is_cut_into_the_four_shots_of_the_docs(shots):
    pages = dict(shots.shot_pages(PAGE))
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs" / "screenshots").glob("*.png"))
    one = pages["demo_report_1_headline_accounting.png"]
    assert "<h1>rlbatch demo</h1>" in one and "Pick" in one and "Configurations" not in one
    assert "<style>x</style>" in one and one.rstrip().endswith("</body></html>")
    two = pages["demo_report_2_configurations_score_figures.png"]
    assert "<h2>Figures</h2>" in two and "<h1>" not in two and "Gradient noise" not in two
    four = pages["demo_report_4_throughput_plan.png"]
    assert "Throughput vs" in four and "Plan: align" in four and "Sequential" not in four


def test_a_report_without_a_section_is_refused_by_name(shots):
    with pytest.raises(ValueError, match="no section titled 'Gradient noise'"):
        shots.shot_pages(PAGE.replace("Gradient noise", "Noise"))


def test_without_a_browser_it_says_so_and_leaves_the_screenshots(shots, tmp_path, capsys):
    before = {p.name: p.stat().st_mtime for p in (ROOT / "docs" / "screenshots").glob("*.png")}
    assert shots.main([str(tmp_path), "--browser", str(tmp_path / "no-such-chromium")]) == 3
    err = capsys.readouterr().err
    assert "no headless browser found" in err and "left as they are" in err
    assert {p.name: p.stat().st_mtime for p in (ROOT / "docs" / "screenshots").glob("*.png")} == before


def test_no_report_is_exit_2(shots, tmp_path, capsys):
    browser = tmp_path / "chromium"
    browser.write_text("#!/bin/sh\nexit 1\n")
    browser.chmod(0o755)
    assert shots.main([str(tmp_path / "nothing"), "--browser", str(browser), "--out", str(tmp_path / "o")]) == 2
    assert "no report.html" in capsys.readouterr().err
