"""What would decide: for an undecided comparison, the seeds that would show a contender faster than the reference.

Input: the configurations' estimates (:func:`rlbatch.analysis.accounting.estimate_configuration`: the relative
time's point and the per-seed log-sd ``spread_sd`` with its df) and the :class:`rlbatch.analysis.decision.Decision`
over them. For each contender (a member of "may be fastest" measured to the target whose estimated relative time is
below 1), the fixed number of seeds n per configuration (the contender and the reference) whose one-sided
simultaneous test (Dunnett 1955, over the comparison's configurations, at the decision's ``ALPHA_FASTER``) calls it
faster with probability 0.8 and 0.9 **if its true relative time is the estimate** (a planning assumption: the
smallest of several estimates is optimistic, so the stated power is an upper end for the pick), with the spread's
uncertainty averaged over (the power at the spread's posterior, :func:`rlbatch.analysis.sequential.seeds_for_power`).
A contender whose estimate is within the indifference zone of 1 (:data:`ZONE`) gets no seed count: no feasible
number of seeds separates it (a 10% difference needs tens of seeds at the spreads measured so far).

When no contender's estimate is below 1 (the reference is the best estimate), what decides is the others shown
slower, leaving the reference alone in "may be fastest": each member of the set gets the seeds whose one-sided
simultaneous test at the decision's ``ALPHA_SLOWER`` calls it slower at its estimate (``claim="slower"``), the
nearest one being what bounds the cost.

A study with no spread to plan by (one seed per configuration and too few configurations for a ladder spread) is
told the least that measures one: two seeds at three configurations (statistics review 2, N2).

Sources: statistics review 2, section 4 (sequential allocation, the power of the one-sided test); Dunnett (1955);
Jennison & Turnbull (2000), ch. 2 (sample size for a given power).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from rlbatch.analysis.interval import bound
from rlbatch.analysis.results import at_most_only

#: relative times within [1 / (1 + ZONE), 1 + ZONE] of the reference: not worth seeds (the indifference zone)
ZONE = 0.10
#: the powers planned for
POWERS = (0.8, 0.9)
#: the most seeds per configuration suggested
MAX_SEEDS = 30


@dataclass(frozen=True)
class SeedPlan:
    """One contender's plan: ``config`` (its name, B ``batch_size``), its estimated ``relative_time`` and the seeds
    it and the reference have now (``seeds_now``, ``reference_seeds``); ``seeds`` {power: seeds per configuration
    needed, None beyond :data:`MAX_SEEDS`}; ``sigma`` / ``sigma_df``: the per-seed log-sd of time-to-target planned
    with and its degrees of freedom; ``reason``: why there is no count (within the zone, no spread); ``claim``: "faster" (the contender shown faster than the
    reference) or "slower" (shown slower, so that the reference alone may be fastest)."""

    config: str
    batch_size: int | None
    relative_time: float | None
    seeds_now: int
    reference_seeds: int
    seeds: dict[float, int | None]
    sigma: float | None
    sigma_df: float | None
    reason: str = ""
    claim: str = "faster"
    bounded: bool = False  # relative_time is an upper bound (every seed at the target by its first evaluation)

    def more_runs(self, power: float) -> int | None:
        """Runs to add for ``power``: the contender's and the reference's seeds up to the planned count."""
        n = self.seeds.get(power)
        if n is None:
            return None
        return max(0, n - self.seeds_now) + max(0, n - self.reference_seeds)

    def sentence(self) -> str:
        """The plan in words."""
        name = f"B={self.batch_size}" if self.batch_size else self.config
        if self.reason:
            return f"{name}: {self.reason}"
        parts = []
        for p in POWERS:
            n = self.seeds.get(p)
            parts.append(f"{p:.0%}: more than {MAX_SEEDS} seeds" if n is None else
                         f"{p:.0%}: {n} seeds each ({self.more_runs(p)} more runs)")
        df = f", {self.sigma_df:.0f} df" if self.sigma_df and math.isfinite(self.sigma_df) else ""
        what = "" if self.claim == "faster" else " shown slower than the reference"
        rel = f"at most {bound(self.relative_time, False)}" if self.bounded else f"{self.relative_time:.2f}"
        return (f"{name}{what} ({rel}x the reference's time-to-target) and the reference with "
                f"{'; '.join(parts)}, at a per-seed log-sd of {self.sigma:.2f}{df} (its uncertainty averaged over)")


def _sigma(e: Mapping[str, Any]) -> tuple[float | None, float | None]:
    sd, df = e.get("spread_sd") or {}, e.get("spread_df") or {}
    for q in ("T", "S"):
        if sd.get(q):
            return float(sd[q]), (float(df[q]) if df.get(q) else None)
    return None, None


def plan_seeds(ests: Mapping[str, Mapping[str, Any]], reference: str | None, members: Sequence[str],
               comparisons: int, alpha: float, alpha_slower: float | None = None) -> tuple[SeedPlan, ...]:
    """:class:`SeedPlan` per contender among ``members`` (the "may be fastest" set) against ``reference``, for a
    comparison of ``comparisons`` configurations besides the reference at familywise ``alpha`` of "faster" claims.
    Contenders by their estimated relative time, the fastest first. When no member's estimate is below the
    reference's and ``alpha_slower`` is given, the members' plans to be shown slower at that level instead, the
    nearest first. Empty without a reference."""
    from rlbatch.analysis.sequential import seeds_for_power

    if reference is None or reference not in ests:
        return ()
    ref = ests[reference]
    t_ref = ref.get("time_to_target_s")
    k_ref = int(ref.get("n_seeds") or 0)
    if not t_ref:
        return ()
    rels = {n: ests[n]["time_to_target_s"] / t_ref for n in members
            if n != reference and ests[n].get("reached") and ests[n].get("time_to_target_s")}
    # a member known only by its upper bound (N1) is planned at that bound: its true time is no larger, so the
    # stated power is a lower end for it (the decision picks it at that bound too)
    bounded = {n for n in members if n != reference and n not in rels and at_most_only(ests[n])
               and ests[n].get("time_to_target_at_most")}
    rels.update({n: ests[n]["time_to_target_at_most"] / t_ref for n in bounded})
    claim = "faster" if any(r < 1 for r in rels.values()) or alpha_slower is None else "slower"
    out = []
    for n, rel in rels.items():
        e = ests[n]
        if (rel >= 1) == (claim == "faster"):
            continue
        k = int(e.get("n_seeds") or 0)
        sigma, df = _sigma(e)
        if sigma is None and n in bounded:  # its seeds have no times of their own to spread: the reference's spread
            sigma, df = _sigma(ref)
        base = dict(config=n, batch_size=e.get("batch_size"), relative_time=rel, seeds_now=k, reference_seeds=k_ref,
                    sigma=sigma, sigma_df=df, claim=claim, bounded=n in bounded)
        if 1 / (1 + ZONE) <= rel <= 1 + ZONE:
            out.append(SeedPlan(**base, seeds={}, reason=(
                f"{rel:.2f}x the reference's time, within the {ZONE:.0%} indifference zone: no feasible number of "
                "seeds separates it")))
            continue
        if sigma is None:
            out.append(SeedPlan(**base, seeds={}, reason=(
                "no seed-to-seed spread to plan by: run a second seed of it, of the reference and of one more "
                "configuration (distinct seeds), which measures one")))
            continue
        sdf = df if df is not None and math.isfinite(df) and df > 0 else None
        effect, level = (math.log(rel), alpha) if claim == "faster" else (-math.log(rel), alpha_slower)
        seeds = {p: seeds_for_power(effect, sigma, p, n_configs=comparisons + 1, alpha=level,
                                    max_seeds=MAX_SEEDS, sigma_df=sdf) for p in POWERS}
        out.append(SeedPlan(**base, seeds=seeds))
    return tuple(sorted(out, key=lambda p: p.relative_time or 1.0))  # the fastest, or the nearest slower, first


#: the line for a study with no spread at all (every configuration one seed, too few for a ladder)
NO_SPREAD_PLAN = ("No seed-to-seed spread to judge or plan by: run a second seed (a distinct seed, not the same one at "
                  "every batch size) of the reference and of two other configurations; that measures the spread, and "
                  "the next analysis says how many seeds would decide.")


def sentence(plans: Sequence[SeedPlan]) -> str:
    """The headline line: ``What would decide (...)``; empty when there is no plan."""
    if not plans:
        return ""
    if plans[0].claim == "slower":
        return ("What would decide (the reference is the best estimate: the others shown slower, a one-sided "
                "simultaneous test with the stated power if each one's true relative time is its estimate; the "
                "nearest bounds the cost): " + "; ".join(p.sentence() for p in plans[:3]) + ".")
    return ("What would decide (a one-sided simultaneous test calling it faster with the stated power, if its true "
            "relative time is its estimate; the pick's estimate is optimistic, so read the counts as the least "
            "that may do): " + "; ".join(p.sentence() for p in plans[:3]) + ".")
