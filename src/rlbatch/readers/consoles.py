"""Console outputs of other RL frameworks, detected by content (issue 14, class 9).

| format | what is read |
|---|---|
| ``prime-rl`` | orchestrator step lines ``Step N \\| Time: 72.00s \\| Reward: 0.34 \\| Throughput: 2314.0 tokens/s \\| Seq. Length: 323.7 tokens/sample \\| Async Level: 1 ...``; the rollout progress bar's total (``Generating rollouts (train): ... 512/512``) as the responses per step B |
| ``nemo-rl`` | NeMo-RL's per-step blocks: ``==== Step N/M ====``, then ``Training Results:`` and ``Timing:`` bullet lists (``  • Avg Reward: 0.35``, ``  • policy_training: 40.00s (32.4%)``) |
| ``slime`` | slime's ``perf N: {...}``, ``rollout N: {...}`` and ``step N: {...}`` dict records (N the rollout id) |
| ``wandb-summary`` | W&B's console ``Run summary:`` block (``wandb:   name value`` lines): final values only, one record |
| ``easyr1`` | EasyR1's console logger (``verl/utils/logger/logger.py``, ``ConsoleLogger``): ``Config`` then the config as YAML (``yaml.dump(config, indent=2)``), and per step ``Step N`` then the step's metrics unflattened at ``/`` as YAML (``actor:`` / ``  grad_norm: 0.2``); verl's names after flattening back (``actor/lr``, ``critic/score/mean``, ``timing_s/step``, ``val/reward_score``). P = ``data.rollout_batch_size``, G = ``worker.rollout.n``, the update batch ``worker.actor.global_batch_size`` x G, lr ``worker.actor.optim.lr`` |

Each is turned into foreign-name rows for :func:`rlbatch.readers.common.build_run`; names map through
:mod:`rlbatch.readers.names`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from rlbatch.batchspec import flatten
from rlbatch.errors import UserError
from rlbatch.readers.common import ANSI, SCALAR_CALL, build_run, meta_from, read_text, to_count, to_float, warn
from rlbatch.runstore import Run


# ---- prime-rl -------------------------------------------------------------------------------------------------
PRIME_STEP = re.compile(r"\bStep (\d{1,12}) \| Time: ")
PRIME_NAMES = {"Time": "time/step_s", "Reward": "reward/mean", "Throughput": "throughput_tokens_per_s",
               "Seq. Length": "seq_length_tokens", "Async Level": "async_level",
               "Max. Off-Policy Level": "max_off_policy_level"}
PRIME_ROLLOUTS = re.compile(r"Generating rollouts \(train\):.*?\|\s*(\d+)/(\d+) \[")

# ---- NeMo-RL ----------------------------------------------------------------------------------------------------
NEMO_STEP = re.compile(r"(?<!=)={3,}[ \t]*Step (\d{1,12})(?:/(\d{1,12}))?[ \t]*={3,}")
NEMO_BULLET = re.compile(r"^\s*[•*-]\s+([^:]+):\s*([-+0-9.eE]+)\s*s?\b")
NEMO_NAMES = {"Avg Reward": "reward/mean", "Loss": "loss", "Total step time": "total_step_time",
              "Mean Generation Length": "response_length/mean", "Grad Norm": "grad_norm"}

# ---- slime ------------------------------------------------------------------------------------------------------
SLIME_REC = re.compile(r"\b(perf|rollout|step|eval) (\d{1,12}): (\{.*\})\s*$")

# ---- EasyR1 -----------------------------------------------------------------------------------------------------
EASYR1_HEAD = re.compile(r"^(Config|Step (\d{1,12}))\s*$")
#: a YAML block line of EasyR1's dump: a key at the margin or indented, or a list item
EASYR1_YAML = re.compile(r"^(?:[ ]*[\w./@\-]+:(?: .*)?|[ ]*- .*)$")
#: EasyR1's config fields -> (field, how): P, G, update batch in prompts (x G responses), lr
EASYR1_CONFIG = {"data/rollout_batch_size": "prompts_per_step", "worker/rollout/n": "group_size",
                 "worker/actor/global_batch_size": "update_prompts", "worker/actor/optim/lr": "lr"}

# ---- W&B console summary ----------------------------------------------------------------------------------------
#: W&B's console lines, after any Ray actor prefix (``(TaskRunner pid=1) wandb: ...``, verl)
WANDB_PREFIX = re.compile(r"^\s*(?:\([^()\n]{0,200}\)\s*)?wandb:")
WANDB_SUMMARY = re.compile(r"^\s*(?:\([^()\n]{0,200}\)\s*)?wandb:\s+Run summary:\s*$", re.M)
WANDB_LINE = re.compile(r"^\s+(\S.*?)\s+(\S+)\s*$")  # "   train/reward 0.82", "   learning rate 0.0"
STEP_KEYS = ("train/global_step", "global_step", "training/global_step", "trainer/global_step", "_step", "step")


#: the formats of this module, in the order :func:`detect` tries them
FORMATS = ("prime-rl", "nemo-rl", "slime", "wandb-summary", "easyr1")


def detect(head: str) -> str | None:
    """The console format of ``head`` (``prime-rl``, ``nemo-rl``, ``slime``, ``wandb-summary``) or None."""
    if "\x1b" in head:
        head = ANSI.sub("", head)
    if PRIME_STEP.search(head) and "Reward: " in head:
        return "prime-rl"
    if NEMO_STEP.search(head) and ("raining Results" in head or "raining results" in head or "Timing:" in head):
        return "nemo-rl"
    if re.search(r"\bperf \d+: \{", head) or re.search(r"\brollout \d+: \{'rollout/", head):
        return "slime"
    if WANDB_SUMMARY.search(head):
        return "wandb-summary"
    if re.search(r"(?m)^Step \d{1,12}\n[\w./-]+:\n {2}[\w./-]+:", head) or (
            re.search(r"(?m)^Config\n[\w./-]+:\n {2}", head) and re.search(r"(?m)^ +rollout_batch_size: ", head)):
        return "easyr1"
    return None


def _lines(path: Path) -> tuple[list[str], bool]:
    text = read_text(path)
    ends = text.endswith("\n")
    text = ANSI.sub("", text) if "\x1b" in text else text
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), ends


def read(path: str | Path, fmt: str, *, run_id: str | None = None, user_map: dict[str, str] | None = None) -> Run:
    """Read a console log of format ``fmt`` (see the module table) into a :class:`Run`.

    Raises :class:`UserError` naming the file when it holds no record of that format.
    """
    path = Path(path)
    reader = {"prime-rl": _prime, "nemo-rl": _nemo, "slime": _slime, "wandb-summary": _wandb, "easyr1": _easyr1}[fmt]
    rows, lines, meta, notes = reader(path)
    if not rows:
        raise UserError(f"no {fmt} step records found", path=str(path))
    fields = meta_from(run_id or path.stem, backend=fmt, **meta)
    return build_run(rows, path=path, source_format=fmt, meta_fields=fields, notes=notes, lines=lines,
                     user_map=user_map)


def _prime(path: Path):
    text_lines, ends = _lines(path)
    rows, lines, notes = [], [], []
    totals: list[int] = []
    for i, line in enumerate(text_lines, 1):
        pm = PRIME_ROLLOUTS.search(line)
        if pm:
            totals.append(int(pm.group(2)))
            continue
        m = PRIME_STEP.search(line)
        if not m:
            continue
        body = line[m.start() + len(f"Step {m.group(1)} | "):]
        cut = i == len(text_lines) and not ends
        rec: dict[str, Any] = {"step": int(m.group(1))}
        parts = body.split(" | ")
        if cut:
            parts = parts[:-1]  # the last field may be cut mid-value
        for part in parts:
            k, sep, v = part.partition(": ")
            if not sep:
                continue
            num = re.match(r"\s*([-+0-9.eE]+)", v)
            f = to_float(num.group(1)) if num else None
            if f is None:
                continue
            rec[PRIME_NAMES.get(k.strip(), k.strip().lower().replace(" ", "_").replace(".", ""))] = f
        if cut:
            warn("last line cut (no line end): its last field skipped", path, i)
        rows.append(rec)
        lines.append(i)
    meta: dict[str, Any] = {"algorithm": "grpo"}
    if totals and len(set(totals)) == 1:
        meta["batch_size"] = totals[0]
        notes.append(f"batch_size {totals[0]}: rollouts per step from the 'Generating rollouts (train)' progress "
                     "bar; P and G separately unknown (use --set RUN:prompts_per_step=... --set RUN:group_size=...)")
    else:
        notes.append("P and G not in the log (use --set RUN:prompts_per_step=... --set RUN:group_size=...)")
    return rows, lines, meta, notes


def _nemo(path: Path):
    text_lines, _ = _lines(path)
    rows, lines, notes = [], [], []
    cur: dict[str, Any] | None = None
    total = None
    section = None
    for i, line in enumerate(text_lines, 1):
        m = NEMO_STEP.search(line)
        if m:
            cur = {"step": int(m.group(1))}
            total = m.group(2) or total
            rows.append(cur)
            lines.append(i)
            section = None
            continue
        if cur is None:
            continue
        low = line.strip().lower().rstrip(":")
        if low.endswith("training results") or low.endswith("timing"):  # "📊 Training Results:", "⏱️  Timing:"
            section = "timing" if low.endswith("timing") else "results"
            continue
        b = NEMO_BULLET.match(line)
        if b and section:
            k, v = b.group(1).strip(), to_float(b.group(2))
            if v is None:
                continue
            name = NEMO_NAMES.get(k, k if section == "timing" else k.lower().replace(" ", "_"))
            cur[name] = v
    rows = [r for r in rows if len(r) > 1]
    if total:
        notes.append(f"NeMo-RL step blocks (Step N/{total})")
    notes.append("P and G not in the log (use --set RUN:prompts_per_step=... --set RUN:group_size=...)")
    return rows, lines[: len(rows)], {"algorithm": "grpo"}, notes


def _slime(path: Path):
    text_lines, _ = _lines(path)
    by_id: dict[int, dict[str, Any]] = {}
    first_line: dict[int, int] = {}
    evals: list[dict[str, Any]] = []
    eval_lines: list[int] = []
    bad = 0
    for i, line in enumerate(text_lines, 1):
        m = SLIME_REC.search(line)
        if not m:
            continue
        try:
            body = SCALAR_CALL.sub(r"\1", m.group(3))  # tensor(0.5), np.float64(0.5)
            d = ast.literal_eval(re.sub(r"(?<![\w'\"])(nan|inf)(?![\w'\"])", "None", body))
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            bad += 1
            continue
        if not isinstance(d, dict):
            continue
        rid = int(m.group(2))
        if m.group(1) == "eval":  # evaluation: its own record at the rollout id (its perf/* are eval timings)
            ev = {"step": rid}
            for k, v in d.items():
                f, k = to_float(v), str(k)
                if f is None:
                    continue
                ds = k[len("eval/"):] if k.startswith("eval/") else None
                ev[f"val/test_score/{ds}" if ds and "/" not in ds and "-" not in ds else f"val/{k}"] = f
            evals.append(ev)
            eval_lines.append(i)
            continue
        rec = by_id.setdefault(rid, {"step": rid})
        first_line.setdefault(rid, i)
        for k, v in d.items():
            f = to_float(v)
            if f is not None and str(k) not in ("step", "rollout/step"):
                rec[str(k)] = f
    if bad:
        warn(f"{bad} slime record(s) not parseable as a dict; skipped", path)
    ids = sorted(by_id)
    rows = [by_id[k] for k in ids]
    notes = ["slime records grouped by rollout id (one optimizer step per rollout)",
             "P and G not in the log (use --set RUN:prompts_per_step=... --set RUN:group_size=...)"]
    return rows + evals, [first_line[k] for k in ids] + eval_lines, {"algorithm": "grpo"}, notes


def _wandb(path: Path):
    text_lines, _ = _lines(path)
    rec: dict[str, Any] = {}
    start = None
    inside = False
    for i, line in enumerate(text_lines, 1):
        pm = WANDB_PREFIX.match(line)
        if pm is None:
            inside = False
            continue
        body = line[pm.end():]
        if body.strip() == "Run summary:":
            start, rec, inside = i, {}, True  # the last summary in the file wins
            continue
        if not inside:
            continue
        m = WANDB_LINE.match(body)
        if not body.strip() or m is None:
            inside = False  # "wandb:" blank line or "wandb: View run ..." ends the block
            continue
        f = to_float(m.group(2))
        if f is not None:
            rec[m.group(1).replace("\\_", "_")] = f
    if not rec:
        return [], [], {}, []
    step = next((to_count(rec[k]) for k in STEP_KEYS if k in rec and to_count(rec[k])), None)
    notes = ["W&B console 'Run summary': final values only (one record, values as W&B rounded them); export the "
             "run's history from W&B (CSV) for the curves"]
    for k in STEP_KEYS:
        rec.pop(k, None)
    rec["step"] = step if step is not None else 1
    if step is None:
        notes.append("no step in the summary: the one record is step 1")
    return [rec], [start], {}, notes


def _easyr1(path: Path):
    """EasyR1's console (module table): each ``Config`` / ``Step N`` heading and the YAML lines under it, parsed
    with ``yaml.safe_load`` (never anything that runs code) and flattened at ``/``. Other lines (Ray, tqdm, prints)
    end a block. A block that is not valid YAML (cut by a crash) is skipped with a warning."""
    import yaml

    text_lines, _ = _lines(path)
    blocks: list[tuple[str, int, list[str]]] = []
    cur = None
    for i, line in enumerate(text_lines, 1):
        m = EASYR1_HEAD.match(line)
        if m:
            cur = (m.group(2) if m.group(2) is not None else "config", i, [])
            blocks.append(cur)
            continue
        if cur is not None and EASYR1_YAML.match(line):
            cur[2].append(line)
        else:
            cur = None
    rows, lines, notes, cfg, bad = [], [], [], {}, 0
    for key, i, body in blocks:
        try:
            d = yaml.safe_load("\n".join(body)) if body else None
        except yaml.YAMLError:
            bad += 1
            continue
        if not isinstance(d, dict):
            continue
        flat = flatten(d, "/")
        if key == "config":
            cfg = flat
            continue
        rec: dict[str, Any] = {"step": int(key)}
        for k, v in flat.items():
            f = to_float(v)
            if f is not None:
                rec[k] = f
        if len(rec) > 1:
            rows.append(rec)
            lines.append(i)
    if bad:
        warn(f"{bad} EasyR1 block(s) not valid YAML (cut short?): skipped", path)
    meta: dict[str, Any] = {"algorithm": "ppo" if str(cfg.get("algorithm/adv_estimator")) == "gae" else "grpo"}
    got = {field: to_count(cfg[k]) if field != "lr" else to_float(cfg[k])
           for k, field in EASYR1_CONFIG.items() if k in cfg}
    if got.get("prompts_per_step"):
        meta["prompts_per_step"] = got["prompts_per_step"]
    if got.get("group_size"):
        meta["group_size"] = got["group_size"]
    if got.get("lr"):
        meta["lr"] = got["lr"]
    if got.get("update_prompts") and got.get("group_size") and got.get("prompts_per_step"):
        meta["batch_size"] = got["update_prompts"] * got["group_size"]
        meta["rollout_batch_size"] = got["prompts_per_step"] * got["group_size"]
        notes.append(f"responses per update: worker.actor.global_batch_size {got['update_prompts']} prompts x "
                     f"worker.rollout.n {got['group_size']} (EasyR1 counts its update batch in prompts)")
    found = ", ".join(f"{k.replace('/', '.')} = {cfg[k]}" for k in EASYR1_CONFIG if k in cfg)
    notes.append("EasyR1 console: the printed Config and Step N blocks (YAML)" + (f"; {found}" if found else
                 "; no Config block: P and G not in the log (use --set RUN:prompts_per_step=... "
                 "--set RUN:group_size=...)"))
    return rows, lines, meta, notes

