"""A sweep run by the sequential study: every page that reads its directory (the report, analyze, plan, watch)
decides as the study's last look did and names its pick (issue 52: the demo's report named B = 64 in its headline
and B = 128 in its sequential section). The study is run here, on the stored demo sweep (tests/data/demo_sweep: 3
seeds of B = 16..128 and the fixed-LR control), with looks at 2 and 3 seeds, and its record written beside the
trials as ``OUT/sequential.json``, where the demo writes it."""

import json
import warnings

import pytest

from _stored_sweeps import unpack
from rlbatch.analysis.decision import FASTER
from rlbatch.analyze import analyze
from rlbatch.plan import make_plan
from rlbatch.readers.collect import load_all
from rlbatch.study.sequential import run_sequential
from rlbatch.watch import snapshot
from test_one_number import DATA, TARGET


class StoredRunner:
    """The sequential study's runner over runs that exist: ``ensure`` only admits a configuration's first n seeds."""

    def __init__(self, runs):
        self.all = sorted(runs, key=lambda r: r.meta.seed)
        self.want: dict[str, int] = {}

    def config(self, r):
        return r.run_id.rsplit("-s", 1)[0]

    def configs(self):
        return list(dict.fromkeys(self.config(r) for r in sorted(self.all, key=lambda r: r.meta.batch_size)))

    def ensure(self, wants):
        self.want.update(wants)

    def runs(self):
        seen: dict[str, int] = {}
        out = []
        for r in self.all:
            c = self.config(r)
            if seen.get(c, 0) < self.want.get(c, 0):
                seen[c] = seen.get(c, 0) + 1
                out.append(r)
        return out


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("sequential_pages")
    trials = unpack(DATA / "trials.tar.gz", root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([trials])
        runner = StoredRunner(runs)
        configs = runner.configs()
        res = run_sequential(runner, configs, configs[0], TARGET, looks=(2, 3), n_boot=4000)
    rec = res.to_json()
    (root / "sequential.json").write_text(json.dumps(rec, default=str), encoding="utf-8")
    # only the runs the study ran stay (as in a sequential demo's directory)
    kept = {r.run_id for r in runner.runs()}
    for d in trials.iterdir():
        if d.name not in kept:
            import shutil

            shutil.rmtree(d)
    return trials, rec


def test_analyze_plan_and_watch_name_the_sequential_studys_pick(study):
    trials, rec = study
    assert rec["decided"], rec  # the stored sweep has a batch shown faster: the test would not test the claims
    res = analyze([trials], target=TARGET)
    h = res["headline"]
    assert h["pick"] == rec["pick"]
    assert {r["run"] for r in res["accounting"] if r["verdict"] == FASTER} == set(rec["faster"])
    assert any("sequential.json" in w for w in res["warnings"])
    plan = make_plan([trials], target=TARGET)
    picked = [c for c in plan["candidates"] if c.get("pick")]
    assert [c["run"] for c in picked] == [rec["pick"]]
    assert {c["run"] for c in plan["candidates"] if c["verdict"] == FASTER} == set(rec["faster"])
    said = {c["config"]: c.get("why") or "" for c in snapshot(trials, target=TARGET).to_json()["ranking"]}
    assert said[rec["pick"]] == "finished: faster (the pick)", said
    # another target is another question: analysed as a fixed design, without the record
    other = analyze([trials], target=TARGET - 0.02)
    assert not any("sequential.json" in w for w in other["warnings"])
