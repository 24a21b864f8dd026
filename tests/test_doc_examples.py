"""Every `rlbatch ...` example in the README and docs/commands/*.md is either run here as written (in a scratch
folder holding `examples/`, `src/rlbatch/data/` and, as `runs/sw`, the stored sweep of the README's own sweep
command), or listed in NOT_RUN with the reason and the test that covers it (issue 46 item 5: none can fail
unnoticed). A new example that is neither fails the first test."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from _stored_sweeps import unpack

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "commands").glob("*.md"))]

#: examples not run here, by a prefix of the command as written -> why (and where it is covered)
NOT_RUN = {
    "rlbatch train ": "trains for minutes (tests/test_cli_newcomer.py, test_train*.py, the tutorial test)",
    "rlbatch sweep ": "trains a ladder for minutes, or launches on a cluster (test_sweep*.py, test_tutorial.py)",
    "rlbatch demo": "the main job, minutes on 2 cores (make demo; tests/test_demo*.py run it small)",
    "rlbatch launch ": "writes launch scripts for verl / OpenRLHF (tests/test_launch*.py)",
    "rlbatch profile --model smollm2": "needs the SmolLM2 wheel (make smollm2)",
    "rlbatch profile --model path/": "a placeholder path and a GPU",
    "rlbatch plan runs/probes": "needs probe runs the user trained first (tests/test_plan*.py)",
    "rlbatch plan runs/probe-B64": "needs a probe run and a profile the user made first (tests/test_plan*.py)",
    "rlbatch inspect runs/t1": "needs the README's train run first (tests/test_cli_inspect*.py on run directories)",
    "rlbatch watch runs/sw --target 0.45 ": "",  # run below (the live form waits for updates: run with --once)
}


def examples() -> list[tuple[str, str]]:
    """(file name, command) for every line of a ```bash block that starts with `rlbatch `, continuations joined,
    the comment dropped."""
    out = []
    for f in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", f.read_text(), re.S):
            text = re.sub(r"\\\n\s*", " ", block)
            for line in text.splitlines():
                cmd = line.split(" #")[0].strip()
                if cmd.startswith("rlbatch "):
                    out.append((f.name, cmd))
    return out


def _skipped(cmd: str) -> str | None:
    for prefix, why in NOT_RUN.items():
        if cmd.startswith(prefix) and why:
            return why
    return None


def test_every_documented_example_is_run_or_has_a_reason():
    found = examples()
    assert len(found) >= 40  # the README and the command pages
    runnable = [c for _, c in found if _skipped(c) is None]
    assert len(runnable) >= 18, runnable


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    (root / "examples").symlink_to(ROOT / "examples")
    (root / "src" / "rlbatch").mkdir(parents=True)
    (root / "src" / "rlbatch" / "data").symlink_to(ROOT / "src" / "rlbatch" / "data")
    unpack(ROOT / "tests" / "data" / "demo_sweep" / "trials.tar.gz", root / "runs" / "sw")
    return root


@pytest.mark.parametrize("cmd", sorted({c for _, c in examples() if _skipped(c) is None}))
def test_documented_example_runs_as_written(cmd, scratch, tmp_path):
    args = shlex.split(cmd)[1:]
    if args[0] == "watch" and "--once" not in args:
        args.append("--once")  # the live form follows the sweep; on a finished one it ends after one update
    if any("*" in a for a in args):  # the shell's glob, as a user's shell expands it
        args = [x for a in args for x in (sorted(str(p.relative_to(scratch)) for p in scratch.glob(a)) or [a])]
    env = {"PYTHONPATH": SRC, "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", *args], cwd=scratch, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    assert "Traceback" not in r.stderr and r.stdout.strip()
