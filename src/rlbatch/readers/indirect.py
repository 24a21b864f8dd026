"""P and G that a log shows only indirectly (issue 45, kind 8): inferred from per-step statistics whose values are
fractions with a fixed denominator, and only where the inference is unambiguous.

Two kinds of evidence, as TRL's ``GRPOTrainer`` and ms-swift log them per step:

- **completions per step N** (= P x G): a mean over the step's completions of whole numbers
  (``completions/mean_length``: tokens) or a share of them (``completions/clipped_ratio``) is a multiple of 1/N. N is
  the smallest number that makes every logged value whole, provided that (a) the run has at least
  :data:`MIN_STEPS` steps, so that a batch k times as large would have shown these values with chance at most
  k^-MIN_STEPS (below 1 in 1,000 for k = 2), and (b) the values are not merely rounded to a decimal grid (a log that
  prints 3 decimals makes every value a multiple of 1/1000: the chance that MIN_STEPS rounded values all fall on
  multiples of 1/N must be below 1 in 1,000,000).
- **prompts per step P**: a share of the step's prompt groups (``frac_reward_zero_std``: groups whose rewards do not
  vary) is a multiple of 1/P. P is the smallest denominator that makes every value whole, taken only when at least
  :data:`MIN_STEPS` values lie strictly between 0 and 1 (a share of 0 or 1 says nothing about P; a P twice as large
  would have shown only even counts with chance about 2^-MIN_STEPS) and P divides N.

Both only where the run is logged at every step: a trainer that logs every k steps (TRL's ``logging_steps``)
averages each statistic over the k steps, which multiplies both denominators by k.

G = N / P. Where the log states G (or P), only N is inferred and the other follows. The inference and its evidence
are one note, shown by ``rlbatch inspect`` as the source of P and G; ``--set RUN:prompts_per_step=...`` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlbatch.runstore import Run, RunMeta, make_meta

#: the start of the note of an inferred P and G (dropped when the user sets them with --set)
NOTE_START = "P = "
#: the fewest steps (or share values strictly between 0 and 1) an inference rests on
MIN_STEPS = 10
#: the largest batch considered
MAX_N = 4096
#: per-completion means and shares over a step's completions (denominator N), as logged (``raw/`` kept columns)
COMPLETION_MEANS = ("completions/mean_length", "completions/clipped_ratio", "completion_length")
#: shares over a step's prompt groups (denominator P)
GROUP_SHARES = ("frac_reward_zero_std",)


@dataclass
class Inferred:
    """P, G (either may be None when not inferred) and N = P x G, with the note that says how."""

    prompts_per_step: int | None
    group_size: int | None
    completions_per_step: int
    note: str
    #: one line per field for ``inspect``'s config table (``prompts_per_step``, ``group_size``, ``batch_size``)
    sources: dict[str, str]


def _column(m: pd.DataFrame, name: str) -> np.ndarray | None:
    for c in (name, f"raw/{name}"):
        if c in m.columns:
            v = pd.to_numeric(m[c], errors="coerce").to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            return v if len(v) else None
    return None


def _whole(values: np.ndarray, n: int) -> bool:
    x = values * n
    return bool(np.all(np.abs(x - np.round(x)) <= 1e-6 * np.maximum(1.0, np.abs(x))))


def smallest_denominator(values: np.ndarray, limit: int) -> int | None:
    """The smallest n in 1..limit for which every value x n is a whole number (to 1e-6), or None."""
    for n in range(1, limit + 1):
        if _whole(values, n):
            return n
    return None


def _decimal_grid(values: np.ndarray) -> int | None:
    """The coarsest decimal grid 10^-d (d <= 6) every value lies on: 10^d, or None."""
    for d in range(0, 7):
        if _whole(values, 10 ** d):
            return 10 ** d
    return None


def completions_per_step(m: pd.DataFrame) -> tuple[int, str] | None:
    """N from the per-completion means (see the module's rules): ``(N, evidence)`` or None."""
    found = []
    for name in COMPLETION_MEANS:
        v = _column(m, name)
        if v is None or len(v) < MIN_STEPS:
            continue
        n = smallest_denominator(v, MAX_N)
        if n is None or n < 2:
            continue
        grid = _decimal_grid(v)
        if grid is not None and grid % n == 0 and (n / grid) ** len(v) > 1e-6:
            continue  # rounded to `grid`: multiples of 1/n by the rounding, not by the batch
        found.append((n, name, len(v)))
    if not found:
        return None
    ns = {n for n, _, _ in found}
    if len(ns) > 1:
        big = max(ns)
        if any(big % n for n in ns):
            return None  # the statistics disagree: no inference
        found = [f for f in found if f[0] == big]
    n, name, k = found[0]
    return n, f"{name} x {n} is a whole number at all {k} steps, and no smaller number makes it one"


def prompts_per_step(m: pd.DataFrame, n: int) -> tuple[int, str] | None:
    """P from a share of prompt groups (see the module's rules), a divisor of ``n``: ``(P, evidence)`` or None."""
    for name in GROUP_SHARES:
        v = _column(m, name)
        if v is None:
            continue
        inside = v[(v > 1e-9) & (v < 1 - 1e-9)]
        if len(inside) < MIN_STEPS:
            continue
        p = smallest_denominator(v, n)
        if p is None or p < 2 or n % p:
            continue
        return p, (f"{name} takes only multiples of 1/{p} ({len(inside)} of {len(v)} steps strictly between 0 "
                   f"and 1)")
    return None


def infer(m: pd.DataFrame, prompts: int | None, group: int | None) -> Inferred | None:
    """P and G from the run's per-step metrics ``m`` where the log states neither (or one of them: ``prompts``,
    ``group``), or None when the evidence is missing or ambiguous."""
    steps = pd.to_numeric(m["step"], errors="coerce").to_numpy(dtype=float) if "step" in m.columns else np.array([])
    if len(steps) < MIN_STEPS or not np.all(np.diff(steps) == 1):
        return None  # logged every k > 1 steps, a trainer averages over k steps: the denominators are k x N, k x P
    got = completions_per_step(m)
    if got is None:
        return None
    n, why_n = got
    head = f"completions per step N = {n} ({why_n})"
    if prompts is not None or group is not None:
        known, name = (prompts, "P") if prompts is not None else (group, "G")
        if n % known:
            return None
        other = n // known
        p, g = (known, other) if name == "P" else (other, known)
        field = "group_size" if name == "P" else "prompts_per_step"
        return Inferred(p, g, n, f"P = {p}, G = {g} inferred: {head}; {name} = {known} as stated, so "
                                 f"{'G' if name == 'P' else 'P'} = {n} / {known} = {other}",
                        {field: f"inferred: N / {name} = {n} / {known} (N from {why_n.split(' x ')[0]}; see notes)",
                         "batch_size": f"inferred: N = {n} completions per step (see notes)"})
    got_p = prompts_per_step(m, n)
    if got_p is None:
        return None
    p, why_p = got_p
    g = n // p
    if g < 2:
        return None
    return Inferred(p, g, n, f"P = {p}, G = {g} inferred (the log states neither): {head}; {why_p}: P = {p}; "
                             f"G = N / P = {g}. Override with --set RUN:prompts_per_step=... "
                             f"--set RUN:group_size=... if this is wrong",
                    {"prompts_per_step": f"inferred: {why_p.split(' (')[0]} (see notes)",
                     "group_size": f"inferred: N / P = {n} / {p} (N from {why_n.split(' x ')[0]}; see notes)",
                     "batch_size": f"inferred: N = {n} completions per step (see notes)"})



def apply(run: Run) -> RunMeta:
    """P and G inferred for ``run`` (:func:`infer`) set on its metadata, with the inference as their source in
    ``config_sources`` and as a note; the metadata unchanged when nothing is inferred. Returns the metadata."""
    got = infer(run.metrics, run.meta.prompts_per_step, run.meta.group_size)
    if got is None:
        return run.meta
    data = run.meta.model_dump()
    data.update(prompts_per_step=got.prompts_per_step, group_size=got.group_size, batch_size=None,
                rollout_batch_size=None)
    data["config_sources"] = {**(data.get("config_sources") or {}), **got.sources}
    run.meta = make_meta(f"the batch inferred for run {run.run_id!r}", **data)
    run.notes[:] = [n for n in run.notes if not (n.startswith(NOTE_START) and " inferred" in n)] + [got.note]
    return run.meta
