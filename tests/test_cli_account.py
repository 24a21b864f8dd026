import json
import subprocess
import sys

import pytest

from conftest import PAPER_CSV

HEADER = "run,prompts_per_step,group_size,lr,samples_to_target,wall_clock_h\n"


def rlbatch(*args):
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", *map(str, args)], capture_output=True, text=True)


def test_account_json_matches_paper():
    res = rlbatch("account", PAPER_CSV, "--reference", "P128", "--format", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [set(r) >= {"run", "batch_size", "samples_to_target", "rN", "relative_throughput", "relative_time",
                       "faster_than_reference"} for r in rows] == [True] * 5
    by = {r["run"]: r for r in rows}
    assert round(by["P2048"]["rN"], 2) == 1.60 and round(by["P1024"]["relative_time"], 2) == 0.71
    assert by["P1024"]["faster_than_reference"] is True


def test_account_table_names_fastest():
    res = rlbatch("account", PAPER_CSV, "--reference", "P128")
    assert res.returncode == 0
    assert "Fastest to target: P1024" in res.stdout
    md = rlbatch("account", PAPER_CSV, "--reference", "P128", "--format", "markdown")
    assert "| P2048 | 16384 | 196608 | 1.60 | 1.30 | 1.23 | no |" in md.stdout


def test_account_paper_needs_no_path(tmp_path):
    # the paper's table is package data: --paper reads it from any directory, P128 as the default reference
    res = subprocess.run([sys.executable, "-m", "rlbatch.cli", "account", "--paper", "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    by = {r["run"]: r for r in json.loads(res.stdout)}
    assert by["P128"]["rN"] == 1.0 and round(by["P2048"]["rN"], 2) == 1.60  # 196608 / 122880
    assert round(by["P1024"]["relative_time"], 2) == 0.71  # 8.42 h / 11.90 h
    other = rlbatch("account", "--paper", "--reference", "P256", "--format", "json")
    assert {r["run"]: r["rN"] for r in json.loads(other.stdout)}["P256"] == 1.0
    for args, words in ((["account"], "--paper"), (["account", PAPER_CSV, "--paper"], "not both"),
                        (["account", PAPER_CSV], "--reference is required")):
        r = rlbatch(*args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_lr_command_sqrt():
    res = rlbatch("lr", "--base-batch", 1024, "--base-lr", "1e-6", "--batches", "2048,8192,16384", "--rule", "sqrt",
                  "--format", "json")
    assert res.returncode == 0
    lrs = [r["lr"] for r in json.loads(res.stdout)]
    assert [f"{x:.4g}" for x in lrs] == ["1.414e-06", "2.828e-06", "4e-06"]


@pytest.mark.parametrize("content,needle", [
    ("run,prompts_per_step,group_size,lr,wall_clock_h\nP1,1,8,1e-6,1\n", "missing column 'samples_to_target'"),
    (HEADER + "P128,128,8,1e-6,abc,11.9\n", ":2: column 'samples_to_target': 'abc' is not a number"),
    (HEADER + "P128,128,8,1e-6,100,11.9\nP256,256,8,1e-6,-5,3\n", ":3: column 'samples_to_target': -5 must be"),
    ("", "empty file"),
    (HEADER, "no rows"),
    (HEADER + "P1,1,8,1e-6,100,1\nP1,1,8,1e-6,100,1\n", "duplicate run 'P1'"),
])
def test_account_bad_input_one_line_exit_2(tmp_path, content, needle):
    f = tmp_path / "t.csv"
    f.write_text(content)
    res = rlbatch("account", f, "--reference", "P128")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert needle in lines[0] and str(f) in lines[0]
    assert "Traceback" not in res.stderr


def test_account_unknown_reference():
    res = rlbatch("account", PAPER_CSV, "--reference", "P9999")
    assert res.returncode == 2
    assert "unknown reference run 'P9999'" in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_lr_bad_rule_exit_2():
    res = rlbatch("lr", "--base-batch", 16, "--base-lr", "1e-5", "--batches", "32", "--rule", "cubic")
    assert res.returncode == 2 and "unknown learning-rate rule" in res.stderr
