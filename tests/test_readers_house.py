"""Issue 45, the house: the readers stay in files of a few hundred lines (none over 700), and extract.py shows the
pipeline's order by naming each stage's module."""

from pathlib import Path

READERS = Path(__file__).resolve().parents[1] / "src" / "rlbatch" / "readers"


def test_no_reader_file_over_700_lines():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in READERS.glob("*.py")}
    assert sizes and max(sizes.values()) <= 700, {k: v for k, v in sizes.items() if v > 700}


def test_extract_names_every_stage_of_the_pipeline():
    text = (READERS / "extract.py").read_text(encoding="utf-8")
    for stage in ("linescan", "records", "discover", "runsplit"):
        assert f"rlbatch.readers.{stage}" in text, stage
