"""The registry's area schemes against every archived booklet's text: `area_sanity` passes on each edition,
and warns on each once its scheme is shifted by one question.

Marked `archive` like `test_booklet_archive.py` (every archived booklet parsed, ~10 s of CPU): left out of
the default run, run by `.ci/run` after it. The 43rd-45th: `test_exam_validation.py`, in the default run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.core.editions import Edition, load_editions
from oabench_pipeline.core.exam_validation import area_sanity
from oabench_pipeline_tests.core.test_booklet_layouts import archive_booklet
from oabench_pipeline_tests.core.test_exam_validation import full_text

pytestmark = pytest.mark.archive

ARCHIVED = [e for e in load_editions() if e.pinned_by == "registry" and e.exam_page_url is None]


def rows(edition: Edition, shift: int = 0) -> list[tuple[int, str, str]]:
    """(number, area of `number + shift`, text) for each question of the archived booklet."""
    count = edition.question_count
    return [
        (q.number, edition.area_of((q.number - 1 + shift) % count + 1), full_text(q))
        for q in archive_booklet(edition.edition).questions
    ]


def test_the_archived_editions_are_the_30_of_the_archive() -> None:
    assert [e.edition for e in ARCHIVED] == [*range(1, 27), 28, 36, 37, 38]


@pytest.mark.parametrize("edition", ARCHIVED, ids=lambda e: str(e.edition))
def test_every_area_of_the_scheme_mentions_its_words(edition: Edition, shared_oab: Path) -> None:
    assert area_sanity(rows(edition)) == []


@pytest.mark.parametrize("edition", ARCHIVED, ids=lambda e: str(e.edition))
def test_a_scheme_one_question_off_is_warned_about(edition: Edition, shared_oab: Path) -> None:
    assert area_sanity(rows(edition, shift=1)) != []
