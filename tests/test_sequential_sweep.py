"""`rlbatch sweep --sequential` (issue 52: the sequential study on the sweep's backends, not only the demo): the
design's looks run the ladder's trials seed-major through the backend, the record lands in OUT/sequential.json, the
report decides as its last look did, and a second run resumes without training anything again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlbatch.errors import UserError
from rlbatch.study import run as run_mod
from rlbatch.study.ladder import build_ladder
from rlbatch.study.sequential import LOOKS


def _ladder(tmp_path: Path):
    return build_ladder(base_batch=64, base_lr=1e-5, batches=[64, 128, 256], rule="sqrt", group_sizes=[8],
                        seeds=max(LOOKS), samples=60_000, model="synthetic", task="synthetic")


def _fake_sweep(trained: list[str]):
    from rlbatch.backends.synthetic import synthetic_trial
    from rlbatch.study.manifest import TRIALS_DIR, write_manifest

    def run_sweep(specs, out, settings=None, **kw):  # the local backend's contract: run what is not finished
        for s in specs:
            d = Path(out) / TRIALS_DIR / s.run_id
            if not (d / "eval.jsonl").is_file():
                trained.append(s.run_id)
                synthetic_trial(s, d)
        write_manifest(Path(out), {"version": 1, "settings": settings or {}, "trials": [
            {"run_id": s.run_id, "spec": s, "state": "finished", "run_dir": f"{TRIALS_DIR}/{s.run_id}",
             "attempts": 1, "error": None, "seconds": 1.0} for s in specs]})
    return run_sweep


def test_sequential_sweep_runs_seed_major_looks_and_the_report_repeats_its_pick(tmp_path, monkeypatch):
    trained: list[str] = []
    monkeypatch.setattr(run_mod.local, "run_sweep", _fake_sweep(trained))
    monkeypatch.setattr(run_mod, "check_device", lambda device: None)
    out = tmp_path / "sw"
    res = run_mod.run_study(_ladder(tmp_path), backend="local", out=out, target=0.5, sequential=True,
                            progress=False)
    rec = json.loads((out / "sequential.json").read_text())
    assert res["sequential"] == rec and rec["looks"], rec["stop"]
    assert rec["runs"] == len(trained) == len(set(trained))
    # seeds are spent as the looks want them: each configuration's seeds are the first n of the ladder's, n a look
    by: dict[str, list[int]] = {}
    for rid in trained:
        cfg, s = rid.rsplit("-s", 1)
        by.setdefault(cfg, []).append(int(s))
    assert all(sorted(v) == list(range(len(v))) and len(v) in LOOKS for v in by.values()), by
    # B = 256 is far faster on the synthetic backend (20 s of generation per step whatever B): called at look 1
    assert rec["decided"] and rec["pick"].startswith("B256") and rec["faster"][rec["pick"]] == 0
    assert len(trained) == 2 * 3  # every configuration decided at the first look: 2 seeds each, nothing more
    report = json.loads((out / "report.json").read_text())
    assert report["sequential"]["pick"] == rec["pick"]
    assert report["headline"]["pick"] == rec["pick"]
    # killed and run again: the same answer, nothing trained twice
    run_mod.run_study(_ladder(tmp_path), backend="local", out=out, target=0.5, sequential=True, progress=False)
    assert len(trained) == rec["runs"]
    assert json.loads((out / "sequential.json").read_text())["pick"] == rec["pick"]


@pytest.mark.parametrize("kw, field", [({"adaptive": True}, "sequential"),
                                       ({"backend": "verl"}, "sequential")])
def test_sequential_sweep_refuses_what_it_cannot_run(tmp_path, kw, field):
    ladder = _ladder(tmp_path)
    if kw.get("backend") == "verl":
        ladder = [s.model_copy(update={"budget": "generated"}) for s in ladder]
    with pytest.raises(UserError) as e:
        run_mod.run_study(ladder, **{"backend": "local", "out": tmp_path / "sw", "target": 0.5, "sequential": True,
                                     **kw})
    assert e.value.field == field


def test_sequential_sweep_on_the_real_trainer_through_ray(tmp_path):
    # the tiny trainer as Ray tasks in 128 retained samples: B = 16 does not reach 0.3 on both seeds, so the study
    # stops at its first look with "no comparison" and the report falls back to the fixed design's accounting (and
    # says so). The local runner's path (run_sweep on a growing subset of the ladder) is the demo's, tested there.
    pytest.importorskip("torch")
    pytest.importorskip("ray")
    import os

    backend = "ray"
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    out = tmp_path / "sw"
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "sweep", "--base-batch", "16", "--base-lr", "1e-4",
                        "--batches", "16,32", "--samples", "128", "--target", "0.3", "--eval-every", "32",
                        "--eval-size", "32", "--max-new-tokens", "5", "--micro-batch-size", "8", "--sequential",
                        "--backend", backend, "--workers", "2", "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rec = json.loads((out / "sequential.json").read_text())
    trials = sorted(p.name for p in (out / "trials").iterdir())
    assert rec["runs"] == len(trials) and all(t.endswith(("-s0", "-s1")) for t in trials), trials
    assert "sequential: stopped: " in r.stdout
    md = (out / "report.md").read_text()
    assert "## Sequential study" in md and f"Stopped: {rec['stop']}" in md
