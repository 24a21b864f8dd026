"""``rlbatch analyze`` at scale: R synthetic runs x S steps (default 1,000 x 10,000).

Generates a sweep of run-store directories (``run.json``, ``metrics.jsonl`` with 12 canonical metrics per step,
``eval.jsonl`` every 100 steps; B from 64 to 4096 with the square-root LR rule) under ``--root`` (default
``runs/bench/analyze_<R>x<S>``, git-ignored; reused when already there), then measures, in one process:

- read: ``rlbatch.readers.collect.load_all`` (every run directory -> ``Run``);
- analyze: per-run summaries (``summarize_run``) and the time-to-target accounting (``account_runs``);
- end to end: ``rlbatch.analyze.analyze`` (both together, as the CLI calls it), and with ``--cli`` the CLI itself;

printing seconds, rows/second and peak memory (max RSS). ``--profile`` prints the top of a cProfile of the read
and the analysis. Usage::

    .venv/bin/python benchmarks/analyze_scale.py --runs 1000 --steps 10000 [--cli] [--compare] [--report] [--profile] [--clean]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import resource
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]

METRIC_LINE = ('{{"step": {s}, "samples/retained": {n}, "samples/generated": {n}, "tokens/generated": {tok}, '
               '"time/gen_s": {gen:.4f}, "time/reward_s": 0.05, "time/train_s": {tr:.4f}, "time/step_s": {st:.4f}, '
               '"time/wall_s": {wall:.3f}, "reward/mean": {rw:.5f}, "reward/std": 0.3, "grad_norm/actor": {gn:.5f}, '
               '"lr": {lr:.4g}}}\n')


def generate(root: Path, runs: int, steps: int) -> None:
    """Write ``runs`` run directories of ``steps`` steps each (reward curves that overlay on the sample axis)."""
    import json

    root.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(runs):
        d = root / f"run{i:05d}"
        if (d / "eval.jsonl").exists():
            continue
        d.mkdir(exist_ok=True)
        b = 64 * 2 ** (i % 7)
        g = 8
        lr = 1e-6 * math.sqrt(b / 64)
        (d / "run.json").write_text(json.dumps({"run_id": d.name, "algorithm": "grpo", "prompts_per_step": b // g,
                                                "group_size": g, "lr": lr, "lr_rule": "sqrt", "base_batch": 64,
                                                "base_lr": 1e-6, "seed": i, "status": "finished"}))
        step_s = 2.0 + 0.01 * b  # sublinear time per step in B
        gen = 0.6 * step_s
        lines = []
        evals = []
        scale = 64 * 2000.0
        for s in range(1, steps + 1):
            n = s * b
            rw = 1.0 - math.exp(-n / scale) + 0.01 * math.sin(s + i)
            lines.append(METRIC_LINE.format(s=s, n=n, tok=n * 200, gen=gen, tr=0.3 * step_s, st=step_s,
                                            wall=s * step_s, rw=rw, gn=1.0 / math.sqrt(b) + 0.001 * (s % 7), lr=lr))
            if s % 100 == 0:
                evals.append(f'{{"step": {s}, "samples/retained": {n}, "eval/score": {0.9 * rw:.5f}}}\n')
        (d / "metrics.jsonl").write_text("".join(lines))
        (d / "eval.jsonl").write_text("".join(evals))
        if (i + 1) % 100 == 0:
            print(f"  generated {i + 1}/{runs} runs ({time.perf_counter() - t0:.0f} s)", flush=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def profiled(fn, enabled: bool, label: str):
    if not enabled:
        return fn()
    pr = cProfile.Profile()
    out = pr.runcall(fn)
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(15)
    print(f"--- cProfile: {label} (by own time)\n" + "\n".join(buf.getvalue().splitlines()[:40]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--target", type=float, default=0.7, help="eval/score target for the accounting")
    ap.add_argument("--cli", action="store_true", help="also time `rlbatch analyze ROOT --target T --format json`")
    ap.add_argument("--compare", action="store_true", help="also time the read with the line-by-line JSONL path "
                    "(json.loads per line, the reader before the pyarrow fast path) and print the ratio")
    ap.add_argument("--report", action="store_true", help="also time analyze(..., out=ROOT/report): the HTML/Markdown "
                    "report with its figures")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--clean", action="store_true", help="delete the generated runs afterwards")
    args = ap.parse_args()

    from rlbatch.analysis.curves import summarize_run
    from rlbatch.analyze import analyze
    from rlbatch.readers.collect import load_all
    from rlbatch.analysis.accounting import account_runs

    root = args.root or REPO / "runs" / "bench" / f"analyze_{args.runs}x{args.steps}"
    t = time.perf_counter()
    generate(root, args.runs, args.steps)
    size = sum(p.stat().st_size for p in root.rglob("*.jsonl"))
    print(f"data: {args.runs} runs x {args.steps} steps under {root} ({size / 1e9:.2f} GB of JSONL; "
          f"generated/checked in {time.perf_counter() - t:.1f} s)")
    rss0 = peak_rss_mb()

    warnings.simplefilter("ignore")
    t = time.perf_counter()
    runs, _ = profiled(lambda: load_all([root]), args.profile, "read")
    t_read = time.perf_counter() - t
    rows = sum(len(r.metrics) for r in runs)
    rss_read = peak_rss_mb()

    t = time.perf_counter()

    def work():
        summ = [summarize_run(r) for r in runs]
        acc = account_runs(runs, args.target, "eval/score")
        acc = acc["rows"], acc["reference"], acc["recommendation"]
        return summ, acc

    summ, (acc_rows, ref, text) = profiled(work, args.profile, "analyze")
    t_an = time.perf_counter() - t
    reached = sum(1 for r in acc_rows if r.get("reached", r.get("samples_to_target") is not None))
    del runs
    t = time.perf_counter()
    res = analyze([root], target=args.target)
    t_e2e = time.perf_counter() - t
    assert len(res["runs"]) == args.runs

    print(f"read:        {t_read:8.2f} s  {rows / t_read:12,.0f} rows/s  ({len(summ)} runs, {rows:,} step rows)")
    print(f"analyze:     {t_an:8.2f} s  {rows / t_an:12,.0f} rows/s  (summaries + accounting; {reached} runs "
          f"reached eval/score >= {args.target:g}; reference {ref})")
    print(f"end to end:  {t_e2e:8.2f} s  {rows / t_e2e:12,.0f} rows/s  (rlbatch.analyze.analyze)")
    print(f"peak RSS:    {rss0:8.0f} MB before reading, {rss_read:.0f} MB after reading, "
          f"{peak_rss_mb():.0f} MB at the end")
    if args.report:
        t = time.perf_counter()
        profiled(lambda: analyze([root], target=args.target, out=root / "report"), args.profile, "report")
        t_rep = time.perf_counter() - t
        print(f"with report: {t_rep:8.2f} s  {rows / t_rep:12,.0f} rows/s  (analyze(..., out=ROOT/report), "
              f"{sum(p.stat().st_size for p in (root / 'report').iterdir()) / 1e6:.1f} MB written)")
    if args.compare:
        import rlbatch.runstore as rs

        fast = rs.read_jsonl_frame
        rs.read_jsonl_frame = lambda path, key="step": rs._records_frame(rs.read_jsonl(path), key)
        try:
            t = time.perf_counter()
            slow_runs, _ = load_all([root])
            t_slow = time.perf_counter() - t
        finally:
            rs.read_jsonl_frame = fast
        assert sum(len(r.metrics) for r in slow_runs) == rows
        del slow_runs
        print(f"read, line by line: {t_slow:8.2f} s  {rows / t_slow:12,.0f} rows/s  "
              f"-> read_speedup={t_slow / t_read:.2f}")
    if args.cli:
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(root), "--target", str(args.target),
                            "--format", "json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        t_cli = time.perf_counter() - t
        print(f"CLI:         {t_cli:8.2f} s  {rows / t_cli:12,.0f} rows/s  (exit {p.returncode}; "
              f"`rlbatch analyze ROOT --target {args.target:g} --format json`)")
    if args.clean:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
