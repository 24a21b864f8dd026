"""The timing pass: every configuration's step time measured again after the study, in short blocks interleaved
across the configurations and repeated (issue 44).

Samples-to-target does not depend on the machine; throughput does, and a study's trials run at different moments
under different loads (another job, a neighbour on the cores), which no seed spread shows when a load change lands
on one configuration's trials. The pass runs ``steps`` optimizer steps of each configuration (its first seed's
settings, from the warm start, no evaluation) in ``rounds`` rounds, each round in its own shuffled order, so a load
change hits every configuration alike; each block's throughput (retained samples per second of its steps after the
first, the warm-up) is one line of ``OUT/timing.jsonl``:

    {"config": "B64-G8-sqrt", "batch_size": 64, "round": 0, "steps": 4, "samples": 160, "generated": 256,
     "cpu_s": 0.21, "wall_s": 0.25, "gen_s": 0.08, "train_s": 0.16}

The accounting then takes a configuration's throughput from its blocks (their geometric mean, with Student's t
interval over the blocks, the spread moderated across configurations; each block's time split into generation, per
response generated, and the rest, per response retained, re-weighted by the runs' own retained share up to the
target: :func:`rlbatch.analysis.accounting.timing_of`) and its time-to-target as
samples-to-target / that throughput (:func:`rlbatch.analysis.accounting.estimate_configuration`); the report says
which timing the verdict used. The pass is resumable: blocks already in the file are not run again. The blocks start
from the warm start, so their responses are as long as at the start of training (the tiny preset's answers are a
few tokens at any point).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from rlbatch.progress import After, Eta, hms
from rlbatch.runstore import TIMING_JSONL, timing_blocks
from rlbatch.study.ladder import TrialSpec, config_id


def read_timing(out: Path | str) -> list[dict[str, Any]]:
    """The blocks recorded in ``out/timing.jsonl`` (:func:`rlbatch.runstore.timing_blocks`)."""
    return timing_blocks(out)


def block_plan(specs: Sequence[TrialSpec], rounds: int, seed: int = 0) -> list[tuple[int, TrialSpec]]:
    """``(round, spec)`` in the order the blocks run: one spec per configuration (its first seed's), every round in
    its own order shuffled from ``seed``."""
    first: dict[str, TrialSpec] = {}
    for s in sorted(specs, key=lambda s: (s.seed, s.run_id)):
        first.setdefault(config_id(s.run_id), s)
    out = []
    for r in range(rounds):
        order = sorted(first)
        random.Random(seed + r).shuffle(order)
        out += [(r, first[c]) for c in order]
    return out


def run_block(spec: TrialSpec, steps: int, workdir: Path) -> dict[str, Any]:
    """One block: ``steps + 1`` optimizer steps of ``spec``'s configuration from the warm start (no evaluation, no
    checkpoint), timed; the first step (the warm-up) is left out. Returns the block's line without ``round``."""
    from rlbatch.train.trainer import train  # lazy: torch

    opts = {**spec.options, "eval_every": 10 ** 12, "checkpoint_every": 10 ** 6, "stop_at_target": None,
            "max_steps": steps + 1}
    cfg = spec.model_copy(update={"options": opts, "samples": 10 ** 12, "run_id": f"{spec.run_id}-timing"}) \
        .train_config()
    run = train(cfg, Path(tempfile.mkdtemp(dir=workdir)) / cfg.run_id)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    rows = rows[1:]
    return {"config": config_id(spec.run_id), "batch_size": spec.prompts_per_step * spec.group_size,
            "steps": len(rows), "samples": float(sum(r.get("batch/retained", 0) for r in rows)),
            "generated": float(sum(r.get("batch/generated", 0) for r in rows)),
            "cpu_s": float(sum(r.get("time/cpu_s", 0.0) for r in rows)),
            "wall_s": float(sum(r.get("time/step_s", 0.0) for r in rows)),
            # the step's phases (wall seconds): generation scales with the responses generated, the update with
            # those retained, whose share at the warm start is not the run's (the accounting re-weights them)
            "gen_s": float(sum(r.get("time/gen_s", 0.0) for r in rows)),
            "train_s": float(sum(r.get("time/train_s", 0.0) for r in rows))}


def _drop_partial_line(path: Path) -> None:
    """Cut a last line without its newline (a write cut short when the pass was killed) from ``path``."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


#: the fewest responses a block generates: a block of a small batch runs more steps than ``steps`` (B = 16: 32 steps,
#: about half a second on 2 CPU cores), so that its time is not a few timer ticks; the reference's blocks divide every
#: gain, and 4 steps of B = 16 (64 responses) moved every gain by up to 20% between two runs (issue 44)
MIN_RESPONSES = 512


def block_steps(batch_size: int, steps: int) -> int:
    """Steps timed in one block of a configuration of ``batch_size`` responses per step: at least ``steps``, and
    at least :data:`MIN_RESPONSES` responses in all."""
    return max(int(steps), -(-MIN_RESPONSES // max(1, int(batch_size))))


def pending_blocks(out: Path | str, specs: Sequence[TrialSpec], rounds: int,
                   seed: int = 0) -> list[tuple[int, TrialSpec]]:
    """The blocks of :func:`block_plan` not yet in ``out/timing.jsonl``, in the order they run."""
    have = {(r["round"], r["config"]) for r in read_timing(out)}
    return [(r, s) for r, s in block_plan(specs, rounds, seed) if (r, config_id(s.run_id)) not in have]


def timing_pass(out: Path | str, specs: Sequence[TrialSpec], *, rounds: int = 3, steps: int = 4, seed: int = 0,
                say: Callable[[str], None] | None = None, after: After | None = None,
                clock: Callable[[], float] = time.perf_counter) -> list[dict[str, Any]]:
    """Run the blocks of :func:`block_plan` not yet in ``out/timing.jsonl`` (appending each as it ends, flushed and
    fsynced) and return all the file's blocks. ``steps``: steps timed per block, more for small batches
    (:func:`block_steps`). ``say``: a line before the first block and one per block, with the time elapsed and left
    (:class:`rlbatch.progress.Eta` on ``clock``: the pass at its mean time per block so far, then ``after``, what
    the command does next, e.g. the report)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)  # the sequential demo times before any trial has made the directory
    _drop_partial_line(out / TIMING_JSONL)  # a pass killed mid-write: the next line must not join that fragment
    plan = pending_blocks(out, specs, rounds, seed)
    eta = Eta(len(plan), name="timing pass", unit="blocks", after=after, clock=clock)
    if say and plan:
        configs = len({config_id(s.run_id) for s in specs})
        guess = After(blocks=len(plan), report=False).seconds()
        left = "" if len(plan) == rounds * configs else f" left of {rounds * configs}"
        say(f"timing pass: {len(plan)} blocks{left} ({rounds} round{'s' if rounds != 1 else ''} x {configs} "
            f"configurations), "
            f"~{hms(guess)} at a rough guess of {guess / len(plan):g} s a block until the first is timed")
    with tempfile.TemporaryDirectory(prefix="rlbatch-timing-") as d:
        for i, (r, spec) in enumerate(plan, 1):
            row = {**run_block(spec, block_steps(spec.batch_size, steps), Path(d)), "round": r}
            with open(out / TIMING_JSONL, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())
            eta.advance()
            if say:
                say(f"timing pass: {i}/{len(plan)} {row['config']} round {r + 1}: "
                    f"{row.get('generated', row['samples']) / max(row['cpu_s'], 1e-9):,.0f} responses generated "
                    f"per CPU second ({eta.text()})")
    return read_timing(out)
