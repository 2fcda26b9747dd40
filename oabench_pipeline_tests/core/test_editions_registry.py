"""The packaged editions registry: 29 editions pinned as the shared manifests say, areas covering every question."""

from __future__ import annotations

import json
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from oabench_pipeline.core.edition_names import edition_in_text, roman_value
from oabench_pipeline.core.editions import (
    DEFAULT_EDITIONS_FILE,
    Edition,
    EditionsRegistryError,
    load_editions,
    parse_editions,
)
from oabench_pipeline_tests.conftest import shared_oab_dir

ARCHIVED = (*range(1, 26), 37)
STUDY = (43, 44, 45)


@cache
def registry() -> dict[int, Edition]:
    return {e.edition: e for e in load_editions()}


@cache
def manifests() -> dict[int, dict[str, Any]]:
    """Both shared manifests by edition, in the archive's shape (`booklet`/`answer_key`)."""
    root = shared_oab_dir()
    archive = json.loads((root / "archive-manifest.json").read_text(encoding="utf-8"))["editions"]
    recent = json.loads((root / "manifest.json").read_text(encoding="utf-8"))["editions"]
    by_edition = {e["edition"]: e for e in archive}
    for e in recent:
        key = {**e["gabarito"], "status": "definitive"}
        by_edition[e["edition"]] = {**e, "booklet": e["prova"], "answer_key": key, "questions": 80}
    return by_edition


def test_the_registry_has_the_29_editions_with_2380_questions() -> None:
    assert sorted(registry()) == [*ARCHIVED, *STUDY]
    assert sum(e.question_count for e in registry().values()) == 2380
    assert [n for n, e in registry().items() if e.question_count == 100] == [1, 2, 3]


def test_pins_dates_and_key_status_match_the_shared_manifests(shared_oab: Path) -> None:
    for number, entry in manifests().items():
        edition = registry()[number]
        for kind in ("booklet", "answer_key"):
            pinned = edition.file(kind)
            wanted = entry[kind]
            assert (pinned.url, pinned.sha256, pinned.bytes, pinned.label) == (
                wanted["url"],
                wanted["sha256"],
                wanted["bytes"],
                wanted["label"],
            ), (number, kind)
            assert (shared_oab / wanted["file"]).stat().st_size == pinned.bytes  # the mirror holds them
        assert edition.exam_date.isoformat() == entry["exam_date"]
        assert edition.exam_name == entry["exam_name"]
        assert edition.question_count == entry["questions"]
        assert edition.key_status == entry["answer_key"]["status"], number
        assert edition.exam_page_url == entry.get("exam_page_url")  # none invented for archived editions


def test_annulments_only_the_registry_knows_have_their_source() -> None:
    annulled = {n: e.annulled for n, e in registry().items() if e.annulled}
    # The 3rd's and 19th's archived keys are preliminary and show no annulment; the 9th's key marks its
    # own (test_answer_key.py), so the registry does not repeat them.
    assert annulled == {3: (72,), 19: (71, 73)}
    for number in annulled:
        expected = manifests()[number]["annulled_after_preliminary_key"]
        assert list(annulled[number]) == expected
        assert "legal-nlp/oab-exams" in (registry()[number].annulled_source or "")
        assert registry()[number].annulled_status_source.startswith("registry: legal-nlp/oab-exams")


def test_the_first_three_exams_keep_their_year_names() -> None:
    labels = {n: e.exam_label for n, e in registry().items() if e.exam_label}
    assert labels == {1: "2010.1", 2: "2010.2", 3: "2010.3"}
    assert edition_in_text("Exame da Ordem Unificado – 2010.2") == 2
    assert edition_in_text("EXAME DE ORDEM 2010.3 – TIPO 1 – BRANCO") == 3
    assert edition_in_text("XXXVII EXAME DE ORDEM UNIFICADO") == 37
    assert edition_in_text("CÓDIGO CIVIL EXAME") is None  # CIVIL is no numeral
    assert (roman_value("XIX"), roman_value("IIII"), roman_value("VX")) == (19, None, None)


def test_every_area_scheme_covers_each_edition_using_it_exactly_once() -> None:
    document = tomllib.loads(DEFAULT_EDITIONS_FILE.read_text(encoding="utf-8"))
    used = {e.area_scheme for e in registry().values()}
    assert used == set(document["area_schemes"]), "a scheme no edition uses, or one missing"
    for edition in registry().values():
        numbers = sorted(n for span in edition.areas for n in range(span.first, span.last + 1))
        assert numbers == list(range(1, edition.question_count + 1)), edition.edition


def test_area_names_are_the_canonical_ones_of_the_current_scheme() -> None:
    """One name per area across editions, so leaderboard_by_area adds up across all of them."""
    canonical = {span.area for span in registry()[45].areas}
    for edition in registry().values():
        assert {span.area for span in edition.areas} <= canonical, edition.edition
    ethics = {n: [s for s in e.areas if s.area == "Ética Profissional"] for n, e in registry().items()}
    assert (ethics[2][0].first, ethics[2][0].last) == (81, 90)  # the 2nd puts Ethics last
    assert all(spans[0].first == 1 for n, spans in ethics.items() if n >= 4)  # from the 4th on, first


BASE = {
    "edition": 46,
    "exam_name": "46º EXAME DE ORDEM UNIFICADO",
    "exam_date": "2026-04-26",
    "area_scheme": "s",
    "question_count": 2,
    "booklet": {"label": "b", "url": "https://x/b.pdf", "sha256": "0" * 64},
    "answer_key": {"label": "k", "url": "https://x/k.pdf", "sha256": "1" * 64},
}
SCHEME = {"s": [{"first": 1, "last": 2, "area": "Ética Profissional"}]}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"annulled": [2]}, "annulled and annulled_source go together"),
        ({"annulled_source": "somebody"}, "annulled and annulled_source go together"),
        ({"annulled": [3], "annulled_source": "somebody"}, r"annulled questions \[3\] are outside 1-2"),
        ({"exam_label": "2010.2"}, "exam_label '2010.2' does not name edition 46"),
        ({"key_status": "final"}, "key_status"),
    ],
)
def test_registry_mistakes_name_the_edition_and_field(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(EditionsRegistryError, match=rf"^registry.toml: edition #1 \(46\): .*{problem}"):
        parse_editions({"area_schemes": SCHEME, "editions": [{**BASE, **fields}]}, "registry.toml")


def test_optional_fields_default_for_a_new_or_discovered_edition() -> None:
    [edition] = parse_editions({"area_schemes": SCHEME, "editions": [BASE]}, "registry.toml")
    assert (edition.key_status, edition.annulled, edition.exam_page_url, edition.exam_label) == (
        "definitive",
        (),
        None,
        None,
    )
