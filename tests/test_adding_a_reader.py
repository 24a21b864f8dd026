"""docs/adding-a-reader.md, run as written: its module (first code block) is written to a file, registered with
one Adapter line as the page says, and the page's own test (third code block) runs against it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import rlbatch.readers as R
from rlbatch.errors import UserError
from rlbatch.readers import Adapter, detect_format, load

PAGE = Path(__file__).resolve().parents[1] / "docs" / "adding-a-reader.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_pages_reader_registers_and_reads_its_fixture(tmp_path, monkeypatch):
    module, registration, test = _blocks()
    assert 'Adapter("toyrl", toyrl.looks_like, toyrl.read)' in registration
    src = tmp_path / "toyrl.py"
    src.write_text(module)
    spec = importlib.util.spec_from_file_location("toyrl", src)
    toyrl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toyrl)
    # the page's one registration line
    monkeypatch.setattr(R, "CONSOLE_ADAPTERS", (*R.CONSOLE_ADAPTERS, Adapter("toyrl", toyrl.looks_like, toyrl.read)))
    monkeypatch.setattr(R, "FORMATS", (*R.FORMATS, "toyrl"))
    scope = {"detect_format": detect_format, "load": load}
    exec(test, scope)
    scope["test_toyrl_console"](tmp_path)
    # the line is what registers it: without it, no reader claims the file
    monkeypatch.setattr(R, "CONSOLE_ADAPTERS", R.CONSOLE_ADAPTERS[:-1])
    with pytest.raises(UserError, match="unknown log format"):
        detect_format(tmp_path / "train.log")
