"""JSON-lines logs: verl's file logger (``{"step": N, "data": {...}}`` per line) and generic JSONL (one flat or nested
object per line; nested keys are joined with ``/``).

A line that is not JSON is skipped with a warning naming file and line (a truncated last line says so); a line of
another schema than the first (mixed schemas) is read as a flat record, with one warning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlbatch.errors import UserError
from rlbatch.readers.common import build_run, json_reason, meta_from, read_text, warn
from rlbatch.runstore import Run


def flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}`` (W&B and TensorBoard join nested names with ``/``)."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def is_verl_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "step" in obj and isinstance(obj.get("data"), dict)


def read(path: str | Path, *, fmt: str = "jsonl", run_id: str | None = None,
         user_map: dict[str, str] | None = None, meta: dict[str, Any] | None = None) -> Run:
    """Read a JSONL log (``fmt`` = ``verl-jsonl`` or ``jsonl``) into a :class:`Run`.

    Raises :class:`UserError` naming the file when no line holds a training record.
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    mixed_warned = False
    text = read_text(path)
    all_lines = text.split("\n")
    n = len(all_lines)
    for i, line in enumerate(all_lines, 1):
        s = line.strip()
        if not s:
            continue
        try:
            obj = json.loads(s)
        except (ValueError, RecursionError) as err:  # JSONDecodeError; also ints over 4300 digits, deep nesting
            if i == n and not text.endswith("\n"):
                warn("truncated last line (no line end, not valid JSON): skipped", path, i)
            else:
                warn(f"not valid JSON ({json_reason(err)}): line skipped", path, i)
            continue
        if not isinstance(obj, dict):
            warn("not a JSON object: line skipped", path, i)
            continue
        if fmt == "verl-jsonl":
            if is_verl_record(obj):
                rec = flatten(obj["data"])
                rec["step"] = obj["step"]
            else:
                if not mixed_warned:
                    warn("record not in verl's {\"step\": N, \"data\": {...}} form (mixed schemas); read as a flat "
                         "record", path, i)
                    mixed_warned = True
                rec = flatten(obj)
        else:
            rec = flatten(obj)
        rows.append(rec)
        lines.append(i)
    if not rows:
        raise UserError("no JSON records found", path=str(path))
    fields = meta_from(run_id or path.stem, **(meta or {}))
    if fmt == "verl-jsonl":
        fields.setdefault("backend", "verl")
    return build_run(rows, path=path, source_format=fmt, meta_fields=fields, lines=lines, user_map=user_map)
