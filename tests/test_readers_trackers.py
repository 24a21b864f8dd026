"""W&B run directories and MLflow tracking data, written in the test by the wandb and mlflow packages
themselves (wandb offline mode, a temporary mlruns/ file store and a temporary SQLite database; no network), then
read by rlbatch: history, config and summary, read-only (every file's bytes and mtime unchanged), several runs in one
folder, and a ladder of update batches compared by ``rlbatch analyze --target`` with the learning-rate retuning
stated (fixed LR: the paper's control; square-root rule).

The writers run in a subprocess (wandb.init patches the console and registers exit hooks; mlflow's SQLite set-up
logs), each once per module.
"""

import hashlib
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlbatch.errors import UserError
from rlbatch.readers import detect_format, load
from rlbatch.readers import wandb_dir

REPO = Path(__file__).resolve().parents[1]

# the known history every writer logs: step s = 1..8, reward 0.1 s, eval score 0.1 s at even steps, 2 s per step
STEPS = range(1, 9)


def reward(s):
    return round(0.1 * s, 6)


def _run_python(code: str, env_extra: dict[str, str], cwd: Path, timeout: int = 300) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", **env_extra)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: sha256 and mtime (ns); links by target."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = ("link:" + os.readlink(p), 0)
        elif p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        else:
            out[str(p.relative_to(root))] = ("dir", 0)
    return out


# ------------------------------------------------------------------------------------------------------------ W&B
WANDB_WRITER = """
import math, sys, wandb
spec = {spec!r}
for name, folder, cfg, upd, score_at in spec:
    run = wandb.init(project="ladder", name=name, dir=folder, mode="offline", config=cfg)
    for s in range(1, {n} + 1):
        row = {{"train/reward": round(0.1 * s, 6), "actor/lr": cfg["optim"]["lr"], "timing_s/step": upd}}
        if s % 2 == 0:
            row["eval/score"] = round(score_at * s, 6)
        wandb.log(row, step=s)
        print(f"step:{{s}} - critic/score/mean:{{row['train/reward']}} - timing_s/step:{{upd}}")  # verl's console
    run.summary["best_eval"] = round(score_at * {n}, 6)
    run.finish()
"""


@pytest.fixture(scope="module")
def wandb_runs(tmp_path_factory):
    """One run in ``single/`` (P 8, G 4, lr 1e-5, 2 updates of 16 per rollout) and two ladders of four runs at
    update batches 8, 16, 32, 64 of one rollout batch (P 16 x G 4 = 64): ``fixed/`` at lr 1e-5 everywhere,
    ``sqrt/`` at 1e-5 x sqrt(B / 8). Larger update batches: fewer updates per rollout, so each step is faster
    (seconds 8, 6, 5, 4.5) and learning slower (score per step 0.1, 0.09, 0.08, 0.07)."""
    pytest.importorskip("wandb", reason="optional dependency wandb (pip install 'rlbatch[wandb]') is not installed")
    root = tmp_path_factory.mktemp("wandb")
    spec = [("single-run", str(root / "single"), {"prompts_per_step": 8, "group_size": 4, "update_batch_size": 16,
                                                  "optim": {"lr": 1e-5}, "model": "Qwen/Qwen2.5-0.5B"}, 2.0, 0.1)]
    for ladder in ("fixed", "sqrt"):
        for b, sec, per in ((8, 8.0, 0.1), (16, 6.0, 0.09), (32, 5.0, 0.08), (64, 4.5, 0.07)):
            lr = 1e-5 if ladder == "fixed" else 1e-5 * math.sqrt(b / 8)
            cfg = {"prompts_per_step": 16, "group_size": 4, "update_batch_size": b, "optim": {"lr": lr}}
            spec.append((f"{ladder}-B{b}", str(root / ladder), cfg, sec, per))
    for folder in {s[1] for s in spec}:
        Path(folder).mkdir(parents=True)
    _run_python(WANDB_WRITER.format(spec=spec, n=len(STEPS)), {"WANDB_MODE": "offline", "WANDB_SILENT": "true",
                                                                 "WANDB_DIR": str(root), "WANDB_API_KEY": ""},
                cwd=root)
    return root


def test_wandb_run_dir_history_config_summary(wandb_runs):
    folder = wandb_runs / "single"
    before = _snapshot(folder)
    dirs = wandb_dir.run_dirs(folder)
    assert len(dirs) == 1 and dirs[0].name.startswith("offline-run-")
    for path in (dirs[0], folder / "wandb", folder, next(dirs[0].glob("*.wandb"))):  # the run, wandb/, above
        assert detect_format(path) == "wandb"
        [run] = load(path)
        m, meta = run.metrics, run.meta
        assert run.run_id == "single-run" and meta.source_format == "wandb" and meta.status == "finished"
        assert m["step"].tolist() == list(STEPS)
        assert m["reward/mean"].tolist() == [reward(s) for s in STEPS]
        assert m["time/step_s"].tolist() == [2.0] * 8 and m["time/wall_s"].tolist() == [2.0 * s for s in STEPS]
        assert m["lr"].tolist() == [1e-5] * 8
        assert run.evals["step"].tolist() == [2, 4, 6, 8]
        assert run.evals["eval/score"].tolist() == pytest.approx([0.2, 0.4, 0.6, 0.8])
        # config: P, G, the update batch (16 of a 32-response rollout: two updates per step), lr, model
        assert (meta.prompts_per_step, meta.group_size, meta.batch_size, meta.rollout_batch_size) == (8, 4, 16, 32)
        assert meta.lr == 1e-5 and meta.model == "Qwen/Qwen2.5-0.5B"
        assert m["samples/retained"].tolist() == [32.0 * s for s in STEPS]  # a step is one rollout of P x G
        assert meta.tracker_config["optim.lr"] == 1e-5 and meta.tracker_config["update_batch_size"] == 16
        # summary: the last logged values and what the run set itself
        assert meta.tracker_summary["best_eval"] == pytest.approx(0.8)
        assert meta.tracker_summary["train/reward"] == pytest.approx(0.8)
        assert meta.tracker_summary["_step"] == 8
        assert any("update batch B = 16" in n for n in run.notes)
    assert _snapshot(folder) == before  # read-only: no file added, changed or touched


def test_wandb_run_without_its_log_reads_output_log(wandb_runs, tmp_path):
    # a run directory copied without its .wandb log: the console W&B captured (files/output.log, verl-style lines
    # printed by the writer) is read by the console readers; the run keeps its directory's name
    import shutil

    src = wandb_dir.run_dirs(wandb_runs / "single")[0]
    dst = tmp_path / src.name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.wandb"))
    [run] = load(dst)
    assert run.run_id == src.name and run.meta.tracker == "wandb"
    assert run.metrics["step"].tolist() == list(STEPS)
    assert run.metrics["reward/mean"].tolist() == [reward(s) for s in STEPS]
    assert run.metrics["time/step_s"].tolist() == [2.0] * 8
    assert any("read from files/output.log" in n for n in run.notes)


def test_wandb_folder_of_runs_reads_as_several(wandb_runs):
    runs = load(wandb_runs / "fixed" / "wandb")
    assert sorted(r.run_id for r in runs) == ["fixed-B16", "fixed-B32", "fixed-B64", "fixed-B8"]
    assert sorted(r.meta.batch_size for r in runs) == [8, 16, 32, 64]
    assert {r.meta.rollout_batch_size or r.meta.batch_size for r in runs} == {64}
    # the folder above both ladders and the single run: all nine
    assert len(load(wandb_runs)) == 9


def _analyze(folder: Path, target: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(folder), "--target", str(target),
                        "--format", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_wandb_fixed_lr_ladder_analyzed_as_the_control(wandb_runs):
    out = _analyze(wandb_runs / "fixed", 0.5)
    rows = {r["run"]: r for r in out["accounting"]}
    assert sorted(r["batch_size"] for r in rows.values()) == [8, 16, 32, 64]
    assert out["reference"] == "fixed-B8"
    # samples-to-target by hand: score = per x step, target 0.5; B8 (0.1/step) reaches it at step 5 -> between the
    # evaluations at steps 4 (0.4) and 6 (0.6): step 5 = 320 samples; B64 (0.07/step): 0.56 at step 8, 0.42 at 6
    # -> step 6 + 2 x (0.08 / 0.14) = 7.142857 -> 457.14 samples
    assert rows["fixed-B8"]["samples_to_target"] == pytest.approx(5 * 64)
    assert rows["fixed-B64"]["samples_to_target"] == pytest.approx((6 + 2 * 0.08 / 0.14) * 64)
    assert rows["fixed-B64"]["rN"] == pytest.approx((6 + 2 * 0.08 / 0.14) / 5)
    lr = out["lr_retuning"]
    assert lr["rule"] == "none" and lr["label"] == "fixed LR (not retuned)"
    assert lr["base_batch"] == 8 and lr["points"] == [[8, 1e-5], [16, 1e-5], [32, 1e-5], [64, 1e-5]]
    assert "fixed LR (not retuned)" in out["recommendation"] and "control" in out["recommendation"]


def test_wandb_sqrt_ladder_analyzed_as_aligned(wandb_runs):
    from rlbatch.analyze import analyze

    out = analyze([wandb_runs / "sqrt"], target=0.5)  # in-process (the CLI's JSON path is tested above)
    assert len(out["accounting"]) == 4
    lr = out["lr_retuning"]
    assert lr["rule"] == "sqrt" and lr["label"] == "square-root rule"
    assert lr["exponent"] == pytest.approx(0.5, abs=1e-6) and lr["deviation"]["sqrt"] < 1e-9
    assert "square-root rule" in out["recommendation"]


def test_wandb_ladder_report_states_the_rule(wandb_runs, tmp_path):
    from rlbatch.analyze import analyze

    res = analyze([wandb_runs / "sqrt" / "wandb"], target=0.5, out=tmp_path / "report")
    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    assert rep["lr_retuning"]["rule"] == "sqrt" and res["lr_retuning"]["label"] == "square-root rule"
    assert "retuned by the square-root rule" in (tmp_path / "report" / "report.md").read_text()


def test_wandb_both_readers_agree(wandb_runs):
    # wandb <= 0.29 ships a Python transaction-log reader, >= 0.31 `wandb leet inspect --json` (0.29 has both):
    # where both exist they must give the same history, config and summary
    import importlib.util

    if importlib.util.find_spec("wandb.sdk.internal.datastore") is None:
        pytest.skip("optional dependency wandb <= 0.29 (its Python log reader) is not installed")
    log = next((wandb_runs / "single").rglob("*.wandb"))
    py = wandb_dir._records_datastore(log)
    env = dict(os.environ, WANDB_SILENT="true")
    r = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(log)], capture_output=True,
                       text=True, env=env, timeout=600)
    if r.returncode != 0:
        pytest.skip("optional dependency wandb >= 0.29 (wandb leet inspect --json) is not installed")
    cli = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]

    def pick(recs, kind):
        return [x[kind] for x in recs if x.get("type") == kind]
    hist = [(h["item"]["train/reward"], h["step"]["num"]) for h in pick(py, "history")]
    assert hist == [(h["item"]["train/reward"], int(h["step"]["num"])) for h in pick(cli, "history")]
    assert pick(py, "run")[0]["config"]["update"]["optim"] == {"lr": 1e-5}
    assert pick(cli, "run")[0]["config"]["update"]["optim"] == {"lr": 1e-5}


#: a run directory's files/config.yaml and files/wandb-summary.json in the shape W&B writes them when it syncs (our
#: own values; wandb 0.31 in offline mode writes neither): every value under ``value:``, W&B's bookkeeping under
#: ``_wandb``; a summary with a media entry and nested runtime
WANDB_CONFIG_YAML = """_wandb:
    value:
        cli_version: 0.18.5
        m: []
        python_version: 3.11.4
        t:
            "1":
                - 2
                - 3
batch_size:
    value: 32
epochs:
    value: 10
learning_rate:
    value: 0.001
model:
    value: DenseNet121
image_size:
    value:
        - 224
        - 224
"""
WANDB_SUMMARY = ('{"_step":9,"epoch":9,"graph":{"_type":"graph-file","sha256":"00ff","size":991,'
                 '"path":"media/graph/graph_summary.graph.json"},"val_accuracy":0.875,"_runtime":6815.25,'
                 '"_wandb":{"runtime":7063},"val_loss":0.375}')


def test_wandb_files_config_yaml_and_summary(tmp_path):
    # a run directory with files/config.yaml and files/wandb-summary.json only (no .wandb log, no output.log), not
    # named run-*: config and summary are read (an image classifier's config: lr and model, no P or G), media left
    # out of the summary, and reading the run is one error naming the directory
    from rlbatch.readers.trackers import config_fields

    run = tmp_path / "trash-classification"
    (run / "files").mkdir(parents=True)
    (run / "files" / "config.yaml").write_text(WANDB_CONFIG_YAML)
    (run / "files" / "wandb-summary.json").write_text(WANDB_SUMMARY)
    assert wandb_dir.is_run_dir(run) and wandb_dir.run_dirs(run.parent) == []  # not named run-*: only given directly
    cfg, summ = wandb_dir.files_config_summary(run)
    assert {k: cfg[k] for k in ("batch_size", "epochs", "image_size", "learning_rate", "model")} == {
        "batch_size": 32, "epochs": 10, "image_size": [224, 224], "learning_rate": 0.001, "model": "DenseNet121"}
    assert cfg["_wandb"]["cli_version"] == "0.18.5"
    got = config_fields({k: v for k, v in cfg.items() if k != "_wandb"}, "W&B files/config.yaml")
    assert got.fields == {"lr": 0.001, "model": "DenseNet121"}  # no P or G in an image classifier's config
    scal = wandb_dir.summary_scalars(summ)
    assert scal["val_accuracy"] == 0.875 and scal["_step"] == 9 and scal["_wandb.runtime"] == 7063
    assert not any(k.startswith("graph") for k in scal)  # the media entry
    with pytest.raises(UserError, match="without history"):
        wandb_dir.read(run)


def test_wandb_missing_package_names_the_extra(wandb_runs, monkeypatch):
    real = wandb_dir.importlib.util.find_spec
    monkeypatch.setattr(wandb_dir.importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real(n, *a))
    with pytest.raises(UserError, match=r"rlbatch\[wandb\]"):
        load(wandb_runs / "single")


# ----------------------------------------------------------------------------------------------------------- MLflow
MLFLOW_WRITER = """
import sys
from mlflow.tracking import MlflowClient
for uri in sys.argv[1:]:
    c = MlflowClient(tracking_uri=uri)
    eid = c.create_experiment("grpo")
    for name, p, lr, per in (("P8", 8, 1e-5, 0.1), ("P16", 16, 1.4142135623730951e-5, 0.12)):
        rid = c.create_run(eid, run_name=name).info.run_id
        for k, v in {{"prompts_per_step": p, "num_generations": 4, "learning_rate": lr, "model": "tiny"}}.items():
            c.log_param(rid, k, v)
        t0 = 1_700_000_000_000
        for s in range(1, {n} + 1):
            ts = t0 + 3000 * s  # 3 s per step, milliseconds
            c.log_metric(rid, "train/reward", round(0.1 * s, 6), step=s, timestamp=ts)
            c.log_metric(rid, "train/learning_rate", lr, step=s, timestamp=ts)
            if s % 2 == 0:
                c.log_metric(rid, "eval/accuracy", round(per * s, 6), step=s, timestamp=ts + 500)
        c.set_terminated(rid)
"""


@pytest.fixture(scope="module")
def mlflow_stores(tmp_path_factory):
    """An ``mlruns/`` file store and an ``mlflow.db`` SQLite store, each with experiment ``grpo`` holding runs P8
    (lr 1e-5) and P16 (lr 1e-5 x sqrt 2) of G 4, 8 steps, eval every 2 steps."""
    pytest.importorskip("mlflow", reason="optional dependency mlflow (pip install 'rlbatch[mlflow]') is not installed")
    pytest.importorskip("sqlalchemy", reason="optional dependency sqlalchemy (pip install 'rlbatch[mlflow]') is not "
                                             "installed")
    root = tmp_path_factory.mktemp("mlflow")
    code = MLFLOW_WRITER.format(n=len(STEPS))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", MLFLOW_ALLOW_FILE_STORE="true")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), (root / "mlruns").as_uri(),
                        f"sqlite:///{root / 'mlflow.db'}"], capture_output=True, text=True, env=env, cwd=root,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return root


@pytest.mark.parametrize("store", ["mlruns", "mlflow.db"])
def test_mlflow_store_history_params_summary(mlflow_stores, store):
    path = mlflow_stores / store
    before = _snapshot(mlflow_stores)
    assert detect_format(path) == "mlflow"
    runs = {r.run_id: r for r in load(path)}
    assert sorted(runs) == ["P16", "P8"]
    for name, p, lr, per in (("P8", 8, 1e-5, 0.1), ("P16", 16, 1.4142135623730951e-5, 0.12)):
        run = runs[name]
        m, meta = run.metrics, run.meta
        assert meta.source_format == "mlflow" and meta.status == "finished" and meta.tracker == "mlflow"
        assert (meta.prompts_per_step, meta.group_size, meta.batch_size) == (p, 4, 4 * p)
        assert meta.lr == pytest.approx(lr, rel=1e-12) and meta.model == "tiny"
        assert m["step"].tolist() == list(STEPS)
        assert m["reward/mean"].tolist() == [reward(s) for s in STEPS]
        assert m["lr"].tolist() == pytest.approx([lr] * 8, rel=1e-12)
        # no timer logged: wall-clock from the timestamps, 3 s apart, the first step counted as one median step
        assert m["time/wall_s"].tolist() == pytest.approx([3.0 * s for s in STEPS])
        assert run.evals["step"].tolist() == [2, 4, 6, 8]
        assert run.evals["eval/score"].tolist() == pytest.approx([per * s for s in (2, 4, 6, 8)])
        assert run.evals["samples/retained"].tolist() == [4 * p * s for s in (2, 4, 6, 8)]
        assert meta.tracker_summary == {"train/reward": pytest.approx(0.8), "train/learning_rate": pytest.approx(lr),
                                        "eval/accuracy": pytest.approx(per * 8)}
        assert meta.tracker_config["num_generations"] == "4"  # params as MLflow keeps them: text
    if store == "mlruns":  # one experiment's folder, one run's folder
        exp = next(d for d in path.iterdir() if d.is_dir() and (d / "meta.yaml").is_file() and d.name != "0")
        assert sorted(r.run_id for r in load(exp)) == ["P16", "P8"]
        one = next(d for d in exp.iterdir() if d.is_dir() and (d / "meta.yaml").is_file())
        [run] = load(one)
        assert run.meta.tracker_run_id == one.name
    # read-only: the database and the file store untouched (no .trash, no migration, same bytes and mtimes)
    assert _snapshot(mlflow_stores) == before


def test_mlflow_runs_differing_in_p_compare_with_the_rule_stated(mlflow_stores):
    from rlbatch.analyze import analyze

    out = analyze([mlflow_stores / "mlflow.db"], target=0.45)
    rows = {r["run"]: r for r in out["accounting"]}
    assert {k: r["batch_size"] for k, r in rows.items()} == {"P8": 32, "P16": 64}
    # by hand: P8 reaches 0.45 between steps 4 (0.4) and 6 (0.6): step 4.5 x 32 = 144 samples; P16 between
    # steps 2 (0.24) and 4 (0.48): step 2 + 2 x 0.21 / 0.24 = 3.75 -> x 64 = 240 samples; rN = 240 / 144
    assert rows["P8"]["samples_to_target"] == pytest.approx(144)
    assert rows["P16"]["samples_to_target"] == pytest.approx(240)
    assert rows["P16"]["rN"] == pytest.approx(240 / 144)
    assert out["lr_retuning"]["rule"] == "sqrt"
    assert "square-root rule" in out["recommendation"]


def test_mlflow_missing_package_names_the_extra(mlflow_stores, monkeypatch):
    for name in [n for n in sys.modules if n == "mlflow" or n.startswith("mlflow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError, as when not installed
    with pytest.raises(UserError, match=r"rlbatch\[mlflow\]"):
        load(mlflow_stores / "mlruns")


def test_missing_extra_exit_code_2(mlflow_stores, tmp_path):
    # the CLI without mlflow importable: one line naming the extra, exit 2 (mlflow hidden by a sitecustomize)
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['mlflow'] = None\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO / 'src'}", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(mlflow_stores / "mlruns")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2, r.stderr
    assert "rlbatch[mlflow]" in r.stderr and "Traceback" not in r.stderr


def test_config_fields_by_hand():
    from rlbatch.readers.trackers import config_fields

    verl = config_fields({"data": {"train_batch_size": 128}, "actor_rollout_ref": {
        "rollout": {"n": 8}, "actor": {"ppo_mini_batch_size": 32, "optim": {"lr": 1e-6}},
        "model": {"path": "Qwen/Qwen2.5-7B"}}, "critic": {"optim": {"lr": 1e-5}}}, "test")
    assert verl.fields == {"prompts_per_step": 128, "group_size": 8, "batch_size": 256, "rollout_batch_size": 1024,
                           "lr": 1e-6, "model": "Qwen/Qwen2.5-7B"}
    openrlhf = config_fields({"rollout_batch_size": "64", "n_samples_per_prompt": "8", "train_batch_size": "128",
                              "actor_learning_rate": "5e-7"}, "MLflow params")
    assert openrlhf.fields == {"prompts_per_step": 64, "group_size": 8, "batch_size": 128, "rollout_batch_size": 512,
                               "lr": 5e-7}
    # a generic batch_size equal to P is prompts, not responses per update: B stays P x G
    assert config_fields({"prompts_per_step": 16, "group_size": 4, "batch_size": 16}, "x").fields == {
        "prompts_per_step": 16, "group_size": 4}
    half = config_fields({"group_size": 4, "lr": "abc"}, "x")
    assert half.fields == {} and any("only G" in n for n in half.notes) and any("not a positive" in n
                                                                                for n in half.notes)
    assert math.isclose(config_fields({"learning_rate": 3e-6}, "x").fields["lr"], 3e-6)


def test_config_fields_of_trl_grpo_config():
    # TRL's own GRPOConfig as W&B / MLflow keep it (args.to_dict()): 8 per device x 1 process x 4 accumulation
    # steps = generation_batch_size 32 completions of num_generations 8 -> P = 4, one update per generation
    pytest.importorskip("trl", reason="optional dependency trl (pip install 'rlbatch[trl]') is not installed")
    import warnings

    from trl import GRPOConfig

    from rlbatch.readers.trackers import config_fields

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = GRPOConfig(output_dir="unused", per_device_train_batch_size=8, gradient_accumulation_steps=4,
                         num_generations=8, learning_rate=1e-6, report_to=[], use_cpu=True, bf16=False)
        two = GRPOConfig(output_dir="unused", per_device_train_batch_size=8, gradient_accumulation_steps=4,
                         steps_per_generation=8, num_generations=8, report_to=[], use_cpu=True, bf16=False)
    got = config_fields(one.to_dict(), "W&B config")
    assert one.to_dict()["generation_batch_size"] == 32
    assert got.fields == {"prompts_per_step": 4, "group_size": 8, "lr": 1e-6}
    # a generation of 64 feeding two optimizer steps: a logged step is not a rollout -> P and G left to --set
    got = config_fields(two.to_dict(), "W&B config")
    assert "prompts_per_step" not in got.fields and any("not one rollout" in n for n in got.notes)
    assert not any("only G" in n for n in got.notes)
