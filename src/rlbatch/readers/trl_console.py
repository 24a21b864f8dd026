"""TRL / transformers console output: the Python-dict log lines ``Trainer`` prints (``{'loss': 0.0, 'grad_norm':
..., 'learning_rate': ..., 'reward': ..., 'epoch': 0.31}``), often glued to the end of tqdm progress output
(``10/200 [01:23<26:20, 8.32s/it]{'loss': ...}``), sometimes pasted inside a Markdown fence.

The dicts carry no step number. The step of each training record comes from, in this order (the run's notes and
``meta.step_source`` say which):

0. ``logged global_step``: ms-swift's records carry ``'global_step/max_steps': '5/500'``;
1. ``progress counter``: the training progress bar's ``N/M`` last printed before the dict (``Trainer`` logs after
   the bar reached the step; evaluation bars, whose total differs, are ignored); its elapsed time ``[01:23<``
   gives ``time/wall_s`` (evaluation included) and ``time/step_s``;
2. ``logging_steps``: when the output states ``logging_steps=K`` (the printed ``TrainingArguments``), record i is
   step K x i;
3. ``progress total``: the training bar reached its total T and the n records fit one whole logging interval
   only (``_cadence_from_total``; for output whose dicts were flushed out of order with the bar);
4. ``epoch growth``: the records' ``epoch`` grows by a constant d per record (the logging cadence) and every
   epoch / d is a whole number: record i is logging interval epoch_i / d (in units of the logging cadence);
5. ``records counted``: records numbered 1, 2, ... in file order.

TRL's PPO trainer counts ``episode`` (cumulative episodes, read as ``samples/generated``) instead of steps;
``eps`` there is episodes per second, not a count. Evaluation dicts (``eval_*``) are evaluation points at the step
of the record before them; the final summary (``train_runtime``...) gives the run's wall-clock.

Nothing but text is read: TRL's ``training_args.bin`` is a pickle and is never loaded.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.readers.common import (RECORD_START, build_run, finalize, meta_from, read_text,
                                    step_of_fraction, to_count, to_float, unwrap_lines)
from rlbatch.readers.extract import parse_pydict
from rlbatch.readers.linescan import lost_counter, truncated_dict
from rlbatch.readers.names import ELAPSED_NAMES, duration_s
from rlbatch.runstore import Run

#: a TRL log dict: ``{'key': value, ...}`` with one of the keys Trainer always logs
DICT_START = re.compile(r"\{'(?:loss|grad_norm|learning_rate|reward|rewards/[^']*|train_runtime|eval_[^']*|"
                        r"objective/[^']*|episode|eps|epoch|completion_length|kl)'\s*:")
COUNTER = re.compile(r"(?<!\d)(\d{1,12})/(\d{1,12}) \[")  # bounded: linear on a line of a million digits
LOGGING_STEPS = re.compile(r"\blogging_steps\s*[=:]\s*(\d+)")
SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}
#: keys of TRL's PPO trainer that are not what the same name means elsewhere
PPO_KEYS = {"eps"}  # episodes per second


def looks_like(head: str) -> bool:
    """Content test: at least one TRL log dict with ``epoch``, ``learning_rate`` or ``episode`` in it."""
    for m in DICT_START.finditer(head):
        tail = head[m.start(): m.start() + 4000]
        end = tail.find("}")
        body = tail[: end if end > 0 else len(tail)]
        if "'epoch'" in body or "'learning_rate'" in body or "'episode'" in body:
            return True
    return False


ELAPSED = re.compile(r"(\d{1,4}):(\d{2})(?::(\d{2}))?<")


def _elapsed(text: str, pos: int) -> float | None:
    """Seconds of a tqdm ``[MM:SS<`` or ``[H:MM:SS<`` elapsed field starting at ``pos``, or None."""
    m = ELAPSED.match(text, pos)
    if not m:
        return None
    a, b, c = m.group(1), m.group(2), m.group(3)
    return float(int(a) * 3600 + int(b) * 60 + int(c)) if c is not None else float(int(a) * 60 + int(b))


#: marks a dict the text ended inside (removed before the values are read)
TRUNCATED = "__truncated__"


def _dicts(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """``(line, offset in text, dict)`` for every parseable TRL dict in ``text``."""
    out = []
    pos = last = 0
    line = 1
    for m in DICT_START.finditer(text):
        if m.start() < pos:
            continue
        end = text.find("}", m.start())
        if end < 0:  # the text ends inside this dict (a cut log or excerpt): its complete fields, marked
            d = truncated_dict(text[m.start():])
            if d is not None and not text[m.start():].rstrip().endswith(("}", "```")) and \
                    "\n\n" not in text[m.start():].rstrip():
                d[TRUNCATED] = True
                out.append((line + text.count("\n", last, m.start()), m.start(), d))
            break
        span = text[m.start(): end + 1]
        d = parse_pydict(span)
        if d is None and "\n" in span and not any(RECORD_START.match(x) for x in span.split("\n")[1:]):
            # a dict repr is printed on one line: a line end inside it is a paste or editor breaking the line
            # (inside a name or a number), so the pieces are joined as they were
            d = parse_pydict(span.replace("\n", ""))
        if d is None:
            continue
        line += text.count("\n", last, m.start())
        last = m.start()
        out.append((line, m.start(), d))
        pos = end + 1
    return out


def _epoch_cadence_with_gaps(epochs: list[float]) -> tuple[float, list[float], bool] | None:
    """Epochs printed rounded (2 decimals) at a steady cadence, with records missing from the output (a cut log):
    ``(epoch per record d, epoch / d per record, True)`` from a least-squares fit through the origin of the epochs
    against their record counts, or None when the small increments (the cadence) are not most of them or a jump
    is not a whole number of them."""
    d_e = [b - a for a, b in zip(epochs, epochs[1:])]
    pos = sorted(x for x in d_e if x > 0)
    if len(pos) < len(d_e) or not pos:
        return None
    small = [x for x in d_e if x <= 1.6 * pos[0]]
    if len(small) < max(2, 0.6 * len(d_e)):
        return None
    # the cadence from the longest run of records without a gap (end to end: the rounding errors do not add up)
    best, start = (0, 0), None
    for i, x in enumerate(d_e + [float("inf")]):
        if x <= 1.6 * pos[0]:
            start = i if start is None else start
        elif start is not None:
            best = max(best, (i - start, start))
            start = None
    n_run, at = best
    if n_run < 2:
        return None
    # a gap is several records missing (a cut log), and rare; increments of about twice the cadence are rounding
    # (a record every 2 of 187 steps printed with 2 decimals: 0.01, 0.02, 0.03, 0.05, ...), not gaps
    big = [x for x in d_e if x > 1.6 * pos[0]]
    if any(x < 3 * pos[0] for x in big) or len(big) > max(1, len(d_e) // 10):
        return None
    base = (epochs[at + n_run] - epochs[at]) / n_run
    ks = [max(1, round(epochs[0] / base))]
    for x in d_e:
        ks.append(ks[-1] + max(1, round(x / base)))
    d = sum(e * k for e, k in zip(epochs, ks)) / sum(k * k for k in ks)
    return d, [e / d for e in epochs], True


def _cadence_from_total(counters: list[tuple[int, int, int, float | None]],
                        epochs: list[float | None]) -> tuple[int, int] | None:
    """``(logging interval K, total steps T)`` when the training bar's total T was reached (its last counter is
    T/T) and the n records fit one whole interval only (n K <= T < (n + 1) K, K = T // n) with their epochs on
    the line epoch_i = i K / S for one number of steps per epoch S (within 0.006: TRL prints the epoch rounded to
    2 decimals); else None."""
    n = len(epochs)
    if n < 2 or not counters or not all(e is not None and math.isfinite(e) and e > 0 for e in epochs):
        return None
    totals = [c[2] for c in counters]
    total = max(set(totals), key=totals.count)
    if not any(c[1] == total and c[2] == total for c in counters) or total < n:
        return None
    k = total // n
    if not total < (n + 1) * k:
        return None
    xs = [(i + 1) * k for i in range(n)]
    inv = sum(x * e for x, e in zip(xs, epochs)) / sum(x * x for x in xs)  # 1 / S, least squares through 0
    if all(abs(x * inv - e) <= 0.006 for x, e in zip(xs, epochs)):
        return k, total
    return None


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None) -> Run:
    """Read TRL console output into a :class:`Run` (see the module docstring for how steps are found).

    Raises :class:`UserError` naming the file when no training record is found.
    """
    path = Path(path)
    text = read_text(path)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    numbered, width = unwrap_lines(text.splitlines(keepends=True))
    if width:
        text = "".join(t for _, t in numbered)
    found = _dicts(text)
    cut = [d.pop(TRUNCATED) for _, _, d in found if TRUNCATED in d]
    cut_note = None
    if cut:
        lost = lost_counter([d for _, _, d in found[:-1]], found[-1][2])
        if lost:  # cut before the counter its step comes from: no step to place it at
            found = found[:-1]
            cut_note = f"the last record is cut off before its step counter {lost!r} (the text ends inside it): dropped"
        else:
            cut_note = (f"the last record is cut off (the text ends inside it): its {len(found[-1][2])} complete "
                        "fields kept, the field cut in half dropped")
    counters = [(m.start(), int(m.group(1)), int(m.group(2)), _elapsed(text, m.end()))
                for m in COUNTER.finditer(text)]
    train, evals, runtime = [], [], None
    for line, off, d in found:
        if SUMMARY_KEYS & d.keys():
            runtime = to_float(d.get("train_runtime"))
            continue
        if d and all(str(k).startswith("eval_") or k == "epoch" for k in d):
            evals.append((line, off, d))
        else:
            train.append((line, off, d))
    if not train:
        raise UserError("no TRL training log dicts ({'loss': ..., 'learning_rate': ..., 'epoch': ...}) found",
                        path=str(path))

    def last_counter(off: int, total: int | None = None) -> tuple[int, int, float | None] | None:
        best = None
        for c_off, n, m, el in counters:
            if c_off > off:
                break
            if total is None or m == total:
                best = (n, m, el)
        return best

    notes: list[str] = []
    if cut_note:
        notes.append(cut_note)
    elapsed: list[float] | None = None
    if width:
        notes.append(f"lines wrapped at column {width} (a terminal or a paste) rejoined")
    ppo = any("episode" in d for _, _, d in train)
    own = [step_of_fraction(d.get("global_step/max_steps")) for _, _, d in train]
    cands = [last_counter(off) for _, off, _ in train]
    totals = [c[1] for c in cands if c is not None]
    steps: list[int | None]
    source: str
    if all(x is not None for x in own) and len(set(own)) == len(own):
        steps, source = list(own), "logged global_step"
        notes.append("steps from the records' own 'global_step/max_steps' (ms-swift)")
    elif totals and len(totals) == len(train):
        m_train = max(set(totals), key=totals.count)
        at = [last_counter(off, m_train) or (None, None, None) for _, off, _ in train]
        steps = [a[0] for a in at]
        if all(s is not None for s in steps) and len(set(steps)) == len(steps):
            source = "progress counter"
            notes.append(f"steps from the training progress counter (N/{m_train}) printed before each record")
            els = [a[2] for a in at]
            if all(e is not None for e in els) and all(b >= a for a, b in zip(els, els[1:])) and \
                    all(b > a for a, b in zip(steps, steps[1:])):
                elapsed = els
                notes.append("time/wall_s: the progress bar's elapsed time at each record (includes any "
                             "evaluation run in between); time/step_s: its growth per step")
        else:
            steps, source = [], ""
    else:
        steps, source = [], ""
    if not source:
        ls = LOGGING_STEPS.search(text)
        epochs = [to_float(d.get("epoch")) for _, _, d in train]
        k = to_count(ls.group(1)) if ls else None
        if k:
            steps = [k * (i + 1) for i in range(len(train))]
            source = "logging_steps"
            notes.append(f"steps from logging_steps = {k} stated in the output: record i is step {k} x i "
                         "(records assumed to start at the first logging step)")
        elif (cad := _cadence_from_total(counters, epochs)) is not None:
            k, total = cad
            steps = [k * (i + 1) for i in range(len(train))]
            source = "progress total"
            notes.append(f"steps from the progress bar's total ({total} steps, reached) and {len(train)} evenly spaced "
                         f"records: one every {k} steps, the only whole interval that fits (their epochs agree); "
                         "the counters printed before the records were not used (output buffered out of order?)")
        elif len(train) >= 2 and all(e is not None and math.isfinite(e) and e > 0 for e in epochs):
            d_e = [b - a for a, b in zip(epochs, epochs[1:])]
            d = sorted(d_e)[len(d_e) // 2]
            even = d > 0 and all(abs(x - d) <= 0.2 * d for x in d_e)  # a rounded epoch (0.01, 0.02, ...) is not
            idx = [e / d for e in epochs] if even else []
            gaps = False
            if not even:
                fit = _epoch_cadence_with_gaps(epochs)
                if fit is not None:
                    d, idx, gaps = fit[0], fit[1], True
            if idx and all(math.isfinite(x) and x < 2**53 for x in idx) and all(abs(x - round(x)) < 0.25 for x in idx) and len({round(x) for x in idx}) == len(idx):
                steps = [int(round(x)) for x in idx]
                source = "epoch growth"
                notes.append(f"steps from epoch growth: epoch grows by {d:.4g} per record (the logging cadence); "
                             f"record i is logging interval epoch / {d:.4g}; steps counted in logging intervals"
                             + ("; records missing from the output (a jump in epoch) leave a gap in the steps"
                                if gaps else ""))
            else:
                notes.append(f"epoch grows by about {d:.4g} per record (evenly spaced: the logging cadence) but "
                             "steps per epoch are not in the output" + (f"; the first record is at epoch "
                             f"{epochs[0]:.4g}: the output begins mid-run" if epochs[0] > 1.5 * d else ""))
        if not source:
            steps = list(range(1, len(train) + 1))
            source = "records counted"
            notes.append("no step counter in the output: records numbered 1, 2, ... in file order (steps counted "
                         "in logging intervals; --set or a trainer_state.json gives the real steps)")
    if ppo:
        notes.append("TRL PPO trainer: 'episode' is the cumulative episode count (samples/generated); 'eps' is "
                     "episodes per second")
    rows, lines = [], []
    for i, ((line, _, d), s) in enumerate(zip(train, steps)):
        rec: dict[str, Any] = {"step": s}
        if elapsed is not None:
            prev_t, prev_s = (elapsed[i - 1], steps[i - 1]) if i else (0.0, 0)
            rec["time/wall_s"] = elapsed[i]
            if s > prev_s:  # a counter that repeats or runs backwards (a corrupted or pasted log) has no step time
                rec["time/step_s"] = (elapsed[i] - prev_t) / (s - prev_s)
        for k, v in d.items():
            if k in ("epoch", "global_step/max_steps") or k in PPO_KEYS and ppo:
                continue
            if k == "episode" and ppo:
                k = "samples/generated"
            elif ppo and str(k).startswith("val/"):  # PPO's value-head statistics, not validation
                k = "value/" + str(k)[4:]
            f = duration_s(v) if k in ELAPSED_NAMES else to_float(v)  # ms-swift's "elapsed_time": "1m 35s"
            if f is not None:
                rec[str(k)] = f
        rows.append(rec)
        lines.append(line)
    # evaluation dicts: at the step of the training record before them (or the progress counter)
    for line, off, d in evals:
        before = [s for (_, o, _), s in zip(train, steps) if o < off]
        s = before[-1] if before else 0
        rec = {"step": s}
        rec.update({str(k): to_float(v) for k, v in d.items() if k != "epoch" and to_float(v) is not None})
        rows.append(rec)
        lines.append(line)
    fields = meta_from(run_id or path.stem, backend="trl", algorithm="ppo" if ppo else "grpo", step_source=source)
    run = build_run(rows, path=path, source_format="trl-console", meta_fields=fields, notes=notes, lines=lines,
                    user_map=user_map)
    m = run.metrics
    if "time/wall_s" not in m.columns and runtime is not None and runtime > 0 and len(m):
        m["time/wall_s"] = m["step"].to_numpy(dtype=float) / float(m["step"].max()) * runtime
        run.notes.append("time/wall_s: train_runtime spread evenly over the steps (no per-step timer logged)")
        finalize(run)
    return run
