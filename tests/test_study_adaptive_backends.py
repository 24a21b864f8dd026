"""`rlbatch sweep --adaptive` on the trainer backends (local, Ray, TRL) on the tiny preset at small budgets: each
finishes with the same decisions format in OUT/adaptive.json (the loop of rlbatch.study.adaptive.decide)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

SRC = str(Path(__file__).resolve().parents[1] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
ARGS = ["--base-batch", "16", "--base-lr", "1e-4", "--batches", "16,32", "--samples", "128", "--target", "0.3",
        "--eval-every", "32", "--eval-size", "32", "--max-new-tokens", "5", "--micro-batch-size", "8",
        "--chunk-samples", "64", "--adaptive", "--format", "json"]
OUTCOMES = {"reached", "never reaches", "cannot win", "decided", "budget", "skipped"}


def sweep(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", "sweep", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=timeout)


def check_record(out: Path, backend: str) -> dict:
    rec = json.loads((out / "adaptive.json").read_text())
    assert rec["version"] == 1 and rec["backend"] == backend and rec["target"] == 0.3
    assert [t["batch_size"] for t in rec["trials"]] == [16, 32]
    assert {t["state"] for t in rec["trials"]} <= OUTCOMES
    for t in rec["trials"]:  # every trial's samples are those of its run directory; none past the budget
        m = [json.loads(x) for x in (out / "trials" / t["run_id"] / "metrics.jsonl").read_text().splitlines()]
        assert t["samples"] == m[-1]["samples/retained"] <= 128 + t["batch_size"]
        assert [x["step"] for x in m] == list(range(1, len(m) + 1))  # chunks resumed without repeating a step
    acts = [d["action"] for d in rec["decisions"]]
    assert acts.count("start") == 2 and acts.count("stop") + acts.count("skip") == 2
    for d in rec["decisions"]:
        assert set(d) == {"event", "action", "config", "run_ids", "reason", "outcome", "samples", "evidence"}
    assert rec["samples_spent"] == sum(t["samples"] for t in rec["trials"])
    return rec


def test_adaptive_local(tmp_path):
    # --max-active 1: one configuration at a time, B = 32 starts only once B = 16 is decided
    r = sweep(*ARGS, "--backend", "local", "--max-active", "1", "--out", tmp_path / "sw")
    assert r.returncode == 0, r.stderr[-3000:]
    rec = check_record(tmp_path / "sw", "local")
    acts = [(d["action"], d["config"]) for d in rec["decisions"] if d["action"] in ("start", "stop")]
    assert acts[:3] == [("start", "B16-G8-sqrt"), ("stop", "B16-G8-sqrt"), ("start", "B32-G8-sqrt")], acts
    assert json.loads(r.stdout)["adaptive"]["recommended"] == rec["recommended"] if "adaptive" in r.stdout else True
    assert "## Adaptive sweep" in (tmp_path / "sw" / "report.md").read_text()


def test_adaptive_trl(tmp_path):
    pytest.importorskip("trl", reason="trl is not installed (pip install 'rlbatch[trl]')")
    r = sweep(*ARGS, "--backend", "trl", "--out", tmp_path / "sw")
    assert r.returncode == 0, r.stderr[-3000:]
    rec = check_record(tmp_path / "sw", "trl")
    for t in rec["trials"]:
        assert json.loads((tmp_path / "sw" / "trials" / t["run_id"] / "run.json").read_text())["backend"] == "trl"


def test_adaptive_ray(tmp_path):
    if not os.environ.get("CI"):
        pytest.importorskip("ray")
    r = sweep(*ARGS, "--backend", "ray", "--out", tmp_path / "sw", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    check_record(tmp_path / "sw", "ray")
