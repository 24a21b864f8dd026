"""Shared by all readers: foreign rows -> a :class:`rlbatch.runstore.Run` with canonical names and derived columns.

A reader produces *rows*: one dict per logged record, foreign metric names -> float, including the logger's own step
number. :func:`build_run` maps names through :mod:`rlbatch.readers.names`, separates validation scores into
``evals``, renumbers steps 1-based, and derives what the log lacks (``time/train_s``, ``time/step_s``,
``time/wall_s``, cumulative counters); :func:`finalize` (re)computes the retained-sample axis from P x G, so a
``--set RUN:prompts_per_step=...`` override can be applied after reading.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

import numpy as np
import pandas as pd

from rlbatch.errors import UserError
from rlbatch.readers import clocks, indirect
from rlbatch.readers import names as N
from rlbatch.readers.textio import BOMS, open_text, read_text, sniff_encoding, virtual, virtual_text  # noqa: F401
from rlbatch.readers.schedule import lr_note, lr_schedule  # noqa: F401  (lr_schedule: re-exported)
from rlbatch.runstore import CANONICAL_METRICS, EVAL_JSONL, METRICS_JSONL, Run, RunMeta, make_meta


class ReadWarning(UserWarning):
    """Something in an input was skipped or repaired (a truncated line, a NaN, a line of another schema).

    The message names file and line; the rest of the input is still read. The CLI prints each one on one line.
    """


def warn(msg: str, path: str | Path | None = None, line: int | None = None) -> None:
    where = ""
    if path is not None:
        where = f"{path}:{line}: " if line is not None else f"{path}: "
    warnings.warn(where + msg, ReadWarning, stacklevel=2)


#: the largest count (step, P, G, B) taken as real: beyond 2**53 floats no longer hold integers exactly
MAX_COUNT = 2**53


#: the beginning of a new console record (not the continuation of a wrapped line)
#: an ANSI escape sequence (colours, cursor moves) in console output
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: a numpy / torch scalar printed in a repr: ``np.float64(0.5)``, ``np.int64(3)``, ``tensor(0.5)``,
#: ``tensor(0.5, device='cuda:0')``; group 1 is the number (``SCALAR_CALL.sub(r"\1", text)`` unwraps them)
SCALAR_CALL = re.compile(r"(?:np\.(?:float|int)\d*|tensor)\(([^()]*?)(?:,[^()]*)?\)")
RECORD_START = re.compile(r"^\s*(?:\x1b\[|\((?:[\w.-]+ )?(?:pid=\d+|[\w.-]+\))|step:\d|Step \d|"
                          r"\[?(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}:\d{2}:\d{2}|\d{2}[-/]\d{2}[ T]\d{1,2}:\d{2})|"
                          r"\{'|\{\"|wandb:|INFO|WARNING|ERROR|DEBUG|Traceback|```|=+ |[\w.]+ \d+: \{)")


def unwrap_lines(lines: list[str], min_width: int = 60) -> tuple[list[tuple[int, str]], int | None]:
    """Rejoin lines a terminal or a paste wrapped at a fixed column: ``[(first line number, text), ...]`` and the
    width found (None when the text is not wrapped).

    A text is hard-wrapped at width W when no line is longer than W (line ends not counted), W >= ``min_width``,
    and at least 3 lines (and 5% of those at least W/2 long) are exactly W long and followed by a line that does
    not begin a new record (:data:`RECORD_START`: a Ray prefix, ``step:``, a time stamp, a dict, ``wandb:``...):
    then each such line continues on the next and the two are joined without a separator (the break can fall
    inside a name or a number). Lines of one template that merely have equal lengths are left alone. Line ends are
    kept on the joined line as on its last piece."""
    body = [ln.rstrip("\r\n") for ln in lines]
    if not body:
        return [], None
    width = max(len(b) for b in body)
    n_long = sum(1 for b in body if len(b) >= width // 2)
    cont = [len(b) == width and i + 1 < len(body) and body[i + 1].strip() != ""
            and not RECORD_START.match(body[i + 1]) for i, b in enumerate(body)]
    n_at = sum(cont)
    if width < min_width or n_at < 3 or n_at < 0.05 * n_long:
        return list(enumerate(lines, 1)), None
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for i, (raw, b) in enumerate(zip(lines, body), 1):
        if not buf:
            start = i
        if cont[i - 1]:
            buf += b
            continue
        out.append((start, buf + raw))
        buf = ""
    if buf:
        out.append((start, buf))
    return out, width


def step_of_fraction(v: Any) -> int | None:
    """``"5/500"`` (ms-swift's ``global_step/max_steps``) -> 5; None for anything else."""
    if isinstance(v, str) and "/" in v:
        a, _, b = v.strip().partition("/")
        if a.isdigit() and b.isdigit() and len(a) < 16:
            return int(a)
    return None


def json_reason(err: BaseException) -> str:
    """One-line reason for a failed ``json.loads`` (``JSONDecodeError``, an integer over Python's 4300-digit
    limit, nesting too deep)."""
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return getattr(err, "msg", None) or str(err).split(";")[0]


def to_float(v: Any) -> float | None:
    """A logged value as float: numbers, numeric strings, ``np.float64(0.5)`` reprs, bools; None otherwise.
    Numbers beyond the float range (``1e400``, a 400-digit integer) give +-inf (later treated as missing)."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, float):
        return v
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, str):
        s = v.strip()
        try:
            return float(s)
        except ValueError:
            pass
        if s.endswith(")") and "(" in s:  # np.float64(0.5), np.int64(3), tensor(0.5)
            inner = s[s.index("(") + 1: -1].split(",")[0]
            try:
                return float(inner)
            except ValueError:
                return None
    return None


def plain_value(v: Any) -> str:
    """A logged value as a user reads it in a warning: ``1e+18``, ``'abc'``; never a numpy repr such as
    ``np.float64(1e+18)`` (researcher tryout, finding 16)."""
    return repr(v.item()) if isinstance(v, np.generic) else repr(v)


def to_count(v: Any) -> int | None:
    """A count (P, G, B, a step) from a logged or configured value: a whole number in [0, 2**53]; None for
    anything else (text, fractions, inf, nan, 1e400)."""
    f = to_float(v)
    if f is None or not math.isfinite(f) or f != int(f) or not 0 <= f <= MAX_COUNT:
        return None
    return int(f)


def _nan_warnings(rows: list[dict[str, Any]], lines: list[int] | None, path: str | Path) -> None:
    """One warning per metric logged as NaN/inf (count, first line named), so a broken metric is visible but not
    fatal; those values are then treated as missing."""
    first: dict[str, int] = {}
    count: dict[str, int] = {}
    for i, rec in enumerate(rows):
        for k, v in rec.items():
            if v.__class__ is float and not v - v == 0.0:  # NaN or +-inf
                count[k] = count.get(k, 0) + 1
                first.setdefault(k, i)
    for k, i in first.items():
        line = lines[i] if lines is not None and i < len(lines) else None
        where = "" if line is not None else f" (first in record {i + 1})"
        warn(f"{count[k]} non-finite value(s) of {k!r}{where}; treated as missing", path, line)


def build_run(rows: list[dict[str, Any]], *, path: str | Path, source_format: str, meta_fields: dict[str, Any],
              notes: list[str] | None = None, lines: list[int] | None = None,
              extra_evals: Iterable[tuple[int | None, dict[str, float]]] = (),
              user_map: dict[str, str] | None = None) -> Run:
    """Turn foreign ``rows`` into a :class:`Run` with canonical metric names.

    ``rows``: dicts of foreign name -> value (float, or None/NaN when absent), one per logged record, including a
    step key (``step``, ``_step``, ``global_step``...); ``lines``: the source line of each row (for messages).
    A row whose only values are validation scores is an evaluation point, not a training step; its evaluation is
    attributed to the last training step logged at or before its step (verl logs the final validation one step
    number past the last update). Steps are renumbered 1-based when the logger counted from 0.
    ``extra_evals``: ``(canonical step or None for "after the last step", {foreign eval name: value})`` pairs that
    override evaluations read from rows at the same step (verl's full-precision "Final validation metrics").
    Raises :class:`UserError` when there is no training step at all.
    """
    notes = list(notes or [])
    _nan_warnings(rows, lines, path)
    df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    # unit suffixes: "actor/lr(1e-4)" -> "actor/lr" x 1e-4
    for c in [c for c in df.columns if N.split_unit(str(c))[0] != c]:
        base, unit = N.split_unit(str(c))
        scaled = _numeric(df.pop(c)) * unit
        # the same name with and without a unit (or with two units) in one log: the first present wins per row
        df[base] = _numeric(df[base]).fillna(scaled) if base in df.columns else scaled
    for c in [c for c in df.columns if c in N.ELAPSED_NAMES]:
        df[c] = pd.Series([N.duration_s(v) for v in df[c]], index=df.index, dtype=float)
    df = df.apply(_numeric) if len(df.columns) else df
    df = df.replace([np.inf, -np.inf], np.nan)

    # step column
    step_src = N.step_column(list(df.columns), user_map)
    eval_cols = [c for c in df.columns if c != step_src and N.is_eval_name(c, user_map)]
    val_side = [c for c in df.columns if c != step_src and c not in eval_cols and N.is_validation_side(c, user_map)]
    train_cols = [c for c in df.columns if c != step_src and c not in eval_cols and c not in val_side]
    if step_src is None:
        df["__step"] = np.arange(1, len(df) + 1, dtype=float)
        step_src = "__step"
        if len(df):
            notes.append("no step column: rows numbered 1, 2, ... in file order")
    # a cumulative clock logged on every record (an evaluation's too) does not make a record a training step
    decisive = [c for c in train_cols if c not in clocks.clock_names(train_cols, user_map)] or train_cols
    is_train = df[decisive].notna().any(axis=1) if train_cols else pd.Series(False, index=df.index)
    if train_cols and len(rows) == len(df):
        # a training metric logged as NaN / inf (a diverged loss) still makes its record a training step
        tset = set(train_cols)
        logged_nonfinite = pd.Series([any(k in tset and isinstance(v, float) and not math.isfinite(v)
                                          for k, v in r.items()) for r in rows], index=df.index)
        is_train |= logged_nonfinite
    steps_all = df[step_src]
    bad_step = steps_all.notna() & ~(steps_all.between(0, MAX_COUNT) & (steps_all == np.floor(steps_all)))
    if bad_step.any():
        i = int(np.flatnonzero(bad_step.to_numpy())[0])
        line = lines[i] if lines is not None and i < len(lines) else None
        warn(f"{int(bad_step.sum())} record(s) with a step that is not a whole number in [0, 2**53] (first: "
             f"{plain_value(steps_all.iloc[i])}); skipped", path, line)
        df = df[~bad_step]
        is_train = is_train[~bad_step]
    is_train &= df[step_src].notna()
    train = df[is_train]
    if train.empty:
        raise UserError("no training steps found (no record with training metrics)", path=str(path))

    logged = train[step_src].to_numpy(dtype=float)
    offset = 1.0 if logged.min() == 0 else 0.0
    if offset:
        notes.append("the log counts steps from 0 (a training record at step 0); renumbered 1-based")
    n_val_only = int((df[step_src].notna() & ~is_train).sum()) if len(df) else 0
    if n_val_only and eval_cols:
        notes.append(f"{n_val_only} validation-only record(s) read as evaluation points at their step (not training "
                     "steps; steps not renumbered for them)")
    # duplicated steps (a resumed run re-logging steps): keep the last record of each step
    train = train.assign(__logged=logged)
    if train["__logged"].duplicated().any():
        ndup = int(train["__logged"].duplicated(keep="last").sum())
        warn(f"{ndup} step(s) logged more than once (resumed run?); kept the last record of each", path)
        train = train.drop_duplicates("__logged", keep="last")
    train = train.sort_values("__logged", kind="stable")
    logged = train["__logged"].to_numpy(dtype=float)
    canon_steps = logged + offset

    name_map: dict[str, str] = {}
    metrics = _canonical_frame(train, train_cols, canon_steps, user_map, notes, name_map, path)
    metrics = _keep_validation_side(metrics, df, val_side, step_src, logged)
    meta_fields = dict(meta_fields)
    _algorithm_from_columns(train_cols, meta_fields, notes)
    meta_fields.update(_resume_fields(canon_steps, notes))
    meta_fields.setdefault("source_format", source_format)
    meta_fields.setdefault("source_path", str(path))
    meta_fields["log_last_step"] = int(df[step_src].max()) if df[step_src].notna().any() else None
    if offset:
        meta_fields["step_offset"] = int(offset)  # canonical step = the log's step + step_offset
    meta = make_meta(path, **meta_fields)

    # evaluations: from rows (at their step) and extra_evals (override)
    by_step: dict[int, dict[str, float]] = {}
    if eval_cols:
        ev = df[eval_cols + [step_src]]
        ev = ev[ev[eval_cols].notna().any(axis=1)]
        for rec_step, rec in zip(ev[step_src].to_numpy(dtype=float), ev[eval_cols].to_dict(orient="records")):
            k = int(np.searchsorted(logged, rec_step, side="right"))  # training rows logged at or before
            cstep = int(canon_steps[k - 1]) if k > 0 else 0
            d = by_step.setdefault(cstep, {})
            d.update({n: v for n, v in rec.items() if v is not None and not (isinstance(v, float) and math.isnan(v))})
    last = int(canon_steps[-1])
    for cstep, vals in extra_evals:
        cstep = last if cstep is None else int(cstep)
        d = by_step.setdefault(cstep, {})
        for n, v in vals.items():
            base, unit = N.split_unit(n)
            fv = to_float(v)
            if fv is not None and math.isfinite(fv):
                d[base] = fv * unit
    evals = _eval_frame(by_step, user_map, name_map)
    _percent_scale(evals, name_map, notes)
    _score_choice_note(evals, name_map, user_map, notes)
    meta.metric_sources = name_map  # canonical name -> the log's name it was read from (rlbatch inspect)
    run = Run(meta=meta, metrics=metrics, evals=evals, path=None, notes=notes)
    return finalize(run)


#: a value-function loss: the run trains a critic, so it is PPO (GAE), not GRPO (verl ``critic/vf_loss``, OpenRLHF
#: ``critic_loss``, TRL's PPOTrainer ``loss/value_avg``, ``value_loss`` in custom loops)
_VALUE_LOSS = re.compile(r"(?i)(?:^|[/_.\s])(?:vf_loss|value_loss|critic_loss|loss/value(?:_avg)?|value_function_loss|"
                         r"critic/(?:\w+_)?loss)(?:$|[/_.\s])")


def _algorithm_from_columns(columns: Sequence[Any], fields: dict[str, Any], notes: list[str]) -> None:
    """A log that does not say its algorithm but logs a value-function loss trains a critic: PPO (issue 53), and
    without a group size G = 1 (one response per prompt, PPO's usual setting), flagged as a default. Sets
    ``fields["algorithm"]`` (and ``group_size``) in place, with a note; nothing when the reader gave an algorithm."""
    if "algorithm" in fields:
        return
    hit = next((str(c) for c in columns if _VALUE_LOSS.search(str(c))), None)
    if hit is None:
        return
    fields["algorithm"] = "ppo"
    notes.append(f"algorithm not in the log; PPO because it logs a value-function loss ({hit!r})")
    if "group_size" not in fields:
        fields["group_size"] = 1
        fields["group_size_source"] = "PPO default"
        notes.append("group_size: not in the log; PPO's usual G = 1 assumed, flagged as a default "
                     "(--set RUN:group_size=... if the run sampled several responses per prompt)")


#: evaluation names whose scale is a fraction or a percent (accuracy, pass rate, win rate): never a reward, which may
#: legitimately exceed 1
_RATE_NAME = re.compile(r"(?i)acc|accuracy|pass(?:@|_at_)?\d*|win[_ -]?rate|success|solve|correct|exact|percent|pct|"
                        r"(?<![a-z])em(?![a-z])")


def _score_choice_note(evals: pd.DataFrame, name_map: dict[str, str], user_map: dict[str, str] | None,
                       notes: list[str]) -> None:
    """When a log has several evaluation scores (a success rate and a mean reward), say which one is ``eval/score``
    and why, and how to use another (issue 45): the others are kept in ``evals`` under their own names."""
    chosen = name_map.get("eval/score")
    others = [c for c in evals.columns if c not in ("step", "eval/score") and not c.startswith("eval/score/")
              and (N.canonical_for(c, user_map) or ("",))[0] == "eval/score"]
    if not chosen or not others:
        return
    kind = "a bounded success rate" if N.SUCCESS_RATE_WORDS.search(chosen) else "first in rlbatch's order"
    rest = ", ".join(repr(o) for o in others)
    notes.append(f"eval/score: {chosen!r} ({kind}) chosen over {rest}; use another with --metric NAME "
                 f"(e.g. --metric {others[0]})")


def _percent_scale(evals: pd.DataFrame, name_map: dict[str, str], notes: list[str]) -> None:
    """Evaluation scores logged in percent (an accuracy of 26.7 for 26.7 %): divided by 100 and said so in the
    notes. Only for rate-like names (:data:`_RATE_NAME`) whose values all lie in [0, 100] with one above 1.5 (a
    fraction a little past 1 is a synthetic or rounded value, not a percent); a reward's scale is left alone."""
    if not len(evals) or "eval/score" not in evals.columns:
        return
    src = str(name_map.get("eval/score", ""))
    if "reward" in src.lower() or not _RATE_NAME.search(src):
        return
    cols = [c for c in evals.columns if c == "eval/score" or c.startswith("eval/score/")]
    vals = evals[cols].to_numpy(dtype=float)
    ok = vals[np.isfinite(vals)]
    if len(ok) and ok.max() > 1.5 and ok.min() >= 0.0 and ok.max() <= 100.0:  # a fraction never goes past 1
        evals[cols] = evals[cols] / 100.0
        notes.append(f"eval/score: {src!r} is logged in percent (values up to {ok.max():g}); divided by 100 to a "
                     "fraction in [0, 1]")


def _resume_fields(steps: np.ndarray, notes: list[str]) -> dict[str, Any]:
    """``steps_in_file`` (training records read) and, for a run resumed from a checkpoint (its first logged step
    past the logging cadence, e.g. 101 for a run logged every step), ``resumed_from_step`` (the last optimizer step
    before the file begins) with a note giving both the steps in the file and the optimizer steps covered."""
    out: dict[str, Any] = {"steps_in_file": int(len(steps))}
    if len(steps) < 2:
        return out
    first, last = int(steps[0]), int(steps[-1])
    cadence = float(np.median(np.diff(steps)))
    if first > 1 and first > cadence:
        out["resumed_from_step"] = first - 1
        notes.append(f"resumed run: the file begins at step {first} (steps 1-{first - 1} are in an earlier log); "
                     f"{len(steps)} step(s) in the file, optimizer steps {first}-{last} of {last} in all; samples "
                     "and wall-clock counted from step 1 (the earlier steps at the first logged step's pace where "
                     "the log has no counter of its own)")
    return out


def _numeric(col: pd.Series) -> pd.Series:
    """A column as float64: numbers kept, anything else (text, None, ints beyond the float range) -> NaN."""
    if col.dtype.kind in "fiub":
        return col.astype(float)
    out = pd.to_numeric(col, errors="coerce")
    if out.dtype.kind not in "fiub":  # object left over: Python ints too large for int64/float
        out = pd.Series([to_float(v) for v in col], index=col.index, dtype=float)
    return out.astype(float)


def _keep_validation_side(metrics: pd.DataFrame, df: pd.DataFrame, cols: list[str], step_src: str,
                          logged: np.ndarray) -> pd.DataFrame:
    """Names logged only at validation points that are not scores (:func:`rlbatch.readers.names.is_validation_side`:
    ``val-aux/...``, ``eval/n_problems``) kept as ``raw/<name>`` at the training step their record belongs to (the
    last logged at or before it, as for evaluations; the last value of a step), so that no column of a log vanishes
    (field report finding 4). ``metrics``: one row per sorted training step ``logged`` (the log's numbers); returns
    it with those columns added."""
    raw = {}
    for c in cols:
        v = df[[step_src, c]].dropna()
        col = np.full(len(metrics), np.nan)
        k = np.searchsorted(logged, v[step_src].to_numpy(dtype=float), side="right") - 1
        last = pd.Series(v[c].to_numpy(dtype=float), index=k).groupby(level=0).last()
        last = last[last.index >= 0]  # a record before the first training step has no step to sit at
        col[last.index.to_numpy()] = last.to_numpy()
        raw[f"raw/{c}"] = col
    return pd.concat([metrics, pd.DataFrame(raw, index=metrics.index)], axis=1) if raw else metrics


def _canonical_frame(train: pd.DataFrame, cols: list[str], steps: np.ndarray,
                     user_map: dict[str, str] | None, notes: list[str],
                     name_map: dict[str, str] | None = None, path: str | Path | None = None) -> pd.DataFrame:
    sources: dict[str, list[tuple[int, str]]] = {}
    for c in cols:
        m = N.canonical_for(c, user_map)
        if m is None or m[0] in N.EVAL_CANONICAL or m[0] == "step":
            continue
        sources.setdefault(m[0], []).append((m[1], c))
    out: dict[str, Any] = {"step": steps.astype(np.int64)}
    used = set()
    for canon, srcs in sources.items():
        srcs.sort()
        col = train[srcs[0][1]].to_numpy(dtype=float).copy()
        for _, c in srcs[1:]:  # mixed schemas (a run resumed under a newer logger): fill gaps from other names
            other = train[c].to_numpy(dtype=float)
            gap = np.isnan(col) & ~np.isnan(other)
            if gap.any():
                col[gap] = other[gap]
                notes.append(f"{canon}: merged {srcs[0][1]!r} and {c!r} (mixed schemas in one log)")
        out[canon] = col
        used.add(srcs[0][1])
        if name_map is not None:
            name_map[canon] = srcs[0][1]
        if canon == "time/step_s":  # a cumulative clock given as seconds per step (field report finding 3)
            clocks.check_step_time(col, steps, srcs[0][1], path, by_user=srcs[0][0] < 0)
    for canon, alts in N.TIME_ALTERNATES.items():
        for alt, why in alts:
            if alt not in train.columns:
                continue
            other = train[alt].to_numpy(dtype=float)
            cur = out.get(canon)
            if cur is None:
                out[canon] = other.copy()
                notes.append(f"{canon}: from {alt!r}")
                if name_map is not None:
                    name_map[canon] = alt
                continue
            use = ~np.isnan(other) & (np.isnan(cur) | (cur < 0.1 * other))
            if use.any():
                cur[use] = other[use]
                notes.append(f"{canon}: {int(use.sum())} step(s) from {alt!r} ({why})")
    for canon, parts in N.PER_STEP_TO_CUMULATIVE.items():
        if canon in out:
            continue
        for p in parts:
            if p in train.columns:
                out[canon] = np.nancumsum(train[p].to_numpy(dtype=float))
                if name_map is not None:
                    name_map[canon] = f"running sum of {p}"
                break
    for canon, partnames, why in (("time/train_s", N.TRAIN_TIME_PARTS, "sum of actor and critic update timers"),
                                  ("time/step_s", N.STEP_TIME_PARTS, "sum of the per-phase timers (no step timer)")):
        parts = [p for p in partnames if p in train.columns]
        if not parts:
            continue
        summed = train[parts].sum(axis=1, min_count=1).to_numpy(dtype=float)
        if canon not in out:
            out[canon] = summed
            notes.append(f"{canon}: {why}")
            if name_map is not None:
                name_map[canon] = " + ".join(parts)
        else:
            gap = np.isnan(out[canon]) & ~np.isnan(summed)
            out[canon][gap] = summed[gap]
    clocks.add_clock_times(train, steps, cols, user_map, out, notes, name_map, used)
    if "time/wall_s" not in out and "time/step_s" in out:
        over = [p for p in N.EVAL_OVERHEAD_PARTS if p in train.columns]
        per = out["time/step_s"].copy()
        if over:
            per = per - train[over].fillna(0.0).sum(axis=1).to_numpy(dtype=float)
        dstep = np.diff(np.concatenate([[0.0], steps]))  # sparse logging: a row stands for dstep steps
        out["time/wall_s"] = np.nancumsum(per * dstep)
    frame = pd.DataFrame(out)
    raw = {f"raw/{c}": train[c].to_numpy(dtype=float) for c in cols if c not in used}
    if raw:
        frame = pd.concat([frame, pd.DataFrame(raw)], axis=1)
    return frame


def _eval_frame(by_step: dict[int, dict[str, float]], user_map: dict[str, str] | None,
                name_map: dict[str, str] | None = None) -> pd.DataFrame:
    recs = []
    chosen, others = N.eval_dataset_choice(by_step)
    for step in sorted(by_step):
        vals = by_step[step]
        rec: dict[str, Any] = {"step": step}
        per_ds = {}
        cands: list[tuple[int, str, float]] = []
        for n, v in vals.items():
            ds = N.eval_dataset(n)
            if ds is not None:
                per_ds.setdefault(ds, v)
                continue
            m = N.canonical_for(n, user_map)
            if m and m[0] == "eval/score":
                cands.append((m[1], n, v))
        direct = None
        if cands:  # the table's order: a bounded success rate before a mean reward (issue 45)
            cands.sort(key=lambda c: c[0])
            direct = cands[0][2]
            if name_map is not None:
                name_map.setdefault("eval/score", cands[0][1])
            for _, n, v in cands[1:]:  # the others stay readable by their own names (--metric NAME)
                if n != "eval/score" and not n.startswith("eval/score/"):
                    rec[n] = v
        for ds, v in per_ds.items():
            rec[f"eval/score/{ds}"] = v
        if direct is not None:
            rec["eval/score"] = direct
        elif per_ds:
            # several validation datasets: one of them, chosen once for the run (N.eval_dataset_choice; issue 53,
            # cases5: the mean of AIME 2024 and 2025 is neither); NaN at a step that did not evaluate it; each is
            # readable as eval/score/<dataset> (--metric)
            rec["eval/score"] = per_ds.get(chosen, float("nan"))
            if name_map is not None and chosen in per_ds and "eval/score" not in name_map:
                src = next(n for n in vals if N.eval_dataset(n) == chosen)
                name_map["eval/score"] = src + (
                    f" (one of {len(others) + 1} validation datasets: the first in name order among those evaluated "
                    "most often; for " + (" or ".join(f"eval/score/{d}" for d in others)) + " give --metric "
                    + f"eval/score/{others[0]})" if others else "")
        if "eval/score" in rec:
            recs.append(rec)
    if not recs:
        return pd.DataFrame()
    return pd.DataFrame.from_records(recs)


_SAMPLE_NOTES = ("samples/retained computed", "batch size unknown")


def finalize(run: Run) -> Run:
    """(Re)compute the retained-sample axis and the evaluation points' x values.

    ``lr``: when the metadata lacks it, the first positive logged ``lr``.
    ``samples/retained``: the log's own counter when it has one (``meta.samples_source = "log"``), else
    steps x B (``"steps x B"``; Li et al. 2026 index curves by retained responses; without filtering every
    generated response is retained), else absent (``None``: B unknown, set P and G with ``--set``).
    Evaluation points get ``samples/retained`` and ``time/wall_s`` by interpolating the training steps, with the
    origin (step 0, 0 samples, 0 s) prepended. Returns the same run.
    """
    m = run.metrics
    meta = run.meta
    sched = lr_schedule(m["step"].to_numpy(dtype=float), m["lr"].to_numpy(dtype=float)) \
        if "lr" in m.columns and "step" in m.columns else None
    if sched is not None:
        meta.lr_schedule = sched
    if meta.lr is None and sched is not None:
        meta.lr = sched.get("schedule_peak") or sched["peak"]  # a run's learning rate is its peak
        _replace_note(run, ("lr: the peak",), lr_note(sched))
    if meta.batch_size is None and getattr(meta, "rollout_batch_size", None) is None and \
            not ("samples/retained" in m.columns and m["samples/retained"].notna().any()):
        meta = indirect.apply(run)
    src = getattr(meta, "samples_source", None)
    b = getattr(meta, "rollout_batch_size", None) or meta.batch_size  # a step is one rollout (of mini-batches)
    if "samples/retained" in m.columns and src != "steps x B" and m["samples/retained"].notna().any():
        meta.samples_source = "log"
    elif b is not None and len(m):
        m["samples/retained"] = m["step"].to_numpy(dtype=float) * b
        meta.samples_source = "steps x B"
        _replace_note(run, _SAMPLE_NOTES, f"samples/retained computed as steps x {b} (responses per rollout step): the log has no sample counter")
    else:
        if "samples/retained" in m.columns and src == "steps x B":
            m.drop(columns=["samples/retained"], inplace=True)
        meta.samples_source = None
        _replace_note(run, _SAMPLE_NOTES, "batch size unknown and no sample counter in the log: no retained-sample axis "
                        "(give P and G with --set RUN:prompts_per_step=... --set RUN:group_size=...)")
    ev = run.evals
    if len(ev) and "step" in ev.columns:
        steps = np.concatenate([[0.0], m["step"].to_numpy(dtype=float)])
        for col in ("samples/retained", "time/wall_s"):
            if col in ev.columns and ev[col].notna().all() and not (col == "samples/retained"
                                                                    and meta.samples_source == "steps x B"):
                continue  # the log's own value at the evaluation (run store's eval.jsonl)
            if col in m.columns and m[col].notna().any():
                ys = m[col].to_numpy(dtype=float)
                ok = ~np.isnan(ys)
                xs, ys = steps[np.concatenate([[True], ok])], np.concatenate([[0.0], ys[ok]])
                ev[col] = np.interp(ev["step"].to_numpy(dtype=float), xs, ys)
            elif col in ev.columns:
                ev.drop(columns=[col], inplace=True)
    return run


def clean_store_run(run: Run) -> Run:
    """A run read from a run-store directory, made as safe to analyse as a parsed log: canonical metric columns
    numeric (anything else -> missing), ``step`` a whole number in [0, 2**53] (other rows skipped), one row per
    step (the last record of a step re-logged after a resume kept), sorted by step.

    Raises :class:`UserError` naming ``metrics.jsonl`` when no row with a valid step is left. Skipped rows give a
    :class:`ReadWarning` naming the file.
    """
    base = Path(run.path) if run.path is not None else Path(run.run_id)
    for attr, name in (("metrics", METRICS_JSONL), ("evals", EVAL_JSONL)):
        df = getattr(run, attr)
        where = base / name
        if not len(df) or "step" not in df.columns:
            if attr == "metrics":
                raise UserError("no step records (missing, empty, or no 'step' field)", path=str(where))
            if len(df):
                warn("no 'step' field in the evaluation records; evaluations ignored", where)
            setattr(run, attr, pd.DataFrame())
            continue
        for c, dtype in df.dtypes.items():
            numeric = c in CANONICAL_METRICS or str(c).startswith(("eval/", "time/", "noise/"))
            if numeric and dtype != np.float64:
                df[c] = _numeric(df[c])
        step = df["step"]
        bad = ~(step.between(0, MAX_COUNT) & (step == np.floor(step)))
        if bad.any():
            warn(f"{int(bad.sum())} record(s) without a whole-number step in [0, 2**53]; skipped", where)
            df = df[~bad]
        if attr == "metrics" and df["step"].duplicated().any():
            warn(f"{int(df['step'].duplicated().sum())} step(s) logged more than once (resumed run?); kept the "
                 "last record of each", where)
            df = df.drop_duplicates("step", keep="last")
        if not df["step"].is_monotonic_increasing:
            df = df.sort_values("step", kind="stable")
        df = df.reset_index(drop=True)
        df["step"] = df["step"].astype(np.int64)
        if attr == "metrics" and df.empty:
            raise UserError("no record with a valid step", path=str(where))
        setattr(run, attr, df)
    return run


def _replace_note(run: Run, prefixes: tuple[str, ...], text: str) -> None:
    run.notes[:] = [n for n in run.notes if not n.startswith(prefixes)]
    run.notes.append(text)


def apply_overrides(run: Run, fields: dict[str, Any]) -> Run:
    """Apply ``--set`` overrides (``prompts_per_step``, ``group_size``, ``batch_size``, ``lr``, ``algorithm``...)
    to a run's metadata, re-derive B = P x G and the retained-sample axis. Raises :class:`UserError` naming the
    field when a value is invalid."""
    data = run.meta.model_dump()
    data.update(fields)
    if ("prompts_per_step" in fields or "group_size" in fields) and "batch_size" not in fields:
        data["batch_size"] = None
        data["rollout_batch_size"] = None
    srcs = {k: v for k, v in (data.get("config_sources") or {}).items() if k not in fields}
    if "prompts_per_step" in fields or "group_size" in fields:  # an inferred P and G no longer stand
        run.notes[:] = [n for n in run.notes if not (n.startswith(indirect.NOTE_START) and " inferred" in n)]
        srcs = {k: v for k, v in srcs.items() if not str(v).startswith("inferred: ")}
    data["config_sources"] = srcs or None
    run.meta = make_meta(f"--set for run {run.run_id!r}", **data)
    for k in fields:
        _replace_note(run, (f"{k} set by the user",), f"{k} set by the user: {fields[k]}")
    return finalize(run)


def meta_from(run_id: str, **fields: Any) -> dict[str, Any]:
    """Meta fields without Nones (so RunMeta defaults apply)."""
    out = {"run_id": run_id}
    out.update({k: v for k, v in fields.items() if v is not None})
    return out


def unique_ids(runs: list[Run]) -> list[Run]:
    """Make run ids unique by suffixing ``-2``, ``-3``... (two logs with the same file name in different folders)."""
    seen: dict[str, int] = {}
    for r in runs:
        rid = r.meta.run_id
        if rid in seen:
            seen[rid] += 1
            r.meta.run_id = f"{rid}-{seen[rid]}"
        else:
            seen[rid] = 1
    return runs


T = TypeVar("T")


def read_each(items: Sequence[T], read_one: Callable[[T], Run]) -> list[Run]:
    """``read_one`` of every item (run directories, tracker runs), in order. With one item its
    :class:`UserError` stands; with several, an item that cannot be read is skipped with a :class:`ReadWarning`
    (``skipped: <error>``). Returns the runs read (possibly none: the caller says what was missing)."""
    runs: list[Run] = []
    for it in items:
        try:
            runs.append(read_one(it))
        except UserError as err:
            if len(items) == 1:
                raise
            warn(f"skipped: {err}")
    return runs


__all__ = ["ReadWarning", "read_each", "warn", "to_float", "build_run", "finalize", "apply_overrides", "meta_from", "unique_ids",
           "RunMeta"]
