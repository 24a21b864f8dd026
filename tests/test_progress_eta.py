"""The long commands' progress lines (researcher tryout findings 10 and 16): elapsed and remaining time each labelled
as such, the remaining time covering the whole command (the trials, then the timing pass and the report), the timing
pass's own lines with an ETA, and plain flushed lines when piped. Every clock here is a fake one."""

from __future__ import annotations

import io
import re
import sys

import pytest

from rlbatch import progress
from rlbatch.progress import After, Eta, EtaColumn, hms
from rlbatch.study.ladder import build_ladder


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def rough(monkeypatch):
    """Round rough guesses: 3 s a timing block, 10 s for any report."""
    monkeypatch.setattr(progress, "ROUGH_BLOCK_S", 3.0)
    monkeypatch.setattr(progress, "ROUGH_REPORT_S", 10.0)
    monkeypatch.setattr(progress, "ROUGH_REPORT_S_PER_RUN", 0.0)


def test_hms():
    assert hms(0) == "0:00:00" and hms(1208) == "0:20:08" and hms(3725.4) == "1:02:05" and hms(-3) == "0:00:00"


def test_elapsed_and_left_are_labelled_and_left_includes_what_follows(rough):
    clock = FakeClock()
    eta = Eta(30, after=After(blocks=30, runs=30), clock=clock)
    assert eta.text() == ("0:00:00 elapsed, time left known once the first of 30 trials ends "
                          "(then timing pass, report)")
    assert eta.text(short=True) == "0:00:00 elapsed, time left known once the first of 30 trials ends"
    clock.t += 29 * 40
    eta.advance(29)
    # the trials at 40 s each: 40 s left of them; then 30 blocks at the rough 3 s and the report's rough 10 s
    assert eta.left() == pytest.approx(40 + 90 + 10)
    assert eta.text() == ("0:19:20 elapsed, ~0:02:20 left: trials 0:00:40, timing pass ~0:01:30 (30 blocks at a "
                          "rough 3 s), report ~0:00:10 (rough)")
    clock.t += 20  # counts down between trials
    assert eta.left() == pytest.approx(20 + 100)
    clock.t += 28
    eta.advance()
    # the tryout's last bar: the elapsed time is "elapsed", and "left" is what the command still does
    assert eta.text() == ("0:20:08 elapsed, ~0:01:40 left: timing pass ~0:01:30 (30 blocks at a rough 3 s), "
                          "report ~0:00:10 (rough)")
    assert eta.text(short=True) == "0:20:08 elapsed, ~0:01:40 left (incl. timing pass and report)"
    assert EtaColumn(eta).render(None).plain == eta.text(short=True)


def test_a_measured_block_time_replaces_the_rough_guess(rough):
    assert After(blocks=10, report=False).seconds() == 30
    assert After(blocks=10, block_s=8.0, report=False).parts() == [("timing pass", 80.0, None)]
    clock = FakeClock()
    eta = Eta(30, name="timing pass", unit="blocks", after=After(runs=30), clock=clock)
    clock.t += 8
    eta.advance()
    assert eta.text() == "0:00:08 elapsed, ~0:04:02 left: timing pass 0:03:52, report ~0:00:10 (rough)"
    nothing = Eta(2, clock=clock)
    clock.t += 5
    nothing.advance(2)
    assert nothing.text() == "0:00:05 elapsed, ~0:00:00 left"
    noted = Eta(1, after=After(report=False, note="more if another look is needed"), clock=clock)
    assert noted.text().endswith("; more if another look is needed")


class Pipe(io.StringIO):
    """A pipe's stdout: what has been written since the last flush is ``pending``."""

    def __init__(self):
        super().__init__()
        self.pending = ""

    def isatty(self):
        return False

    def write(self, s):
        self.pending += s
        return super().write(s)

    def flush(self):
        self.pending = ""


def test_sweep_lines_when_piped_say_elapsed_and_left_including_the_report(tmp_path, monkeypatch, rough):
    from rlbatch.backends import local

    specs = build_ladder(base_batch=8, base_lr=1e-3, batches=[16, 32], group_sizes=[4], seeds=1, samples=1000,
                         model="tiny-random", task="arithmetic")
    clock = FakeClock()
    pipe = Pipe()
    monkeypatch.setattr(sys, "stdout", pipe)
    monkeypatch.setattr(local, "_init_worker", lambda threads, parent_pid=None, in_process=False: None)
    monkeypatch.setattr(local, "_prepare", lambda model, device="cpu": model)
    unflushed = []

    def work(spec_json, run_dir, runner="local"):
        unflushed.append(pipe.pending)  # the previous trial's line reached the pipe before this trial ran
        clock.t += 60
        return spec_json["run_id"], "finished", None, 60.0

    monkeypatch.setattr(local, "_work", work)
    local.run_sweep(specs, tmp_path / "sweep", progress=True, clock=clock)
    lines = pipe.getvalue().splitlines()
    assert unflushed == [""] * 3 and pipe.pending == ""
    assert len(lines) == 3 and all(line.startswith("sweep: ") for line in lines)
    assert re.fullmatch(r"sweep: 1/3 \S+: finished \(60 s; 0:01:00 elapsed, ~0:02:10 left: trials 0:02:00, "
                        r"report ~0:00:10 \(rough\)\)", lines[0]), lines[0]
    assert lines[-1].endswith("finished (60 s; 0:03:00 elapsed, ~0:00:10 left: report ~0:00:10 (rough))")
    assert " left ~" not in pipe.getvalue()

    # the demo's sweep: its timing pass follows, 2 rounds x 3 configurations at the rough 3 s a block
    pipe.seek(0)
    pipe.truncate()
    local.run_sweep(specs, tmp_path / "demo", progress=True, clock=clock, after=After(blocks=6))
    first = pipe.getvalue().splitlines()[0]
    assert first.endswith("(60 s; 0:01:00 elapsed, ~0:02:28 left: trials 0:02:00, timing pass ~0:00:18 (6 blocks at "
                          "a rough 3 s), report ~0:00:10 (rough))"), first


def test_timing_pass_lines_have_an_eta(tmp_path, monkeypatch, rough):
    from rlbatch.study import timing

    specs = build_ladder(base_batch=16, base_lr=1e-4, batches=[32], seeds=2, samples=1000)  # 2 configurations
    clock = FakeClock()

    def fake_block(spec, steps, workdir):
        clock.t += 8 if spec.batch_size == 16 else 4  # B = 16's blocks take twice as long
        return {"config": spec.config_id, "batch_size": spec.batch_size, "steps": steps, "generated": 640.0,
                "samples": float(spec.batch_size * steps), "cpu_s": 1.0, "wall_s": 1.0}

    monkeypatch.setattr(timing, "run_block", fake_block)
    said = []
    timing.timing_pass(tmp_path, specs, rounds=2, steps=4, say=said.append, after=After(runs=4), clock=clock)
    assert said[0] == ("timing pass: 4 blocks (2 rounds x 2 configurations), ~0:00:12 at a rough guess of 3 s a "
                       "block until the first is timed")
    assert len(said) == 5
    for i, line in enumerate(said[1:], 1):
        assert line.startswith(f"timing pass: {i}/4 ") and "640 responses generated per CPU second (" in line
    spent = [8 if "B16" in line else 4 for line in said[1:]]
    t = spent[0]
    assert said[1].endswith(f"(0:00:{t:02d} elapsed, ~{hms(4 * t - t + 10)} left: timing pass {hms(3 * t)}, "
                            "report ~0:00:10 (rough))")
    assert said[-1].endswith("(0:00:24 elapsed, ~0:00:10 left: report ~0:00:10 (rough))")


def test_the_demo_counts_the_timing_pass_and_the_report_in_its_eta(tmp_path, monkeypatch, capsys):
    from rlbatch.study import demo

    seen = {}
    monkeypatch.setattr(demo, "run_sweep", lambda todo, out, **kw: seen.setdefault("sweep", kw))
    monkeypatch.setattr(demo, "prepare_here", lambda *a, **kw: None)
    monkeypatch.setattr(demo, "timing_pass", lambda out, specs, **kw: seen.setdefault("timing", kw))
    monkeypatch.setattr(demo, "report_sweep", lambda out, **kw: {})
    demo.run_demo(tmp_path / "demo", seeds=1, timing_rounds=2)
    configs = len(demo.DEMOS["tiny"]["batches"]) + 1  # the ladder and its fixed-LR control
    assert seen["sweep"]["after"] == After(blocks=2 * configs)
    assert seen["timing"]["after"].report and seen["timing"]["after"].blocks == 0
    assert seen["timing"]["say"] is not None
    out = capsys.readouterr().out
    assert "report: writing report.html, report.md and report.json" in out and "a rough guess" in out
    seen.clear()
    demo.run_demo(tmp_path / "untimed", seeds=1, timing_rounds=0)  # no timing pass: only the report follows
    assert seen["sweep"]["after"] == After(blocks=0) and "timing" not in seen


def test_the_sequential_demo_times_first_so_its_looks_decide_on_the_reports_throughput(tmp_path, monkeypatch):
    # issue 52: the looks ran on the trials' own clock and the report on the timing pass, and the page named two picks
    from rlbatch.study import demo

    order = []
    monkeypatch.setattr(demo, "prepare_here", lambda *a, **kw: None)
    monkeypatch.setattr(demo, "timing_pass", lambda out, specs, **kw: order.append(("timing", kw["after"])))
    monkeypatch.setattr(demo, "run_spec_study", lambda out, specs, run_specs, target, progress:
                        order.append(("sequential", None)))
    monkeypatch.setattr(demo, "report_sweep", lambda out, **kw: order.append(("report", None)) or {})
    demo.run_demo(tmp_path / "demo", progress=False)
    assert [o[0] for o in order] == ["timing", "sequential", "report"]
    configs = len(demo.DEMOS["tiny"]["batches"]) + 1
    assert order[0][1].runs == 2 * configs and "sequential study's trials" in order[0][1].note
