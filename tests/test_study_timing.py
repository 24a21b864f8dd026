"""The timing pass (issue 44): blocks interleaved across configurations and rounds, resumable, and the accounting
taking throughput and time-to-target from them, in `rlbatch analyze` and in the sweep's own report alike."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _stored_sweeps import unpack
from rlbatch.analyze import analyze
from rlbatch.study import timing
from rlbatch.study.ladder import build_ladder

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"
TARGET = 0.45
CONFIGS = ["B16-G8-sqrt", "B32-G8-sqrt", "B64-G8-sqrt", "B128-G8-sqrt", "B128-G8-fixed"]


def _specs(seeds: int = 2):
    return build_ladder(base_batch=16, base_lr=1e-4, batches=[32, 64, 128], seeds=seeds, fixed_lr_control=128,
                        samples=1000)


def test_block_plan_interleaves_every_configuration_in_each_round():
    plan = timing.block_plan(_specs(), rounds=3)
    assert len(plan) == 3 * 5
    for r in range(3):
        rnd = [s for k, s in plan if k == r]
        assert sorted(s.config_id for s in rnd) == sorted(CONFIGS)  # each configuration once per round
        assert all(s.seed == 0 for s in rnd)  # its first seed's settings
    orders = [[s.config_id for k, s in plan if k == r] for r in range(3)]
    assert len({tuple(o) for o in orders}) > 1  # rounds in their own shuffled orders, not ladder order each time
    assert timing.block_plan(_specs(), rounds=3) == plan  # a fixed seed: the same plan on a rerun


def test_timing_pass_appends_one_line_per_block_and_resumes(tmp_path, monkeypatch):
    ran = []

    def fake_block(spec, steps, workdir):
        ran.append(spec.config_id)
        return {"config": spec.config_id, "batch_size": spec.batch_size, "steps": steps,
                "samples": float(spec.batch_size * steps), "cpu_s": 0.01 * steps, "wall_s": 0.012 * steps}

    monkeypatch.setattr(timing, "run_block", fake_block)
    # the sequential demo times before its first trial: the study's directory does not exist yet
    assert len(timing.timing_pass(tmp_path / "new" / "demo", _specs(), rounds=1, steps=4)) == 5
    ran.clear()
    blocks = timing.timing_pass(tmp_path, _specs(), rounds=2, steps=4)
    assert len(blocks) == 10 and len(ran) == 10
    # a small batch's block runs enough steps for 512 responses (B = 16: 32), a large one the given 4
    assert {b["config"]: b["steps"] for b in blocks} == {"B16-G8-sqrt": 32, "B32-G8-sqrt": 16, "B64-G8-sqrt": 8,
                                                         "B128-G8-sqrt": 4, "B128-G8-fixed": 4}
    lines = (tmp_path / "timing.jsonl").read_text().splitlines()
    assert [json.loads(x)["round"] for x in lines] == [0] * 5 + [1] * 5
    # killed after 7 blocks (a truncated 8th line): the rerun runs the 3 missing blocks only
    (tmp_path / "timing.jsonl").write_text("\n".join(lines[:7]) + "\n" + lines[7][:20])
    ran.clear()
    blocks = timing.timing_pass(tmp_path, _specs(), rounds=2, steps=4)
    assert len(ran) == 3 and len(blocks) == 10
    assert sorted((b["round"], b["config"]) for b in blocks) == sorted((r, c) for r in range(2) for c in CONFIGS)


def _blocks(speed: dict[str, float], rounds: int = 3, kept: float = 0.4) -> list[dict]:
    """Hand-made blocks: configuration -> generated responses per CPU second, varied by -10%, 0, +10% across
    rounds; ``kept``: the share of the block's responses it retained (at the warm start)."""
    out = []
    for r in range(rounds):
        for c, x in speed.items():
            f, b = (0.9, 1.0, 1.1)[r % 3], int(c[1:].split("-")[0])
            out.append({"config": c, "batch_size": b, "round": r, "steps": 4, "samples": kept * 4 * b,
                        "cpu_s": 4 * b / (x * f), "wall_s": 4 * b / (x * f) * 1.2})
    return out


def _share(run_dirs: list[Path], s_per_seed: list[float | None]) -> float:
    """Retained over generated responses up to each seed's samples-to-target, pooled, read off metrics.jsonl."""
    ret = gen = 0.0
    for d, s in zip(run_dirs, s_per_seed):
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        r = [x["samples/retained"] for x in rows]
        g = [x["samples/generated"] for x in rows]
        if s is None:
            ret, gen = ret + r[-1], gen + g[-1]
            continue
        i = next(i for i, v in enumerate(r) if v >= s)
        g_at = g[i] if i == 0 else g[i - 1] + (g[i] - g[i - 1]) * (s - r[i - 1]) / (r[i] - r[i - 1])
        ret, gen = ret + s, gen + g_at
    return ret / gen


def test_accounting_takes_throughput_and_time_from_the_timing_pass(tmp_path):
    trials = unpack(DATA / "trials.tar.gz", tmp_path)
    speed = {"B16-G8-sqrt": 500.0, "B32-G8-sqrt": 800.0, "B64-G8-sqrt": 1100.0, "B128-G8-sqrt": 1300.0,
             "B128-G8-fixed": 1300.0}
    (tmp_path / "timing.jsonl").write_text("".join(json.dumps(b) + "\n" for b in _blocks(speed)))
    res = analyze([tmp_path], target=TARGET)
    rows = {r["run"]: r for r in res["accounting"]}
    per = 1.0 if res["clock"] == "cpu" else 1 / 1.2  # the blocks' cpu_s or wall_s, the study's clock
    for name, x in speed.items():
        r = rows[name]
        assert r["throughput_window"] == "timing pass", name
        # the blocks' generation rate (geometric mean of x * 0.9, x, x * 1.1) times the runs' retained share
        share = _share([trials / rid for rid in r["runs"]], r["samples_to_target_per_seed"])
        assert 0.3 < share < 1
        assert r["throughput_samples_per_s"] == pytest.approx(share * per * x * (0.9 * 1.1) ** (1 / 3), rel=1e-6)
        lo, hi = r["throughput_ci"]
        assert lo < r["throughput_samples_per_s"] < hi  # an interval from the blocks' spread, not degenerate
        if r["samples_to_target"]:
            assert r["time_to_target_s"] == pytest.approx(r["samples_to_target"] / r["throughput_samples_per_s"])
    # the share a block kept at the warm start is not the run's, and does not enter (issue 44 reruns: B = 16's
    # blocks kept 37%, its runs 68%, which had inflated every larger batch's gain)
    (tmp_path / "timing.jsonl").write_text("".join(json.dumps(b) + "\n" for b in _blocks(speed, kept=0.9)))
    again = {r["run"]: r for r in analyze([tmp_path], target=TARGET)["accounting"]}
    assert all(again[n]["throughput_samples_per_s"] == rows[n]["throughput_samples_per_s"] for n in speed)


def test_a_blocks_phases_are_reweighted_to_the_runs_retained_share(tmp_path):
    """A block's generation seconds are per response generated, the rest per response retained: with the runs'
    retained share r, the block's g (generation s per generated) and u (update s per retained) give the run's
    throughput 1 / (g / r + u), by hand below."""
    trials = unpack(DATA / "trials.tar.gz", tmp_path)
    speed = {"B16-G8-sqrt": 500.0, "B32-G8-sqrt": 800.0, "B64-G8-sqrt": 1100.0, "B128-G8-sqrt": 1300.0,
             "B128-G8-fixed": 1300.0}
    blocks = _blocks(speed)
    for b in blocks:
        b.update(generated=4.0 * b["batch_size"], gen_s=0.3 * b["wall_s"], train_s=0.7 * b["wall_s"])
    (tmp_path / "timing.jsonl").write_text("".join(json.dumps(b) + "\n" for b in blocks))
    res = analyze([tmp_path], target=TARGET)
    key = "cpu_s" if res["clock"] == "cpu" else "wall_s"
    for r in res["accounting"]:
        share = _share([trials / rid for rid in r["runs"]], r["samples_to_target_per_seed"])
        xs = []
        for b in (b for b in blocks if b["config"] == r["run"]):
            g, u = 0.3 * b[key] / b["generated"], 0.7 * b[key] / b["samples"]
            xs.append(1 / (g / share + u))
        assert r["throughput_samples_per_s"] == pytest.approx(float(np.exp(np.mean(np.log(xs)))), rel=1e-6)


def test_the_sweeps_own_report_uses_the_timing_pass_as_analyze_does(tmp_path, monkeypatch):
    """The demo's report read each trial directory on its own, below OUT/trials, and so missed OUT/timing.jsonl:
    its throughput came from the trials while `rlbatch analyze OUT` used the timing pass (found on the issue 44
    reruns). Both now read the same blocks."""
    import rlbatch.study.report as sr

    trials = unpack(DATA / "trials.tar.gz", tmp_path)
    speed = {c: 500.0 + 100 * i for i, c in enumerate(CONFIGS)}
    (tmp_path / "timing.jsonl").write_text("".join(json.dumps(b) + "\n" for b in _blocks(speed)))
    specs = build_ladder(base_batch=16, base_lr=1e-4, batches=[32, 64, 128], seeds=3, fixed_lr_control=128,
                         samples=24576)
    man = {"trials": [{"spec": s.model_dump(), "state": "finished", "run_dir": f"trials/{s.run_id}"}
                      for s in specs if (trials / s.run_id).is_dir()], "settings": {}}
    (tmp_path / "sweep.json").write_text(json.dumps(man))
    seen = {}

    def capture(runs, *args, **kw):
        seen["blocks"] = {r.run_id: len(getattr(r.meta, "timing_blocks", None) or []) for r in runs}
        raise RuntimeError("captured")

    monkeypatch.setattr(sr, "build_report", capture)
    with pytest.raises(RuntimeError, match="captured"):
        sr.report_sweep(tmp_path, target=TARGET)
    assert len(seen["blocks"]) == 15 and set(seen["blocks"].values()) == {3}
