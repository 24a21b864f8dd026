"""A researcher's field report (../shared/reviews/researcher-tryout.md), findings 3, 4 and 16 (first bullet), on
small CSV / JSON-lines logs written here with hand-computed values:

- 3: a cumulative wall clock (``wall_time_s``, ``elapsed_s``...) is read as ``time/wall_s``; a column read as
  seconds per step that grows at every record is warned about, and one that is clearly a clock is refused;
- 4: ``eval_score`` is read as the score, and a validation-side column that is not a score is kept as ``raw/``
  (nothing vanishes);
- 16: ``inspect`` on a CSV names the column that numbers the steps.
"""

import json
import math
import re
import warnings

import pytest

from _cli import run_in_process
from rlbatch.analysis.curves import summarize_run
from rlbatch.errors import UserError
from rlbatch.explain import inspect_path
from rlbatch.readers import ReadWarning, load


def read(path, **kw):
    """``(runs, warnings)`` of :func:`rlbatch.readers.load`, the reader's warnings caught."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load(path, **kw)
    return runs, [str(w.message) for w in caught if issubclass(w.category, ReadWarning)]


def write_csv(tmp_path, name, header, rows):
    p = tmp_path / name
    p.write_text(header + "\n" + "".join(",".join("" if v is None else str(v) for v in r) + "\n" for r in rows))
    return p


def nan_list(x):
    return [None if isinstance(v, float) and math.isnan(v) else round(v, 9) for v in x]


# ------------------------------------------------------------------------------- finding 4: eval_score and raw/
def test_eval_score_column_is_the_score_as_in_the_report(tmp_path):
    # the report's file: step,eval_score,loss with 4 rows
    p = write_csv(tmp_path, "evs.csv", "step,eval_score,loss",
                  [(10, 0.1, 1.0), (20, 0.2, 0.9), (30, 0.3, 0.8), (40, 0.4, 0.7)])
    (run,), _ = read(p)
    assert run.evals["step"].tolist() == [10, 20, 30, 40]
    assert run.evals["eval/score"].tolist() == [0.1, 0.2, 0.3, 0.4]
    assert run.meta.metric_sources["eval/score"] == "eval_score"
    assert run.metrics["raw/loss"].tolist() == [1.0, 0.9, 0.8, 0.7]
    r = inspect_path(p)["runs"][0]
    assert r["metrics"]["eval/score"] == "eval_score" and r["unmapped"] == ["loss"]
    assert r["evaluations"] == {"points": 4, "last_step": 40, "last_score": 0.4}
    assert "eval/score" not in [m["field"] for m in r["missing"]]


@pytest.mark.parametrize("name", ["eval_score", "val_score", "test_score", "test/score"])
def test_score_names_of_every_validation_prefix_in_json_lines(tmp_path, name):
    # the score in the training record of every 2nd step (a custom loop's one dict per step)
    lines = [{"step": s, "reward": 0.1 * s, **({name: 0.25 * s} if s % 2 == 0 else {})} for s in range(1, 5)]
    p = tmp_path / "run.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    (run,), _ = read(p)
    assert run.evals["step"].tolist() == [2, 4] and run.evals["eval/score"].tolist() == [0.5, 1.0]
    assert run.meta.metric_sources["eval/score"] == name


def test_validation_side_column_that_is_no_score_is_kept_as_raw(tmp_path):
    # 'eval_n_problems' is logged only at validation points (its prefix says so) and is not a score: it was dropped
    # without a trace; now raw/ at the training step its record belongs to (the last at or before it)
    p = write_csv(tmp_path, "v.csv", "step,reward,eval_acc,eval_n_problems",
                  [(1, 0.1, None, None), (2, 0.2, None, None), (2, None, 0.5, 40), (3, 0.3, None, None),
                   (4, 0.4, None, None), (5, None, 0.7, 41)])
    (run,), _ = read(p)
    assert run.metrics["step"].tolist() == [1, 2, 3, 4]
    assert nan_list(run.metrics["raw/eval_n_problems"]) == [None, 40.0, None, 41.0]  # step 5's record -> step 4
    assert run.evals["eval/score"].tolist() == [0.5, 0.7]
    assert "eval_n_problems" in inspect_path(p)["runs"][0]["unmapped"]


def test_verl_validation_aux_names_are_kept_as_raw(tmp_path):
    # verl's file logger: val-core/... is the score, val-aux/... (turns, lengths) was dropped
    recs = [{"step": s, "data": {"critic/score/mean": 0.1 * s, "actor/grad_norm": 1.0}} for s in (1, 2, 3)]
    recs.append({"step": 3, "data": {"val-core/gsm8k/reward/mean@1": 0.6, "val-aux/num_turns/mean": 2.5}})
    p = tmp_path / "verl.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in recs))
    (run,), _ = read(p, fmt="verl-jsonl")
    assert nan_list(run.metrics["raw/val-aux/num_turns/mean"]) == [None, None, 2.5]
    assert run.evals["eval/score"].tolist() == [0.6]


# ----------------------------------------------------------------- finding 3: a cumulative clock is time/wall_s
@pytest.mark.parametrize("name", ["wall_time_s", "elapsed_s", "elapsed", "time_elapsed", "train/wall_clock"])
def test_cumulative_clock_is_wall_time(tmp_path, name):
    # steps 10..50, the clock at 10, 21, 30, 41, 50 s: time/wall_s as logged; time/step_s its growth per step:
    # (21 - 10) / 10 = 1.1, 0.9, 1.1, 0.9 (the first record's, start-up included, unknown); mean 4.0 / 4 = 1.0 s
    p = write_csv(tmp_path, "wt.csv", f"step,{name},reward",
                  [(10, 10, 0.1), (20, 21, 0.2), (30, 30, 0.3), (40, 41, 0.35), (50, 50, 0.4)])
    (run,), msgs = read(p)
    m = run.metrics
    assert m["time/wall_s"].tolist() == [10.0, 21.0, 30.0, 41.0, 50.0]
    assert nan_list(m["time/step_s"]) == [None, 1.1, 0.9, 1.1, 0.9]
    assert summarize_run(run)["time_per_step_s"] == pytest.approx(1.0)
    assert f"raw/{name}" not in m.columns and run.meta.metric_sources["time/wall_s"] == name
    assert not msgs
    r = inspect_path(p)["runs"][0]
    assert r["metrics"]["time/wall_s"] == name and name not in r["unmapped"]
    # inspect never offers the clock as a per-step time: time/step_s is no longer missing
    assert not any(mm["field"] == "time/step_s" for mm in r["missing"])


def test_clock_beside_evaluation_records_does_not_make_them_steps(tmp_path):
    # the loop writes its clock on every record, the evaluation's too: those stay evaluation points
    lines = [{"step": 10, "reward": 0.1, "wall_time_s": 10}, {"step": 20, "reward": 0.2, "wall_time_s": 21},
             {"step": 20, "eval_score": 0.3, "wall_time_s": 21.5}, {"step": 30, "reward": 0.3, "wall_time_s": 30}]
    p = tmp_path / "e.jsonl"
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    (run,), msgs = read(p)
    assert run.metrics["step"].tolist() == [10, 20, 30] and not msgs
    assert run.metrics["time/wall_s"].tolist() == [10.0, 21.0, 30.0]
    assert run.evals["step"].tolist() == [20] and run.evals["eval/score"].tolist() == [0.3]
    assert run.evals["time/wall_s"].tolist() == [21.0]  # the training clock at the evaluation's step


def test_clock_in_a_labelled_evaluation_record_is_no_evaluation_duration(tmp_path):
    # "[eval] ... wall_time_s=21.5" is the clock at the evaluation, not how long it took (it was read as eval/time_s)
    p = tmp_path / "t.log"
    p.write_text("[train] step 10: reward=0.1 wall_time_s=10\n[train] step 20: reward=0.2 wall_time_s=21\n"
                 "[eval] step 20: eval_score=0.3 wall_time_s=21.5\n[train] step 30: reward=0.3 wall_time_s=30\n")
    (run,), _ = read(p)
    assert run.metrics["time/wall_s"].tolist() == [10.0, 21.0, 30.0]
    assert nan_list(run.metrics["time/step_s"]) == [None, 1.1, 0.9]
    assert "raw/eval/time_s" not in run.metrics.columns and not any("evaluation time" in n for n in run.notes)
    assert nan_list(run.metrics["raw/val-aux/wall_time_s"]) == [None, 21.5, None]


def test_user_mapped_wall_clock_gives_step_times(tmp_path):
    # the report's workaround --map wall_time_s=time/wall_s: the same reading, for any name
    p = write_csv(tmp_path, "u.csv", "step,my_clock,reward", [(1, 3, 0.1), (2, 5, 0.2), (3, 8, 0.3)])
    (run,), _ = read(p, mapping={"my_clock": "time/wall_s"})
    assert run.metrics["time/wall_s"].tolist() == [3.0, 5.0, 8.0]
    assert nan_list(run.metrics["time/step_s"]) == [None, 2.0, 3.0]


def test_clock_that_goes_back_or_beside_a_step_timer_is_kept_as_raw(tmp_path):
    p = write_csv(tmp_path, "b.csv", "step,elapsed,reward", [(1, 5, 0.1), (2, 3, 0.2), (3, 4, 0.3)])
    (run,), _ = read(p)
    assert "time/wall_s" not in run.metrics.columns and run.metrics["raw/elapsed"].tolist() == [5.0, 3.0, 4.0]
    assert any(n.startswith("'elapsed' is named like a cumulative clock") for n in run.notes)
    # with the log's own step timer, wall-clock is its running sum (DESIGN.md: excludes evaluation): 2, 2+3, 2+3+2
    p = write_csv(tmp_path, "t.csv", "step,step_time,wall_time_s,reward",
                  [(1, 2, 4, 0.1), (2, 3, 7.5, 0.2), (3, 2, 9.5, 0.3)])
    (run,), _ = read(p)
    assert run.metrics["time/wall_s"].tolist() == [2.0, 5.0, 7.0]
    assert run.metrics["raw/wall_time_s"].tolist() == [4.0, 7.5, 9.5]
    assert any("kept as raw/wall_time_s" in n and "'step_time'" in n for n in run.notes)


# ----------------------------------------------------- finding 3: a step time that grows like a clock is flagged
def test_step_time_growing_at_every_record_warns(tmp_path):
    # 10, 11, 12, 13, 14 s at steps 1..5: could be a slowing run, could be a clock; read, with one warning
    p = write_csv(tmp_path, "g.csv", "step,step_time,reward", [(s, 9 + s, 0.1 * s) for s in range(1, 6)])
    (run,), msgs = read(p)
    assert run.metrics["time/step_s"].tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert len(msgs) == 1 and str(p) in msgs[0] and "'step_time'" in msgs[0]
    assert "--map step_time=time/wall_s" in msgs[0] and "\n" not in msgs[0]


@pytest.mark.parametrize("values", [[10, 12, 11, 13, 12], [10, 11, 12, 13]])
def test_noisy_or_short_step_time_is_not_flagged(tmp_path, values):
    p = write_csv(tmp_path, "n.csv", "step,step_time", [(s, v) for s, v in enumerate(values, 1)])
    (run,), msgs = read(p)
    assert run.metrics["time/step_s"].tolist() == [float(v) for v in values] and not msgs


# the report's case, shortened: a clock at ~2 s per step, every 10 steps, mapped as seconds per step. It grows
# 201 / 20 = 10.05-fold; as seconds per step it sums to 10 x (20 + 41 + ... + 201) = 10 x 1105 = 11050 s = 3.07 h,
# against its own last value 201 s = 0.0558 h
CLOCK = [20, 41, 60, 81, 100, 121, 140, 161, 180, 201]


def test_cumulative_clock_mapped_as_step_time_is_refused(tmp_path):
    p = write_csv(tmp_path, "bs64.csv", "step,wall_time_s,reward",
                  [(10 * k, c, 0.01 * k) for k, c in enumerate(CLOCK, 1)])
    with pytest.raises(UserError) as err:
        load(p, mapping={"wall_time_s": "time/step_s"})
    msg = str(err.value)
    assert msg.startswith(f"{p}: column 'wall_time_s' mapped by --map as time/step_s")
    assert "10 records" in msg and "3.07 h" in msg and "0.0558 h" in msg and "use --map wall_time_s=time/wall_s" in msg


def test_cumulative_clock_refused_by_the_cli_on_one_line(tmp_path, monkeypatch, capsys):
    p = write_csv(tmp_path, "bs64.csv", "step,wall_time_s,reward",
                  [(10 * k, c, 0.01 * k) for k, c in enumerate(CLOCK, 1)])
    code, out, err = run_in_process(monkeypatch, capsys, "inspect", p, "--map", "wall_time_s=time/step_s")
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert str(p) in err and "'wall_time_s'" in err and "--map wall_time_s=time/wall_s" in err
    # without the wrong map the clock is read as it is meant: 201 s at step 100
    code, out, err = run_in_process(monkeypatch, capsys, "inspect", p)
    assert code == 0 and re.search(r"time/wall_s +<- wall_time_s\n", out)


def test_a_table_name_holding_a_clock_is_refused_too(tmp_path):
    # 'time/total_s' is a per-step timer in the name table; a log that writes its clock under it is refused
    p = write_csv(tmp_path, "t.csv", "step,time/total_s", [(10 * k, c) for k, c in enumerate(CLOCK, 1)])
    with pytest.raises(UserError, match=r"column 'time/total_s' read as time/step_s .* --map time/total_s=time/wall_s"):
        load(p)


# -------------------------------------------------------------- finding 16: inspect names the step column of a CSV
@pytest.mark.parametrize("col", ["step", "global_step", "_step"])
def test_inspect_names_the_csv_step_column(tmp_path, col, monkeypatch, capsys):
    # a CSV logged every 10 steps: its steps are the column's numbers, not the record order
    p = write_csv(tmp_path, "bs64.csv", f"{col},reward", [(10, 0.1), (20, 0.2), (30, 0.3)])
    r = inspect_path(p)["runs"][0]
    assert r["counters"]["step"] == col and r["steps"] == 30
    assert r["counters"]["why"] == f"steps from the column {col!r} of each row"
    code, out, _ = run_in_process(monkeypatch, capsys, "inspect", p)
    assert code == 0 and f"step counter: {col})" in out and "record order" not in out


def test_inspect_of_a_csv_without_a_step_column_says_record_order(tmp_path):
    p = write_csv(tmp_path, "n.csv", "reward,loss", [(0.1, 1.0), (0.2, 0.9)])
    r = inspect_path(p)["runs"][0]
    assert r["counters"]["step"] is None and r["counters"]["why"] == "the log's record order"
    assert r["steps"] == 2
