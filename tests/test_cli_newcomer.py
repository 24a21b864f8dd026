"""What a newcomer types (issue 38): no Python traceback, one line and exit code 2 for a device this machine lacks or
a value out of range, nothing written; Ctrl-C in the first seconds or mid-sweep is one line and exit code 130, the
finished trials kept; -h and --version."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _cli import run_in_process

SRC = str(Path(__file__).resolve().parents[1] / "src")
CLI = [sys.executable, "-m", "rlbatch.cli"]


def _env(tmp_path):
    return {"PYTHONPATH": SRC, "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home")}


@pytest.mark.parametrize("args, says", [
    (["train", "--device", "gpu"], "--device: must be cpu, cuda or cuda:N (got 'gpu')"),
    (["demo", "--device", "gpu"], "--device: must be cpu, cuda or cuda:N (got 'gpu')"),
    (["train", "-P", "0"], "-P/--prompts-per-step: Input should be greater than or equal to 1 (got 0)"),
    (["sweep", "--base-batch", "16", "--base-lr", "5e-5", "--batches", "16,32", "--samples", "512", "--target", "45"],
     "--target 45 is outside eval/score's range 0 to 1 (the share of held-out items answered right; for 45% give "
     "0.45)"),
    (["demo", "--workers", "0"], "Invalid value for '--workers'"),
    # a mistyped task: refused before any trial starts (it failed every trial, then said only "no finished trials")
    (["sweep", "--base-batch", "16", "--base-lr", "5e-5", "--batches", "32", "--samples", "512", "--target", "0.4",
      "--task", "arithmatic"], "unknown task 'arithmatic' (not a reasoning-gym dataset)"),
])
def test_bad_values_are_one_line_and_write_nothing(monkeypatch, capsys, tmp_path, args, says):
    out = tmp_path / "out"
    code, _, err = run_in_process(monkeypatch, capsys, *args, "--out", out)
    assert code == 2 and says in err and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("rlbatch: error:")] == [err.splitlines()[-1]]
    assert not out.exists()  # nothing half-written (the tester found a half-written sweep.json)


def test_cuda_on_a_machine_without_it_is_one_line(monkeypatch, capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the error is for machines without it (not installed: a CUDA device)")
    for args in (["train", "--device", "cuda"], ["demo", "--model", "gpu-small", "--device", "cuda"]):
        out = tmp_path / args[0]
        code, _, err = run_in_process(monkeypatch, capsys, *args, "--out", out)
        assert code == 2 and err.endswith("--device cuda: this torch build has no CUDA (a CPU build); use --device "
                                          "cpu here, or run on a machine with a GPU"), err
        assert not out.exists()
    # profile: the same one line, and nothing before it (newcomer finding 22: an empty line came first)
    code, _, err = run_in_process(monkeypatch, capsys, "profile", "--device", "cuda", "--out", tmp_path / "prof")
    assert code == 2 and err.strip().splitlines() == [err.splitlines()[0]] and err.startswith("rlbatch: error: "
                                                                                               "--device cuda: "), err


def test_help_and_version(tmp_path):
    from rlbatch import __version__

    r = subprocess.run([*CLI, "--version"], capture_output=True, text=True, env=_env(tmp_path), timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == f"rlbatch {__version__}"
    for args in (["-h"], ["sweep", "-h"]):
        r = subprocess.run([*CLI, *args], capture_output=True, text=True, env=_env(tmp_path), timeout=600)
        assert r.returncode == 0 and "Usage: " in r.stdout and "--help" in r.stdout, r.stderr
    # rich markup must not swallow "[trl]" (demo --help printed "needs rlbatch).")
    r = subprocess.run([*CLI, "demo", "--help"], capture_output=True, text=True,
                       env={**_env(tmp_path), "COLUMNS": "200"}, timeout=600)
    assert 'pip install -e ".[trl]"' in r.stdout


def _interrupt_after(tmp_path, args, ready, timeout=240):
    """Start ``rlbatch ARGS`` in its own process group with Ctrl-C's default action, wait until ``ready()``, then
    send SIGINT to the whole group (as a terminal's Ctrl-C does). Returns (exit code, stderr)."""
    p = subprocess.Popen([*CLI, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=_env(tmp_path), start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.monotonic()
    while not ready() and p.poll() is None and time.monotonic() - t0 < timeout:
        time.sleep(0.2)
    assert p.poll() is None, "the command ended before it could be interrupted"
    os.killpg(p.pid, signal.SIGINT)
    try:
        err = p.communicate(timeout=600)[1]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return p.returncode, err


def _one_finished(out) -> bool:
    """Whether the sweep in ``out`` has a finished trial (its sweep.json readable and one trial ``finished``)."""
    try:
        man = json.loads((out / "sweep.json").read_text())
    except (OSError, ValueError):
        return False
    return any(t.get("state") == "finished" for t in man.get("trials", []))


def test_ctrl_c_stops_a_one_worker_sweep(tmp_path):
    """The default --workers 1 trains in the sweep's own process, which set itself up as a pool worker does and so
    ignored Ctrl-C: the sweep ran to its end (found in stop 64 while fixing the spawn window; the adaptive sweep and
    the demo prepared the same way). Interrupted after one trial finished: one line, exit 130, the trial kept."""
    out = tmp_path / "sw1"
    args = ["sweep", "--base-batch", "16", "--base-lr", "5e-5", "--batches", "16,32,64", "--samples", "2048",
            "--target", "0.35", "--eval-every", "512", "--eval-size", "128", "--workers", "1", "--out", str(out)]

    def one_finished():
        return _one_finished(out)

    code, err = _interrupt_after(tmp_path, args, one_finished)
    assert code == 130 and "Traceback" not in err and err.startswith("rlbatch: interrupted"), err
    man = json.loads((out / "sweep.json").read_text())
    assert 1 <= sum(t["state"] == "finished" for t in man["trials"]) < 3


def test_ctrl_c_is_one_line_early_and_mid_sweep(tmp_path):
    out = tmp_path / "sw"
    args = ["sweep", "--base-batch", "16", "--base-lr", "5e-5", "--batches", "16,32,64,128", "--samples", "2048",
            "--target", "0.35", "--eval-every", "512", "--eval-size", "128", "--workers", "2", "--out", str(out)]
    # early: once the command is under way (its output folder made: the CLI's handler is up; a fixed 2 s raced the
    # interpreter's imports on a busy machine), while the workers start up
    code, err = _interrupt_after(tmp_path, args, lambda: out.exists())
    assert code == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("rlbatch: interrupted")

    def one_finished():
        return _one_finished(out)

    code, err = _interrupt_after(tmp_path, args, one_finished)
    assert code == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    man = json.loads((out / "sweep.json").read_text())
    kept = sum(t["state"] == "finished" for t in man["trials"])
    assert kept >= 1 and err.strip() == (f"rlbatch: interrupted: rerun the same command to resume ({kept} of 4 "
                                         f"trials kept in {out})")
    assert not any(t["state"] == "running" for t in man["trials"])  # unfinished ones resume next time


def test_every_help_reads_at_80_columns(tmp_path):
    """Issue 46 item 5 (newcomer finding 11): at 80 columns every command's --help keeps each option's full names
    (none truncated with "…"), no line is wider than 80, and no flag shows a "<bool>" value."""
    import typer

    from rlbatch.cli import app

    group = typer.main.get_command(app)
    env = {**_env(tmp_path), "COLUMNS": "80"}
    for name, cmd in sorted(group.commands.items()):
        r = subprocess.run([*CLI, name, "--help"], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, (name, r.stderr)
        text = r.stdout
        assert "…" not in text and "<bool>" not in text, name
        assert max(len(line) for line in text.splitlines()) <= 80, name
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            for opt in [*p.opts, *p.secondary_opts]:
                if opt.startswith("-"):
                    assert opt in text, (name, opt)


def test_a_sweep_whose_trials_all_failed_says_why(tmp_path):
    """The report of a sweep whose every trial failed names the trials' error (it said only "no finished trials")."""
    from rlbatch.errors import UserError
    from rlbatch.study.report import report_sweep

    err = "UserError: unknown model 'tinyy': not a preset (tiny, tiny-random) nor an existing directory"
    (tmp_path / "sweep.json").write_text(json.dumps({"settings": {}, "trials": [
        {"spec": {"run_id": f"B{b}-G8-sqrt-s0", "model": "tinyy", "prompts_per_step": b // 8, "group_size": 8,
                  "lr": 5e-5, "lr_rule": "sqrt", "base_batch": 16, "base_lr": 5e-5, "samples": 512},
         "state": "failed", "error": err,
         "run_dir": f"trials/B{b}-G8-sqrt-s0"} for b in (16, 32)]}))
    with pytest.raises(UserError) as e:
        report_sweep(tmp_path, target=0.4)
    assert "2 of 2 failed (unknown model 'tinyy': not a preset" in str(e.value) and "UserError" not in str(e.value)
