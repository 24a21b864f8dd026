"""verl console logs (``trainer.logger=['console']``, usually captured from a Ray job's stdout).

What is read
- step lines ``step:N - key:value - key:value ...`` anywhere on a line (after Ray's ``(TaskRunner pid=...)`` prefix
  and ANSI colour codes), every schema generation verl has printed: ``timing/gen`` (2024), ``timing_s/gen``,
  ``perf/throughput`` (2025); values with 3 decimals or as ``np.float64(...)``; names with a unit suffix
  (``actor/lr(1e-4):0.010`` = 1e-6);
- validation scores inside step lines (``val/test_score/<source>``, ``val-core/<source>/<var>/mean@N``) and the
  full-precision ``Initial/Final validation metrics: {...}`` prints (one line, or pprint'ed over several);
- P, G, learning rate, algorithm, model and GPU count from the printed config dict (the resolved config) or, when
  absent, from the launch command's Hydra overrides (``data.train_batch_size=1024``, with ``$VAR`` resolved from
  ``VAR=value`` lines in the log).

- G = 1 flagged as verl's default (``meta.group_size_source``) for PPO without ``rollout.n`` in the log, or with
  only vLLM's sampling kwargs ``{'n': 1, ...}`` (``{'n': 5, ...}`` of older verl is G);
- lines wrapped at a fixed column by a terminal or a paste are rejoined (:func:`..common.unwrap_lines`); NUL bytes
  are dropped.

A final line cut mid-write is skipped with a warning naming file and line. A log with no step line but a config or
launch command (a run whose ``trainer.logger`` had no ``console``) gives one error saying so and what to export; a
W&B "Run summary" block in it is read instead (final values only).
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.readers import consoles
from rlbatch.readers.common import (ANSI, RECORD_START, SCALAR_CALL, build_run, meta_from, open_text, plain_value,
                                    read_text, to_count, to_float, unwrap_lines, warn)
from rlbatch.readers.names import is_eval_name
from rlbatch.runstore import Run

RAY_PREFIX = re.compile(r"^\s*\((?:[\w.-]+(?: pid=\d+)?|(?:[\w.-]+ )?pid=\d+)(?:, [\w.]+=[\w.:/-]+)*\)\s?")
STEP = re.compile(r"(?:^|[\s\]|])step:(\d+) - ")
STEP_AT = re.compile(r"step:(\d+) - ")
SHELL_VAR = re.compile(r"^\s*(?:\+\+?\s*)?(?:export\s+)?([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s#]+)")
OVERRIDES = {
    "data.train_batch_size": "prompts_per_step",
    "actor_rollout_ref.rollout.n": "group_size",
    "actor_rollout_ref.actor.ppo_mini_batch_size": "ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_epochs": "ppo_epochs",
    "actor_rollout_ref.actor.optim.lr": "lr",
    "algorithm.adv_estimator": "adv_estimator",
    "actor_rollout_ref.model.path": "model",
    "trainer.n_gpus_per_node": "n_gpus_per_node",
    "trainer.nnodes": "nnodes",
}
OVERRIDE = re.compile(r"(?<![\w.])\+{0,2}(" + "|".join(re.escape(k) for k in OVERRIDES) + r")=([^\s'\"\\]+)")
CONFIG_PATHS = {
    "prompts_per_step": ("data", "train_batch_size"),
    "group_size": ("actor_rollout_ref", "rollout", "n"),
    "ppo_mini_batch_size": ("actor_rollout_ref", "actor", "ppo_mini_batch_size"),
    "ppo_epochs": ("actor_rollout_ref", "actor", "ppo_epochs"),
    "lr": ("actor_rollout_ref", "actor", "optim", "lr"),
    "adv_estimator": ("algorithm", "adv_estimator"),
    "model": ("actor_rollout_ref", "model", "path"),
    "n_gpus_per_node": ("trainer", "n_gpus_per_node"),
    "nnodes": ("trainer", "nnodes"),
}
#: vLLM's SamplingParams kwargs verl prints at rollout start: ``kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': ...}``
SAMPLING_N = re.compile(r"\{'n': (\d+), '(?:logprobs|max_tokens|temperature|top_p|top_k|detokenize)'")
HF_SNAPSHOT = re.compile(r"models--([^/]+)--([^/]+)")


def _update_batch(p: int | None, g: int | None, mini: int | None, epochs: int | None, notes: list[str]) -> dict:
    """The update batch of a verl run: ``actor.ppo_mini_batch_size`` (in prompts; verl multiplies it by
    ``rollout.n``) x G responses per optimizer update when it splits the P-prompt rollout (mini < P, dividing it):
    ``batch_size`` = mini x G and ``rollout_batch_size`` = P x G, the LR rule's and grad-norm fit's batch being the
    update's; otherwise nothing (one update per step: ``batch_size`` = P x G). ``ppo_epochs`` kept when given."""
    out: dict[str, Any] = {"ppo_epochs": epochs} if epochs else {}
    if p is None or g is None or mini is None or mini >= p:
        return out
    if p % mini:
        notes.append(f"ppo_mini_batch_size {mini} does not divide train_batch_size {p}; update batch taken as P x G")
        return out
    notes.append(f"update batch = ppo_mini_batch_size x rollout.n = {mini} x {g} = {mini * g} responses "
                 f"({p // mini} updates per rollout of {p * g}); the LR rule applies to it")
    return {**out, "batch_size": int(mini * g), "rollout_batch_size": int(p * g)}


#: the rest of a step line after a break: a name's tail (or nothing) then ``:value``, then `` - `` or the end
#: a metric's name and ``:value`` in a step line (the name may be cut short by a break)
_NAME = r"[\w/@.()%\[\]-]"
_VALUE = r":\s*[-+]?(?:\d|nan|inf)[\w.+-]*"
_CONTINUATION = re.compile(rf"^{_NAME}*{_VALUE}(?:\s+-\s+|\s*-?\s*$)")


#: a step line whose metrics follow one per line (``step:1`` then `` - actor/lr:1e-06`` ...), as a README shows it
_STEP_ALONE = re.compile(r"(?:^|[\s\]|])step:(\d+)\s*$")
#: one metric of such a block: `` - name:value`` alone on its line
_LISTED = re.compile(rf"^\s*-\s*{_NAME}+{_VALUE}\s*$", re.IGNORECASE)
#: content test for such a block within a file's head
_STEP_BLOCK = re.compile(rf"(?:^|[\s\]|])step:\d+[ \t]*\r?\n\s*-\s*{_NAME}+{_VALUE}", re.MULTILINE)


def join_broken_step_lines(numbered: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], int]:
    """A step line broken in two by a paste or an editor (``... - response_length/cl`` + ``ip_ratio:0.004 - ...``)
    rejoined: a line holding ``step:N - `` whose next line does not begin a record (:data:`RECORD_START`) and
    begins with the rest of a ``name:value`` pair (:data:`_CONTINUATION`). The two are joined without a separator
    when the break falls inside a name or value, with one space after a dangling `` -``. A ``step:N`` line followed
    by one `` - name:value`` per line (:data:`_STEP_ALONE`, :data:`_LISTED`: the separators turned into line breaks)
    becomes one step line. Returns the lines and how many were joined."""
    out: list[tuple[int, str]] = []
    joined = 0
    i = 0
    while i < len(numbered):
        ln, raw = numbered[i]
        if "step:" in raw and _STEP_ALONE.search(raw.rstrip("\r\n")):
            parts = [raw.rstrip("\r\n").rstrip()]
            while i + 1 < len(numbered) and _LISTED.match(numbered[i + 1][1]):
                parts.append(numbered[i + 1][1].strip().lstrip("-").strip())
                i += 1
            if len(parts) > 1:
                joined += len(parts) - 1
                raw = parts[0] + " - " + " - ".join(parts[1:]) + "\n"
        while (i + 1 < len(numbered) and "step:" in raw and STEP.search(raw)
               and not STEP.search(numbered[i + 1][1]) and not RECORD_START.match(numbered[i + 1][1])
               and _CONTINUATION.match(numbered[i + 1][1].strip())):
            head = raw.rstrip("\r\n")
            nxt = numbered[i + 1][1]
            raw = head + (" " if head.endswith((" -", " ")) else "") + nxt.lstrip()
            joined += 1
            i += 1
        out.append((ln, raw))
        i += 1
    return out, joined


def looks_like(head: str) -> bool:
    """Content test for format detection: a verl step line, or verl's launch/config in the first lines."""
    head = ANSI.sub("", head)
    return (bool(STEP.search(head)) or bool(_STEP_BLOCK.search(head)) or "verl.trainer" in head
            or "'actor_rollout_ref'" in head)


def _clean(line: str) -> str:
    return _split_prefix(line)[1]


def _split_prefix(line: str) -> tuple[str, str]:
    """``(Ray actor prefix, text)`` of a console line, ANSI codes removed."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if line.startswith(("(", " (")):
        m = RAY_PREFIX.match(line)
        if m:
            return m.group(0).strip(), line[m.end():]
    return "", line


def _dig(cfg: Any, keys: tuple[str, ...]) -> Any:
    for k in keys:
        if not isinstance(cfg, dict) or k not in cfg:
            return None
        cfg = cfg[k]
    return cfg


def _literal(text: str) -> Any:
    return ast.literal_eval(SCALAR_CALL.sub(r"\1", text))


def _val_dict(text: str) -> dict[str, Any] | None:
    """``"Final validation metrics: {...}"`` in any of the forms verl printed it -> the dict."""
    t = text.strip()
    if t.startswith(("(", '"', "'")):
        try:
            t = ast.literal_eval(t)
        except (ValueError, SyntaxError):
            pass
    if not isinstance(t, str) or "{" not in t:
        return None
    try:
        d = _literal(t[t.index("{"): t.rindex("}") + 1])
    except (ValueError, SyntaxError):
        return None
    return d if isinstance(d, dict) else None


class _PrintedConfig:
    """verl's pprint'ed config dict (the resolved config), collected line by line from a console: the lines of the
    actor that printed it (other Ray actors' output interleaves), without that actor's own unindented output printed
    mid-dict (a DeprecationWarning: pprint's continuation lines are always indented). ``config`` once parsed."""

    def __init__(self) -> None:
        self.config: dict | None = None
        self.buf: list[str] | None = None
        self.prefix = ""
        self.line = 0

    def _try(self) -> None:
        try:
            self.config = _literal("\n".join(self.buf))
            self.buf = None
        except (ValueError, SyntaxError):
            pass

    def feed(self, raw: str, lineno: int, path: Path) -> bool:
        """Take console line ``raw``; True when it belongs to the config (the caller skips it)."""
        if self.buf is not None:
            prefix, text = _split_prefix(raw)
            if prefix != self.prefix:
                return False
            if text[:1] not in (" ", "\t"):
                return True
            self.buf.append(text.rstrip("\r\n"))
            if self.buf[-1].rstrip().endswith("}"):
                self._try()
            if self.buf is not None and len(self.buf) > 3000:
                warn("could not parse the printed config dict; using the launch command", path, self.line)
                self.buf = None
            return True
        if self.config is None and "{'" in raw:
            prefix, line = _split_prefix(raw)
            if line.startswith("{'") and ("'actor_rollout_ref'" in line or "'algorithm'" in line
                                          or "'data'" in line or "'trainer'" in line):
                self.prefix, self.buf, self.line = prefix, [line.rstrip("\r\n")], lineno
                if self.buf[0].rstrip().endswith("}"):
                    self._try()
                return True
        return False


def printed_config(path: str | Path) -> dict | None:
    """The config dict verl printed into the console log ``path`` (:class:`_PrintedConfig`), or None."""
    cfg = _PrintedConfig()
    with open_text(Path(path)) as fh:
        numbered, _ = unwrap_lines(fh.readlines())
    for lineno, raw in numbered:
        cfg.feed(raw.replace("\x00", ""), lineno, Path(path))
        if cfg.config is not None:
            break
    return cfg.config


def read(path: str | Path, *, run_id: str | None = None, user_map: dict[str, str] | None = None) -> Run:
    """Read one verl console log into a :class:`Run` (canonical names; see the module docstring).

    Raises :class:`UserError` naming the file when it has no step line. Skipped lines (truncated last line,
    unparseable values) give a :class:`rlbatch.readers.common.ReadWarning` naming file and line.
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    shell: dict[str, str] = {}
    cmd: dict[str, str] = {}
    cfg = _PrintedConfig()
    val_buf: list[str] | None = None
    val_kind = ""
    extra_evals: list[tuple[int | None, dict]] = []
    bad_values = 0
    first_bad: tuple[int, str] | None = None
    last_raw = ""
    lineno = 0
    sampling_n: int | None = None
    with open_text(path) as fh:
        physical = fh.readlines()
    numbered, wrap_width = unwrap_lines(physical)
    numbered, n_broken = join_broken_step_lines(numbered)
    n_physical = len(physical)
    del physical
    for lineno, raw in numbered:
        if "\x00" in raw:  # NUL runs (a log file pre-allocated or cut by a crash, binary junk): dropped
            raw = raw.replace("\x00", "")
        last_raw = raw
        idx = raw.find("step:")
        m = None
        while idx >= 0:  # str.find + an anchored match: much faster than a regex search over the line
            if idx == 0 or raw[idx - 1].isspace() or raw[idx - 1] in "]|":  # also glued to a tqdm bar's "]"
                m = STEP_AT.match(raw, idx)
                if m:
                    break
            idx = raw.find("step:", idx + 5)
        if m is not None:
            rest = raw[m.end():].rstrip()
            if "\x1b" in rest:
                rest = ANSI.sub("", rest)
            if rest:
                rec: dict[str, Any] = {"step": int(m.group(1))}
                for part in rest.split(" - "):
                    k, sep, v = part.rpartition(":")
                    if not sep:
                        continue
                    try:
                        rec[k] = float(v)
                    except ValueError:
                        f = to_float(v)
                        if f is None:
                            bad_values += 1
                            if first_bad is None:
                                first_bad = (lineno, k)
                            continue
                        rec[k] = f
                rows.append(rec)
                lines.append(lineno)
                continue
        if cfg.feed(raw, lineno, path):
            continue
        if val_buf is not None:
            val_buf.append(_clean(raw).strip())
            if val_buf[-1].endswith(")") or len(val_buf) > 200:
                d = _val_dict(" ".join(val_buf))
                if d:
                    extra_evals.append((0 if val_kind == "Initial" else None, d))
                val_buf = None
            continue
        if "validation" in raw:
            line = _clean(raw).strip()  # after any ANSI / Ray prefix variant
            kind = "Initial" if "Initial validation" in line else "Final" if "Final validation" in line else ""
            if kind and "validation metrics" in line:
                if line.startswith("(") and not line.endswith(")") and line.count("{") != line.count("}"):
                    val_buf, val_kind = [line], kind
                else:
                    d = _val_dict(line)
                    if d:
                        extra_evals.append((0 if kind == "Initial" else None, d))
            continue
        if sampling_n is None and "{'n': " in raw:
            sm = SAMPLING_N.search(raw)
            if sm:
                sampling_n = int(sm.group(1))
        if "=" in raw and lineno < 5000 or "verl.trainer" in raw:
            m2 = SHELL_VAR.match(raw)
            if m2:
                shell.setdefault(m2.group(1), m2.group(2).strip("\"'"))
            for k, v in OVERRIDE.findall(raw):
                cmd.setdefault(k, v)

    config = cfg.config
    if wrap_width:
        notes_pre = [f"lines wrapped at column {wrap_width} (a terminal or a paste) rejoined: {n_physical} lines "
                     f"read as {len(numbered)}"]
    else:
        notes_pre = []
    if n_broken:
        notes_pre.append(f"{n_broken} line break(s) inside step lines (a paste wrapped inside a name or value, or "
                         "one metric per line) rejoined")
    if rows and not last_raw.endswith("\n") and lines[-1] == lineno:
        prev = next((r for r in reversed(rows[:-1]) if len(r) > 2), None)
        eval_only = all(k == "step" or is_eval_name(k) for k in rows[-1])
        if not eval_only and prev is None and len(rows[-1]) > 2:
            # the only step line, cut off (an excerpt pasted into an issue): its complete fields, not the last one
            cut = list(rows[-1])[-1]
            del rows[-1][cut]
            notes_pre.append(f"line {lineno}: the step line is cut off (no line end): its complete fields kept, the "
                             f"last one ({cut!r}) dropped")
        elif not eval_only and (prev is None or len(rows[-1]) < len(prev)):
            warn("truncated last line (no line end; fewer fields than the step before): skipped", path, lineno)
            rows.pop()
            lines.pop()
    if not rows:
        if consoles.WANDB_SUMMARY.search(read_text(path)):
            run = consoles.read(path, "wandb-summary", run_id=run_id, user_map=user_map)
            run.notes.insert(0, "no verl step lines: verl's trainer.logger had no 'console'; read the W&B Run summary")
            return run
        loggers = _dig(config, ("trainer", "logger")) if isinstance(config, dict) else None
        if isinstance(loggers, (list, tuple)) and "console" in loggers:
            raise UserError("no verl step lines: the run logged no step although its trainer.logger includes "
                            "'console' (it stopped before its first step finished?)", path=str(path))
        if config is not None or cmd:
            raise UserError("no verl step lines: no step metrics in this log (a verl run whose trainer.logger had "
                            "no 'console': W&B only?); export the run's history from W&B as CSV and analyze that, or "
                            "rerun with trainer.logger=['console','wandb']", path=str(path))
        raise UserError("no verl step lines ('step:N - name:value - ...') found", path=str(path))
    if bad_values:
        warn(f"{bad_values} value(s) that are not numbers skipped (first: {plain_value(first_bad[1])})", path, first_bad[0])

    notes: list[str] = notes_pre
    lr_vals = [r["actor/lr"] for r in rows if "actor/lr" in r]
    if lr_vals and max(lr_vals) == 0.0:  # printed with 3 decimals: 1e-6 reads 0.000
        for r in rows:
            r.pop("actor/lr", None)
        notes.append("actor/lr printed as 0.000 (3 decimals): not a learning rate; lr taken from the config"
                     + ("" if config is not None or cmd else " (none in this log: unknown)"))
    info: dict[str, Any] = {}
    for field, keys in CONFIG_PATHS.items():
        v = _dig(config, keys) if isinstance(config, dict) else None
        if v is not None:
            info[field] = v
    for key, field in OVERRIDES.items():
        if field not in info and key in cmd:
            v = cmd[key]
            if v.startswith("$"):
                v = shell.get(v.strip("${}"), v)
            info[field] = v
    g_default = False
    if "group_size" not in info and isinstance(config, dict) and _dig(config, ("actor_rollout_ref", "rollout")):
        info["group_size"] = 1
        g_default = True
        notes.append("group_size: rollout.n not in the printed config; verl's default n = 1 (flagged as a default)")
    if "group_size" not in info and sampling_n is not None and sampling_n > 1:
        info["group_size"] = sampling_n
        notes.append(f"group_size {sampling_n} from vLLM's sampling kwargs {{'n': {sampling_n}, ...}} (rollout.n)")
    if config is None and not cmd:
        notes.append("no config or launch command in the log: P, G and lr unknown (use --set)")

    def num(field: str, cast) -> Any:
        v = info.get(field)
        if v is None:
            return None
        f = to_count(v) if cast is int else to_float(v)
        if f is None or not math.isfinite(f) or f <= 0:
            warn(f"{field} = {str(v)[:40]!r} in the log is not a {'count' if cast is int else 'positive number'}; "
                 "ignored", path)
            return None
        return f

    est = str(info.get("adv_estimator") or "").lower()
    algorithm = {"gae": "ppo"}.get(est, est) or None
    if algorithm is None:
        has_critic = any("critic/vf_loss" in r or "critic/grad_norm" in r for r in rows[:5])
        algorithm = "ppo" if has_critic else "grpo"
        notes.append(f"algorithm not in the log; guessed {algorithm!r} from the metrics")
    if "group_size" not in info and algorithm == "ppo":
        info["group_size"] = 1
        g_default = True
        why = "only vLLM's sampling kwargs {'n': 1, ...}" if sampling_n == 1 else "no rollout.n in the log"
        notes.append(f"group_size: {why}; verl's default n = 1 for PPO (flagged as a default; --set "
                     "RUN:group_size=... if the run set it)")
    model = info.get("model")
    if isinstance(model, str):
        m = HF_SNAPSHOT.search(model)
        model = f"{m.group(1)}/{m.group(2)}" if m else model
    hardware = None
    if info.get("n_gpus_per_node") is not None:
        hardware = f"{info.get('nnodes', 1)} node(s) x {info['n_gpus_per_node']} GPU(s)"
    p_, g_ = num("prompts_per_step", int), num("group_size", int)
    batches = _update_batch(p_, g_, num("ppo_mini_batch_size", int), num("ppo_epochs", int), notes)
    fields = meta_from(run_id or path.stem, algorithm=algorithm, model=model,
                       group_size_source="verl default" if g_default else None,
                       prompts_per_step=p_, group_size=g_, lr=num("lr", float), backend="verl", hardware=hardware,
                       **batches)
    return build_run(rows, path=path, source_format="verl", meta_fields=fields, notes=notes, lines=lines,
                     extra_evals=extra_evals, user_map=user_map)
