"""parse_answer_key on the 33 real keys (every TIPO 1 letter checked by eye) and on synthetic keys."""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import cache
from pathlib import Path

import pymupdf
import pytest

from oabench_pipeline.core.answer_key import AnswerKeyParseError, parse_answer_key
from oabench_pipeline.core.editions import load_editions
from oabench_pipeline.core.records import ParsedAnswerKey
from oabench_pipeline_tests.conftest import pinned_archive_entries, shared_oab_dir
from oabench_pipeline_tests.core.synthetic_pdfs import answer_letters, make_answer_key_pdf

EDITIONS = (43, 44, 45)


@cache
def key_bytes(edition: int) -> bytes:
    root = shared_oab_dir()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    entry = next(e for e in manifest["editions"] if e["edition"] == edition)
    return (root / entry["gabarito"]["file"]).read_bytes()


@cache
def real_key(edition: int, booklet_type: int = 1) -> ParsedAnswerKey:
    return parse_answer_key(key_bytes(edition), booklet_type)


def letters(key: ParsedAnswerKey) -> str:
    return "".join(entry.correct or "*" for entry in key.entries)


def test_real_keys_totals_and_annulled(shared_oab: Path) -> None:
    keys = {edition: real_key(edition) for edition in EDITIONS}
    for edition, key in keys.items():
        assert key.edition_in_header == edition
        assert [e.number for e in key.entries] == list(range(1, 81))
    annulled = {ed: [e.number for e in key.entries if e.status == "annulled"] for ed, key in keys.items()}
    assert annulled == {43: [1, 74], 44: [], 45: []}
    entries = [e for key in keys.values() for e in key.entries]
    assert len(entries) == 240
    assert sum(e.status == "active" for e in entries) == 238


# First and last rows of each TIPO 1 table, read by eye from the pages rendered at 80 dpi.
ROWS_BY_EYE = {
    43: ("*CAACBDCBDDBBABCCADD", "DCDBADABBDCBA*DCCADA"),
    44: ("CBBACBCCADCDCDDBDADC", "DCBDCBABAADCBACADBBA"),
    45: ("AACCBADBBCCDBADABACA", "ABCABCBDADADDBDCBBAA"),
}


@pytest.mark.parametrize("edition", EDITIONS)
def test_real_key_rows_match_the_pdf_by_eye(edition: int, shared_oab: Path) -> None:
    first, last = ROWS_BY_EYE[edition]
    assert letters(real_key(edition))[:20] == first
    assert letters(real_key(edition))[60:] == last


def test_other_booklet_types_are_separate_tables(shared_oab: Path) -> None:
    # 43rd TIPO 2, first row by eye: its annulled questions sit at 4 and 73.
    tipo2 = real_key(43, 2)
    assert letters(tipo2)[:20] == "CAC*BACDBDCABBDBCADD"
    assert [e.number for e in tipo2.entries if e.correct is None] == [4, 73]
    assert letters(tipo2) != letters(real_key(43, 1))


def test_real_keys_agree_with_published_scored_runs(shared_oab: Path) -> None:
    """correctAnswer in the published OABench runs was derived independently: all 240 agree."""
    published: dict[tuple[int, int], str | None] = {}
    for path in sorted((shared_oab / "published-runs").glob("*/scored.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            published[(row["edition"], row["questionNumber"])] = row["correctAnswer"]
    parsed = {(ed, e.number): e.correct for ed in EDITIONS for e in real_key(ed).entries}
    assert len(published) == 240
    assert parsed == published


def test_type_not_found(shared_oab: Path) -> None:
    with pytest.raises(
        AnswerKeyParseError,
        match=r"no table headed 'PROVA TIPO 5' or 'TIPO 5 – <colour>' \(types found: \[1, 2, 3, 4\]\)",
    ):
        parse_answer_key(key_bytes(44), booklet_type=5)


# ---------------------------------------------------------------- synthetic keys


def test_synthetic_key_round_trips_for_any_type() -> None:
    given = answer_letters(annulled=[7, 80], seed=3)
    for booklet_type in (1, 3):
        key = parse_answer_key(make_answer_key_pdf(46, given, booklet_type=booklet_type), booklet_type)
        assert key.edition_in_header == 46
        assert {e.number: e.correct for e in key.entries} == given


def test_missing_row_entry_fails() -> None:
    given = answer_letters()
    del given[33]
    with pytest.raises(AnswerKeyParseError, match=r"missing question numbers \[33\]"):
        parse_answer_key(make_answer_key_pdf(46, given))


def test_empty_cell_fails() -> None:
    given: dict[int, str | None] = {**answer_letters(), 12: ""}
    with pytest.raises(AnswerKeyParseError, match=r"no letter for question 12 \(type 1, page 1\)"):
        parse_answer_key(make_answer_key_pdf(46, given))


def test_bad_letter_fails() -> None:
    given: dict[int, str | None] = {**answer_letters(), 58: "E"}
    with pytest.raises(AnswerKeyParseError, match=r"'E' for question 58 .*expected one of A-D"):
        parse_answer_key(make_answer_key_pdf(46, given))


def test_number_beyond_expected_fails() -> None:
    given: dict[int, str | None] = {**answer_letters(), 81: "A"}
    with pytest.raises(AnswerKeyParseError, match=r"unexpected numbers \[81\]"):
        parse_answer_key(make_answer_key_pdf(46, given))
    key = parse_answer_key(make_answer_key_pdf(46, given), expected_questions=81)
    assert key.entries[-1].number == 81


def test_not_a_pdf() -> None:
    with pytest.raises(AnswerKeyParseError, match="not a readable PDF"):
        parse_answer_key(b"<html>404</html>")
    with pytest.raises(AnswerKeyParseError, match="empty"):
        parse_answer_key(b"")


# ------------------------------------------------ the archived keys (1st-26th, 28th, 36th-38th)


@cache
def archive_manifest() -> dict[int, dict]:
    """The archived editions the registry pins (shared may hold more: conftest.pinned_archive_entries)."""
    return pinned_archive_entries()


@cache
def archived_key(edition: int) -> ParsedAnswerKey:
    """Each archived key parsed once per test process (all 30: ~0.7 s)."""
    entry = archive_manifest()[edition]
    pdf = (shared_oab_dir() / entry["answer_key"]["file"]).read_bytes()
    return parse_answer_key(pdf, expected_questions=entry["questions"])


# Which layout rule reads which key (the module docstring of core/answer_key.py).
SHAPES_BY_EDITION = {
    1: "single-grid",
    2: "numbered-list",
    12: "correspondence-key",
    **{e: "type-tables" for e in (*range(3, 12), *range(13, 29), 36, 37, 38) if e != 27},
}
# Every letter of the TIPO 1 table of each archived key, read by eye from the PDFs rendered at 80 dpi, a
# row of the table (20 questions) between spaces; `*` annulled. Layouts: the 1st's Questão/Gabarito grid
# ("Caderno: Afonso Aninos"), the 2nd's `001 – C; 002 – A; ...` list, the 12th's Gabarito column of the
# correspondence table, the others' `... – TIPO 1 – BRANCO` tables (the 9th's red "*" beside the letters of
# 3, 26 and 27; the definitive 15th's, 17th's, 36th's, 37th's and 38th's "*" in place of the letter). The 28th's
# is its grid as printed (47: A), which the notice before it changes (test_the_28th_notice_...).
TIPO_1_KEYS_BY_EYE = {
    1: "ADAABADACDCBDCACDDBC DCACBBDDCBCADCAABCDA CDBBDCBAABDCDADDBCDD CDBCABABBABCCCADCCCD AABABBBCDABAABDBDACB",
    2: "CABACDCABCDBADBBABDA BBAACBCADDCDCDABDBAC BBBDCCBDDBCACDBDAAAC DDCACCBDDBBABDADDDAD DCAACACCCBCBBACABDDC",
    3: "ACDBDBACACDBBABAADBB AABCBCDCDACDCDDDCACB DBCCBABBDABACCDBCDDB ACCDACCBADCCDDADCDAB AADBCBABABDDCABDCDAB",
    4: "DACDBABDCBAABCDDBACC ABDACADACBDBBCCBDDBB CAACBDCAADCDABCCCDDD BDBBAAADCBACACDBABCB",
    5: "ABBBCDCDCCBCCBABBDDD DBCABCCBCADDCCCBAACB CDCAADCBAADBBBBADACA BAABDACDDADCDBCDDAAD",
    6: "BCBBCDDADDBCBACADACC ABBCDDADABBBCDADCACA CAABCCBCDDDADDDBDBDD BCACCBCCAADABCCADBBA",
    7: "BBDABCBDDCBBBCDBDDCB BCCADDDCDCDDDABBCBDD DBBCCBBADCDBBACCCCDB ADBAADCAABBABCBDDCDC",
    8: "CCBBCCBBCDDCABDBADCB DAAABCDBAAABCBADACDB BDCDACBBBACCBACBCBBB AACBACCBDDCCBBBCCAAC",
    9: "DC*BDBDBBBCBCADCDCBD BCABA**DCBDCCADACBDC BABADDAABDCADACBBBCA BBAABAADDBCCACCCBDBA",
    10: "BDBBABBBDCDBDDCBDBBD ACBDBDDBDAABDDBABBCC BCADCAAAADDDADACDBBA BABCADCCCDBBACCDDCAB",
    11: "BBBBCCBBDBBDBDDCDBDC BBCADBABDACCDBCBCDBB ACCAADCADBCABDCDCBBD CDCADCDABAACBBBCACDC",
    12: "DDBBCDBCBCBABCAACADD CDCDAAADBCDCBDBDDBBA CCCBCBBBBCCBAACCCDCA BCCCCBADDCABDADCBDDB",
    13: "BBDACBBBBCBDDBADCBDD CCACACDACACACBDCAADA DADCDADBDDBADADDCACC DDBDABBDBDBACDABBCAB",
    14: "BBADABDDDCBABABBDCAB DCABCCABDBBBDADBDCDD AADACACCBABCBBBACAAC AACBDBCABCDBCCCDABAB",
    15: "CCBABDCCBABACADBDBDA BDBBDCBDBCAD*CBDCCCD AAACADBCCBCACACDDCCB BBDBCABBBAABADBBB*AC",
    16: "DADCBDBCACBACCCBABAD AACBDABCBBDABCCAAABA BCDCBCDDCDCBDDBABACC DCBCDAACDCDADCBCBCAC",
    17: "CCAAABBDCDCBCACBCDC* DADBDDBBACCADBADCADD CABCCBDACDABBACDADDD BCCABDBCBBABDAB*DABA",
    18: "ADABADADACCCDACBCCBA BBDCADDCABBDBADCADDB DCDCBCCBBACABBBDDDCD ADCDCDBCCDACACBAACAA",
    19: "DBCCCDDDABADBDAADBBD ABCCCCCCBBCDDCCCBCBC CBCACACCABDACBDDABBB DBBADABDDBDABDADDCAD",
    20: "BDBDCBADACDBCACBDCDB AACBBDDACADABCCAABBD CDCCDCCDBABCDBDBCABC DDCADAABDDCADBADCDAB",
    21: "ADBBCCCBDBCDBBDBDCDC CADDDCACBCDCCCBBCDDA CADDBBCABADCACBBBCAA BCDDBABAAAABCABABBCD",
    22: "DABDBABCBDADCDCBABBD DACDADBCCACDADACADDA BBDDADBBBCDCCBCCDCAA BDCACBBBABAAACDCCACB",
    23: "DCACAABCDADBBBACADBB CDCABDCDADAADDACACAC BBDDCBCDCBDBCCCBCBBC DBDCDBDCDCBDCAADCDAA",
    24: "DBACCCADBCDBBABBCCDC BBBCDBCDDBCABBDADCDB BCDAAACDABBDCDCBBCAA DBDACBCDAACDCBDAAADA",
    25: "BDCDCDACABACBDCCCDAA BDCDCBCCABDDABDBADBB ADCCAABBABABBCBDCCDA ADABBBACDCABAAAACBBA",
    26: "CCBCAABCBDDACBCACBCA DACDBDDABBCDBCCACDBA DDBAACAADCDDADABBDDA CBDADBCDCCABDBBACACB",
    28: "DBBACADDABDBADCDACDB CDAACBCAADACCDBCDABD CDBDBAACBCCABBDBACDD ACBBADACBDCCBADADACB",
    36: "BADDBCDDABCBDBCAAADB DCCCBADADBCDBADCBBBB DBBDCADBA**DCACACBCD CACDABDADBCCAAACABCA",
    37: "DDBDBC*ADCDBABCBBDDA CABCCBDADADDDACBBCAC BBDDCACDACCCBCDBBACD ABDDBCAC*AAADBBABADB",
    38: "CDBACBDBAADCACCACCDB BADBCDADCDADADDCDACD BACC*AADBABCDDABABB* B*CCABCCABDDBBBCACAD",
}


def test_every_archived_key_parses_with_its_layout_edition_and_status(shared_oab: Path) -> None:
    for edition, entry in archive_manifest().items():
        key = archived_key(edition)
        assert key.shape == SHAPES_BY_EDITION[edition], edition
        assert key.edition_in_header == edition  # roman numerals, or 2010.1-2010.3 for the first three
        assert key.status_in_title == entry["answer_key"]["status"], edition
        assert [e.number for e in key.entries] == list(range(1, entry["questions"] + 1))


@pytest.mark.parametrize("edition", sorted(TIPO_1_KEYS_BY_EYE))
def test_archived_key_letters_match_the_pdf_by_eye(edition: int, shared_oab: Path) -> None:
    printed = "".join(
        (e.printed if e.changed_by else e.correct) or "*" for e in archived_key(edition).entries
    )
    assert printed == TIPO_1_KEYS_BY_EYE[edition].replace(" ", "")


def test_the_28th_notice_changes_47_from_a_to_b_in_every_type(shared_oab: Path) -> None:
    """The key file opens with the examiners' COMUNICADO (19/03/2019); the grid after it still prints A.
    The letter comes from reading the notice, for each type's own number of the question."""
    pdf = (shared_oab / archive_manifest()[28]["answer_key"]["file"]).read_bytes()
    for booklet_type, number in ((1, 47), (2, 48), (3, 48), (4, 50)):
        key = parse_answer_key(pdf, booklet_type)
        changed = [e for e in key.entries if e.changed_by]
        assert [(e.number, e.printed, e.correct) for e in changed] == [(number, "A", "B")], booklet_type
        assert changed[0].changed_by == "examiners' notice (COMUNICADO 19/03/2019, key file page 1)"
        assert (key.edition_in_header, key.status_in_title, key.shape) == (28, "preliminary", "type-tables")
        assert "TIPO 1" not in key.table_heading or booklet_type == 1  # the notice is never the table


def test_a_notice_that_does_not_match_the_grid_fails_naming_both(shared_oab: Path) -> None:
    """A notice changing a letter the grid does not print is a wrong notice, or the wrong key file."""
    grid = pymupdf.open(shared_oab / archive_manifest()[28]["answer_key"]["file"])
    notice = pymupdf.open()
    page = notice.new_page()
    for y, line in enumerate(
        [
            "COMUNICADO",
            "Tipo/cor da prova  Nº. da questão  Gabarito preliminar  Gabarito retificado",
            "Tipo 1 - Branca  46  C  B",
            "19 de março de 2019 (19/03/2019).",
        ]
    ):
        page.insert_text((72, 72 + 20 * y), line)
    notice.insert_pdf(grid, from_page=1)
    with pytest.raises(
        AnswerKeyParseError, match=r"changes question 46 from C to B, but the key's grid prints A$"
    ):
        parse_answer_key(notice.tobytes())


def test_annulments_the_archived_keys_show(shared_oab: Path) -> None:
    annulled = {
        edition: [e.number for e in archived_key(edition).entries if e.status == "annulled"]
        for edition in archive_manifest()
    }
    shown = {edition: numbers for edition, numbers in annulled.items() if numbers}
    # The definitive keys' "*", and the 9th's preliminary key, which marks its three annulments itself.
    assert shown == {9: [3, 26, 27], 15: [33, 78], 17: [20, 76], 36: [50, 51], 37: [7, 69], 38: [45, 60, 62]}
    # The 9th's marks are the annulments the public transcription records; the 3rd's and 19th's keys show
    # none of theirs, so the registry adds them (test_editions_registry.py).
    expected = {e: m.get("annulled_after_preliminary_key") for e, m in archive_manifest().items()}
    assert annulled[9] == expected[9]
    assert annulled[3] == [] and annulled[19] == [] and expected[3] and expected[19]


# How each key prints the day of the exam: `Aplicação: 13/6/2010` (1st), `Prova objetiva – 26/09/2010` (2nd),
# `PROVAS DO DIA 13/02/2011` (3rd on; the 7th's with no-break spaces).
KEY_DATE_RE = re.compile(
    r"(?:Aplicação:|Prova\s+objetiva\s+–|PROVAS\s+DO\s+DIA)\s*(\d{1,2})/(\d{1,2})/(\d{4})"
)


def test_every_key_prints_the_exam_date_of_the_registry(shared_oab: Path) -> None:
    """`exam_date` is the day the key's first page gives, not only the manifest's (test_editions_registry.py)."""
    for edition in load_editions():
        with pymupdf.open(shared_oab / archived_or_study_key_file(edition.edition)) as doc:
            # The first page that prints it: the 28th's file opens with the examiners' notice.
            found = next(found for page in doc if (found := KEY_DATE_RE.findall(page.get_text())))
            dates = {dt.date(int(y), int(m), int(d)) for d, m, y in found}
        assert dates == {edition.exam_date}, edition.edition


def archived_or_study_key_file(edition: int) -> str:
    if edition in archive_manifest():
        return archive_manifest()[edition]["answer_key"]["file"]
    manifest = json.loads((shared_oab_dir() / "manifest.json").read_text(encoding="utf-8"))
    return next(e for e in manifest["editions"] if e["edition"] == edition)["gabarito"]["file"]


# What the first question pages of each archived booklet say it is: the key's TIPO 1 column (3rd on),
# or the one booklet the 1st's and 2nd's keys name ("Caderno: Afonso Aninos", "Caderno de Prova nº 01").
BOOKLET_TYPE_RE = re.compile(
    r"TIPO\s+0?(\d)\s*[–-]\s*BRANC[AO]|Caderno\s+(AFONSO\s+ARINOS)|Caderno de Prova\s+(\d+)"
)


@pytest.mark.archive  # opens every archived booklet (~0.4 s)
def test_every_archived_booklet_is_the_one_whose_key_is_read(shared_oab: Path) -> None:
    says = {}
    for edition, entry in archive_manifest().items():
        with pymupdf.open(shared_oab / entry["booklet"]["file"]) as doc:
            found = BOOKLET_TYPE_RE.findall(doc[1].get_text() + doc[2].get_text())
        says[edition] = {" ".join("".join(groups).split()) for groups in found}
    assert says == {1: {"AFONSO ARINOS"}, 2: {"01"}, **{e: {"1"} for e in archive_manifest() if e > 2}}
    assert archived_key(1).table_heading == "Caderno: Afonso Aninos"  # sic
    assert archived_key(2).table_heading == "Caderno de Prova nº 01"
    assert all("TIPO 1" in archived_key(e).table_heading for e in archive_manifest() if e > 2)


def test_a_key_with_one_table_has_no_other_type(shared_oab: Path) -> None:
    pdf = (shared_oab / archive_manifest()[1]["answer_key"]["file"]).read_bytes()
    with pytest.raises(AnswerKeyParseError, match=r"single table \(Caderno: Afonso Aninos\).*no type 2$"):
        parse_answer_key(pdf, booklet_type=2, expected_questions=100)


def test_an_unknown_layout_fails_in_one_line_saying_what_was_expected() -> None:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "GABARITOS DEFINITIVOS  -  questão um: letra A")
    with pytest.raises(AnswerKeyParseError) as raised:
        parse_answer_key(doc.tobytes())
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "answer key: none of its 1 page(s) holds a known key layout; expected a table headed"
    )
    assert "'001 – A; 002 – B; ...' list" in message
