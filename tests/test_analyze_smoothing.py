"""`rlbatch analyze --sustained/--ema`: the options reach samples-to-target in the accounting."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rlbatch.analysis.crossing import find_crossing
from rlbatch.analysis.curves import ema_positions, ema_smooth

from rlbatch.runstore import Run, make_meta, write_run


def _run(tmp, name, b, scores):
    steps = list(range(1, len(scores) + 1))
    metrics = pd.DataFrame({"step": steps, "samples/retained": [s * b for s in steps],
                            "time/wall_s": [float(s) for s in steps], "time/step_s": [1.0] * len(steps)})
    evals = pd.DataFrame({"step": steps, "samples/retained": [s * b for s in steps], "eval/score": scores})
    write_run(tmp / name, Run(meta=make_meta(run_id=name, prompts_per_step=b, group_size=1), metrics=metrics,
                              evals=evals))


def _s2t(tmp, *flags):
    res = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(tmp), "--target", "0.5",
                          "--reference", "ref", "--format", "json", *flags], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return {r["run"]: r["samples_to_target"] for r in json.loads(res.stdout)["accounting"]}


def test_sustained_and_ema_change_samples_to_target(tmp_path):
    _run(tmp_path, "ref", 10, [0.0, 0.6, 0.6, 0.6])
    # a spike to 1.0 at 20 samples, back to 0 at 30 and 40, then 1.0 from 50 on
    _run(tmp_path, "spiky", 10, [0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    plain = _s2t(tmp_path)
    # the reference steps from 0 (10 samples) to 0.6 (20) and stays: without noise around its monotone fit the
    # crossing stays between those two evaluations, at most 20
    assert 10 < plain["ref"] <= 20
    # the monotone fit pools the spike with the zeros after it (1/3 < 0.5): the crossing is after the dip, between
    # 40 and 50, where the first-evaluation rule said 15
    xs = np.arange(1, 7) * 10.0
    ys = np.array([0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    assert 40 < plain["spiky"] < 50 and plain["spiky"] == pytest.approx(find_crossing(xs, ys, 0.5).samples)
    # sustained: from the last point where the smoothed curve is below 0.5 on (40), no earlier
    sustained = _s2t(tmp_path, "--sustained")
    assert sustained["spiky"] == pytest.approx(find_crossing(xs, ys, 0.5, sustained=True).samples)
    assert sustained["spiky"] >= 40
    # an EMA of weight 0.5 (0, 0.5, 0.25, 0.125, 0.5625, 0.78) placed where it averages (10, 15, 22.5, 31.25, 40.6,
    # 50.3): its crossing, not the lagging one
    ema = _s2t(tmp_path, "--ema", "0.5")
    assert ema["spiky"] == pytest.approx(find_crossing(ema_positions(xs, 0.5), ema_smooth(ys, 0.5), 0.5).samples)
    assert ema["spiky"] != pytest.approx(plain["spiky"])


def test_ema_is_refused_where_evaluation_spacings_differ(tmp_path):
    # statistics review 2, N7: an EMA's lag grows with the evaluation spacing, so rN would measure the spacing
    # (identical curves, weight 0.6: S / truth 1.02 at 256 samples apart, 1.64 at 4,096). Evaluated every step at
    # B = 10 and B = 40: 4x apart in retained samples, refused with one line naming both runs (exit 2)
    _run(tmp_path, "ref", 10, [0.0, 0.2, 0.4, 0.6, 0.6, 0.6])
    _run(tmp_path, "big", 40, [0.0, 0.5, 0.6, 0.6, 0.6, 0.6])
    res = subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(tmp_path), "--target", "0.5",
                          "--ema", "0.6"], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip()
    assert err.startswith("rlbatch: error: --ema with evaluations 4.0x further apart in big (every 40 retained "
                          "samples) than in ref (every 10)") and "\n" not in err
    assert res.stdout == ""
    # at one spacing it is used as before
    assert subprocess.run([sys.executable, "-m", "rlbatch.cli", "analyze", str(tmp_path / "ref"), "--target", "0.5",
                           "--ema", "0.6"], capture_output=True, text=True).returncode == 0
