"""Fault soak: ``kill -9`` ``rlbatch train`` and ``rlbatch sweep`` at random moments, over and over, resume, and
check that every run's metrics equal those of an uninterrupted run with the same seed.

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/fault_soak.py --minutes 8

Each iteration picks ``train`` (``rlbatch train ... --resume``) or ``sweep`` (``rlbatch sweep``, 1 or 2 worker
processes), starts it in a fresh directory and SIGKILLs it — mostly from outside after a random delay (uniform over
the reference run's duration once the run directory exists), sometimes at a random named fault point
(``RLBATCH_FAULT``: generation, update, optimizer step, metrics/eval line, checkpoint write) — then re-runs the
same command, killing it again with probability 1/2, until it completes. It then compares, line by line, every
non-timing field of ``metrics.jsonl`` and ``eval.jsonl`` of every run with the uninterrupted reference, and checks
that run.json says ``finished``, no temp file is left, the checkpoint loads, sweep trials finished before a kill
were not rerun (their files untouched), and no worker process outlived a killed sweep. Prints one line per
iteration and a summary ``iterations=... kills=... mismatches=...``; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_KEYS = ("time/gen_s", "time/reward_s", "time/train_s", "time/step_s", "time/cpu_s", "time/wall_s",
             "time/eval_s")
COMMON = ["--model", "tiny", "--max-new-tokens", "6", "--eval-every", "64", "--eval-size", "32", "--format", "json"]
TRAIN = ["train", "-P", "4", "-G", "4", "--lr", "3e-3", "--samples", "160", "--checkpoint-every", "3", "--seed", "1"]
SWEEP = ["sweep", "--base-batch", "8", "--base-lr", "3e-3", "--batches", "16", "--group-sizes", "4", "--samples",
         "96", "--target", "0.9"]
POINTS = ["gen", "update", "optim", "metrics", "eval", "ckpt_write", "ckpt_done"]


def cmd(kind: str, out: Path, workers: int = 1) -> list[str]:
    args = TRAIN if kind == "train" else SWEEP + ["--workers", str(workers)]
    return [sys.executable, "-m", "rlbatch.cli", *args, *COMMON, "--out", str(out)]


def env(fault: str | None = None) -> dict:
    e = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    e.pop("RLBATCH_FAULT", None)
    if fault:
        e["RLBATCH_FAULT"] = fault
    return e


def children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.rglob("run.json"))


def rows(path: Path) -> list[dict]:
    text = path.read_text() if path.exists() else ""
    if text and not text.endswith("\n"):
        raise AssertionError(f"{path}: incomplete last line")
    return [{k: v for k, v in json.loads(x).items() if k not in TIME_KEYS} for x in text.splitlines()]


def check(ref: Path, out: Path) -> list[str]:
    """Differences between the reference and the recovered output (empty: identical)."""
    import torch

    bad = []
    a, b = run_dirs(ref), run_dirs(out)
    if [p.relative_to(ref) for p in a] != [p.relative_to(out) for p in b]:
        return [f"run directories differ: {[str(p.relative_to(out)) for p in b]}"]
    for ra, rb in zip(a, b):
        name = str(rb.relative_to(out)) or "."
        for f in ("metrics.jsonl", "eval.jsonl"):
            try:
                x, y = rows(ra / f), rows(rb / f)
            except AssertionError as err:
                bad.append(str(err))
                continue
            steps = [r["step"] for r in y]
            if f == "metrics.jsonl" and steps != list(range(1, len(y) + 1)):
                bad.append(f"{name}/{f}: steps {steps}")
            if x != y:
                diff = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
                bad.append(f"{name}/{f}: {len(x)} vs {len(y)} lines, first difference at line {diff + 1}")
        if json.loads((rb / "run.json").read_text()).get("status") != "finished":
            bad.append(f"{name}: run.json not finished")
        if list(rb.glob(".*.tmp")):
            bad.append(f"{name}: temp files left {[p.name for p in rb.glob('.*.tmp')]}")
        try:
            torch.load(rb / "checkpoint.pt", weights_only=False)
        except Exception as err:  # noqa: BLE001
            bad.append(f"{name}: checkpoint unreadable ({err})")
    return bad


def finished_trials(out: Path) -> dict[str, int]:
    """mtime_ns of metrics.jsonl of every trial the manifest records as finished."""
    try:
        man = json.loads((out / "sweep.json").read_text())
    except (OSError, ValueError):
        return {}
    res = {}
    for t in man.get("trials", []):
        p = out / t["run_dir"] / "metrics.jsonl"
        if t.get("state") == "finished" and p.exists():
            res[t["run_id"]] = p.stat().st_mtime_ns
    return res


def reference(kind: str, root: Path) -> tuple[Path, float, float]:
    """The uninterrupted run: its directory, seconds until run.json appeared, total seconds."""
    out = root / f"ref-{kind}"
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd(kind, out), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t_meta = None
    while proc.poll() is None:
        if t_meta is None and run_dirs(out):
            t_meta = time.monotonic() - t0
        time.sleep(0.02)
    if proc.returncode != 0:
        raise SystemExit(f"reference {kind} run failed: {proc.stderr.read().decode()[-2000:]}")
    total = time.monotonic() - t0
    return out, t_meta or total / 2, total


def iteration(kind: str, ref: tuple[Path, float, float], out: Path, rng: random.Random) -> dict:
    ref_dir, t_meta, total = ref
    workers = rng.choice([1, 2]) if kind == "sweep" else 1
    kills, points, orphans, reruns, worker_kills = 0, [], 0, [], 0
    attempt = 0
    while True:
        attempt += 1
        kill = attempt == 1 or rng.random() < 0.5
        fault = None
        if kill and rng.random() < 0.3:  # a named point at a random step
            fault = f"{rng.choice(POINTS)}:{rng.randint(0, 12)}:{rng.choice([1, 1, 2])}"
        before = finished_trials(out) if kind == "sweep" else {}
        args = cmd(kind, out, workers) + (["--resume"] if kind == "train" and attempt > 1 else [])
        proc = subprocess.Popen(args, env=env(fault), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kill and fault is None:
            t0 = time.monotonic()
            while proc.poll() is None and not run_dirs(out) and time.monotonic() - t0 < 60:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, max(total - t_meta, 0.2)))
            if proc.poll() is None:
                kids = children(proc.pid)
                workers_now = [k for k in kids if b"spawn_main" in _cmdline(k)]
                if workers_now and rng.random() < 0.3:  # kill one worker: the sweep stops with a clear error
                    victim = rng.choice(workers_now)
                    try:
                        os.kill(victim, signal.SIGKILL)
                        worker_kills += 1
                    except ProcessLookupError:
                        pass
                    proc.wait()
                    kids = []
                else:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                kills += 1
                time.sleep(1.0 if kids else 0)
                orphans += sum(alive(k) for k in kids if b"resource_tracker" not in _cmdline(k))
        err = proc.communicate()[1].decode()
        if proc.returncode == -signal.SIGKILL and fault:
            kills += 1
            points.append(fault)
        elif proc.returncode == 2 and (worker_kills or fault) and "worker process died" in err:
            # expected after killing a worker (from outside, or a fault point firing in a trial's worker process)
            if fault:
                kills += 1
                points.append(fault + " (in a worker)")
        elif proc.returncode not in (0, -signal.SIGKILL):
            return {"kind": kind, "workers": workers, "kills": kills, "worker_kills": worker_kills, "mismatch": True,
                    "error": err.strip().splitlines()[-1:] or [str(proc.returncode)]}
        after = finished_trials(out) if kind == "sweep" else {}
        reruns += [r for r, m in before.items() if after.get(r) != m]
        if proc.returncode == 0:
            break
        if attempt > 30:
            return {"kind": kind, "kills": kills, "error": ["no completion after 30 attempts"], "mismatch": True}
    bad = check(ref_dir, out)
    if reruns:
        bad.append(f"finished trials rerun: {reruns}")
    if orphans:
        bad.append(f"{orphans} worker process(es) outlived the killed sweep")
    return {"kind": kind, "workers": workers, "kills": kills, "worker_kills": worker_kills, "points": points,
            "attempts": attempt,
            "mismatch": bool(bad), "problems": bad}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweep-share", type=float, default=0.3, help="share of iterations that kill a sweep")
    ap.add_argument("--parallel", type=int, default=1, help="iterations run side by side")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    root = Path(tempfile.mkdtemp(prefix="rlbatch-soak-"))
    try:
        refs = {k: reference(k, root) for k in ("train", "sweep")}
        print(f"reference runs: train {refs['train'][2]:.1f} s, sweep {refs['sweep'][2]:.1f} s", flush=True)
        end = time.monotonic() + 60 * a.minutes
        n = kills = mism = 0
        by_kind = {"train": [0, 0], "sweep": [0, 0]}
        lock = threading.Lock()

        def worker(wid: int) -> None:
            nonlocal n, kills, mism
            wrng = random.Random(a.seed * 1000 + wid)
            i = 0
            while time.monotonic() < end:
                kind = "sweep" if wrng.random() < a.sweep_share else "train"
                out = root / f"w{wid}-it{i}"
                i += 1
                res = iteration(kind, refs[kind], out, wrng)
                with lock:
                    n += 1
                    kills += res["kills"]
                    mism += res["mismatch"]
                    by_kind[kind][0] += 1
                    by_kind[kind][1] += res["kills"]
                    problem = res.get("problems") or res.get("error")
                    print(f"iter {n:3d} {kind:5s} workers={res.get('workers', 1)} kills={res['kills']} "
                          f"(worker kills {res.get('worker_kills', 0)}) points={res.get('points', [])} "
                          f"{'MISMATCH ' + str(problem) if res['mismatch'] else 'identical'}", flush=True)
                if not res["mismatch"] and not a.keep:
                    shutil.rmtree(out, ignore_errors=True)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(a.parallel)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"iterations={n} kills={kills} mismatches={mism} (train: {by_kind['train'][0]} iterations, "
              f"{by_kind['train'][1]} kills; sweep: {by_kind['sweep'][0]} iterations, {by_kind['sweep'][1]} kills)")
        sys.exit(1 if mism else 0)
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
