"""Make tests/data/demo_sweep from a finished demo sweep: the trial run dirs (run.json, metrics.jsonl, eval.jsonl)
with only the fields the plan and the report need, floats at 4 significant digits, packed as trials.tar.gz, plus
the sweep's settings.json.

    python tests/data/demo_sweep/compact.py runs/demo tests/data/demo_sweep
"""
import json, sys, shutil
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
KEEP = ["step", "samples/retained", "samples/generated", "time/step_s", "time/gen_s", "time/train_s", "time/wall_s",
        "time/cpu_s",
        "grad_norm/actor", "noise/grad_sq_small", "noise/grad_sq_big", "noise/b_small", "noise/b_big"]
EVAL_KEEP = ["step", "samples/retained", "eval/score", "eval/n", "time/wall_s"]
META_KEEP = ["run_id", "algorithm", "model", "task", "prompts_per_step", "group_size", "batch_size", "lr", "lr_rule",
             "base_batch", "base_lr", "seed", "backend", "status", "stop_reason", "hardware"]

def r(v):
    if isinstance(v, float):
        return float(f"{v:.4g}")
    return v

import tarfile, tempfile

final, dst = dst, Path(tempfile.mkdtemp()) / "trials"
man = json.loads((src / "sweep.json").read_text())
for t in man["trials"]:
    if t["state"] != "finished":
        continue
    d = src / t["run_dir"]
    o = dst / t["run_dir"].split("/")[-1]
    o.mkdir(parents=True)
    meta = json.loads((d / "run.json").read_text())
    (o / "run.json").write_text(json.dumps({k: meta[k] for k in META_KEEP if k in meta}) + "\n")
    for name, keep in (("metrics.jsonl", KEEP), ("eval.jsonl", EVAL_KEEP)):
        rows = [json.loads(x) for x in (d / name).read_text().splitlines()]
        (o / name).write_text("".join(json.dumps({k: r(x[k]) for k in keep if k in x}, separators=(",", ":")) + "\n" for x in rows))

final.mkdir(parents=True, exist_ok=True)
with tarfile.open(final / "trials.tar.gz", "w:gz") as tar:
    tar.add(dst, arcname="trials")
(final / "settings.json").write_text(json.dumps(man["settings"], indent=1, default=str) + "\n")
