"""Read the definitive answer key ("Gabaritos Definitivos") of an OAB 1st-phase exam with pymupdf.

The key PDF holds one table per booklet type, each under a heading such as
`43º EXAME DE ORDEM - PROVA TIPO 1` (or just `PROVA TIPO 1`): rows of question numbers, each
followed by a row with the correct letter under every number, `*` for an annulled question.
A second page may hold a correspondence table between types ("TIPO 1 TIPO 2 ..."), which has
no "PROVA" before "TIPO" and is therefore never taken for a key.

The letters are matched to the numbers by position (the letter sits under its number), so a
missing cell, a stray letter or an unknown symbol is reported instead of shifting the others.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from oabench_pipeline.core.pdf import open_pdf
from oabench_pipeline.core.records import LETTERS, AnswerKeyEntry, ParsedAnswerKey

# Its version is `core/versions.py: ANSWER_KEY_PARSER_VERSION`: bump it with any change to what this parser extracts.

EXPECTED_QUESTIONS = 80
ANNULLED_MARK = "*"

TYPE_HEADING_RE = re.compile(r"PROVA\s+TIPO\s+(\d+)", re.IGNORECASE)
EDITION_RE = re.compile(r"\b(\d{1,3})\s*[ºo°ª]\s*EXAME\b", re.IGNORECASE)
# Words whose vertical centres are this close (points) belong to the same table row.
ROW_TOLERANCE = 3.0


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


def parse_answer_key(
    pdf_bytes: bytes, booklet_type: int = 1, *, expected_questions: int = EXPECTED_QUESTIONS
) -> ParsedAnswerKey:
    """The letters of `booklet_type`'s key, questions 1..expected_questions, `None` when annulled.

    Raises AnswerKeyParseError when the type is absent, a number is missing or repeated, a cell
    is empty or holds something other than A-D or `*`.
    """
    doc = open_pdf(pdf_bytes, "answer key", AnswerKeyParseError)
    try:
        # Pages are read lazily: the key for type 1 is on page 1, the rest need not be read.
        pages = _LazyPages(doc)
        edition = _edition(pages)
        section = _section(pages, booklet_type)
    finally:
        doc.close()
    letters = _read_grid(section, booklet_type)
    expected = set(range(1, expected_questions + 1))
    missing, extra = sorted(expected - letters.keys()), sorted(letters.keys() - expected)
    if missing or extra:
        raise AnswerKeyParseError(
            f"answer key for type {booklet_type}: missing question numbers {missing}"
            + (f", unexpected numbers {extra}" if extra else "")
        )
    entries = [AnswerKeyEntry(number=n, correct=letters[n]) for n in sorted(letters)]
    return ParsedAnswerKey(edition_in_header=edition, entries=entries)


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


def _edition(pages: Sequence[Sequence[_Word]]) -> int | None:
    """The first `NNº EXAME` in the document (the title `43º EXAME UNIFICADO`)."""
    for words in pages:
        match = EDITION_RE.search(" ".join(_line_texts(words)))
        if match:
            return int(match.group(1))
    return None


def _line_texts(words: Sequence[_Word]) -> list[str]:
    return [" ".join(w.text for w in row) for row in _rows(words)]


def _rows(words: Sequence[_Word]) -> list[list[_Word]]:
    """Words grouped into visual rows (top to bottom), each row left to right."""
    rows: list[list[_Word]] = []
    for word in sorted(words, key=lambda w: (w.cy, w.x0)):
        if rows and abs(word.cy - rows[-1][0].cy) <= ROW_TOLERANCE:
            rows[-1].append(word)
        else:
            rows.append([word])
    return [sorted(row, key=lambda w: w.x0) for row in rows]


def _section(pages: Sequence[Sequence[_Word]], booklet_type: int) -> list[list[_Word]]:
    """The rows under the `PROVA TIPO <booklet_type>` heading, down to the next heading."""
    found: list[int] = []
    for words in pages:
        rows = _rows(words)
        for i, row in enumerate(rows):
            match = TYPE_HEADING_RE.search(" ".join(w.text for w in row))
            if not match:
                continue
            found.append(int(match.group(1)))
            if int(match.group(1)) != booklet_type:
                continue
            below: list[list[_Word]] = []
            for following in rows[i + 1 :]:
                if TYPE_HEADING_RE.search(" ".join(w.text for w in following)):
                    break
                below.append(following)
            return below
    raise AnswerKeyParseError(
        f"answer key has no table headed 'PROVA TIPO {booklet_type}' (types found: {sorted(set(found)) or 'none'})"
    )


def _read_grid(rows: list[list[_Word]], booklet_type: int) -> dict[int, str | None]:
    """Letters by question number: each row of numbers is followed by the row of their letters."""
    letters: dict[int, str | None] = {}
    for i, row in enumerate(rows):
        if not all(w.text.isdigit() for w in row):
            continue
        below = rows[i + 1] if i + 1 < len(rows) else []
        # The letter row sits right under the numbers; anything further down (the footnote
        # "* Questão anulada", the next block of numbers) is not this row's letters.
        height = max(w.y1 - w.y0 for w in row)
        if not below or all(w.text.isdigit() for w in below) or below[0].y0 - max(w.y1 for w in row) > height:
            below = []
        for number, cell in _match_cells(row, below).items():
            where = f"question {number} (type {booklet_type}, page {row[0].page})"
            if number in letters:
                raise AnswerKeyParseError(f"answer key lists {where} twice")
            letters[number] = _letter(cell, where)
    return letters


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
    if len(cells) != len(numbers):
        duplicated = sorted({w.text for w in numbers if [n.text for n in numbers].count(w.text) > 1})
        raise AnswerKeyParseError(f"answer key lists question(s) {', '.join(duplicated)} twice in one row")
    return cells


def _letter(cell: list[_Word], where: str) -> str | None:
    """The letter in one cell: A-D, None for `*` (annulled); anything else is an error."""
    text = "".join(w.text for w in cell).strip()
    if not text:
        raise AnswerKeyParseError(f"answer key has no letter for {where}")
    if text == ANNULLED_MARK:
        return None
    if text not in LETTERS:
        raise AnswerKeyParseError(f"answer key has '{text}' for {where}, expected one of A-D or '*'")
    return text
