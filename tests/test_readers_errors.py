"""Bad inputs: one clear line naming file and line; the rest of the input still reads."""

import warnings

import pytest

from rlbatch.errors import UserError
from rlbatch.readers import ReadWarning, detect_format, load

RAY = "\x1b[36m(TaskRunner pid=1234)\x1b[0m "


def step_line(step, gen=10.0, extra="", schema="new"):
    t = "timing_s" if schema == "new" else "timing"
    return (f"{RAY}step:{step} - actor/grad_norm:0.{step}00 - critic/score/mean:0.{step}00 - {t}/gen:{gen:.3f} - "
            f"{t}/update_actor:5.000 - {t}/step:20.000{extra}")


def write(tmp_path, name, lines, end="\n"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + end, encoding="utf-8")
    return p


def read_with_warnings(path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load(path, **kw)
    return runs, [str(w.message) for w in caught if issubclass(w.category, ReadWarning)]


def test_truncated_last_line_is_skipped_with_file_and_line(tmp_path):
    lines = ["python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.rollout.n=4"]
    lines += [step_line(s) for s in range(1, 5)]
    lines.append(step_line(5)[:60])  # cut mid-write, no newline
    p = write(tmp_path, "cut.log", lines, end="")
    (run,), msgs = read_with_warnings(p)
    assert run.metrics["step"].tolist() == [1, 2, 3, 4]
    assert len(msgs) == 1 and msgs[0].startswith(f"{p}:6: truncated last line")
    assert run.meta.batch_size == 32 and run.metrics["samples/retained"].iloc[-1] == 4 * 32


def test_no_step_lines_is_a_user_error_naming_the_file(tmp_path):
    p = write(tmp_path, "empty.log", ["python3 -m verl.trainer.main_ppo data.train_batch_size=8", "Training from scratch"])
    with pytest.raises(UserError, match=r"empty\.log: no verl step lines"):
        load(p)


def test_mixed_schemas_merge(tmp_path):
    lines = [step_line(s, gen=float(s), schema="old") for s in range(1, 4)]
    lines += [step_line(s, gen=float(s), schema="new") for s in range(4, 7)]
    (run,), _ = read_with_warnings(write(tmp_path, "mixed.log", lines))
    m = run.metrics
    assert m["time/gen_s"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert m["time/step_s"].notna().all() and m["time/train_s"].tolist() == [5.0] * 6
    assert any("mixed schemas" in n for n in run.notes)


def test_nan_values_warn_with_line_and_are_ignored(tmp_path):
    lines = [step_line(1), step_line(2).replace("actor/grad_norm:0.200", "actor/grad_norm:nan"), step_line(3),
             f"{RAY}step:4 - actor/grad_norm:np.float64(0.4) - critic/score/mean:np.float64(0.5) - timing_s/step:20.0"]
    p = write(tmp_path, "nan.log", lines)
    (run,), msgs = read_with_warnings(p)
    assert len(run.metrics) == 4
    assert [m for m in msgs if m.startswith(f"{p}:2:") and "actor/grad_norm" in m]
    g = run.metrics["grad_norm/actor"]
    assert g.isna().tolist() == [False, True, False, False] and g.iloc[3] == pytest.approx(0.4)


def test_unknown_format_names_file_and_line(tmp_path):
    p = write(tmp_path, "notes.txt", ["just some text", "nothing to see"])
    with pytest.raises(UserError, match=r"notes\.txt:1: unknown log format"):
        detect_format(p)
    with pytest.raises(UserError, match="no such file"):
        load(tmp_path / "missing.log")


def test_bad_jsonl_line_skipped(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "data": {"actor/grad_norm": 0.5}}\n{"step": 2, "data": \n'
                 '{"step": 3, "data": {"actor/grad_norm": 0.25}}\n{"step": 4, "da', encoding="utf-8")
    (run,), msgs = read_with_warnings(p)
    assert run.metrics["step"].tolist() == [1, 3]
    assert any(m.startswith(f"{p}:2: not valid JSON") for m in msgs)
    assert any(m.startswith(f"{p}:4: truncated last line") for m in msgs)


def test_directory_of_logs_skips_unreadable_files(tmp_path):
    write(tmp_path, "a.log", [step_line(s) for s in range(1, 4)])
    write(tmp_path, "b.txt", ["garbage"])
    runs, msgs = read_with_warnings(tmp_path)
    assert [r.run_id for r in runs] == ["a"]
    # one warning for the directory, naming each file skipped and why
    assert any("1 unreadable file(s): b.txt (unknown log format" in m for m in msgs), msgs


def test_directory_of_results_and_notes_is_one_error_not_invented_runs(tmp_path):
    # issue 37 (8): a folder of benchmark results holds tables in documents, JSON result files and notes, no log
    (tmp_path / "speed.md").write_text("# Speed\n\n| config | B | seconds | ratio |\n|---|---|---|---|\n"
                                       "| ours | 16 | 1.2 | 0.8 |\n| trl | 16 | 1.5 | 1.0 |\n")
    (tmp_path / "profile.json").write_text('[{"batch_size": 16, "gen_s": 1.5, "train_s": 0.4}, '
                                           '{"batch_size": 32, "gen_s": 2.0, "train_s": 0.8}]')
    (tmp_path / "notes.txt").write_text("measured on 2 cores, idle\n")
    with pytest.raises(UserError) as err:
        load(tmp_path)
    msg = str(err.value)
    assert "no training log among the 3 file(s)" in msg and "speed.md" in msg and "profile.json" in msg


def test_errors_print_no_binary_bytes_and_cut_no_word(tmp_path):
    """Issue 46 item 6 (newcomer finding 14): a PNG among logs is "binary", its bytes never printed; an unreadable
    file's reason is cut at a word boundary with "...", never mid-word ("trainin")."""
    import random

    rng = random.Random(0)
    (tmp_path / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(rng.randrange(256) for _ in range(3000)))
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(UserError) as err:
        load(tmp_path / "plot.png")
    assert "binary file, not a training log" in str(err.value)
    with pytest.raises(UserError) as err:
        load(tmp_path)
    msg = str(err.value)
    assert "plot.png (binary file, not a training log)" in msg and "\ufffd" not in msg and "PNG" not in msg
    assert msg.isprintable()
    assert "trainin)" not in msg and "training metrics in it ..." in msg
