"""Researcher tryout finding 15: one description of the samples-to-target estimator, in the same words wherever it
is described, and those words what rlbatch.analysis.crossing does."""

import re
from pathlib import Path

import pytest

from rlbatch.analysis import crossing

ROOT = Path(__file__).resolve().parents[1]

#: The estimator in words (rlbatch.analysis.crossing.find_crossing): the monotone fit decides and brackets the
#: crossing; _local_fit refines it by a quadratic in samples over the evaluations within WINDOW of it, a straight
#: line in log samples with fewer than QUADRATIC_POINTS.
WORDS = ("a monotone fit of its evaluations, refined by a local quadratic in samples over the evaluations within a "
         "factor 2 of the crossing (a straight line in log samples with fewer than three)")

PAGES = ("docs/commands/demo.md", "docs/commands/analyze.md", "docs/design.md")


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_words_are_what_the_code_does():
    assert crossing.WINDOW == 2.0  # "within a factor 2 of the crossing"
    assert crossing.QUADRATIC_POINTS == 3  # "a straight line in log samples with fewer than three"
    doc = flat(crossing.__doc__)
    assert "local quadratic fit of the score over the evaluations within a factor" in doc
    assert "with fewer than three points, a straight line in log samples" in doc


@pytest.mark.parametrize("page", PAGES)
def test_every_page_describes_the_estimator_in_the_same_words(page):
    text = flat((ROOT / page).read_text(encoding="utf-8"))
    assert WORDS in text
    # the description finding 15 found in the report, which the code does not do (a line only with two points)
    assert "refined by a straight line against log samples" not in text
    assert "refined by a local straight line" not in text


def test_the_report_describes_the_estimator_in_the_same_words():
    from rlbatch.analysis.headline import AGGREGATION

    assert WORDS in flat(AGGREGATION)
