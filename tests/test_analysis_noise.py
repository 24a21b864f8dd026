import math

import numpy as np
import pandas as pd
import pytest
import torch

from rlbatch.analysis import noise
from rlbatch.errors import UserError
from rlbatch.runstore import Run, make_meta


def synth_run(b, value_fn, total=2048 * 40, seed=0, p=None, g=None, critic_fn=None, sigma=0.05, run_id=None):
    rng = np.random.default_rng(seed * 1000 + b)
    steps = total // b
    s = np.arange(1, steps + 1)
    m = {"step": s, "samples/retained": s * b,
         "grad_norm/actor": value_fn(b) * np.exp(rng.normal(0, sigma, steps))}
    if critic_fn is not None:
        m["grad_norm/critic"] = critic_fn(b) * np.exp(rng.normal(0, sigma, steps))
    meta = make_meta(run_id=run_id or f"B{b}-s{seed}", batch_size=b, seed=seed,
                     **({"prompts_per_step": p, "group_size": g} if p else {}))
    return Run(meta=meta, metrics=pd.DataFrame(m))


def knee_fn(knee, c=3.0):
    return lambda b: c * min(b, knee) ** -0.5


def test_planted_knee_and_slope():
    runs = [synth_run(b, knee_fn(512)) for b in (64, 128, 256, 512, 1024, 2048)]
    fit = noise.fit_grad_norm_scaling(runs)
    assert fit["knee_batch"] == 512
    assert fit["fit_batches"] == [64, 128, 256, 512]
    lo, hi = fit["slope_ci"]
    assert lo <= -0.5 <= hi
    assert abs(fit["slope"] + 0.5) < 0.02
    assert fit["slope_all"] > -0.45  # flattening pulls the all-points slope up
    d = {(x["b_from"], x["b_to"]): x for x in fit["doublings"]}
    assert not d[(256, 512)]["past_knee"] and d[(512, 1024)]["past_knee"]
    assert d[(512, 1024)]["ratio"] == pytest.approx(1.0, abs=0.03)
    assert fit["window"][0] == 2048 and fit["window"][1] == 2048 * 40


def test_no_knee_and_seed_bootstrap():
    runs = [synth_run(b, knee_fn(10**9), seed=s) for b in (128, 256, 512, 1024) for s in range(3)]
    fit = noise.fit_grad_norm_scaling(runs)
    assert fit["knee_batch"] is None
    assert all(p["n_runs"] == 3 for p in fit["points"])
    lo, hi = fit["slope_ci_bootstrap"]
    assert lo <= fit["slope"] <= hi and lo < -0.48 and hi > -0.52


def test_paper_numbers_flag_the_knee():
    # GRPO: in-range slope -0.468, then P=2048->4096 ratio 0.823 (Li et al. 2026)
    r = 2 ** -0.468
    b = [256, 512, 1024, 2048, 4096]
    v = [1.0, r, r**2, r**3, r**3 * 0.823]
    fit = noise.fit_grad_norm_scaling(pd.DataFrame({"batch_size": b, "value": v}))
    assert fit["knee_batch"] == 2048
    assert fit["slope"] == pytest.approx(-0.468, abs=1e-9)
    assert fit["doublings"][-1]["past_knee"] and fit["doublings"][-1]["ratio"] == pytest.approx(0.823)
    assert noise.doubling_ratio_flag(0.823) and noise.doubling_ratio_flag(0.905)  # PPO 2048->4096
    assert not noise.doubling_ratio_flag(2 ** -0.468) and not noise.doubling_ratio_flag(2 ** -0.471)
    assert not noise.doubling_ratio_flag(noise.INV_SQRT2)


def test_fit_needs_two_batches():
    with pytest.raises(UserError):
        noise.fit_grad_norm_scaling(pd.DataFrame({"batch_size": [64, 64], "value": [1.0, 1.1]}))


def test_b_simple_linear_model_matches_analytic():
    """Linear regression y = x.w* + eps, x ~ N(0, I_d), eps ~ N(0, s2), loss 0.5 (x.w - y)^2 at w = w* + delta:
    per-sample gradient x x^T delta - x eps, so G = delta and tr(Sigma) = (d + 1)|delta|^2 + d s2."""
    gen = torch.Generator().manual_seed(0)
    d, s2, b_small, n_micro, steps = 10, 1.0, 4, 16, 300
    w_star = torch.randn(d, generator=gen)
    delta = torch.randn(d, generator=gen)
    delta = delta / delta.norm()
    w = (w_star + delta).requires_grad_(True)
    analytic = ((d + 1) * delta.norm() ** 2 + d * s2).item() / (delta.norm() ** 2).item()
    rows = []
    for step in range(1, steps + 1):
        micro_sq, acc = [], torch.zeros(d)
        for _ in range(n_micro):
            x = torch.randn(b_small, d, generator=gen)
            y = x @ w_star + math.sqrt(s2) * torch.randn(b_small, generator=gen)
            loss = 0.5 * ((x @ w - y) ** 2).mean()
            (g,) = torch.autograd.grad(loss, w)
            micro_sq.append(float(g.pow(2).sum()))
            acc += g / n_micro
        rows.append({"step": step, "samples/retained": step * b_small * n_micro,
                     "noise/grad_sq_small": float(np.mean(micro_sq)), "noise/grad_sq_big": float(acc.pow(2).sum()),
                     "noise/b_small": b_small, "noise/b_big": b_small * n_micro})
    df = pd.DataFrame(rows)
    est = noise.b_simple_overall(df)
    assert est == pytest.approx(analytic, rel=0.10)
    sm = noise.b_simple_smoothed(df, alpha=0.05)
    assert sm["b_simple"].iloc[-1] == pytest.approx(analytic, rel=0.3)
    assert list(sm.columns[:2]) == ["step", "samples/retained"]


def test_b_simple_smoothed_missing_columns():
    with pytest.raises(UserError):
        noise.b_simple_smoothed(pd.DataFrame({"step": [1, 2]}))


def test_grpo_split_recovers_between_and_within():
    rng = np.random.default_rng(0)
    d, P, G, s, sb, sw = 20, 8, 8, 2, 0.5, 1.5
    g_true = np.ones(d) * 0.3
    acc = np.zeros(3)
    n = 3000
    for _ in range(n):
        u = rng.normal(0, sb, (P, 1, d))
        e = rng.normal(0, sw, (P, G, d))
        grads = g_true + u + e                       # (P, G, d) per-response gradients
        micro = grads.reshape(P, G // s, s, d).mean(2)
        prompt = grads.mean(1)
        big = grads.mean((0, 1))
        acc += [np.mean((micro ** 2).sum(-1)), np.mean((prompt ** 2).sum(-1)), (big ** 2).sum()]
    sq_micro, sq_prompt, sq_big = acc / n
    out = noise.grpo_noise_split(sq_micro, sq_prompt, sq_big, s, G, P)
    assert out["trace_within"] == pytest.approx(d * sw**2, rel=0.05)
    assert out["trace_between"] == pytest.approx(d * sb**2, rel=0.10)
    assert out["g2"] == pytest.approx(d * 0.09, rel=0.25)
    assert out["between_fraction"] == pytest.approx(sb**2 / (sb**2 + sw**2), rel=0.1)
    with pytest.raises(UserError):
        noise.grpo_noise_split(1.0, 1.0, 1.0, 8, 8, 4)


def _eval_run(run_id, p, g, offset, seed=0, speed=1.0):
    x = np.arange(1, 21) * 1000.0
    ev = pd.DataFrame({"step": np.arange(1, 21), "samples/retained": x,
                       "eval/score": np.minimum(1.0, speed * x / 20000.0) + offset})
    return Run(meta=make_meta(run_id=run_id, prompts_per_step=p, group_size=g, seed=seed), evals=ev)


def test_gp_equivalence():
    runs = [_eval_run("P16G4", 16, 4, 0.0), _eval_run("P8G8", 8, 8, 0.02, speed=0.8), _eval_run("P32G4", 32, 4, 0)]
    rows = noise.gp_equivalence(runs, target=0.5)
    assert len(rows) == 1
    r = rows[0]
    assert r["batch_size"] == 64 and r["reference"] == {"prompts_per_step": 16, "group_size": 4}
    assert r["max_deviation"] == pytest.approx(abs(0.02 - 0.2 * 1.0) , abs=0.01)  # largest at x=20000
    # P8G8 reaches 0.5 when 0.8 x / 20000 + 0.02 = 0.5 -> x = 12000; reference at 10000 -> rN 1.2
    assert r["rN"] == pytest.approx(1.2, rel=1e-6)


def test_noise_section_contract():
    runs = [synth_run(b, knee_fn(256), critic_fn=knee_fn(10**9, c=5.0)) for b in (64, 128, 256, 512)]
    for r in runs:
        n = len(r.metrics)
        r.metrics["noise/grad_sq_small"] = 2.0 + 20.0 / 4
        r.metrics["noise/grad_sq_big"] = 2.0 + 20.0 / r.meta.batch_size
        r.metrics["noise/b_small"] = 4
        r.metrics["noise/b_big"] = r.meta.batch_size
        assert n
    from rlbatch.analysis.noise_summary import noise_summary
    from rlbatch.report.sections import noise_section

    sec = noise_section(noise_summary(runs))
    assert set(sec) == {"title", "markdown", "figures", "captions", "json_key", "json"}
    assert sec["json_key"] == "noise"
    assert sec["json"]["actor"]["knee_batch"] == 256
    assert sec["json"]["critic"]["knee_batch"] is None
    assert sec["json"]["b_simple"][0]["b_simple"] == pytest.approx(10.0)
    assert {"grad_norm_vs_batch", "b_simple_by_batch"} <= set(sec["figures"])
    # one run per batch size: the knee is one ratio without an interval, said as a hint, never "the critical batch"
    assert "Knee of the `grad_norm/actor` norm: **B = 256**" in sec["markdown"]
    assert "a hint, not a measurement" in sec["markdown"]
    assert "No knee of the `grad_norm/critic` norm" in sec["markdown"]  # each line names its norm (PPO: two)
    assert "critical batch)" not in sec["markdown"]
    # a knee at the ladder's first batch is not located (newcomer finding 19): said so, not in bold
    low = noise_section(noise_summary([synth_run(b, knee_fn(64)) for b in (64, 128, 256, 512)]))
    assert low["json"]["actor"]["knee_batch"] == 64
    assert "at or below the smallest batch, B = 64" in low["markdown"] and "**B = 64**" not in low["markdown"]
    # B_simple (10 responses) against the retained batch at B = 512 (512 responses per step), in the same units
    assert "B = 512: **10** (95% CI 10 to 10) — below the retained batch (~512 responses): the batch is above the " \
           "noise scale" in sec["markdown"]


def test_gp_and_accounting_give_the_same_rn_over_seeds():
    from rlbatch.analysis.accounting import compare, estimate_configuration

    ref = [_eval_run(f"r{s}", 16, 4, 0.0, seed=s, speed=1.0 + 0.05 * s) for s in range(3)]
    cand = [_eval_run(f"c{s}", 64, 4, 0.0, seed=s, speed=0.5 + 0.05 * s) for s in range(3)]
    out = compare(estimate_configuration(cand, 0.4), estimate_configuration(ref, 0.4))
    # reference reaches 0.4 at 8000/speed: speeds 1, 1.05, 1.1; candidate at 8000/speed: 0.5, 0.55, 0.6; a
    # configuration's samples-to-target is the geometric mean over its seeds
    gm = lambda v: float(np.exp(np.mean(np.log(v))))  # noqa: E731
    exp = gm([8000 / v for v in (0.5, 0.55, 0.6)]) / gm([8000 / v for v in (1.0, 1.05, 1.1)])
    assert out["rN"] == pytest.approx(exp)
    lo, hi = out["rN_ci"]
    assert lo < out["rN"] < hi
    assert estimate_configuration(cand, 2.0)["samples_to_target"] is None



def test_b_noise_interval_from_one_run_stays_positive_when_some_steps_estimate_negative():
    """A single run whose per-step B_simple is sometimes <= 0 (|G|^2 estimated negative; found on a 2-trial TRL
    sweep, where it made the noise model raise): a ratio <= 0 counts as larger than any finite value (its |G|^2
    estimate passed zero), so the median of the 30 steps is 70 (16 finite values 40 ... 70, 14 beyond) and the
    interval's lower end is positive."""
    import types

    import pandas as pd

    from rlbatch.analysis.noise_model import b_noise_from_gradients

    vals = [60.0] * 10 + [-40.0, 50.0, -30.0, -60.0, 40.0, -20.0, -50.0, 70.0, -10.0, -45.0] * 2
    m = pd.DataFrame({"noise/b_simple": vals, "samples/retained": np.arange(1, len(vals) + 1) * 64.0})
    bn = b_noise_from_gradients([types.SimpleNamespace(metrics=m)])
    assert bn is not None and bn["value"] == 70.0 and bn["ci"] is not None and bn["ci"][0] > 0


def test_b_noise_from_points_only_at_the_reference_batch_is_none_not_nan():
    """Two configurations at the reference's B (e.g. an async variant of it) give no B_noise to fit: None (the plan
    then falls back to the runs' noise metrics), not NaN (which made noise_model_rn raise in rlbatch plan)."""
    from rlbatch.analysis.noise_model import b_noise_from_points

    assert b_noise_from_points([{"batch_size": 64, "rN": 1.2, "rN_ci": [1.0, 1.4]}], 64) is None
    bn = b_noise_from_points([{"batch_size": 64, "rN": 1.2, "rN_ci": None},
                              {"batch_size": 128, "rN": 1.5, "rN_ci": [1.2, None]}], 64)
    assert bn is not None and bn["value"] > 0


def test_the_knee_is_one_sided_and_needs_its_interval_above_one_over_sqrt2():
    # review finding 10: a steeper drop than 1/sqrt(2) (0.64) is not a knee; a flattening (0.85, +20%) is, but with
    # seeds only when the ratio's interval lies above 1/sqrt(2) (0.71)
    assert not noise.doubling_ratio_flag(0.64)
    assert noise.doubling_ratio_flag(0.85)
    assert not noise.doubling_ratio_flag(0.85, ratio_ci=[0.65, 1.1])
    assert noise.doubling_ratio_flag(0.85, ratio_ci=[0.75, 0.95])
    # the ratio's interval by hand: two seeds each at two batch sizes, logs (0, 0.2) and (-0.2, 0): geometric means
    # e^0.1 and e^-0.1, ratio e^-0.2; Welch's se = sqrt(0.02 / 2 + 0.02 / 2) = 0.1414 with 2 degrees of freedom
    lo, hi = noise.ratio_interval([1.0, np.exp(0.2)], [np.exp(-0.2), 1.0])
    t = 4.302652729911275
    assert lo == pytest.approx(np.exp(-0.2 - t * 0.1414213562), rel=1e-6)
    assert hi == pytest.approx(np.exp(-0.2 + t * 0.1414213562), rel=1e-6)
    assert noise.ratio_interval([1.0], [1.0, 2.0]) is None


def test_a_large_batch_step_spanning_the_window_counts():
    """Researcher finding 11 / issue 56: B = 2048 seeds whose retained samples per step vary log their norm at 1,900
    and 3,900 (seed 0) and 2,100 and 4,200 (seed 1); the small batch ends at 3,000, so the matched window is
    [2,100, 3,000]. Seed 0's second step trained through the whole window (1,900 -> 3,900) and counts (was: no step in
    the window, 1 of its 2 runs); a step ending before the window (1,900) does not."""
    small = synth_run(16, lambda b: 1.0, total=3008)
    big = [Run(meta=make_meta(run_id=f"B2048-s{i}", batch_size=2048, seed=i),
               metrics=pd.DataFrame({"step": [1, 2], "samples/retained": xs, "grad_norm/actor": [0.5, 0.25]}))
           for i, xs in enumerate(([1900, 3900], [2100, 4200]))]
    win = noise.matched_window([small] + big)
    assert win == (2100.0, 3008.0)
    pts = noise.grad_norm_points([small] + big, window=win).set_index("run")
    assert pts.loc["B2048-s0", "n_steps"] == 1 and pts.loc["B2048-s0", "value"] == 0.25
    assert pts.loc["B2048-s1", "n_steps"] == 2  # 2,100 in the window and 4,200's step began at 2,100
    # the small batch: its steps inside the window, and none before it
    assert pts.loc["B16-s0", "n_steps"] == (3008 - 2100) // 16 + 1
