"""The one table mapping foreign metric names (verl, TRL, OpenRLHF, W&B exports) onto rlbatch's canonical names.

Canonical names are those of DESIGN.md / :data:`rlbatch.runstore.CANONICAL_METRICS`. Each canonical name lists the
foreign names it may come from, in priority order: when a log carries several of them (verl prints both
``timing_s/step`` and ``time_per_step``), the first present wins. Everything not in the table is kept in the run's
metrics under ``raw/<foreign name>``.

Kinds of entries
- :data:`FOREIGN_NAMES`: value copied as is (after a unit suffix such as verl's ``actor/lr(1e-4)`` is applied).
- :data:`PER_STEP_TO_CUMULATIVE`: a per-step count turned into the canonical cumulative counter by a running sum.
- :data:`TRAIN_TIME_PARTS`: per-step update timings summed into ``time/train_s`` (actor and critic updates).
- :data:`STEP_TIME_PARTS`: timings summed into ``time/step_s`` when the log has no whole-step timer (old verl).
- :data:`EVAL_OVERHEAD_PARTS`: timings subtracted from the step time for ``time/wall_s`` (wall-clock excludes
  evaluation and checkpoint saving, DESIGN.md).
- :data:`EVAL_PATTERNS`: validation scores, one per dataset (each kept as ``eval/score/<dataset>``); ``eval/score``
  is one of them, chosen once per run (:func:`eval_dataset_choice`).
- :data:`VALIDATION_PREFIXES`: names logged only at validation points (``val-aux/...``, ``eval/n_problems``): a
  record with nothing else is an evaluation point, not a training step.
- :data:`TIME_ALTERNATES`: a timing taken from another name where the table's is missing or near 0 (verl's agent
  loop: ``timing_s/generate_async`` when ``timing_s/gen`` is ~0).
"""

from __future__ import annotations

import math
import re

#: canonical name -> foreign names, first present wins.
FOREIGN_NAMES: dict[str, tuple[str, ...]] = {
    "step": ("step", "train/global_step", "global_step", "training/global_step", "_step"),
    "samples/retained": ("samples/retained",),
    "samples/generated": ("samples/generated",),
    "tokens/generated": ("tokens/generated",),
    "tokens/trained": ("tokens/trained", "num_tokens", "train/num_tokens"),  # TRL: cumulative tokens seen
    # verl dynamic sampling (DAPO-style recipes): the whole rollout with its re-sampling rounds, before timing_s/gen
    # (which those recipes overwrite with the last round's); Tinker-style loops: time/sample_s; NeMo-RL: the
    # generation time not hidden behind training (exposed_generation, async) before the plain generation timer
    "time/gen_s": ("time/gen_s", "timing_s/get_batch_rollout_with_filtering", "timing_s/gen", "timing/gen",
                   "train/generate_time", "timing/generate", "time/sample_s", "timing/train/exposed_generation",
                   "exposed_generation", "timing/train/generation", "generation", "perf/rollout_time",
                   # by meaning (issue 24)
                   "gen_time_s", "generation_time_s", "rollout_time_s", "generation_time", "gen_time",
                   "rollout_time", "time/rollout_s", "time/generation_s", "time/generation", "time/rollout",
                   "timing/rollout", "sampling_time", "time/gen"),
    "time/reward_s": ("time/reward_s", "timing_s/reward", "timing/reward", "train/reward_time", "time/score_s",
                      "timing/train/reward_calculation", "reward_calculation", "reward_time_s", "score_time_s"),
    "time/train_s": ("time/train_s", "train/train_time", "timing/train/policy_training", "policy_training",
                     "perf/train_time", "perf/actor_train_time",  # slime: perf/...
                     "update_time_s", "train_time_s", "train_time", "update_time", "time/update_s", "time/update",
                     "training_time", "time/train"),
    "time/step_s": ("time/step_s", "timing_s/step", "timing/step", "perf/time_per_step", "time_per_step",
                    "step_time", "train/step_time", "timing/train/total_step_time", "total_step_time",
                    "perf/step_time", "step_time_s", "iteration_time_s", "time/step", "iteration_time", "iter_time",
                    "time_per_iter", "step_duration_s", "time/total_s", "timing/step_s"),
    "time/wall_s": ("time/wall_s",),
    "time/cpu_s": ("time/cpu_s",),
    "reward/mean": ("reward/mean", "critic/score/mean", "reward", "train/reward", "train/rewards", "rewards/mean",
                    "mean_reward", "train/reward_mean", "objective/scores", "rollout/raw_reward",
                    # by meaning (issue 24): custom loops, SkyRL, mlx-lm, Markdown / HTML tables
                    "reward_mean", "avg_reward", "average_reward", "rewards_mean", "total_reward_mean",
                    "total_rewards_mean", "train/avg_reward", "rollout/reward_mean", "reward/avg_raw_reward",
                    "loss/avg_final_rewards", "env/reward_mean", "train/mean_reward"),
    "reward/std": ("reward/std", "reward_std", "train/reward_std", "critic/score/std", "total_rewards_std",
                   "reward_stdev", "rewards_std"),
    "grad_norm/actor": ("grad_norm/actor", "actor/grad_norm", "grad_norm", "train/grad_norm",
                        "train/actor_grad_norm", "train/policy_grad_norm", "policy/grad_norm", "actor_grad_norm",
                        "policy_grad_norm", "gradient_norm", "grad_norm/policy", "train/gradient_norm"),
    "grad_norm/critic": ("grad_norm/critic", "critic/grad_norm", "train/critic_grad_norm"),
    "noise/grad_sq_small": ("noise/grad_sq_small",),
    "noise/grad_sq_big": ("noise/grad_sq_big",),
    "noise/b_simple": ("noise/b_simple",),
    "noise/b_small": ("noise/b_small",),
    "noise/b_big": ("noise/b_big",),
    "noise/grad_sq_micro": ("noise/grad_sq_micro",),
    "noise/grad_sq_prompt": ("noise/grad_sq_prompt",),
    "noise/b_micro": ("noise/b_micro",),
    "noise/group_size": ("noise/group_size",),
    "noise/between_prompt": ("noise/between_prompt",),
    "noise/within_prompt": ("noise/within_prompt",),
    "lr": ("lr", "actor/lr", "learning_rate", "train/learning_rate", "train/actor_lr", "train/act_lr", "actor_lr",
           "train/lr", "policy_lr", "optim/lr", "lr/actor", "train/lr-pg_0", "lr-pg_0", "train/lr_0"),
    # asynchronous rollouts (issue 17; rlbatch.train.async_rollout). prime-rl's console "Async Level" (policy
    # versions the step's rollouts lag the trainer: the staleness, read as the step's mean) and "Max. Off-Policy
    # Level" (the most weight updates one in-flight rollout went through); verl fully-async's partial-rollout ratio
    # and largest version span of a partial sample
    "rollout/staleness_mean": ("rollout/staleness_mean", "async_level"),
    "rollout/staleness_max": ("rollout/staleness_max",),
    "rollout/version_span_max": ("rollout/version_span_max", "max_off_policy_level",
                                 "fully_async/partial/max_partial_span"),
    "rollout/staleness_token_mean": ("rollout/staleness_token_mean",),
    "rollout/partial_frac": ("rollout/partial_frac", "fully_async/partial/partial_ratio"),
    "time/overlap_s": ("time/overlap_s",),
    "time/gen_busy_s": ("time/gen_busy_s",),
    # a bounded success rate (accuracy, pass@1, win rate, exact match, success rate) before a mean evaluation reward
    # (issue 45): when a log has both, the rate is the score and the reward stays readable with --metric NAME
    "eval/score": ("eval/score", "eval_accuracy", "eval/accuracy", "eval/pass_at_1", "eval/pass@1", "eval_pass_at_1",
                   # by meaning (issue 24): accuracy and pass rate on a validation / test set
                   "eval_acc", "eval/acc", "eval_token_acc", "eval/token_acc", "val/accuracy", "val_accuracy",
                   "val/acc", "val_acc", "test/accuracy", "test_accuracy", "test_acc",
                   "eval/success_rate", "eval_success_rate", "eval/win_rate", "eval_win_rate", "val/win_rate",
                   "eval/exact_match", "eval_exact_match", "val/exact_match",
                   # EasyR1's validation (ray_trainer._validate): its reward function's accuracy part, {key}_reward
                   "val/accuracy_reward",
                   # rewards and scores whose range is not known to be [0, 1]; ``<prefix>_score`` for each
                   # validation prefix a custom loop writes (eval_, val_, test_; field report finding 4)
                   "eval_reward", "eval/reward", "eval_score", "val/score", "val_score", "test/score", "test_score",
                   "eval/mean_reward", "val/reward", "val_reward",
                   # EasyR1: the summed reward of the validation set and its reward function's overall part
                   "val/reward_score", "val/overall_reward"),
}

#: canonical timing -> (foreign name, why): taken instead of the table's value in a row where that value is missing
#: or under a tenth of this one. verl's agent loop logs ``timing_s/gen`` near 0 on some steps (the rollout ran
#: asynchronously) with the real generation time in ``timing_s/generate_async``.
TIME_ALTERNATES: dict[str, tuple[tuple[str, str], ...]] = {
    "time/gen_s": (("timing_s/generate_async", "verl agent loop: timing_s/gen near 0, real time in "
                                               "timing_s/generate_async"),),
}

#: canonical cumulative counter -> per-step foreign counts (running sum).
PER_STEP_TO_CUMULATIVE: dict[str, tuple[str, ...]] = {
    "tokens/trained": ("perf/total_num_tokens", "total_num_tokens"),  # verl: prompt + response tokens this step
    # Tinker-style loops: training datums (responses of groups not skipped for equal rewards) in this step
    "samples/retained": ("n_datums", "n_retained", "num_retained", "retained_samples",
                         "num_retained_samples", "rollout/n_retained"),
    # responses generated in this step, before filtering
    "samples/generated": ("n_generated", "num_generated", "num_generated_samples", "n_responses",
                          "rollout/n_generated"),
}

#: per-step update timings summed into ``time/train_s`` (verl: actor and critic updates).
TRAIN_TIME_PARTS: tuple[str, ...] = ("timing_s/update_actor", "timing_s/update_critic", "timing/update_actor",
                                     "timing/update_critic")

#: timings summed into ``time/step_s`` when no whole-step timer exists (verl before ``timing/step`` existed).
STEP_TIME_PARTS: tuple[str, ...] = ("timing/gen", "timing/reward", "timing/old_log_prob", "timing/ref",
                                    "timing/values", "timing/adv", "timing/update_critic", "timing/update_actor",
                                    "timing/testing")

#: a cumulative wall clock since the run started, logged per record as text or seconds (ms-swift's
#: ``"elapsed_time": "1m 35s"``): a step's time is the difference between consecutive records (its first record's
#: includes start-up). Used only where the log has no step timer.
ELAPSED_NAMES: tuple[str, ...] = ("elapsed_time",)

#: a cumulative wall clock a custom loop writes beside its metrics (``wall_time_s``, ``elapsed_s``, ``elapsed``,
#: ``time_elapsed``, ``train/wall_clock``): seconds since the run started, read as ``time/wall_s`` when its values
#: never decrease (:mod:`rlbatch.readers.clocks`). Only whole names (one optional ``prefix/``) with a seconds unit or
#: none: a phase's timer (``gen_elapsed_s``), minutes or milliseconds, a run's total (``train_runtime``) and a
#: tracker's clock (W&B ``_runtime``, read by its own reader) are not it. Field report finding 3.
WALL_CLOCK = re.compile(r"(?i)^(?:[\w.-]+/)?(?:elapsed|time_elapsed|elapsed_time|wall|wall_?time|wall_?clock|"
                        r"time_since_start)(?:_s|_sec|_secs|_seconds)?$")

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(d|h|m|s)\b")


def duration_s(v: object) -> float | None:
    """A logged duration in seconds: a number, ``"95.2"``, ``"1m 35s"``, ``"10d 9h 50m 13s"`` (ms-swift) or
    ``"1:02:03"`` / ``"01:35"`` (h:m:s, m:s); None when it is none of these (or not finite)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    if not isinstance(v, str):
        return None
    t = v.strip()
    try:
        x = float(t)
        return x if math.isfinite(x) else None
    except ValueError:
        pass
    if re.fullmatch(r"\d+(?::\d{1,2}){1,2}(?:\.\d+)?", t):
        out = 0.0
        for part in t.split(":"):
            out = out * 60 + float(part)
        return out
    parts = _DURATION_PART.findall(t)
    if parts and _DURATION_PART.sub("", t).strip() == "":
        unit = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
        return sum(float(n) * unit[u] for n, u in parts)
    return None


#: timings inside the step timer that are not training: excluded from ``time/wall_s``.
EVAL_OVERHEAD_PARTS: tuple[str, ...] = ("timing_s/testing", "timing/testing", "timing_s/save_checkpoint",
                                        "timing/save_checkpoint", "eval/time_s")
#: the name an evaluation record's own duration is kept under (validation-side: it never makes a training step)
EVAL_TIME = "eval/time_s"

#: validation-score names; group ``ds`` names the dataset. First pattern that matches a name wins.
EVAL_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"^val-core/(?P<ds>.+)/[^/]+/mean@\d+$"),          # verl >= 0.3: val-core/<source>/<var>/mean@N
    re.compile(r"^(?:val/)?test_score/(?P<ds>.+)$"),             # verl <= 0.2: val/test_score/<source>
    re.compile(r"^eval/(?P<ds>.+)_pass1$"),                      # OpenRLHF: eval/<dataset>_pass1
    re.compile(r"^eval_(?P<ds>.+)_pass1$"),
)

#: prefixes of names logged only at validation points (verl ``val-aux/...``, ``val-core/...``; generic ``eval/...``):
#: a record whose only values carry them is an evaluation point, never a training step.
VALIDATION_PREFIXES: tuple[str, ...] = ("val-", "val/", "eval/", "eval_", "test/", "test_score", "validation/")

#: metrics of the canonical table that live in ``eval.jsonl`` rather than ``metrics.jsonl``.
EVAL_CANONICAL = ("eval/score",)

#: the leading names of FOREIGN_NAMES["eval/score"] that are bounded success rates (the rest are rewards/scores)
SUCCESS_RATE_WORDS = re.compile(r"(?i)(?:^|[/_])(?:acc|accuracy|token_acc|pass_at_1|pass@1|success_rate|win_rate|"
                                r"exact_match)$")

# inverse lookup: foreign -> (canonical, priority)
_INVERSE: dict[str, tuple[str, int]] = {}
for _canon, _names in FOREIGN_NAMES.items():
    for _i, _n in enumerate(_names):
        _INVERSE.setdefault(_n, (_canon, _i))

_UNIT_SUFFIX = re.compile(r"^(?P<name>.+?)\((?P<unit>[0-9.eE+-]+)\)$")


def split_unit(name: str) -> tuple[str, float]:
    """``"actor/lr(1e-4)"`` -> ``("actor/lr", 1e-4)``: old verl printed some values in units given in the name."""
    m = _UNIT_SUFFIX.match(name)
    if m:
        try:
            return m.group("name"), float(m.group("unit"))
        except ValueError:
            pass
    return name, 1.0


#: per-step timers by meaning, for names the table does not list (custom loops): a phase word, then a unit word,
#: as one name (``rollout_seconds``, ``gen_time_sec``) or as the last two parts of a path
#: (``.../policy_generation/duration_avg_s``). Extremes and spreads (``_max``, ``_std``) and cumulative clocks
#: (``elapsed``, ``total_time`` of a run) are not per-step timers and are left alone.
_PHASES: tuple[tuple[str, str], ...] = (
    ("time/gen_s", r"gen|generate|generation|rollouts?|sample|sampling|decode|decoding|inference|vllm"),
    ("time/reward_s", r"rewards?|scoring|verify|verifier|judge|grading"),
    ("time/train_s", r"train|training|update|updates|optimizer|optim|learn|learner|backward|policy_update|"
                     r"train_step"),
    ("time/step_s", r"step|iteration|iter|cycle|loop"),
)
_TIME_UNIT = r"(?:time|times|seconds|secs|sec|s|duration|duration_s|duration_avg_s|duration_mean_s|time_s|time_sec|" \
             r"wall_s|wall_time)"
_PHASE_TIME = [(canon, re.compile(r"(?i)^(?:[\w./-]*?[/_])?(?:%s)[_/ ]%s$" % (words, _TIME_UNIT)))
               for canon, words in _PHASES]
_NOT_PER_STEP = re.compile(r"(?i)(?:^|[_/])(?:max|min|std|p\d+|count|pct|percent|ratio|frac|elapsed|remaining|eta|"
                           r"per_token|per_sample|tokens?|throughput|mfu|eval|val|test|validation)(?:[_/]|$)")


def timing_meaning(name: str) -> str | None:
    """The canonical per-step timer a name means by its words (:data:`_PHASES`), or None: ``rollout_seconds`` ->
    ``time/gen_s``, ``step_seconds`` -> ``time/step_s``, ``main_perf/.../policy_generation/duration_avg_s`` ->
    ``time/gen_s``. Used only for names the table does not list."""
    n = str(name)
    if _NOT_PER_STEP.search(n):
        return None
    parts = n.split("/")
    tail = "_".join(parts[-2:]) if len(parts) >= 2 and re.fullmatch(r"(?i)%s" % _TIME_UNIT, parts[-1]) else parts[-1]
    for canon, pat in _PHASE_TIME:
        if pat.match(tail):
            return canon
    return None


def canonical_for(name: str, user_map: dict[str, str] | None = None) -> tuple[str, int] | None:
    """The canonical name a foreign ``name`` maps to, with its priority (0 = preferred), or None.

    ``user_map`` (from ``--map foreign=canonical``) takes precedence over the table, with priority -1; a timer the
    table does not list is placed by its words (:func:`timing_meaning`), after every name the table lists.
    """
    if user_map and name in user_map:
        return user_map[name], -1
    hit = _INVERSE.get(name)
    if hit is not None:
        return hit
    t = timing_meaning(name)
    return (t, 1000) if t is not None else None


def step_column(cols: list[str], user_map: dict[str, str] | None = None) -> str | None:
    """The column of ``cols`` that numbers the steps: the one ``--map NAME=step`` names, else the first of
    ``FOREIGN_NAMES["step"]`` present; None when there is none (records are then numbered in file order)."""
    user = [k for k, v in (user_map or {}).items() if v == "step" and k in cols]
    return user[0] if user else next((c for c in FOREIGN_NAMES["step"] if c in cols), None)


def eval_dataset(name: str) -> str | None:
    """The dataset a validation-score name refers to (``val-core/openai/gsm8k/reward/mean@1`` -> ``openai/gsm8k``),
    or None when ``name`` is not a per-dataset validation score."""
    for pat in EVAL_PATTERNS:
        m = pat.match(name)
        if m:
            return m.group("ds")
    return None


def eval_dataset_choice(by_step: dict[int, dict[str, float]]) -> tuple[str | None, list[str]]:
    """The validation dataset whose score is ``eval/score`` when a log has several (and no direct score), chosen
    once per run: among the datasets evaluated at the most steps, the first in name order (case-folded), so the
    curve never switches benchmark from one evaluation to the next, and a verl console and its W&B summary, which
    list the datasets in different orders, give the same one. Returns ``(chosen, the others)``; ``(None, [])``
    without per-dataset scores."""
    counts: dict[str, int] = {}
    for vals in by_step.values():
        for ds in {eval_dataset(n) for n in vals} - {None}:
            counts[ds] = counts.get(ds, 0) + 1
    if not counts:
        return None, []
    order = sorted(counts, key=lambda d: (-counts[d], d.casefold(), d))
    return order[0], sorted(order[1:], key=lambda d: (d.casefold(), d))


def is_eval_name(name: str, user_map: dict[str, str] | None = None) -> bool:
    c = canonical_for(name, user_map)
    return (c is not None and c[0] in EVAL_CANONICAL) or eval_dataset(name) is not None


def is_validation_side(name: str, user_map: dict[str, str] | None = None) -> bool:
    """True for validation scores and every other name logged only at validation points (:data:`VALIDATION_PREFIXES`;
    ``val-aux/num_turns/mean``, ``eval/n_problems``): such names never make a record a training step."""
    if is_eval_name(name, user_map):
        return True
    c = canonical_for(name, user_map)
    if c is not None and user_map and name in user_map:
        return False  # the user mapped it onto a training metric
    return str(name).startswith(VALIDATION_PREFIXES)


#: a learning rate written into a run name: ``lr1.5e-5``, ``lr_3e-5``, ``lr=0.0001`` (the token ``lr`` then a number)
_LR_TOKEN = re.compile(r"(?:^|[^a-z0-9])lr[_\-=]?(?P<v>\d+(?:\.\d+)?(?:e-?\d+)?)(?![\d.x×])", re.I)
#: a number in scientific notation (``3e-5``, ``1.5e-06``) standing alone in a name
_SCI = re.compile(r"(?:^|[^a-z0-9.])(?P<v>\d+(?:\.\d+)?e-\d+)(?![\d.])", re.I)


def lr_in_name(name: str) -> tuple[float, str] | None:
    """The learning rate a run name states, with how it was read, or None: ``lr`` followed by a number
    (``no_baseline_lr1.5e-5`` -> 1.5e-5), or, in a name holding the token ``lr`` elsewhere, its one number in
    scientific notation (``lr_sweep_3e-5`` -> 3e-5: an LR sweep names each run by its rate). Values outside
    (0, 1) are not learning rates (None)."""
    m = _LR_TOKEN.search(name)
    how = "lr followed by a number"
    if m is None and re.search(r"(?:^|[^a-z0-9])lr(?:[^a-z0-9]|$)", name, re.I):
        sci = _SCI.findall(name)
        if len(sci) == 1:
            m, how = _SCI.search(name), "the one number in scientific notation of a name holding 'lr'"
    if m is None:
        return None
    v = float(m.group("v"))
    return (v, how) if 0 < v < 1 else None
