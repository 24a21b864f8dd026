"""Readers under fuzzing: every input ends in parsed runs or one ``UserError`` naming the file, never another
exception. Seeds: the real verl logs in ../shared/logs/verl (where present) and small generated logs of every
format; mutations in tests/_readers_fuzz_lib.py. Below the properties: one regression test per crash the fuzzer
found, and the CLI's behaviour on bad files. The long run is ``benchmarks/fuzz_readers.py --minutes N``.
"""

import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _readers_fuzz_lib as F
from _shared import shared_logs
from rlbatch.errors import UserError
from rlbatch.readers import load
from rlbatch.readers.common import ReadWarning, sniff_encoding, to_count, to_float

REPO = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REAL = F.real_verl_seeds()
GENERATED = F.generated_seeds()

frac = st.floats(0, 1)
OP = st.one_of(
    st.tuples(st.just("truncate"), frac),
    st.tuples(st.just("flip"), frac, st.integers(0, 255)),
    st.tuples(st.just("insert"), frac, st.sampled_from(F.TOKENS)),
    st.tuples(st.just("number"), st.integers(0, 10_000), st.sampled_from(F.TOKENS[:14])),
    st.tuples(st.just("encode"), st.sampled_from(F.ENCODINGS)),
    st.tuples(st.just("interleave"), st.integers(0, 2**31)),
    st.tuples(st.just("longline"), frac, st.sampled_from([10, 10_000, 200_000])),
    st.tuples(st.just("dup"), frac, frac),
    st.tuples(st.just("junk"), st.integers(0, 2048), st.integers(0, 2**31)),
    st.just(("empty",)),
)
OPS = st.lists(OP, min_size=1, max_size=4)


def run(kind, files, ops, which=0, give_format=False):
    with tempfile.TemporaryDirectory() as d:
        return F.run_case(Path(d), kind, files, ops, which, give_format)[0]


# ------------------------------------------------------------------------------------------------- properties
@pytest.fixture(scope="module")
def real_seeds():
    shared_logs("verl", module=False)
    assert len(REAL) == 3  # ../shared/logs/verl
    return REAL


@FUZZ
@given(i=st.integers(0, 2), ops=OPS, give_format=st.booleans())
def test_real_verl_logs_mutated_parse_or_name_the_file(real_seeds, i, ops, give_format):
    kind, files = real_seeds[i % len(real_seeds)]
    assert run(kind, files, ops, give_format=give_format) in ("parsed", "error")


@pytest.mark.parametrize("seed", range(len(GENERATED)), ids=[k + ":" + next(iter(f)) for k, f in GENERATED])
@settings(FUZZ, max_examples=40)
@given(ops=OPS, which=st.integers(0, 2), give_format=st.booleans())
def test_generated_logs_mutated_parse_or_name_the_file(seed, ops, which, give_format):
    kind, files = GENERATED[seed]
    assert run(kind, files, ops, which, give_format) in ("parsed", "error")


@settings(FUZZ, max_examples=100)
@given(data=st.binary(max_size=3000), name=st.sampled_from(["x.log", "x.jsonl", "x.csv", "trainer_state.json",
                                                              "tb/events.out.tfevents.1.h"]))
def test_arbitrary_bytes_parse_or_name_the_file(data, name):
    kind = {"x.log": "verl", "x.jsonl": "jsonl", "x.csv": "csv", "trainer_state.json": "trl"}.get(name, "tensorboard")
    assert run(kind, {name: data}, []) in ("parsed", "error")


LINE = st.one_of(
    st.builds(lambda s, parts: f"step:{s} - " + " - ".join(f"{k}:{v}" for k, v in parts),
              st.integers(-3, 10**25),
              st.lists(st.tuples(st.sampled_from(["actor/grad_norm", "critic/score/mean", "timing_s/step",
                                                  "actor/lr(1e-4)", "actor/lr", "val-core/x/reward/mean@1", "a:b"]),
                                 st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                                           st.sampled_from(["1e400", "-0", "np.float64(0.5)", "nan", "x"]))),
                       max_size=6)),
    st.text(max_size=80),
    st.sampled_from(["data.train_batch_size=1e400 actor_rollout_ref.rollout.n=-3",
                     "data.train_batch_size=99999999999999999999999 actor_rollout_ref.actor.optim.lr=inf",
                     "{'data': {'train_batch_size': 'abc'}, 'actor_rollout_ref': {'rollout': {'n': 1e308}}}"]),
)


@settings(FUZZ, max_examples=100)
@given(lines=st.lists(LINE, max_size=12),
       prefix=st.sampled_from(["", "(TaskRunner pid=1) ", "\x1b[36m(main_task pid=123)\x1b[0m "]))
def test_verl_like_text_parse_or_name_the_file(lines, prefix):
    text = "".join(prefix + ln + "\n" for ln in lines)
    assert run("verl", {"x.log": text.encode("utf-8", errors="surrogatepass")}, []) in ("parsed", "error")


# --------------------------------------------------------------------------------------- targeted properties
def read(path, fmt=None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load(path, fmt)
    return runs, [str(w.message) for w in caught if issubclass(w.category, ReadWarning)]


def test_empty_and_blank_files_are_one_error_naming_the_file(tmp_path):
    for name, data in (("a.log", b""), ("b.jsonl", b"\n\n  \n"), ("c.csv", b""), ("trainer_state.json", b"")):
        p = tmp_path / name
        p.write_bytes(data)
        for fmt in (None, {"a.log": "verl", "b.jsonl": "jsonl", "c.csv": "csv"}.get(name, "trl")):
            with pytest.raises(UserError, match=name):
                load(p, fmt)


@pytest.mark.parametrize("enc", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "utf-32"])
def test_verl_log_in_other_unicode_encodings_reads_like_utf8(tmp_path, enc):
    kind, files = GENERATED[0]
    text = files["gen_verl.log"].decode()
    (tmp_path / "u8.log").write_text(text, encoding="utf-8")
    (tmp_path / "other.log").write_text(text, encoding=enc)
    (a,), _ = read(tmp_path / "u8.log")
    (b,), _ = read(tmp_path / "other.log")
    assert list(a.metrics.columns) == list(b.metrics.columns)
    np.testing.assert_array_equal(a.metrics.to_numpy(), b.metrics.to_numpy())
    assert (a.meta.prompts_per_step, a.meta.group_size) == (b.meta.prompts_per_step, b.meta.group_size) == (8, 4)


@pytest.mark.parametrize("name,kind", [("verl.jsonl", "verl-jsonl"), ("generic.csv", "csv"),
                                       ("trainer_state.json", "trl")])
def test_bom_and_utf16_other_formats(tmp_path, name, kind):
    files = next(f for k, f in GENERATED if name in f)
    text = files[name].decode()
    for enc in ("utf-8-sig", "utf-16"):
        p = tmp_path / enc / name
        p.parent.mkdir()
        p.write_text(text, encoding=enc)
        runs, _ = read(p)
        assert runs[0].meta.source_format == kind and len(runs[0].metrics) >= 4


def test_latin1_and_invalid_utf8_keep_the_numbers(tmp_path):
    p = tmp_path / "l1.log"
    text = GENERATED[0][1]["gen_verl.log"].decode().replace("critic/score/mean", "critic/score/mean")
    p.write_bytes(("# résumé café ÿ\n" + text).encode("latin-1") + b"\xc3\x28 step:9 broken\n")
    (r,), _ = read(p)
    assert r.metrics["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_sniff_encoding():
    assert sniff_encoding("ab".encode("utf-16")) == "utf-16"
    assert sniff_encoding("step:1 - a:1".encode("utf-16-le")) == "utf-16-le"
    assert sniff_encoding("step:1 - a:1".encode("utf-16-be")) == "utf-16-be"
    assert sniff_encoding(b"\xef\xbb\xbfstep") == "utf-8-sig"
    assert sniff_encoding(b"caf\xe9 step:1") == "utf-8"


def test_to_float_and_to_count_on_huge_numbers():
    assert to_float(10**400) == float("inf") and to_float(-(10**400)) == float("-inf")
    assert to_float("1e400") == float("inf") and to_float("-0") == 0.0
    assert to_count("99999999999999999999999") is None and to_count(float("inf")) is None
    assert to_count("nan") is None and to_count(-1) is None and to_count(2.5) is None
    assert to_count("1024") == 1024 and to_count(2**53) == 2**53 and to_count(2**53 + 2) is None


def test_tensorboard_file_cut_mid_record_keeps_whole_records(tmp_path):
    data = F.tensorboard_bytes(steps=4)
    for cut in range(len(data) // 3, len(data), 37):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / "events.out.tfevents.1.host").write_bytes(data[:cut])
        runs, _ = read(d)
        assert 1 <= len(runs[0].metrics) <= 4
        assert runs[0].metrics["reward/mean"].tolist() == pytest.approx(
            [0.1 * s for s in range(1, len(runs[0].metrics) + 1)])


def test_ray_output_interleaved_mid_line_still_reads_the_intact_lines(tmp_path):
    p = tmp_path / "ray.log"
    a = "\x1b[36m(TaskRunner pid=678203)\x1b[0m "
    p.write_text(
        "python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.rollout.n=4\n"
        f"{a}step:1 - critic/score/mean:0.100 - timing_s/step:2.000\n"
        f"{a}step:2 - critic/score/mean:0.2(WorkerDict pid=99, ip=10.0.0.2) Loading 50%|00 - timing_s/step:2.000\n"
        f"(main_task pid=123) INFO step:3 - nothing:here\n"
        f"{a}step:3 - critic/score/mean:0.300 - timing_s/step:2.000\n")
    (r,), msgs = read(p)
    assert r.metrics["step"].tolist() == [1, 2, 3]
    assert r.metrics.loc[r.metrics["step"] != 2, "reward/mean"].tolist() == pytest.approx([0.1, 0.3])


# ---------------------------------------------------------------------------- regressions (crashes found by fuzzing)
def test_regression_trl_state_not_utf8(tmp_path):
    """UnicodeDecodeError in trl.read (cp1252 text)."""
    p = tmp_path / "trainer_state.json"
    p.write_bytes(GENERATED[6][1]["trainer_state.json"].replace(b'"global_step"', b'"note": "caf\xe9", "global_step"'))
    runs, _ = read(p)
    assert runs[0].metrics["reward/mean"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])


def test_regression_run_store_without_steps(tmp_path):
    """KeyError 'step' in finalize: a run directory whose metrics.jsonl is empty or has no step field."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"run_id": "r"}))
    (d / "metrics.jsonl").write_text("")
    with pytest.raises(UserError, match="metrics.jsonl"):
        load(d)
    (d / "metrics.jsonl").write_text('{"reward/mean": 1}\n')
    with pytest.raises(UserError, match="metrics.jsonl"):
        load(d)


def test_regression_run_store_nan_and_bad_steps(tmp_path):
    """ValueError (NaN to int) in summarize_run: NaN step in eval.jsonl; also bad metric steps and text values."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"run_id": "r", "prompts_per_step": 2, "group_size": 2}))
    (d / "metrics.jsonl").write_text('{"step": 1, "reward/mean": "x"}\n{"step": NaN, "reward/mean": 0.5}\n'
                                     '{"step": 2.5, "reward/mean": 0.5}\n{"step": 2, "reward/mean": 0.25}\n'
                                     '{"step": 2, "reward/mean": 0.75}\n')
    (d / "eval.jsonl").write_text('{"step": NaN, "eval/score": 0.5}\n{"step": 2, "eval/score": 0.7}\n')
    (r,), msgs = read(d)
    assert r.metrics["step"].tolist() == [1, 2]
    assert np.isnan(r.metrics["reward/mean"][0]) and r.metrics["reward/mean"][1] == 0.75
    assert r.evals["step"].tolist() == [2] and r.evals["samples/retained"].tolist() == [8.0]
    assert any("metrics.jsonl" in m and "skipped" in m for m in msgs)


def test_regression_huge_step_number_jsonl(tmp_path):
    """int64 overflow of a step 99999999999999999999999 gave negative, unordered steps."""
    p = tmp_path / "g.jsonl"
    p.write_text("".join(json.dumps({"step": s, "reward": 0.1}) + "\n" for s in (1, 2, 99999999999999999999999, 3)))
    (r,), msgs = read(p)
    assert r.metrics["step"].tolist() == [1, 2, 3]
    assert any("g.jsonl:3" in m and "step" in m for m in msgs)


def test_regression_unit_suffix_and_plain_name_in_one_log(tmp_path):
    """TypeError in build_run: ``actor/lr(1e-4)`` and ``actor/lr`` both present (two columns named actor/lr)."""
    p = tmp_path / "u.log"
    p.write_text("step:1 - actor/lr(1e-4):0.010 - critic/score/mean:0.1\n"
                 "step:2 - actor/lr:0.000002 - critic/score/mean:0.2\n"
                 "step:3 - actor/lr(1e-4):0.030 - actor/lr(1e-3):0.5 - critic/score/mean:0.3\n")
    (r,), _ = read(p)
    assert r.metrics["lr"].tolist() == pytest.approx([1e-6, 2e-6, 3e-6])


@pytest.mark.parametrize("value", ["1e308", "1e400", "inf", "-inf", "nan", "99999999999999999999999", "-0", "2.5"])
def test_regression_absurd_batch_size_in_launch_command(tmp_path, value):
    """OverflowError (int too large / inf to int) from data.train_batch_size=1e308 or inf in the launch command."""
    p = tmp_path / "b.log"
    p.write_text(f"python3 -m verl.trainer.main_ppo data.train_batch_size={value} actor_rollout_ref.rollout.n=4 "
                 f"actor_rollout_ref.actor.optim.lr={value}\nstep:1 - critic/score/mean:0.1\n")
    (r,), msgs = read(p)
    assert r.meta.prompts_per_step is None and r.meta.group_size == 4
    lr = float(value)
    assert r.meta.lr == (lr if 0 < lr < float("inf") else None)
    assert any("prompts_per_step" in m and "b.log" in m for m in msgs)


def test_regression_json_integer_over_4300_digits(tmp_path):
    """ValueError (int max str digits) escaping json.loads in the JSONL reader, the TRL reader and the run store."""
    big = "9" * 5000
    p = tmp_path / "v.jsonl"
    p.write_text('{"step": 1, "data": {"critic/score/mean": 0.1}}\n'
                 f'{{"step": 2, "data": {{"critic/score/mean": {big}}}}}\n'
                 '{"step": 3, "data": {"critic/score/mean": 0.3}}\n')
    (r,), msgs = read(p)
    assert r.metrics["step"].tolist() == [1, 3] and any("v.jsonl:2" in m for m in msgs)
    t = tmp_path / "trainer_state.json"
    t.write_text(f'{{"log_history": [{{"step": 1, "reward": {big}}}]}}')
    with pytest.raises(UserError, match="trainer_state.json"):
        load(t, "trl")
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"run_id": "r"}))
    (d / "metrics.jsonl").write_text(f'{{"step": 1, "reward/mean": {big}}}\n{{"step": 2}}\n')
    with pytest.raises(UserError, match=r"metrics.jsonl:1"):
        load(d)


def test_regression_wandb_panel_without_a_usable_run(tmp_path):
    """load returned an empty list for a W&B panel export whose every run lacked training rows."""
    p = tmp_path / "panel.csv"
    p.write_text("Step,runA - train/reward,runB - train/reward\nx,a,b\ny,c,d\n")
    with pytest.raises(UserError, match="panel.csv"):
        load(p, "wandb-csv")


def test_regression_target_met_by_the_initial_evaluation(tmp_path):
    """UserError 'reference never reached the target' from the accounting when the only run met the target at step 0
    (0 samples): the default reference now needs samples-to-target > 0, as ``account`` does."""
    from rlbatch.analysis.accounting import account_runs

    p = tmp_path / "v.log"
    p.write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=8 actor_rollout_ref.rollout.n=4\n"
                 "step:0 - val-core/gsm8k/reward/mean@1:0.5\n"
                 + "".join(f"step:{s} - critic/score/mean:0.1 - timing_s/step:2.0\n" for s in range(1, 4)))
    runs, _ = read(p)
    acc = account_runs(runs, 0.3, "eval/score")
    rows, ref, text = acc["rows"], acc["reference"], acc["recommendation"]
    assert ref is None and rows[0]["samples_to_target"] == 0.0 and rows[0]["reached"] and rows[0]["rN"] is None
    assert "after training began" in text


# --------------------------------------------------------------------------------------------------------- CLI
def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=600)


def test_cli_bad_plus_good_file_warns_once_and_analyses_the_good_one(tmp_path):
    good = tmp_path / "good.log"
    good.write_bytes(GENERATED[0][1]["gen_verl.log"])
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"step": 1\n\x00\xff junk\n{"a": \n')
    r = cli(bad, good, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bad.jsonl" in lines[0] and lines[0].startswith("rlbatch: warning:"), lines
    assert [x["run"] for x in json.loads(r.stdout)["runs"]] == ["good"]


def test_cli_only_bad_files_exit_2_with_one_line(tmp_path):
    a = tmp_path / "junk.bin"
    a.write_bytes(bytes(range(256)) * 4)
    b = tmp_path / "empty.log"
    b.write_bytes(b"")
    r = cli(a, b)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "junk.bin" in lines[0] and "empty.log" in lines[0], lines


# ------------------------------------------------------------------------ run store: fast JSONL path = slow path
VAL = st.one_of(st.none(), st.integers(-(2**62), 2**62), st.floats(allow_nan=False, allow_infinity=False, width=64),
                st.booleans())


@settings(FUZZ, max_examples=60)
@given(rows=st.lists(st.fixed_dictionaries({"step": st.integers(0, 10**6)},
                                           optional={"reward/mean": st.floats(-1e300, 1e300), "x": VAL}),
                     min_size=1, max_size=20))
def test_run_store_fast_jsonl_frame_equals_line_by_line(rows):
    """read_jsonl_frame's pyarrow path gives the same frame as json.loads per line (values; int/float/bool kinds)."""
    from rlbatch.runstore import _records_frame, read_jsonl, read_jsonl_frame

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "metrics.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        fast = read_jsonl_frame(p)
        slow = _records_frame(read_jsonl(p))
    assert list(fast.columns) == list(slow.columns)
    for c in fast.columns:
        a, b = fast[c].to_numpy(dtype=float, na_value=np.nan), slow[c].to_numpy(dtype=float, na_value=np.nan)
        np.testing.assert_array_equal(a, b)
