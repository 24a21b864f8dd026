"""The report's synchronous-vs-asynchronous section (rlbatch.report.async_section) on hand-made runs."""

import numpy as np
import pandas as pd
import pytest

from _cli import run_in_process
from rlbatch.report import build_report
from rlbatch.analysis.asynchrony import async_comparison, async_rows, async_setting
from rlbatch.runstore import Run, RunMeta


def make_run(rid, b, per_step_s, reach_at, config=None, staleness=0.0):
    """Score rises linearly to 0.8 at ``reach_at`` x 1000 retained samples; fixed time per step; G = 4."""
    meta = RunMeta(run_id=rid, prompts_per_step=b // 4, group_size=4, lr=1e-6, hardware="cpu",
                   **({"config": config} if config else {}))
    s = np.arange(1, 101)
    metrics = pd.DataFrame({"step": s, "samples/retained": s * b, "time/gen_s": per_step_s * 0.5,
                            "time/train_s": per_step_s * 0.5, "time/step_s": per_step_s,
                            "time/wall_s": s * per_step_s, "rollout/staleness_mean": staleness,
                            "grad_norm/actor": (64 / b) ** 0.5 * np.ones(100),
                            "time/overlap_s": 0.3 if config else 0.0, "time/gen_busy_s": 0.4 if config else 0.0})
    es = s[::2]
    evals = pd.DataFrame({"step": es, "samples/retained": es * b, "time/wall_s": es * per_step_s,
                          "eval/score": np.minimum(0.8, es * b / (reach_at * 1000) * 0.8)})
    run = Run(meta=meta, metrics=metrics, evals=evals)
    run.meta.samples_source = "log"
    return run


def runs():
    # sync B=64 reaches 0.4 at 2500 samples, 10 s per step; async K=1 needs 3000 (rN 1.2) at half the step time
    # (throughput x2): time-to-target 0.6x. B=128 sync only: no pair.
    return [make_run("b64", 64, 10.0, 5), make_run("b64-a1", 64, 5.0, 6, {"async_rollouts": 1}, 1.0),
            make_run("b128", 128, 15.0, 6)]


def test_async_rows_hand_computed():
    rows, ref = async_rows(runs(), 0.4, n_boot=200)
    assert ref == "b64" and len(rows) == 1
    r = rows[0]
    assert (r["config"], r["sync_config"], r["batch_size"], r["async_rollouts"]) == ("b64-a1", "b64", 64, 1)
    assert r["rN"] == pytest.approx(3000 / 2500)
    assert r["relative_throughput"] == pytest.approx(2.0)
    assert r["relative_time"] == pytest.approx(0.6)
    assert r["staleness_mean"] == 1.0 and r["overlap_frac"] == pytest.approx(0.75)
    assert r["vs_reference_time"] == pytest.approx(0.6)  # the reference is the synchronous B=64 itself


def test_setting_and_section(tmp_path):
    assert async_setting(runs()[0]) is None and async_setting(runs()[1]) == (1, None)
    foreign = make_run("verl", 64, 1.0, 5, staleness=2.0)  # no trainer config: K from the logged staleness
    assert async_setting(foreign) == (2, None)
    assert async_comparison(runs()[::2], 0.4) is None  # no asynchronous run: no comparison, no section
    rep = build_report(runs(), tmp_path, target=0.4)
    assert rep["async"]["rows"][0]["relative_time"] == pytest.approx(0.6)
    md = (tmp_path / "report.md").read_text()
    assert "## Synchronous vs asynchronous rollouts" in md and "throughput x2.00, rN 1.20" in md


def test_report_async_section_reads_the_accountings_estimates(tmp_path, monkeypatch):
    """The report bootstraps each configuration once: the asynchronous section takes its estimates from the
    report's study (the accounting's), so a report of 3 configurations makes 3 estimates at the target."""
    import sys

    import rlbatch.analysis.accounting as accounting

    calls = []
    orig = accounting.estimate_configuration

    def counted(*args, **kwargs):
        calls.append(args[1] if len(args) > 1 else kwargs.get("target"))
        return orig(*args, **kwargs)

    for mod in list(sys.modules.values()):  # every rlbatch module that holds the function
        if getattr(mod, "__name__", "").startswith("rlbatch") and getattr(mod, "estimate_configuration", None) is orig:
            monkeypatch.setattr(mod, "estimate_configuration", counted)
    rep = build_report(runs(), tmp_path, target=0.4)
    assert rep["async"]["rows"][0]["relative_time"] == pytest.approx(0.6)
    assert sum(t is not None for t in calls) == 3


def test_sweep_runs_sync_and_async_ladders():
    from rlbatch.study.ladder import build_ladder

    specs = build_ladder(base_batch=16, base_lr=1e-4, batches=[32], samples=64, seeds=1,
                        options={"max_new_tokens": 4, "async_rollouts": 1, "partial_rollout_tokens": 2})
    ids = [s.run_id for s in specs]
    assert ids == ["B16-G8-sqrt-s0", "B32-G8-sqrt-s0", "B16-G8-sqrt-stale1t2-s0", "B32-G8-sqrt-stale1t2-s0"]
    assert "async_rollouts" not in specs[0].options and specs[2].options["async_rollouts"] == 1
    assert sorted(ids)[0] == "B16-G8-sqrt-s0"  # the synchronous run sorts first: the default reference at equal B
    plain = build_ladder(base_batch=16, base_lr=1e-4, batches=[32], samples=64, options={"max_new_tokens": 4})
    assert [s.run_id for s in plain] == ids[:2]


@pytest.mark.parametrize("extra, needle", [
    (["--algo", "ppo", "-G", "1", "--async-rollouts", "1"], "implemented for GRPO only"),
    (["--async-rollouts", "-1"], "--async-rollouts:"),
    (["--partial-rollout-tokens", "0"], "--partial-rollout-tokens:"),
])
def test_train_cli_async_errors(monkeypatch, capsys, tmp_path, extra, needle):
    code, _, err = run_in_process(monkeypatch, capsys, "train", "--model", "tiny-random", "--samples", "8", "--lr",
                                  "1e-3", "--out", tmp_path / "r", *extra)
    assert code == 2 and needle in err and "Traceback" not in err
