"""The commands around the report: each case gives one clear line. `plan` never recommends a
configuration that does not reach the target; runs sort by B numerically; no raw numpy/pandas warning; an unknown
--model or --task is named; a failed train leaves no stale lock; usage errors are one line with exit code 2."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from _cli import run_in_process
from _stored_sweeps import unpack
from rlbatch import cli
from rlbatch.errors import UserError
from rlbatch.runstore import Run, make_meta, natural_key, run_order, write_run

REPO = Path(__file__).resolve().parents[1]
DEMO = Path(__file__).parent / "data" / "demo_sweep_cpu" / "trials.tar.gz"


def rlbatch(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)



def linear_run(run_id, b, steps=40, slope=2e-4, seed=0):
    s = np.arange(1, steps + 1)
    m = pd.DataFrame({"step": s, "samples/retained": s * b, "time/step_s": 0.1 * b ** 0.5,
                      "time/wall_s": s * 0.1 * b ** 0.5})
    xs = np.arange(0, steps * b + 1, b)
    ev = pd.DataFrame({"step": xs // b, "samples/retained": xs, "eval/score": 0.1 + slope * xs, "eval/n": 500})
    meta = make_meta(run_id=run_id, prompts_per_step=b // 8, group_size=8, lr=1e-4 * math.sqrt(b / 16),
                     lr_rule="sqrt", seed=seed, model="m", task="t", hardware={"device": "cuda"})
    return Run(meta=meta, metrics=m, evals=ev)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("demo")
    unpack(DEMO, d)
    return d / "trials"


def test_plan_at_an_unreachable_target_recommends_nothing(demo_dir):
    # the demo's best seed-mean score is about 0.6: at 0.99 nothing reaches, measured or by its fit
    r = rlbatch("plan", demo_dir, "--target", "0.99", "--format", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["recommended"] is None and plan["recommended_batch_size"] is None
    assert not any(c["verdict"] == "recommended" for c in plan["candidates"])
    assert plan["within_noise"] == []
    t = rlbatch("plan", demo_dir, "--target", "0.99", "--format", "markdown")
    assert t.returncode == 0, t.stderr
    head = t.stdout.splitlines()[0]
    assert head.startswith("**No configuration reaches eval/score >= 0.99")
    assert "Run instead: plan at a target the runs reach (e.g. --target 0.6" in head  # best measured 0.626


def test_runs_sort_by_batch_size_numerically(tmp_path):
    for rid, b in (("B1024-s0", 1024), ("B128-s0", 128), ("B16-s10", 16), ("B16-s2", 16)):
        write_run(tmp_path / rid, linear_run(rid, b, seed=int(rid.rsplit("s", 1)[1])))
    r = rlbatch("analyze", tmp_path, "--target", "0.3", "--format", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert [x["run"] for x in res["runs"]] == ["B16-s2", "B16-s10", "B128-s0", "B1024-s0"]
    assert [x["batch_size"] for x in res["accounting"]] == [16, 128, 1024]
    assert sorted(["B1024", "B128", "B16"], key=natural_key) == ["B16", "B128", "B1024"]
    unknown = Run(meta=make_meta(run_id="x"), metrics=pd.DataFrame())
    assert run_order(unknown) > run_order(linear_run("B4096", 4096))  # unknown B last


def test_analyze_of_one_run_prints_no_raw_warning(tmp_path):
    write_run(tmp_path / "one", linear_run("one", 64))
    r = rlbatch("analyze", tmp_path / "one", "--target", "0.3", "--out", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "warnings.warn" not in r.stderr
    # a slow machine may show the progress lines (stage after 2 s); nothing else may reach stderr
    assert all(line.startswith("analyze: ") for line in r.stderr.splitlines()), r.stderr


def test_library_warnings_are_not_shown_raw_and_ours_are_one_line(capsys):
    cli._show_warning(RuntimeWarning("Mean of empty slice"), RuntimeWarning, "/x/numpy/core/_methods.py", 1)
    cli._show_warning(FutureWarning("downcasting"), FutureWarning, "/x/pandas/core/frame.py", 1)
    cli._show_warning(UserWarning("log.txt line 3: no step column\nmore"), UserWarning, "/x/rlbatch/readers/a.py", 1)
    assert capsys.readouterr().err == "rlbatch: warning: log.txt line 3: no step column\n"


@pytest.mark.parametrize("args, needle", [
    (["--model", "nosuchmodel"], "unknown model 'nosuchmodel'"),     # no --lr: the model is named, not the lr
    (["--task", "nosuchtask"], "unknown task 'nosuchtask'"),
])
def test_bad_model_or_task_is_named_first(monkeypatch, capsys, tmp_path, args, needle):
    code, _, err = run_in_process(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"), *args)
    assert code == 2 and needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_failed_run_leaves_no_stale_lock(monkeypatch, tmp_path):
    import rlbatch.train.trainer as trainer
    from rlbatch.runstore import LOCK
    from rlbatch.train.config import TrainConfig

    def boom(*a, **k):
        assert (tmp_path / "old" / LOCK).exists() or (tmp_path / "new" / LOCK).exists()
        raise UserError("failed on purpose")

    monkeypatch.setattr(trainer, "setup", boom)
    cfg = TrainConfig(model="tiny-random", lr=1e-4, prompts_per_step=2, group_size=4, samples=16)
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "keep.txt").write_text("x")
    for out in (tmp_path / "old", tmp_path / "new"):
        with pytest.raises(UserError, match="failed on purpose"):
            trainer.train(cfg, out, progress=False)
    assert not (tmp_path / "old" / LOCK).exists() and (tmp_path / "old" / "keep.txt").exists()
    assert not (tmp_path / "new").exists()  # created for the run, empty after it failed: removed


@pytest.mark.parametrize("args, needle", [
    (["analyze", "--bogus"], "No such option: --bogus"),
    (["analyze"], "Missing argument"),
    (["plan", "x", "--target", "abc"], "Invalid value for '--target'"),
    (["nosuchcommand"], "No such command 'nosuchcommand'"),
])
def test_usage_errors_are_one_line_with_exit_2(monkeypatch, capsys, args, needle):
    code, out, err = run_in_process(monkeypatch, capsys, *args)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("rlbatch: error: ") and needle in err, err
    assert f"(see 'rlbatch{' ' + args[0] if args[0] != 'nosuchcommand' else ''} --help')" in err


def test_help_still_exits_0(monkeypatch, capsys):
    code, out, _ = run_in_process(monkeypatch, capsys, "plan", "--help")
    assert code == 0 and "--target" in out
