"""Ten classes of quirks real logs have (wrapped lines, resumed runs, eval-only lines, mixed schemas, generic JSONL
with a config beside it, ...), each on an input reproduced faithfully from a report of the failure (the real files
of tests/data/logs/ are in test_readers_real.py and test_readers_verl.py). Where a format's exact
text is not in our fixtures the test says what it reproduces.
"""

import json
import subprocess
import sys
import warnings

import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.errors import UserError
from rlbatch.readers import ReadWarning, detect_format, load

ESC = "\x1b"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def quiet_load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReadWarning)
        return load(path, **kw)


def trl_dict(lr, reward, epoch, grad=0.1):
    return (f"{{'loss': 0.0, 'grad_norm': {grad}, 'learning_rate': {lr}, 'completion_length': 230.5, "
            f"'reward': {reward}, 'reward_std': 0.5, 'kl': 0.0005, 'epoch': {epoch}}}")


# ---------------------------------------------------------------- 1. TRL console dicts (+ 2. peak lr)
def test_trl_console_glued_to_tqdm_steps_from_the_progress_counter(tmp_path):
    # transformers' ProgressCallback: the training bar "N/M [elapsed<left, s/it]" is redrawn, then the log dict
    # printed right after it (no newline between them when stdout is captured), evaluation bars with another total
    bar = lambda n: f"\r  {n * 100 // 200:2d}%|##        | {n}/200 [01:{n:02d}<26:20,  8.32s/it]"
    text = "```\n"  # pasted inside a Markdown fence
    recs = [(10, 2e-07, 0.9), (20, 2.2e-06, 1.1), (30, 5e-06, 1.3), (40, 4.5e-06, 1.4), (50, 4e-06, 1.5)]
    for i, (n, lr, rew) in enumerate(recs):
        text += bar(n - 1) + bar(n) + trl_dict(lr, rew, round(n / 100, 2)) + "\n"
        if n == 20:
            text += "\r 50%|#####     | 4/8 [00:02<00:02,  1.9it/s]\r100%|##########| 8/8 [00:04<00:00]"
            text += "{'eval_loss': 0.1, 'eval_reward': 0.42, 'epoch': 0.2}\n"
    text += "{'train_runtime': 1000.0, 'train_samples_per_second': 1.2, 'train_loss': 0.01, 'epoch': 0.5}\n```\n"
    p = write(tmp_path, "trl_console.log", text)
    assert detect_format(p) == "trl-console"
    (run,) = load(p)
    m = run.metrics
    assert list(m["step"]) == [10, 20, 30, 40, 50]
    assert run.meta.step_source == "progress counter" and any("N/200" in n for n in run.notes)
    assert m["reward/mean"].tolist() == [0.9, 1.1, 1.3, 1.4, 1.5]
    # evaluation dict after step 20's record: an evaluation point at step 20, not a training step
    assert run.evals["step"].tolist() == [20] and run.evals["eval/score"].tolist() == [0.42]
    # 2. warm-up: the first record shows 2e-07 of a 5e-06 run: lr is the peak, the schedule as read
    s = summarize_run(run)
    assert s["lr"] == 5e-06
    sched = run.meta.lr_schedule
    assert sched["first"] == 2e-07 and sched["peak_step"] == 30 and sched["warmup_steps"] == 20
    assert sched["decay"] == "linear" and sched["last"] == 4e-06
    assert any("peak logged learning rate" in n and "warm-up over 20 step(s)" in n for n in run.notes)
    # the bar's elapsed time "[01:NN<" at each record (N = the step) gives the clock: 70 s at step 10 ... 110 at 50
    assert m["time/wall_s"].tolist() == [70.0, 80.0, 90.0, 100.0, 110.0]
    assert m["time/step_s"].tolist() == pytest.approx([7.0, 1.0, 1.0, 1.0, 1.0])


def test_trl_console_steps_from_logging_steps(tmp_path):
    text = "TrainingArguments(\n_n_gpu=1,\nlearning_rate=5e-06,\nlogging_steps=5,\nmax_steps=100,\n)\n"
    text += "\n".join(trl_dict(5e-06, 0.1 * i, 0.05 * i) for i in range(1, 5)) + "\n"
    (run,) = load(write(tmp_path, "t.log", text))
    assert list(run.metrics["step"]) == [5, 10, 15, 20] and run.meta.step_source == "logging_steps"


def test_trl_console_steps_from_epoch_growth_else_counted(tmp_path):
    text = "\n".join(trl_dict(1e-06, 0.1, e) for e in (0.25, 0.5, 0.75, 1.0)) + "\n"
    (run,) = load(write(tmp_path, "t.log", text))
    assert list(run.metrics["step"]) == [1, 2, 3, 4] and run.meta.step_source == "epoch growth"
    text = "\n".join(trl_dict(1e-06, 0.1, e) for e in (0.31, 0.33, 0.35, 0.37)) + "\n"
    (run,) = load(write(tmp_path, "u.log", text))
    assert list(run.metrics["step"]) == [1, 2, 3, 4] and run.meta.step_source == "records counted"


def test_trl_ppo_console_counts_episodes(tmp_path):
    # TRL's PPOTrainer metrics: 'eps' is episodes per second, 'episode' the cumulative count
    text = "\n".join(f"{{'eps': 12, 'objective/kl': 0.1, 'objective/scores': {0.1 * i}, 'policy/entropy_avg': 1.2, "
                     f"'val/ratio': 1.0, 'lr': 3e-06, 'episode': {64 * i}, 'epoch': {0.01 * i}}}" for i in range(1, 4)) + "\n"
    (run,) = load(write(tmp_path, "ppo.log", text))
    m = run.metrics
    assert run.meta.algorithm == "ppo"
    assert m["samples/generated"].tolist() == [64, 128, 192] and "raw/eps" not in m.columns
    assert m["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3])
    # PPO's 'val/ratio' is a value-head statistic, not a validation score: kept with the training metrics
    assert m["raw/value/ratio"].tolist() == [1.0] * 3 and len(run.evals) == 0


# ---------------------------------------------------------------- 3. validation-only step lines
def verl_line(step, extra=""):
    return (f"{ESC}[36m(TaskRunner pid=7){ESC}[0m step:{step} - actor/grad_norm:0.100 - critic/score/mean:0.500 - "
            f"timing_s/gen:10.000 - timing_s/update_actor:5.000 - timing_s/step:20.000{extra}")


def test_val_only_step0_is_an_evaluation_and_does_not_renumber(tmp_path):
    lines = [f"(TaskRunner pid=7) step:0 - val-core/openai/gsm8k/reward/mean@1:0.200 - val-aux/num_turns/mean:2.000"]
    lines += [verl_line(s) for s in (1, 2, 3)]
    lines += ["(TaskRunner pid=7) step:4 - val-core/openai/gsm8k/reward/mean@1:0.300"]  # a last validation-only line
    (run,) = load(write(tmp_path, "v.log", "\n".join(lines) + "\n"))
    assert list(run.metrics["step"]) == [1, 2, 3]
    assert not any("renumbered 1-based" in n for n in run.notes)
    assert run.evals["step"].tolist() == [0, 3] and run.evals["eval/score"].tolist() == [0.2, 0.3]
    # a step:0 that carries training keys is a training step (old verl): renumbered 1-based
    (old,) = load(write(tmp_path, "o.log", "\n".join(verl_line(s) for s in (0, 1, 2)) + "\n"))
    assert list(old.metrics["step"]) == [1, 2, 3] and any("renumbered 1-based" in n for n in old.notes)


# ---------------------------------------------------------------- 4. generation time under other names
def test_generation_time_under_other_names(tmp_path):
    # verl dynamic sampling recipe: timing_s/get_batch_rollout_with_filtering holds the whole rollout
    lines = [verl_line(s, f" - timing_s/get_batch_rollout_with_filtering:{30.0 + s:.3f}") for s in (1, 2)]
    (run,) = load(write(tmp_path, "dapo.log", "\n".join(lines) + "\n"))
    assert run.metrics["time/gen_s"].tolist() == [31.0, 32.0]
    # verl agent loop: timing_s/gen near 0 with timing_s/generate_async (values of the real file logger's step 2)
    rec = lambda s, gen, asy: json.dumps({"step": s, "data": {"actor/grad_norm": 1.0, "timing_s/gen": gen,
                                                              "timing_s/generate_async": asy, "timing_s/step": 54.3}})
    p = write(tmp_path, "agent.jsonl", rec(1, 15.24, 14.98) + "\n" + rec(2, 0.061, 114.6) + "\n")
    (run,) = load(p)
    assert run.metrics["time/gen_s"].tolist() == [15.24, 114.6]
    assert any("generate_async" in n for n in run.notes)
    # Tinker-style loop: time/sample_s (and time/score_s for scoring)
    p = write(tmp_path, "tinker.jsonl", "\n".join(json.dumps({"step": s, "mean_reward": 0.5, "time/sample_s": 9.5,
                                                             "time/score_s": 1.5, "time/train_s": 2.0})
                                                  for s in (1, 2)) + "\n")
    (run,) = load(p)
    assert run.metrics["time/gen_s"].tolist() == [9.5, 9.5] and run.metrics["time/reward_s"].tolist() == [1.5, 1.5]


# ---------------------------------------------------------------- 5. verl PPO without rollout.n
def test_verl_ppo_without_rollout_n_is_g1_flagged(tmp_path):
    launch = "python3 -m verl.trainer.main_ppo data.train_batch_size=256 actor_rollout_ref.actor.optim.lr=1e-6"
    crit = " - critic/vf_loss:0.500 - critic/grad_norm:3.000"
    (run,) = load(write(tmp_path, "ppo.log", launch + "\n" + "\n".join(verl_line(s, crit) for s in (1, 2)) + "\n"))
    assert run.meta.algorithm == "ppo"
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.batch_size) == (256, 1, 256)
    assert run.meta.group_size_source == "verl default"
    assert any("verl's default n = 1" in n for n in run.notes)
    # only vLLM's sampling kwargs {'n': 1, ...} printed (newer verl repeats prompts itself): still the default, flagged
    kw = "(WorkerDict pid=9) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 512, 'detokenize': False}"
    (run,) = load(write(tmp_path, "ppo2.log", launch + "\n" + kw + "\n" + "\n".join(verl_line(s, crit) for s in (1, 2))
                        + "\n"))
    assert run.meta.group_size == 1 and any("sampling kwargs" in n for n in run.notes)
    # older verl passed rollout.n to vLLM: {'n': 5, ...} is G
    kw5 = kw.replace("'n': 1", "'n': 5")
    (run,) = load(write(tmp_path, "grpo.log", launch + "\n" + kw5 + "\n" + "\n".join(verl_line(s) for s in (1, 2))
                        + "\n"))
    assert run.meta.group_size == 5 and run.meta.batch_size == 1280


# ---------------------------------------------------------------- 6. "Final validation metrics" after ANSI prefixes, NULs
@pytest.mark.parametrize("prefix", [f"{ESC}[2m{ESC}[36m(main_task pid=2841){ESC}[0m ", "(pid=2841) ",
                                    f"{ESC}[36m(TaskRunner pid=11, ip=10.0.0.2){ESC}[0m ", ""])
@pytest.mark.parametrize("junk", [b"", b"\x00" * 64, b"\x00\x01\x02\xff\xfe binary junk \x00\n"])
def test_final_validation_metrics_after_any_prefix_and_binary_junk(tmp_path, prefix, junk):
    body = [verl_line(1), verl_line(2)]
    final = prefix + "Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': 0.7123456789}"
    p = tmp_path / "final.log"
    p.write_bytes(junk + ("\n".join(body) + "\n").encode() + junk + (final + "\n").encode())
    (run,) = quiet_load(p)
    assert run.evals["step"].tolist() == [2] and run.evals["eval/score"].tolist() == [0.7123456789]


# ---------------------------------------------------------------- 7. resumed runs, wrapped lines
def test_resumed_run_flagged(tmp_path):
    (run,) = load(write(tmp_path, "resumed.log", "\n".join(verl_line(s) for s in range(101, 106)) + "\n"),
                  prompts_per_step=8, group_size=4)
    s = summarize_run(run)
    assert run.meta.resumed_from_step == 100 and run.meta.steps_in_file == 5 and s["steps"] == 105
    assert any(n.startswith("resumed run: the file begins at step 101") for n in run.notes)
    assert s["samples_retained"] == 105 * 32
    # sparse logging (every 10 steps from step 10) is not a resume
    (run,) = load(write(tmp_path, "sparse.log", "\n".join(verl_line(s) for s in range(10, 60, 10)) + "\n"))
    assert getattr(run.meta, "resumed_from_step", None) is None


def test_lines_wrapped_at_a_fixed_column_are_rejoined(tmp_path):
    width = 80
    lines = [verl_line(s, f" - actor/pg_loss:0.0{s}0 - critic/vf_loss:0.123") for s in (1, 2, 3, 4)]
    wrapped = []
    for ln in lines:
        wrapped += [ln[i:i + width] for i in range(0, len(ln), width)]  # breaks fall inside names and numbers
    (run,) = load(write(tmp_path, "wrapped.log", "\n".join(wrapped) + "\n"))
    m = run.metrics
    assert list(m["step"]) == [1, 2, 3, 4]
    assert m["time/step_s"].tolist() == [20.0] * 4 and m["raw/critic/vf_loss"].tolist() == [0.123] * 4
    assert any("wrapped at column 80" in n for n in run.notes)


def test_trl_console_lines_wrapped_inside_keys_are_rejoined(tmp_path):
    recs = [trl_dict(1e-06 * i, 0.1 * i, 0.25 * i, grad=0.123456789) for i in range(1, 5)]
    wrapped = "".join(r[i:i + 64] + "\n" for r in recs for i in range(0, len(r), 64))
    assert "'learn\ning_rate'" in wrapped or "'rew\nard'" in wrapped or wrapped.count("\n") > 8
    (run,) = load(write(tmp_path, "wrapped_trl.log", wrapped))
    assert len(run.metrics) == 4 and run.metrics["grad_norm/actor"].tolist() == [0.123456789] * 4
    assert any("wrapped at column 64" in n for n in run.notes)


# ---------------------------------------------------------------- 8. generic JSONL: eval records + a config beside it
def test_generic_jsonl_eval_records_and_config_beside(tmp_path):
    recs = []
    for s in range(1, 21):
        recs.append({"step": s, "mean_reward": 0.1, "groups_total": 16, "n_datums": 64, "time/step_s": 10.0})
        if s % 10 == 0:
            recs.append({"step": s, "eval/pass_at_1": s / 100, "eval/n_problems": 20})
    write(tmp_path, "run_metrics.jsonl", "\n".join(json.dumps(r) for r in recs) + "\n")
    # tinker-cookbook meaning: batch_size = prompts (= the log's groups_total), group_size = completions per prompt
    write(tmp_path, "run_config.json", json.dumps({"batch_size": 16, "group_size": 4, "learning_rate": 4e-5}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (run,) = load(tmp_path / "run_metrics.jsonl")
    assert not [w for w in caught if "more than once" in str(w.message)]
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (16, 4, 4e-5)
    assert run.evals["step"].tolist() == [10, 20] and run.evals["eval/score"].tolist() == [0.1, 0.2]
    assert len(run.metrics) == 20
    # without groups_total the meaning of group_size is not guessed: unknown, with the --set hint
    write(tmp_path, "b_metrics.jsonl", "\n".join(json.dumps({"step": s, "mean_reward": 0.1}) for s in (1, 2)) + "\n")
    write(tmp_path, "b_config.json", json.dumps({"batch_size": 16, "group_size": 4, "learning_rate": 4e-5}))
    (run,) = load(tmp_path / "b_metrics.jsonl")
    assert run.meta.group_size is None and run.meta.lr == 4e-5
    assert any("group_size counts" in n and "--set" in n for n in run.notes)


def test_training_args_bin_is_never_unpickled(tmp_path, monkeypatch):
    import pickle
    (tmp_path / "training_args.bin").write_bytes(pickle.dumps({"x": 1}))
    write(tmp_path, "console.log", trl_dict(1e-6, 0.1, 0.5) + "\n" + trl_dict(1e-6, 0.2, 1.0) + "\n")
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    runs = quiet_load(tmp_path)
    assert [r.meta.source_format for r in runs] == ["trl-console"]


# ---------------------------------------------------------------- 9. new formats by content
def test_nemo_rl_step_blocks(tmp_path):
    # reproduced from NeMo-RL's console prints (as in NeMo-RL-derived training loops in public code: "\n📊 Training
    # Results:", "  • Loss: {:.4f}", "\n⏱️  Timing:", "  • Total step time: {:.2f}s", "  • {key}: {value:.2f}s
    # ({percent:.1f}%)", under a "===== Step N/M =====" banner) and the issue's description
    block = lambda n, r, gen, train, tot: (
        f"========================= Step {n}/100 =========================\n"
        "▶ Generating responses for batch of size 512...\n"
        "\n📊 Training Results:\n"
        f"  • Loss: 0.0123\n  • Avg Reward: {r}\n  • Mean Generation Length: 812.5\n"
        "\n⏱️  Timing:\n"
        f"  • Total step time: {tot}s\n  • exposed_generation: {gen}s (40.0%)\n"
        f"  • policy_training: {train}s (30.0%)\n  • reward_calculation: 1.20s (1.0%)\n")
    p = write(tmp_path, "nemo.log", block(1, 0.25, 40.5, 30.25, 100.0) + block(2, 0.31, 41.0, 30.5, 101.5))
    assert detect_format(p) == "nemo-rl"
    (run,) = load(p)
    m = run.metrics
    assert list(m["step"]) == [1, 2]
    assert m["reward/mean"].tolist() == [0.25, 0.31]
    assert m["time/gen_s"].tolist() == [40.5, 41.0] and m["time/train_s"].tolist() == [30.25, 30.5]
    assert m["time/step_s"].tolist() == [100.0, 101.5] and m["time/reward_s"].tolist() == [1.2, 1.2]
    # the "  - " bullet variant and lower-case "training results" of other NeMo-RL loops
    alt = block(1, 0.25, 40.5, 30.25, 100.0).replace("  • ", "  - ").replace("Training Results", "training results")
    (run,) = load(write(tmp_path, "nemo2.log", alt))
    assert run.metrics["time/gen_s"].tolist() == [40.5] and run.metrics["reward/mean"].tolist() == [0.25]


def test_slime_perf_records(tmp_path):
    # reproduced from slime's console records as they appear in public slime tooling tests (a Ray prefix, a time
    # stamp, "metrics.py:89 - perf N: {...}" with perf/rollout_time, perf/train_time, perf/step_time, values such as
    # tensor(0.5)) and the description ("perf N: {...}" rollout records, N the rollout id)
    pre = f"{ESC}[36m(RolloutManager pid=1){ESC}[0m [2026-09-10 00:01:0{{n}}.000 rollout_manager] metrics.py:89 - "
    lines = [pre.format(n=0) + "eval 0: {'eval/gsm8k': 0.55, 'perf/rollout_time': 2000.0}"]
    for n in (0, 1, 2):
        lines.append(pre.format(n=n) + f"rollout {n}: {{'rollout/raw_reward': 0.{n + 1}, 'rollout/response_len/mean': "
                     "900.0}")
        lines.append(pre.format(n=n) + f"perf {n}: {{'perf/rollout_time': {50.0 + n}, 'perf/train_time': 20.0, "
                     "'perf/step_time': 75.0, 'unrelated': tensor(0.5)}")
    lines.append(pre.format(n=3) + "eval 3: {'eval/gsm8k': 0.61, 'perf/rollout_time': 1900.0}")
    p = write(tmp_path, "slime.log", "\n".join(lines) + "\n")
    assert detect_format(p) == "slime"
    (run,) = load(p)
    m = run.metrics
    assert list(m["step"]) == [1, 2, 3]  # rollout ids from 0: renumbered 1-based
    assert m["time/gen_s"].tolist() == [50.0, 51.0, 52.0] and m["time/train_s"].tolist() == [20.0] * 3
    assert m["time/step_s"].tolist() == [75.0] * 3 and m["raw/unrelated"].tolist() == [0.5] * 3
    assert m["reward/mean"].tolist() == [0.1, 0.2, 0.3]
    # "eval 0" and "eval 3": evaluation points, their timings not mixed into the training steps; each is attributed
    # to the last training record logged at or before its id (rollout 0 = step 1; id 3 after rollout 2 = step 3)
    assert run.evals["eval/score"].tolist() == [0.55, 0.61] and run.evals["step"].tolist() == [1, 3]


def test_wandb_console_run_summary_and_a_verl_log_with_no_step_metrics(tmp_path):
    summary = ("wandb: Run history:\nwandb:   train/reward ▁▃▅█\nwandb:\nwandb: Run summary:\n"
               "wandb:   train/global_step 500\nwandb:   train/reward 0.82\nwandb:   train/grad_norm 0.05\nwandb:\n"
               "wandb: 🚀 View run exp1 at: https://wandb.ai/x/y/runs/abc\n")
    p = write(tmp_path, "wandb.log", "Training...\n" + summary)
    assert detect_format(p) == "wandb-summary"
    (run,) = load(p)
    assert list(run.metrics["step"]) == [500] and run.metrics["reward/mean"].tolist() == [0.82]
    assert any("final values only" in n for n in run.notes)
    # a verl console's W&B summary behind Ray prefixes, names right-aligned (reproduced from a public verl console's
    # end: "(TaskRunner pid=132393) wandb:                     actor/grad_norm 0.07587"), names with spaces
    ray = "(TaskRunner pid=132393) wandb:"
    verl_sum = (f"{ray} \n{ray} Run summary:\n{ray}                       actor/entropy 0.06955\n"
                f"{ray}                     actor/grad_norm 0.07587\n{ray}                training/global_step 435\n"
                f"{ray}                       learning rate 0.0\n{ray} \n{ray} 🚀 View run x at: https://wandb.ai/x\n")
    p = write(tmp_path, "verl_wandb_summary.log", "(TaskRunner pid=132393) Training from scratch\n" + verl_sum)
    assert detect_format(p) == "wandb-summary"
    (run,) = load(p)
    assert list(run.metrics["step"]) == [435] and run.metrics["grad_norm/actor"].tolist() == [0.07587]
    assert run.metrics["raw/learning rate"].tolist() == [0.0]
    # a verl console whose logger was W&B only: one line saying so and what to export instead
    p = write(tmp_path, "verl_wandb_only.log", "python3 -m verl.trainer.main_ppo data.train_batch_size=8 "
              "trainer.logger=['wandb']\n(TaskRunner pid=1) Training from scratch\n")
    with pytest.raises(UserError) as err:
        load(p)
    msg = str(err.value)
    assert "\n" not in msg and "no step metrics" in msg and "export" in msg and "verl_wandb_only.log" in msg


# ---------------------------------------------------------------- 10. the unknown-format error names --log-format
def test_unknown_format_error_names_the_real_flag(tmp_path):
    p = write(tmp_path, "mystery.txt", "hello\nworld\n")
    with pytest.raises(UserError, match="--log-format"):
        load(p)
    with pytest.raises(UserError, match="--log-format"):
        load(p, fmt="nope")
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and "--log-format" in r.stderr and "give --format" not in r.stderr


def test_regression_trl_console_epoch_inf(tmp_path):
    # fuzz crash: an 'epoch' of inf in a TRL dict line (OverflowError in the epoch-growth step inference)
    text = "\n".join(trl_dict(1e-06, 0.1, e) for e in ("0.31", "inf", "0.35")) + "\n"
    (run,) = quiet_load(write(tmp_path, "t.log", text))
    assert run.meta.step_source == "records counted" and len(run.metrics) == 3


def test_ms_swift_global_step_over_max_steps(tmp_path):
    # reproduced from ms-swift's logging.jsonl / console dicts: "global_step/max_steps": "5/500" carries the step
    rec = lambda s: {"loss": 0.0, "grad_norm": 0.5, "learning_rate": 1e-06, "reward": 0.1 * s, "epoch": 0.01 * s,
                     "global_step/max_steps": f"{5 * s}/500", "percentage": f"{s}.00%", "elapsed_time": "2m 3s"}
    p = write(tmp_path, "logging.jsonl", "\n".join(json.dumps(rec(s)) for s in (1, 2, 3)) + "\n")
    (run,) = quiet_load(p)
    assert list(run.metrics["step"]) == [5, 10, 15] and run.metrics["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3])
    p = write(tmp_path, "swift_console.log", "\n".join(repr(rec(s)) for s in (1, 2, 3)) + "\n")
    assert detect_format(p) == "trl-console"
    (run,) = quiet_load(p)
    assert list(run.metrics["step"]) == [5, 10, 15] and run.meta.step_source == "logged global_step"


def test_trl_console_progress_counter_that_runs_backwards():
    # tests/data/readers_fuzz/trl_console_counter_backwards.log: found by benchmarks/fuzz_readers.py (seed 7): the
    # progress counter corrupted to "1_000/4" and a record split by a stray line made two records share a step,
    # which divided by zero; the step time of such a record is unknown, the run is still read
    from pathlib import Path

    path = Path(__file__).parent / "data" / "readers_fuzz" / "trl_console_counter_backwards.log"
    (run,) = quiet_load(path, fmt="trl-console")
    assert len(run.metrics) == 3 and run.meta.lr == 4e-06


def _buffered_trl_console(tmp_path, reached=True, n_records=6, every=5, total=32, per_epoch=16):
    # stdout (the dicts) flushed in one chunk after stderr's progress bar, as with `nohup python train.py > log 2>&1`
    # (tests/data/readers_wild/SOURCES.md: the hotpotqa-agent GRPO log in benchmarks/results/readers_review.md)
    last = total if reached else total - 10
    bars = "".join(f" {i}/{total} [00:{i:02d}<00:10, 1.00s/it]" for i in range(1, last + 1))
    dicts = "\n".join(f"{{'loss': 0.1, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': {round(every * i / per_epoch, 2)}}}"
                      for i in range(1, n_records + 1))
    p = tmp_path / "nohup.out"
    p.write_text("Starting GRPO training...\n" + bars + "\n" + dicts + "\n")
    return p


def test_dicts_flushed_after_the_bar_take_their_steps_from_the_bar_total(tmp_path):
    # 32 steps (2 epochs of 16), a record every 5 steps: 6 records at 5..30; epochs printed rounded (0.31, 0.62, ...)
    run = load(_buffered_trl_console(tmp_path))[0]
    assert run.meta.step_source == "progress total"
    assert list(run.metrics["step"]) == [5, 10, 15, 20, 25, 30]


def test_rounded_epochs_are_not_a_cadence_and_an_unfinished_bar_gives_no_total(tmp_path):
    # the bar stopped at 30/40: no total to fit; a record every 2 of 187 steps per epoch, printed rounded: 0.01,
    # 0.02, ..., 0.07, 0.09, ...: the rounding unit 0.01 is not the cadence (a step of 0.02 shows it), so the records
    # are counted (before: 'epoch growth' numbered them 1..7, 9, ..., 13 as if one had been lost)
    run = load(_buffered_trl_console(tmp_path, reached=False, n_records=12, every=2, total=40, per_epoch=187))[0]
    assert run.meta.step_source == "records counted"
    assert list(run.metrics["step"]) == list(range(1, 13))
