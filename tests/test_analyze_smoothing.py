"""`rlbatch analyze --sustained/--ema`: the options reach samples-to-target in the accounting."""

import json
import subprocess
import sys

import pandas as pd

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
    # crosses 0.5 between steps 1 and 2 (at 15 samples), dips below, then stays above from step 5 (crossing at 45)
    _run(tmp_path, "spiky", 10, [0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    plain = _s2t(tmp_path)
    assert plain["ref"] == 10 + 10 * 0.5 / 0.6 and plain["spiky"] == 15.0
    sustained = _s2t(tmp_path, "--sustained")
    assert sustained["spiky"] == 45.0
    # EMA weight 0.5: spiky becomes 0, 0.5, 0.25, 0.125, 0.5625 -> first reaches 0.5 exactly at step 2 (20 samples)
    ema = _s2t(tmp_path, "--ema", "0.5")
    assert ema["spiky"] == 20.0
