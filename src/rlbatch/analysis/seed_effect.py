"""How much of the seed-to-seed spread belongs to the seed itself, when a study ran the same seed ids at every batch
size (issue 52, item 3; statistics review 2, section 4(c)).

When seed s means the same thing at every B (the same data order, the same sampling stream), seed s may be fast or
slow at every B alike. The comparisons (:mod:`rlbatch.analysis.decision`) treat a configuration's seeds as
independent of the others', so a shared seed effect, if there is one, only makes them conservative: it adds the
same amount to both sides of a ratio and cancels in it, while the intervals count it twice. This module measures it:
a two-way analysis without interaction (configuration + seed) of each seed's log samples-to-target over the
configurations that every common seed brought to the target (Montgomery, *Design and Analysis of Experiments*,
randomised complete block design, sec. 4.1):

    log S_cs = mu + a_c + b_s + e_cs,  F = MS_seed / MS_residual on (n - 1, (k - 1)(n - 1)) df,
    share = var_seed / (var_seed + var_residual),  var_seed = max((MS_seed - MS_residual) / k, 0).

On the stored demo sweeps (tests/data/demo_sweep and demo_sweep_cpu, 5 configurations x seeds 0-2) the share is
0.02 (p = 0.37) and 0.00 (p = 0.56): the demo's seeds are not shared beyond chance, and a blocked analysis would
only spend degrees of freedom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

#: the seed effect is called shared below this p-value of its F test
SHARED_P = 0.05


@dataclass(frozen=True)
class SeedEffect:
    """The two-way analysis: ``seeds`` (the common seed ids), ``configs`` (how many configurations), ``share`` (of
    the per-seed variance of log samples-to-target that belongs to the seed, 0-1), ``F``, ``df`` (numerator,
    denominator), ``p`` and ``shared`` (p below :data:`SHARED_P`)."""

    seeds: tuple
    configs: int
    share: float
    F: float
    df: tuple[int, int]
    p: float

    @property
    def shared(self) -> bool:
        return self.p < SHARED_P

    def sentence(self) -> str:
        ids = ", ".join(str(s) for s in self.seeds)
        head = (f"Seeds: the same seed ids ({ids}) ran at {self.configs} configurations; a seed's own effect on log "
                f"samples-to-target explains {self.share:.0%} of the seed-to-seed spread (two-way analysis: F = "
                f"{self.F:.2f} on {self.df[0]} and {self.df[1]} df, p = {self.p:.2f})")
        if self.shared:
            return head + (": the seeds are shared, so the comparisons, which treat each configuration's seeds as "
                           "independent, are conservative here (a seed's effect cancels in a ratio; the intervals "
                           "count it twice).")
        return head + ", so the comparisons treat the seeds as independent."

    def to_json(self) -> dict:
        return {"seeds": list(self.seeds), "configs": self.configs, "share": self.share, "F": self.F,
                "df": list(self.df), "p": self.p, "shared": self.shared}


#: the most distinct seed ids whose subsets are searched for the largest complete block
MAX_SEEDS = 12


def _block(full: dict[str, dict[object, float]]) -> tuple[list[str], list] | None:
    """The largest complete block (configurations x seeds, every cell reached) with at least 3 configurations and
    2 seeds: over every subset of the seed ids (at most :data:`MAX_SEEDS` of them; beyond, the seed sets of single
    configurations and their pairwise intersections), the one with the most cells, ties to more configurations."""
    ids = sorted({s for row in full.values() for s in row}, key=str)
    if len(ids) <= MAX_SEEDS:
        subsets = (frozenset(s for j, s in enumerate(ids) if m >> j & 1) for m in range(1, 1 << len(ids)))
    else:
        sets = [frozenset(r) for r in full.values()]
        subsets = iter(set(sets) | {a & b for a in sets for b in sets})
    best: tuple = ()
    for sub in subsets:
        if len(sub) < 2:
            continue
        members = [c for c, r in full.items() if sub <= set(r)]
        if len(members) >= 3 and (len(members) * len(sub), len(members)) > (
                (len(best[0]) * len(best[1]), len(best[0])) if best else (0, 0)):
            best = (members, sorted(sub, key=str))
    return best or None


def seed_effect(table: Mapping[str, Mapping[object, float | None]]) -> SeedEffect | None:
    """The seed effect of ``table`` (configuration -> {seed id: samples-to-target, None where not reached}), over
    the largest complete block of configurations and seed ids that reached the target (:func:`_block`; a
    configuration with an unreached seed joins only with the seeds it did reach). None without a block of 3
    configurations x 2 seeds, or without residual spread (relative to the values' own)."""
    from scipy import stats

    full = {c: {s: v for s, v in row.items() if v is not None and v > 0} for c, row in table.items()}
    got = _block(full)
    if got is None:
        return None
    members, seeds = got
    m = np.log(np.array([[full[c][s] for s in seeds] for c in members], float))
    k, n = m.shape
    grand = m.mean()
    a = m.mean(axis=1, keepdims=True) - grand
    b = m.mean(axis=0, keepdims=True) - grand
    ms_seed = k * float((b ** 2).sum()) / (n - 1)
    ms_res = float(((m - grand - a - b) ** 2).sum()) / ((k - 1) * (n - 1))
    if ms_res <= 1e-12 * max(float(((m - grand) ** 2).mean()), 1e-300):
        return None  # an exact fit (no residual spread): no F
    f = ms_seed / ms_res
    var_seed = max((ms_seed - ms_res) / k, 0.0)
    return SeedEffect(tuple(seeds), k, var_seed / (var_seed + ms_res), f, (n - 1, (k - 1) * (n - 1)),
                      float(stats.f.sf(f, n - 1, (k - 1) * (n - 1))))


__all__ = ["SHARED_P", "SeedEffect", "seed_effect"]
