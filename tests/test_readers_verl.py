"""The three real verl console logs in ../shared/logs/verl/ (third-party; skipped, naming the folder, where absent):
per-log values read off the files by hand.

Step counts: the issue quoted 1120 / 210 / 434, which are the *last step numbers printed* (``log_last_step``).
The training steps actually logged are 1119 / 210 / 435:
- deepseek: steps 1..1119 carry training metrics; ``step:1120`` is a validation-only line (verl of early 2025 logged
  the final validation one step past the last update; 7473 GSM8K prompts // 1024 = 7 batches x 160 epochs = 1120
  planned, 1119 run);
- qwen2-7b: ``step:0`` is validation before training; steps 1..210 train (14966 prompts // 1024 = 14 x 15 epochs);
- qwen2.5-0.5b PPO: verl of Dec 2024 counted from 0: steps 0..434 all train (7473 // 256 = 29 x 15 epochs = 435).
"""

import math

import pytest

from _shared import shared_logs
from rlbatch.analysis.curves import summarize_run
from rlbatch.readers import detect_format, load

LOGS = {
    "deepseek-7b_gsm8k_grpo_p1024_n5.log": dict(
        steps=1119, last_logged=1120, P=1024, G=5, mini=256, algorithm="grpo", model="deepseek-ai/deepseek-llm-7b-chat",
        # step:100 - ... actor/grad_norm:0.147 ... timing_s/gen:40.641 ... timing_s/step:110.906
        at_step=(100, {"time/gen_s": 40.641, "time/step_s": 110.906, "grad_norm/actor": 0.147}),
        # "Final validation metrics: {'val/test_score/openai/gsm8k': 0.6974981046247157}" (then step:1120 - ...:0.697)
        last_eval=(1119, 0.6974981046247157), first_eval=(10, 0.648), n_evals=112),
    "qwen2-7b_math_gpg_p1024_n5.log": dict(
        steps=210, last_logged=210, P=1024, G=5, mini=256, algorithm="gpg", model="Qwen/Qwen2-7B-Instruct",
        # step:100 - ... val-core/openai/gsm8k/reward/mean@1:0.870 - val-core/.../MATH-lighteval/...:0.505 ...
        #   timing_s/gen:88.056 - timing_s/testing:126.065 - timing_s/step:503.465
        at_step=(100, {"time/gen_s": 88.056, "time/step_s": 503.465, "grad_norm/actor": 0.112}),
        # Final validation metrics: gsm8k 0.8794541319181198, MATH 0.49879951980792314 -> the first dataset in
        # name order (DigitalLearningGmbH/MATH-lighteval before openai/gsm8k; issue 53), gsm8k as eval/score/...
        last_eval=(210, 0.49879951980792314),
        # Initial validation metrics: gsm8k 0.221379833206975, MATH 0.5140056022408963 (step 0)
        first_eval=(0, 0.5140056022408963), n_evals=43),
    "qwen2.5-0.5b_gsm8k_ppo_p256.log": dict(
        steps=435, last_logged=434, P=256, G=1, mini=64, algorithm="ppo", model="Qwen/Qwen2.5-0.5B-Instruct",
        # verl step:99 (0-based) = canonical step 100: timing/gen:17.571 ... critic/grad_norm:17.006 ...
        #   timing/update_actor:20.438 ... actor/grad_norm:2.452
        at_step=(100, {"time/gen_s": 17.571, "grad_norm/critic": 17.006, "grad_norm/actor": 2.452}),
        # "Final validation metrics: {'test_score/openai/gsm8k': 0.5685975609756098}" after the last update
        last_eval=(435, 0.5685975609756098),
        # "Initial validation metrics: {'test_score/openai/gsm8k': 0.0007621951219512195}"
        first_eval=(0, 0.0007621951219512195), n_evals=45),
}


@pytest.fixture
def verl_dir():
    return shared_logs("verl", module=False)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_verl_log_values(verl_dir, name):
    truth = LOGS[name]
    assert detect_format(verl_dir / name) == "verl"
    (run,) = load(verl_dir / name)
    m, ev, meta = run.metrics, run.evals, run.meta
    assert len(m) == truth["steps"] and m["step"].tolist() == list(range(1, truth["steps"] + 1))
    assert meta.log_last_step == truth["last_logged"]
    assert (meta.prompts_per_step, meta.group_size) == (truth["P"], truth["G"])
    # the update batch (LR rule, grad-norm fit): actor.ppo_mini_batch_size x rollout.n; the rollout: P x G
    assert meta.batch_size == truth["mini"] * truth["G"] and meta.rollout_batch_size == truth["P"] * truth["G"]
    assert meta.lr == pytest.approx(1e-6)
    assert meta.algorithm == truth["algorithm"] and meta.model == truth["model"]
    step, values = truth["at_step"]
    row = m[m["step"] == step].iloc[0]
    for col, v in values.items():
        assert row[col] == pytest.approx(v), col
    # retained samples: no counter in verl logs -> steps x B
    assert meta.samples_source == "steps x B"
    assert row["samples/retained"] == step * truth["P"] * truth["G"]
    assert len(ev) == truth["n_evals"]
    assert (int(ev["step"].iloc[0]), ev["eval/score"].iloc[0]) == (truth["first_eval"][0],
                                                                   pytest.approx(truth["first_eval"][1]))
    assert (int(ev["step"].iloc[-1]), ev["eval/score"].iloc[-1]) == (truth["last_eval"][0],
                                                                    pytest.approx(truth["last_eval"][1]))
    s = summarize_run(run)
    assert s["steps"] == truth["steps"] and s["last_eval_score"] == pytest.approx(truth["last_eval"][1])
    assert s["samples_retained"] == truth["steps"] * truth["P"] * truth["G"]
    assert 0 < s["gen_time_share"] < 1 and s["throughput_samples_per_s"] > 0


def test_ppo_old_schema_units_and_step_time(verl_dir):
    (run,) = load(verl_dir / "qwen2.5-0.5b_gsm8k_ppo_p256.log")
    m = run.metrics
    first = m.iloc[0]
    # actor/lr(1e-4):0.010 -> 1e-6
    assert first["lr"] == pytest.approx(1e-6)
    # no step timer in 2024 verl: step 0 = gen 18.859 + ref 5.501 + values 5.664 + adv 0.058
    #   + update_critic 16.185 + update_actor 20.611
    assert first["time/step_s"] == pytest.approx(18.859 + 5.501 + 5.664 + 0.058 + 16.185 + 20.611)
    assert first["time/train_s"] == pytest.approx(16.185 + 20.611)
    assert summarize_run(run)["grad_norm_critic_mean"] > 0


def test_wall_clock_excludes_testing_and_checkpoint(verl_dir):
    (run,) = load(verl_dir / "qwen2-7b_math_gpg_p1024_n5.log")
    m = run.metrics.set_index("step")
    # step 100: timing_s/step 503.465 includes timing_s/testing 126.065 and timing_s/save_checkpoint 132.479
    assert m.loc[100, "time/wall_s"] - m.loc[99, "time/wall_s"] == pytest.approx(503.465 - 126.065 - 132.479)
    assert m.loc[100, "time/step_s"] == pytest.approx(503.465)
    assert not math.isnan(m["time/wall_s"].iloc[-1])


def _console_with_warning_mid_config(tmp_path, steps=True):
    # verl pprints its config from the TaskRunner actor; the same actor's DeprecationWarning can land mid-dict
    # (as in Chrisytz/verl's verl_demo.log); pprint's own lines are indented
    pre = "\x1b[36m(TaskRunner pid=7)\x1b[0m "
    lines = [pre + "{'actor_rollout_ref': {'actor': {'optim': {'lr': 3e-06},",
             pre + "                                 'ppo_mini_batch_size': 16},",
             pre + "                       'rollout': {'n': 4}},",
             pre + "DeprecationWarning: `ray.state.available_resources_per_node` is a private attribute",
             "\x1b[36m(WorkerDict pid=9)\x1b[0m loading weights",
             pre + " 'data': {'train_batch_size': 64},",
             pre + " 'trainer': {'logger': ['console'], 'n_gpus_per_node': 1, 'nnodes': 1}}"]
    if steps:
        lines += [pre + f"step:{s} - actor/grad_norm:0.5 - timing_s/step:2.0" for s in (1, 2)]
    p = tmp_path / "run.log"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_printed_config_survives_a_warning_printed_mid_dict(tmp_path):
    run = load(_console_with_warning_mid_config(tmp_path))[0]
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (64, 4, 3e-06)
    assert run.meta.batch_size == 16 * 4  # ppo_mini_batch_size (prompts) x n


def test_console_logger_without_steps_says_it_stopped_not_wandb(tmp_path):
    from rlbatch.errors import UserError

    with pytest.raises(UserError, match="includes 'console' \\(it stopped before its first step finished\\?\\)"):
        load(_console_with_warning_mid_config(tmp_path, steps=False))


def test_inspect_a_stepless_verl_console_reads_its_printed_config_not_defaults(tmp_path):
    from rlbatch.explain import inspect_path

    res = inspect_path(_console_with_warning_mid_config(tmp_path, steps=False))
    assert res["kind"] == "launch"
    b = res["batch"]
    assert (b["prompts_per_step"], b["responses_per_prompt"], b["responses_per_update"], b["lr"]) == (64, 4, 64, 3e-06)
    assert b["sources"]["prompts_per_step"] == "data.train_batch_size=64 (run.log)"  # not "not set: default 1024"
