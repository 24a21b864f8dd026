"""A small deterministic, resumable trial for the Ray sweep tests (imported by Ray workers via PYTHONPATH).

It appends one metrics line per step (``JsonlWriter``), checkpoints after each step (``atomic_write_text``), resumes
from its checkpoint (dropping metrics lines written after the last checkpoint), and can kill its own worker process
once, at a given step, between appending the step's line and checkpointing it (the worst moment), guarded by a marker
file so that it happens only on the first attempt.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from rlbatch.runstore import (METRICS_JSONL, JsonlWriter, atomic_write_text, dumps, make_meta, read_jsonl,
                              update_meta, write_meta)


def fake_trial(spec: dict, run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt = run_dir / "checkpoint.json"
    steps, b = int(spec["steps"]), int(spec["batch_size"])
    if ckpt.exists():
        start = json.loads(ckpt.read_text())["step"]
        rows = [r for r in read_jsonl(run_dir / METRICS_JSONL) if r["step"] <= start]
        atomic_write_text(run_dir / METRICS_JSONL, "".join(dumps(r) + "\n" for r in rows))
    else:
        start = 0
        write_meta(run_dir, make_meta(run_id=spec["run_id"], prompts_per_step=spec["prompts_per_step"],
                                      group_size=spec["group_size"], lr=spec["lr"], backend="ray"))
    with JsonlWriter(run_dir / METRICS_JSONL) as w:
        for step in range(start + 1, steps + 1):
            time.sleep(float(spec.get("sleep_s", 0.02)))
            w.append({"step": step, "samples/retained": step * b, "lr": spec["lr"], "pid": os.getpid()})
            marker = run_dir / "killed.marker"
            if spec.get("kill_at_step") == step and not marker.exists():
                marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            atomic_write_text(ckpt, json.dumps({"step": step}))
    update_meta(run_dir, status="finished", stop_reason="budget spent")
    return run_dir
