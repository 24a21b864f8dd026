"""Issue 34: the kinds of logs people write outside the frameworks' defaults, each on a fixture written here (the
real files these kinds were found in are third-party and stay in ../shared/logs, scored by
tests/test_readers_shared.py). One test per kind; each would fail if the kind were misread again.
"""

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.errors import UserError
from rlbatch.explain import inspect_path
from rlbatch.readers import ReadWarning, detect_format, load

REPO = Path(__file__).resolve().parents[1]


def quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadWarning)
        return load(path, **kw)


# ------------------------------------------------------------ 1. several record types in one JSONL stream
def cycle_log(path, *, update_batch=64, epochs=2, steps=10, P=16, G=8, eval_every=5):
    """A custom GRPO loop's JSONL: per RL step one ``rollout`` record (P, G, the responses, generation seconds),
    ``epochs x P x G / update_batch`` ``train`` records (one per optimizer update, with the update batch), an
    ``eval`` record every ``eval_every`` steps (with its own seconds) and a ``grpo_step_summary`` (whole-step
    seconds, evaluation included). No ``step`` key anywhere; a step-0 evaluation first."""
    n = P * G
    lines = [{"type": "eval", "grpo_step": 0, "optimizer_step": 0, "reward": 0.1, "answer_accuracy": 0.1,
              "format_accuracy": 0.5, "eval_seconds": 30.0}]
    opt = 0
    for s in range(1, steps + 1):
        lines.append({"type": "rollout", "grpo_step": s, "num_questions": P, "group_size": float(G),
                      "num_rollouts": n, "reward": 0.1 + 0.05 * s, "answer_accuracy": 0.1 + 0.05 * s,
                      "rollout_seconds": 10.0})
        for _ in range(epochs * n // update_batch):
            opt += 1
            lines.append({"type": "train", "grpo_step": s, "optimizer_step": opt, "loss": 0.01, "grad_norm": 0.5,
                          "learning_rate": 4e-05, "train_batch_size": update_batch, "rollout_batch_size": n,
                          "epochs_per_rollout_batch": epochs})
        ev = s % eval_every == 0
        if ev:
            lines.append({"type": "eval", "grpo_step": s, "optimizer_step": opt, "reward": 0.2 + 0.06 * s,
                          "answer_accuracy": 0.2 + 0.06 * s, "format_accuracy": 0.9, "eval_seconds": 30.0})
        lines.append({"type": "grpo_step_summary", "grpo_step": s, "optimizer_step": opt,
                      "step_seconds": 40.0 + (30.0 if ev else 0.0)})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_multi_record_jsonl_steps_are_rl_cycles_with_p_g_and_the_update_batch(tmp_path):
    (run,) = quiet(cycle_log(tmp_path / "tb64_metrics.jsonl"))
    m, meta = run.metrics, run.meta
    # the RL step counter (once per rollout + updates), not the optimizer step (4 per RL step here)
    assert meta.step_source == "grpo_step" and m["step"].tolist() == list(range(1, 11))
    # P and G from the rollout records; B (responses per optimizer update) from the train records, confirmed by the
    # count of updates per rollout (2 epochs x 128 / 64 = 4)
    assert (meta.prompts_per_step, meta.group_size, meta.batch_size, meta.rollout_batch_size) == (16, 8, 64, 128)
    assert m["samples/retained"].tolist() == [128.0 * s for s in range(1, 11)]
    # timings from the rollout and summary records; the evaluation's own seconds are not training time
    assert m["time/gen_s"].tolist() == [10.0] * 10
    assert m["time/step_s"].tolist()[4] == 70.0 and m["time/wall_s"].tolist()[4] == 200.0
    # the evaluation score is the answer accuracy of the eval records, never the format check; step 0 is before
    # training
    assert run.evals["step"].tolist() == [0, 5, 10]
    assert run.evals["eval/score"].tolist() == pytest.approx([0.1, 0.5, 0.8])
    assert meta.metric_sources["eval/score"] == "answer_accuracy (in the evaluation records)"
    assert not [n for n in run.notes if "more than once" in n]


def test_update_batch_not_confirmed_by_the_update_count_is_not_taken(tmp_path):
    # the train records claim 32 responses per update, but there are 4 updates per rollout of 128 with 2 epochs
    # (64 per update): the name alone does not make the update batch; B is left at P x G with a note
    p = cycle_log(tmp_path / "m.jsonl")
    p.write_text(p.read_text().replace('"train_batch_size": 64', '"train_batch_size": 32'))
    (run,) = quiet(p)
    assert (run.meta.batch_size, getattr(run.meta, "rollout_batch_size", None)) == (128, None)
    assert any("does not confirm it" in n for n in run.notes)


# ------------------------------------------------------------ 2. several runs in one file
def test_runs_named_in_a_column_become_runs(tmp_path):
    p = tmp_path / "sweep.jsonl"
    p.write_text("".join(json.dumps({"run_name": f"B{b}", "step": s, "reward": s / b, "loss": 0.5}) + "\n"
                         for b in (64, 128) for s in range(1, 4)))
    runs = quiet(p)
    assert [r.run_id for r in runs] == ["B64", "B128"]
    assert [r.metrics["step"].tolist() for r in runs] == [[1, 2, 3], [1, 2, 3]]
    assert runs[1].metrics["reward/mean"].tolist() == pytest.approx([1 / 128, 2 / 128, 3 / 128])


def test_a_step_counter_that_starts_over_starts_a_run_and_a_resume_does_not(tmp_path):
    p = tmp_path / "two.jsonl"
    rec = lambda s, r: json.dumps({"step": s, "reward": r, "loss": 0.5}) + "\n"
    p.write_text("".join(rec(s, 0.1 * s) for s in range(1, 5)) + "".join(rec(s, 1 + 0.1 * s) for s in range(1, 4)))
    runs = quiet(p)
    assert [r.run_id for r in runs] == ["two-run1", "two-run2"]
    assert [len(r.metrics) for r in runs] == [4, 3] and "starts over at line 5" in runs[1].notes[0]
    # falling back to a later step (3 after 5) re-logs steps of a resumed run: one run, the last record kept
    q = tmp_path / "resumed.jsonl"
    q.write_text("".join(rec(s, 0.1 * s) for s in range(1, 6)) + "".join(rec(s, 2.0) for s in range(3, 8)))
    (run,) = quiet(q)
    assert run.metrics["step"].tolist() == list(range(1, 8)) and run.metrics["reward/mean"].iloc[3] == 2.0


def test_trainer_state_log_history_of_two_runs(tmp_path):
    hist = []
    for k in range(2):
        hist += [{"step": s, "loss": 0.01, "learning_rate": 1e-6, "reward": k + 0.1 * s, "epoch": 0.1 * s}
                 for s in range(1, 6)]
        hist.append({"step": 5, "train_runtime": 100.0 + k, "train_loss": 0.01, "epoch": 0.5})
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 5, "log_history": hist}))
    runs = load(tmp_path / "trainer_state.json")
    assert len(runs) == 2 and [len(r.metrics) for r in runs] == [5, 5]
    assert runs[1].metrics["reward/mean"].tolist() == pytest.approx([1.1, 1.2, 1.3, 1.4, 1.5])
    assert runs[1].metrics["time/wall_s"].iloc[-1] == pytest.approx(101.0)  # its own train_runtime


# ------------------------------------------------------------ 3. W&B long-format exports
def test_wandb_long_export_pivots_into_runs(tmp_path):
    p = tmp_path / "export.csv"
    rows = ["run_name,metric,step,value"]
    for run in ("bs32", "bs64"):
        for s in range(1, 6):
            rows += [f"{run},train/reward,{s},{0.1 * s}", f"{run},timing_s/step,{s},2.5"]
            if s % 2 == 0:
                rows.append(f"{run},eval/accuracy,{s},{0.2 * s}")
    p.write_text("\n".join(rows) + "\n")
    assert detect_format(p) == "wandb-csv"
    runs = quiet(p)
    assert [r.run_id for r in runs] == ["bs32", "bs64"]
    r = runs[0]
    assert r.metrics["step"].tolist() == [1, 2, 3, 4, 5] and r.metrics["time/step_s"].tolist() == [2.5] * 5
    assert r.evals["step"].tolist() == [2, 4] and r.evals["eval/score"].tolist() == pytest.approx([0.4, 0.8])


# ------------------------------------------------------------ 4. column-oriented JSON, 5. non-strict JSON
def test_column_json_with_nan_and_missing_points(tmp_path):
    p = tmp_path / "history.json"
    # Python's json.dump writes NaN / Infinity bare; a null is a point not logged (validation every other step)
    p.write_text(json.dumps({"steps": [1, 2, 3, 4], "losses": [float("nan"), 0.9, float("inf"), 0.7],
                             "rewards": [0.1, 0.2, 0.3, 0.4], "val_rewards": [None, 0.25, None, 0.45], "lr": 1e-6}))
    (run,) = quiet(p)
    assert run.metrics["step"].tolist() == [1, 2, 3, 4]  # a step whose loss is NaN is still a step
    assert run.metrics["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert run.evals["step"].tolist() == [2, 4] and run.evals["eval/score"].tolist() == pytest.approx([0.25, 0.45])
    assert run.meta.lr == 1e-6 and any("JSON object of columns" in n for n in run.notes)


def test_json_list_of_records(tmp_path):
    p = tmp_path / "log.json"
    p.write_text(json.dumps([{"step": s, "reward": 0.1 * s, "kl": float("nan")} for s in range(1, 4)], indent=1))
    (run,) = quiet(p)
    assert run.metrics["step"].tolist() == [1, 2, 3]


# ------------------------------------------------------------ 6. evaluation scores under everyday names
@pytest.mark.parametrize("name,value,want", [("eval/win_rate", 0.6, 0.6), ("pass_at_1", 0.35, 0.35),
                                             ("eval/accuracy", 26.7, 0.267)])
def test_evaluation_names_and_percent_scales(tmp_path, name, value, want):
    p = tmp_path / "m.jsonl"
    lines = [json.dumps({"step": s, "loss": 0.1, "reward": 0.1 * s}) for s in range(1, 5)]
    lines.insert(2, json.dumps({"step": 2, name: value}))
    p.write_text("\n".join(lines) + "\n")
    (run,) = quiet(p)
    assert run.evals["step"].tolist() == [2] and run.evals["eval/score"].iloc[0] == pytest.approx(want)
    if value > 1:
        assert any("logged in percent" in n for n in run.notes)
    assert run.metrics["step"].tolist() == [1, 2, 3, 4]


def test_a_test_accuracy_printed_after_training(tmp_path):
    p = tmp_path / "train.log"
    dicts = "".join(str({"loss": 0.0, "learning_rate": 1e-6, "reward": 0.1 * s, "epoch": round(0.1 * s, 2)}) + "\n"
                    for s in range(1, 6))
    p.write_text(dicts + str({"train_runtime": 50.0, "train_loss": 0.0, "epoch": 0.5}) + "\n"
                 "Evaluating on the held-out test set...\nTest accuracy: 26.7% (267/1000)\n")
    (run,) = quiet(p)
    assert run.evals["step"].tolist() == [5] and run.evals["eval/score"].tolist() == pytest.approx([0.267])
    assert any("printed after training (line 8)" in n and "percent" in n for n in run.notes)


# ------------------------------------------------------------ 7. wrapped verl step lines, logging-module lines
def test_verl_step_line_broken_inside_a_name(tmp_path):
    full = ("(TaskRunner pid=1) step:2 - actor/grad_norm:0.069 - critic/score/mean:0.011 - response_length/clip_ratio:"
            "0.004 - timing_s/gen:74.020 - timing_s/step:96.551 - timing_per_token_ms/ref:\n")
    cut = full.index("clip_ratio") + 4
    p = tmp_path / "issue.log"
    p.write_text(full[:cut] + "\n" + full[cut:])  # "... response_length/clip" + newline + "_ratio:0.004 - ..."
    (run,) = quiet(p)
    row = run.metrics.iloc[0]
    assert row["time/gen_s"] == 74.02 and row["time/step_s"] == 96.551
    assert row["raw/response_length/clip_ratio"] == 0.004
    assert any("line break(s) inside step lines" in n for n in run.notes)


def test_verl_step_block_with_one_metric_per_line(tmp_path):
    """A README's verl step: ``step:N`` alone, then one `` - name:value`` per line (the separators became line
    breaks); two such blocks are two steps, with the generation and step times and the lr of each."""
    def block(step, gen, total):
        return (f"(TaskRunner pid=7, ip=10.0.0.1) step:{step}\n - actor/pg_loss:0.05\n - actor/lr:1e-06\n"
                f" - critic/score/mean:0.{step}\n - timing_s/gen:{gen}\n - timing_s/step:{total}\n")
    p = tmp_path / "readme_paste.log"
    p.write_text("Logs look as follows:\n" + block(1, 24.5, 93.5) + "some prose between the blocks\n"
                 + block(2, 20.0, 80.0))
    assert detect_format(p) == "verl"
    (run,) = quiet(p)
    assert run.metrics["step"].tolist() == [1, 2]
    assert run.metrics["time/gen_s"].tolist() == [24.5, 20.0]
    assert run.metrics["time/step_s"].tolist() == [93.5, 80.0]
    assert run.meta.lr == pytest.approx(1e-6)
    assert any("one metric per line" in n for n in run.notes)


@pytest.mark.parametrize("fmt", [
    "2025-04-01 10:00:0{s},123 - train - INFO - step={s} loss=0.5 reward={r} lr=1e-06 step_time=3.2s",
    "[2025-04-01 10:00:0{s}][train][INFO] - step {s} | loss 0.5 | reward {r} | lr 1.0e-06 | step_time 3.2",
    "INFO:__main__:step={s} loss=0.5 reward={r} lr=1e-06 step_time=3.2",
])
def test_python_logging_lines(tmp_path, fmt):
    p = tmp_path / "run.log"
    p.write_text("".join(fmt.format(s=s, r=0.1 * s) + "\n" for s in range(1, 5))
                 + fmt.split("step")[0].format(s=9) + "eval step 4: accuracy=0.35\n")
    (run,) = quiet(p)
    assert run.metrics["step"].tolist() == [1, 2, 3, 4]
    assert run.metrics["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert run.metrics["time/step_s"].tolist() == [3.2] * 4 and run.meta.lr == 1e-6
    assert run.evals["eval/score"].tolist() == [0.35]


# ------------------------------------------------------------ 8. a run that crashed before its first step
CRASHED = """\
+ python train.py --learning_rate 1e-6 --num_generations 8 --prompts_per_step 32
Loading model...
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    rewards = reward_fn(completions)
  File "rewards.py", line 12, in reward_fn
    raise NotImplementedError("math_verify reward for boxed answers")
NotImplementedError: math_verify reward for boxed answers
"""


def test_crash_before_the_first_step_names_the_error_and_the_config(tmp_path):
    p = tmp_path / "crash.log"
    p.write_text(CRASHED)
    with pytest.raises(UserError) as err:
        load(p)
    msg = str(err.value)
    assert "crash.log" in msg and "stopped before its first training step with NotImplementedError: math_verify " \
                                  "reward for boxed answers (line 8)" in msg
    assert "config read: prompts_per_step = 32, group_size = 8, lr = 1e-06" in msg
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(p)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 2 and "NotImplementedError: math_verify" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1  # one line, no Python traceback of ours


# ------------------------------------------------------------ inspect: the step counter and --map candidates
def test_inspect_says_which_counter_and_why_and_offers_only_candidates_of_the_right_kind(tmp_path):
    p = tmp_path / "m.jsonl"
    # no canonical step timer: 'num_rollouts' is a count (not a time), 'rollout_secs' is a time for time/gen_s
    p.write_text("".join(json.dumps({"rl_iter": s, "num_rollouts": 256, "rollout_secs": 12.5, "reward": 0.1 * s,
                                     "loss": 0.2}) + "\n" for s in range(1, 4)))
    res = inspect_path(p)
    (r,) = res["runs"]
    assert r["counters"]["step"] == "rl_iter" and "rl_iter" in r["counters"]["why"]
    miss = {m["field"]: m["flag"] for m in r["missing"]}
    assert "num_rollouts" not in miss.get("time/gen_s", "") and "num_rollouts" not in miss.get("time/step_s", "")
    assert "rollout_secs" in miss.get("time/gen_s", "") or r["metrics"].get("time/gen_s") == "rollout_secs"
