"""docs/tutorial.md runs as written (issue 38): every ```bash block, in order, in one shell, from a directory laid out
like a fresh clone after `make demo` (its `.venv` is this interpreter's environment); no command fails or prints a
Python traceback, and the outputs the text describes are there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def tutorial_commands(text: str) -> list[str]:
    """The commands of the page's ```bash blocks, in order (a line ending in a backslash continues)."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        out.extend(c.strip() for c in block.replace("\\\n", " ").splitlines() if c.strip())
    return out


def test_the_tutorial_runs_as_written(tmp_path):
    cmds = tutorial_commands(TUTORIAL.read_text())
    assert cmds[0] == "source .venv/bin/activate" and len(cmds) >= 10
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))  # the fresh clone's .venv after `make demo`
    script = tmp_path / "tutorial.sh"
    # each command's output is kept apart, so the checks below read what that command printed
    script.write_text("set -e\n" + "".join(f"{c} > out{i}.txt 2> err{i}.txt\n" for i, c in enumerate(cmds)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["HOME"] = str(tmp_path / "home")
    r = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    done = sorted(int(p.stem[3:]) for p in tmp_path.glob("out*.txt"))
    last = done[-1] if done else 0
    assert r.returncode == 0, (cmds[last], (tmp_path / f"err{last}.txt").read_text()[-3000:])
    for i, c in enumerate(cmds):
        err = (tmp_path / f"err{i}.txt").read_text()
        assert "Traceback" not in err, (c, err[-2000:])
    out = {c.split()[1] if len(c.split()) > 1 else c: (tmp_path / f"out{i}.txt").read_text()
           for i, c in enumerate(cmds)}
    assert out["--version"].startswith("rlbatch ")
    # lr: 5e-5 x sqrt(B / 16): 1e-4 at B = 64, 2e-4 at 256, as the page says
    lr = next((tmp_path / f"out{i}.txt").read_text() for i, c in enumerate(cmds) if c.startswith("rlbatch lr"))
    assert "0.0001" in lr and "0.0002" in lr
    for d in ("runs/tutorial", "runs/tutorial-report", "runs/tutorial-adaptive"):
        assert (tmp_path / d / "report.html").is_file(), d
    rec = json.loads((tmp_path / "runs/tutorial-adaptive/adaptive.json").read_text())
    assert rec["stopped_because"] != "running" and {t["config"] for t in rec["trials"]} == {
        "B16-G8-sqrt", "B64-G8-sqrt", "B256-G8-sqrt"}
    # watch on the finished adaptive sweep: one line per configuration with the loop's outcome, then the best (and
    # what would decide, when undecided)
    w = [(tmp_path / f"out{i}.txt").read_text() for i, c in enumerate(cmds) if c.startswith("rlbatch watch")]
    assert len(w) == 2 and all(any(ln.startswith("update 1: best ") for ln in x.strip().splitlines()[-2:])
                               for x in w)
    assert sum(" | " in ln for ln in w[1].splitlines()) == 3
