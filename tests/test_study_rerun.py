"""A re-run into an --out that holds a study of other settings (newcomer try-out, finding 2; issue 46): one error
naming what differs, exit 2, nothing written or relabelled; --force starts over with the old study moved aside."""

import json

from _cli import run_in_process
from rlbatch.study.ladder import build_ladder
from rlbatch.study.manifest import SWEEP_JSON, check_same_study, study_differences, write_manifest

OPTS = dict(eval_every=64, eval_size=64, max_new_tokens=5, micro_batch_size=8)


def old_study(out, base_lr=5e-5, samples=4096, target=0.35):
    specs = build_ladder(base_batch=16, base_lr=base_lr, batches=[16, 64], seeds=1, samples=samples, options=OPTS)
    write_manifest(out, {"version": 1, "settings": {"base_lr": base_lr, "samples": samples, "target": target,
                                                     "workers": 1},
                         "trials": [{"run_id": s.run_id, "spec": s, "state": "finished",
                                     "run_dir": f"trials/{s.run_id}", "attempts": 1, "error": None,
                                     "seconds": 1.0} for s in specs]})
    (out / "trials" / specs[0].run_id).mkdir(parents=True)
    (out / "trials" / specs[0].run_id / "marker").write_text("old")
    return specs


def test_the_differences_are_named_field_by_field(tmp_path):
    old_study(tmp_path)
    same = build_ladder(base_batch=16, base_lr=5e-5, batches=[16, 64], seeds=1, samples=4096, options=OPTS)
    assert study_differences(tmp_path, same, {"target": 0.35, "workers": 4}) == []  # a resume; workers are free
    other = build_ladder(base_batch=16, base_lr=1e-4, batches=[16, 64], seeds=1, samples=2048, options=OPTS)
    diffs = study_differences(tmp_path, other, {"target": 0.45})
    assert "base_lr 5e-05 (now 0.0001)" in diffs and "samples 4096 (now 2048)" in diffs
    assert "target 0.35 (now 0.45)" in diffs
    assert any(d.startswith("lr ") for d in diffs)  # B = 64's learning rate follows the base


def test_a_changed_rerun_is_refused_and_nothing_is_lost(tmp_path, monkeypatch, capsys):
    old_study(tmp_path)
    before = (tmp_path / SWEEP_JSON).read_text()
    code, out, err = run_in_process(monkeypatch, capsys, "sweep", "--base-batch", "16", "--base-lr", "1e-4",
                                    "--batches", "16,64", "--samples", "2048", "--target", "0.35",
                                    "--eval-every", "64", "--eval-size", "64", "--max-new-tokens", "5",
                                    "--micro-batch-size", "8", "--out", tmp_path)
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"rlbatch: error: {tmp_path}: holds a study of other settings (")
    assert "base_lr 5e-05 (now 0.0001)" in err and "samples 4096 (now 2048)" in err and "--force" in err
    assert (tmp_path / SWEEP_JSON).read_text() == before  # the manifest is not rewritten with settings never used
    assert (tmp_path / "trials").is_dir() and not list(tmp_path.glob("replaced-*"))


def test_force_moves_the_old_study_aside(tmp_path):
    specs = old_study(tmp_path)
    other = build_ladder(base_batch=16, base_lr=1e-4, batches=[16, 64], seeds=1, samples=2048, options=OPTS)
    check_same_study(tmp_path, other, {"target": 0.35}, force=True)
    (moved,) = list(tmp_path.glob("replaced-*"))
    assert json.loads((moved / SWEEP_JSON).read_text())["settings"]["base_lr"] == 5e-5
    assert (moved / "trials" / specs[0].run_id / "marker").read_text() == "old"
    assert not (tmp_path / SWEEP_JSON).exists() and not (tmp_path / "trials").exists()
    check_same_study(tmp_path, other, {"target": 0.35})  # nothing left to differ from
