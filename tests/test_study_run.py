"""``rlbatch sweep --backend ...``: the framework backends go through the launcher (same commands as rlbatch launch),
options that do not apply to a backend are one-line errors, and the report of a sweep directory is the report of
``rlbatch analyze`` on it (one code path)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")


def sweep(*args):
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", "sweep", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=600)


BASE = ["--base-batch", "512", "--base-lr", "1e-6", "--batches", "512,1024", "--group-sizes", "8"]
GEN = ["--generated-samples", "100000"]  # launch backends: a budget of generated responses
RET = ["--samples", "100000"]  # local / ray: retained responses


def test_sweep_backend_verl_dry_run_and_json(tmp_path):
    r = sweep(*BASE, *GEN, "--out", tmp_path, "--backend", "verl", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "actor_rollout_ref.actor.optim.lr=1.4142135623730952e-06" in r.stdout and "data.train_batch_size=64" in r.stdout
    assert not (tmp_path / "launch.sh").exists()
    r = sweep(*BASE, *GEN, "--out", tmp_path, "--backend", "openrlhf", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert [t["steps"] for t in json.loads(r.stdout)["trials"]] == [196, 98] and (tmp_path / "launch.sh").exists()


@pytest.mark.parametrize("extra, message", [
    (["--backend", "slurm", *RET], "unknown backend 'slurm'"),
    (["--backend", "local", "--dry-run", "--target", "0.5", *RET], "--dry-run applies to --backend verl"),
    (["--backend", "verl", "--adaptive", "--dry-run", "--target", "0.5", *GEN], "--adaptive"),
    (["--backend", "verl", "--group-sizes", "4,8", *GEN], "one group size"),
    (["--backend", "local", *RET], "--target is required"),
    (["--backend", "verl", *RET], "--samples counts retained responses, which verl cannot stop at"),
    (["--backend", "trl", "--dry-run"], "needs --generated-samples"),
    (["--backend", "trl", "--target", "0.5", *GEN], "--backend trl trains to --samples retained responses"),
    (["--backend", "local", "--target", "0.5", *GEN], "--generated-samples applies to launched studies"),
    (["--backend", "local", "--target", "0.5"], "--samples N (retained responses per trial) is required"),
    (["--backend", "local", "--target", "0.5", "--max-active", "2", *RET], "--max-active applies to --adaptive"),
    (["--backend", "local", "--target", "0.5", "--chunk-samples", "64", *RET],
     "--chunk-samples applies to --adaptive"),
])
def test_sweep_backend_errors(tmp_path, extra, message):
    args = [a for a in BASE if a != "8"] if "--group-sizes" in extra else BASE
    if "--group-sizes" in extra:
        args = [a for a in args if a != "--group-sizes"]
    r = sweep(*args, "--out", tmp_path / "s", *extra)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_sweep_report_is_the_analyze_report(tmp_path):
    """Two seeds per configuration (synthetic trials): the sweep's report and rlbatch analyze on the sweep directory
    hold the same accounting, seed table, noise fit and plan; curves are seed-averaged with bands."""
    from rlbatch.analyze import analyze
    from rlbatch.study.ladder import TrialSpec
    from rlbatch.study.manifest import write_manifest
    from rlbatch.study.report import report_sweep
    from rlbatch.backends.synthetic import synthetic_trial

    trials = []
    for b in (16, 32, 64):
        for s in (0, 1):
            spec = TrialSpec(run_id=f"B{b}-G8-sqrt-s{s}", prompts_per_step=b // 8, group_size=8,
                             lr=1e-4 * (b / 16) ** 0.5, lr_rule="sqrt", base_batch=16, base_lr=1e-4, samples=6000,
                             seed=s)
            synthetic_trial({**spec.model_dump(), "batch_size": b}, tmp_path / "trials" / spec.run_id)
            trials.append({"run_id": spec.run_id, "spec": spec, "state": "finished",
                           "run_dir": f"trials/{spec.run_id}", "attempts": 1, "error": None, "seconds": 1.0})
    write_manifest(tmp_path, {"version": 1, "backend": "local", "settings": {"workers": 1}, "trials": trials})
    rep = report_sweep(tmp_path, target=0.5)
    ana = analyze([tmp_path], target=0.5, out=tmp_path / "analyze")
    for key in ("accounting", "reference", "recommendation", "seeds", "configurations"):
        assert rep[key] == ana[key], key
    assert [r["run"] for r in rep["accounting"]] == ["B16-G8-sqrt", "B32-G8-sqrt", "B64-G8-sqrt"]
    assert len(rep["runs"]) == 6 and [s["seeds"] for s in rep["seeds"]] == [2, 2, 2]
    assert rep["noise"]["actor"]["slope"] == pytest.approx(ana["noise"]["actor"]["slope"])
    assert rep["plan"]["recommended"] == ana["plan"]["recommended"]
    md = (tmp_path / "report.md").read_text()
    for head in ("## Recommendation", "### Accounting", "## Configurations", "## Gradient noise", "## Throughput",
                 "## Plan: align, then accelerate", "## How the sweep was run"):
        assert head in md, head
    assert "shaded: range across seeds" in md


def test_adaptive_wiring_writes_record_and_report(tmp_path, monkeypatch):
    """--adaptive: the decision loop with the local trial runner (here the synthetic trial), trials in OUT/trials,
    the record in OUT/adaptive.json and the report with the adaptive section and the plan."""
    from rlbatch.backends import local
    from rlbatch.study.ladder import build_ladder
    from rlbatch.study.run import run_study
    from rlbatch.backends.synthetic import synthetic_trial

    monkeypatch.setattr(local, "run_trial", synthetic_trial)
    monkeypatch.setattr(local, "prepare_here", lambda model: None)
    ladder = build_ladder(base_batch=128, base_lr=1e-6, batches=[128, 512, 2048, 8192], rule="sqrt", group_sizes=[8],
                          seeds=1, samples=400_000)
    res = run_study(ladder, backend="local", adaptive=True, out=tmp_path, target=0.7, progress=False,
                    adaptive_options={"n_boot": 50})
    rec = res["adaptive"]
    assert res["kind"] == "adaptive" and rec["backend"] == "local"
    assert [t["batch_size"] for t in rec["trials"]] == [128, 512, 2048, 8192]
    # by hand (rlbatch.backends.synthetic): T(B) ~ (1 + B/2048)(20/B + 0.01): 2048 is the fastest of the ladder
    assert rec["recommended_batch_size"] == 2048
    assert rec["samples_spent"] < 4 * 400_000
    assert {d["action"] for d in rec["decisions"]} >= {"start", "stop"}
    assert json.loads((tmp_path / "adaptive.json").read_text())["recommended"] == rec["recommended"]
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == sorted(t["run_id"] for t in rec["trials"]
                                                                             if t["state"] != "skipped")
    assert res["report"]["adaptive"]["stopped_because"] == rec["stopped_because"]
    assert "## Adaptive sweep" in (tmp_path / "report.md").read_text()


def test_adaptive_max_active_climbs_the_ladder(tmp_path, monkeypatch):
    """--adaptive --max-active 2 on the synthetic trial (known answer: B = 2048 fastest of 128 ... 8192): never
    more than two configurations running; B = 128 and 512 start first, the next one only when a slot frees; the pick
    is the same as with all launched together."""
    from rlbatch.backends import local
    from rlbatch.study.ladder import build_ladder
    from rlbatch.study.run import run_study
    from rlbatch.backends.synthetic import synthetic_trial

    monkeypatch.setattr(local, "run_trial", synthetic_trial)
    monkeypatch.setattr(local, "prepare_here", lambda model: None)
    ladder = build_ladder(base_batch=128, base_lr=1e-6, batches=[128, 512, 2048, 8192], rule="sqrt", group_sizes=[8],
                          seeds=1, samples=400_000)
    rec = run_study(ladder, backend="local", adaptive=True, out=tmp_path, target=0.7, progress=False,
                    adaptive_options={"n_boot": 50, "max_active": 2})["adaptive"]
    running, most = set(), 0
    for d in rec["decisions"]:
        if d["action"] == "start":
            running.add(d["config"])
        elif d["action"] in ("stop", "skip"):
            running.discard(d["config"])
        most = max(most, len(running))
    assert most == 2
    starts = [d["config"] for d in rec["decisions"] if d["action"] == "start"]
    assert starts[:2] == ["B128-G8-sqrt", "B512-G8-sqrt"]
    assert rec["recommended_batch_size"] == 2048
