"""Configuration discovery, the third stage (:mod:`rlbatch.readers.extract` gives the pipeline): P, G, the update
batch and the learning rate from wherever a file states them: a config mapping by meaning
(:func:`config_from_mapping`), keyword arguments and flags in text or code (:func:`find_config`), a launch command
(:func:`launch_config`). Results are :class:`ConfigFound`."""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from rlbatch.batchspec import batch_spec, flatten
from rlbatch.errors import UserError
from rlbatch.readers.common import to_count, to_float


#: meaning -> config keys (flat, ``/``-joined, last component matched too), most specific first
CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "prompts_per_step": ("prompts_per_step", "n_prompts", "num_prompts", "prompts_per_batch", "prompt_batch_size",
                         "data/train_batch_size", "rollout_batch_size_prompts", "batch_size_prompts",
                         "rollout_batch_size", "rollout/batch_size", "trainer/train_batch_size"),
    "group_size": ("num_generations", "n_samples_per_prompt", "samples_per_prompt", "completions_per_prompt",
                   "num_samples_per_prompt", "responses_per_prompt", "rollout/n", "actor_rollout_ref/rollout/n",
                   "n_generations", "group_size"),
    "update_batch": ("responses_per_update", "update_batch_size", "train_batch_size_responses", "mini_batch_size",
                     "train_mini_batch_size", "minibatch_size"),
    "lr": ("learning_rate", "actor_lr", "actor_learning_rate", "lr", "optim/lr", "actor/optim/lr",
           "actor_rollout_ref/actor/optim/lr", "policy_lr"),
    "batch_size": ("batch_size", "train_batch_size", "global_batch_size"),
    "per_device_train_batch_size": ("per_device_train_batch_size",),
    "gradient_accumulation_steps": ("gradient_accumulation_steps",),
}


@dataclass
class ConfigFound:
    """P, G, the update batch (responses per optimizer update) and the lr a file states, each with where it came
    from (``sources``: field -> text)."""

    prompts_per_step: int | None = None
    group_size: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    update_batch: int | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def fill_from(self, other: "ConfigFound | None") -> None:
        """Take from ``other`` what this one lacks: P and G together (never one from each source), the update batch
        when it divides this P x G, the batch size and lr; each with its source."""
        if other is None:
            return
        if self.prompts_per_step is None and self.group_size is None and other.prompts_per_step and other.group_size:
            self.prompts_per_step, self.group_size = other.prompts_per_step, other.group_size
            for f in ("prompts_per_step", "group_size"):
                self.sources[f] = other.sources[f]
        p, g, u = self.prompts_per_step, self.group_size, other.update_batch
        if self.update_batch is None and u and p and g and (p * g) % u == 0 and \
                (p, g) == (other.prompts_per_step, other.group_size):
            self.update_batch, self.sources["update_batch"] = u, other.sources["update_batch"]
        for f in ("batch_size", "lr"):
            if getattr(self, f) is None and getattr(other, f) is not None:
                setattr(self, f, getattr(other, f))
                self.sources[f] = other.sources[f]

    def fields(self) -> dict[str, Any]:
        """Run-metadata fields: P and G (and, when a mini-batch splits the rollout of P x G responses into several
        updates, ``batch_size`` = the mini-batch and ``rollout_batch_size`` = P x G); else the batch alone; lr."""
        out: dict[str, Any] = {}
        p, g = self.prompts_per_step, self.group_size
        if p and g:
            out["prompts_per_step"], out["group_size"] = p, g
            u = self.update_batch
            if u and u < p * g and (p * g) % u == 0:
                out["batch_size"], out["rollout_batch_size"] = u, p * g
        elif self.update_batch or self.batch_size:
            out["batch_size"] = self.update_batch or self.batch_size
        if self.lr:
            out["lr"] = self.lr
        return out

    def field_sources(self) -> dict[str, str]:
        """The source of each of :meth:`fields`."""
        f = self.fields()
        out = {k: self.sources[k] for k in ("prompts_per_step", "group_size", "lr") if k in f and k in self.sources}
        if "rollout_batch_size" in f:
            out["batch_size"] = self.sources.get("update_batch", "")
            out["rollout_batch_size"] = f"P x G = {f['prompts_per_step']} x {f['group_size']}"
        elif "batch_size" in f:
            out["batch_size"] = self.sources.get("update_batch") or self.sources.get("batch_size", "")
        return out


def _get(cfg: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, Any] | None:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return k, cfg[k]
    for k in keys:  # last path components: "args/lr" for "lr"
        for ck, v in cfg.items():
            if v is not None and (ck.endswith("/" + k) or ck.replace(".", "/").endswith("/" + k) or
                                  ck.replace(".", "/") == k):
                return ck, v
    return None


def config_key(cfg: dict[str, Any], meaning: str) -> tuple[str, Any] | None:
    """``(key, value)`` of the first key of a flat config ``cfg`` that means ``meaning`` (:data:`CONFIG_KEYS`:
    prompts_per_step, group_size, lr, ...), as :func:`config_from_mapping` looks it up, or None."""
    return _get({str(k).replace("-", "_").lstrip("_"): v for k, v in cfg.items()}, CONFIG_KEYS[meaning])


def config_from_mapping(cfg: dict[str, Any], where: str) -> ConfigFound:
    """P, G, update batch and lr from a flat config mapping (a JSON config record, a notebook's ``GRPOConfig(...)``
    keywords, CLI flags). ``group_size`` alone is read as responses per prompt; a ``batch_size`` without P and G is
    the update batch. ``where`` names the source in :attr:`ConfigFound.sources`."""
    cfg = {str(k).replace("-", "_").lstrip("_"): v for k, v in cfg.items()}
    out = ConfigFound()
    for f in ("prompts_per_step", "group_size", "lr", "batch_size", "update_batch"):
        hit = _get(cfg, CONFIG_KEYS[f])
        if hit is None:
            continue
        k, v = hit
        if f == "lr":
            x = to_float(v)
            if x is not None and math.isfinite(x) and 0 < x < 1:
                out.lr, out.sources["lr"] = x, f"{k} = {v} ({where})"
            continue
        c = to_count(v)
        if not c:
            continue
        if f == "update_batch":
            out.update_batch, out.sources["update_batch"] = c, f"{k} = {v} responses per update ({where})"
        elif f == "batch_size":
            if out.batch_size is None:
                out.batch_size, out.sources["batch_size"] = c, f"{k} = {v} ({where})"
        else:
            setattr(out, f, c)
            out.sources[f] = f"{k} = {v} ({where})"
    _one_sample_per_example(cfg, out)
    return out


#: words of an argument that would set several responses per prompt (a group) in a script's argument list
_GROUP_WORDS = re.compile(r"generation|sample|group|rollout_n|return_sequences|completions|responses|(?:^|[/_])n$|"
                          r"(?:^|[/_])k$")


def _one_sample_per_example(cfg: dict[str, Any], out: ConfigFound) -> None:
    """A script's whole argument list (``args``: a custom loop's config record dumping argparse's namespace, every
    option of the script) that states a batch size and no argument for several responses per prompt: each example is sampled
    once, so P = the batch size and G = 1 (issue 53; a GRPO loop has a group-size argument, or hard-codes it and
    then its log cannot say G: left unknown when any argument could be one)."""
    if out.prompts_per_step or out.group_size or not out.batch_size or out.update_batch:
        return
    if not any(k.startswith("args/") for k in cfg):
        return
    args = [k.split("/", 1)[1] for k in cfg if k.startswith("args/")]
    if any(_GROUP_WORDS.search(a.lower()) for a in args):
        return
    src = out.sources.get("batch_size", "batch_size")
    out.prompts_per_step, out.group_size = out.batch_size, 1
    out.sources["prompts_per_step"] = src
    out.sources["group_size"] = ("G = 1: the script's whole argument list (its args) has no argument for several "
                                 "responses per prompt, so each example is sampled once")


KWARG = re.compile(r"(?m)^\s*([A-Za-z_]\w*)\s*=\s*([^,#\n]+?)\s*,?\s*(?:#.*)?$")
FLAG = re.compile(r"(?:^|\s)--([A-Za-z][\w.-]*)[= ]([^\s\\'\"]+)")
UNSLOTH_TOTAL = re.compile(r"Total batch size(?: \((\d+) x (\d+) x (\d+)\))? = ([\d,]+)")
UNSLOTH_CHANGE = re.compile(r"change the batch size of (\d+) to the `num_generations` of (\d+)")
TRL_CONFIG_CALL = re.compile(r"(?:GRPOConfig|TrainingArguments|RLOOConfig|PPOConfig|Config)\s*\(")


def _kwargs(src: str) -> dict[str, Any]:
    """``name = literal`` keyword lines of a call (a notebook's ``GRPOConfig(...)`` cell), literals only."""
    out: dict[str, Any] = {}
    for k, v in KWARG.findall(src):
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
    return out


def find_config(text: str, *, code: Iterable[str] = (), mapping: dict[str, Any] | None = None) -> ConfigFound:
    """P, G, the update batch and the lr stated in a log's ``text`` (and a notebook's ``code`` cells, a config
    ``mapping`` from config records), with the source of each.

    Sources, in order: the config mapping (JSON config records); ``GRPOConfig(...)`` / ``TrainingArguments(...)``
    keyword cells; CLI flags (``--lr 2e-5``, ``--num_generations 8``); Unsloth's banner (``Total batch size
    (4 x 8 x 1) = 32`` completions per update, ``change the batch size of 2 to the num_generations of 4``).
    TRL >= 0.15 counts completions in the batch (P = batch / G when G divides it; Unsloth's batch change says so);
    older TRL counted prompts (P = the batch when G does not divide it); the note says which was assumed.
    """
    found = ConfigFound()

    def merge(c: ConfigFound) -> None:
        for f in ("prompts_per_step", "group_size", "batch_size", "lr", "update_batch"):
            if getattr(found, f) is None and getattr(c, f) is not None:
                setattr(found, f, getattr(c, f))
                found.sources[f] = c.sources[f]

    if mapping:
        nested = any(isinstance(v, dict) for v in mapping.values())
        merge(config_from_mapping(flatten(mapping, "/", drop_lists=True) if nested else mapping, "config record"))
    kw: dict[str, Any] = {}
    for src in code:
        if TRL_CONFIG_CALL.search(src):
            kw.update(_kwargs(src))
    if kw:
        merge(config_from_mapping(kw, "config cell"))
    launch = launch_config(text)
    if launch is not None:
        merge(launch)
    flags = {k.replace("-", "_"): v for k, v in FLAG.findall(text[:200000])}
    if flags:
        merge(config_from_mapping(flags, "command-line flags"))
        for k in ("per_device_train_batch_size", "gradient_accumulation_steps"):
            if k in flags and k not in kw:
                kw[k] = flags[k]
    g = found.group_size
    text = text[:HEAD_CHARS] if len(text) > HEAD_CHARS else text  # a run states its setup at its start
    ch = UNSLOTH_CHANGE.search(text)
    if ch and not g:
        g = int(ch.group(2))
        found.group_size, found.sources["group_size"] = g, f"num_generations {g} (Unsloth: {ch.group(0)!r})"
    tot = UNSLOTH_TOTAL.search(text)
    per_dev = to_count(kw.get("per_device_train_batch_size")) if kw else None
    total = int(tot.group(4).replace(",", "")) if tot else None
    if total and g and not found.prompts_per_step:
        if total % g == 0 and (ch or tot.group(1) is not None or total >= g):
            found.prompts_per_step = total // g
            found.sources["prompts_per_step"] = (f"{total} completions per update / num_generations {g} (trainer "
                                                 f"banner {tot.group(0)!r}; TRL >= 0.15 counts completions)")
        else:
            found.prompts_per_step = total
            found.sources["prompts_per_step"] = (f"{total} prompts per update (trainer banner {tot.group(0)!r}: not "
                                                 f"a multiple of num_generations {g}, so the batch counts prompts, "
                                                 "as TRL < 0.15 did)")
    elif per_dev and g and not found.prompts_per_step and not tot:
        ga = to_count(kw.get("gradient_accumulation_steps")) or 1
        np_m = NPROC.search(text[:200000])
        nproc = int(np_m.group(1)) if np_m else 1
        b = per_dev * ga * nproc
        found.prompts_per_step = b // g if b % g == 0 else b
        found.sources["prompts_per_step"] = (
            f"per_device_train_batch_size x gradient_accumulation_steps x processes = {per_dev} x {ga} x {nproc} = "
            f"{b} " + (f"completions / num_generations {g} (TRL >= 0.15 counts completions)" if b % g == 0 else
                       f"prompts (not a multiple of num_generations {g}: counted as prompts, as TRL < 0.15 did)")
            + ("" if np_m else "; one process assumed (no NPROC_PER_NODE / --nproc_per_node in the log)"))
    return found


#: how far into a run's text its setup (launch command, banner, config) is looked for
HEAD_CHARS = 4_000_000
NPROC = re.compile(r"(?:NPROC_PER_NODE=|--nproc[_-]per[_-]node[= ]|--num[_-]processes[= ])(\d{1,4})")
#: a launch command in a log: verl / OpenRLHF / TRL entry points (its continuation lines joined)
LAUNCH = re.compile(r"verl\.trainer\.main_\w+|openrlhf\.cli\.train_\w+|train_ppo_ray|swift\s+rlhf|trl\s+grpo")


def launch_config(text: str) -> ConfigFound | None:
    """P, G, update batch and lr of the launch command printed in a log (verl / OpenRLHF / TRL), through
    :func:`rlbatch.batchspec.batch_spec` (one reading of each framework's batch); only values the command sets
    (no framework defaults). None when the log prints no launch command."""
    head = text[:2_000_000]
    m = LAUNCH.search(head)
    if not m:
        return None
    start = head.rfind("\n", 0, m.start()) + 1
    end = start
    while True:  # the command and its backslash continuations
        nl = head.find("\n", end)
        if nl < 0:
            end = len(head)
            break
        line = head[end:nl].rstrip()
        end = nl + 1
        if not line.endswith("\\"):
            break
    cmd = head[start:end]
    for v, val in re.findall(r"(?m)^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=(\S+)", head[:start][-5000:]):
        cmd = f"{v}={val}\n" + cmd  # shell variables set just before the command
    try:
        spec = batch_spec(cmd)
    except UserError:
        return None
    return launch_config_from_spec(spec, f"{spec.framework} launch command")


def launch_config_from_spec(spec, where: str) -> ConfigFound:
    """A :class:`ConfigFound` of the values a :class:`rlbatch.batchspec.BatchSpec` read from its source (not the
    framework defaults it filled in)."""
    out = ConfigFound()

    def explicit(field: str) -> bool:
        return field in spec.sources and "not set" not in spec.sources[field]

    if explicit("prompts_per_step") and explicit("responses_per_prompt"):
        out.prompts_per_step, out.group_size = spec.prompts_per_step, spec.responses_per_prompt
        out.sources["prompts_per_step"] = f"{spec.sources['prompts_per_step']} ({where})"
        out.sources["group_size"] = f"{spec.sources['responses_per_prompt']} ({where})"
        if explicit("responses_per_update") and spec.responses_per_update:
            out.update_batch = spec.responses_per_update
            out.sources["update_batch"] = f"{spec.sources['responses_per_update']} ({where})"
    if explicit("lr") and spec.lr:
        out.lr, out.sources["lr"] = spec.lr, f"{spec.sources['lr']} ({where})"
    return out
