"""rlbatch watch on a log caught mid-write (researcher tryout finding 14): a file whose only line is still being
written (no line end yet) is a wait, as an empty file is; a complete line no reader knows stays the error analyze
gives (exit 2)."""

from __future__ import annotations

import json

import pytest

from _cli import run_in_process
from rlbatch.errors import UserError
from rlbatch.watch import may_appear, snapshot

WAIT = "waiting for a training log to appear (Ctrl-C to stop)"


def _watch(monkeypatch, capsys, path):
    return run_in_process(monkeypatch, capsys, "watch", path, "--target", "0.3", "--max-updates", "1",
                          "--interval", "0.01", "--format", "lines")


@pytest.mark.parametrize("name,partial", [
    ("half.jsonl", '{"step": 1, "eval/sc'),  # the tryout's file
    ("half.csv", "step,eval/sc"),  # a CSV header being written
    ("accent.jsonl", '{"step": 1, "note": "caf\u00e9'),  # cut inside a two-byte character
])
def test_a_file_whose_only_line_is_being_written_is_a_wait(monkeypatch, capsys, tmp_path, name, partial):
    log = tmp_path / name
    data = partial.encode("utf-8")
    log.write_bytes(data[:-1] if name.startswith("accent") else data)
    assert may_appear(log)
    up = snapshot(log, target=0.3)
    assert not up.finished and not up.configs
    assert up.note.startswith(WAIT) and "still being written" in up.note and "unknown log format" not in up.note
    rc, out, err = _watch(monkeypatch, capsys, log)
    assert rc == 0, err
    assert WAIT in out and "error" not in err


def test_the_wait_ends_when_the_line_is_complete(tmp_path):
    log = tmp_path / "train.jsonl"
    rows = [json.dumps({"step": i, "data": {"critic/score/mean": 0.1 * i}}) for i in range(1, 6)]
    log.write_text(rows[0][:15])
    assert snapshot(log, target=0.35, prompts_per_step=4, group_size=2).note.startswith(WAIT)
    log.write_text("\n".join(rows) + "\n")  # the writer caught up
    up = snapshot(log, target=0.35, prompts_per_step=4, group_size=2)
    assert up.configs and not (up.note or "").startswith(WAIT)


@pytest.mark.parametrize("name,data", [
    ("bad.jsonl", b"garbage line\n"),  # a finished line no reader knows
    ("done.json", b'{"foo": 1}'),  # a complete JSON document without a final newline
    ("blob.dat", bytes(range(200, 256)) + b"\x00\x01" * 50),  # binary, no line end
])
def test_a_complete_or_binary_file_no_reader_knows_is_still_refused(monkeypatch, capsys, tmp_path, name, data):
    log = tmp_path / name
    log.write_bytes(data)
    assert not may_appear(log)
    with pytest.raises(UserError, match="nothing usable read"):
        snapshot(log, target=0.3)
    rc, out, err = _watch(monkeypatch, capsys, log)
    assert rc == 2 and "nothing usable read from" in err and WAIT not in out


def test_a_directory_holding_only_a_line_being_written_is_a_wait(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "metrics.jsonl").write_text('{"step": 1, "eval/sc')
    up = snapshot(d, target=0.3)
    assert not up.finished and up.note.startswith(WAIT) and "metrics.jsonl holds only a first line" in up.note
    (d / "notes.txt").write_text("hello\n")  # beside it, a finished file no reader knows: the error, as before
    with pytest.raises(UserError, match="nothing usable read"):
        snapshot(d, target=0.3)


def test_a_sweep_with_a_just_started_trial_is_read_without_it(monkeypatch, capsys, tmp_path):
    """The tryout's rerun (stop 64): one trial whose metrics.jsonl is still empty (run.json written, no step yet)
    made the whole sweep unreadable: analyze "nothing usable read" (exit 2), watch dropped the finished trials and
    waited. Now that trial is skipped with one warning naming it, and the others are read; a run directory alone
    with no step is still the error it was."""
    from pathlib import Path

    from _stored_sweeps import unpack

    trials = unpack(Path(__file__).resolve().parent / "data" / "demo_sweep" / "trials.tar.gz", tmp_path)
    names = sorted(d.name for d in trials.iterdir())
    (trials / names[-1] / "metrics.jsonl").write_text("")
    code, out, err = run_in_process(monkeypatch, capsys, "analyze", trials, "--target", "0.45", "--format", "json")
    assert code == 0, err
    assert f"skipped 1 run directory with no step logged yet (just started, or never ran): {names[-1]}" in err
    assert sorted(r["run"] for r in json.loads(out)["runs"]) == names[:-1]
    up = snapshot(trials, target=0.45)
    assert len(up.configs) >= 1 and names[-1] not in {r for v in up.configs for r in v.runs}
    code, out, err = run_in_process(monkeypatch, capsys, "analyze", trials / names[-1], "--target", "0.45")
    assert code == 2 and "no step records" in err
