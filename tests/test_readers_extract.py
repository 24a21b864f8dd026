"""The general extraction layer (rlbatch.readers.extract / generic) on each record form and container.

Every text here is written in the test; the values asserted are the ones written into it.
"""

import json
import math

import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.errors import UserError
from rlbatch.readers import detect_format, extract as X, load


def _one(path):
    runs = load(path)
    assert len(runs) == 1
    return runs[0]


def test_jsonl_record_kinds_config_record_and_eval_joined_to_its_step(tmp_path):
    p = tmp_path / "custom.jsonl"
    lines = [
        {"type": "config", "args": {"n_prompts": 32, "num_generations": 4, "learning_rate": 3e-6}},
        {"type": "eval", "step": 0, "accuracy": 0.20, "n_problems": 100},
        {"type": "train", "step": 1, "loss": 0.5, "reward_mean": 0.25, "gen_time_s": 10.0, "step_time_s": 14.0},
        {"type": "train", "step": 2, "loss": 0.4, "reward_mean": 0.35, "gen_time_s": 11.0, "step_time_s": 15.0},
        {"type": "eval", "step": 2, "accuracy": 0.40, "n_problems": 100},
        {"type": "summary", "train_runtime": 29.0, "step": 2},
    ]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = _one(p)
    s = summarize_run(run)
    # the config record is no step; P, G, lr from it (args/n_prompts, args/num_generations, args/learning_rate)
    assert (s["prompts_per_step"], s["group_size"], s["batch_size"]) == (32, 4, 128)
    assert s["lr"] == 3e-6 and run.meta.config_sources["lr"].startswith("args/learning_rate")
    # eval records at their steps (0 = before training, 2); 'accuracy' is the score
    assert s["steps"] == 2 and list(run.evals["step"]) == [0, 2]
    assert list(run.evals["eval/score"]) == [0.2, 0.4] and run.meta.metric_sources["eval/score"] == "accuracy"
    assert list(run.metrics["time/gen_s"]) == [10.0, 11.0] and list(run.metrics["time/step_s"]) == [14.0, 15.0]
    assert list(run.metrics["reward/mean"]) == [0.25, 0.35]


def test_python_dicts_glued_to_progress_bars_labelled_and_wrapped(tmp_path):
    p = tmp_path / "console.txt"
    p.write_text(
        "Starting\n"
        " 10%|#         | 1/10 [00:05<00:45]step 1: {'train/loss': 0.5, 'train/reward_mean': 0.1,\n"
        "   'train/lr': 2e-06}\n"
        "noise line\n"
        "model.py:660 - step 2: {'train/loss': 0.4, 'train/reward_mean': 0.2, 'train/lr': 2e-06, 'x': np.float64(3.0)}\n"
        "step 3: {'train/loss': nan, 'train/reward_mean': 0.3, 'train/lr': 2e-06}\n")
    run = _one(p)
    assert run.meta.source_format == "generic"
    assert list(run.metrics["step"]) == [1, 2, 3]
    assert list(run.metrics["reward/mean"]) == [0.1, 0.2, 0.3]  # train/reward_mean by meaning
    assert run.meta.lr == 2e-06 and run.metrics["raw/x"].iloc[1] == 3.0


def test_a_dict_repr_is_never_evaluated(tmp_path):
    p = tmp_path / "evil.txt"
    p.write_text("step 1: {'loss': __import__('os').system('touch PWNED')}\nstep 2: {'loss': 0.3, 'reward': 1.0}\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [2]  # the call is not a literal: that record is skipped, not run
    assert not (tmp_path / "PWNED").exists()


def test_key_value_runs_tables_and_val_before_train(tmp_path):
    p = tmp_path / "mlx.log"
    p.write_text(
        "Iter 1: Val loss 0.900, Val accuracy_mean 0.250, Val took 10.0s\n"
        "Iter 1: Train loss 0.800, Total rewards mean 0.100, Learning Rate 1.000e-05, It/sec 0.050\n"
        "Iter 2: Train loss 0.700, Total rewards mean 0.200, Learning Rate 1.000e-05, It/sec 0.050\n"
        "Iter 2: Val loss 0.800, Val accuracy_mean 0.500, Val took 10.0s\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2]
    assert list(run.metrics["reward/mean"]) == [0.1, 0.2] and run.meta.lr == 1e-05
    # the first Val is printed before Iter 1's training record: taken before that update (step 0); the second after
    assert list(run.evals["step"]) == [0, 2] and list(run.evals["eval/score"]) == [0.25, 0.5]


def test_step_pipe_tables_and_key_equals_value(tmp_path):
    p = tmp_path / "pipe.log"
    p.write_text("Step 1 | loss: 0.5 | reward: 0.1 | step_time: 3.0s\nStep 2 | loss: 0.4 | reward: 0.2 | step_time: "
                 "3.5s\n")
    run = _one(p)
    assert list(run.metrics["time/step_s"]) == [3.0, 3.5] and list(run.metrics["reward/mean"]) == [0.1, 0.2]
    q = tmp_path / "eq.log"
    q.write_text("[train] step=1 loss=0.5 reward_mean=0.1 lr=1e-6\n[train] step=2 loss=0.4 reward_mean=0.3 lr=1e-6\n"
                 "[eval] step=2 accuracy=0.6\n")
    run = _one(q)
    assert list(run.metrics["reward/mean"]) == [0.1, 0.3] and run.meta.lr == 1e-6
    assert list(run.evals["step"]) == [2] and list(run.evals["eval/score"]) == [0.6]


def test_markdown_headings_label_tables_and_row_labels_keep_names_apart(tmp_path):
    p = tmp_path / "rollouts.md"
    p.write_text(
        "# Log\n\n## Rollout Step 0\n\n| Metric | Value |\n|---|---|\n| Total Reward Mean | 1.5 ± 0.2 |\n"
        "| Accuracy Rate | 0.5 |\n\n### Stage table\n\n| Stage | MDI | AEI |\n|---|---|---|\n| Early | 1.0 | 2.0 |\n"
        "| Late | 3.0 | 4.0 |\n\n## Rollout Step 1\n\n| Metric | Value |\n|---|---|\n| Total Reward Mean | 2.5 |\n"
        "| Accuracy Rate | 0.75 |\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2]  # rollout steps 0, 1 renumbered 1-based
    assert list(run.metrics["reward/mean"]) == [1.5, 2.5]  # "1.5 ± 0.2" -> 1.5
    assert run.metrics["raw/early/mdi"].iloc[0] == 1.0 and run.metrics["raw/late/aei"].iloc[0] == 4.0


def test_notebook_html_table_config_cell_and_unsloth_banner(tmp_path):
    table = ("<div><progress value='3' max='10'></progress></div><table border=\"1\" class=\"dataframe\"><thead>"
             "<tr><th>Step</th><th>Training Loss</th><th>reward</th><th>reward_std</th></tr></thead><tbody>"
             "<tr><td>1</td><td>0.0</td><td>0.10</td><td>0.0</td></tr>"
             "<tr><td>2</td><td>0.0</td><td>0.30</td><td>0.1</td></tr>"
             "<tr><td>3</td><td>0.0</td><td>0.20</td><td>0.1</td></tr></tbody></table>")
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": ["training_args = GRPOConfig(\n", "    learning_rate = 5e-6,\n",
                                         "    per_device_train_batch_size = 8,\n", "    num_generations = 4,\n", ")"],
         "outputs": []},
        {"cell_type": "code", "source": "trainer.train()", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": [
                "Unsloth: We now expect `per_device_train_batch_size` to be a multiple of `num_generations`.\n",
                "\\        /    Data Parallel GPUs = 1 | Total batch size (8 x 1 x 1) = 8\n"]},
            {"output_type": "display_data", "data": {"text/html": [table], "text/plain": ["<IPython>"]},
             "metadata": {}}]}]}
    p = tmp_path / "train.ipynb"
    p.write_text(json.dumps(nb, indent=1))
    assert detect_format(p) == "notebook"
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2, 3] and list(run.metrics["reward/mean"]) == [0.1, 0.3, 0.2]
    # 8 completions per update (banner) / num_generations 4 (config cell) -> P = 2; lr from the config cell
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (2, 4, 5e-6)


def test_two_counters_several_updates_per_rollout(tmp_path):
    p = tmp_path / "xt.jsonl"
    recs = [{"type": "config", "n_prompts": 4, "n_samples_per_prompt": 4, "mini_batch_size": 8, "lr": 1e-6}]
    opt = 0
    for k in (1, 2):
        recs.append({"type": "rollout", "rollout_step": k, "n_retained": 16, "gen_time_s": 5.0 + k})
        for _ in range(2):
            opt += 1
            recs.append({"type": "train", "rollout_step": k, "optimizer_step": opt, "grad_norm": float(opt),
                         "update_time_s": 1.0})
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    run = _one(p)
    m = run.metrics
    assert list(m["step"]) == [1, 2]  # one row per rollout
    assert list(m["grad_norm/actor"]) == [1.5, 3.5]  # the updates' grad norms averaged
    assert list(m["time/train_s"]) == [2.0, 2.0]  # the updates' times summed
    assert list(m["raw/optimizer_step_last"]) == [2, 4] and list(m["samples/retained"]) == [16, 32]
    assert (run.meta.batch_size, run.meta.rollout_batch_size) == (8, 16)
    assert any("updates per rollout" in n for n in run.notes)


def test_several_runs_in_one_file_are_split(tmp_path):
    p = tmp_path / "two.log"
    p.write_text(
        "+ python3 -m verl.trainer.main_ppo data.train_batch_size=16 actor_rollout_ref.rollout.n=4 "
        "actor_rollout_ref.actor.optim.lr=1e-6\n"
        "step:1 - actor/pg_loss:0.1 - critic/score/mean:0.2 - timing_s/gen:5.0 - timing_s/step:9.0\n"
        "step:2 - actor/pg_loss:0.1 - critic/score/mean:0.3 - timing_s/gen:5.0 - timing_s/step:9.0\n"
        "+ python3 -m verl.trainer.main_ppo data.train_batch_size=32 actor_rollout_ref.rollout.n=8 "
        "actor_rollout_ref.actor.optim.lr=2e-6\n"
        "step:1 - actor/pg_loss:0.1 - critic/score/mean:0.4 - timing_s/gen:6.0 - timing_s/step:10.0\n")
    runs = load(p)
    assert [r.run_id for r in runs] == ["two-run1", "two-run2"]
    assert [(r.meta.prompts_per_step, r.meta.group_size, r.meta.lr) for r in runs] == [(16, 4, 1e-6), (32, 8, 2e-6)]
    assert [len(r.metrics) for r in runs] == [2, 1]


def test_ansi_and_carriage_returns(tmp_path):
    p = tmp_path / "output.log"
    p.write_bytes(b"\x1b[32mstep=1 loss=0.5 reward_mean=0.2\x1b[0m\r 50%|#####\rstep=2 loss=0.4 reward_mean=0.3\n")
    run = _one(p)
    assert list(run.metrics["reward/mean"]) == [0.2, 0.3]


def test_eval_score_name_prefers_accuracy_and_never_a_loss():
    assert X.eval_score_name(["eval_loss", "eval_runtime", "eval_token_acc"]) == "eval_token_acc"
    assert X.eval_score_name(["val-aux/x/loss", "heldout_violation_rate", "accuracy"]) == "accuracy"
    assert X.eval_score_name(["eval_loss", "eval_runtime"]) is None


def test_unknown_text_without_records_is_one_clear_error(tmp_path):
    p = tmp_path / "prose.txt"
    p.write_text("This is a README with no numbers at all.\nJust words.\n")
    with pytest.raises(UserError) as err:
        load(p)
    assert "prose.txt" in str(err.value) and "unknown log format" in str(err.value)


def test_find_config_sources():
    cfg = X.find_config("accelerate launch train.py --learning-rate 3e-6 --num-generations 8 "
                        "--per_device_train_batch_size 16\n")
    assert cfg.lr == 3e-6 and cfg.group_size == 8
    assert cfg.sources["group_size"].endswith("(command-line flags)")
    old = X.find_config("Total batch size = 1 | Total steps = 250\n", code=["GRPOConfig(\n num_generations = 8,\n)"])
    # a batch that num_generations does not divide counts prompts (TRL < 0.15): P = 1, G = 8
    assert (old.prompts_per_step, old.group_size) == (1, 8)
    assert math.isclose(X.find_config("", mapping={"args/lr": 2e-5}).lr, 2e-5)


def test_step_header_blocks_of_key_value_lines(tmp_path):
    p = tmp_path / "forge.log"
    p.write_text(
        "WandbBackend: Logged 3 metrics at step 1\n=== [global_reduce] - METRICS STEP 1 ===\n"
        "  grpo_loss/total_loss: 0.5\n  reward/avg_total_reward: 0.25\n  generator_perf/generate_s: 4.0\n"
        "==============================\n=== [global_reduce] - METRICS STEP 2 ===\n  grpo_loss/total_loss: 0.4\n"
        "  reward/avg_total_reward: 0.5\n  generator_perf/generate_s: 4.5\n==============================\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2]
    assert list(run.metrics["raw/reward/avg_total_reward"]) == [0.25, 0.5]


def test_notebook_whose_outputs_are_a_trl_console(tmp_path):
    stream = ["  5%|5 | 1/20 [00:10<03:10, 10.0s/it]{'loss': 0.1, 'grad_norm': 1.0, 'learning_rate': 1e-05, "
              "'reward': 0.2, 'epoch': 0.05}\n",
              " 10%|# | 2/20 [00:20<03:00, 10.0s/it]{'loss': 0.1, 'grad_norm': 1.0, 'learning_rate': 9e-06, "
              "'reward': 0.3, 'epoch': 0.1}\n"]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "outputs": [],
         "source": "args = GRPOConfig(\n  learning_rate = 1e-5,\n  num_generations = 4,\n"
                   "  per_device_train_batch_size = 8,\n)"},
        {"cell_type": "code", "source": "trainer.train()",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": stream}]}]}
    p = tmp_path / "t.ipynb"
    p.write_text(json.dumps(nb))
    run = _one(p)
    assert run.meta.source_format == "notebook (trl-console)" and list(run.metrics["step"]) == [1, 2]
    assert list(run.metrics["time/step_s"]) == [10.0, 10.0]  # the progress bar's elapsed 00:10, 00:20
    # 8 completions per device (TRL counts completions) / num_generations 4 -> P = 2; lr 1e-5 from the config cell
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (2, 4, 1e-5)


def test_records_without_any_counter_are_numbered(tmp_path):
    p = tmp_path / "plain.txt"
    p.write_text("[train] loss=0.5 reward_mean=0.1\n[train] loss=0.4 reward_mean=0.2\n[eval] accuracy=0.7 n=10\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2]
    assert list(run.evals["step"]) == [2] and list(run.evals["eval/score"]) == [0.7]
    assert any("numbered" in n for n in run.notes)


def test_openrlhf_console_progress_postfix_and_its_launch_command(tmp_path):
    p = tmp_path / "openrlhf.log"
    p.write_text(
        "python3 -m openrlhf.cli.train_ppo_ray --rollout-batch-size 128 --n_samples_per_prompt 8 \\\n"
        "   --train_batch_size 256 --actor_learning_rate 5e-7\n"
        "Episode [1/1]:   1%|     | 1/100 [00:30<49:30, policy_loss=0.1, reward=0.5, return=0.4, act_lr=5e-7]\n"
        "Episode [1/1]:   2%|     | 2/100 [01:00<49:00, policy_loss=0.1, reward=0.6, return=0.4, act_lr=5e-7]\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2] and list(run.metrics["reward/mean"]) == [0.5, 0.6]
    # OpenRLHF counts the rollout batch in prompts and the train batch in responses: 128 x 8 = 1024 per rollout,
    # 256 per update (4 updates per rollout)
    m = run.meta
    assert (m.prompts_per_step, m.group_size, m.batch_size, m.rollout_batch_size, m.lr) == (128, 8, 256, 1024, 5e-7)
    assert "openrlhf launch command" in m.config_sources["prompts_per_step"]


def test_ms_swift_launch_counts_processes(tmp_path):
    cfg = X.find_config("NPROC_PER_NODE=8 \\\nswift rlhf --rlhf_type grpo --num_generations 8 "
                        "--per_device_train_batch_size 8 --gradient_accumulation_steps 2 --learning_rate 1e-6\n")
    # completions per update 8 per device x 8 processes x 2 accumulation = 128 = 16 prompts x 8
    assert (cfg.prompts_per_step, cfg.group_size, cfg.update_batch, cfg.lr) == (16, 8, 128, 1e-6)


def test_a_very_long_number_does_not_stall_the_scan(tmp_path):
    # found by benchmarks/fuzz_readers.py: a 1 MB number in a 'key: value' run made the number pattern backtrack
    # quadratically (minutes); now linear (well under a second even on a loaded machine)
    import time

    p = tmp_path / "long.log"
    p.write_text("Iter 1: loss 0.5, x: " + "9" * 300_000 + "z, reward 0.1\nIter 2: loss 0.4, reward 0.2\n")
    t = time.process_time()
    run = _one(p)
    assert time.process_time() - t < 20
    assert list(run.metrics["reward/mean"]) == [0.1, 0.2]


def test_config_yaml_beside_the_log(tmp_path):
    (tmp_path / "metrics.log").write_text("step=1 loss=0.5 reward_mean=0.1\nstep=2 loss=0.4 reward_mean=0.2\n")
    (tmp_path / "config.yaml").write_text("per_device_train_batch_size: 16\ngradient_accumulation_steps: 2\n"
                                          "num_generations: 8\nlearning_rate: 2.0e-6\n")
    run = _one(tmp_path / "metrics.log")
    # a TRL GRPOConfig: 16 x 2 = 32 completions per update = 4 prompts x 8; lr 2e-6 (read through batchspec)
    assert (run.meta.prompts_per_step, run.meta.group_size, run.meta.lr) == (4, 8, 2e-6)
    assert "config.yaml" in run.meta.config_sources["group_size"]


def test_config_beside_the_log_with_wrong_types_or_broken_yaml_warns_naming_file_and_key(tmp_path):
    import warnings

    from rlbatch.readers import ReadWarning

    (tmp_path / "metrics.log").write_text("step=1 loss=0.5 reward_mean=0.1\nstep=2 loss=0.4 reward_mean=0.2\n")
    cfg = tmp_path / "config.yaml"
    for text, want in (("prompts_per_step: abc\nnum_generations: 8\nlr: fast\n",
                        [f"{cfg}: prompts_per_step = 'abc' is not a positive whole number: not used as "
                         "prompts_per_step", f"{cfg}: lr = 'fast' is not a learning rate in (0, 1): not used as lr"]),
                       ("a: [1, 2\n", [f"{cfg}: config beside the log not read (while parsing a flow sequence): its "
                                       "settings are not used"])):
        cfg.write_text(text)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = _one(tmp_path / "metrics.log")
        assert [str(w.message) for w in caught if issubclass(w.category, ReadWarning)] == want
        assert run.meta.prompts_per_step is None and run.meta.lr is None


def test_eval_records_whose_names_are_training_names(tmp_path):
    p = tmp_path / "ev.log"
    p.write_text("Iter 1: Val loss 0.900, Val reward_mean 0.250\nIter 1: Train loss 0.800, reward_mean 0.100\n"
                 "[train] step=2 loss=0.4 reward_mean=0.3\n[eval] step=2 reward_mean=0.6\n")
    run = _one(p)
    assert list(run.metrics["reward/mean"]) == [0.1, 0.3]  # the training values
    assert list(run.evals["step"]) == [0, 2] and list(run.evals["eval/score"]) == [0.25, 0.6]


def test_verl_step_lines_glued_to_a_progress_bar(tmp_path):
    p = tmp_path / "sft.log"
    p.write_text("Epoch 1/2:   0%|   | 0/3 [00:00<?, ?it/s]step:1 - train/loss:1.0 - train/lr(1e-3):0.001\n"
                 "Epoch 1/2:  33%|#  | 1/3 [00:09<00:18,  9.0s/it]step:2 - train/loss:0.9 - train/lr(1e-3):0.002\n")
    run = _one(p)
    assert list(run.metrics["step"]) == [1, 2] and run.meta.lr == pytest.approx(2e-6)  # lr(1e-3): x 1e-3


def test_a_final_state_dump_is_a_summary_not_a_step(tmp_path):
    p = tmp_path / "logging.jsonl"
    lines = [{"loss": 0.5, "learning_rate": 1e-5, "global_step": 9},
             {"eval_loss": 0.4, "eval_acc": 0.8, "global_step": 10},
             {"train_runtime": 30.0, "train_loss": 0.45, "global_step": 10},
             {"train_time": {"train_runtime": 30.0, "n_train_samples": 80}, "last_model_checkpoint": "ckpt-10",
              "global_step": 10}]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = _one(p)
    s = summarize_run(run)
    assert s["steps"] == 10 and (s["last_eval_step"], s["last_eval_score"]) == (10, 0.8)


def test_notebook_whose_cells_come_after_a_large_metadata_block(tmp_path):
    # Colab notebooks put the widget state in "metadata" before "cells": tens of kB in
    table = ("<table><thead><tr><th>Step</th><th>Training Loss</th><th>reward</th></tr></thead><tbody>"
             "<tr><td>1</td><td>0.0</td><td>0.5</td></tr><tr><td>2</td><td>0.0</td><td>0.6</td></tr></tbody></table>")
    nb = {"nbformat": 4, "nbformat_minor": 0, "metadata": {"widgets": {"state": "x" * 70_000}},
          "cells": [{"cell_type": "code", "source": "trainer.train()", "outputs": [
              {"output_type": "display_data", "data": {"text/html": [table]}, "metadata": {}}]}]}
    p = tmp_path / "colab.ipynb"
    p.write_text(json.dumps(nb, indent=1))
    assert list(_one(p).metrics["reward/mean"]) == [0.5, 0.6]


def test_epoch_then_batch_counter_lines_are_steps(tmp_path):
    # MiniMind's GRPO console (github.com/Coicozoi/minimind-from-scratch @ a1fbaada `logs/grpo.log`, lines 8-9 and
    # its last line, copied): 'Epoch:[e/E](n/N), Key: value, ...'; with E > 1 the step is (e - 1) x N + n
    lines = ["`torch_dtype` is deprecated! Use `dtype` instead!",
             "Epoch:[1/1](1/9751), Reward: -2.3041, KL_ref: -0.0010, Adv Std: 0.9258, Adv Mean: -0.0000, "
             "Actor Loss: 0.0000, Avg Response Len: 271.38, Learning Rate: 0.00000030",
             "Epoch:[1/1](2/9751), Reward: -1.7233, KL_ref: 0.0002, Adv Std: 0.9257, Adv Mean: 0.0000, "
             "Actor Loss: 0.0000, Avg Response Len: 297.00, Learning Rate: 0.00000030",
             "[DEBUG] gen[3] reward=-1.9516",
             "Epoch:[1/1](9751/9751), Reward: -1.4338, KL_ref: 0.0000, Adv Std: 0.9254, Adv Mean: -0.0000, "
             "Actor Loss: 0.0000, Avg Response Len: 268.75, Learning Rate: 0.00000003"]
    p = tmp_path / "grpo.log"
    p.write_text("\n".join(lines) + "\n")
    run = load(p)[0]
    assert run.metrics["step"].tolist() == [1, 2, 9751]
    assert run.metrics["reward/mean"].tolist() == [-2.3041, -1.7233, -1.4338]
    assert run.meta.lr == pytest.approx(3e-07)
    two = tmp_path / "two_epochs.log"
    two.write_text("Epoch [1/2] Step [3/4] loss: 0.5, reward: 0.1\nEpoch [1/2] Step [4/4] loss: 0.4, reward: 0.2\n"
                   "Epoch [2/2] Step [1/4] loss: 0.3, reward: 0.3\n")
    assert load(two)[0].metrics["step"].tolist() == [3, 4, 5]
