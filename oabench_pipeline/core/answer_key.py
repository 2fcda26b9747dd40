"""Read the answer key ("Gabaritos Definitivos" or "Preliminares") of an OAB 1st-phase exam with pymupdf.

Every key since the 1st edition (2010) gives, for each booklet, the correct letter of each question
number, in one of four layouts. The parser tries each layout's rule (`SHAPES`, in this order) and reads the
first one present; the letters then go through the same checks whatever the layout:

- `type-tables` (3rd–11th, 13th–26th, 28th, 36th–38th, 43rd on): one table per booklet type, headed `PROVA TIPO 1`
  (`43º EXAME DE ORDEM - PROVA TIPO 1`) or `<edition> – TIPO 1 – BRANCO`: rows of question numbers, each
  followed by the row of their letters. A correspondence table between types ("TIPO 1 TIPO 2 ...") has
  neither form of heading and is therefore never taken for a key.
- `correspondence-key` (12th): only the correspondence table, with a `Gabarito` column beside the
  numbers of each type. One letter serves every type because, from the 7th edition on, the choices keep
  their order across types (only the questions move): checked on every key with per-type tables.
- `numbered-list` (2nd): `001 – C; 002 – A; ...` for its one booklet (`Caderno de Prova nº 01`).
- `single-grid` (1st): one grid of `Questão` / `Gabarito` rows, no type heading, for its one booklet
  (`Caderno: Afonso Aninos`, the booklet `Caderno AFONSO ARINOS`).

A key file may open with the examiners' notice of a changed answer (the 28th: `COMUNICADO`, a table of
`Tipo/cor da prova`, `Nº. da questão`, `Gabarito preliminar`, `Gabarito retificado`, dated 19/03/2019), the
grid after it still printing the old letter. The notice is read (`_notices`), never taken for a key table:
its letter replaces the grid's, which must be the notice's `Gabarito preliminar`, and the entry records both.

An annulled question shows `*` instead of its letter (definitive keys: the 15th, 17th, 36th-38th, 43rd), or
beside it (the 9th's preliminary key, `* = Anular Questão`, a red star by the letter). Letters are matched
to numbers by position (the letter sits under its number), so a missing cell, a stray letter or an unknown
symbol is reported instead of shifting the others. The edition is the one the key's own pages name
(`43º EXAME`, `XXV EXAME`, `EXAME DE ORDEM UNIFICADO 2010.1`, see `core/edition_names.py`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pymupdf

from oabench_pipeline.core.edition_names import edition_in_text
from oabench_pipeline.core.pdf import open_pdf
from oabench_pipeline.core.records import LETTERS, AnswerKeyEntry, KeyStatus, Letter, ParsedAnswerKey

# Its version is `core/versions.py: ANSWER_KEY_PARSER_VERSION`: bump it with any change to what this parser extracts.

EXPECTED_QUESTIONS = 80
ANNULLED_MARK = "*"

TYPE_HEADING_RE = re.compile(
    r"PROVA\s+TIPO\s+0?(\d+)|\bTIPO\s+0?(\d+)\s*[–—-]\s*(?:BRANC|VERDE|AMAREL|AZUL)", re.IGNORECASE
)
TITLE_STATUS_RE = re.compile(r"GABARITOS?\s+(?:OFICIAIS\s+)?(PRELIMI|DEFINITIV)", re.IGNORECASE)
LIST_ENTRY_RE = re.compile(r"\b(\d{3})\s*[–—-]\s*([^\s;.]+)\s*[;.]")
CADERNO_RE = re.compile(r"\bCaderno\b", re.IGNORECASE)
# The examiners' notice of a changed answer: a page opening with COMUNICADO that has a `Gabarito retificado`
# column; each of its rows reads `Tipo 1 – Branca 47 A B` (type, number, preliminary letter, new letter).
NOTICE_TITLE_RE = re.compile(r"^\s*COMUNICADO\b")
NOTICE_COLUMN_RE = re.compile(r"Gabarito\s+retificado", re.IGNORECASE)
NOTICE_ROW_RE = re.compile(r"^Tipo\s+0?(\d+)\s*[–—-]\s*\w+\s+(\d{1,3})\s+([A-D*])\s+([A-D*])$", re.IGNORECASE)
NOTICE_DATE_RE = re.compile(r"\b(\d{2}/\d{2}/\d{4})\b")
# Labels at the start of a row of the `single-grid` layout, not cells.
ROW_LABELS = frozenset({"questão", "questao", "gabarito"})
# Words whose vertical centres are this close (points) belong to the same table row.
ROW_TOLERANCE = 3.0
EXPECTED_LAYOUTS = (
    "a table headed 'PROVA TIPO {t}' or 'TIPO {t} – BRANCO', a correspondence table with a 'Gabarito' "
    "column, a '001 – A; 002 – B; ...' list, or a 'Questão'/'Gabarito' grid"
)


T = TypeVar("T")


class AnswerKeyParseError(ValueError):
    """The answer-key PDF does not hold a complete, well-formed key for the requested type."""


@dataclass(frozen=True)
class _Word:
    page: int  # 1-based
    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2


@dataclass(frozen=True)
class _Table:
    """What one layout rule read: the cell text (and page) of each question number."""

    shape: str
    heading: str
    cells: dict[int, tuple[str, int]]


def parse_answer_key(
    pdf_bytes: bytes, booklet_type: int = 1, *, expected_questions: int = EXPECTED_QUESTIONS
) -> ParsedAnswerKey:
    """The letters of `booklet_type`'s key, questions 1..expected_questions, `None` when annulled.

    Raises AnswerKeyParseError (one line: page, what was expected) when no known layout is present,
    the type is absent, a number is missing or repeated, a cell is empty or holds something other
    than A-D, `*`, or a letter marked `*`.
    """
    doc = open_pdf(pdf_bytes, "answer key", AnswerKeyParseError)
    try:
        # Pages are read lazily: a key for type 1 is on page 1, the rest need not be read.
        pages = _LazyPages(doc)
        notices, key_pages = _notices(pages, booklet_type)
        edition = _first_in_pages(key_pages, edition_in_text)
        status = _first_in_pages(key_pages, _title_status)
        table = _read_table(key_pages, booklet_type)
    finally:
        doc.close()
    letters = {
        n: _letter(text, f"question {n} (type {booklet_type}, page {page})")
        for n, (text, page) in table.cells.items()
    }
    expected = set(range(1, expected_questions + 1))
    missing, extra = sorted(expected - letters.keys()), sorted(letters.keys() - expected)
    if missing or extra:
        raise AnswerKeyParseError(
            f"answer key for type {booklet_type} ({table.shape}, {table.heading!r}): missing question numbers "
            f"{missing}" + (f", unexpected numbers {extra}" if extra else "")
        )
    entries = [_entry(n, letters[n], notices.get(n)) for n in sorted(letters)]
    return ParsedAnswerKey(
        edition_in_header=edition,
        entries=entries,
        status_in_title=status,
        shape=table.shape,
        table_heading=table.heading,
    )


@dataclass(frozen=True)
class _Change:
    """One row of an examiners' notice: question `number` goes from letter `printed` to `correct`."""

    number: int
    printed: Letter | None
    correct: Letter | None
    source: str


def _notices(
    pages: Sequence[list[_Word]], booklet_type: int
) -> tuple[dict[int, _Change], Sequence[list[_Word]]]:
    """The changes the key file's notices make to `booklet_type`'s key, and the pages that are not notices.

    Only the pages before the first key table are looked at: a notice opens the file."""
    changes: dict[int, _Change] = {}
    notice_pages: set[int] = set()
    for index, words in enumerate(pages):
        lines = _line_texts(words)
        if (
            not lines
            or not NOTICE_TITLE_RE.match(lines[0])
            or not any(NOTICE_COLUMN_RE.search(t) for t in lines)
        ):
            break
        notice_pages.add(index)
        dated = NOTICE_DATE_RE.search("\n".join(lines))
        source = f"examiners' notice (COMUNICADO{' ' + dated.group(1) if dated else ''}, key file page {index + 1})"
        for line in lines:
            row = NOTICE_ROW_RE.match(line)
            if row is None or int(row.group(1)) != booklet_type:
                continue
            number = int(row.group(2))
            if number in changes:
                raise AnswerKeyParseError(
                    f"answer key: the notice on page {index + 1} changes question {number} twice"
                )
            changes[number] = _Change(
                number,
                _letter(
                    row.group(3), f"question {number}'s preliminary answer in the notice on page {index + 1}"
                ),
                _letter(row.group(4), f"question {number}'s new answer in the notice on page {index + 1}"),
                source,
            )
        if not changes:
            raise AnswerKeyParseError(
                f"answer key: page {index + 1} is a notice (COMUNICADO, 'Gabarito retificado') with no row "
                f"for type {booklet_type} (expected rows like 'Tipo {booklet_type} – Branca 47 A B')"
            )
    if not notice_pages:
        return changes, pages
    return changes, [pages[i] for i in range(len(pages)) if i not in notice_pages]


def _entry(number: int, printed: Letter | None, change: _Change | None) -> AnswerKeyEntry:
    """The key's entry for `number`: the grid's letter, or the notice's, which must change what the grid prints."""
    if change is None:
        return AnswerKeyEntry(number=number, correct=printed)
    if printed not in (change.printed, change.correct):
        raise AnswerKeyParseError(
            f"answer key: the {change.source} changes question {number} from {change.printed or '*'} to "
            f"{change.correct or '*'}, but the key's grid prints {printed or '*'}"
        )
    return AnswerKeyEntry(
        number=number, correct=change.correct, printed=change.printed, changed_by=change.source
    )


class _LazyPages(Sequence[list[_Word]]):
    """The words of each page, extracted on first access (extraction dominates the CPU time)."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self._doc = doc
        self._cache: dict[int, list[_Word]] = {}

    def __len__(self) -> int:
        return self._doc.page_count

    def __getitem__(self, index: int) -> list[_Word]:  # type: ignore[override]
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index not in self._cache:
            page = self._doc[index]
            words = page.get_text("words", sort=False)
            self._cache[index] = [_Word(index + 1, w[0], w[1], w[2], w[3], w[4]) for w in words]
        return self._cache[index]


def _first_in_pages(pages: Sequence[Sequence[_Word]], find: Callable[[str], T | None]) -> T | None:
    """The first thing `find` sees in the pages' lines, top to bottom (the title comes first)."""
    for words in pages:
        found = find("\n".join(_line_texts(words)))
        if found is not None:
            return found
    return None


def _title_status(text: str) -> KeyStatus | None:
    match = TITLE_STATUS_RE.search(text)
    if not match:
        return None
    return "preliminary" if match.group(1).upper().startswith("PRELIM") else "definitive"


def _line_texts(words: Sequence[_Word]) -> list[str]:
    return [_text(row) for row in _rows(words)]


def _text(row: Sequence[_Word]) -> str:
    return " ".join(w.text for w in row)


def _rows(words: Sequence[_Word]) -> list[list[_Word]]:
    """Words grouped into visual rows (top to bottom), each row left to right."""
    rows: list[list[_Word]] = []
    for word in sorted(words, key=lambda w: (w.cy, w.x0)):
        if rows and abs(word.cy - rows[-1][0].cy) <= ROW_TOLERANCE:
            rows[-1].append(word)
        else:
            rows.append([word])
    return [sorted(row, key=lambda w: w.x0) for row in rows]


# ---------------------------------------------------------------------------------------------------------
# The layouts: each rule returns the table it found, or None when its layout is not in the document
# ---------------------------------------------------------------------------------------------------------


def _read_table(pages: Sequence[Sequence[_Word]], booklet_type: int) -> _Table:
    for rule in SHAPES:
        table = rule(pages, booklet_type)
        if table is not None:
            return table
    raise AnswerKeyParseError(
        f"answer key: none of its {len(pages)} page(s) holds a known key layout; expected "
        + EXPECTED_LAYOUTS.format(t=booklet_type)
    )


def _type_tables(pages: Sequence[Sequence[_Word]], booklet_type: int) -> _Table | None:
    """The rows under the heading of `booklet_type`'s table, down to the next type's heading."""
    found: list[int] = []
    for words in pages:
        rows = _rows(words)
        for i, row in enumerate(rows):
            kind = _type_heading(row)
            if kind is None:
                continue
            found.append(kind)
            if kind != booklet_type:
                continue
            below: list[list[_Word]] = []
            for following in rows[i + 1 :]:
                if _type_heading(following) is not None:
                    break
                below.append(following)
            return _Table("type-tables", _text(row), _read_grid(below, booklet_type))
    if not found:
        return None
    raise AnswerKeyParseError(
        f"answer key has no table headed 'PROVA TIPO {booklet_type}' or 'TIPO {booklet_type} – <colour>' "
        f"(types found: {sorted(set(found))})"
    )


def _type_heading(row: Sequence[_Word]) -> int | None:
    match = TYPE_HEADING_RE.search(_text(row))
    return int(match.group(1) or match.group(2)) if match else None


def _correspondence_key(pages: Sequence[Sequence[_Word]], booklet_type: int) -> _Table | None:
    """The `TIPO k` and `Gabarito` columns of a correspondence table that carries the letters."""
    for words in pages:
        rows = _rows(words)
        for i, row in enumerate(rows):
            columns = _header_columns(row)
            names = [name for name, _ in columns]
            if "Gabarito" not in names or not any(name.startswith("TIPO") for name in names):
                continue
            wanted = f"TIPO {booklet_type}"
            if wanted not in [name for name, _ in columns]:
                raise AnswerKeyParseError(
                    f"answer key: the correspondence table on page {row[0].page} has no {wanted!r} column"
                )
            return _Table("correspondence-key", _text(row), _read_columns(rows[i + 1 :], columns, wanted))
    return None


def _header_columns(row: Sequence[_Word]) -> list[tuple[str, float]]:
    """Column names and centres of a header row: `TIPO` + its number is one name; `Gabarito` another."""
    columns: list[tuple[str, float]] = []
    words = list(row)
    for i, word in enumerate(words):
        if word.text.upper() == "TIPO" and i + 1 < len(words) and words[i + 1].text.isdigit():
            columns.append((f"TIPO {int(words[i + 1].text)}", (word.x0 + words[i + 1].x1) / 2))
        elif word.text.lower() == "gabarito":
            columns.append(("Gabarito", word.cx))
    return columns


def _read_columns(
    rows: Sequence[Sequence[_Word]], columns: list[tuple[str, float]], wanted: str
) -> dict[int, tuple[str, int]]:
    """Each data row holds one or more groups of columns (the table is printed in two halves)."""
    cells: dict[int, tuple[str, int]] = {}
    spacing = min((b - a for (_, a), (_, b) in itertools.pairwise(columns)), default=40.0)
    for row in rows:
        by_column: dict[int, str] = {}
        for word in row:
            index = min(range(len(columns)), key=lambda k: abs(columns[k][1] - word.cx))
            if abs(columns[index][1] - word.cx) > spacing / 2:
                raise AnswerKeyParseError(
                    f"answer key: '{word.text}' on page {word.page} is not under any column of the table"
                )
            by_column[index] = by_column.get(index, "") + word.text
        for start, (name, _) in enumerate(columns):
            if name != wanted or start not in by_column:
                continue
            letter_at = next(k for k in range(start, len(columns)) if columns[k][0] == "Gabarito")
            number_text = by_column[start]
            if not number_text.isdigit():
                raise AnswerKeyParseError(
                    f"answer key: '{number_text}' on page {row[0].page} is not a question number"
                )
            _add(cells, int(number_text), by_column.get(letter_at, ""), row[0].page)
    return cells


def _numbered_list(pages: Sequence[Sequence[_Word]], booklet_type: int) -> _Table | None:
    """`001 – C; 002 – A; ...`: one list for the one booklet the key names."""
    cells: dict[int, tuple[str, int]] = {}
    heading = ""
    for words in pages:
        text = "\n".join(_line_texts(words))
        for number, letter in LIST_ENTRY_RE.findall(text):
            _add(cells, int(number), letter, words[0].page)
        heading = heading or _caderno_line(words)
    if len(cells) < 2:
        return None
    return _Table("numbered-list", heading, _only_type_one(cells, booklet_type, heading))


def _single_grid(pages: Sequence[Sequence[_Word]], booklet_type: int) -> _Table | None:
    """One grid of numbers and letters with no type heading: the key of the one booklet it names."""
    cells: dict[int, tuple[str, int]] = {}
    heading = ""
    for words in pages:
        for number, cell in _read_grid(_rows(words), booklet_type).items():
            _add(cells, number, *cell)
        heading = heading or _caderno_line(words)
    if not cells:
        return None
    return _Table("single-grid", heading, _only_type_one(cells, booklet_type, heading))


def _caderno_line(words: Sequence[_Word]) -> str:
    return next((line for line in _line_texts(words) if CADERNO_RE.search(line)), "")


def _only_type_one(
    cells: dict[int, tuple[str, int]], booklet_type: int, heading: str
) -> dict[int, tuple[str, int]]:
    if booklet_type != 1:
        raise AnswerKeyParseError(
            f"answer key has a single table ({heading or 'no heading'}), not one per booklet type: "
            f"there is no type {booklet_type}"
        )
    return cells


SHAPES: tuple[Callable[[Sequence[Sequence[_Word]], int], _Table | None], ...] = (
    _type_tables,
    _correspondence_key,
    _numbered_list,
    _single_grid,
)


# ---------------------------------------------------------------------------------------------------------
# Grids of number rows and letter rows
# ---------------------------------------------------------------------------------------------------------


def _read_grid(rows: list[list[_Word]], booklet_type: int) -> dict[int, tuple[str, int]]:
    """Cell text by question number: each row of numbers is followed by the row of their letters.

    A mark printed beside a letter (the 9th's small `*`, at the letter's lower right) sits lower than
    the letter and so forms a row of its own: rows of marks whose top lies within the letter row's
    height belong to that row.
    """
    rows = [_without_labels(row) for row in rows]
    cells: dict[int, tuple[str, int]] = {}
    for i, row in enumerate(rows):
        if not _is_number_row(row):
            continue
        below = rows[i + 1] if i + 1 < len(rows) else []
        # The letter row sits right under the numbers; anything further down (the footnote
        # "* Questão anulada", the next block of numbers) is not this row's letters.
        height = max(w.y1 - w.y0 for w in row)
        if not below or _is_number_row(below) or below[0].y0 - max(w.y1 for w in row) > height:
            if len(row) == 1:
                continue  # a lone number with no letters under it is a page number
            below = []
        else:
            below = below + _marks_beside(below, rows[i + 2 :])
        for number, cell in _match_cells(row, below).items():
            _add(cells, number, "".join(w.text for w in sorted(cell, key=lambda w: w.x0)), row[0].page)
    return cells


def _without_labels(row: list[_Word]) -> list[_Word]:
    return row[1:] if row and row[0].text.lower() in ROW_LABELS else row


def _is_number_row(row: Sequence[_Word]) -> bool:
    """Numbers counting up (not a row of template zeros, nor the correspondence table's rows)."""
    if not row or not all(w.text.isdigit() for w in row):
        return False
    numbers = [int(w.text) for w in row]
    return numbers[0] >= 1 and all(b > a for a, b in itertools.pairwise(numbers))


def _marks_beside(letters: Sequence[_Word], following: Sequence[Sequence[_Word]]) -> list[_Word]:
    top, bottom = min(w.y0 for w in letters), max(w.y1 for w in letters)
    marks: list[_Word] = []
    for row in following:
        if not all(w.text == ANNULLED_MARK and top <= w.y0 <= bottom for w in row):
            break
        marks.extend(row)
    return marks


def _match_cells(numbers: list[_Word], below: list[_Word]) -> dict[int, list[_Word]]:
    """Assign each word of the letter row to the number above it (closest centre, within half a cell)."""
    cells: dict[int, list[_Word]] = {int(w.text): [] for w in numbers}
    centres = [w.cx for w in numbers]
    spacing = min((b - a for a, b in itertools.pairwise(centres)), default=40.0)
    for word in below:
        nearest = min(numbers, key=lambda n: abs(n.cx - word.cx))
        if abs(nearest.cx - word.cx) > spacing / 2:
            raise AnswerKeyParseError(
                f"answer key: '{word.text}' on page {word.page} is not under any question number"
            )
        cells[int(nearest.text)].append(word)
    return cells


def _add(cells: dict[int, tuple[str, int]], number: int, text: str, page: int) -> None:
    if number in cells:
        raise AnswerKeyParseError(f"answer key lists question {number} twice (page {page})")
    cells[number] = (text, page)


def _letter(text: str, where: str) -> Letter | None:
    """The letter in one cell: A-D; None for `*` or a letter marked `*` (annulled); anything else fails."""
    text = text.strip()
    if not text:
        raise AnswerKeyParseError(f"answer key has no letter for {where}")
    if text == ANNULLED_MARK or (
        len(text) == 2 and ANNULLED_MARK in text and text.strip(ANNULLED_MARK) in LETTERS
    ):
        return None
    if text not in LETTERS:
        raise AnswerKeyParseError(
            f"answer key has '{text}' for {where}, expected one of A-D, '*' or a letter marked '*'"
        )
    return LETTERS[LETTERS.index(text)]  # typed as a Letter
