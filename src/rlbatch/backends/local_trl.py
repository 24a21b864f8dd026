"""The study's trials trained here by TRL's ``GRPOTrainer`` (``rlbatch sweep --backend trl``, ``rlbatch demo --backend
trl``): the local sweep's ladder, manifest ``sweep.json`` and report (:func:`rlbatch.backends.local.run_sweep` with
``runner="trl"``), each trial in its own process with rlbatch's entry point :mod:`rlbatch.integrations.trl_train`,
whose callback (:mod:`rlbatch.integrations.trl_callback`) writes the trial's run directory ``OUT/trials/<run_id>``. A killed
sweep resumes each unfinished trial from its newest TRL checkpoint. (Launching the study on TRL elsewhere is
:mod:`rlbatch.backends.launch_trl`.)
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from rlbatch.errors import UserError
from rlbatch.runstore import atomic_write_text
from rlbatch.study.ladder import TrialSpec


def run_trial_trl(spec: TrialSpec, run_dir: Path | str, *, timeout_s: float | None = None) -> Path:
    """Train one sweep trial (a :class:`rlbatch.study.ladder.TrialSpec`) with TRL into ``run_dir``: writes
    ``run_dir/trial_spec.json`` and runs ``python -m rlbatch.integrations.trl_train --spec ... --out run_dir`` in a
    subprocess (TRL, datasets and accelerate are imported there, not in the sweep's workers; the thread count is the
    worker's ``OMP_NUM_THREADS``). Resumes from the trial's newest TRL checkpoint; returns at once when it finished.

    Raises :class:`UserError` when TRL is not installed or the trial's options are bad (the entry point's exit
    code 2), ``RuntimeError`` with the end of its output when the training process fails."""
    if importlib.util.find_spec("trl") is None:
        raise UserError("--backend trl needs TRL: pip install 'rlbatch[trl]'")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = run_dir / "trial_spec.json"
    atomic_write_text(spec_path, spec.model_dump_json(indent=1) + "\n")
    src = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]),
           "TOKENIZERS_PARALLELISM": "false", "WANDB_DISABLED": "true"}
    r = subprocess.run([sys.executable, "-m", "rlbatch.integrations.trl_train", "--spec", str(spec_path),
                        "--out", str(run_dir)], capture_output=True, text=True, env=env, timeout=timeout_s)
    if r.returncode == 2:
        raise UserError((r.stderr.strip().splitlines() or ["bad trial options"])[-1].removeprefix("rlbatch: error: "))
    if r.returncode:
        raise RuntimeError(f"TRL trial {spec.run_id} failed (exit {r.returncode}): {r.stderr[-1500:]}")
    return run_dir
