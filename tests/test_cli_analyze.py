"""``rlbatch analyze`` end to end (subprocess: exit codes and one-line messages as a user sees them)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _shared import shared_logs

REPO = Path(__file__).resolve().parents[1]


def cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


def verl_log(path, n=6, p=8, g=4, lr="1e-6"):
    lines = [f"python3 -m verl.trainer.main_ppo data.train_batch_size={p} actor_rollout_ref.rollout.n={g} "
             f"actor_rollout_ref.actor.optim.lr={lr} algorithm.adv_estimator=grpo"]
    for s in range(1, n + 1):
        val = f" - val/test_score/openai/gsm8k:{0.1 * s:.3f}" if s % 2 == 0 else ""
        lines.append(f"step:{s} - actor/grad_norm:0.500 - critic/score/mean:0.300 - timing_s/gen:6.000 - "
                     f"timing_s/update_actor:3.000 - timing_s/step:10.000{val}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_analyze_real_verl_logs_json():
    logs = sorted(shared_logs("verl", module=False).glob("*.log"))
    assert len(logs) == 3
    r = cli(*logs, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    runs = {x["run"]: x for x in out["runs"]}
    assert {k: v["steps"] for k, v in runs.items()} == {"deepseek-7b_gsm8k_grpo_p1024_n5": 1119,
                                                         "qwen2-7b_math_gpg_p1024_n5": 210,
                                                         "qwen2.5-0.5b_gsm8k_ppo_p256": 435}
    keys = {"run", "source_format", "algorithm", "prompts_per_step", "group_size", "batch_size", "lr", "steps",
            "samples_retained", "samples_source", "wall_clock_s", "gen_time_share", "throughput_samples_per_s",
            "grad_norm_actor_mean", "grad_norm_critic_mean", "last_eval_score"}
    for x in runs.values():
        assert keys <= set(x) and x["source_format"] == "verl"
    assert runs["deepseek-7b_gsm8k_grpo_p1024_n5"]["grad_norm_critic_mean"] is None
    assert "accounting" not in out


def test_analyze_target_set_and_report(tmp_path):
    a = verl_log(tmp_path / "small.log", p=8, g=4)
    b = verl_log(tmp_path / "big.log", p=16, g=4, lr="1.4e-6")
    out = tmp_path / "rep"
    r = cli(a, b, "--target", "0.3", "--set", "big:prompts_per_step=32", "--out", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    runs = {x["run"]: x for x in res["runs"]}
    assert runs["big"]["batch_size"] == 128 and runs["big"]["samples_retained"] == 6 * 128
    assert runs["small"]["samples_source"] == "steps x B"
    acc = {x["run"]: x for x in res["accounting"]}
    # score 0.1 * step reaches 0.3 at eval step 3? evals at steps 2, 4, 6 (0.2, 0.4, 0.6): crossing at step 3
    assert acc["small"]["samples_to_target"] == pytest.approx(3 * 32)
    assert acc["big"]["rN"] == pytest.approx(4.0) and acc["big"]["relative_throughput"] == pytest.approx(4.0)
    assert res["reference"] == "small" and (out / "report.html").is_file() and (out / "report.json").is_file()
    md = cli(a, b, "--target", "0.3", "--format", "markdown")
    assert md.returncode == 0 and "| run |" in md.stdout and "Recommendation" in md.stdout


def test_bad_file_warns_good_files_still_read(tmp_path):
    good = verl_log(tmp_path / "good.log")
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    r = cli(good, bad, "--format", "json")
    assert r.returncode == 0
    assert [x["run"] for x in json.loads(r.stdout)["runs"]] == ["good"]
    warn = [line for line in r.stderr.splitlines() if "bad.txt" in line]
    assert len(warn) == 1 and "bad.txt:1: unknown log format" in warn[0]


def test_nothing_usable_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\n")
    r = cli(bad)
    assert r.returncode == 2 and r.stdout == ""
    errors = [line for line in r.stderr.splitlines() if line.startswith("rlbatch: error:")]
    assert len(errors) == 1 and "nothing usable" in errors[0] and "Traceback" not in r.stderr
    r = cli(verl_log(tmp_path / "x.log"), "--set", "nope:group_size=2")
    assert r.returncode == 2 and "unknown run 'nope'" in r.stderr
    r = cli(verl_log(tmp_path / "x.log"), "--set", "x:group_size=two")
    assert r.returncode == 2 and "not a valid group_size" in r.stderr


def _eval_only_run(tmp_path):
    d = tmp_path / "one"
    d.mkdir()
    (d / "metrics.jsonl").write_text('{"step":1,"loss":0.5,"eval/score":0.1}\n{"step":2,"loss":0.4,"eval/score":0.3}\n')
    return d


@pytest.mark.parametrize("target", ["nan", "inf", "-inf"])
def test_non_finite_target_is_one_line_exit_2(tmp_path, target):
    r = cli(_eval_only_run(tmp_path), "--target", target)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"rlbatch: error: --target must be a finite score, got {float(target)!r}"]


def test_target_without_batch_size_says_what_is_missing_not_train_longer(tmp_path):
    # the score 0.3 is above the target 0.2: the run is not short, its log lacks P and G
    r = cli(_eval_only_run(tmp_path), "--target", "0.2")
    assert r.returncode == 0, r.stderr
    assert "Train longer" not in r.stdout
    assert "supply it with --set RUN:prompts_per_step=P --set RUN:group_size=G" in r.stdout
    assert "no batch size in the logs: no samples-to-target" in r.stdout  # (researcher finding 12)
    row = next(line for line in r.stdout.splitlines() if line.startswith("│ metrics") and
               "unknown (no batch size)" in line)
    assert row.split("│")[2].strip() == "—"  # the B cell: unknown, not "not reached"
    out = json.loads(cli(tmp_path / "one", "--target", "0.2", "--format", "json").stdout)
    assert out["headline"]["pick"] is None and out["accounting"][0]["batch_size"] is None


def test_bad_ema_and_unknown_metric_and_plan_tolerance(tmp_path):
    d = verl_log(tmp_path / "v.log")
    r = cli(d, "--target", "0.2", "--ema", "2")
    assert r.returncode == 2 and r.stderr.strip() == "rlbatch: error: --ema must be a smoothing weight in [0, 1), got 2.0"
    r = cli(d, "--target", "0.2", "--metric", "eval/acc")  # a name no run logs: not "train longer"
    assert r.returncode == 0, r.stderr
    assert "No run logs eval/acc: nothing to compare at a target." in r.stdout and "Train longer" not in r.stdout
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "plan", str(d), "--target", "0.2", "--tolerance", "-1"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2 and r.stderr.startswith("rlbatch: error: --tolerance must be a finite rN margin >= 0")
