"""Small PDFs built with pymupdf in the layout of the official OAB booklets and answer keys.

Used wherever a test needs a booklet or key the real files cannot give: a question spanning a
column and a page break, a choice quoting "(A)", a picture inside a question, a key with a row
missing or a bad letter, a whole fabricated edition (e.g. a 46th exam for automation tests).

Booklet layout mimicked from the real ones: a cover page, then question pages with a running
header (`46º EXAME DE ORDEM UNIFICADO`, logo) and footer (`Tipo Branca - Página N`), two text
columns, each question opening with its bold number over a rule, choices `(A)`..`(D)` at the
margin with wrapped lines hanging 14 pt, and a trailing questionnaire page without header.
Text is set in Helvetica (base-14 font, Latin-1 only: no curly quotes or en dashes).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pymupdf

PAGE_WIDTH, PAGE_HEIGHT = 595.32, 841.92
COLUMNS = ((43.0, 286.0), (312.0, 555.0))
BODY_TOP, BODY_BOTTOM = 69.0, 780.0
FONT, BOLD_FONT, SIZE = "helv", "hebo", 9.0
_REGULAR, _BOLD = pymupdf.Font(FONT), pymupdf.Font(BOLD_FONT)
_ADVANCES: dict[str, float] = {}
LINE_STEP = 11.0  # baseline to baseline inside a paragraph
PARAGRAPH_EXTRA = 2.0  # added between paragraphs and between choices, as in the real booklets
QUESTION_GAP = 18.0  # from the last line of a question to the next number
HANGING_INDENT = 14.0  # wrapped lines of a choice
PICTURE_HEIGHT = 60.0
WRITER_BATCH = 40

ImageKind = Literal["none", "raster", "vector"]

_WORDS = [
    "advogado",
    "contrato",
    "sociedade",
    "empresária",
    "tribunal",
    "recurso",
    "prazo",
    "sentença",
    "juiz",
    "norma",
    "lei",
    "município",
    "estado",
    "união",
    "processo",
    "direito",
    "dever",
    "obrigação",
    "pena",
    "crime",
    "tributo",
    "imposto",
    "empregado",
    "empregador",
    "trabalho",
    "servidor",
    "administração",
    "pública",
    "consumidor",
    "fornecedor",
    "ação",
    "execução",
    "prova",
    "audiência",
    "parte",
    "autor",
    "réu",
    "herança",
    "cônjuge",
    "contribuinte",
    "decisão",
    "jurídico-constitucional",
    "ex-funcionário",
    "auxílio-reclusão",
    "Trata-se",
    "competência",
    "ordem",
]


@dataclass(frozen=True)
class SyntheticQuestion:
    """One question to print: stem paragraphs separated by "\\n", four choice texts, optional picture."""

    number: int
    stem: str
    choices: tuple[str, str, str, str]
    image: ImageKind = "none"


@dataclass
class _Cursor:
    """Where the next line goes: page index, column, baseline-to-be (top of the next line box)."""

    doc: pymupdf.Document
    edition: int
    justify: bool
    page: pymupdf.Page | None = None
    column: int = 1
    y: float = BODY_BOTTOM
    writers: list[tuple[int, pymupdf.TextWriter]] = field(default_factory=list)
    appended: int = 0

    def write(self, x: float, top: float, text: str, font: pymupdf.Font) -> None:
        """Queue text whose line box starts at `top`. TextWriters are far faster than thousands
        of insert_text calls (each rewrites the page's content stream), but each append
        re-measures the writer's whole text, so a fresh writer is started every few lines."""
        assert self.page is not None
        if not self.writers or self.writers[-1][0] != self.page.number or self.appended >= WRITER_BATCH:
            self.writers.append((self.page.number, pymupdf.TextWriter(self.page.rect)))
            self.appended = 0
        self.writers[-1][1].append((x, top + SIZE * 0.8), text, font=font, fontsize=SIZE)
        self.appended += 1

    def flush(self) -> None:
        """Write every queued writer into its page."""
        for number, writer in self.writers:
            writer.write_text(self.doc[number])
        self.writers.clear()

    def room(self, height: float) -> None:
        """Move to the next column (or a new question page) unless `height` fits in this one."""
        if self.page is not None and self.y + height <= BODY_BOTTOM:
            return
        if self.column == 0 and self.page is not None:
            self.column = 1
        else:
            self.page = _new_question_page(self.doc, self.edition)
            self.column = 0
        self.y = BODY_TOP


def filler_text(words: int, seed: int) -> str:
    """Deterministic pseudo-legal Portuguese text of `words` words, ending with a full stop."""
    rng = random.Random(seed)
    chosen = [rng.choice(_WORDS) for _ in range(words)]
    return (" ".join(chosen)).capitalize() + "."


def sample_question(number: int, *, stem_words: int = 45, choice_words: int = 18) -> SyntheticQuestion:
    """A plausible question with a two-paragraph stem, all text derived from `number`."""
    stem = f"Questão {number}: " + filler_text(stem_words, seed=number) + "\nAssinale a afirmativa correta."
    choices = tuple(
        f"Opção {letter} da questão {number}: " + filler_text(choice_words, seed=number * 10 + i)
        for i, letter in enumerate("ABCD")
    )
    return SyntheticQuestion(number=number, stem=stem, choices=choices)  # type: ignore[arg-type]


def sample_questions(count: int = 80) -> list[SyntheticQuestion]:
    """`count` sample questions numbered 1..count."""
    return [sample_question(n) for n in range(1, count + 1)]


def make_booklet_pdf(
    edition: int,
    questions: Sequence[SyntheticQuestion],
    *,
    cover: bool = True,
    questionnaire: bool = True,
    justify: bool = False,
) -> bytes:
    """A booklet PDF with the questions flowed through two columns and as many pages as needed.

    With 80 questions numbered 1..80 it parses with `parse_booklet`. `justify` (slower: ~2 s for 80
    questions) spreads the words
    of full lines to both margins, which makes pymupdf report them as separate fragments, as
    it does on the real booklets.
    """
    doc = pymupdf.open()
    if cover:
        _cover_page(doc, edition)
    cursor = _Cursor(doc=doc, edition=edition, justify=justify)
    for question in questions:
        _place_question(cursor, question)
    cursor.flush()
    if questionnaire:
        _questionnaire_page(doc)
    data = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    return data


def _new_question_page(doc: pymupdf.Document, edition: int) -> pymupdf.Page:
    """A blank question page with logo, running header, footer and the column separator."""
    page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
    logo = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 12, 6), False)
    logo.set_rect(logo.irect, (40, 40, 40))
    page.insert_image(pymupdf.Rect(48, 35, 91, 58), pixmap=logo)
    page.insert_text((430, 49), f"{edition}º EXAME DE ORDEM UNIFICADO", fontname=FONT, fontsize=7)
    page.draw_rect(pymupdf.Rect(48, 793.9, 558.4, 794.4), color=None, fill=(0, 0, 0))
    page.insert_text((445, 805), f"Tipo Branca - Página {page.number + 1}", fontname=BOLD_FONT, fontsize=9)
    page.draw_rect(pymupdf.Rect(297.3, 67.3, 298.0, 760.0), color=None, fill=(0, 0, 0))
    return page


def _cover_page(doc: pymupdf.Document, edition: int) -> None:
    """A cover with the edition title low on the page and some instructions, both to be ignored."""
    page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
    page.insert_text((111, 175), f"{edition}º EXAME DE ORDEM UNIFICADO", fontname=BOLD_FONT, fontsize=22)
    page.insert_text((454, 205), "TIPO 1 - BRANCA", fontname=FONT, fontsize=14)
    lines = ["Além deste caderno contendo 80 (oitenta) questões objetivas,", "(A) instruções: 1 leia", "2"]
    for i, line in enumerate(lines):
        page.insert_text((76, 288 + 11 * i), line, fontname=FONT, fontsize=9)


def _questionnaire_page(doc: pymupdf.Document) -> None:
    """The perception questionnaire: bold numbers and lettered options, but no running header."""
    page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
    page.insert_text((43, 150), "QUESTIONÁRIO DE PERCEPÇÃO SOBRE A PROVA", fontname=BOLD_FONT, fontsize=11)
    for i in range(10):
        y = 190 + 40 * i
        page.insert_text((43, y), str(i + 1), fontname=BOLD_FONT, fontsize=9)
        page.insert_text(
            (43, y + 12),
            "(A) Muito fácil. (B) Fácil. (C) Difícil. (D) Muito difícil.",
            fontname=FONT,
            fontsize=9,
        )


def _place_question(cursor: _Cursor, question: SyntheticQuestion) -> None:
    """Number with its rule, stem paragraphs, optional picture, then the four choices."""
    if cursor.page is not None and cursor.y > BODY_TOP:
        cursor.y += QUESTION_GAP - LINE_STEP
    cursor.room(LINE_STEP + 8)
    left, right = COLUMNS[cursor.column]
    cursor.write(left, cursor.y, str(question.number), _BOLD)
    cursor.page.draw_rect(
        pymupdf.Rect(left - 1.5, cursor.y + 2.5, right - 1, cursor.y + 3), color=None, fill=(0, 0, 0)
    )
    cursor.y += LINE_STEP + 8
    for i, paragraph in enumerate(question.stem.split("\n")):
        if i:
            cursor.y += PARAGRAPH_EXTRA
        _paragraph(cursor, paragraph, first_indent=0.0, indent=0.0)
    if question.image != "none":
        _picture(cursor, question.image)
    for letter, choice in zip("ABCD", question.choices, strict=True):
        cursor.y += PARAGRAPH_EXTRA - 1.0
        _paragraph(cursor, f"({letter}) {choice}", first_indent=0.0, indent=HANGING_INDENT)


def _picture(cursor: _Cursor, kind: ImageKind) -> None:
    """A raster image or a vector drawing (filled circle in a stroked frame) in the column."""
    cursor.room(PICTURE_HEIGHT + LINE_STEP)
    left, right = COLUMNS[cursor.column]
    rect = pymupdf.Rect(left + 20, cursor.y, right - 20, cursor.y + PICTURE_HEIGHT)
    if kind == "raster":
        pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 16, 8), False)
        pix.set_rect(pix.irect, (200, 60, 60))
        cursor.page.insert_image(rect, pixmap=pix)
    else:
        cursor.page.draw_rect(rect, color=(0, 0, 0), width=0.8)
        cursor.page.draw_circle(
            pymupdf.Point(rect.x0 + 30, rect.y0 + 30), 20, color=(0, 0, 0.6), fill=(0.4, 0.6, 0.9)
        )
    cursor.y += PICTURE_HEIGHT + LINE_STEP


def _paragraph(cursor: _Cursor, text: str, *, first_indent: float, indent: float) -> None:
    """Wrap `text` to the column width, flowing into the next column or page when full."""
    pieces = _pieces(text)
    first = True
    while pieces:
        cursor.room(LINE_STEP)
        left, right = COLUMNS[cursor.column]
        x = left + (first_indent if first else indent)
        line, pieces = _fill_line(pieces, right - x)
        _text_line(cursor, x, right, line, last=not pieces)
        cursor.y += LINE_STEP
        first = False


def _pieces(text: str) -> list[tuple[str, bool]]:
    """Words, with compounds split after their hyphen; the flag says "glued to the next piece"."""
    out: list[tuple[str, bool]] = []
    for word in text.split():
        parts = word.split("-")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            out.append((part if last else part + "-", not last))
    return out


def _fill_line(
    pieces: list[tuple[str, bool]], width: float
) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Take as many pieces as fit in `width` (at least one), return (line, rest)."""
    taken = 1
    while taken < len(pieces) and _width(_joined(pieces[: taken + 1])) <= width:
        taken += 1
    return pieces[:taken], pieces[taken:]


def _width(text: str) -> float:
    """Width of `text` in the body font; per-character advances are cached because
    Font.text_length walks the string in Python and dominated the build time."""
    total = 0.0
    for char in text:
        if char not in _ADVANCES:
            _ADVANCES[char] = _REGULAR.glyph_advance(ord(char))
        total += _ADVANCES[char]
    return total * SIZE


def _joined(pieces: Sequence[tuple[str, bool]]) -> str:
    return "".join(text + ("" if glued else " ") for text, glued in pieces).rstrip()


def _words_of(pieces: Sequence[tuple[str, bool]]) -> list[str]:
    """Pieces merged back into space-separated words (a glued piece joins the next one)."""
    words, current = [], ""
    for text, glued in pieces:
        current += text
        if not glued:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    return words


def _text_line(
    cursor: _Cursor, x: float, right: float, pieces: list[tuple[str, bool]], *, last: bool
) -> None:
    """Print one line; full lines are justified word by word when the cursor asks for it.

    Each justified word keeps its trailing space character, as in the real booklets, so the
    extracted text has its spaces whatever pymupdf decides about the wide gaps.
    """
    words = _words_of(pieces)
    if not cursor.justify or last or len(words) < 2:
        cursor.write(x, cursor.y, _joined(pieces), _REGULAR)
        return
    widths = [_width(word) for word in words]
    gap = (right - x - sum(widths)) / (len(words) - 1)
    for i, (word, width) in enumerate(zip(words, widths, strict=True)):
        cursor.write(x, cursor.y, word if i == len(words) - 1 else word + " ", _REGULAR)
        x += width + gap


def answer_letters(count: int = 80, *, annulled: Sequence[int] = (), seed: int = 0) -> dict[int, str | None]:
    """Deterministic letters for questions 1..count, None (annulled) for `annulled`."""
    rng = random.Random(seed)
    return {n: None if n in annulled else rng.choice("ABCD") for n in range(1, count + 1)}


def make_answer_key_pdf(
    edition: int,
    letters: Mapping[int, str | None],
    *,
    booklet_type: int = 1,
    types: int = 4,
) -> bytes:
    """An answer-key PDF: one table per booklet type, 20 numbers per row with letters underneath.

    `letters` is printed for `booklet_type`; the other types get a rotated copy. None prints `*`
    (annulled); a number absent from `letters` is left out of the table (a missing row entry);
    any other string is printed as is ("" for an empty cell, "E" for a bad letter).
    """
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
    items: list[tuple[float, float, str, pymupdf.Font, float]] = [
        (150, 40, "CONSELHO FEDERAL DA ORDEM DOS ADVOGADOS DO BRASIL", _BOLD, 9),
        (245, 52, f"{edition}º EXAME UNIFICADO", _BOLD, 9),
        (170, 64, "GABARITOS DEFINITIVOS - PROVAS DO DIA 1/1/2030", _BOLD, 9),
    ]
    rows = (max(letters, default=0) + 19) // 20
    y = 100.0
    for kind in range(1, max(types, booklet_type) + 1):
        shown = letters if kind == booklet_type else _rotated(letters, kind)
        items.append((220, y, f"{edition}º EXAME DE ORDEM - PROVA TIPO  {kind}", _BOLD, 10))
        y += 14
        for row in range(rows):
            for col in range(20):
                number = row * 20 + col + 1
                if number not in shown:
                    continue
                x = 50 + col * 25.5
                mark = shown[number]
                items.append((x + 8, y, str(number), _BOLD, 8))
                items.append((x + 9, y + 12, "*" if mark is None else mark, _REGULAR, 9))
            y += 26
        y += 20
    items.append((48, y, "* Questão anulada", _REGULAR, 8))
    _write_batched(page, items)
    data = doc.tobytes(garbage=3, deflate=True)
    doc.close()
    return data


def _write_batched(
    page: pymupdf.Page, items: Sequence[tuple[float, float, str, pymupdf.Font, float]]
) -> None:
    """Write (x, baseline, text, font, size) items with a fresh TextWriter every WRITER_BATCH items
    (insert_text per item is ~30x slower; one huge writer re-measures all its text per append)."""
    for start in range(0, len(items), WRITER_BATCH):
        writer = pymupdf.TextWriter(page.rect)
        for x, y, text, font, size in items[start : start + WRITER_BATCH]:
            if text:
                writer.append((x, y), text, font=font, fontsize=size)
        writer.write_text(page)


def _rotated(letters: Mapping[int, str | None], shift: int) -> dict[int, str | None]:
    """The same key reordered, standing in for the other booklet types (never read by tests)."""
    numbers = sorted(letters)
    return {n: letters[numbers[(i + shift) % len(numbers)]] for i, n in enumerate(numbers)}
