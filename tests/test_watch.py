"""rlbatch watch: a run being written (a thread appends a stored run's metrics and evaluation lines) is re-read as it
grows and the prediction updates; the watched directory is never written to; one JSON object / line per update."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from _stored_sweeps import unpack
from rlbatch.watch import snapshot, watch

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    unpack(DATA / "trials.tar.gz", root)
    return root / "trials"


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _writer(src: Path, dst: Path, pieces: list[float], started: threading.Event, go: list[threading.Event]):
    """Write the stored run into ``dst`` in pieces: up to each fraction of its evaluations, waiting for ``go[i]``."""
    metrics = src.joinpath("metrics.jsonl").read_text().splitlines()
    evals = src.joinpath("eval.jsonl").read_text().splitlines()
    dst.mkdir(parents=True)
    (dst / ".lock").write_text(str(os.getpid()))  # as a trainer holds its run directory (this process is alive)
    (dst / "run.json").write_text((src / "run.json").read_text().replace('"finished"', '"running"'))
    done_m = done_e = 0
    for i, f in enumerate(pieces):
        upto = json.loads(evals[int(f * (len(evals) - 1))])["samples/retained"]
        with open(dst / "metrics.jsonl", "a") as fm, open(dst / "eval.jsonl", "a") as fe:
            while done_m < len(metrics) and json.loads(metrics[done_m])["samples/retained"] <= upto:
                fm.write(metrics[done_m] + "\n")
                done_m += 1
            while done_e < len(evals) and json.loads(evals[done_e])["samples/retained"] <= upto:
                fe.write(evals[done_e] + "\n")
                done_e += 1
        if i == 0:
            started.set()
        if i + 1 < len(pieces):
            go[i].wait(60)


def test_watch_follows_a_run_being_written(stored, tmp_path):
    run = tmp_path / "B32-G8-sqrt-s0"
    pieces = [0.3, 0.45, 0.6]
    started, go = threading.Event(), [threading.Event() for _ in pieces]
    th = threading.Thread(target=_writer, args=(stored / "B32-G8-sqrt-s0", run, pieces, started, go), daemon=True)
    th.start()
    assert started.wait(30)
    seen = []

    def emit(up):
        seen.append(up)
        before = _tree(run)
        seen[-1].tree = before
        if len(seen) < len(pieces):
            go[len(seen) - 1].set()  # the next piece of the run is written after this update

    ups = watch(run, target=0.45, interval=0.1, max_updates=len(pieces), n_boot=30, emit=emit)
    th.join(30)
    assert len(ups) == 3
    views = [u.configs[0] for u in ups]
    # the view grows with the run: more samples and evaluations at every update
    assert views[0].samples < views[1].samples < views[2].samples
    assert views[0].eval_points < views[1].eval_points < views[2].eval_points
    # stored run, from its eval.jsonl: the score hovers around 0.45 from 7,168 samples (0.4434) to 11,272 (0.4277),
    # first above it at 8,200 (0.4609); the accounting's crossing (the local fit over those evaluations, not the
    # first one above) lies in that stretch: at 30% of the evaluations it is predicted by the fit, by 60% measured
    assert views[0].source in ("fit", "open", "never") and views[-1].source == "measured"
    assert 7168 < views[-1].samples_to_target < 11272
    assert views[0].samples_to_target != views[-1].samples_to_target  # the prediction updated
    assert views[-1].throughput_samples_per_s > 0 and views[-1].time_to_target_s > 0
    # score vs samples; the fitted curve only while predicted: once measured, the accounting's crossing and no curve
    # fit (researcher finding 10: watch fitted every configuration, 9x analyze's time on a finished sweep)
    assert views[-1].scores and not views[-1].fitted
    assert views[0].fitted or views[0].source != "fit"
    # nothing written into the watched directory: its files are exactly those the writer wrote
    assert _tree(run) == ups[-1].tree and sorted(p.name for p in run.iterdir()) == [".lock", "eval.jsonl",
                                                                                   "metrics.jsonl", "run.json"]


def test_watch_cli_json_once_on_a_sweep_leaves_it_unchanged(stored, tmp_path):
    before = _tree(stored)
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(stored), "--target", "0.45", "--once",
                        "--format", "json"], capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""},
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    (line,) = r.stdout.strip().splitlines()
    up = json.loads(line)
    assert up["update"] == 1 and up["target"] == 0.45
    # analyze on the stored sweep: B128-G8-sqrt is the fastest to 0.45 (relative time 0.44)
    assert up["recommended"] == "B128-G8-sqrt"
    ranks = {r["config"]: r for r in up["ranking"]}
    # the finished sweep: nothing is left to stop (issue 37 item 7: watch said "would stop: cannot win" where the
    # report said "within noise of the pick"); each configuration shows the report's verdict, one rule, one answer
    assert not any(r["would_stop"] for r in up["ranking"])
    assert ranks["B128-G8-sqrt"]["why"] == "finished: faster (the pick)"  # the accounting's verdict, then its place
    from rlbatch.analysis.study import Study
    from rlbatch.readers import load
    acc = Study.of(load(stored), 0.45).accounted
    assert acc["headline"]["pick"] == "B128-G8-sqrt"
    for c in ("B16-G8-sqrt", "B32-G8-sqrt", "B64-G8-sqrt", "B128-G8-fixed"):
        verdict = next(r["verdict"] for r in acc["rows"] if r["run"] == c)
        want = f"{verdict} (may be the fastest too)" if c in acc["headline"]["within_noise"] else verdict
        assert ranks[c]["why"] == f"finished: {want}", (c, ranks[c]["why"])
    assert _tree(stored) == before
    # piped: one plain line per update
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(stored / "B16-G8-sqrt-s0"), "--once"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
    legend, first = r.stdout.splitlines()[:2]
    assert r.returncode == 0 and first.startswith("update 1: B16-G8-sqrt-s0 S=24576"), r.stderr[-2000:]
    assert legend.startswith("watch: S = retained samples so far") and "S*" not in legend  # no target: no S*, T*
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(tmp_path / "nope"), "--once"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_watch_shows_what_the_adaptive_loop_stopped_and_why(stored, tmp_path):
    """Issue 36 item 3: on an adaptive sweep, watch shows the configurations the loop ended (its adaptive.json,
    rewritten after every re-plan) with the loop's own outcome and reason, live, not the watcher's guess."""
    sweep = tmp_path / "sw"
    trials = sweep / "trials"
    trials.mkdir(parents=True)
    for name in ("B16-G8-sqrt-s0", "B32-G8-sqrt-s0", "B64-G8-sqrt-s0"):
        (trials / name).mkdir()
        for f in ("run.json", "metrics.jsonl", "eval.jsonl"):
            (trials / name / f).write_bytes((stored / name / f).read_bytes())
    # B64 still running; the loop has stopped B32 (its record, as decide() writes it while the sweep runs)
    (trials / "B64-G8-sqrt-s0" / "run.json").write_text(
        (stored / "B64-G8-sqrt-s0" / "run.json").read_text().replace('"finished"', '"running"'))
    (trials / "B64-G8-sqrt-s0" / ".lock").write_text(str(os.getpid()))  # its trainer lives (this process)
    why = "lost the race: 9.8 s on its clock without reaching the target, is more than the best measured"
    loop = {"stopped_because": "running", "trials": [
        {"run_id": "B16-G8-sqrt-s0", "config": "B16-G8-sqrt", "state": "active", "decided_by": "active"},
        {"run_id": "B32-G8-sqrt-s0", "config": "B32-G8-sqrt", "state": "cannot win", "decided_by": why},
        {"run_id": "B64-G8-sqrt-s0", "config": "B64-G8-sqrt", "state": "active", "decided_by": "active"}]}
    (sweep / "adaptive.json").write_text(json.dumps(loop))
    for path in (sweep, trials):  # the sweep's directory or its trials/
        r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(path), "--target", "0.45", "--once",
                            "--format", "json"], capture_output=True, text=True,
                           env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        up = json.loads(r.stdout)
        # (one seed each: the study names a configuration by its run)
        assert up["stopped"] == {"B32-G8-sqrt-s0": f"cannot win: {why}"}
        ranks = {x["config"]: x for x in up["ranking"]}
        assert ranks["B32-G8-sqrt-s0"]["why"] == f"ended by the adaptive loop, cannot win: {why}"
        assert not ranks["B32-G8-sqrt-s0"]["would_stop"]
        assert up["finished"] is False  # B64 is still running
    # piped: one line per configuration (and one with the best), the stopped one with the loop's reason
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(sweep), "--target", "0.45", "--once"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
    legend, *lines = r.stdout.strip().splitlines()
    # the short names explained once, before the first update (newcomer finding 9)
    assert legend.startswith("watch: S = retained samples so far") and "T* = time-to-target" in legend
    assert [ln.split()[2] for ln in lines[:3]] == ["B16-G8-sqrt-s0", "B32-G8-sqrt-s0", "B64-G8-sqrt-s0"], lines
    assert lines[1].endswith(f"| cannot win: {why}") and lines[3].startswith("update 1: best ")
    # then what would decide (issue 52): one seed each, so how to measure a spread
    assert lines[4].startswith("update 1: No seed-to-seed spread to judge or plan by")


def test_watch_ends_on_a_finished_sweep_and_counts_checks_without_change(stored, tmp_path):
    """Issue 38 item 2: on a finished sweep watch exits by itself; --max-updates counts checks, also those that
    find no new line (a foreign log does not say it finished)."""
    import time

    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(stored), "--target", "0.45"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "update 1: best B128-G8-sqrt (finished)"
    log = tmp_path / "train.jsonl"  # a verl file-logger log: it never says it finished
    log.write_text("".join(json.dumps({"step": i, "data": {"critic/score/mean": 0.1 * i}}) + "\n"
                           for i in range(1, 6)))
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(log), "--max-updates", "2",
                        "--interval", "0.5", "--prompts-per-step", "4", "--group-size", "2"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.strip().splitlines()
    assert len(out) == 2 and out[0].startswith("watch: S = ")  # the legend, then one update: the log did not change
    assert time.monotonic() - t0 < 120


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", *map(str, args)], capture_output=True,
                          text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=timeout)


def _sweep(stored: Path, out: Path, states: dict[str, str]) -> Path:
    """A local sweep directory of two stored trials, with the given trial states in its sweep.json."""
    (out / "trials").mkdir(parents=True)
    trials = []
    for name, state in states.items():
        shutil.copytree(stored / name, out / "trials" / name)
        if state != "finished":
            meta = json.loads((out / "trials" / name / "run.json").read_text())
            meta["status"] = "running"
            (out / "trials" / name / "run.json").write_text(json.dumps(meta))
        trials.append({"run_id": name, "state": state, "run_dir": f"trials/{name}"})
    (out / "sweep.json").write_text(json.dumps({"version": 1, "backend": "local", "trials": trials}))
    return out


def test_watch_ends_on_an_interrupted_sweep_with_a_note(stored, tmp_path):
    """Issue 46 (newcomer finding 6): a sweep stopped by Ctrl-C (trials left running/pending, no process holding
    the sweep's or a run's lock) ends the watch with one line saying so, instead of waiting forever."""
    out = _sweep(stored, tmp_path / "sw", {"B32-G8-sqrt-s0": "finished", "B64-G8-sqrt-s0": "running"})
    r = _cli(out, "--target", "0.45", "--interval", "0.5", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == (
        f"update 1: no trial is running: the sweep in {out} was interrupted (1 of 2 trials finished); rerun the "
        "same command to resume it")
    # while the sweep process lives (its lock names a live pid) the same files are a sweep in progress
    (out / ".lock").write_text(str(os.getpid()))
    up = snapshot(out, target=0.45)
    assert not up.finished and (up.note is None or "interrupted" not in up.note)
    # a single run directory left "running" by a killed trainer
    (out / ".lock").unlink()
    up = snapshot(out / "trials" / "B64-G8-sqrt-s0", target=0.45)
    assert up.finished and "B64-G8-sqrt-s0 stopped before finishing" in up.note and "--resume" in up.note


def test_watch_refuses_unrelated_files_and_waits_on_an_empty_directory(tmp_path):
    """Issue 46 (newcomer finding 7): a directory of files no reader knows is the error analyze gives (exit 2);
    an empty directory is a wait, and says so."""
    junk = tmp_path / "unrelated"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello\n")
    r = _cli(junk, "--target", "0.5", "--interval", "0.5", timeout=600)
    assert r.returncode == 2 and "nothing usable read from" in r.stderr and "Traceback" not in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    up = snapshot(empty, target=0.5)
    assert not up.finished and up.note.startswith("waiting for a training log to appear (Ctrl-C to stop)")


def test_watch_names_missing_p_and_g_of_a_foreign_log(tmp_path):
    """Issue 46 (newcomer finding 15): a verl log without P and G says which options are missing."""
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": i, "data": {"critic/score/mean": 0.1 * i}}) + "\n"
                           for i in range(1, 6)))
    r = _cli(log, "--target", "0.35", "--once")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "--group-size and --prompts-per-step missing" in r.stdout
    r = _cli(log, "--target", "0.35", "--once", "--prompts-per-step", "4", "--group-size", "2")
    assert "missing" not in r.stdout
