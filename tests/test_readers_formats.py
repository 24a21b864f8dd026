"""Every non-verl-console format, from small fixtures written with the real metric names of each project."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from rlbatch.analysis.curves import summarize_run
from rlbatch.readers import detect_format, load
from rlbatch.runstore import Run, RunMeta, write_run


def test_verl_file_logger_jsonl(tmp_path):
    p = tmp_path / "verl_metrics.jsonl"
    recs = [{"step": s, "data": {"actor/grad_norm": 0.1 * s, "critic/score/mean": 0.2, "timing_s/gen": 3.0,
                                 "timing_s/update_actor": 2.0, "timing_s/step": 6.0, "perf/total_num_tokens": 1000}}
            for s in (1, 2, 3)]
    recs[1]["data"]["val-core/openai/gsm8k/reward/mean@1"] = 0.5
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert detect_format(p) == "verl-jsonl"
    (run,) = load(p, prompts_per_step=16, group_size=4)
    m = run.metrics
    assert m["time/wall_s"].tolist() == [6.0, 12.0, 18.0]
    assert m["tokens/trained"].tolist() == [1000.0, 2000.0, 3000.0]
    assert m["samples/retained"].tolist() == [64.0, 128.0, 192.0]
    assert run.evals[["step", "eval/score", "samples/retained"]].values.tolist() == [[2, 0.5, 128.0]]


def test_tensorboard_openrlhf_names(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    logdir = tmp_path / "tb" / "openrlhf_run"
    w = SummaryWriter(log_dir=str(logdir))
    for step in range(1, 6):  # OpenRLHF PPO: add_scalar(f"train/{k}", v, global_step)
        w.add_scalar("train/policy_loss", -0.01 * step, step)
        w.add_scalar("train/reward", 0.1 * step, step)
        w.add_scalar("train/return", 0.1 * step, step)
        w.add_scalar("train/response_length", 300.0, step)
        w.add_scalar("train/kl", 0.001, step)
        w.add_scalar("train/actor_lr", 5e-7, step)
        w.add_scalar("train/critic_loss", 0.2, step)
        w.add_scalar("train/critic_lr", 9e-6, step)
    w.add_scalar("eval/gsm8k_pass1", 0.42, 4)
    w.close()
    assert detect_format(tmp_path / "tb") == "tensorboard"
    (run,) = load(tmp_path / "tb", prompts_per_step=32, group_size=1)
    m = run.metrics
    assert m["step"].tolist() == [1, 2, 3, 4, 5]
    assert m["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert m["lr"].iloc[0] == pytest.approx(5e-7)
    assert "raw/train/policy_loss" in m.columns and "time/wall_s" in m.columns
    assert run.evals[["step", "eval/score", "samples/retained"]].values.tolist() == [[4, pytest.approx(0.42), 128.0]]
    assert run.evals["eval/score/gsm8k"].iloc[0] == pytest.approx(0.42)


def test_trl_trainer_state(tmp_path):
    hist = []
    tokens = 0
    for step in range(1, 7):
        tokens += 5000
        hist.append({"step": step, "epoch": step / 6, "loss": 0.01, "grad_norm": 0.5 / step, "learning_rate": 1e-6,
                     "reward": 0.1 * step, "reward_std": 0.3, "num_tokens": tokens, "step_time": 12.5,
                     "frac_reward_zero_std": 0.25, "completions/mean_length": 180.0, "kl": 0.0})
        if step % 3 == 0:
            hist.append({"step": step, "epoch": step / 6, "eval_loss": 0.1, "eval_reward": 0.2 * step,
                         "eval_runtime": 30.0})
    hist.append({"step": 6, "epoch": 1.0, "train_runtime": 80.0, "train_loss": 0.01, "total_flos": 0.0})
    out = tmp_path / "grpo-out"
    (out / "checkpoint-6").mkdir(parents=True)
    (out / "checkpoint-6" / "trainer_state.json").write_text(json.dumps(
        {"global_step": 6, "max_steps": 6, "train_batch_size": 8, "log_history": hist}))
    assert detect_format(out) == "trl"
    (run,) = load(out, prompts_per_step=8, group_size=8)
    m = run.metrics
    assert len(m) == 6 and run.meta.batch_size == 64 and run.meta.samples_source == "steps x B"
    assert m["grad_norm/actor"].iloc[1] == pytest.approx(0.25)
    assert m["tokens/trained"].iloc[-1] == 30000 and m["time/wall_s"].iloc[-1] == pytest.approx(75.0)
    assert "raw/frac_reward_zero_std" in m.columns
    assert run.evals[["step", "eval/score"]].values.tolist() == [[3, pytest.approx(0.6)], [6, pytest.approx(1.2)]]
    # without P and G the file cannot say B: no retained-sample axis, and the notes say how to fix it
    (bare,) = load(out / "checkpoint-6" / "trainer_state.json")
    assert bare.meta.batch_size is None and "samples/retained" not in bare.metrics.columns
    assert any("--set" in n for n in bare.notes)


def test_wandb_history_csv(tmp_path):
    p = tmp_path / "wandb_export.csv"
    df = pd.DataFrame({"_step": [1, 2, 3, 4], "_runtime": [60, 121, 180, 245], "_timestamp": [1e9] * 4,
                       "actor/grad_norm": [0.4, 0.3, 0.2, 0.1], "critic/score/mean": [0.1, 0.2, 0.3, 0.4],
                       "timing_s/gen": [30.0, 31.0, 29.0, 30.0], "timing_s/step": [60.0, 61.0, 59.0, 65.0],
                       "val-core/openai/gsm8k/reward/mean@1": [None, 0.3, None, 0.5]})
    df.to_csv(p, index=False)
    assert detect_format(p) == "wandb-csv"
    (run,) = load(p, prompts_per_step=4, group_size=2)
    assert run.metrics["time/wall_s"].tolist() == [60.0, 121.0, 180.0, 245.0]
    assert run.evals["eval/score"].tolist() == [0.3, 0.5]
    # step 1 counts as a typical step (issue 44: the median of the next steps' 61, 59, 65 s = 61 s, not its 60 s):
    # 32 retained samples over 61 + 61 + 59 + 65 = 246 s
    assert summarize_run(run)["throughput_samples_per_s"] == pytest.approx(32 / 246)


def test_wandb_panel_csv_one_run_per_name(tmp_path):
    p = tmp_path / "panel.csv"
    p.write_text("Step,runA - train/reward,runA - train/reward__MIN,runA - train/reward__MAX,runB - train/reward\n"
                 "1,0.1,0.1,0.1,0.2\n2,0.2,0.2,0.2,0.3\n3,0.3,0.3,0.3,\n")
    runs = load(p)
    assert [r.run_id for r in runs] == ["runA", "runB"]
    assert runs[0].metrics["reward/mean"].tolist() == [0.1, 0.2, 0.3]
    assert runs[1].metrics["reward/mean"].tolist() == [0.2, 0.3]


def test_generic_csv_with_map(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text("iteration,acc,gnorm,secs\n1,0.1,2.0,10\n2,0.3,1.0,10\n3,0.5,0.5,10\n")
    assert detect_format(p) == "csv"
    (run,) = load(p, mapping=["iteration=step", "acc=eval/score,gnorm=grad_norm/actor", "secs=time/step_s"],
                  prompts_per_step=2, group_size=2)
    assert run.metrics["grad_norm/actor"].tolist() == [2.0, 1.0, 0.5]
    assert run.metrics["time/wall_s"].tolist() == [10.0, 20.0, 30.0]
    assert run.evals["eval/score"].tolist() == [0.1, 0.3, 0.5]


def test_generic_jsonl_nested(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text('{"step": 1, "actor": {"grad_norm": 1.5}, "reward": 0.1}\n'
                 '{"step": 2, "actor": {"grad_norm": 1.0}, "reward": 0.2}\n')
    assert detect_format(p) == "jsonl"
    (run,) = load(p)
    assert run.metrics["grad_norm/actor"].tolist() == [1.5, 1.0]
    assert run.metrics["reward/mean"].tolist() == [0.1, 0.2]


def _store_run(d, rid, b):
    meta = RunMeta(run_id=rid, prompts_per_step=b // 4, group_size=4, lr=1e-5, status="finished")
    metrics = pd.DataFrame({"step": [1, 2], "samples/retained": [b * 0.9, b * 1.8], "grad_norm/actor": [1.0, 0.8],
                            "time/step_s": [2.0, 2.0], "time/wall_s": [2.0, 4.0], "time/gen_s": [1.0, 1.0]})
    evals = pd.DataFrame({"step": [2], "samples/retained": [b * 1.8], "eval/score": [0.4]})
    write_run(d, Run(meta=meta, metrics=metrics, evals=evals))


def test_run_store_and_sweep_tree(tmp_path):
    _store_run(tmp_path / "sweep" / "trials" / "b64", "b64", 64)
    _store_run(tmp_path / "sweep" / "trials" / "b128", "b128", 128)
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    assert detect_format(tmp_path / "sweep") == "rlbatch"
    runs = load(tmp_path / "sweep")
    assert sorted(r.run_id for r in runs) == ["b128", "b64"]
    r = next(r for r in runs if r.run_id == "b64")
    # the run's own counter (filtered samples: 0.9 B per step) is kept, not replaced by steps x B
    assert r.meta.samples_source == "log" and r.metrics["samples/retained"].tolist() == [57.6, 115.2]
    (single,) = load(tmp_path / "sweep" / "trials" / "b64")
    assert single.meta.source_format == "rlbatch"


@pytest.mark.parametrize("order", [("aime_2025", "aime_2024"), ("aime_2024", "aime_2025")])
def test_two_validation_datasets_give_the_first_in_name_order_whatever_the_log_order(tmp_path, order):
    """Issue 53 (cases5, a verl run's output.log and its W&B summary list AIME 2024 and 2025 in opposite orders):
    eval/score is one benchmark, the first dataset in name order, the same for both orders; the other stays
    readable as eval/score/<dataset> and inspect names both."""
    from rlbatch.readers import load

    val = {"aime_2024": 0.06, "aime_2025": 0.10}
    lines = []
    for s in (1, 2, 3, 4):
        parts = [f"step:{s}", "actor/lr:1e-06", "timing_s/step:400.0", "critic/score/mean:0.2"]
        if s in (2, 4):
            parts += [f"val-core/{ds}/acc/mean@30:{val[ds] + 0.01 * s}" for ds in order]
        lines.append(" - ".join(parts))
    p = tmp_path / "output.log"
    p.write_text("\n".join(lines) + "\n")
    (run,) = load(p, prompts_per_step=8, group_size=4)
    ev = run.evals.set_index("step")
    assert ev.loc[4, "eval/score"] == pytest.approx(0.10)  # aime_2024 at step 4
    assert ev.loc[4, "eval/score/aime_2025"] == pytest.approx(0.14)
    src = run.meta.metric_sources["eval/score"]  # what inspect prints as "eval/score <- ..."
    assert src.startswith("val-core/aime_2024/acc/mean@30 (one of 2 validation datasets: the first in name order")
    assert "give --metric eval/score/aime_2025" in src, src


def test_a_validation_dataset_missing_at_one_step_does_not_switch_the_curve(tmp_path):
    """Review of issue 53's rule: the dataset is chosen once per run, among those evaluated most often. MATH-500 is
    not evaluated at step 4, so gsm8k (evaluated at every step) is the score: 0.80, 0.84, 0.86, never switching to
    MATH-500 and back (a per-step choice read 0.32 -> 0.84 -> 0.36, 'reaching' 0.5 at step 4). With MATH-500
    chosen by --metric, step 4 has no value."""
    from rlbatch.readers import load

    rows = {2: {"MATH-500": 0.32, "gsm8k": 0.80}, 4: {"gsm8k": 0.84}, 6: {"MATH-500": 0.36, "gsm8k": 0.86}}
    lines = []
    for s in range(1, 7):
        parts = [f"step:{s}", "actor/lr:1e-06", "timing_s/step:10.0", "critic/score/mean:0.2"]
        parts += [f"val-core/{ds}/acc/mean@1:{v}" for ds, v in rows.get(s, {}).items()]
        lines.append(" - ".join(parts))
    p = tmp_path / "console.log"
    p.write_text("\n".join(lines) + "\n")
    (run,) = load(p, prompts_per_step=8, group_size=4)
    ev = run.evals.set_index("step")
    assert ev["eval/score"].tolist() == pytest.approx([0.80, 0.84, 0.86])
    assert ev.loc[2, "eval/score/MATH-500"] == pytest.approx(0.32) and np.isnan(ev.loc[4, "eval/score/MATH-500"])
    assert run.meta.metric_sources["eval/score"].startswith("val-core/gsm8k/acc/mean@1 (one of 2")


def test_a_summary_export_without_history_is_one_record_at_its_update_count(tmp_path):
    """Issue 53 (cases5 #13): a W&B monitor script's {"summary": {...}, "rows": []} was refused as a config file.
    Now it is one run of one record (the last values), at the step its count of updates gives, and says that there
    is no curve to read; without such a count, step 1."""
    import json

    from rlbatch.readers import load

    p = tmp_path / "metrics.json"
    p.write_text(json.dumps({"summary": {"steps_done": 40, "train/lr": 2e-6, "train/grad_norm": 1.5,
                                         "train/loss": 0.01}, "rows": []}, indent=2))
    (run,) = load(p)
    assert run.metrics["step"].tolist() == [40] and run.meta.lr == pytest.approx(2e-6)
    assert any("summary export with no history" in n and "at step 40 (its count steps_done)" in n and "no curve" in n
               for n in run.notes), run.notes
    p.write_text(json.dumps({"summary": {"train/lr": 2e-6, "train/grad_norm": 1.5}, "rows": []}, indent=2))
    (run,) = load(p)
    assert run.metrics["step"].tolist() == [1]
    assert any("(no step in it: step 1)" in n for n in run.notes), run.notes
    # review: a configured total (num_steps) is not the step; a step the summary states (_step) is, and said so;
    # one line (json.dump without indent) is the same file
    for indent in (2, None):
        p.write_text(json.dumps({"summary": {"num_steps": 1000, "steps_done": 40, "train/lr": 2e-6,
                                             "train/loss": 0.1}, "rows": []}, indent=indent))
        (run,) = load(p)
        assert run.metrics["step"].tolist() == [40], indent
        assert any("at step 40 (its count steps_done)" in n for n in run.notes), run.notes
    p.write_text(json.dumps({"summary": {"_step": 40, "train/lr": 2e-6, "train/loss": 0.1}, "rows": []}))
    (run,) = load(p)
    assert run.metrics["step"].tolist() == [40]
    assert any("at the step it states (_step = 40)" in n for n in run.notes), run.notes
    # a config file (no summary of values) is still refused with one line
    from rlbatch.errors import UserError

    p.write_text(json.dumps({"model": "x", "lr": 1e-6, "batch_size": 8}, indent=2))
    with pytest.raises(UserError, match="a config or summary file, not a log"):
        load(p)


def test_easyr1_console_from_its_own_logger(tmp_path):
    """EasyR1 (hiyouga/EasyR1, verl/utils/logger/logger.py: ConsoleLogger prints "Config\\n" + yaml.dump(config,
    indent=2), then per step "Step {step}\\n" + yaml.dump(unflatten_dict(data), indent=2)), written here the same way,
    with Ray and tqdm lines between the blocks. P = data.rollout_batch_size, G = worker.rollout.n, the update batch
    worker.actor.global_batch_size (prompts) x G, lr worker.actor.optim.lr; val/accuracy_reward the score."""
    import yaml

    from rlbatch.readers import detect_format, load

    def nest(d):
        out = {}
        for k, v in d.items():
            p = out
            *head, last = k.split("/")
            for x in head:
                p = p.setdefault(x, {})
            p[last] = v
        return out

    cfg = {"data": {"rollout_batch_size": 128, "max_response_length": 2048},
           "worker": {"actor": {"global_batch_size": 64, "optim": {"lr": 1.0e-6}}, "rollout": {"n": 5}},
           "algorithm": {"adv_estimator": "grpo"}, "trainer": {"logger": ["console"], "val_freq": 5}}
    text = "Config\n" + yaml.dump(cfg, indent=2) + "(WorkerDict pid=7) loading weights\n"
    text += "Step 0\n" + yaml.dump(nest({"val/reward_score": 0.5, "val/accuracy_reward": 0.41}), indent=2)
    for s in range(1, 11):
        m = {"actor/lr": 1.0e-6, "actor/grad_norm": 0.2, "critic/score/mean": 0.4 + 0.01 * s,
             "timing_s/gen": 60.0, "timing_s/step": 100.0 + (s % 3)}
        if s % 5 == 0:
            m.update({"val/reward_score": 0.5 + 0.02 * s, "val/accuracy_reward": 0.41 + 0.02 * s})
        text += f"Step {s}\n" + yaml.dump(nest(m), indent=2) + f"Training:  {10 * s}%|###  | {s}/10 [00:0{s}<00:10]\n"
    p = tmp_path / "easyr1.log"
    p.write_text(text)
    assert detect_format(p) == "easyr1"
    (run,) = load(p)
    meta, m, ev = run.meta, run.metrics, run.evals
    assert (meta.prompts_per_step, meta.group_size, meta.batch_size, meta.rollout_batch_size) == (128, 5, 320, 640)
    assert meta.lr == pytest.approx(1e-6) and meta.algorithm == "grpo"
    assert m["step"].tolist() == list(range(1, 11)) and m["reward/mean"].iloc[-1] == pytest.approx(0.5)
    assert m["time/step_s"].iloc[0] == pytest.approx(101.0) and m["samples/retained"].iloc[0] == 640
    assert ev["step"].tolist() == [0, 5, 10] and ev["eval/score"].tolist() == pytest.approx([0.41, 0.51, 0.61])
    assert any("worker.rollout.n = 5" in n for n in run.notes), run.notes
