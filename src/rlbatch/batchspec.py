"""The batch of a verl / OpenRLHF / TRL launch in framework-neutral terms (issue 24; ``rlbatch inspect CONFIG``).

"Every RL framework understands batch size differently" (EasyR1 #6; verl #1524, #180, #2333; OpenRLHF #1033;
TRL #2858). :func:`batch_spec` reads a command line or a config file and says, in the paper's terms:

- P, prompts per rollout step; G, responses per prompt; P x G responses per rollout step;
- B, responses per optimizer update (the batch of the learning-rate rule), and updates per rollout batch;
- the micro-batch (responses per device per forward/backward) and the gradient accumulation it implies;
- the learning rate, and the one the square-root rule (:func:`rlbatch.scaling.scaled_lr`) gives for another B.

Meanings, from the frameworks' own definitions (the launch adapters in :mod:`rlbatch.backends` use the same):

| | verl (``verl/trainer/config/ppo_trainer.yaml``) | OpenRLHF (``openrlhf/cli/train_ppo_ray.py``) | TRL (``trl/trainer/grpo_config.py``) |
|---|---|---|---|
| P | ``data.train_batch_size`` (prompts) | ``rollout.batch_size`` / ``rollout_batch_size`` (prompts) | generation batch / G |
| G | ``actor_rollout_ref.rollout.n`` | ``rollout.n_samples_per_prompt`` / ``n_samples_per_prompt`` | ``num_generations`` |
| B | ``actor.ppo_mini_batch_size`` (prompts) x n | ``train.batch_size`` / ``train_batch_size`` (samples) | per-device batch x processes x grad. accumulation (completions) |
| updates per rollout | P / mini-batch x ``ppo_epochs`` | P x G / B x ``max_epochs`` | ``steps_per_generation`` x ``num_iterations`` |
| micro-batch | ``ppo_micro_batch_size_per_gpu`` | ``train.micro_batch_size`` / ``micro_train_batch_size`` | ``per_device_train_batch_size`` |
| lr | ``actor.optim.lr`` | ``actor.adam.lr`` / ``actor_learning_rate`` | ``learning_rate`` |

OpenRLHF's flags are read in both spellings (``--micro_train_batch_size`` and ``--micro-train-batch-size``) and
both dialects (flat before 0.10.2, dotted after). A setting the command leaves out takes the framework's default
(verl 0.9.1, OpenRLHF 0.11.2, TRL's GRPOConfig), and the source of every number says which.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from rlbatch.errors import UserError
from rlbatch.scaling import scaled_lr

#: verl 0.9.1 defaults (verl/trainer/config/_generated_ppo_trainer.yaml), dotted Hydra keys
VERL_DEFAULTS: dict[str, Any] = {
    "data.train_batch_size": 1024,
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": None,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
}
#: OpenRLHF roles -> (dotted flag >= 0.10.2, flat flag <= 0.10.1), without the leading ``--``: the one table of
#: OpenRLHF's flag names, for reading a launch here and for writing one (:mod:`rlbatch.backends.launch_openrlhf`, which keeps
#: a copy of the roles it writes until it imports this one); :data:`OPENRLHF_DEFAULTS` holds 0.11.2's parser
#: defaults of the roles a launch's batch depends on
OPENRLHF_FLAGS: dict[str, tuple[str, str]] = {
    "rollout_batch": ("rollout.batch_size", "rollout_batch_size"),
    "n_samples": ("rollout.n_samples_per_prompt", "n_samples_per_prompt"),
    "train_batch": ("train.batch_size", "train_batch_size"),
    "micro_train_batch": ("train.micro_batch_size", "micro_train_batch_size"),
    "max_epochs": ("train.max_epochs", "max_epochs"),
    "actor_lr": ("actor.adam.lr", "actor_learning_rate"),
    "actor_nodes": ("actor.num_nodes", "actor_num_nodes"),
    "actor_gpus": ("actor.num_gpus_per_node", "actor_num_gpus_per_node"),
    "critic_lr": ("critic.adam.lr", "critic_learning_rate"),
    "num_episodes": ("train.num_episodes", "num_episodes"),
    "max_samples": ("data.max_samples", "max_samples"),
    "tensorboard": ("logger.tensorboard_dir", "use_tensorboard"),
    "run_name": ("logger.wandb.run_name", "wandb_run_name"),
    "ckpt_path": ("ckpt.path", "ckpt_path"),
    "load_ckpt": ("ckpt.load_enable", "load_checkpoint"),
    "save_steps": ("ckpt.save_steps", "save_steps"),
    "logging_steps": ("logger.logging_steps", "logging_steps"),
    "seed": ("train.seed", "seed"),
    "estimator": ("algo.advantage.estimator", "advantage_estimator"),
    "save_path": ("ckpt.output_dir", "save_path"),
}
OPENRLHF_DEFAULTS: dict[str, Any] = {"rollout_batch": 1024, "n_samples": 1, "train_batch": 128,
                                     "micro_train_batch": 1, "max_epochs": 1, "actor_lr": 1e-6, "actor_nodes": 1,
                                     "actor_gpus": 8}
#: TRL GRPOConfig defaults (trl >= 0.18: per_device_train_batch_size 8, num_generations 8, learning_rate 1e-6)
TRL_DEFAULTS: dict[str, Any] = {"per_device_train_batch_size": 8, "num_generations": 8,
                                "gradient_accumulation_steps": 1, "learning_rate": 1e-6, "num_iterations": 1,
                                "steps_per_generation": None, "generation_batch_size": None, "num_processes": 1}


@dataclass
class BatchSpec:
    """A launch's batch in framework-neutral terms; every number with its source in ``sources`` (the key or flag
    it came from, or ``default``). Counts are whole responses unless named prompts."""

    framework: str
    prompts_per_step: int | None = None
    responses_per_prompt: int | None = None
    responses_per_rollout: int | None = None
    responses_per_update: int | None = None
    updates_per_rollout: float | None = None
    micro_batch_per_device: int | None = None
    devices: int | None = None
    grad_accumulation: float | None = None
    lr: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def lr_for(self, batch: int, rule: str = "sqrt") -> float | None:
        """The learning rate ``rule`` gives for ``batch`` responses per update, from this launch's B and lr."""
        if not self.lr or not self.responses_per_update:
            return None
        return scaled_lr(batch, self.responses_per_update, self.lr, rule)

    def to_dict(self, batches: list[int] | None = None, rule: str = "sqrt") -> dict[str, Any]:
        d = asdict(self)
        d["lr_rule"] = {"rule": rule, "base_batch": self.responses_per_update, "base_lr": self.lr,
                        "lr": {str(b): self.lr_for(b, rule) for b in (batches or self.default_batches())}}
        return d

    def default_batches(self) -> list[int]:
        b = self.responses_per_update
        return [max(1, b // 2), b * 2] if b else []


def _num(v: Any) -> float | None:
    try:
        f = float(str(v).strip().strip("'\""))
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _count(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None and f == int(f) and f > 0 else None


# ---- reading a command line or a config file ------------------------------------------------------------------

def _join_continuations(text: str) -> str:
    return re.sub(r"\\\r?\n", " ", text)


def _shell_vars(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"(?m)^\s*(?:export\s+)?([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|[^\s#]+)", text):
        out.setdefault(m.group(1), m.group(2).strip("\"'"))
    return out


def _tokens(text: str) -> list[str]:
    body = _join_continuations(text)
    toks: list[str] = []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        try:
            toks.extend(shlex.split(s, comments=True))
        except ValueError:
            toks.extend(s.split())
    return toks


def _subst(v: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_]\w*)\}?", lambda m: env.get(m.group(1), m.group(0)), v)


def _flags(toks: list[str], env: dict[str, str]) -> dict[str, str | None]:
    """``--name value`` / ``--name=value`` / bare ``--switch``; names with ``-`` read as ``_`` (both spellings)."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--") and len(t) > 2:
            name, sep, val = t[2:].partition("=")
            key = name.replace("-", "_")
            if sep:
                out[key] = _subst(val, env)
            elif i + 1 < len(toks) and not toks[i + 1].startswith("--"):
                out[key] = _subst(toks[i + 1], env)
                i += 1
            else:
                out[key] = None
        i += 1
    return out


def _hydra(toks: list[str], env: dict[str, str]) -> dict[str, str]:
    out = {}
    for t in toks:
        t = t.strip("[],'\"")  # a printed override list: ['data.train_batch_size=256', ...]
        if "=" in t and not t.startswith("-"):
            k, _, v = t.partition("=")
            k = k.lstrip("+~")
            if re.fullmatch(r"[A-Za-z_][\w.]*", k) and "." in k:
                out[k] = _subst(v, env)
    return out


def flatten(obj: Any, sep: str = ".", *, drop_lists: bool = False) -> dict[str, Any]:
    """A nested mapping -> one level, the keys of each path joined with ``sep``: ``{"a": {"b": 1}}`` ->
    ``{"a.b": 1}`` (``.``: Hydra / OmegaConf paths, W&B config keys; ``/``: W&B and TensorBoard metric names).
    ``drop_lists`` leaves lists and tuples out (a trainer-state dump's ``log_history``). Anything but a dict -> {}.
    The one flattener of nested configs and records (readers, launches, trackers)."""
    out: dict[str, Any] = {}

    def walk(d: dict[Any, Any], prefix: str) -> None:
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, key + sep)
            elif not (drop_lists and isinstance(v, (list, tuple))):
                out[key] = v

    if isinstance(obj, dict):
        walk(obj, "")
    return out


def detect_framework(text: str, mapping: dict[str, Any] | None = None) -> str | None:
    """``verl``, ``openrlhf`` or ``trl`` from a command line / config text (or its parsed mapping), else None."""
    keys = " ".join(flatten(mapping or {}))
    blob = text + " " + keys
    if "verl.trainer" in blob or "actor_rollout_ref" in blob:
        return "verl"
    if "openrlhf" in blob or re.search(r"n[-_]samples[-_]per[-_]prompt|micro[-_]train[-_]batch[-_]size|"
                                       r"rollout\.batch_size|rollout[-_]batch[-_]size", blob):
        return "openrlhf"
    if re.search(r"num[-_]generations|GRPOConfig|\btrl\b", blob):
        return "trl"
    return None


def batch_spec(text: str, *, where: str = "command line", framework: str | None = None,
               mapping: dict[str, Any] | None = None) -> BatchSpec:
    """The batch of a launch given as ``text`` (a command line or a shell script) or a parsed config ``mapping``
    (YAML/JSON). ``framework`` (verl / openrlhf / trl) is detected when None. Raises :class:`UserError` when the
    framework cannot be told or a count is not a positive whole number."""
    fw = framework or detect_framework(text, mapping)
    if fw is None:
        raise UserError(f"cannot tell the framework of this {where}: no verl.trainer / actor_rollout_ref (verl), "
                        "openrlhf / --n_samples_per_prompt (OpenRLHF) or num_generations (TRL)")
    env = _shell_vars(text)
    toks = _tokens(text) if text else []
    if fw == "verl":
        settings = {**flatten(mapping or {}), **_hydra(toks, env)}
        return _verl(settings, where)
    flags = {k.lstrip("-").replace("-", "_"): v for k, v in (mapping or {}).items()} if mapping else {}
    flags.update(_flags(toks, env))
    if fw == "openrlhf":
        return _openrlhf(flags, where)
    if "num_processes" not in flags:
        for k in ("nproc_per_node", "NPROC_PER_NODE"):
            v = flags.get(k) or env.get(k)
            if v:
                flags["num_processes"] = v
                break
    return _trl(flags, where)


def _pick(settings: dict[str, Any], key: str, default: Any, sources: dict[str, str], name: str, where: str,
          alt: tuple[str, ...] = ()) -> Any:
    for k in (key, *alt):
        if k in settings and settings[k] is not None:
            sources[name] = f"{k}={settings[k]} ({where})"
            return settings[k]
    sources[name] = f"{key} not set: default {default}"
    return default


def _verl(s: dict[str, Any], where: str) -> BatchSpec:
    spec = BatchSpec("verl")
    src = spec.sources
    d = VERL_DEFAULTS
    p = _count(_pick(s, "data.train_batch_size", d["data.train_batch_size"], src, "prompts_per_step", where))
    n = _count(_pick(s, "actor_rollout_ref.rollout.n", d["actor_rollout_ref.rollout.n"], src,
                     "responses_per_prompt", where))
    mini = _count(_pick(s, "actor_rollout_ref.actor.ppo_mini_batch_size",
                        d["actor_rollout_ref.actor.ppo_mini_batch_size"], src, "responses_per_update", where))
    epochs = _count(_pick(s, "actor_rollout_ref.actor.ppo_epochs", d["actor_rollout_ref.actor.ppo_epochs"], src,
                          "updates_per_rollout", where)) or 1
    micro = _count(_pick(s, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", None, src,
                         "micro_batch_per_device", where))
    gpus = _count(_pick(s, "trainer.n_gpus_per_node", d["trainer.n_gpus_per_node"], src, "devices", where)) or 1
    nodes = _count(s.get("trainer.nnodes", d["trainer.nnodes"])) or 1
    lr = _num(_pick(s, "actor_rollout_ref.actor.optim.lr", d["actor_rollout_ref.actor.optim.lr"], src, "lr", where))
    if not (p and n and mini):
        raise UserError("data.train_batch_size, actor_rollout_ref.rollout.n and ppo_mini_batch_size must be positive "
                        f"whole numbers ({where})")
    spec.prompts_per_step, spec.responses_per_prompt, spec.responses_per_rollout = p, n, p * n
    spec.responses_per_update = mini * n
    src["responses_per_update"] = (f"ppo_mini_batch_size {mini} prompts x rollout.n {n} "
                                   f"({src['responses_per_update']})")
    if mini > p:
        spec.notes.append(f"ppo_mini_batch_size {mini} > train_batch_size {p}: verl fails its config check")
    spec.updates_per_rollout = p / mini * epochs
    src["responses_per_rollout"] = f"P x G = {p} x {n}"
    src["updates_per_rollout"] = f"train_batch_size {p} / ppo_mini_batch_size {mini} x ppo_epochs {epochs}"
    spec.devices = gpus * nodes
    src["devices"] = f"trainer.n_gpus_per_node {gpus} x trainer.nnodes {nodes}"
    spec.micro_batch_per_device = micro
    if micro:
        spec.grad_accumulation = spec.responses_per_update / spec.devices / micro
        src["grad_accumulation"] = f"B {spec.responses_per_update} / {spec.devices} devices / micro-batch {micro}"
    else:
        spec.notes.append("no ppo_micro_batch_size_per_gpu (or use_dynamic_bsz): gradient accumulation set by tokens")
    spec.lr = lr
    spec.notes.append("verl counts data.train_batch_size and ppo_mini_batch_size in prompts; it multiplies the "
                      "mini-batch by rollout.n for the update")
    return spec


def _orl(flags: dict[str, Any], role: str, src: dict[str, str], name: str, where: str) -> Any:
    dotted, flat = OPENRLHF_FLAGS[role]
    for f in (dotted, flat):
        if f in flags and flags[f] is not None:
            src[name] = f"--{f} {flags[f]} ({where})"
            return flags[f]
    src[name] = f"--{dotted} not set: OpenRLHF 0.11.2 default {OPENRLHF_DEFAULTS[role]}"
    return OPENRLHF_DEFAULTS[role]


def _openrlhf(f: dict[str, Any], where: str) -> BatchSpec:
    spec = BatchSpec("openrlhf")
    src = spec.sources
    p = _count(_orl(f, "rollout_batch", src, "prompts_per_step", where))
    n = _count(_orl(f, "n_samples", src, "responses_per_prompt", where))
    b = _count(_orl(f, "train_batch", src, "responses_per_update", where))
    micro = _count(_orl(f, "micro_train_batch", src, "micro_batch_per_device", where))
    epochs = _count(_orl(f, "max_epochs", src, "updates_per_rollout", where)) or 1
    dsrc: dict[str, str] = {}
    nodes = _count(_orl(f, "actor_nodes", dsrc, "nodes", where)) or 1
    gpus = _count(_orl(f, "actor_gpus", dsrc, "gpus", where)) or 1
    src["devices"] = f"actor nodes x GPUs per node: {dsrc['nodes']}; {dsrc['gpus']}"
    lr = _num(_orl(f, "actor_lr", src, "lr", where))
    if not (p and n and b):
        raise UserError(f"rollout batch, n_samples_per_prompt and train batch must be positive whole numbers ({where})")
    spec.prompts_per_step, spec.responses_per_prompt, spec.responses_per_rollout = p, n, p * n
    spec.responses_per_update = b
    spec.updates_per_rollout = p * n / b * epochs
    src["responses_per_rollout"] = f"P x G = {p} x {n}"
    src["updates_per_rollout"] = f"P x G {p * n} / train batch {b} x max_epochs {epochs}"
    spec.devices = nodes * gpus
    spec.micro_batch_per_device = micro
    spec.grad_accumulation = b / spec.devices / micro if micro else None
    src["grad_accumulation"] = f"train batch {b} / {spec.devices} devices / micro-batch {micro}"
    spec.lr = lr
    spec.notes.append("OpenRLHF counts the rollout batch in prompts and the train batch in samples (responses)")
    if (p * n) % b:
        spec.notes.append(f"{p} x {n} responses per rollout is not a multiple of the train batch {b}")
    return spec


def _trl(f: dict[str, Any], where: str) -> BatchSpec:
    spec = BatchSpec("trl")
    src = spec.sources
    d = TRL_DEFAULTS

    def get(key: str, name: str) -> Any:
        return _pick(f, key, d[key], src, name, where)

    per = _count(get("per_device_train_batch_size", "micro_batch_per_device"))
    g = _count(get("num_generations", "responses_per_prompt"))
    ga = _count(get("gradient_accumulation_steps", "grad_accumulation")) or 1
    nproc = _count(_pick(f, "num_processes", 1, src, "devices", where)) or 1
    lr = _num(get("learning_rate", "lr"))
    iters = _count(f.get("num_iterations") or d["num_iterations"]) or 1
    spg = _count(f.get("steps_per_generation")) if f.get("steps_per_generation") else None
    gen = _count(f.get("generation_batch_size")) if f.get("generation_batch_size") else None
    if not (per and g):
        raise UserError(f"per_device_train_batch_size and num_generations must be positive whole numbers ({where})")
    b = per * nproc * ga
    spec.responses_per_update = b
    src["responses_per_update"] = (f"per_device_train_batch_size {per} x processes {nproc} x "
                                   f"gradient_accumulation_steps {ga} completions")
    if gen is None:
        gen = per * nproc * (spg or ga)
        src["responses_per_rollout"] = (f"generation_batch_size not set: per-device x processes x "
                                        f"{'steps_per_generation' if spg else 'gradient_accumulation_steps'}")
    else:
        src["responses_per_rollout"] = f"generation_batch_size={gen} ({where})"
    if gen % g:
        spec.notes.append(f"the generation batch {gen} is not a multiple of num_generations {g}: TRL refuses it")
    spec.responses_per_prompt, spec.responses_per_rollout = g, gen
    spec.prompts_per_step = gen // g
    src["prompts_per_step"] = f"generation batch {gen} / num_generations {g}" + (
        "; per_device_train_batch_size not set: TRL's default" if "not set" in src["micro_batch_per_device"] else "")
    spec.updates_per_rollout = gen / b * iters
    src["updates_per_rollout"] = f"generation batch {gen} / B {b} x num_iterations {iters}"
    spec.micro_batch_per_device, spec.devices, spec.grad_accumulation = per, nproc, float(ga)
    spec.lr = lr
    spec.notes.append("TRL counts per_device_train_batch_size in completions (not prompts) since 0.15")
    return spec


def looks_like_launch(text: str) -> bool:
    """True when ``text`` is a launch (a command line or a config of verl / OpenRLHF / TRL) rather than a log with
    metrics."""
    head = text[:20000]
    if re.search(r"step:\d+ - |\{'loss'|\"loss\":|Step \d+ \|", head):
        return False
    return detect_framework(head) is not None


__all__ = ["BatchSpec", "batch_spec", "flatten", "detect_framework", "looks_like_launch", "VERL_DEFAULTS",
           "OPENRLHF_DEFAULTS", "OPENRLHF_FLAGS", "TRL_DEFAULTS"]
