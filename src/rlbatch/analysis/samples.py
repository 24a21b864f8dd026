"""The policy-sample axis: cumulative retained responses the policy was trained on (the paper's x-axis)."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The canonical name of cumulative retained training responses.
X = "samples/retained"


def policy_offset(metrics: pd.DataFrame) -> float:
    """Retained samples spent in leading PPO critic warm-up steps (``actor_updated`` False: only the critic
    trained), which are not policy samples. 0 when the log has no such steps. Units: responses."""
    if not isinstance(metrics, pd.DataFrame) or "actor_updated" not in metrics.columns or X not in metrics.columns:
        return 0.0
    flags = metrics["actor_updated"].astype("boolean").fillna(True).to_numpy(bool)
    if not len(flags) or flags[0]:
        return 0.0
    n = int(np.argmax(flags)) if flags.any() else len(flags)
    return float(pd.to_numeric(metrics[X], errors="coerce").iloc[n - 1])
