"""One way to run the CLI in-process in a test: ``rlbatch ARGS`` through ``cli.main`` (Typer exits)."""

import sys

import pytest

from rlbatch import cli


def run_in_process(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """``(exit code, stdout, stripped stderr)`` of ``rlbatch *args`` run through :func:`rlbatch.cli.main`."""
    monkeypatch.setattr(sys, "argv", ["rlbatch", *map(str, args)])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err.strip()
