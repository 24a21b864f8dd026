"""The Ray backend: 3 trials on a local Ray instance with 2 CPUs, one trial's worker killed mid-run; the sweep must
finish with all trials complete and every metrics step present exactly once."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

if os.environ.get("CI"):
    import ray  # CI installs the dev extra, which includes ray: the test must run there
else:
    ray = pytest.importorskip("ray")

from rlbatch.errors import UserError  # noqa: E402
from rlbatch.runstore import read_jsonl, read_meta  # noqa: E402
from rlbatch.backends.ray import run_sweep_ray  # noqa: E402
from rlbatch.study.manifest import read_manifest_json  # noqa: E402
from rlbatch.study.ladder import build_ladder  # noqa: E402

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
from _fake_trial import fake_trial  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    # Ray workers inherit the driver's environment: make src/ and tests/ (the fake trial) importable there.
    src = str(TESTS.parent / "src")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (src, str(TESTS), old) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 1024 * 1024)
    yield
    ray.shutdown()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def _trials(kill_run: str | None = None, kill_at: int = 4):
    # B0=16, lr0=1e-3, G=4; a 96-sample budget -> 6, 3 and 2 steps at B = 16, 32, 48
    trials = [t.row() for t in build_ladder(base_batch=16, base_lr=1e-3, batches=[16, 32, 48], group_sizes=[4],
                                            samples=96)]
    for t in trials:
        t["sleep_s"] = 0.05
    if kill_run:
        next(t for t in trials if t["run_id"] == kill_run)["kill_at_step"] = kill_at
    return trials


def test_sweep_survives_a_killed_worker(local_ray, tmp_path):
    trials = _trials(kill_run="B16-G4-sqrt-s0", kill_at=4)
    assert [t["steps"] for t in trials] == [6, 3, 2]
    manifest = run_sweep_ray(trials, tmp_path, trial_fn=fake_trial, cpus_per_trial=1, max_retries=2, log=None)

    states = {e["run_id"]: (e["state"], e["attempts"]) for e in manifest["trials"]}
    assert states == {"B16-G4-sqrt-s0": ("finished", 2), "B32-G4-sqrt-s0": ("finished", 1),
                      "B48-G4-sqrt-s0": ("finished", 1)}
    # the kill really happened: the marker holds the pid of the killed worker, and steps after it ran elsewhere
    killed_pid = int((tmp_path / "trials" / "B16-G4-sqrt-s0" / "killed.marker").read_text())
    for t in trials:
        rows = read_jsonl(tmp_path / "trials" / t["run_id"] / "metrics.jsonl")
        assert [r["step"] for r in rows] == list(range(1, t["steps"] + 1))  # nothing lost, nothing duplicated
        assert [r["samples/retained"] for r in rows] == [s * t["batch_size"] for s in range(1, t["steps"] + 1)]
        assert read_meta(tmp_path / "trials" / t["run_id"]).status == "finished"
    rows = read_jsonl(tmp_path / "trials" / "B16-G4-sqrt-s0" / "metrics.jsonl")
    assert [r["pid"] == killed_pid for r in rows] == [True, True, True, False, False, False]
    # the manifest on disk says the same
    on_disk = {e["run_id"]: e["state"] for e in read_manifest_json(tmp_path)["trials"]}
    assert set(on_disk.values()) == {"finished"}

    # a re-run resumes: nothing left to do, no trial runs again
    again = run_sweep_ray(trials, tmp_path, trial_fn=fake_trial, log=None)
    assert {e["run_id"]: e["attempts"] for e in again["trials"]} == {k: v[1] for k, v in states.items()}


def test_failures_are_bounded_and_reported(local_ray, tmp_path):
    trials = _trials()[:1]
    trials[0]["steps"] = "not a number"  # the trial raises ValueError on every attempt
    manifest = run_sweep_ray(trials, tmp_path, trial_fn=fake_trial, max_retries=1, log=None)
    (entry,) = manifest["trials"]
    assert entry["state"] == "failed" and entry["attempts"] == 2
    assert "ValueError" in entry["error"]
    assert json.loads((tmp_path / "sweep.json").read_text())["trials"][0]["state"] == "failed"


def test_duplicate_run_ids_rejected(tmp_path):
    t = _trials()[:1]
    with pytest.raises(UserError, match="run id"):
        run_sweep_ray(t + t, tmp_path, trial_fn=fake_trial, log=None)


def test_starts_and_stops_its_own_local_ray(tmp_path):
    """Without --address and with no Ray running in the process, a local instance is started with num_cpus and shut
    down at the end (run in a subprocess so the module's Ray instance is not involved)."""
    import subprocess

    code = (
        "import sys, ray; sys.path.insert(0, %r)\n"
        "from _fake_trial import fake_trial\n"
        "from rlbatch.backends.ray import run_sweep_ray\n"
        "from rlbatch.study.ladder import build_ladder\n"
        "m = run_sweep_ray([t.row() for t in build_ladder(base_batch=8, base_lr=1e-3, batches=[8], group_sizes=[4], samples=16)], %r, trial_fn=fake_trial, num_cpus=1, log=None)\n"
        "assert [e['state'] for e in m['trials']] == ['finished'], m\n"
        "assert not ray.is_initialized()\n"
        "print('ok')\n" % (str(TESTS), str(tmp_path)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
    assert [x["step"] for x in read_jsonl(tmp_path / "trials" / "B8-G4-sqrt-s0" / "metrics.jsonl")] == [1, 2]


def test_local_and_ray_share_the_manifest(local_ray, tmp_path, monkeypatch):
    """A sweep started locally resumes on Ray (the finished trial is skipped, the other runs with the real trainer
    on a Ray worker) and back locally (nothing reruns); both write one sweep.json and end with the same report."""
    pytest.importorskip("torch")
    from rlbatch.backends import local
    from rlbatch.backends.local import run_sweep
    from rlbatch.study.report import report_sweep

    opts = dict(max_steps=2, max_new_tokens=3, eval_every=16, eval_size=16, micro_batch_size=4, checkpoint_every=1)
    specs = build_ladder(base_batch=8, base_lr=1e-3, batches=[16], rule="sqrt", group_sizes=[4], samples=10_000,
                        model="tiny-random", options=opts)
    run_sweep(specs[:1], tmp_path, progress=False, settings={"workers": 1})  # local: the first trial only
    first = (tmp_path / "trials" / "B8-G4-sqrt-s0" / "metrics.jsonl").read_text()
    m = run_sweep_ray([s.model_dump(mode="json") for s in specs], tmp_path, log=None)
    assert {e["run_id"]: (e["state"], e["attempts"]) for e in m["trials"]} == {
        "B8-G4-sqrt-s0": ("finished", 1), "B16-G4-sqrt-s0": ("finished", 1)}
    assert m["settings"] == {"workers": 1} and m["backend"] == "ray"
    assert (tmp_path / "trials" / "B8-G4-sqrt-s0" / "metrics.jsonl").read_text() == first
    assert read_meta(tmp_path / "trials" / "B16-G4-sqrt-s0").status == "finished"
    rep_ray = report_sweep(tmp_path, target=None)

    calls = []
    monkeypatch.setattr(local, "run_trial", lambda spec, run_dir: calls.append(spec.run_id))
    man = run_sweep(specs, tmp_path, progress=False)  # back to local: everything is finished
    assert calls == [] and [t["state"] for t in man["trials"]] == ["finished", "finished"]
    rep_local = report_sweep(tmp_path, target=None)
    assert rep_local["runs"] == rep_ray["runs"] and len(rep_local["runs"]) == 2
