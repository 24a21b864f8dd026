"""Regenerate docs/screenshots/*.png from a current report, in a real headless browser.

    python scripts/screenshots.py runs/demo/report            # the demo's report (after `make demo`)
    python scripts/screenshots.py --simulate                  # a report of a simulated study, built here
    python scripts/screenshots.py REPORT_DIR --out /tmp/shots --browser /usr/bin/chromium

REPORT_DIR holds ``report.html`` (what ``rlbatch analyze DIR --target T --out REPORT_DIR`` and ``rlbatch demo``
write; the HTML is self-contained, figures embedded). The page is cut at its ``##`` sections into the shots of
:data:`SHOTS` (a shot takes the sections whose titles start with its prefixes; the first also takes the title and
headline above the first section), each rendered by ``chromium --headless --no-sandbox --screenshot`` at
``--width`` pixels, cropped below its last line and written as a 256-colour PNG (tens to a few hundred KB).
``--simulate`` builds the report first from :func:`rlbatch.study.calibration.simulate_study` (the demo's ladder
B = 16 to 4096, 3 seeds, target 0.37) with ``rlbatch analyze``; a simulated study has no gradient norms or phase
timings, so its noise and throughput sections say so: use the demo's report for the docs.

Exit codes: 0 written; 2 no report (or a section a shot needs is missing); 3 no headless browser found (the
message names the ones looked for; the screenshots are left as they are); 4 the browser failed.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Browsers looked for on PATH, in this order (``--browser`` or ``$CHROMIUM`` names another).
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")

#: (file name, prefixes of the section titles it shows; "" = the title and headline above the first section).
SHOTS = (
    ("demo_report_1_headline_accounting.png", ("", "Recommendation")),
    ("demo_report_2_configurations_score_figures.png", ("Configurations", "Figures")),
    ("demo_report_3_time_noise.png", ("Gradient noise",)),
    ("demo_report_4_throughput_plan.png", ("Throughput", "Plan")),
)


def find_browser(given: str | None = None) -> str | None:
    """The headless browser to use: ``given`` (a path or a name on PATH), else ``$CHROMIUM``, else the first of
    :data:`BROWSERS` on PATH; None when there is none."""
    for name in ([given] if given else []) + ([os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else []) + list(
            BROWSERS):
        path = shutil.which(name) or (name if Path(name).is_file() and os.access(name, os.X_OK) else None)
        if path:
            return path
        if given:
            return None  # a named browser that is not there: not silently another
    return None


def sections(page: str) -> tuple[str, str, list[tuple[str, str]]]:
    """``report.html`` cut into (head up to ``<body>``, the part above the first ``<h2>``, [(title, html)] per
    section)."""
    m = re.search(r"(?s)^(.*?<body[^>]*>)(.*?)</body>", page)
    if not m:
        raise ValueError("no <body> in the report")
    head, body = m.group(1), m.group(2)
    parts = re.split(r"(?=<h2[ >])", body)
    secs = []
    for part in parts[1:]:
        t = re.match(r"<h2[^>]*>(.*?)</h2>", part, flags=re.DOTALL)
        secs.append((html.unescape(re.sub(r"<[^>]+>", "", t.group(1))).strip() if t else "", part))
    return head, parts[0], secs


def shot_pages(page: str) -> list[tuple[str, str]]:
    """(file name, a self-contained HTML page) for each of :data:`SHOTS`. Raises ValueError naming a prefix that
    matches no section of the report."""
    head, top, secs = sections(page)
    out = []
    for name, prefixes in SHOTS:
        chosen = [top] if "" in prefixes else []
        for p in (p for p in prefixes if p):
            hit = [h for t, h in secs if t.startswith(p)]
            if not hit:
                raise ValueError(f"{name}: no section titled {p!r}... in the report (sections: "
                                 f"{', '.join(t for t, _ in secs)})")
            chosen += hit
        out.append((name, head + "".join(chosen) + "</body></html>\n"))
    return out


def render(browser: str, page_html: str, png: Path, width: int, height: int, work: Path) -> None:
    """Render ``page_html`` headless at ``width`` x ``height`` pixels into ``png`` (raises RuntimeError when the
    browser fails or writes nothing)."""
    src = work / (png.stem + ".html")
    src.write_text(page_html, encoding="utf-8")
    profile = work / "profile"  # a profile of its own: no lock shared with another chromium (the test suite's)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--force-device-scale-factor=1", f"--window-size={width},{height}",
           f"--screenshot={png}", src.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    if res.returncode != 0 or not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"{Path(browser).name} failed on {png.name} (exit {res.returncode}): "
                           f"{res.stderr.strip().splitlines()[-1:] or ''}")


def shrink(png: Path, max_height: int, margin: int = 24) -> tuple[int, int, int]:
    """Crop ``png`` below its last non-white row (plus ``margin``), at most ``max_height`` pixels, and save it as a
    256-colour PNG. Returns (width, height, bytes)."""
    from PIL import Image, ImageChops

    im = Image.open(png).convert("RGB")
    bbox = ImageChops.difference(im, Image.new("RGB", im.size, (255, 255, 255))).getbbox()
    bottom = min(im.height, (bbox[3] + margin) if bbox else im.height, max_height)
    im = im.crop((0, 0, im.width, bottom))
    im.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(png, optimize=True)
    return im.width, im.height, png.stat().st_size


def simulated_report(work: Path) -> Path:
    """A report of a simulated study (the demo's ladder, 3 seeds, target 0.37), built with ``rlbatch analyze``."""
    from rlbatch.study.calibration import Scenario, simulate_study, write_study

    sc = Scenario("screenshots", batches=(16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
                  rn={b: max(1.0, b / 512) for b in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)},
                  gain={b: (b / 16) ** 0.5 for b in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)},
                  budget=16384, stop_hold=3)
    study = write_study(simulate_study(sc, 0), work / "study")
    out = work / "report"
    rlbatch = Path(sys.executable).with_name("rlbatch")
    cmd = [str(rlbatch) if rlbatch.is_file() else "rlbatch", "analyze", str(study), "--target", "0.37", "--out",
           str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", nargs="?", help="report directory (holding report.html) or the report.html itself")
    ap.add_argument("--simulate", action="store_true", help="build the report from a simulated study first")
    ap.add_argument("--out", default=str(ROOT / "docs" / "screenshots"), help="where the PNGs go")
    ap.add_argument("--browser", help="browser executable (default: $CHROMIUM, else chromium etc. on PATH)")
    ap.add_argument("--width", type=int, default=1200, help="window width in pixels (default 1200)")
    ap.add_argument("--max-height", type=int, default=4200, help="each shot cut at this height (default 4200)")
    a = ap.parse_args(argv)
    browser = find_browser(a.browser)
    if browser is None:
        env = [os.environ["CHROMIUM"]] if os.environ.get("CHROMIUM") else []
        looked = a.browser or ", ".join(env + list(BROWSERS))
        print(f"screenshots: no headless browser found (looked for {looked}); install one (e.g. apt-get install "
              "chromium) or pass --browser PATH. The screenshots were left as they are.", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="rlbatch-shots-") as tmp:
        work = Path(tmp)
        if a.simulate:
            report = simulated_report(work)
        elif a.report:
            report = Path(a.report)
        else:
            print("screenshots: give a report directory (rlbatch analyze ... --out DIR) or --simulate",
                  file=sys.stderr)
            return 2
        page_path = report if report.suffix == ".html" else report / "report.html"
        if not page_path.is_file():
            print(f"screenshots: no report.html at {page_path}", file=sys.stderr)
            return 2
        try:
            pages = shot_pages(page_path.read_text(encoding="utf-8"))
        except ValueError as err:
            print(f"screenshots: {err}", file=sys.stderr)
            return 2
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, page in pages:
            png = work / name
            try:
                render(browser, page, png, a.width, a.max_height + 200, work)
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                print(f"screenshots: {err}", file=sys.stderr)
                return 4
            w, h, n = shrink(png, a.max_height)
            shutil.copyfile(png, out / name)
            print(f"{out / name}: {w} x {h}, {n / 1024:.0f} KB")
    print(f"screenshots: {len(pages)} written with {browser} from "
          + ("a simulated study's report" if a.simulate else str(page_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
