"""The researcher tryout's findings (../shared/reviews/researcher-tryout.md, issue 56), each checked on the repo's
own example logs with values read by hand from them.

examples/logs/verl: B64/B128/B256, verl console logs, validation every 5 steps and none at step 0
(B64.log line 6: step 5, val-core/openai/gsm8k/reward/mean@1 0.2486; B256: step 5, 1,280 retained samples, 0.356).
"""

from pathlib import Path

from _cli import run_in_process

VERL = Path(__file__).resolve().parents[1] / "examples" / "logs" / "verl"


def _json(monkeypatch, capsys, *args):
    import json

    code, out, err = run_in_process(monkeypatch, capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_finding_1_a_run_above_the_target_at_its_first_evaluation_is_bounded_not_unreached(monkeypatch, capsys):
    from rlbatch.report import with_ci_cells

    d = _json(monkeypatch, capsys, "analyze", VERL, "--target", "0.32")
    row = next(r for r in d["accounting"] if r["run"] == "B256")
    assert row["at_most"] == [1280.0] and row["samples_to_target_at_most"] == 1280.0
    cells = with_ci_cells([row])[0]
    assert cells["samples_to_target_cell"] == "≤ 1,280"
    assert cells["rN_cell"].startswith("≤ ") and cells["relative_time_cell"].startswith("≤ ")
    # the table's bound and the text's are one number, rounded outward (up for an upper bound)
    assert f"rN {cells['rN_cell']}" in d["recommendation"]
    assert "0 of 1 seeds reached" not in d["recommendation"]
    code, out, _ = run_in_process(monkeypatch, capsys, "analyze", VERL, "--target", "0.32")
    assert code == 0 and "≤ 1,280" in out


def test_finding_1_a_target_below_every_start_is_refused_with_one_line(monkeypatch, capsys):
    for t in ("0.2", "-3"):
        code, out, err = run_in_process(monkeypatch, capsys, "analyze", VERL, f"--target={t}")
        assert code == 2 and len(err.splitlines()) == 1, err
        assert "at or below every run's first evaluation" in err and "0.2486, B64" in err
    code, _, err = run_in_process(monkeypatch, capsys, "plan", VERL, "--target=0.2")
    assert code == 2 and "0.2486" in err
