"""Faults: kill -9 at each named point of training (a subprocess per case, killed by RLBATCH_FAULT), then resume:
metrics and evaluations identical to an uninterrupted run (timing aside), no line lost or duplicated, no half-written
checkpoint; the same for a sweep killed mid-trial. NaN/Inf stops the run (exit 2, run.json failed, last good
checkpoint kept); a full disk or an unwritable directory gives one clear error and loses nothing already written.
Longer random-kill soak: benchmarks/fault_soak.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _fault_run as fr  # noqa: E402

from _cli import run_in_process  # noqa: E402
from rlbatch.errors import UserError  # noqa: E402
from rlbatch.runstore import TIME_KEYS  # noqa: E402

HELPER = Path(fr.__file__)
SRC = Path(__file__).resolve().parents[1] / "src"


def lines(path: Path) -> list[dict]:
    text = path.read_text() if path.exists() else ""
    assert text == "" or text.endswith("\n")
    return [json.loads(x) for x in text.splitlines()]


def strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIME_KEYS} for r in rows]


def same_run(a: Path, b: Path) -> None:
    ma, mb = lines(a / "metrics.jsonl"), lines(b / "metrics.jsonl")
    assert [r["step"] for r in mb] == list(range(1, len(mb) + 1))  # none lost, none duplicated
    assert strip(ma) == strip(mb)
    assert strip(lines(a / "eval.jsonl")) == strip(lines(b / "eval.jsonl"))
    assert json.loads((b / "run.json").read_text())["status"] == "finished"
    assert not list(b.glob(".*.tmp"))  # temp files of killed writers are cleaned up


def ckpt_step(run: Path) -> int:
    return torch.load(run / "checkpoint.pt", weights_only=False)["state"]["step"]


def killed(kind: str, out: Path, fault: str) -> None:
    env = {**os.environ, "RLBATCH_FAULT": fault, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(HELPER), kind, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == -9, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    return fr.run_train(tmp_path_factory.mktemp("ref") / "run")


# fault, checkpoint step on disk after the kill (checkpoint every 2 steps), what the kill left behind
@pytest.mark.parametrize("fault, at, left", [
    ("gen:3:2", 2, None),           # generation of step 3, before its 2nd token
    ("update:4:2", 2, None),        # update of step 4, after the backward pass of micro-batch 2
    ("metrics:4", 2, "metrics"),    # half of step 4's metrics line on disk
    ("eval:0", None, "eval"),       # half of the initial (step 0) eval line on disk, before the first checkpoint
    ("ckpt_write:4", 2, "ckpt"),    # part of step 4's checkpoint written to the temp file
])
def test_kill_then_resume_is_identical(ref, tmp_path, fault, at, left):
    out = tmp_path / "run"
    killed("train", out, fault)
    if at is None:
        assert not (out / "checkpoint.pt").exists()
    else:
        assert ckpt_step(out) == at  # the previous checkpoint is intact and loadable
    if left == "metrics":
        assert not (out / "metrics.jsonl").read_text().endswith("\n")
    if left == "eval":
        assert not (out / "eval.jsonl").read_text().endswith("\n")
    if left == "ckpt":
        assert (out / ".checkpoint.pt.tmp").stat().st_size > 0
    with pytest.raises(UserError, match="--resume"):
        fr.run_train(out)  # an existing run is not overwritten by accident
    fr.run_train(out, resume=True)
    same_run(ref, out)
    assert ckpt_step(out) == 6


def test_kill_between_mini_batch_updates_then_resume_is_identical(tmp_path):
    """Mini-batches and two epochs per rollout (``fr.TRAIN_MB``): killed in step 4 after some of its optimizer
    updates were applied (the 5th backward pass), the resumed run restarts step 4 from the step-2 checkpoint."""
    ref = fr.run_train(tmp_path / "ref", mini_batches=True)
    assert max(r.get("train/updates", 0) for r in lines(ref / "metrics.jsonl")) >= 2
    out = tmp_path / "run"
    killed("train-mb", out, "update:4:5")
    assert ckpt_step(out) == 2
    fr.run_train(out, resume=True, mini_batches=True)
    same_run(ref, out)


def test_sweep_killed_mid_trial_resumes_identically(tmp_path, monkeypatch):
    from rlbatch.backends import local

    full = tmp_path / "full"
    fr.run_sweep(full)
    out = tmp_path / "killed"
    killed("sweep", out, "update:3@B8-G4-sqrt-s0")  # the second trial, during its 3rd update
    man = json.loads((out / "sweep.json").read_text())
    assert [t["state"] for t in man["trials"]] == ["finished", "running"]
    first = (out / "trials" / "B4-G4-sqrt-s0" / "metrics.jsonl").read_bytes()
    calls = []
    real = local.run_trial
    monkeypatch.setattr(local, "run_trial", lambda spec, d: calls.append(spec.run_id) or real(spec, d))
    fr.run_sweep(out)
    assert calls == ["B8-G4-sqrt-s0"]  # the finished trial is not rerun
    assert (out / "trials" / "B4-G4-sqrt-s0" / "metrics.jsonl").read_bytes() == first
    for run_id in ("B4-G4-sqrt-s0", "B8-G4-sqrt-s0"):
        same_run(full / "trials" / run_id, out / "trials" / run_id)
    assert [t["state"] for t in json.loads((out / "sweep.json").read_text())["trials"]] == ["finished", "finished"]


# --------------------------------------------------------------------------------------------------- errors
def run_cli(monkeypatch, capsys, out: Path, fault: str | None):
    import rlbatch.train.tasks as tasks

    monkeypatch.setattr(tasks, "get_task", fr.coin_task)
    if fault:
        monkeypatch.setenv("RLBATCH_FAULT", fault)
    else:
        monkeypatch.delenv("RLBATCH_FAULT", raising=False)
    c = fr.TRAIN
    code, _, err = run_in_process(
        monkeypatch, capsys, "train", "--model", c["model"], "--task", "coin", "-P", c["prompts_per_step"],
        "-G", c["group_size"], "--lr", c["lr"], "--max-steps", c["max_steps"], "--max-new-tokens", c["max_new_tokens"],
        "--eval-every", c["eval_every"], "--eval-size", c["eval_size"], "--checkpoint-every", c["checkpoint_every"],
        "--micro-batch-size", c["micro_batch_size"], "--out", out, "--format", "json")
    return code, err


@pytest.mark.parametrize("fault, why", [("nan_loss:3", "non-finite loss (nan)"),
                                        ("inf_grad:3", "non-finite gradient norm")])
def test_nan_or_inf_stops_with_last_good_checkpoint(ref, tmp_path, monkeypatch, capsys, fault, why):
    out = tmp_path / "run"
    code, err = run_cli(monkeypatch, capsys, out, fault)
    assert code == 2 and len(err.splitlines()) == 1
    assert "training diverged at step 3" in err and why in err and "checkpoint (step 2) is kept" in err
    meta = json.loads((out / "run.json").read_text())
    assert meta["status"] == "failed" and "diverged at step 3" in meta["stop_reason"] and why in meta["stop_reason"]
    assert [r["step"] for r in lines(out / "metrics.jsonl")] == [1, 2]  # the bad step is not logged
    assert strip(lines(out / "metrics.jsonl")) == strip(lines(ref / "metrics.jsonl"))[:2]
    assert ckpt_step(out) == 2 and not list(out.glob(".*.tmp"))


@pytest.mark.parametrize("fault, name, n_lines, at", [("enospc_metrics:3", "metrics.jsonl", 2, 2),
                                                      ("enospc_checkpoint:4", "checkpoint.pt", 4, 2),
                                                      ("enospc_eval:3", "eval.jsonl", 3, 2)])
def test_disk_full_is_one_clear_error_and_loses_nothing(ref, tmp_path, monkeypatch, capsys, fault, name, n_lines,
                                                        at):
    out = tmp_path / "run"
    code, err = run_cli(monkeypatch, capsys, out, fault)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"{out / name}: cannot write (No space left on device)" in err and "--resume" in err
    assert strip(lines(out / "metrics.jsonl")) == strip(lines(ref / "metrics.jsonl"))[:n_lines]  # no partial line
    if at is None:
        assert not (out / "checkpoint.pt").exists()
    else:
        assert ckpt_step(out) == at  # the previous checkpoint is intact
    assert not list(out.glob(".*.tmp"))
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
    monkeypatch.delenv("RLBATCH_FAULT")
    fr.run_train(out, resume=True)  # space freed: the run completes as if nothing happened
    same_run(ref, out)


def test_unwritable_output_directories(monkeypatch, capsys, tmp_path):
    code, err = run_cli(monkeypatch, capsys, Path("/proc/rlbatch-no-such/run"), None)
    assert code == 2 and len(err.splitlines()) == 1 and "/proc/rlbatch-no-such/run" in err and "not writable" in err
    from rlbatch.backends.local import run_sweep
    from rlbatch.study.ladder import build_ladder

    with pytest.raises(UserError, match="not writable"):
        run_sweep(build_ladder(**fr.SWEEP), Path("/proc/rlbatch-sweep"), progress=False)
    # a run directory locked by another process (a second trainer on the same --out)
    out = tmp_path / "run"
    out.mkdir()
    from rlbatch.runstore import lock_run_dir

    held = lock_run_dir(out)
    try:
        code, err = run_cli(monkeypatch, capsys, out, None)
        assert code == 2 and "is in use by another rlbatch process" in err
    finally:
        held.close()
    with pytest.raises(UserError, match="is in use by another rlbatch process"):  # a second sweep on one --out
        held = lock_run_dir(out)
        try:
            run_sweep(build_ladder(**fr.SWEEP), out, progress=False)
        finally:
            held.close()
