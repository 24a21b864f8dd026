"""The one adaptive decision loop (rlbatch.study.adaptive.decide) on its executors: a stored sweep replayed as live
verl jobs (the file logger's JSONL written line by line in timestamp order), the same record format as the local
chunks, and the launched-job executor stopping a real process with a signal."""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from _stored_sweeps import unpack
from rlbatch.readers import detect_format, load
from rlbatch.study.adaptive import (CANNOT_WIN, NEVER, TrialRef, decide, degenerate, earliest_crossing, informative,
                                    race, race_verdict, stop_verdict, time_floor)
from rlbatch.backends.executors import ChunkExecutor, LogExecutor, ProcessJob, verl_records
from rlbatch.study.replay import ladder_runs, replay_sweep
from rlbatch.backends.synthetic import SyntheticModel, synthetic_trial

DATA = Path(__file__).resolve().parent / "data" / "demo_sweep"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    unpack(DATA / "trials.tar.gz", root)
    return {r.run_id: r for r in load(root / "trials")}


@pytest.fixture(scope="module")
def replayed(demo, tmp_path_factory):
    """B = 16, 32 and 128 (seed 0) of the stored demo sweep replayed as verl jobs, target 0.45."""
    runs = ladder_runs([demo["B128-G8-sqrt-s0"], demo["B16-G8-sqrt-s0"], demo["B32-G8-sqrt-s0"]])
    out = tmp_path_factory.mktemp("replay")
    return replay_sweep(runs, out, target=0.45, n_boot=30), out, runs


def test_replayed_verl_sweep_is_decided_by_the_loop(replayed):
    res, out, runs = replayed
    # ladder order: the smaller first; the first (B = 16) is the reference
    assert [r.run_id for r in runs] == ["B16-G8-sqrt-s0", "B32-G8-sqrt-s0", "B128-G8-sqrt-s0"]
    by = {t.run_id: t for t in res.trials}
    # stored: B=128 reaches 0.45 first on its own clock (9.4 s wall; B = 32 16.4 s, B = 16 33.6 s in the full runs)
    assert res.recommended == "B128-G8-sqrt-s0" and by["B128-G8-sqrt-s0"].state in ("reached", "decided")
    # the reference is never stopped (issue 37): it runs to its target, so every rN is measured against it
    assert by["B16-G8-sqrt-s0"].state == "reached"
    assert by["B32-G8-sqrt-s0"].state == "cannot win"
    # what the loop read is verl's file logger, written as the job would (one line per step, in order)
    log = out / "B32-G8-sqrt-s0.jsonl"
    assert detect_format(log) == "verl-jsonl"
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(len(rows)))
    # stopped early: fewer steps written than the stored run has (it crossed 0.45 at 7,557 retained samples)
    assert len(rows) - 1 < len(runs[1].metrics)
    assert by["B32-G8-sqrt-s0"].samples == (len(rows) - 1) * 32
    # the stop was decided on the evidence recorded with it: B = 128 reached the target first on its own clock,
    # so B = 32 lost the race once its clock passed B = 128's
    stop = next(d for d in res.decisions if d.config == "B32-G8-sqrt" and d.action == "stop")
    assert stop.outcome == "cannot win" and stop.reason.startswith("lost the race")
    assert stop.evidence["time_floor_s"] > stop.evidence["best_time_to_target_s"] > 0
    assert stop.evidence["best"] == "B128-G8-sqrt"
    # in timestamp order on one clock: B = 32 ran until just past B = 128's time-to-target, not to its own
    assert stop.evidence["time_floor_s"] < 1.2 * stop.evidence["best_time_to_target_s"]  # stopped at the next poll
    assert not any(d.config == "B16-G8-sqrt" and d.action == "stop" and d.outcome == "cannot win"
                   for d in res.decisions)


def test_record_format_is_the_same_for_every_backend(replayed, tmp_path):
    res, _, _ = replayed
    model = SyntheticModel(eval_every=8192)
    base = {"prompts_per_step": 128, "group_size": 8, "lr": 1e-6, "seed": 0, "lr_rule": "sqrt", "base_batch": 1024,
            "base_lr": 1e-6}
    trials = [TrialRef(f"P{p}-G8-sqrt-s0", p * 8, f"P{p}-G8-sqrt", {**base, "prompts_per_step": p,
                                                                     "run_id": f"P{p}-G8-sqrt-s0"})
              for p in (128, 256)]
    local = decide(ChunkExecutor(partial(synthetic_trial, model=model), tmp_path), trials, target=0.7,
                   budget=120_000, n_boot=20)
    a, b = res.to_json(), local.to_json()
    assert set(a) == set(b) and a["version"] == b["version"] == 1
    assert set(a["trials"][0]) == set(b["trials"][0]) and set(a["decisions"][0]) == set(b["decisions"][0])
    assert b["backend"] == "local" and a["backend"] == "replay:verl-jsonl"
    json.dumps(a), json.dumps(b)  # plain JSON


STUB = r'''
import importlib.util, json, os, sys, time
# verl's own file logger (verl/utils/tracking.py, loaded from its file) writes the lines, as in a verl job
spec = importlib.util.spec_from_file_location("verl_tracking_file", sys.argv[4])
tracking = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tracking)
os.environ["VERL_FILE_LOGGER_PATH"] = sys.argv[2]
logger = tracking.FileLogger(project_name="rlbatch", experiment_name="trial")
for rec in json.load(open(sys.argv[1])):
    logger.log(data=rec["data"], step=rec["step"])
    time.sleep(float(sys.argv[3]))
logger.finish()
'''


def test_launched_job_is_stopped_with_a_signal_and_resumable(demo, tmp_path):
    """Two 'verl jobs' (processes writing a stored run's lines with verl's own FileLogger) watched through their
    logs: the loop stops the losing one with SIGTERM to its process group and records how to resume it."""
    import importlib.util

    pytest.importorskip("orjson", reason="orjson (verl's FileLogger writer) is not installed (dev extra)")
    spec = importlib.util.find_spec("verl")
    if spec is None:
        pytest.skip("verl is not installed (pip install --no-deps verl==0.9.1; `make test` does it)")
    tracking = Path(list(spec.submodule_search_locations)[0]) / "utils" / "tracking.py"
    (tmp_path / "stub.py").write_text(STUB)
    trials = []
    # B=16 writes its 1,537 lines over ~60 s, B=128 its 193 in ~1 s: the loop decides B=16 long before its end.
    # B=128 goes first: it is the reference (never stopped), B=16 the trial that loses the race
    for rid, sleep in (("B128-G8-sqrt-s0", 0.005), ("B16-G8-sqrt-s0", 0.04)):
        r = demo[rid]
        recs = [x[2] for x in verl_records(r, "arithmetic")]
        (tmp_path / f"{rid}.json").write_text(json.dumps(recs))
        log = tmp_path / "logs" / f"{rid}.jsonl"
        log.parent.mkdir(exist_ok=True)
        script = tmp_path / f"{rid}.sh"
        script.write_text(f"{sys.executable} {tmp_path / 'stub.py'} {tmp_path / (rid + '.json')} {log} {sleep} "
                          f"{tracking}\n")
        spec = {"log_path": str(log), "log_format": "verl-jsonl", "prompts_per_step": r.meta.prompts_per_step,
                "group_size": 8, "lr": r.meta.lr, "lr_rule": "sqrt", "seed": 0, "samples": len(recs) * 8 *
                r.meta.prompts_per_step, "job": ProcessJob(script, grace_s=5)}
        trials.append(TrialRef(rid, r.meta.batch_size, rid.rsplit("-s", 1)[0], spec))
    ex = LogExecutor(trials, interval=0.5)
    t0 = time.monotonic()
    res = decide(ex, trials, target=0.45, budget=max(t.spec["samples"] for t in trials), n_boot=20,
                 backend="verl", poll_timeout=0.5)
    by = {t.run_id: t for t in res.trials}
    assert by["B128-G8-sqrt-s0"].state == "reached"
    assert by["B16-G8-sqrt-s0"].state == "cannot win"
    for t in trials:  # every job is over: stopped by the loop or finished
        assert not t.spec["job"].running()
    n = len(Path(trials[1].spec["log_path"]).read_text().splitlines())
    assert n < len(json.loads((tmp_path / "B16-G8-sqrt-s0.json").read_text()))
    assert trials[1].spec["job"].proc.returncode == -15  # SIGTERM
    assert by["B16-G8-sqrt-s0"].resume == f"bash {tmp_path / 'B16-G8-sqrt-s0.sh'} (resumes from the trial's last checkpoint)"
    assert time.monotonic() - t0 < 180



def _cand(run, iv, t, *, source="fit", seeds=1):
    """A plan candidate (rlbatch.plan.plan_runs' keys the stopping rule reads)."""
    return {"run": run, "batch_size": 32, "runs": [f"{run}-s{i}" for i in range(seeds)], "interval": iv,
            "predicted_relative_time": t, "rN_source": source, "never_reaches": None}


def test_a_degenerate_interval_never_stops_a_trial_nor_a_one_seed_one_the_reference():
    # demo_sweep_cpu at seed 0 (issue 27): B = 32, the reference ([1, 1] by construction), was stopped as "cannot
    # win" against B = 128's one-seed measured interval [0.84, 0.93], which later data moved; B = 32 was the best
    ref = _cand("B32", [1.0, 1.0], 1.0, source="measured")
    one_seed = _cand("B128", [0.84, 0.93], 0.88, source="measured")
    assert degenerate([1.0, 1.0]) and degenerate(None) and not degenerate([1.0, None])
    assert not informative(one_seed) and informative(_cand("B128", [0.84, 0.93], 0.88, source="measured", seeds=3))
    assert stop_verdict(ref, one_seed, n_eval=10, reference="B32") is None
    # three seeds (the stored sweep that rlbatch watch reads): the best's interval is informative, but the reference
    # is never stopped (issue 37: every rN is measured against it; a reference stopped on a prediction about
    # another batch left the report with no rN at all)
    three = _cand("B128", [0.84, 0.93], 0.88, source="measured", seeds=3)
    assert stop_verdict(ref, three, n_eval=10, reference="B32") is None
    # a fitted interval above the best's stops (the rule still fires) ...
    assert stop_verdict(_cand("B16", [1.2, 1.6], 1.4), three, n_eval=10, reference="B32")[0] == CANNOT_WIN
    # ... not against a best whose own interval collapsed (not the reference)
    assert stop_verdict(_cand("B16", [1.2, 1.6], 1.4), _cand("B64", [0.9, 0.9], 0.9), n_eval=10,
                        reference="B32") is None
    # the reference as the best: its [1, 1] is by construction, the rival's fitted ratio interval carries the
    # uncertainty (demo_sweep: B = 32's [1.17, open] against B = 128 as the reference)
    assert stop_verdict(_cand("B32", [1.17, None], 1.58), _cand("B128", [1.0, 1.0], 1.0), n_eval=6,
                        reference="B128")[0] == CANNOT_WIN
    # ... but the same [1, 1] on a best that is not the reference is a collapsed interval: no stop
    assert stop_verdict(_cand("B32", [1.17, None], 1.58), _cand("B128", [1.0, 1.0], 1.0), n_eval=6,
                        reference="B16") is None
    assert stop_verdict(_cand("B32", [1.17, None], 1.58), _cand("B128", [1.0, 1.0], 1.0), n_eval=5,
                        reference="B128") is None  # too few evaluations


def test_nan_interval_ends_are_open():
    # rn_from_fits can return [0, NaN] while the reference is open: NaN is an open end, never a bound to stop on
    nan = float("nan")
    assert not degenerate([0.0, nan]) and not degenerate([nan, nan])
    ok = _cand("B128", [0.5, 0.9], 0.8)
    assert stop_verdict(_cand("B16", [1.5, 3.0], 2.0), _cand("B128", [0.5, nan], 0.8), n_eval=10) is None
    assert stop_verdict(_cand("B16", [nan, 3.0], 2.0), ok, n_eval=10) is None
    assert stop_verdict(_cand("B16", [1.5, 3.0], 2.0), ok, n_eval=10)[0] == CANNOT_WIN


def test_never_reaches_waits_for_the_sweeps_earliest_crossing():
    """A fit's "never reaches" stops a trial only once it has run as many samples as a comparable trial of the
    sweep needed to cross the target (issue 27: demo0 seed 1's B = 512 was rejected at 2760 samples after a dip,
    0.305 -> 0.281, and reached 0.37 at 10648; the sweep's earliest crossing, B = 32's, came at 3336)."""
    c = {**_cand("B512", [2.0, None], 2.5), "never_reaches": "fitted asymptote A = 0.298"}
    assert stop_verdict(c, None, n_eval=10) is None  # no crossing in the sweep yet: keep running
    assert stop_verdict(c, None, n_eval=10, samples=2760, crossed_at=3336) is None
    v = stop_verdict(c, None, n_eval=10, samples=3400, crossed_at=3336)
    assert v[0] == NEVER and "3336" in v[1] and "0.298" in v[1]
    assert stop_verdict(c, None, n_eval=5, samples=3400, crossed_at=3336) is None  # too few evaluations


def _run(root, xs, ys, rid, secs=None, batch=16):
    """A run-store run: retained samples ``xs`` with evaluation scores ``ys`` at wall seconds ``secs`` (default
    one per step)."""
    secs = list(range(len(xs))) if secs is None else secs
    d = root / rid
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"run_id": rid, "batch_size": batch, "lr": 1e-5, "seed": 0}))
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "samples/retained": x, "time/wall_s": t})
                                             + "\n" for i, (x, t) in enumerate(zip(xs, secs))))
    (d / "eval.jsonl").write_text("".join(json.dumps({"step": i, "samples/retained": x, "eval/score": y,
                                                      "time/wall_s": t}) + "\n"
                                          for i, (x, y, t) in enumerate(zip(xs, ys, secs))))
    return load(d, "rlbatch")[0]


def test_earliest_crossing_is_the_accountings_first_crossing(tmp_path):
    """The smallest samples-to-target over runs (the accounting's: the parabola through (1000, 0.30), (2000, 0.36)
    and (3000, 0.38), 0.36 + 4e-5 t - 2e-8 t^2 with t = x - 2000, reaches 0.37 at t = 1000 (1 - 1 / sqrt 2): x =
    2292.9, where a chord gave 2500); None when no run reached it."""
    a = _run(tmp_path, [0, 1000, 2000, 3000], [0.24, 0.30, 0.36, 0.38], "a")
    b = _run(tmp_path, [0, 1000, 2000, 3000], [0.24, 0.30, 0.32, 0.33], "b")
    assert earliest_crossing([a, b], 0.37, "eval/score") == pytest.approx(2000 + 1000 * (1 - 0.5 ** 0.5))
    assert earliest_crossing([b], 0.37, "eval/score") is None


def test_the_race_stops_what_is_already_slower_than_the_best_measured(tmp_path):
    """The race (by hand): A crosses 0.37 at 2292.9 samples (test_earliest_crossing_is_the_accountings_first_
    crossing) = 2.29 s on its clock (one second per 1000 samples); B has run 6 s without crossing: its time-to-target
    is above 6 s > 2.29 s, it lost. C has run 1.5 s: it may still win. A configuration of two seeds (D: one reached
    at 2.0 s, the other still below after 2.4 s) has the accounting's time-to-target (the geometric mean over its
    seeds) >= sqrt(2.0 x 2.4) = 2.19 s, not yet lost; after 3.2 s it is >= sqrt(2.0 x 3.2) = 2.53 s and lost. A
    configuration that reached later than the best (E: 2292.9 samples at 1.4 s per 1000 = 3.2 s) lost on its
    measured value."""
    xs = [0, 1000, 2000, 3000]
    s_a = 2000 + 1000 * (1 - 0.5 ** 0.5)
    a = _run(tmp_path, xs, [0.24, 0.30, 0.36, 0.38], "a")
    b = _run(tmp_path, xs, [0.24, 0.30, 0.32, 0.33], "b", secs=[0, 2, 4, 6])
    c = _run(tmp_path, xs, [0.24, 0.30, 0.32, 0.33], "c", secs=[0, 0.5, 1.0, 1.5])
    d1 = _run(tmp_path, xs, [0.24, 0.30, 0.37, 0.40], "d1")  # at 0.37 at 2000 samples = 2.0 s
    d2 = _run(tmp_path, xs, [0.24, 0.30, 0.32, 0.33], "d2", secs=[0, 0.8, 1.6, 2.4])
    d3 = _run(tmp_path, xs, [0.24, 0.30, 0.32, 0.33], "d3", secs=[0, 1.1, 2.1, 3.2])
    e = _run(tmp_path, xs, [0.24, 0.30, 0.36, 0.38], "e", secs=[0, 1.4, 2.8, 4.2])
    assert time_floor([a], 0.37, "eval/score", "wall") == (pytest.approx(s_a / 1000), True)
    assert time_floor([b], 0.37, "eval/score", "wall") == (pytest.approx(6.0), False)
    assert time_floor([d1, d2], 0.37, "eval/score", "wall") == (pytest.approx((2.0 * 2.4) ** 0.5), False)
    now = race({"C": [c], "A": [a], "B": [b], "D": [d1, d2], "D'": [d1, d3], "E": [e]}, 0.37, "eval/score", "wall")
    assert now.best == "A" and now.best_s == pytest.approx(s_a / 1000)
    assert now.verdict("A") is None and now.verdict("C") is None and now.verdict("D") is None
    for name in ("B", "D'", "E"):
        out, why = now.verdict(name)
        assert out == CANNOT_WIN and why.startswith("lost the race") and "A 2.3 s" in why
    assert "measured time-to-target, 3.2 s" in now.verdict("E")[1]
    # nobody has reached the target: no race yet
    assert race({"B": [b], "C": [c]}, 0.37, "eval/score", "wall").verdict("B") is None
    assert race_verdict(None, 2.5, "A") is None and race_verdict(2.5, 2.5, "A") is None


def test_the_pick_is_never_a_configuration_the_loop_stopped():
    """demo0 seed 1 (issue 27): the loop stopped B = 512 as "never reaches"; the final plan over everything that ran
    (B = 512's fit then open above, the noise model standing in) ranked it first. The pick is the best-ranked
    configuration the loop did not stop; a plan whose pick was not stopped is returned as it is."""
    from rlbatch.study.adaptive import _loop_pick

    def cand(b, t):
        return {"run": f"B{b}", "runs": [f"B{b}-s1"], "batch_size": b, "predicted_relative_time": t}

    cands = {"B256": cand(256, 0.62), "B512": cand(512, 0.40), "B128": cand(128, 0.70)}
    plan = {"recommended": "B512", "recommended_batch_size": 512, "within_noise": ["B256"]}
    state = {"B256": "reached", "B512": NEVER, "B128": "reached"}
    out = _loop_pick(plan, cands, state)
    assert out["recommended"] == "B256" and out["recommended_batch_size"] == 256
    assert "B512" in out["pick_note"] and "never reaches" in out["pick_note"] and plan["recommended"] == "B512"
    state["B512"] = "reached"
    assert _loop_pick(plan, cands, state) is plan


def test_a_lone_survivor_races_on_against_a_measured_best(tmp_path):
    """demo_sweep_cpu seed 0 (issue 27), B = 32 then B = 128 (one at a time, the doubling order), target 0.45: B = 32
    reaches the target in 11.8 s on its clock (B = 128 needs 16.6 s in the full runs). Then B = 128 is the only one
    left and the plan ranks it first from its first evaluations (before the fix it was "decided" after 1072 samples
    and picked); it races on instead and loses at B = 32's time, so the pick is the measured best."""
    root = tmp_path / "stored"
    unpack(Path(__file__).resolve().parent / "data" / "demo_sweep_cpu" / "trials.tar.gz", root)
    runs = {r.run_id: r for r in load(root / "trials")}
    res = replay_sweep(ladder_runs([runs["B32-G8-sqrt-s0"], runs["B128-G8-sqrt-s0"]]), tmp_path / "replay",
                       target=0.45, fmt="rlbatch", n_boot=30, max_active=1)
    by = {t.config: t for t in res.trials}
    assert by["B32-G8-sqrt"].state == "reached" and res.recommended in ("B32-G8-sqrt-s0", "B32-G8-sqrt")
    assert by["B128-G8-sqrt"].state == "cannot win" and by["B128-G8-sqrt"].decided_by.startswith("lost the race")
    assert not any(d.outcome == "decided" for d in res.decisions)


def test_a_batch_without_runs_is_never_the_best_a_trial_is_stopped_against():
    """demo_sweep seed 2 with two configurations at a time (issue 27): B = 128, not started, predicted by the noise
    model alone at 0.33 [0.33, 0.34], stopped B = 64 (0.52 [0.35, open]), the measured best. The best to stop
    against is a configuration with runs."""
    from rlbatch.study.adaptive import _best

    b64 = {**_cand("B64", [0.35, None], 0.52), "runs": ["B64-s2"], "batch_size": 64}
    b32 = {**_cand("B32", [0.8, 1.4], 1.0), "runs": ["B32-s2"], "batch_size": 32}
    b128 = {"run": None, "runs": [], "batch_size": 128, "predicted_relative_time": 0.33, "interval": [0.33, 0.34],
            "rN_source": "noise-model"}
    assert stop_verdict(b64, b128, n_eval=10) is None
    plan = {"recommended": 128, "candidates": [b32, b64, b128]}
    assert _best(plan) is b64
    plan["recommended"] = "B32"
    assert _best(plan) is b32


def test_the_record_counts_what_a_stopped_trial_wrote_after_its_stop(demo, tmp_path, monkeypatch):
    """A trial stopped mid-chunk may write past the evaluation the loop stopped it on (issue 27: a Ray task cancelled
    while its chunk ran wrote 128 samples, the record said 112). Here every stopped replay job lets one more step land
    after its stop; the record's samples are still those of each trial's run store."""
    from rlbatch.backends.executors import ReplayJob

    stop = ReplayJob.stop

    def late_stop(job):
        if job.pos < len(job.recs):  # the in-flight step lands after the stop
            job.release(job.recs[job.pos][0] + job.offset)
        stop(job)

    monkeypatch.setattr(ReplayJob, "stop", late_stop)
    runs = ladder_runs([demo["B128-G8-sqrt-s0"], demo["B16-G8-sqrt-s0"], demo["B32-G8-sqrt-s0"]])
    res = replay_sweep(runs, tmp_path, target=0.45, fmt="rlbatch", n_boot=30)
    for t in res.trials:
        m = [json.loads(x) for x in (tmp_path / t.run_id / "metrics.jsonl").read_text().splitlines()]
        assert t.samples == m[-1]["samples/retained"], t.run_id
    assert res.samples_spent == sum(t.samples for t in res.trials)
    assert any(t.state == "cannot win" for t in res.trials)


def test_a_trial_stops_once_its_crossing_is_settled_unless_confirm(tmp_path):
    """A reached trial stops once three evaluations lie at or after its samples-to-target (issue 43: a noise spike at
    the latest evaluation must not end a trial as reached). A (the reference, B = 16) first logs 0.38 >= 0.37 at
    2000 samples, crossing between 1500 and 2000 (about 1.9 s on its clock): it stops at 3000; B (B = 32) crosses
    between 2500 and 3000 (about 1.45 s on its clock, one second per 2000 samples) and stops at 4000. B is the pick;
    with ``confirm`` the loop runs a reached trial on until its samples-to-target interval closes above, past
    that."""
    xs = [0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000, 4500, 5000, 5500, 6000]
    ya = [0.20, 0.24, 0.28, 0.31, 0.38, 0.39, 0.40, 0.41, 0.42, 0.42, 0.43, 0.43, 0.44]
    yb = [0.20, 0.22, 0.25, 0.28, 0.31, 0.34, 0.375, 0.39, 0.40, 0.41, 0.42, 0.43, 0.44]
    a = _run(tmp_path, xs, ya, "B16-G8-sqrt-s0", batch=16)
    b = _run(tmp_path, xs, yb, "B32-G8-sqrt-s0", secs=[x / 2000 for x in xs], batch=32)
    res = replay_sweep([a, b], tmp_path / "replay", target=0.37, fmt="rlbatch", n_boot=30)
    by = {t.config: t for t in res.trials}
    assert by["B16-G8-sqrt"].state == "reached" and by["B16-G8-sqrt"].samples == 3000
    assert by["B32-G8-sqrt"].state == "reached" and by["B32-G8-sqrt"].samples == 4000
    assert res.recommended in ("B32-G8-sqrt-s0", "B32-G8-sqrt")
    res = replay_sweep([a, b], tmp_path / "replay-confirm", target=0.37, fmt="rlbatch", n_boot=30, confirm=True)
    by = {t.config: t for t in res.trials}
    assert by["B16-G8-sqrt"].samples > 3000 and by["B32-G8-sqrt"].samples > 4000


def test_a_replayed_update_batch_below_p_times_g_keeps_its_b(tmp_path):
    """Issue 36: the cs336-style sets vary the update batch (32-256 responses per optimizer step) at a fixed
    rollout P x G = 32 x 8 = 256. Replayed, each trial keeps its own B (the loop's plans compare B = 32 with
    B = 64), not P x G for all (which gave every trial B = 256 and no plan at all)."""
    xs = [0, 256, 512, 768, 1024, 1280, 1536, 1792, 2048]
    runs = []
    for b, ys in ((32, [0.1, 0.2, 0.3, 0.35, 0.38, 0.4, 0.41, 0.42, 0.43]),
                  (64, [0.1, 0.15, 0.2, 0.25, 0.3, 0.33, 0.36, 0.38, 0.4])):
        r = _run(tmp_path, xs, ys, f"tb{b}", batch=b)
        r.meta = r.meta.model_copy(update={"prompts_per_step": 32, "group_size": 8, "rollout_batch_size": 256,
                                           "lr_rule": "none"})
        runs.append(r)
    res = replay_sweep(ladder_runs(runs, rules=("none",)), tmp_path / "replay", target=0.37, fmt="rlbatch",
                       n_boot=30)
    assert res.plan is not None and sorted(c["batch_size"] for c in res.plan["candidates"]) == [32, 64]
    assert res.recommended == "tb32"
