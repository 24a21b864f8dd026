"""Record organisation, the second stage (:mod:`rlbatch.readers.extract` gives the pipeline): which counter is the
step (:func:`counters_in`), which evaluation name is the score (:func:`eval_score_name`), and :func:`organize`, which
turns scanned records into training rows, evaluation rows and a run-level config; P and G read off per-step
counts (:func:`batch_from_steps`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from rlbatch.readers import names as N
from rlbatch.readers.common import to_count, to_float
from rlbatch.readers.discover import ConfigFound
from rlbatch.readers.linescan import (AUX_SCORE, EVAL_WORDS, NOT_SCORE, OPTIMIZER_COUNTERS, OTHER_COUNTERS, RATE_NAMES,
                                      REWARD_WORDS, ROLLOUT_COUNTER, ROLLOUT_COUNTERS, SCORE_WORDS, Record, is_counter,
                                      is_rollout_counter)


def counters_in(records: Iterable[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(optimizer counter, rollout counter) of a file's records (dicts of values): of each family, the counter in
    the most records (ties: the more specific name, :data:`OPTIMIZER_COUNTERS` / :data:`ROLLOUT_COUNTERS` order);
    None when the family is absent."""
    count: dict[str, int] = {}
    for vals in records:
        for k in vals:
            if is_counter(k):
                count[k] = count.get(k, 0) + 1

    def best(family: tuple[str, ...], extra: list[str], skip: str | None = None) -> str | None:
        cands = [c for c in list(family) + extra if c in count and c != skip]
        order = {c: i for i, c in enumerate(list(family) + extra)}
        return max(cands, key=lambda c: (count[c], -order[c])) if cands else None

    opt = best(OPTIMIZER_COUNTERS, [])
    named = sorted(k for k in count if k not in ROLLOUT_COUNTERS and ROLLOUT_COUNTER.match(k))
    return opt, best(ROLLOUT_COUNTERS, named, opt)


def eval_score_name(names: Iterable[str], user_map: dict[str, str] | None = None) -> str | None:
    """The validation score among evaluation ``names``: a canonical ``eval/score`` alias, else the first name
    meaning accuracy / pass rate / score, else a reward mean; never a loss, spread, extreme, time or count."""
    names = list(names)
    for n in names:
        c = N.canonical_for(n, user_map)
        if c and c[0] == "eval/score":
            return n
    for pat in (SCORE_WORDS, REWARD_WORDS):
        cands = [n for n in names if pat.search(n) and not NOT_SCORE.search(n.rsplit("/", 1)[-1].replace("mean", ""))]
        if cands:
            # a format check (format_accuracy, format_reward) is not the task's score; then "accuracy"-like over
            # per-function breakdowns: the shortest name
            return min(cands, key=lambda n: (bool(AUX_SCORE.search(n)), 0 if "mean" in n or "acc" in n else 1,
                                             len(n)))
    return None


#: names that mean a training quantity (a loss, a reward, a gradient norm, the lr, a timing)
TRAINING_WORDS = re.compile(r"(?i)loss|reward|grad|entropy|advantage|(?<![a-z])(kl|kl_div|ppo_kl|lr|learning_rate|"
                            r"return|returns|pg|policy|actor|critic|score)(?![a-z])|timing|time|duration|throughput")
#: names that are settings, not measurements (a config dict printed in a log: kl_coef, temperature, max_tokens)
SETTING_WORDS = re.compile(r"(?i)coef|coeff|temperature|top_[pk]|seed|(?<![a-z])pid(?![a-z])|warmup|_ratio$|"
                           r"clip_range|(?<![a-z])(max|min)_|_steps$|epochs$|(?<![a-z])n$|_size$|_id$|port$|rank$")


def _is_training_name(n: str) -> bool:
    low = n.lower()
    if EVAL_WORDS.search(low) or SETTING_WORDS.search(low.rsplit("/", 1)[-1]):
        return False
    return bool(TRAINING_WORDS.search(low))


@dataclass
class Organized:
    """What :func:`organize` makes of records: ``rows`` (foreign name -> value, one per training or evaluation
    record, with ``step``), their source ``lines``, ``config`` (flat name -> value from config records), the
    counters chosen and ``notes`` saying so."""

    rows: list[dict[str, Any]]
    lines: list[int]
    config: dict[str, Any]
    step_counter: str | None
    rollout_counter: str | None
    notes: list[str]
    summary: dict[str, Any] = field(default_factory=dict)
    last_train_step: float | None = None
    renamed: dict[str, str] = field(default_factory=dict)
    #: P, G and the update batch stated by the training records themselves (:func:`batch_from_steps`)
    batch: "ConfigFound | None" = None

    def restore_sources(self, run) -> None:
        """Name the log's own names in ``run.meta.metric_sources`` where :func:`organize` renamed them."""
        ms = getattr(run.meta, "metric_sources", None)
        if ms:
            run.meta.metric_sources = {k: self.renamed.get(v, v) for k, v in ms.items()}

    def closing_step(self) -> int | None:
        """The final summary's step when it is past the last training record (the run ran to it), else None."""
        fin = to_count(self.summary.get("step") or self.summary.get("global_step"))
        return fin if fin and (self.last_train_step is None or fin > self.last_train_step) else None


SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss")


def organize(records: list[Record], user_map: dict[str, str] | None = None) -> Organized:
    """Records -> rows for :func:`rlbatch.readers.common.build_run`.

    - ``config`` records (and a record made only of text and settings, such as ``{"args": {...}}``) are set
      aside as the run-level config; ``summary`` records (``train_runtime``...) give the final step only;
    - the step of each record: its optimizer counter (:data:`OPTIMIZER_COUNTERS`; the rollout counter when there is
      none), else its label; records of several kinds at one step (rollout, train, eval written as separate lines)
      are merged into one row when their names do not overlap (a re-logged step with the same names is not merged);
    - evaluation records: their names are marked validation-side (``eval/`` prefix unless they carry one) so that
      they become evaluation points; a name logged only in records without any training metric is an evaluation
      name everywhere (a baseline evaluation at step 0); the score is :func:`eval_score_name` and is mapped onto
      ``eval/score`` through a name the canonical table knows;
    - an evaluation printed just before the training record of the same step number was taken before that update:
      it is placed at the step before.
    """
    notes: list[str] = []
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    data: list[Record] = []
    for r in records:
        nums = {k: v for k, v in r.values.items() if to_float(v) is not None and not isinstance(v, bool)}
        if r.kind == "config" or (r.kind is None and r.form == "json" and not nums):
            config.update(r.values)
            continue
        if r.kind is None and r.form == "json" and any(isinstance(v, str) and "/" in v for v in r.values.values()) \
                and not has_training(nums) and any(k in r.values for k in ("args/lr", "args/learning_rate")):
            config.update(r.values)
            continue
        last = {k.rsplit("/", 1)[-1]: v for k, v in nums.items()}  # a dump nests them: train_time/train_runtime
        if any(k in SUMMARY_KEYS for k in last) and not has_training(
                {k: v for k, v in last.items() if k not in SUMMARY_KEYS}):
            summary.update(nums)
            if r.label is not None:
                summary.setdefault("step", r.label)
            continue
        data.append(Record(r.line, nums, r.form, r.kind, r.label, r.label_counter))
    opt, roll = counters_in(r.values for r in data)
    if opt is None and roll is None:
        labelled = [r.label_counter for r in data if r.label is not None]
        lab_opt = next((c for c in OPTIMIZER_COUNTERS if c in labelled), None)
        lab_roll = next((c for c in labelled if c is not None and is_rollout_counter(c)), None)
    else:
        lab_opt = lab_roll = None
    step_name = opt or roll
    per_rollout: dict[float, set[float]] = {}
    if opt and roll:
        for r in data:
            if opt in r.values and roll in r.values:
                per_rollout.setdefault(to_float(r.values[roll]), set()).add(to_float(r.values[opt]))
    k_upd = max((len(v) for v in per_rollout.values()), default=1)
    if opt and roll and k_upd > 1:
        step_name = roll
        data = _aggregate_updates(data, opt, roll)
        notes.append(f"two step counters: {roll!r} counts rollouts and {opt!r} optimizer updates, up to {k_upd} "
                     f"updates per rollout: one row per rollout step (as verl counts steps), the updates' values "
                     f"averaged (times summed); the last {opt!r} of each rollout kept as raw/{opt}_last and the "
                     "updates as raw/updates")
    elif opt and roll:
        notes.append(f"two step counters: {opt!r} counts optimizer updates (the run's step) and {roll!r} rollouts "
                     f"(one update per rollout; kept as raw/{roll})")
    elif roll and not opt:
        notes.append(f"steps from the rollout counter {roll!r} (no optimizer-update counter in the log: one update "
                     "per rollout assumed)")
    elif opt:
        notes.append(f"steps from the counter {opt!r} of each record (one update per record)")
    # step of each record; a record carrying only the other counter gets its step through the records that carry
    # both (a rollout record at rollout_step k, where one update per rollout makes optimizer_step j = f(k))
    second = roll if step_name == opt else opt
    via: dict[float, float] = {}
    if step_name and second:
        for r in data:
            if step_name in r.values and second in r.values:
                a, b = to_float(r.values[second]), to_float(r.values[step_name])
                if a is not None and b is not None:
                    via.setdefault(a, b)
    steps: list[float | None] = []
    for r in data:
        s = None
        other = next((c for c in OPTIMIZER_COUNTERS if c in r.values), None) if opt else None
        if step_name and step_name in r.values:
            s = to_float(r.values[step_name])
        elif second and second in r.values and to_float(r.values[second]) in via:
            s = via[to_float(r.values[second])]
        elif other is not None:  # a record that names the update counter differently (a final state dump)
            s = to_float(r.values[other])
        elif r.label is not None:
            s = float(r.label)
        steps.append(s)
    if not step_name and (lab_opt or lab_roll):
        notes.append(f"steps from the label in front of each record ({lab_opt or lab_roll})")
    if data and all(x is None for x in steps):
        k = 0
        for idx, r in enumerate(data):
            if r.kind != "eval" and has_training(r.values):
                k += 1
            steps[idx] = float(k)
        if k:
            notes.append("no step counter in the log: training records numbered 1, 2, ... in file order (an "
                         "evaluation at the step of the training record before it); steps count logging intervals")
    # evaluation names: records with no training metric that carry names never seen with training metrics
    train_names: set[str] = set()
    evalish: set[str] = set()
    typed_eval: set[str] = set()  # names of records the log itself marks as evaluations (type: eval)
    train_steps = {s for r, s in zip(data, steps) if r.kind != "eval" and has_training(r.values)}
    for r, s in zip(data, steps):
        names = set(r.values) - {step_name, roll, *OTHER_COUNTERS}
        if r.kind == "eval":
            evalish |= names
            typed_eval |= names
        elif has_training({k: r.values[k] for k in names}):
            train_names |= names
        elif s not in train_steps or any(_looks_eval(n) for n in names) or any(
                SCORE_WORDS.search(n) and not NOT_SCORE.search(n.rsplit("/", 1)[-1].replace("mean", ""))
                for n in names):
            evalish |= names  # logged where no training happened (a baseline before training, an eval-only step)
        else:
            train_names |= names  # another table of a training step (statistics, per-stage values)
    eval_only = {n for n in evalish if n not in train_names or _looks_eval(n)}
    # names seen in an eval-only record and also in training records (a baseline point at step 0 logging the same
    # held-out metrics as every training record): evaluation names too, when they are not training metrics
    eval_only |= {n for n in (evalish - typed_eval) & train_names if not _is_training_name(n)
                  and not N.canonical_for(n, user_map)
                  and (SCORE_WORDS.search(n) or EVAL_WORDS.search(n))}
    score = eval_score_name(sorted(eval_only, key=lambda n: (not _looks_eval(n), n)), user_map)
    if score is not None and AUX_SCORE.search(score) and eval_score_name(
            [n for n in typed_eval if not AUX_SCORE.search(n)], user_map) is not None:
        score = None  # a format check only the eval records log: their own task score is taken per record below
    rename: dict[str, str] = {}
    for n in eval_only:
        if n == score:
            rename[n] = "eval/score" if not N.canonical_for(n, user_map) else n
        elif not N.is_validation_side(n, user_map):
            rename[n] = "val-aux/" + n
    if score:
        notes.append(f"evaluation score: {score!r}" + (" (a name logged at evaluation points)"
                                                        if rename.get(score) == "eval/score" else ""))
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    last_train: float | None = None
    last_step_keys: dict[float, set[str]] = {}
    for idx, (r, s) in enumerate(zip(data, steps)):
        if s is None:
            continue
        vals = {rename.get(k, k): v for k, v in r.values.items() if k != step_name and k not in OPTIMIZER_COUNTERS}
        counter_vals = {k: vals.pop(k) for k in [k for k in vals if is_rollout_counter(k)]}
        is_eval = r.kind == "eval" or (bool(vals) and any(N.is_validation_side(k, user_map) for k in vals) and
                                       not has_training({k: v for k, v in vals.items()
                                                          if not N.is_validation_side(k, user_map)}))
        if is_eval:
            own = [k for k in r.values if k != step_name and k not in OPTIMIZER_COUNTERS]
            if r.kind == "eval" and "eval/score" not in vals and not any(
                    N.is_eval_name(k, user_map) for k in vals):
                # an evaluation record whose names are also training names ('[eval] reward_mean=...'): its own score
                own_score = eval_score_name(own, user_map)
                if own_score is not None and own_score in r.values:
                    vals.pop(rename.get(own_score, own_score), None)
                    vals["eval/score"] = r.values[own_score]
                    rename.setdefault(own_score + " (in the evaluation records)", "eval/score")
                    if not any(x.startswith("evaluation records' score") for x in notes):
                        notes.append(f"evaluation records' score: {own_score!r} (the same name in training records "
                                     "is the training value)")
            nxt = next((t for rr, t in zip(data[idx + 1:], steps[idx + 1:]) if t is not None and rr.kind != "eval"
                        and has_training(rr.values)), None)
            prev_train = any(t == s and rr.kind != "eval" and has_training(rr.values)
                             for rr, t in zip(data[:idx], steps[:idx]))
            if nxt == s and not prev_train and s >= 1:
                s = s - 1
                if not any("before that update" in x for x in notes):
                    notes.append("an evaluation printed before the training record of the same step number was taken "
                                 "before that update: placed at the step before")
            # (a cumulative clock the loop writes on every record is no duration: rlbatch.readers.clocks)
            tname = next((k for k in r.values if _TIME_NAME.search(k) and not N.is_eval_name(k, user_map)
                          and not N.WALL_CLOCK.match(k) and rename.get(k, k) in vals
                          and to_float(r.values[k]) is not None), None)
            if tname is not None:  # the evaluation's own duration: excluded from the wall clock (DESIGN.md)
                vals[N.EVAL_TIME] = vals.pop(rename.get(tname, tname))
                if not any(x.startswith("evaluation time") for x in notes):
                    notes.append(f"evaluation time: {tname!r} of the evaluation records (excluded from time/wall_s)")
            vals = {(k if N.is_validation_side(k, user_map) else "val-aux/" + k): v for k, v in vals.items()}
        else:
            last_train = s if last_train is None else max(last_train, s)
            rate = next((k for k in RATE_NAMES if k in vals), None)
            if rate is not None and not any((N.canonical_for(k, user_map) or ("",))[0] == "time/step_s" for k in vals):
                x = to_float(vals[rate])
                if x is not None and math.isfinite(x) and x > 0:
                    vals["time/step_s"] = 1.0 / x
                    if not any(n.startswith("time/step_s: 1 /") for n in notes):
                        notes.append(f"time/step_s: 1 / {rate!r} (iterations per second of the step)")
        keys = set(vals)
        if rows and rows[-1].get("step") == s and not (keys & last_step_keys.get(s, set())):
            rows[-1].update(vals)  # another kind of record of the same step (rollout / train / eval lines)
            for k, v in counter_vals.items():
                rows[-1].setdefault(k, v)
            last_step_keys[s] |= keys
            continue
        row = {"step": s, **vals, **counter_vals}
        rows.append(row)
        lines.append(r.line)
        last_step_keys[s] = keys
    batch = batch_from_steps(rows, notes)
    return Organized(rows=rows, lines=lines, config=config, step_counter=step_name or lab_opt or lab_roll,
                     rollout_counter=roll, notes=notes, summary=summary, last_train_step=last_train,
                     renamed={v: k for k, v in rename.items()}, batch=batch)


_TIME_NAME = re.compile(r"(?i)time|seconds|duration|(?<![a-z])_?s$|_sec$")


def _aggregate_updates(data: list[Record], opt: str, roll: str) -> list[Record]:
    """Training records of one rollout (several optimizer updates) -> one record at the rollout's first training
    record: numbers averaged, timings summed, ``{opt}_last`` and ``updates`` added; other records unchanged."""
    groups: dict[float, list[Record]] = {}
    out: list[Record | float] = []
    for r in data:
        rv = to_float(r.values.get(roll)) if roll in r.values else None
        if r.kind != "eval" and opt in r.values and rv is not None and has_training(r.values):
            if rv not in groups:
                groups[rv] = []
                out.append(rv)
            groups[rv].append(r)
        else:
            out.append(r)
    merged: list[Record] = []
    for item in out:
        if isinstance(item, Record):
            merged.append(item)
            continue
        rs = groups[item]
        vals: dict[str, Any] = {}
        names = [k for k in dict.fromkeys(k for r in rs for k in r.values) if k not in (opt, roll)]
        for k in names:
            xs = [to_float(r.values[k]) for r in rs if k in r.values and to_float(r.values[k]) is not None]
            xs = [x for x in xs if math.isfinite(x)]
            if xs:
                vals[k] = sum(xs) if _TIME_NAME.search(k) else sum(xs) / len(xs)
        vals[roll] = item
        vals[f"{opt}_last"] = max(to_float(r.values[opt]) for r in rs)
        vals["updates"] = len({to_float(r.values[opt]) for r in rs})
        merged.append(Record(rs[0].line, vals, rs[0].form, rs[0].kind, rs[0].label, rs[0].label_counter))
    return merged


#: per-step fields that state the batch of a custom loop's rollout or training records, most specific first
STEP_PROMPTS = ("prompts_per_step", "num_prompts", "n_prompts", "num_questions", "n_questions", "questions_per_step",
                "prompts_per_rollout", "num_groups", "n_groups")
STEP_GROUP = ("num_generations", "n_samples_per_prompt", "samples_per_prompt", "responses_per_prompt",
              "completions_per_prompt", "rollouts_per_prompt", "generations_per_prompt", "n_generations", "group_size")
STEP_TOTAL = ("num_rollouts", "n_rollouts", "rollout_batch_size", "num_completions", "num_responses",
              "responses_per_step", "completions_per_step")
STEP_UPDATE = ("responses_per_update", "update_batch_size", "train_batch_size", "mini_batch_size", "minibatch_size",
               "ppo_mini_batch_size", "optimizer_batch_size")
STEP_EPOCHS = ("epochs_per_rollout_batch", "epochs_per_rollout", "ppo_epochs", "num_ppo_epochs", "update_epochs",
               "inner_epochs")


def _constants(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Numeric fields that hold one value in every training row that carries them (a rollout's size)."""
    seen: dict[str, set[float]] = {}
    for r in rows:
        for k, v in r.items():
            x = to_float(v)
            if x is not None and math.isfinite(x) and not isinstance(v, bool):
                seen.setdefault(k, set()).add(x)
    return {k: next(iter(v)) for k, v in seen.items() if len(v) == 1}


def batch_from_steps(rows: list[dict[str, Any]], notes: list[str] | None = None) -> ConfigFound | None:
    """P, G and the update batch a custom loop states in its per-step records (``num_questions: 32, group_size: 8.0,
    num_rollouts: 256`` in each rollout record; ``train_batch_size: 128`` in each update record), or None.

    A field counts only when it holds one value throughout. P and G are taken when both are there and agree with a
    stated total (P x G responses), or one of them is there with the total; a disagreement leaves both unknown (and
    says so). The update batch (responses per optimizer update) is taken only when the log's own update count
    confirms it: updates per rollout = epochs x P x G / update batch (``epochs_per_rollout_batch`` where stated)."""
    notes = notes if notes is not None else []
    c = _constants([r for r in rows if not any(N.is_validation_side(k) for k in r if k != "step") or
                    any(_is_training_name(k) for k in r)])

    def first(names: tuple[str, ...]) -> tuple[str, int] | None:
        for n in names:
            if n in c and c[n] >= 1 and c[n] == int(c[n]):
                return n, int(c[n])
        return None

    p, g, t = first(STEP_PROMPTS), first(STEP_GROUP), first(STEP_TOTAL)
    out = ConfigFound()
    where = "in every record that logs it"
    if p and g:
        if t and p[1] * g[1] != t[1]:
            notes.append(f"{p[0]} = {p[1]} and {g[0]} = {g[1]} disagree with {t[0]} = {t[1]}: P and G left unknown "
                         "(--set RUN:prompts_per_step=... --set RUN:group_size=...)")
            return None
        out.prompts_per_step, out.group_size = p[1], g[1]
        out.sources["prompts_per_step"] = f"{p[0]} = {p[1]} ({where})"
        out.sources["group_size"] = f"{g[0]} = {g[1]} ({where})" + (f"; {t[0]} = {t[1]} = P x G" if t else "")
    elif g and t and t[1] % g[1] == 0 and g[0] != "group_size":
        out.prompts_per_step, out.group_size = t[1] // g[1], g[1]
        out.sources["prompts_per_step"] = f"{t[0]} / {g[0]} = {t[1]} / {g[1]} ({where})"
        out.sources["group_size"] = f"{g[0]} = {g[1]} ({where})"
    elif p and t and t[1] % p[1] == 0:
        out.prompts_per_step, out.group_size = p[1], t[1] // p[1]
        out.sources["prompts_per_step"] = f"{p[0]} = {p[1]} ({where})"
        out.sources["group_size"] = f"{t[0]} / {p[0]} = {t[1]} / {p[1]} ({where})"
    else:
        return None
    total = out.prompts_per_step * out.group_size
    u = first(STEP_UPDATE)
    if u and u[1] < total and total % u[1] == 0:
        per_epoch = total // u[1]
        upd = c.get("updates")
        ep = first(STEP_EPOCHS)
        epochs = ep[1] if ep else (int(upd // per_epoch) if upd and upd % per_epoch == 0 else None)
        if upd and epochs and upd == epochs * per_epoch:
            out.update_batch = u[1]
            out.sources["update_batch"] = (f"{u[0]} = {u[1]} responses per update ({where}); the log's "
                                           f"{int(upd)} updates per rollout = {epochs} epoch(s) x {total} / {u[1]}")
        else:
            notes.append(f"{u[0]} = {u[1]} may be the update batch (P x G = {total}), but the log's update count "
                         f"does not confirm it: B taken as P x G")
    return out


def has_training(vals: dict[str, Any]) -> bool:
    """True when ``vals`` hold a training measurement: a name of the canonical table (not validation-side) or one
    meaning a loss, reward, gradient norm, lr or timing (:data:`TRAINING_WORDS`), not a setting."""
    return any((N.canonical_for(k) is not None and not N.is_validation_side(k)) or _is_training_name(k)
               for k, v in vals.items() if to_float(v) is not None and k not in OTHER_COUNTERS
               and not is_counter(k))


def _looks_eval(name: str) -> bool:
    return bool(EVAL_WORDS.search(name.split("/")[0])) or name.startswith(N.VALIDATION_PREFIXES)
