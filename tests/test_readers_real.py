"""Every file in ../shared/logs/real/ (third-party logs beside the repository; its README.md names each source) read
right, against values read off the files by hand. Skipped, naming the folder, where it is absent.

Each assertion says where in the file its value is (line numbers are 1-based lines of the file as stored).
"""

import math
from pathlib import Path

import pytest

from _shared import shared_logs
from rlbatch.analysis.curves import summarize_run
from rlbatch.readers import detect_format, load

REAL = shared_logs("real")


def _one(name):
    runs = load(REAL / name)
    assert len(runs) == 1
    return runs[0]


def test_verl_file_logger_agentloop_ppo():
    name = "verl_file_logger_ppo_gsm8k_agentloop.jsonl"
    assert detect_format(REAL / name) == "verl-jsonl"
    run = _one(name)
    m, ev = run.metrics, run.evals
    s = summarize_run(run)
    # line 1: {"step": 0, "data": {val-aux/..., "val-core/openai/gsm8k/acc/mean@1": 0.0, val-aux/num_turns/...}}:
    # validation only -> an evaluation at step 0, not a training step; lines 2-4 are steps 1, 2, 3 (not renumbered)
    assert list(m["step"]) == [1, 2, 3]
    assert s["steps"] == 3 and s["log_last_step"] == 3
    assert list(ev["step"]) == [0] and ev["eval/score"].iloc[0] == 0.0
    assert s["last_eval_step"] == 0 and s["last_eval_score"] == 0.0
    # lines 2-4: "actor/lr": 1e-06 on every step -> peak 1e-06, constant
    assert s["lr"] == 1e-06 and run.meta.lr_schedule["decay"] == "constant"
    # critic metrics (critic/grad_norm, critic/vf_explained_var) -> PPO; no config in the file -> G = 1 (verl's
    # default, flagged), P unknown with the --set hint
    assert run.meta.algorithm == "ppo"
    assert run.meta.group_size == 1 and run.meta.group_size_source == "verl default"
    assert run.meta.prompts_per_step is None and any("--set" in n for n in run.notes)
    # generation: line 2 timing_s/gen 15.242993264924735; line 3 timing_s/gen 0.061001008143648505 (near 0) with
    # timing_s/generate_async 114.61636280408129; line 4 timing_s/gen 218.38081195298582
    assert m["time/gen_s"].tolist() == pytest.approx([15.242993264924735, 114.61636280408129, 218.38081195298582])
    # update: timing_s/update_actor + timing_s/update_critic per line (46.598354232963175 + 55.35152235906571 on
    # line 2, 35.1360020309221 + 14.599747207015753 on line 3, 74.80759648582898 + 15.481123674893752 on line 4)
    assert m["time/train_s"].tolist() == pytest.approx([46.598354232963175 + 55.35152235906571,
                                                        35.1360020309221 + 14.599747207015753,
                                                        74.80759648582898 + 15.481123674893752])
    # timing_s/step: 130.3738914320711 (line 2), 54.33354720589705 (line 3)
    assert m["time/step_s"].iloc[:2].tolist() == pytest.approx([130.3738914320711, 54.33354720589705])
    # actor/grad_norm 47.5569953918457, 75.55779266357422, 0.731117844581604; critic/grad_norm 58.08985471725464,
    # 212.65137100219727, 10.678841710090637 (lines 2-4)
    assert m["grad_norm/actor"].tolist() == pytest.approx([47.5569953918457, 75.55779266357422, 0.731117844581604])
    assert m["grad_norm/critic"].tolist() == pytest.approx([58.08985471725464, 212.65137100219727,
                                                           10.678841710090637])


def test_tinker_jsonl_with_eval_records_and_config_beside():
    name = "tinker_grpo_qwen3_4b_metrics.jsonl"
    run = _one(name)
    m, ev = run.metrics, run.evals
    s = summarize_run(run)
    # training records: steps 0..100 (line 1 "step": 0 carries mean_reward etc.: a training step -> 1-based);
    # eval records share step numbers (line 12 {"step": 10, "eval/pass_at_1": 0.35, ...} after line 11's train record)
    assert s["steps"] == 101 and len(m) == 101 and s["log_last_step"] == 100
    assert not [w for w in run.notes if "more than once" in w]
    assert len(ev) == 10
    # eval at logged step 10 (line 12) = canonical 11, pass_at_1 0.35; last: line 111 {"step": 100, pass_at_1 0.3}
    assert ev["step"].iloc[0] == 11 and ev["eval/score"].iloc[0] == 0.35
    assert s["last_eval_step"] == 101 and s["last_eval_score"] == 0.3
    # config beside (tinker_grpo_qwen3_4b_config.json): "batch_size": 128, "group_size": 8, "learning_rate": 5e-06,
    # "model_name": "Qwen/Qwen3-4B-Instruct-2507"; the log's "groups_total": 8 per step says group_size counts prompts
    # (the README: each prompt gets 128 / 8 = 16 completions) -> P = 8, G = 16
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.batch_size) == (8, 16, 128)
    assert run.meta.lr == 5e-06 and run.meta.model == "Qwen/Qwen3-4B-Instruct-2507"
    # line 1: "n_datums": 48 (5 of 8 groups skipped: 3 x 16), "time/sample_s": 291.7, "time/train_s": 5.7,
    # "time/step_s": 317.3, "mean_reward": 0.6125
    r0 = m.iloc[0]
    assert r0["samples/retained"] == 48 and run.meta.samples_source == "log"
    assert (r0["time/gen_s"], r0["time/train_s"], r0["time/step_s"], r0["reward/mean"]) == (291.7, 5.7, 317.3, 0.6125)
    # line 2: "n_datums": 80 -> cumulative 128; line 110 (step 100): "mean_reward": 0.5
    assert m["samples/retained"].iloc[1] == 128
    assert s["reward_mean_last"] == 0.5
    # no gradient norm in this loop's log
    assert s["grad_norm_actor_mean"] is None


def test_trl_console_dicts_issue_3452():
    name = "trl_grpo_console_dicts_issue_trl3452.log"
    assert detect_format(REAL / name) == "trl-console"
    run = _one(name)
    m = run.metrics
    s = summarize_run(run)
    # four dict lines (lines 1-4), no step numbers, no progress counter: records counted, the note says so
    assert s["steps"] == 4 and run.meta.step_source == "records counted"
    assert any("records numbered 1, 2" in n for n in run.notes)
    # 'epoch': 0.31 on line 1: the paste begins mid-run, said in a note
    assert any("begins mid-run" in n for n in run.notes)
    # 'grad_norm': 0.08656957000494003 (line 1) ... 0.10363585501909256 (line 4)
    assert m["grad_norm/actor"].iloc[0] == 0.08656957000494003 and m["grad_norm/actor"].iloc[3] == 0.10363585501909256
    # 'reward': 1.7171093285083772 (line 1), 1.968537563085556 (line 4); 'reward_std': 0.5700982138514519 (line 1)
    assert m["reward/mean"].iloc[0] == 1.7171093285083772 and s["reward_mean_last"] == 1.968537563085556
    assert m["reward/std"].iloc[0] == 0.5700982138514519
    # 'learning_rate': 6.916666666666667e-06 (line 1) falling to 6.291666666666667e-06 (line 4): the peak logged
    # is the first; linear decay as read
    assert s["lr"] == 6.916666666666667e-06
    assert run.meta.lr_schedule["decay"] == "linear" and run.meta.lr_schedule["last"] == 6.291666666666667e-06
    # P and G are not in the output: unknown with the --set hint
    assert s["prompts_per_step"] is None and any("--set" in n for n in run.notes)


def test_primerl_orchestrator_excerpt():
    name = "primerl_orchestrator_excerpt_pr1318.txt"
    assert detect_format(REAL / name) == "prime-rl"
    run = _one(name)
    m = run.metrics
    s = summarize_run(run)
    # line 6: "Step 13 | Time: 72.00s | Reward: 0.3400 | Throughput: 2314.0 tokens/s | Seq. Length: 323.7 ..."
    assert m["step"].iloc[0] == 13
    assert m["time/step_s"].iloc[0] == 72.00 and m["reward/mean"].iloc[0] == 0.3400
    assert m["raw/throughput_tokens_per_s"].iloc[0] == 2314.0
    # line 9: "Step 14 | Time: 69.24s | Reward: 0.3843"
    assert m["time/step_s"].iloc[1] == 69.24 and m["reward/mean"].iloc[1] == 0.3843
    # line 18 (last, cut after "Max. Off-Policy"): "Step 17 | Time: 62.34s | Reward: 0.3537 | Throughput: 2609.5 ..."
    # kept without its cut field
    assert list(m["step"]) == [13, 14, 15, 16, 17]
    assert m["reward/mean"].iloc[-1] == 0.3537 and m["raw/throughput_tokens_per_s"].iloc[-1] == 2609.5
    # "Async Level: 1 | Max. Off-Policy Level: 0" (issue 17's names): staleness 1, no rollout spanned an update
    assert list(m["rollout/staleness_mean"]) == [1, 1, 1, 1, 1]
    assert list(m["rollout/version_span_max"].iloc[:4]) == [0, 0, 0, 0] and m["rollout/version_span_max"].isna().iloc[-1]
    # the excerpt begins at step 13: flagged like a resumed run (5 steps in the file, 17 optimizer steps covered)
    assert run.meta.resumed_from_step == 12 and run.meta.steps_in_file == 5 and s["steps"] == 17
    # "Generating rollouts (train): 100%|...| 512/512" (lines 8, 11, ...): 512 rollouts per step = B; P and G
    # separately unknown, with the --set hint
    assert s["batch_size"] == 512 and s["group_size"] is None and any("--set" in n for n in run.notes)
    assert math.isfinite(s["time_per_step_s"])


VERL = REAL.parent / "verl"


def test_verl_ppo_console_group_size_default_flagged_and_peak_lr():
    run = load(VERL / "qwen2.5-0.5b_gsm8k_ppo_p256.log")[0]
    # line 34: the printed config's 'rollout': {...} has no 'n'; line 217: vLLM kwargs {'n': 1, 'logprobs': 1, ...}:
    # G = 1 is verl's default, flagged
    assert run.meta.group_size == 1 and run.meta.group_size_source == "verl default"
    assert any("verl's default n = 1" in n for n in run.notes)
    # line 251 (step:0, a training line: renumbered 1-based) ... actor/lr(1e-4):0.010 on all 435 step lines -> 1e-6,
    # the peak, constant
    sched = run.meta.lr_schedule
    assert sched["peak"] == pytest.approx(1e-6) and sched["decay"] == "constant" and sched["warmup_steps"] == 0
    assert run.meta.lr == pytest.approx(1e-6)
    # line 251: critic/grad_norm:950.052, timing/update_critic:16.185 + timing/update_actor:20.611
    first = run.metrics.iloc[0]
    assert first["grad_norm/critic"] == pytest.approx(950.052)
    assert first["time/train_s"] == pytest.approx(16.185 + 20.611) and first["time/gen_s"] == pytest.approx(18.859)
    assert getattr(run.meta, "resumed_from_step", None) is None


def test_the_real_directory_reads_four_runs_the_config_with_its_log():
    with pytest.warns(Warning):
        runs = load(REAL)
    # README.md is skipped (unknown format); tinker_grpo_qwen3_4b_config.json is read with its metrics log, not as
    # a run of its own
    assert sorted(r.meta.source_format for r in runs) == ["jsonl", "prime-rl", "trl-console", "verl-jsonl"]
    tinker = next(r for r in runs if r.meta.source_format == "jsonl")
    assert (tinker.meta.prompts_per_step, tinker.meta.group_size) == (8, 16)
