"""The house: no source file outgrows 700 lines (the readers' own rule, tests/test_readers_house.py, for all of src/)."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "rlbatch"


def test_no_source_file_is_over_700_lines():
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 50
    assert {p: n for p, n in sizes.items() if n > 700} == {}
