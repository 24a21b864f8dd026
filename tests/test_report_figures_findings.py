"""Researcher tryout findings 11 and 16 (third bullet): the report's gradient-norm and throughput figures, checked
through the functions that build them (their line data and captions, not pixels)."""

import numpy as np
import pandas as pd

from rlbatch.analysis.noise_summary import noise_summary
from rlbatch.analysis.throughput_summary import throughput_summary
from rlbatch.report.sections import noise_section, throughput_section
from rlbatch.runstore import Run, make_meta

LADDER = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def _norm_run(b: int, seed: int, xs, knee: int = 10 ** 9, unlogged=()) -> Run:
    """A run at ``b`` whose steps end at the retained-sample counts ``xs``; its actor norm ~ B^-1/2 up to ``knee``,
    flat beyond, not logged at the steps ending at ``unlogged``."""
    xs = np.asarray(xs, float)
    rng = np.random.default_rng(1000 * seed + b)
    norm = 3.0 * min(b, knee) ** -0.5 * np.exp(rng.normal(0, 0.03, len(xs)))
    norm[np.isin(xs, unlogged)] = np.nan
    m = pd.DataFrame({"step": np.arange(1, len(xs) + 1), "samples/retained": xs, "grad_norm/actor": norm})
    return Run(meta=make_meta(run_id=f"B{b}-G8-sqrt-s{seed}", batch_size=b, seed=seed, lr_rule="sqrt"), metrics=m)


def demo_like_runs(knee: int = 10 ** 9, logged: bool = False) -> list[Run]:
    """The demo's shape (finding 11): 3 seeds at every B; trials stop at the target, so the matched window is short
    (retained samples 2,536 to 3,336). A step counts when the samples it trained on overlap the window, so a step
    that trains through the window is in it; B = 2048's (2,400 -> 3,600) and two of B = 4096's (2,400 -> 4,800) did
    not log the norm, so B = 2048 has no step in the window and B = 4096 one run (its first step, at 2,536).
    With ``logged``: every step logs it (then every batch size has all its runs in the window)."""
    runs = []
    for b in LADDER:
        for s in range(3):
            if b <= 1024:
                end = 3336 + 400 * s  # the first seed stops at the target at 3,336 retained samples
                xs = np.r_[np.arange(b, end, b), end]
            elif b == 2048:
                xs = np.arange(1200, 4800 + 1, 1200)
            else:
                xs = [2536, 5072] if s == 0 else [2400, 4800, 7200]
            unlogged = () if logged else (3600,) if b == 2048 else (4800,) if s else ()
            runs.append(_norm_run(b, s, xs, knee, unlogged))
    return runs


def test_grad_norm_figure_names_its_window_and_the_batch_size_it_lacks():
    runs = demo_like_runs()
    sec = noise_section(noise_summary(runs))
    fit = sec["json"]["actor"]
    assert fit["window"] == [2536.0, 3336.0]
    # the figure: one point per B with a step in the window, B = 2048 not among them, and said missing on it
    ax = sec["figures"]["grad_norm_vs_batch"].axes[0]
    pts = next(ln for ln in ax.get_lines() if ln.get_label() == "actor grad norm")
    assert list(pts.get_xdata()) == [16, 32, 64, 128, 256, 512, 1024, 4096]
    assert "not drawn: B = 2048: no step in the window" in ax.get_xlabel()
    # the caption names the window, the thin point and the missing batch size
    cap = sec["captions"]["grad_norm_vs_batch"]
    assert "retained samples 2,536 to 3,336" in cap
    assert "B = 4096: 1 of its 3 runs in the window" in cap
    assert "missing: B = 2048: no step in the window" in cap
    # the text: never "one run per B" when every B ran 3 seeds; the reason for the missing interval is named
    md = sec["markdown"]
    assert "one run per B" not in md
    assert "B 1024 -> 4096: ratio" in md
    assert "(B = 4096: 1 of its 3 runs in the window: no interval)" in md
    assert "B = 2048: no step in the window (its steps fall before and after it): not in the fit or the figure." in md
    assert "Each run's norm is its mean over retained samples 2,536 to 3,336" in md
    cov = {c["batch_size"]: c for c in fit["coverage"]}
    assert cov[2048] == {"batch_size": 2048, "runs": 3, "in_window": 0}
    assert cov[4096] == {"batch_size": 4096, "runs": 3, "in_window": 1}
    assert cov[64] == {"batch_size": 64, "runs": 3, "in_window": 3}
    # the doublings with 3 runs on both sides keep their interval
    d = {(x["b_from"], x["b_to"]): x for x in fit["doublings"]}
    assert d[(16, 32)]["ratio_ci"] is not None and d[(1024, 4096)]["ratio_ci"] is None


def test_a_step_that_trains_through_the_window_is_in_it():
    """Issue 56 (matched window narrower than one large-B step): with the norm logged at every step, B = 2048's step
    2,400 -> 3,600 and B = 4096's 2,400 -> 4,800 cover the window 2,536-3,336, so every batch size has all its runs
    in it and none is said missing (before: B = 2048 "no step in the window", B = 4096 "1 of its 3 runs")."""
    sec = noise_section(noise_summary(demo_like_runs(logged=True)))
    fit = sec["json"]["actor"]
    assert fit["window"] == [2536.0, 3336.0]
    assert all(c["in_window"] == c["runs"] == 3 for c in fit["coverage"]), fit["coverage"]
    ax = sec["figures"]["grad_norm_vs_batch"].axes[0]
    pts = next(ln for ln in ax.get_lines() if ln.get_label() == "actor grad norm")
    assert list(pts.get_xdata()) == list(LADDER)
    assert "missing" not in sec["captions"]["grad_norm_vs_batch"] and "no step in the window" not in sec["markdown"]
    d = {(x["b_from"], x["b_to"]): x for x in fit["doublings"]}
    assert d[(2048, 4096)]["ratio_ci"] is not None


def test_a_knee_on_a_doubling_without_interval_is_said_to_have_none():
    # the demo's knee (B = 2048 -> 4096, one run of each in the window) was said to have "its interval's lower end
    # above 1/sqrt(2)" because another doubling had an interval
    sec = noise_section(noise_summary(demo_like_runs(knee=1024)))
    assert sec["json"]["actor"]["knee_batch"] == 1024
    md = sec["markdown"]
    assert "its interval's lower end above" not in md
    assert ("B = 4096: 1 of its 3 runs in the window, so one ratio without an interval: a hint, not a measurement"
            in md)


def test_one_run_per_batch_size_is_still_said_so():
    runs = [_norm_run(b, 0, np.arange(b, 4096 + 1, b)) for b in (64, 128, 256, 512)]
    sec = noise_section(noise_summary(runs))
    assert "(one run per B: no interval)" in sec["markdown"]
    cap = sec["captions"]["grad_norm_vs_batch"]
    assert "one run per batch size" in cap and "missing" not in cap
    assert "retained samples 512 to 4,096" in cap


def _timed_run(b: int, seed: int, retained: float, gen_s: float, train_s: float, steps: int = 6,
               tokens: int = 40) -> Run:
    """A run at ``b`` retaining the share ``retained`` of its responses (group filtering), whose update time is
    proportional to the tokens it trains on (the retained responses)."""
    s = np.arange(1, steps + 1)
    kept = retained * b
    dt = gen_s + train_s + 0.01
    m = pd.DataFrame({"step": s, "samples/retained": s * kept, "samples/generated": s * b,
                      "time/gen_s": gen_s, "time/train_s": train_s, "time/reward_s": 0.01, "time/step_s": dt,
                      "time/wall_s": s * dt, "tokens/trained": s * kept * tokens,
                      "tokens/generated": s * b * tokens})
    return Run(meta=make_meta(run_id=f"B{b}-G8-sqrt-s{seed}", batch_size=b, seed=seed, lr_rule="sqrt"), metrics=m)


def throughput_runs() -> list[Run]:
    """Finding 16: group filtering drops more responses at large B (retained share 0.9 at B = 16 down to 0.45 at
    B = 4096), the update is linear in the trained tokens and is most of the step at large B."""
    runs = []
    for k, b in enumerate((16, 32, 64, 128, 256, 512, 1024, 2048, 4096)):
        f = 0.9 - 0.05625 * k
        for s in range(2):
            runs.append(_timed_run(b, s, f, gen_s=0.002 * b ** 0.5, train_s=0.002 + 1e-4 * f * b))
    return runs


def _series(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    return {ln.get_label(): (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
            for ln in ax.get_lines()}


def test_time_figure_parts_never_above_the_whole_step():
    sec = throughput_section(throughput_summary(throughput_runs()))
    ax = sec["figures"]["time_and_throughput_vs_batch"].axes[0]
    lines = _series(ax)
    whole = next(v for k, v in lines.items() if k.startswith("whole step (model"))
    parts = [v for k, v in lines.items() if k.startswith(("generation (", "update (")) and "measured" not in k]
    assert len(parts) == 2
    at = dict(zip(whole[0], whole[1]))
    for xs, ys in parts:
        for x, y in zip(xs, ys):
            assert y <= at[x] * (1 + 1e-9), f"a part ({y:.4g} s) above the whole step ({at[x]:.4g} s) at B = {x:g}"
    # the measured points are the measurements: update at B = 4096 is below the measured step there
    mu = lines["update (measured)"]
    ms = lines["whole step (measured)"]
    assert (mu[1] <= ms[1]).all()
    cap = sec["captions"]["time_and_throughput_vs_batch"]
    assert "split in the fitted phases' proportions" in cap
