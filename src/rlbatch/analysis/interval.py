"""Percentile intervals of replicates: the one definition every estimate's interval uses.

Source: Efron & Tibshirani (1993), the percentile interval: the ``(1 - conf) / 2`` and ``(1 + conf) / 2``
quantiles of the replicates. Replicates of a mean over a few seeds come from :func:`seed_mean_replicates` (Student's
t on the log scale), not from resampling the seeds: resampling two or three seeds gives an interval no wider than
the seeds' own spread, narrower than the truth and narrower with two seeds than with three. Each
configuration's spread is moderated by what the configurations of its comparison say together (:func:`spread_prior`,
Smyth 2004).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

#: Fewest non-NaN replicates an interval is given from (fewer: no interval).
MIN_REPLICATES = 20


def percentile_interval(values: Sequence[float] | np.ndarray, conf: float = 0.95,
                        method: str = "linear") -> tuple[float, float]:
    """``(lo, hi)``: the ``(1 - conf) / 2`` and ``1 - (1 - conf) / 2`` quantiles of ``values`` (a 1-D sequence of
    replicates, at least one), by ``method`` (numpy's quantile methods: ``linear``, ``inverted_cdf``,
    ``nearest``)."""
    q = (1 - conf) / 2
    v = np.asarray(values, float)
    return float(np.quantile(v, q, method=method)), float(np.quantile(v, 1 - q, method=method))


@dataclass(frozen=True)
class Spread:
    """A prior on one quantity's seed-to-seed spread on the log scale: ``s0`` worth ``d0`` degrees of freedom, and
    ``cap``, the most degrees of freedom a configuration's moderated spread may claim (the data the prior was learned
    from: a configuration's own seeds are part of it, not added twice). ``source``: ``seeds`` (Smyth's prior over
    the configurations with two or more seeds, :func:`spread_prior`) or ``ladder`` (the residual spread of the
    configurations around a smooth trend in log B, :func:`ladder_spread`: what a one-seed ladder says about
    run-to-run variability)."""
    d0: float
    s0: float
    source: str = "seeds"
    cap: float = math.inf


#: Level of the check that one configuration's seed spread is not the others' (:func:`hypervariable`)
HYPERVARIABLE_LEVEL = 0.05


@dataclass(frozen=True, eq=False)
class SpreadPrior:
    """What the configurations of one comparison say together about the seed-to-seed spread on the log scale of
    samples-to-target (``S``), time-to-target (``T``) and throughput to the target (``X``), from
    ``n_configurations``. Made by :func:`spread_prior` (with ``members``: each configuration's log values, so that a
    configuration's own prior can leave it out, :meth:`for_config`) or from :func:`ladder_spread`; used by
    :func:`moderated_spread`. ``timing``: the spread of the timing pass's block throughputs (issue 44), pooled over
    the configurations; any of them None where there is nothing to learn it from."""
    S: Spread | None
    T: Spread | None
    X: Spread | None
    n_configurations: int
    members: tuple[tuple[str, tuple[np.ndarray, np.ndarray, np.ndarray]], ...] = ()
    timing: Spread | None = None

    @property
    def source(self) -> str | None:
        return self.S.source if self.S is not None else None

    @property
    def key(self) -> tuple:
        """A hashable value of the prior (its spreads and members), so that two priors learned from the same runs
        are one key of a memo."""
        return (self.S, self.T, self.X, self.n_configurations, self.timing,
                tuple((n, tuple(tuple(float(x) for x in a) for a in v)) for n, v in self.members))

    # the names of the earlier two-quantity prior (S and T)
    S_d0 = property(lambda self: self.S.d0 if self.S else None)
    S_s0 = property(lambda self: self.S.s0 if self.S else None)
    T_d0 = property(lambda self: self.T.d0 if self.T else None)
    T_s0 = property(lambda self: self.T.s0 if self.T else None)

    def for_config(self, name: str | None, q: str) -> Spread:
        """The prior on quantity ``q`` (``S``, ``T`` or ``X``) for configuration ``name``: learned from the other
        configurations (leave-one-out, so its own seeds are not counted twice and an odd one does not shape its own
        prior) when it is a member and three or more others remain; else the whole prior."""
        if q == "timing":
            return self.timing
        i = "STX".index(q)
        whole = getattr(self, q)
        names = [n for n, _ in self.members]
        if whole is None or name not in names or len(names) < 4:
            return whole
        loo = _prior_of([v[i] for n, v in self.members if n != name])
        return whole if loo is None else Spread(loo[0], loo[1], whole.source)


def hypervariable(log_values: Sequence[float] | np.ndarray, prior: Spread,
                  level: float = HYPERVARIABLE_LEVEL) -> bool:
    """Whether a configuration's own seed spread is larger than ``prior`` allows (its variance over the prior's
    beyond the ``1 - level`` quantile of F(k - 1, d0), the prior predictive distribution of a sample variance,
    Smyth 2004 sec. 6). Moderating such a configuration towards the others would understate its spread (one
    configuration 3x noisier than the rest is covered 69-82% of the time, statistics review finding 6), so it keeps
    its own. False with fewer than two values or an infinite d0."""
    from scipy import stats

    v = np.asarray(log_values, float)
    if len(v) < 2 or not math.isfinite(prior.d0) or prior.s0 <= 0:
        return False
    return float(np.var(v, ddof=1)) / prior.s0 ** 2 > float(stats.f.ppf(1 - level, len(v) - 1, prior.d0))


def _trigamma_inverse(x: float) -> float:
    """y with trigamma(y) = x (x > 0), by Newton's method from Smyth (2004), section 6.2."""
    from scipy.special import polygamma

    if x > 1e7:
        return 1.0 / math.sqrt(x)
    if x < 1e-6:
        return 1.0 / x
    y = 0.5 + 1.0 / x
    for _ in range(50):
        tri = float(polygamma(1, y))
        dif = tri * (1.0 - tri / x) / float(polygamma(2, y))
        y += dif
        if -dif / y < 1e-8:
            break
    return y


#: Level at which the spreads of a comparison's configurations are taken to differ (else they are pooled)
HETEROGENEITY_LEVEL = 0.05


def _excess_p_value(excess: float, d: np.ndarray, n_sim: int = 2000) -> float:
    """P(an excess variance of log s^2 at least ``excess``) when every configuration has the same spread: sample
    variances with ``d`` degrees of freedom simulated (a fixed seed: the same answer every time)."""
    from scipy.special import digamma, polygamma

    rng = np.random.default_rng(0)
    s2 = rng.chisquare(np.broadcast_to(d, (n_sim, len(d)))) / d
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    ex = ((e - e.mean(axis=1, keepdims=True)) ** 2).sum(axis=1) / (len(d) - 1) - np.mean(polygamma(1, d / 2))
    return float((ex >= excess).mean())


def _prior_of(groups: Sequence[np.ndarray]) -> tuple[float, float] | None:
    """(d0, s0) of the sample variances of ``groups`` (each >= 2 values) by Smyth's (2004) moments of log s^2;
    groups with zero variance carry no information on log s^2 and are left out. d0 is at most the summed degrees of
    freedom of the groups, and when the variances agree within chance (or d0 would exceed that) the prior is their
    pooled variance with that many degrees of freedom; so too when fewer than three have a positive variance (e.g. a
    throughput identical in every seed). None with fewer than three groups."""
    from scipy.special import digamma, polygamma

    s2 = np.array([np.var(g, ddof=1) for g in groups])
    d = np.array([len(g) - 1 for g in groups], float)
    if len(s2) >= 3 and (s2 > 0).sum() < 3:
        # (nearly) all spreads are exactly 0, e.g. a throughput the same in every seed: nothing to moderate, the
        # pooled variance over all the groups
        total = float(d.sum())
        return total, math.sqrt(float((d * s2).sum()) / total)
    keep = s2 > 0
    s2, d = s2[keep], d[keep]
    if len(s2) < 3:
        return None
    e = np.log(s2) - digamma(d / 2) + np.log(d / 2)
    e_bar = float(e.mean())
    excess = float(((e - e_bar) ** 2).sum() / (len(e) - 1) - np.mean(polygamma(1, d / 2)))
    total = float(d.sum())
    # the prior cannot hold more than the configurations it was learned from: at most their summed degrees of
    # freedom (limma's infinite d0 assumes thousands of genes; a study has a handful of configurations). With a
    # handful of 2-3-seed configurations the moment estimate of the excess is itself noisy (var log s^2 = 4.9 at
    # one degree of freedom): a chance excess would throw away most of the pooled degrees of freedom, so the spreads
    # are pooled unless their excess is beyond chance (HETEROGENEITY_LEVEL, by simulating equal spreads); a single
    # odd configuration is caught separately (:func:`hypervariable`)
    if excess <= 0 or 2.0 * _trigamma_inverse(excess) >= total or \
            _excess_p_value(excess, d) > HETEROGENEITY_LEVEL:
        # the variances differ no more than chance: one common spread, the pooled variance, worth sum(d) df
        return total, math.sqrt(float((d * s2).sum()) / total)
    d0 = 2.0 * _trigamma_inverse(excess)
    return d0, math.exp((e_bar + float(digamma(d0 / 2)) - math.log(d0 / 2)) / 2)


def smyth_prior(groups: Sequence[np.ndarray]) -> tuple[float, float] | None:
    """``(d0, s0)``: Smyth's (2004) prior of the spreads of ``groups`` (log values, each two or more), pooled unless
    they differ beyond chance (:data:`HETEROGENEITY_LEVEL`); None with fewer than three groups."""
    return _prior_of(groups)


def spread_prior(samples: Sequence[Sequence[float]], times: Sequence[Sequence[float]],
                 rates: Sequence[Sequence[float]] | None = None,
                 names: Sequence[str] | None = None) -> SpreadPrior | None:
    """The comparison's prior on the seed spread: ``samples``, ``times`` and ``rates`` (throughput; default
    samples / times) hold one sequence per configuration (its seeds' samples-, time-to-target and throughput, the
    same lengths); only configurations with two or more seeds, all positive, count. None with fewer than three such
    configurations (with a non-zero spread).

    Each configuration's own spread from 2-3 seeds is itself very uncertain (t_{0.975} = 4.3 with 3 seeds), while
    the configurations of one study share most of what makes seeds differ. The empirical Bayes prior of Smyth (2004,
    "Linear models and empirical Bayes methods for assessing differential expression in microarray experiments",
    section 6.2, the moderated t of limma) is estimated from the spread of the configurations' log variances: when
    they differ no more than chance, d0 is the configurations' summed degrees of freedom and s0 their pooled spread
    (the one-way ANOVA pooled variance); when they differ (small batches noisier than large ones), d0 is small and
    each configuration keeps mostly its own. A configuration's moderated degrees of freedom never exceed the summed
    ones (``cap``): its own seeds are already in the prior. ``names``: the configurations' names, kept with their
    values so that each configuration's prior can be learned without it (:meth:`SpreadPrior.for_config`)."""
    if rates is None:
        rates = [list(np.asarray(s, float) / np.asarray(t, float)) for s, t in zip(samples, times)]
    keep = [i for i, (s, t, x) in enumerate(zip(samples, times, rates))
            if len(s) >= 2 and len(s) == len(t) == len(x) and np.all(np.asarray(s, float) > 0)
            and np.all(np.asarray(t, float) > 0) and np.all(np.asarray(x, float) > 0)]
    triples = [(np.log(np.asarray(samples[i], float)), np.log(np.asarray(times[i], float)),
                np.log(np.asarray(rates[i], float))) for i in keep]
    names = [names[i] for i in keep] if names is not None else None
    ps = [_prior_of([p[i] for p in triples]) for i in range(3)]
    if any(p is None for p in ps):
        return None
    cap = float(sum(len(p[0]) - 1 for p in triples))
    S, T, X = (Spread(p[0], p[1], "seeds", cap) for p in ps)
    return SpreadPrior(S=S, T=T, X=X, n_configurations=len(triples),
                       members=tuple(zip(names, triples)) if names is not None else ())


def ladder_spread(log_batch: Sequence[float], values: Sequence[float], seeds: Sequence[int]) -> Spread | None:
    """The seed-to-seed spread a ladder shows by itself: the residual spread of the configurations' mean log
    values ``values`` (one per configuration, e.g. log samples-to-target; ``seeds``: how many runs each mean is of)
    around a smooth trend in ``log_batch`` (least squares, weights = seeds: the variance of a mean of k runs is
    s^2 / k), a quadratic with six or more configurations, a straight line with four or five; None with fewer (no
    residual degrees of freedom to speak of). ``d0`` = configurations - parameters.

    With one run per batch size (what users bring: one verl or TRL log each) this is the only honest source of
    run-to-run variability: evaluation noise alone leaves it out. Configurations that truly depart from a smooth
    trend add to the residuals, so the spread errs wide (conservative), never narrow."""
    x = np.asarray(log_batch, float)
    y = np.asarray(values, float)
    k = np.asarray(seeds, float)
    n = len(x)
    deg = 2 if n >= 6 else 1 if n >= 4 else None
    if deg is None or len(np.unique(x)) <= deg:
        return None
    coef = np.polyfit(x, y, deg, w=np.sqrt(k))
    r = y - np.polyval(coef, x)
    d0 = float(n - deg - 1)
    s0 = math.sqrt(float(np.sum(k * r ** 2)) / d0)
    return Spread(d0, s0, "ladder", d0) if s0 > 0 else None


def moderated_spread(log_values: Sequence[float] | np.ndarray, d0: float, s0: float,
                     cap: float = math.inf) -> tuple[float, float]:
    """``(s, df)``: the moderated standard deviation of ``log_values`` (one configuration's seeds; one seed: the
    prior alone) and its degrees of freedom, ``s^2 = (d0 s0^2 + (k-1) s_own^2) / (d0 + k - 1)``,
    ``df = min(d0 + k - 1, cap)`` (``d0`` inf: ``s0`` with infinite degrees of freedom, the normal). Source: Smyth
    (2004), section 3 (the posterior variance)."""
    v = np.asarray(log_values, float)
    d = max(len(v) - 1, 0)
    if math.isinf(d0):
        return s0, math.inf
    own = float(np.var(v, ddof=1)) if d >= 1 else 0.0
    return math.sqrt((d0 * s0 ** 2 + d * own) / (d0 + d)), min(d0 + d, cap)


def t_draws(n_seeds: int, n_boot: int, rng: np.random.Generator, df: float | None = None) -> np.ndarray | None:
    """``n_boot`` draws of Student's t with ``df`` (default ``n_seeds - 1``) degrees of freedom (shape
    ``(n_boot,)``), shared by every quantity of one configuration so that its samples- and time-to-target move
    together across replicates; None for fewer than two seeds. The draws are the distribution's quantiles at
    ``(i + 0.5) / n_boot`` in a random order: their percentiles are the t quantiles themselves (no Monte Carlo error
    in the heavy tails of 1 or 2 degrees of freedom), and the order pairs them at random with another
    configuration's replicates."""
    if n_seeds < 2 or n_boot < 1:
        return None
    u = uniform_ranks(n_boot, rng)
    return t_quantiles(u, n_seeds - 1 if df is None else df)


def uniform_ranks(n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``(i + 0.5) / n_boot`` for i < n_boot in a random order (shape ``(n_boot,)``): the quantile levels of
    :func:`t_draws`."""
    return (rng.permutation(n_boot) + 0.5) / n_boot


def t_quantiles(u: np.ndarray, df: float) -> np.ndarray:
    """Student's t quantiles at ``u`` (in (0, 1)) with ``df`` degrees of freedom (inf: the normal's): the same
    ``u`` gives comonotone draws at another ``df``, so quantities with different degrees of freedom still move
    together across replicates."""
    from scipy import stats  # on use: `rlbatch --help` imports this module for format_interval (scipy.stats: ~0.8 s)

    return stats.norm.ppf(u) if math.isinf(df) else stats.t.ppf(u, df)


def seed_mean_replicates(values: Sequence[float] | np.ndarray, draws: np.ndarray,
                         s_log: float | None = None) -> np.ndarray:
    """Replicates of the mean of per-seed ``values`` (k >= 2 positive numbers: samples- or time-to-target) whose
    percentile interval is the t interval of the mean on the log scale: ``mean x exp(t_{k-1} x s_log / sqrt(k))``,
    ``s_log`` the sample standard deviation of ``log(values)``, ``draws`` from :func:`t_draws`. It widens as seeds
    shrink (t_{0.975} = 12.7 with 2 seeds, 4.3 with 3, 2.8 with 5) and never crosses 0, so a ratio's interval never
    starts at 0. ``s_log``: a moderated spread instead of the values' own (:func:`moderated_spread`; ``draws``
    then of its degrees of freedom). Values with a zero or negative member: the t interval on the linear scale. Shape
    ``(n_boot,)``.

    Source: the one-sample t interval (Student 1908) of the log of a positive quantity (multiplicative spread)."""
    v = np.asarray(values, float)
    k = len(v)
    if np.all(v > 0):
        se = (np.std(np.log(v), ddof=1) if s_log is None else s_log) / math.sqrt(k)
        return float(v.mean()) * np.exp(np.clip(draws * se, -700.0, 700.0))  # exp(700): beyond any count
    return float(v.mean()) + draws * (np.std(v, ddof=1) / math.sqrt(k))


def bootstrap_interval(reps: Sequence[float] | np.ndarray | None, conf: float = 0.95,
                       method: str = "linear") -> list[float] | None:
    """:func:`percentile_interval` of bootstrap replicates ``reps`` as ``[lo, hi]``, NaN replicates dropped (+inf
    kept: an unbounded end, None in JSON); None without replicates or with fewer than :data:`MIN_REPLICATES`."""
    if reps is None:
        return None
    r = np.asarray(reps, float)
    r = r[~np.isnan(r)]
    if len(r) < MIN_REPLICATES:
        return None
    with np.errstate(invalid="ignore"):
        lo, hi = (float(v) for v in percentile_interval(r, conf, method))
    # a quantile among +inf replicates is +inf (numpy's interpolation gives inf - inf = NaN there): unbounded
    if math.isnan(hi) and np.isposinf(r).any():
        hi = math.inf
    if math.isnan(lo) and np.isposinf(r).any():
        lo = math.inf
    return [lo, hi]


def bound(x: float, down: bool) -> str:
    """A bound rounded away from the claim it supports (statistics review 2, N13: 1.196 is "> 1.19", not "> 1.20"):
    down for a lower bound, up for an upper; the one rounding of bounds on every page (text and table cells)."""
    return _outward(x, ".2f", down)


def _outward(x: float, spec: str | Callable[[float], str], down: bool) -> str:
    """``x`` formatted by ``spec`` with a fixed-point spec (``.2f``) rounded outward (down for a lower end, up for
    an upper), with up to 3 more digits where the rounded value would land on 0 or 1 while ``x`` does not (a
    "slower" whose lower end is 1.003 prints 1.003, never 1.00; a lower end 0.004 prints 0.004, never 0.00)."""
    if callable(spec):
        return spec(x)
    m = re.fullmatch(r"([,_]?)\.(\d+)f", spec)
    if not m:
        return format(x, spec)
    nd = int(m.group(2))
    for d in range(nd, nd + 4):
        q = 10.0 ** d
        v = (math.floor(x * q + 1e-9) if down else math.ceil(x * q - 1e-9)) / q
        if (v == 0.0 and x != 0.0) or (v == 1.0 and x != 1.0):
            continue
        return format(v, f"{m.group(1)}.{d}f")
    return format(x, f"{m.group(1)}.{nd + 3}f")


def format_interval(ci: Any, spec: str | Callable[[float], str] = ".2f", *, sep: str = "–",
                    unbounded: str | None = None, missing: str = "—") -> str:
    """The one text form of an interval ``[lo, hi]``: ``lo{sep}hi`` with each end formatted by ``spec`` (a format
    spec, or a function of the number) and rounded outward (:func:`_outward`: the printed interval holds the
    computed one, and a bound never prints as 0 or 1 unless it is); an upper end that is None or +inf gives
    ``≥ lo`` (or ``lo{sep}{unbounded}`` when the caller names the open end, e.g. ``open``), and ``not measurable``
    when the lower end is not above 0 either (nothing is known); ``< hi`` for an interval open below (lower end
    None, upper finite); ``missing`` when there is no interval (not a pair, a lower end that is not a finite number
    otherwise, or a NaN upper end). Every table cell, sentence and caption that shows an interval takes its text
    from here; callers add their own frame (``" (95% CI ...)"``)."""
    def ok(x: Any) -> bool:
        return isinstance(x, (int, float)) and math.isfinite(x)

    if isinstance(ci, (list, tuple)) and len(ci) == 2 and ci[0] is None and ok(ci[1]):
        return f"< {_outward(ci[1], spec, False)}"  # open below (a ratio to a reference whose own is open above)
    if not isinstance(ci, (list, tuple)) or len(ci) != 2 or not ok(ci[0]):
        return missing
    lo, hi = ci
    if hi is None or (isinstance(hi, (int, float)) and math.isinf(hi) and hi > 0):
        if lo <= 0:
            return "not measurable"
        return f"≥ {_outward(lo, spec, True)}" if unbounded is None else f"{_outward(lo, spec, True)}{sep}{unbounded}"
    return f"{_outward(lo, spec, True)}{sep}{_outward(hi, spec, False)}" if ok(hi) else missing

