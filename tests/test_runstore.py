import json
import warnings

import pytest

from rlbatch.errors import UserError
from rlbatch.runstore import (JsonlWriter, Run, make_meta, read_jsonl, read_meta, read_run, update_meta, write_meta,
                              write_run)


def test_meta_roundtrip_and_batch_derived(tmp_path):
    meta = make_meta(run_id="r1", algorithm="GRPO", prompts_per_step=16, group_size=8, lr=5e-5, lr_rule="sqrt",
                     base_batch=128, base_lr=5e-5, seed=3, hardware={"cpu": "x"})
    assert meta.batch_size == 128 and meta.algorithm == "grpo"
    write_meta(tmp_path, meta)
    back = read_meta(tmp_path)
    assert back == meta
    new = update_meta(tmp_path, status="finished", stop_reason="sample budget reached")
    assert read_meta(tmp_path).status == "finished" and new.stop_reason == "sample budget reached"


def test_meta_errors_name_file_and_field(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "prompts_per_step": 0}))
    with pytest.raises(UserError, match=r"run\.json: field 'prompts_per_step'"):
        read_meta(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "prompts_per_step": 2, "group_size": 4,
                                                   "batch_size": 9}))
    with pytest.raises(UserError, match="disagrees"):
        read_meta(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "status": "exploded"}))
    with pytest.raises(UserError, match="field 'status'"):
        read_meta(tmp_path)
    with pytest.raises(UserError, match="no run.json"):
        read_meta(tmp_path / "nowhere")


def test_metrics_append_truncated_tail_is_ignored_then_repaired(tmp_path):
    write_meta(tmp_path, make_meta(run_id="r"))
    path = tmp_path / "metrics.jsonl"
    with JsonlWriter(path) as w:
        w.append({"step": 1, "samples/retained": 16, "reward/mean": 0.5})
        w.append({"step": 2, "samples/retained": 32, "reward/mean": 0.6})
    with open(path, "a") as fh:  # a crash mid-line
        fh.write('{"step": 3, "samples/ret')
    with pytest.warns(UserWarning, match="truncated last line"):
        rows = read_jsonl(path)
    assert [r["step"] for r in rows] == [1, 2]
    with pytest.warns(UserWarning, match="incomplete last line"):
        w = JsonlWriter(path)
    w.append({"step": 3, "samples/retained": 48})
    w.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run(tmp_path)
    assert list(run.metrics["step"]) == [1, 2, 3]
    assert list(run.metrics["samples/retained"]) == [16, 32, 48]


def test_malformed_middle_line_names_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(UserError, match=r"metrics\.jsonl:2: malformed JSON"):
        read_jsonl(path)


def test_write_run_roundtrip(tmp_path):
    import pandas as pd

    run = Run(meta=make_meta(run_id="imp", prompts_per_step=4, group_size=2),
              metrics=pd.DataFrame({"step": [1, 2], "reward/mean": [0.1, float("nan")]}),
              evals=pd.DataFrame({"step": [2], "samples/retained": [16], "eval/score": [0.25]}))
    write_run(tmp_path / "imp", run)
    back = read_run(tmp_path / "imp")
    assert back.meta.batch_size == 8
    assert list(back.metrics["step"]) == [1, 2]
    assert back.evals["eval/score"].tolist() == [0.25]
