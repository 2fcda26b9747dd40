"""The packaged editions registry: 33 editions pinned as the shared manifests say, areas covering every question."""

from __future__ import annotations

import json
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from oabench_pipeline.core.edition_names import edition_in_text, roman_value
from oabench_pipeline.core.editions import (
    DEFAULT_EDITIONS_FILE,
    Edition,
    EditionsRegistryError,
    key_provenance,
    load_editions,
    load_suites,
    parse_editions,
)
from oabench_pipeline.core.records import LETTERS, AnswerKeyEntry
from oabench_pipeline_tests.conftest import shared_oab_dir

ARCHIVED = (*range(1, 27), 28, 36, 37, 38)
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
    pinned = set(registry())  # shared may archive editions not pinned yet: those are not compared
    by_edition = {e["edition"]: e for e in archive if e["edition"] in pinned}
    for e in recent:
        key = {**e["gabarito"], "status": "definitive"}
        by_edition[e["edition"]] = {**e, "booklet": e["prova"], "answer_key": key, "questions": 80}
    return by_edition


def test_the_registry_has_the_33_editions_with_2700_questions() -> None:
    assert sorted(registry()) == [*ARCHIVED, *STUDY]
    assert sum(e.question_count for e in registry().values()) == 2700
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
            # Provenance: the examiners' own address of the same bytes, whose file name opens with their size.
            assert pinned.official_url == wanted.get("official_url"), (number, kind)
            if pinned.official_url:
                assert pinned.official_url.rsplit("/", 1)[1].startswith(f"{pinned.bytes}_"), (number, kind)
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


def test_unresolved_questions_are_the_manifests_with_their_reason() -> None:
    """The 28th's 37: the preliminary key gives D, public transcriptions of the later key disagree."""
    unresolved = {n: e.unresolved for n, e in registry().items() if e.unresolved}
    assert list(unresolved) == [28] and list(unresolved[28]) == [37]
    for number, questions in unresolved.items():
        assert {str(n): why for n, why in questions.items()} == manifests()[number][
            "unresolved_after_preliminary_key"
        ]


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


def test_fgv_2010s_starts_with_fgvs_first_exam_the_2nd(shared_oab: Path) -> None:
    """FGV set the 2nd (2010.2) in a template of its own; the 1st (2010.1) was CESPE's."""
    assert load_suites()["fgv-2010s"].editions == (*range(2, 27), 28)
    with pymupdf.open(shared_oab / manifests()[2]["booklet"]["file"]) as doc:
        assert "A FGV realizará a coleta da impressão digital" in doc[0].get_text()


# The 22nd's types 3 and 4 move whole areas (type 3 opens with Direito Civil, type 4 with ECA, the TIPO 1's
# 37th and 44th questions): their permutations cross most boundaries, so that edition's blocks come from type 2.
WHOLE_AREAS_MOVED = {22: (3, 4)}
# Boundaries that split a block, set from the questions' text: the 3rd's types shuffle 19-37 (Processo Civil
# and Constitucional) and 90-100 (four small areas, question by question) as single blocks.
BOUNDARIES_INSIDE_BLOCKS = {3: {27, *range(91, 99)}}


def correspondence_rows(pdf: Path) -> list[tuple[int, ...]]:
    """(TIPO 1, TIPO 2, TIPO 3, TIPO 4) of each question in a key's `TABELA DE CORRESPONDÊNCIA`, by geometry:
    the rows under its `TIPO 1 TIPO 2 ...` header, the letters of the 12th's `Gabarito` column left out."""
    rows: list[tuple[int, ...]] = []
    with pymupdf.open(pdf) as doc:
        under_header = False
        for page in doc:
            lines: dict[float, list[tuple[float, str]]] = {}
            for x0, y0, _, y1, text, *_ in page.get_text("words"):
                middle = (y0 + y1) / 2
                line = next((y for y in lines if abs(y - middle) <= 3), middle)
                lines.setdefault(line, []).append((x0, text))
            for y in sorted(lines):
                words = [text for _, text in sorted(lines[y])]
                joined = " ".join(words)
                under_header = under_header or ("TIPO 1" in joined and "TIPO 2" in joined)
                cells = [w for w in words if w not in LETTERS]
                if under_header and cells and all(c.isdigit() for c in cells) and len(cells) % 4 == 0:
                    rows.extend(tuple(int(c) for c in cells[i : i + 4]) for i in range(0, len(cells), 4))
    return rows


def block_ends(rows: list[tuple[int, ...]], types: tuple[int, ...], count: int) -> set[int]:
    """The numbers q where no type's permutation crosses from 1..q into q+1..count: FGV shuffles the
    questions of each type within an area, so every area ends at one of them."""
    by_first = {row[0]: row for row in rows}
    ends, reach = set(), dict.fromkeys(types, 0)
    for q in range(1, count + 1):
        for t in types:
            reach[t] = max(reach[t], by_first[q][t - 1])
        if all(reach[t] == q for t in types):
            ends.add(q)
    return ends


def test_every_area_boundary_is_one_no_booklet_type_crosses(shared_oab: Path) -> None:
    """The structural half of how the schemes were established (docs/registry.md, "Area schemes")."""
    with_table = []
    for number, edition in registry().items():
        rows = correspondence_rows(shared_oab / manifests()[number]["answer_key"]["file"])
        if not rows:
            continue
        with_table.append(number)
        count = edition.question_count
        for column in range(4):  # each type's column numbers every question once
            assert sorted(row[column] for row in rows) == list(range(1, count + 1)), (number, column + 1)
        types = tuple(t for t in (1, 2, 3, 4) if t not in WHOLE_AREAS_MOVED.get(number, ()))
        ends = block_ends(rows, types, count)
        boundaries = {span.last for span in edition.areas}
        assert boundaries - ends == BOUNDARIES_INSIDE_BLOCKS.get(number, set()), number
        if number in (43, 45):  # the current edital's 20 areas are exactly the blocks
            assert ends == boundaries
    # The 1st (CESPE) and 2nd keys have one booklet's list; the 44th's key prints no correspondence table.
    assert with_table == [n for n in registry() if n not in (1, 2, 44)]


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
        ({"unresolved": {"3": "disputed"}}, r"unresolved questions \[3\] are outside 1-2"),
        ({"unresolved": {"2": " "}}, r"unresolved questions \[2\] need their reason"),
        (
            {"unresolved": {"2": "disputed"}, "annulled": [2], "annulled_source": "somebody"},
            r"questions \[2\] are both annulled and unresolved",
        ),
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


def test_key_provenance_of_each_kind_of_answer() -> None:
    """What `answer_keys` records of where an answer comes from (core/editions.py: key_provenance)."""
    [definitive] = parse_editions({"area_schemes": SCHEME, "editions": [BASE]}, "registry.toml")
    preliminary = definitive.model_copy(
        update={
            "key_status": "preliminary",
            "annulled": (2,),
            "annulled_source": "a transcription",
            "unresolved": {1: "disputed"},
        }
    )
    read = AnswerKeyEntry(number=1, correct="A")

    def columns(edition: Edition, entry: AnswerKeyEntry) -> tuple[Any, ...]:
        p = key_provenance(edition, entry)
        return (p.correct, p.status, p.key_document, p.changed_after_preliminary, p.preliminary_correct)

    # A definitive key: its preliminary is not pinned, so whether the answer changed is not known here.
    assert columns(definitive, read) == ("A", "active", "definitive", None, None)
    assert columns(definitive, AnswerKeyEntry(number=1, correct=None)) == (
        None,
        "annulled",
        "definitive",
        None,
        None,
    )
    # A preliminary key: its answer, unchanged as far as is known, unless a notice or the registry says otherwise.
    assert columns(preliminary, AnswerKeyEntry(number=2, correct="B")) == (
        None,
        "annulled",
        "definitive",
        True,
        "B",
    )
    unchanged = preliminary.model_copy(update={"annulled": (), "annulled_source": None, "unresolved": {}})
    assert columns(unchanged, AnswerKeyEntry(number=2, correct="B")) == (
        "B",
        "active",
        "preliminary",
        False,
        "B",
    )
    assert columns(preliminary, read) == (None, "unresolved", "preliminary", None, "A")
    assert key_provenance(preliminary, read).status_note == "unresolved: disputed"
    noticed = AnswerKeyEntry(number=2, correct="B", printed="A", changed_by="examiners' notice")
    assert columns(definitive, noticed) == ("B", "active", "definitive", True, None)
    assert key_provenance(definitive, noticed).status_note == "changed from A to B by the examiners' notice"
