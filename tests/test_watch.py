"""rlbatch watch: a run being written (a thread appends a stored run's metrics and evaluation lines) is re-read as it
grows and the prediction updates; the watched directory is never written to; one JSON object / line per update."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from _stored_sweeps import unpack
from rlbatch.watch import watch

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
    # stored run, by hand from its eval.jsonl: 0.4434 at 7168 samples, 0.4609 at 8200: crossing 0.45 at
    # 7168 + (0.45 - 0.4434) / (0.4609 - 0.4434) x 1032 = 7557 samples (31% of its 24,592): at 30% of the
    # evaluations it is predicted by the fit, by 60% it is measured
    assert views[0].source in ("fit", "open", "never") and views[-1].source == "measured"
    assert views[-1].samples_to_target == pytest.approx(7557.2, abs=0.5)
    assert views[0].samples_to_target != views[-1].samples_to_target  # the prediction updated
    assert views[-1].throughput_samples_per_s > 0 and views[-1].time_to_target_s > 0
    assert views[-1].scores and views[-1].fitted  # score vs samples with the fitted curve
    # nothing written into the watched directory: its files are exactly those the writer wrote
    assert _tree(run) == ups[-1].tree and sorted(p.name for p in run.iterdir()) == ["eval.jsonl", "metrics.jsonl",
                                                                                   "run.json"]


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
    assert ranks["B128-G8-sqrt"]["why"] == "finished: the pick"
    from rlbatch.analysis.study import Study
    from rlbatch.readers import load
    acc = Study.of(load(stored), 0.45).accounted
    assert acc["headline"]["pick"] == "B128-G8-sqrt"
    for c in ("B16-G8-sqrt", "B32-G8-sqrt", "B64-G8-sqrt", "B128-G8-fixed"):
        want = "within noise of the pick" if c in acc["headline"]["within_noise"] else next(
            r["verdict"] for r in acc["rows"] if r["run"] == c)
        assert ranks[c]["why"] == f"finished: {want}", (c, ranks[c]["why"])
    assert _tree(stored) == before
    # piped: one plain line per update
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(stored / "B16-G8-sqrt-s0"), "--once"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("update 1: B16-G8-sqrt-s0 S=24576"), r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "watch", str(tmp_path / "nope"), "--once"],
                       capture_output=True, text=True, env={"PYTHONPATH": SRC, "PATH": ""}, timeout=300)
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
