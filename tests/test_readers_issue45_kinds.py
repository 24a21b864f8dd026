"""Issue 45: the kinds of logs from the wild that still failed (cases4 and older folders), each on a fixture written
here (the real files are third-party and stay in ../shared/logs, scored by tests/test_readers_shared.py). One test
per kind; each would fail if the kind were misread again.
"""

import json
import warnings

import pytest

from rlbatch.readers import ReadWarning, load


def quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadWarning)
        return load(path, **kw)


# ------------------------------------------------------------ 1. runs in one file when the counter restarts often
def test_runs_of_one_record_and_repeated_runs_are_each_a_run(tmp_path):
    # segment lengths as a custom loop appends them run after run: single-record runs, a run repeated exactly, and a
    # run whose fields change (an actor-critic variant adds two losses)
    lengths = [1, 3, 1, 1, 4, 4, 1, 2]
    lines = []
    for k, n in enumerate(lengths):
        for it in range(1, n + 1):
            rec = {"iteration": it, "episodes": 8, "train/loss": 0.1 * it + (0.0 if k in (4, 5) else 0.01 * k),
                   "reward/mean": -0.5, "eval/win_rate": 0.3 + 0.01 * it}
            if k >= 6:
                rec["train/value_loss"] = 1.0
            lines.append(json.dumps(rec))
    path = tmp_path / "training_log.json"
    path.write_text("\n".join(lines) + "\n")
    runs = quiet(path)
    assert [len(r.metrics) for r in runs] == lengths
    assert "starts over" in " ".join(runs[1].notes)


def test_several_rows_per_step_are_not_runs_of_one_record(tmp_path):
    # one row per optimizer step under one rollout step number (a W&B-style export of grad-accumulation steps)
    lines = [json.dumps({"step": s, "train/grad_norm": 0.5 + 0.01 * k, "train/loss": 0.2})
             for s in range(0, 6) for k in range(2)]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert len(quiet(path)) == 1


# ------------------------------------------------------------ 2. which evaluation is the score
def test_a_success_rate_is_the_score_before_a_mean_reward_and_the_other_stays_readable(tmp_path):
    lines = [json.dumps({"iteration": i, "train/loss": 0.3, "reward/mean": 0.1 * i,
                         "eval/mean_reward": -0.4 + 0.1 * i, "eval/win_rate": 0.30 + 0.05 * i})
             for i in range(1, 6)]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (run,) = quiet(path)
    assert run.evals["eval/score"].iloc[-1] == pytest.approx(0.55)
    assert run.evals["eval/mean_reward"].iloc[-1] == pytest.approx(0.1)  # for --metric eval/mean_reward
    note = next(n for n in run.notes if n.startswith("eval/score:"))
    assert "'eval/win_rate' (a bounded success rate) chosen over 'eval/mean_reward'" in note
    assert "--metric eval/mean_reward" in note


# ------------------------------------------------------------ 3. a score printed once, after training
def test_the_reward_measured_again_after_training_is_the_last_evaluation(tmp_path):
    body = [f"__main__ - INFO - step={s} loss=0.000000 reward={0.1 * (s % 3):.4f} answer_reward=0.0000 "
            f"correct=0/2" for s in range(1, 21)]
    body += ["utils - INFO - Initializing vLLM model from ./out/final",
             "utils - INFO - answer_reward: 0.0598", "utils - INFO - format_reward: 0.2818",
             "utils - INFO - reward: 0.0598", "utils - INFO - Correct: 128/2140 (6.0%)"]
    path = tmp_path / "grpo.log"
    path.write_text("\n".join(body) + "\n")
    (run,) = quiet(path)
    assert len(run.metrics) == 20
    assert run.evals["eval/score"].iloc[-1] == pytest.approx(0.0598)
    assert int(run.evals["step"].iloc[-1]) == 20
    assert any("'reward' printed after training" in n for n in run.notes)


def test_a_reward_line_inside_training_is_not_a_final_score(tmp_path):
    body = [f"step={s} loss=0.1 reward={0.1 * s:.2f}" for s in range(1, 6)]
    body.insert(2, "reward: 0.9")
    path = tmp_path / "loop.log"
    path.write_text("\n".join(body) + "\n")
    (run,) = quiet(path)
    assert not len(run.evals) or "eval/score" not in run.evals.columns


# ------------------------------------------------------------ 4. N/M counters and single-record excerpts
def test_a_single_ms_swift_dict_without_braces_is_a_run_of_one_step(tmp_path):
    text = ("someone · issue #1 · closed · Python\n# grad_norm is 0\n\n"
            "'loss': -0.0, 'grad_norm': 0.0, 'learning_rate': 2.6e-07, 'reward': 0.34375, 'reward_std': 0.44, "
            "'completions/mean_length': 357.5, 'epoch': 0.0, 'global_step/max_steps': '5/3766', "
            "'percentage': '0.13%', 'elapsed_time': '1m 29s'\n\nCould you provide a script?\n"
            "--num_generations 8\n--per_device_train_batch_size 1\n")
    path = tmp_path / "excerpt.txt"
    path.write_text(text)
    (run,) = quiet(path)
    assert run.metrics["step"].tolist() == [5]
    assert run.meta.lr == pytest.approx(2.6e-07)
    assert run.meta.group_size == 8


# ------------------------------------------------------------ 5 and 7. wrapped and truncated records
def test_an_excerpt_of_one_verl_step_line_wrapped_and_cut_keeps_its_complete_fields(tmp_path):
    fields = " - ".join(f"critic/m{i}:0.{i:03d}" for i in range(40))
    line = f"(TaskRunner pid=1) step:1049 - actor/ppo_kl:0.000 - timing_s/gen:29.316 - {fields} - timing_s/old_log_prob:6."
    wrapped = "\n".join(line[i:i + 100] for i in range(0, len(line), 100))
    path = tmp_path / "issue.txt"
    path.write_text("org/repo · issue #1 · open\n\n```\n" + wrapped)  # no line end: cut off
    (run,) = quiet(path)
    assert run.metrics["step"].tolist() == [1049]
    assert run.metrics["time/gen_s"].iloc[0] == pytest.approx(29.316)
    assert "raw/timing_s/old_log_prob" not in run.metrics.columns  # "6." is a value cut in half
    assert any("cut off" in n and "'timing_s/old_log_prob'" in n for n in run.notes)


def _trl_dicts(n, cut_at):
    out = []
    for i in range(1, n + 1):
        d = (f"{{'loss': 0.0, 'grad_norm': 0.5, 'learning_rate': {i}e-07, 'reward': 0.{i}, 'kl': 0.001, "
             f"'episode': {16 * i}, 'epoch': 0.0{i}}}")
        out.append(d)
    out[-1] = out[-1][:out[-1].index(cut_at)]
    return "\n".join(out)


@pytest.mark.parametrize("cut_at, steps, lr", [("'epoch'", 3, 3e-07),   # the step counter survived: kept
                                                ("'kl'", 2, 2e-07)])    # cut before 'episode': dropped
def test_a_trl_console_dict_cut_off_at_the_end(tmp_path, cut_at, steps, lr):
    path = tmp_path / "trl.txt"
    path.write_text(_trl_dicts(3, cut_at))
    (run,) = quiet(path, fmt="trl-console")
    assert len(run.metrics) == steps
    assert max(run.metrics["lr"]) == pytest.approx(lr)
    assert any("the last record is cut off" in n for n in run.notes)


def _swift_jsonl(n):
    return [json.dumps({"loss": 0.01, "learning_rate": 1e-6 * k, "reward": 0.1 * k, "epoch": 0.001 * k,
                        "global_step/max_steps": f"{k}/500", "percentage": f"{k / 5:.2f}%",
                        "elapsed_time": f"{k}m 0s"}) for k in range(1, n + 1)]


@pytest.mark.parametrize("cut_at, steps, last_lr", [('"percentage', 3, 3e-6),          # after its counter: kept
                                                     ('"global_step/max_steps', 2, 2e-6)])  # before it: dropped
def test_a_json_lines_record_cut_off_at_the_end(tmp_path, cut_at, steps, last_lr):
    lines = _swift_jsonl(3)
    lines[-1] = lines[-1][:lines[-1].index(cut_at) + 4]  # the text ends inside the key
    path = tmp_path / "logging.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(ReadWarning, match="the last record is cut off"):
        (run,) = load(path)
    assert list(run.metrics["step"]) == list(range(1, steps + 1))
    assert max(run.metrics["lr"]) == pytest.approx(last_lr)
    assert any(("kept" if steps == 3 else "dropped") in n for n in run.notes if "the last record is cut off" in n)


def test_an_invalid_line_inside_a_json_lines_file_is_still_skipped(tmp_path):
    lines = _swift_jsonl(4)
    lines[1] = lines[1][:40]  # not the last line: a broken record mid-file, never salvaged
    path = tmp_path / "logging.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(ReadWarning, match="not valid JSON"):
        (run,) = load(path)
    assert list(run.metrics["step"]) == [1, 3, 4]


# ------------------------------------------------------------ 8. P and G shown only indirectly
def _grpo_history(steps, P, G, *, every=1, decimals=None, seed=0):
    """A TRL-shaped log_history written here: per logged step, the mean completion length (a mean of P x G whole
    token counts), the clipped share and the share of the P groups whose G rewards are all equal; logged every
    ``every`` steps as the mean of those steps' values (as the trainer averages a logging window)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows, window = [], []
    for step in range(1, steps + 1):
        lengths = rng.integers(5, 400, size=P * G)
        flat = rng.random(P) < 0.5
        window.append((lengths.mean(), (lengths > 380).mean(), flat.mean()))
        if step % every == 0:
            mean = np.mean(window, axis=0)
            vals = [round(float(v), decimals) if decimals is not None else float(v) for v in mean]
            rows.append({"loss": 0.01, "learning_rate": 1e-6, "reward": 0.5, "completions/mean_length": vals[0],
                         "completions/clipped_ratio": vals[1], "frac_reward_zero_std": vals[2], "step": step})
            window = []
    return rows


def test_p_and_g_inferred_from_the_denominators_of_per_step_shares(tmp_path):
    path = tmp_path / "log_history.json"
    path.write_text(json.dumps(_grpo_history(30, P=2, G=4)))
    (run,) = quiet(path)
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.batch_size) == (2, 4, 8)
    note = next(n for n in run.notes if n.startswith("P = 2, G = 4 inferred"))
    assert "completions/mean_length x 8" in note and "multiples of 1/2" in note
    assert run.metrics["samples/retained"].iloc[-1] == 30 * 8
    # eighths survive rounding to 3 decimals: the same inference from a log that prints 3 decimals
    path.write_text(json.dumps(_grpo_history(30, P=2, G=4, decimals=3)))
    assert quiet(path)[0].meta.batch_size == 8
    from rlbatch.explain import inspect_run
    cfg = inspect_run(run)["config"]
    assert cfg["prompts_per_step"]["source"].startswith("inferred: frac_reward_zero_std")
    assert cfg["group_size"]["source"].startswith("inferred: N / P = 8 / 2")


@pytest.mark.parametrize("kw", [dict(every=5),       # a logging window of 5 steps: denominators 5 x N, 5 x P
                                # values rounded to a decimal grid (verl prints 3 decimals): twelfths are not exact
                                dict(decimals=3, P=3, G=4),
                                dict(steps=6)])      # too few steps for a batch twice as large to be ruled out
def test_p_and_g_not_inferred_when_the_evidence_is_ambiguous(tmp_path, kw):
    steps, P, G = kw.pop("steps", 60), kw.pop("P", 2), kw.pop("G", 4)
    path = tmp_path / "log_history.json"
    path.write_text(json.dumps(_grpo_history(steps, P=P, G=G, **kw)))
    (run,) = quiet(path)
    assert run.meta.prompts_per_step is None and run.meta.group_size is None
    assert not any(" inferred" in n and n.startswith("P = ") for n in run.notes)


def test_set_overrides_an_inferred_batch_and_its_source(tmp_path):
    from rlbatch.readers.common import apply_overrides
    from rlbatch.explain import inspect_run

    path = tmp_path / "log_history.json"
    path.write_text(json.dumps(_grpo_history(30, P=2, G=4)))
    (run,) = quiet(path)
    run = apply_overrides(run, {"prompts_per_step": 4, "group_size": 2})
    assert (run.meta.prompts_per_step, run.meta.group_size) == (4, 2)
    assert not any(" inferred" in n and n.startswith("P = ") for n in run.notes)
    assert "inferred" not in str(inspect_run(run)["config"]["prompts_per_step"]["source"])


# ------------------------------------------------------------ a step time from the cumulative wall time a log prints
def test_step_time_from_ms_swift_elapsed_time_differences(tmp_path):
    # ms-swift prints no step timer, only "elapsed_time" since the start (model loading included in the first)
    elapsed = ["1m 35s", "2m 46s", "3m 23s", "1h 0m 3s"]
    lines = [str({"loss": 0.1, "grad_norm": 0.5, "learning_rate": 5e-7, "reward": 0.2 * k,
                  "global_step/max_steps": f"{k}/9", "elapsed_time": e, "remaining_time": "5m 0s"})
             for k, e in enumerate(elapsed, 1)]
    path = tmp_path / "swift.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = quiet(path, fmt="trl-console")
    st = list(run.metrics["time/step_s"])
    assert st[0] != st[0] and st[1:] == [71.0, 37.0, 3600 + 3 - 203.0]  # the first (start-up included) unknown
    assert any(n.startswith("time/step_s: differences of 'elapsed_time'") for n in run.notes)


@pytest.mark.parametrize("text, seconds", [("1m 35s", 95.0), ("10d 9h 50m 13s", 899413.0), ("01:35", 95.0),
                                            ("1:02:03", 3723.0), ("95.5", 95.5), (12, 12.0), ("soon", None),
                                            ("5 m 3x", None)])
def test_duration_text(text, seconds):
    from rlbatch.readers.names import duration_s

    assert duration_s(text) == seconds
