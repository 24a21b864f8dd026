import math

import numpy as np
import pandas as pd
import pytest

from rlbatch.analysis import throughput as tp
from rlbatch.errors import UserError
from rlbatch.runstore import Run, make_meta


def timed_run(b, gen_s, train_s, reward_s=0.0, steps=5, tokens_per_resp=100):
    s = np.arange(1, steps + 1)
    m = pd.DataFrame({"step": s, "samples/retained": s * b, "time/gen_s": gen_s, "time/train_s": train_s,
                      "time/reward_s": reward_s, "tokens/trained": s * b * tokens_per_resp,
                      "tokens/generated": s * b * tokens_per_resp})
    return Run(meta=make_meta(run_id=f"B{b}", batch_size=b), metrics=m)


def test_paper_ppo_generation_scaling():
    # PPO B_train 256 -> 1024: collection 39 s -> 68 s (1.74x), generation throughput 2.29x (Li et al. 2026)
    runs = [timed_run(256, 39.0, 50.0), timed_run(1024, 68.0, 200.0)]
    t = tp.step_timings(runs)
    assert list(t["gen_s"]) == [39.0, 68.0]
    w = tp.sublinear_window(t["batch_size"], t["gen_s"])
    assert w["window"] == [256, 1024]
    p = w["pairs"][0]
    assert p["time_ratio"] == pytest.approx(68 / 39)
    assert p["throughput_gain"] == pytest.approx(2.29, abs=0.01)
    model = tp.fit_throughput_model(t)
    assert model["gen"]["exponent"] == pytest.approx(math.log(68 / 39) / math.log(4))
    assert model["gen_tokens"]["exponent"] == pytest.approx(model["gen"]["exponent"])  # 100 tokens per response
    pred = {r["batch_size"]: r for r in tp.predict(model, [256, 512, 1024, 2048])}
    assert pred[512]["gen_s"] == pytest.approx(39 * 2 ** (math.log(68 / 39) / math.log(4)))
    assert pred[512]["gen_s"] == pytest.approx(math.sqrt(39 * 68))
    assert not pred[512]["extrapolated"] and pred[2048]["extrapolated"]
    # update linear in tokens: 50 s at 25.6k tokens, 200 s at 102.4k -> slope 50/25600 per token, no intercept
    assert model["train_x"] == "tokens"
    assert model["train"]["slope"] == pytest.approx(50 / 25600)
    assert model["train"]["intercept"] == pytest.approx(0.0, abs=1e-6)
    assert pred[512]["train_s"] == pytest.approx(100.0)
    # the step time passes through the measured points (89 s, 268 s) and is log-log interpolated between them
    assert pred[256]["step_s"] == pytest.approx(89.0) and pred[1024]["step_s"] == pytest.approx(268.0)
    assert pred[512]["step_s"] == pytest.approx(math.sqrt(89.0 * 268.0))
    assert pred[512]["throughput_samples_per_s"] == pytest.approx(512 / pred[512]["step_s"])
    assert pred[256]["throughput_samples_per_s"] == pytest.approx(t["throughput_samples_per_s"].iloc[0])


def test_paper_grpo_generation_and_update():
    # GRPO P 128 -> 512: 4x responses, 2.93x collection time -> 1.36x generation throughput
    r = tp.time_ratios([128, 512], [10.0, 29.3])[0]
    assert r["throughput_gain"] == pytest.approx(1.365, abs=0.005)
    assert r["sublinear"] and r["per_doubling"] == pytest.approx(math.sqrt(2.93))
    # actor update 101.3 s -> 208.6 s when P doubles: ~linear, not sublinear
    u = tp.time_ratios([128, 256], [101.3, 208.6])[0]
    assert u["time_ratio"] == pytest.approx(2.059, abs=0.001) and not u["sublinear"]
    w = tp.sublinear_window([128, 256], [101.3, 208.6])
    assert w["window"] is None


def test_window_is_widest_contiguous_sublinear_range():
    b = [1, 2, 4, 8, 16, 32]
    t = [1.0, 1.1, 1.3, 2.6, 5.2, 6.0]  # sublinear 1..4, linear 4..16, sublinear 16..32
    assert tp.sublinear_window(b, t)["window"] == [1, 4]


def test_power_fit_three_points_and_errors():
    f = tp.fit_power([1, 2, 4], [3.0, 3.0 * 2 ** 0.6, 3.0 * 4 ** 0.6])
    assert f["a"] == pytest.approx(3.0) and f["exponent"] == pytest.approx(0.6)
    assert f["exponent_ci"][0] == pytest.approx(0.6) and f["r2"] == pytest.approx(1.0)
    with pytest.raises(UserError):
        tp.fit_power([4, 4], [1.0, 2.0])


def test_throughput_section_contract():
    runs = [timed_run(b, 10 * b ** 0.5, 0.1 * b, 0.5) for b in (64, 128, 256)]
    from rlbatch.analysis.throughput_summary import throughput_summary
    from rlbatch.report.sections import throughput_section

    sec = throughput_section(throughput_summary(runs))
    assert set(sec) == {"title", "markdown", "figures", "captions", "json_key", "json"}
    assert sec["json_key"] == "throughput"
    assert sec["json"]["model"]["gen"]["exponent"] == pytest.approx(0.5)
    assert [p["batch_size"] for p in sec["json"]["predicted"]] == [64, 128, 256, 512, 1024]
    assert sec["json"]["gen_window"]["window"] == [64, 256]
    assert "time_and_throughput_vs_batch" in sec["figures"]
    one = throughput_section(throughput_summary(runs[:1]))
    assert one["json"]["model"] is None and "not fitted" in one["markdown"]


def test_predicted_update_time_trains_only_the_retained_responses():
    # issue 56 (noticed): the update's affine fit is over trained tokens per step = retained responses x tokens per
    # retained response; at B it was evaluated at B x tokens (every response kept), 1 / f too high. Hand-made
    # timings: 100 tokens per retained response, f = 0.5 at every B, update 1e-4 s per token (no intercept); at a
    # measured B = 64 the per-phase update is 64 x 0.5 x 100 x 1e-4 = 0.32 s, not 0.64 s.
    import pandas as pd

    from rlbatch.analysis.throughput import fit_throughput_model, predict

    rows = []
    for b in (16, 32, 64):
        kept = 0.5 * b
        rows.append({"run": f"B{b}", "batch_size": b, "seed": 0, "gen_s": 0.01 * b ** 0.5, "train_s": kept * 100 * 1e-4,
                     "reward_s": None, "other_s": 0.0, "step_s": 0.01 * b ** 0.5 + kept * 100 * 1e-4,
                     "samples_per_step": kept, "retained_fraction": 0.5, "gen_tokens_per_step": None,
                     "train_tokens_per_step": kept * 100, "samples": None, "seconds": None, "steps": None,
                     "throughput_samples_per_s": None})
    model = fit_throughput_model(pd.DataFrame(rows))
    assert model["train_x"] == "tokens" and model["tokens_per_response"] == pytest.approx(100)
    (p64, p256) = predict(model, [64, 256])
    assert p64["train_s"] == pytest.approx(0.32, rel=1e-6)
    assert p256["train_s"] == pytest.approx(256 * 0.5 * 100 * 1e-4, rel=1e-6)
    # beyond the measured range the step is the per-phase model anchored at B = 64: its update share is right too
    assert p256["step_s"] == pytest.approx(rows[-1]["step_s"] * (0.01 * 16 + 1.28) / (0.01 * 8 + 0.32), rel=1e-6)
