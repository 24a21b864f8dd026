"""Read a user's base configuration for an external trainer (``--base-config FILE``).

Two styles, chosen by the backend:
- ``hydra`` (verl): a text file of Hydra overrides, one per line (``key=value``; ``#`` comments and blank lines
  ignored), or a YAML/JSON mapping that is flattened into dotted keys (``{"trainer": {"nnodes": 2}}`` ->
  ``trainer.nnodes=2``).
- ``flags`` (OpenRLHF): a text file of command-line flags, one per line (``--pretrain Qwen/Qwen2.5-7B``,
  ``--bf16``, ``--flag=value``), or a YAML/JSON mapping ``{flag: value}`` (``true`` = a bare switch).
- ``mapping`` (TRL): a YAML/JSON mapping of GRPOConfig fields.

Every entry keeps the line it came from, so a conflict is reported as ``FILE:LINE``.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml
from typing import Any

from rlbatch.errors import UserError


@dataclass
class Entry:
    """One base setting: ``key`` (dotted Hydra key, flag name without dashes, or config field), ``value`` (string as
    it will be written; ``None`` for a bare switch), ``line`` (1-based line in ``path``; 0 when unknown)."""

    key: str
    value: Any
    line: int = 0


def hydra_value(v: Any) -> str:
    """Format a Python value as a Hydra override value (bools lower-case, floats round-trip, lists ``[a,b]``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{hydra_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.extend(_flatten(v, key))
            else:
                out.append((key, v))
    return out


def _key_lines(text: str) -> dict[str, int]:
    """Best-effort line numbers of top-level-ish keys in a YAML text (first occurrence of ``key:``)."""
    lines: dict[str, int] = {}
    for i, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if ":" in s and not s.startswith("#"):
            lines.setdefault(s.split(":", 1)[0].strip().strip("'\""), i)
    return lines


def _load_mapping(path: Path, text: str) -> dict:
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"malformed JSON ({err.msg})", path=str(path), line=err.lineno) from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            raise UserError(f"malformed YAML ({getattr(err, 'problem', err)})", path=str(path),
                            line=mark.line + 1 if mark else None) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError("expected a mapping of settings at the top level", path=str(path))
    return data


def read_base_config(path: Path | str | None, style: str) -> list[Entry]:
    """Read a base configuration file in ``style`` ``hydra``, ``flags`` or ``mapping`` (see the module doc).

    Returns the entries in file order. Raises :class:`UserError` naming the file and line for a missing file, a
    malformed line, or a key given twice.
    """
    if path is None:
        return []
    path = Path(path)
    if not path.is_file():
        raise UserError("base configuration file not found", path=str(path))
    text = path.read_text(encoding="utf-8")
    structured = path.suffix.lower() in (".yaml", ".yml", ".json")
    entries: list[Entry] = []
    if structured or style == "mapping":
        data = _load_mapping(path, text)
        lines = _key_lines(text)
        if style == "hydra":
            for key, v in _flatten(data):
                entries.append(Entry(key, hydra_value(v), lines.get(key.split(".")[-1], 0)))
        else:
            for key, v in data.items():
                key = str(key).lstrip("-")
                value = None if (style == "flags" and v is True) else v
                if style == "flags" and v is False:
                    continue
                entries.append(Entry(key, value, lines.get(str(key), lines.get("--" + key, 0))))
    elif style == "hydra":
        for i, raw in enumerate(text.splitlines(), start=1):
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            if "=" not in s:
                raise UserError(f"expected a Hydra override key=value, got {s!r}", path=str(path), line=i)
            key, value = s.split("=", 1)
            entries.append(Entry(key.strip(), value.strip(), i))
    elif style == "flags":
        for i, raw in enumerate(text.splitlines(), start=1):
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            try:
                toks = shlex.split(s, comments=True)
            except ValueError as err:
                raise UserError(f"cannot parse flags ({err})", path=str(path), line=i) from None
            if not toks:
                continue
            if not toks[0].startswith("--"):
                raise UserError(f"expected a flag starting with --, got {toks[0]!r}", path=str(path), line=i)
            if "=" in toks[0]:
                key, value = toks[0][2:].split("=", 1)
                rest = [value, *toks[1:]]
            else:
                key, rest = toks[0][2:], toks[1:]
            value = None if not rest else (rest[0] if len(rest) == 1 else list(rest))
            entries.append(Entry(key, value, i))
    else:  # pragma: no cover - programming error
        raise ValueError(f"unknown style {style!r}")
    seen: dict[str, int] = {}
    for e in entries:
        if e.key in seen:
            raise UserError(f"{e.key!r} is set twice (first on line {seen[e.key]})", path=str(path), line=e.line)
        seen[e.key] = e.line
    return entries


def check_conflicts(entries: list[Entry], controlled: dict[str, str], path: Path | str | None) -> None:
    """Raise :class:`UserError` naming ``FILE:LINE`` when the base config sets a key rlbatch sets per trial.

    ``controlled`` maps each such key to a short reason (e.g. ``"P, from --batches and --group-size"``).
    """
    for e in entries:
        key = e.key.lstrip("+")
        if key in controlled:
            raise UserError(f"{key!r} is set per trial by rlbatch ({controlled[key]}); remove it from the base "
                            f"configuration", path=str(path) if path else None, line=e.line or None)
