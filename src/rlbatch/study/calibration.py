"""Calibration of the decisions: synthetic batch-size studies with a known truth, analysed as ``rlbatch analyze``
analyses logs, and scored against that truth (issue 43; ``benchmarks/calibration.py`` prints the tables).

A study is a ladder of configurations (B = 16 ... 2048 on the square-root rule by default), each with ``seeds``
runs written as run-store directories. Run i of configuration c has

- a learning curve in retained samples x: ``score(x) = y0 + A (1 - exp(-x / (tau rN_c f_i)))`` (``shape="exp"``,
  the demo's measured shape: 0.24 at the start, 0.37 at ~2,700 samples) or a sigmoid in log x
  (``shape="logistic"``, ScaleRL's saturating form), where ``rN_c`` is the configuration's true sample penalty and
  ``f_i = exp(N(0, s_c^2))`` the seed's speed (median 1, log-sd ``s_c``: ``seed_sd``, one number or per B);
- evaluations at 0 and then every ``max(eval_every, B)`` samples at most once per step (the trainer's rule), or every
  ``eval_steps`` optimizer steps (verl's ``test_freq``, TRL's ``eval_steps``), each the mean of ``eval_items``
  Bernoulli items (binomial noise: sd 0.015 at 1,024 items, 0.03 at 256);
- a clock: ``B x cost / gain_c`` seconds per step times a per-run drift ``exp(N(0, d^2))`` (``run_drift``), a
  per-step jitter (``step_jitter``) and, with ``load_step``, a load change part-way through some runs.

Truth per configuration: rN = ``rN_c``, relative throughput = ``gain_c``, relative time = ``rN_c / gain_c``: ratios
of the typical (median) run's values, the accounting's estimand (geometric means over seeds: every random factor is
log-normal with median 1).
Runs go to their budget (``budget`` retained samples), or, with ``stop_hold``, stop after that many evaluations in a
row at or above the target (the demo's and adaptive sweep's stop rule).
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from rlbatch.runstore import Run, make_meta, write_run

#: the demo's curve: 0.24 at the start, 0.48 at the top, 0.37 after ~2,700 retained samples at B0
Y0, AMPLITUDE, TAU, TARGET = 0.24, 0.24, 3500.0, 0.37


@dataclass(frozen=True)
class Scenario:
    """One kind of study (see the module docstring for the model). ``rn`` / ``gain``: true sample penalty and
    throughput gain per batch size (absent: 1); ``seed_sd``: the log-sd of a seed's speed, a number or a function of
    B (pairs (B, sd); others 0.25); ``budget``: retained samples per run; ``eval_every`` / ``eval_steps``: evaluation spacing (samples at most
    once per step, or every N steps); ``eval_items``: items per evaluation (binomial noise); ``tau_scale``: the
    curve's time constant relative to the demo's (longer curves for sparse evaluation); ``run_drift`` /
    ``step_jitter``: log-sd of a run's clock rate and of one step's time; ``load_step``: (share of runs, factor):
    that share of runs has its steps slowed by the factor from half-way on."""

    name: str
    seeds: int = 3
    batches: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048)
    rn: dict[int, float] = field(default_factory=dict)
    gain: dict[int, float] = field(default_factory=dict)
    seed_sd: float | tuple[tuple[int, float], ...] = 0.25
    budget: int = 10240
    eval_every: int = 256
    eval_steps: int | None = None
    eval_items: int = 1024
    shape: str = "exp"
    tau_scale: float = 1.0
    run_drift: float = 0.05
    step_jitter: float = 0.05
    load_step: tuple[float, float] | None = None
    stop_hold: int | None = None
    target: float = TARGET
    null: bool = True
    note: str = ""

    def sd(self, b: int) -> float:
        return float(dict(self.seed_sd).get(b, 0.25) if isinstance(self.seed_sd, tuple) else self.seed_sd)

    def truth(self, b: int) -> dict[str, float]:
        """True rN, relative throughput and relative time of batch ``b`` against the first (the reference)."""
        ref = self.batches[0]
        rn = self.rn.get(b, 1.0) / self.rn.get(ref, 1.0)
        gain = self.gain.get(b, 1.0) / self.gain.get(ref, 1.0)
        return {"rN": rn, "relative_throughput": gain, "relative_time": rn / gain}


def score_curve(x: np.ndarray, scale: float, shape: str = "exp", tau: float = TAU) -> np.ndarray:
    """The noise-free score at ``x`` retained samples of a run whose speed is ``1 / scale`` (scale = rN_c x f_i)."""
    x = np.asarray(x, float) / scale
    if shape == "exp":
        return Y0 + AMPLITUDE * (1.0 - np.exp(-x / tau))
    if shape == "logistic":  # ScaleRL's sigmoid in log samples, passing 0.37 near the exp curve's crossing
        with np.errstate(divide="ignore"):
            return Y0 + 0.26 / (1.0 + (tau * 0.857 / np.maximum(x, 1e-12)) ** 1.3)
    raise ValueError(f"unknown shape {shape!r}")


def _eval_steps(sc: Scenario, b: int, steps: int) -> np.ndarray:
    if sc.eval_steps:
        return np.arange(sc.eval_steps, steps + 1, sc.eval_steps)
    out, mark = [], sc.eval_every
    for s in range(1, steps + 1):
        if s * b >= mark:
            out.append(s)
            while mark <= s * b:
                mark += sc.eval_every
    return np.array(out, int)


def simulate_run(sc: Scenario, b: int, seed: int, rng: np.random.Generator) -> Run:
    """One run of configuration ``b`` (a :class:`Run`, not yet written)."""
    sd = sc.sd(b)
    f = math.exp(rng.normal(0.0, sd))
    scale = sc.rn.get(b, 1.0) * f
    tau = TAU * sc.tau_scale
    steps = int(math.ceil(sc.budget / b))
    ev = _eval_steps(sc, b, steps)
    xs = np.r_[0, ev * b].astype(float)
    p = score_curve(xs, scale, sc.shape, tau)
    score = rng.binomial(sc.eval_items, np.clip(p, 0, 1)) / sc.eval_items
    evsteps = np.r_[0, ev]
    if sc.stop_hold:
        run_ = 0
        for j in range(1, len(score)):
            run_ = run_ + 1 if score[j] >= sc.target else 0
            if run_ >= sc.stop_hold:
                steps = int(evsteps[j])
                score, xs, evsteps = score[: j + 1], xs[: j + 1], evsteps[: j + 1]
                break
    drift = math.exp(rng.normal(0.0, sc.run_drift))
    per_step = b * 0.01 / sc.gain.get(b, 1.0) * drift
    dt = per_step * np.exp(rng.normal(0.0, sc.step_jitter, steps))
    if sc.load_step and rng.random() < sc.load_step[0]:
        dt[steps // 2:] *= sc.load_step[1]
    metrics = pd.DataFrame({"step": np.arange(1, steps + 1), "samples/retained": np.arange(1, steps + 1) * b,
                            "samples/generated": np.arange(1, steps + 1) * b, "time/step_s": dt,
                            "time/wall_s": np.cumsum(dt)})
    evals = pd.DataFrame({"step": evsteps, "samples/retained": xs, "eval/score": score,
                          "eval/n": sc.eval_items})
    lr = 5e-5 * math.sqrt(b / sc.batches[0])
    meta = make_meta(run_id=f"B{b}-G8-sqrt-s{seed}", algorithm="grpo", model="sim", task="sim",
                     prompts_per_step=max(1, b // 8), group_size=8, lr=lr, lr_rule="sqrt",
                     base_batch=sc.batches[0], base_lr=5e-5, seed=seed, backend="synthetic", status="finished",
                     stop_reason="budget spent")
    return Run(meta=meta, metrics=metrics, evals=evals)


def simulate_study(sc: Scenario, study_seed: int) -> list[Run]:
    """All runs of one study of ``sc`` (seeded by the scenario's name and ``study_seed``)."""
    rng = np.random.default_rng([study_seed, sum(map(ord, sc.name))])
    return [simulate_run(sc, b, i, rng) for b in sc.batches for i in range(sc.seeds)]


def write_study(runs: Sequence[Run], out: Path) -> Path:
    """Write ``runs`` as ``out/trials/<run id>`` run directories (what a sweep leaves); returns ``out``."""
    for r in runs:
        write_run(Path(out) / "trials" / r.run_id, r)
    return Path(out)


def analyze_study(out: Path, target: float) -> dict[str, Any]:
    """``rlbatch analyze OUT --target T --format json``'s accounting, in process: the same reader and the same
    :class:`rlbatch.analysis.study.Study`."""
    from rlbatch.analysis.study import Study
    from rlbatch.readers.collect import load_all

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs, _ = load_all([Path(out)])
        return dict(Study.of(runs, target).accounting)


def _inside(ci: Any, v: float) -> bool | None:
    if not ci or ci[0] is None:
        return None
    hi = math.inf if ci[1] is None else ci[1]
    return ci[0] <= v * (1 + 1e-9) and v <= hi * (1 + 1e-9)


def score_study(sc: Scenario, acc: dict[str, Any]) -> dict[str, Any]:
    """Compare one analysed study with its truth. Returns per-configuration records and study-level flags."""
    rows = acc.get("accounting") or []
    ref = acc.get("reference")
    recs = []
    for r in rows:
        b = r.get("batch_size")
        if r.get("run") == ref or b not in sc.batches:
            continue
        t = sc.truth(b)
        v = r.get("verdict")
        called = v in ("faster", "slower", "not reached")  # "not reached" is a rejection (REJECTED)
        true_null = abs(math.log(t["relative_time"])) < 1e-9
        wrong = called and (true_null or (v == "faster") != (t["relative_time"] < 1))
        recs.append({"batch_size": b, "verdict": v, "true_relative_time": t["relative_time"], "null": true_null,
                     "false_call": bool(called and true_null), "wrong_direction": bool(wrong and not true_null),
                     "called_faster": v == "faster", "rN": r.get("rN"),
                     "cover_rN": _inside(r.get("rN_ci"), t["rN"]),
                     "cover_gain": _inside(r.get("relative_throughput_ci"), t["relative_throughput"]),
                     "cover_time": _inside(r.get("relative_time_ci"), t["relative_time"])})
    head = acc.get("headline") or {}
    pick = head.get("pick")
    pick_row = next((r for r in rows if r.get("run") == pick), None)
    pick_truth = sc.truth(pick_row["batch_size"])["relative_time"] if pick_row and pick_row.get("batch_size") else 1
    best_set = head.get("best_set")
    fastest_time = min(sc.truth(b)["relative_time"] for b in sc.batches)
    fastest = {b for b in sc.batches if sc.truth(b)["relative_time"] <= fastest_time * (1 + 1e-9)}
    return {"configs": recs,
            "any_false": any(c["false_call"] or c["wrong_direction"] for c in recs),
            "headline_false_faster": bool(head.get("beats_reference")) and pick_truth >= 1 - 1e-9,
            "best_set_has_fastest": None if best_set is None else any(
                r.get("batch_size") in fastest for r in rows if r.get("run") in best_set),
            "best_set_size": None if best_set is None else len(best_set)}


def analyze_runs(runs: Sequence[Run], target: float) -> dict[str, Any]:
    """The same accounting as :func:`analyze_study` on runs in memory (no files: for the test suite's small
    version; the benchmark goes through the files)."""
    from rlbatch.analysis.study import Study

    return dict(Study.of(list(runs), target).accounting)


def run_one(sc: Scenario, study_seed: int, workdir: Path | None = None, in_memory: bool = False) -> dict[str, Any]:
    """Simulate, write, analyse and score one study (a temporary directory unless ``workdir``; ``in_memory``: no
    files, :func:`analyze_runs`)."""
    runs = simulate_study(sc, study_seed)
    if in_memory:
        return score_study(sc, analyze_runs(runs, sc.target))
    if workdir is not None:
        write_study(runs, workdir)
        return score_study(sc, analyze_study(workdir, sc.target))
    with tempfile.TemporaryDirectory(prefix="rlbatch-cal-") as d:
        write_study(runs, Path(d))
        return score_study(sc, analyze_study(Path(d), sc.target))


def _mean(v: list) -> float | None:
    v = [x for x in v if x is not None]
    return float(np.mean(v)) if v else None


def summarize(sc: Scenario, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The scenario's rates over its studies: ``per_comparison_false`` (null comparisons called faster/slower),
    ``familywise_false`` (studies with any false call or a call in the wrong direction), ``headline_false_faster``,
    coverage of the rN, relative-throughput and relative-time intervals (mean over comparisons, and the worst
    batch size's), the median rN per B, ``power`` (truly faster or slower comparisons called so, in the right
    direction) and ``best_set_coverage`` (studies whose 'may be fastest' set holds the truly fastest)."""
    cfg = [c for r in results for c in r["configs"]]
    nulls = [c for c in cfg if c["null"]]
    alts = [c for c in cfg if not c["null"]]
    by_b: dict[int, list] = {}
    for c in cfg:
        by_b.setdefault(c["batch_size"], []).append(c)

    def cover(key: str) -> tuple[float | None, float | None]:
        per_b = [_mean([c[key] for c in cs]) for cs in by_b.values()]
        per_b = [v for v in per_b if v is not None]
        return _mean([c[key] for c in cfg]), (min(per_b) if per_b else None)

    med = {b: float(np.median([c["rN"] / sc.truth(b)["rN"] for c in cs if c["rN"] is not None]))
           if any(c["rN"] is not None for c in cs) else None for b, cs in sorted(by_b.items())}
    bs = [r["best_set_has_fastest"] for r in results if r["best_set_has_fastest"] is not None]
    return {"scenario": sc.name, "studies": len(results), "seeds": sc.seeds, "null": sc.null, "note": sc.note,
            "per_comparison_false": _mean([c["false_call"] for c in nulls]) if nulls else None,
            "familywise_false": _mean([r["any_false"] for r in results]),
            "headline_false_faster": _mean([r["headline_false_faster"] for r in results]),
            "cover_rN": cover("cover_rN"), "cover_gain": cover("cover_gain"), "cover_time": cover("cover_time"),
            "median_rN_by_B": med,
            "power": _mean([c["called_faster"] if c["true_relative_time"] < 1 else c["verdict"] == "slower"
                            for c in alts]) if alts else None,
            "wrong_direction": _mean([c["wrong_direction"] for c in alts]) if alts else None,
            "best_set_coverage": _mean(bs) if bs else None,
            "best_set_size": _mean([r["best_set_size"] for r in results if r["best_set_size"] is not None])}


def rising(lo: float, hi: float, batches: Sequence[int]) -> tuple[tuple[int, float], ...]:
    """A seed spread rising log-linearly in B from ``lo`` at the smallest batch to ``hi`` at the largest."""
    b0, b1 = math.log(batches[0]), math.log(batches[-1])
    return tuple((b, lo * (hi / lo) ** ((math.log(b) - b0) / (b1 - b0))) for b in batches)


def scenarios() -> list[Scenario]:
    """The benchmark's scenarios (issue 43's list, and issue 44's clock drift and load steps)."""
    base = Scenario("null, 3 seeds")
    bs = base.batches
    return [
        replace(base, name="null, 1 seed", seeds=1),
        replace(base, name="null, 2 seeds", seeds=2),
        base,
        replace(base, name="null, 5 seeds", seeds=5),
        replace(base, name="null, 1 seed, eval sd 0.03", seeds=1, eval_items=256),
        replace(base, name="null, 3 seeds, eval sd 0.03", eval_items=256),
        replace(base, name="null, 3 seeds, every 2 steps", eval_steps=2, tau_scale=4.0, budget=40960,
                note="evaluation every 2 optimizer steps (verl test_freq); curve 4x longer"),
        replace(base, name="null, 1 seed, every 2 steps", seeds=1, eval_steps=2, tau_scale=4.0, budget=40960,
                note="evaluation every 2 optimizer steps; curve 4x longer"),
        replace(base, name="null, 3 seeds, logistic curve", shape="logistic"),
        replace(base, name="null, 3 seeds, B=256 3x noisier", seed_sd=((256, 0.75),), budget=20480,
                note="budget 2x: a 3x noisier configuration's slow seeds would otherwise be censored"),
        replace(base, name="null, 3 seeds, spread rising with B", seed_sd=rising(0.1, 0.5, bs)),
        replace(base, name="null, 3 seeds, censoring", budget=3584,
                note="budget 1.3x the mean samples-to-target: some seeds do not reach it"),
        replace(base, name="null, 3 seeds, stop rule", stop_hold=3, note="runs stop after 3 evaluations >= target"),
        replace(base, name="null, 3 seeds, clock drift and load steps", run_drift=0.15, load_step=(0.3, 1.5)),
        replace(base, name="B=256 2x faster, 3 seeds", gain={256: 2.0}, null=False),
        replace(base, name="B=256 1.4x faster, 3 seeds", gain={256: 1.4}, null=False),
        replace(base, name="B=256 2x faster, 1 seed", seeds=1, gain={256: 2.0}, null=False),
        replace(base, name="B=256 2x faster, 5 seeds", seeds=5, gain={256: 2.0}, null=False),
    ]


class SimulatedRunner:
    """A :class:`rlbatch.study.sequential.Runner` over the simulator: configuration ``B{b}-G8-sqrt`` gets seeds 0,
    1, ... of :func:`simulate_run`, each drawn from its own stream (study seed, B, seed), so a seed added at a later
    look is the same run whatever was added before."""

    def __init__(self, sc: Scenario, study_seed: int):
        self.sc, self.study_seed = sc, study_seed
        self._runs: dict[tuple[int, int], Run] = {}
        self.names = {f"B{b}-G8-sqrt": b for b in sc.batches}

    def ensure(self, wants: dict[str, int]) -> None:
        for config, seeds in wants.items():
            b = self.names[config]
            for i in range(seeds):
                if (b, i) not in self._runs:
                    rng = np.random.default_rng([self.study_seed, sum(map(ord, self.sc.name)), b, i])
                    self._runs[(b, i)] = simulate_run(self.sc, b, i, rng)

    def runs(self) -> list[Run]:
        return [self._runs[k] for k in sorted(self._runs)]

    def retained(self) -> float:
        """Retained samples spent over every run so far."""
        return float(sum(r.metrics["samples/retained"].iloc[-1] for r in self._runs.values()))


def simulate_sequential(sc: Scenario, study_seed: int, **design: Any) -> tuple[Any, "SimulatedRunner"]:
    """One sequential study of ``sc`` on the simulator (:func:`rlbatch.study.sequential.run_sequential`, the
    smallest batch as the reference, ``design``: its keyword options), warnings silenced. Returns the
    :class:`rlbatch.study.sequential.SequentialResult` and the runner (its runs and cost)."""
    from rlbatch.study.sequential import run_sequential

    runner = SimulatedRunner(sc, study_seed)
    names = list(runner.names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_sequential(runner, names, names[0], sc.target, **design), runner


def run_sequential_one(sc: Scenario, study_seed: int, looks: Sequence[int] = (2, 4, 6), futility: float = 1.0,
                       zone: float = 0.2) -> dict[str, Any]:
    """One sequential study of ``sc`` (:func:`rlbatch.study.sequential.run_sequential` on the simulator), scored
    against the truth: false "faster" calls, power for the truly fastest, whether the pick is within ``zone`` of the
    truly fastest, and its cost in runs and retained samples."""
    res, runner = simulate_sequential(sc, study_seed, looks=looks, futility=futility, zone=zone)
    truth = {n: sc.truth(b)["relative_time"] for n, b in runner.names.items()}
    fastest_t = min(truth.values())
    fastest = [n for n, t in truth.items() if t <= fastest_t * (1 + 1e-9)]
    false = [n for n in res.faster if truth[n] >= 1 - 1e-9]
    return {"false_faster": bool(false), "headline_false_faster": res.decided and truth[res.pick] >= 1 - 1e-9,
            "fastest_called": any(n in res.faster for n in fastest) if fastest_t < 1 else None,
            "pick_in_zone": truth[res.pick] <= fastest_t * (1 + zone) + 1e-9,
            "best_set_has_fastest": any(n in res.may_be_fastest for n in fastest),
            "runs": res.runs, "retained": runner.retained(), "decided": res.decided, "stop": res.stop,
            "pick": res.pick, "looks": len(res.looks)}


def simulate_plan(sc: Scenario, plan: dict[str, Any], power: str, studies: int, seed: int = 0,
                  floor: float = 0.07) -> float:
    """Run a "what would decide" plan (one entry of the headline's ``would_decide``, claim "faster") in simulation:
    ``studies`` studies of ``sc``'s batches in which the contender's true relative time is its estimate (the plan's
    assumption) and the per-seed log-sd of time-to-target a draw from the plan's spread posterior (sigma^2 = df
    s^2 / chi2_df, as :func:`rlbatch.analysis.sequential.seeds_for_power` averages over), the contender and the
    reference at the planned seeds for ``power`` ("0.80" / "0.90"), the others at ``sc.seeds``; each analysed as
    ``rlbatch analyze`` does. ``floor``: the log-sd a run has without any seed effect (the evaluation noise at the
    crossing; 0.07 at 1,024 items), taken off the drawn sd to set the scenario's ``seed_sd``. Returns the share of
    studies whose contender is called faster (the realised power)."""
    rng = np.random.default_rng(seed)
    n = int(plan["seeds"][power])
    b = int(plan["batch_size"])
    sig, df = float(plan["sigma"]), plan.get("sigma_df")
    wants = {f"B{x}-G8-sqrt": (n if x in (b, sc.batches[0]) else sc.seeds) for x in sc.batches}
    hits = 0
    for k in range(studies):
        s = sig * math.sqrt(df / rng.chisquare(df)) if df else sig
        sck = replace(sc, name=f"{sc.name} plan {k}", rn={}, gain={b: 1.0 / plan["relative_time"]},
                      seed_sd=math.sqrt(max(s * s - floor * floor, 0.0)))
        runner = SimulatedRunner(sck, seed * 100_003 + k)
        runner.ensure(wants)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc = analyze_runs(runner.runs(), sc.target)
        hits += any(r.get("batch_size") == b and r.get("verdict") == "faster" for r in acc.get("accounting") or [])
    return hits / studies
