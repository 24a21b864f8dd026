"""Training checkpoints: the model, optimizer, trainer state and random-number-generator states of one run, written
atomically into its run directory so a killed run resumes where it was (the run store's files: :mod:`rlbatch.runstore`).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np

from rlbatch import faults
from rlbatch.errors import UserError
from rlbatch.runstore import CHECKPOINT, fsync_dir


# torch is imported inside the checkpoint functions: the CLI and the log readers import this module without torch.
def rng_states() -> dict:
    """The Python, numpy and torch (CPU) random-number-generator states, for a checkpoint."""
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_states(s: dict) -> None:
    """Restore :func:`rng_states`."""
    import torch

    random.setstate(s["python"])
    np.random.set_state(s["numpy"])
    torch.set_rng_state(s["torch"])


class _Sink:
    """The checkpoint's file as ``torch.save`` sees it: passes writes through, keeps the ``OSError`` of a failed
    write (torch reports it as a bare ``RuntimeError``) and hosts the ``ckpt_write`` / ``enospc_checkpoint``
    fault points (:mod:`rlbatch.faults`), which fire on the third write, with part of the file on disk."""

    def __init__(self, fh):
        self.fh, self.n, self.error = fh, 0, None
        self.kill, self.full = faults.armed("ckpt_write"), faults.armed("enospc_checkpoint")

    def write(self, data) -> int:
        self.n += 1
        try:
            if self.n == 3 and (self.kill or self.full):
                self.fh.write(data[: len(data) // 2])
                self.fh.flush()
                if self.kill:
                    os.fsync(self.fh.fileno())
                    faults.kill()
                raise faults.enospc()
            return self.fh.write(data)
        except OSError as err:
            self.error = err
            raise

    def flush(self) -> None:
        self.fh.flush()


def save_checkpoint(out: Path, model, optimizer, state: dict, extra: dict | None = None) -> None:
    """Atomically write ``out/checkpoint.pt`` (temp file + fsync + rename + directory fsync): model and optimizer
    state dicts, RNG states (:func:`rng_states`) and the loop ``state`` (a plain dict: step = data-sampler
    position, counters, metrics/eval line counts), plus ``extra`` entries. A kill at any moment leaves the previous
    checkpoint in place and loadable (at worst a stale ``.checkpoint.pt.tmp``, removed on resume). A failed write
    (disk full) removes the temp file and raises ``OSError`` naming ``out/checkpoint.pt``; the previous checkpoint
    stays."""
    import torch

    final = out / CHECKPOINT
    tmp = out / f".{CHECKPOINT}.tmp"
    sink = None
    try:
        with open(tmp, "wb") as fh:
            sink = _Sink(fh)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "rng": rng_states(),
                        "state": state, **(extra or {})}, sink)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except (OSError, RuntimeError) as err:
        try:
            tmp.unlink()
        except OSError:
            pass
        cause = err if isinstance(err, OSError) else (sink.error if sink is not None else None)
        if cause is None:
            raise
        raise OSError(cause.errno, cause.strerror, str(final)) from None
    fsync_dir(out)
    faults.fault("ckpt_done")


def load_checkpoint(path: Path, device: str) -> dict:
    """Read a checkpoint written by :func:`save_checkpoint`; :class:`UserError` naming the file if unreadable."""
    import torch

    try:
        return torch.load(path, map_location=device, weights_only=False)
    except Exception as err:  # noqa: BLE001 - truncated or foreign file
        raise UserError(f"cannot read checkpoint ({type(err).__name__}: {str(err).splitlines()[0][:200]}); move it "
                        "away to restart the run from scratch", path=str(path)) from None
