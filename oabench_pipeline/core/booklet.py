"""Read the 80 questions of an official OAB 1st-phase booklet ("Caderno de Prova") with pymupdf.

The booklet layout (FGV, editions 43-45): a cover and an instructions page, then question pages
carrying a running header (`43º EXAME DO ORDEM UNIFICADO` beside the OAB logo) and footer
(`Tipo Branca – Página 3` beside the FGV logo), two text columns split by a vertical rule, and
after the last question a perception questionnaire without the running header. Each question
opens with its number alone on a bold line at the column margin, then the stem, then the
choices `(A)`..`(D)` whose first line sits at the margin and whose wrapped lines hang indented.

The parser works on geometry rather than on `page.get_text()` order because justified lines
come out of pymupdf as several word fragments, and because a question may continue in the
next column or on the next page: it keeps only body text between the running header and
footer, rebuilds visual rows per column, walks them in reading order (left column, right
column, next page) and cuts at the question numbers and choice markers it expects next.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pymupdf

from oabench_pipeline.core.pdf import open_pdf
from oabench_pipeline.core.records import LETTERS, ParsedBooklet, ParsedQuestion

# Its version is `core/versions.py: BOOKLET_PARSER_VERSION`: bump it with any change to what this parser extracts.

EXPECTED_QUESTIONS = 80

# `43º EXAME DE ORDEM UNIFICADO`; the real booklets print a superscript "o" and "DO ORDEM".
HEADER_RE = re.compile(r"\b(\d{1,3})\s*[oOº°ª]?\s*EXAME\s+D[EO]\s+ORDEM\s+UNIFICADO", re.IGNORECASE)
FOOTER_RE = re.compile(r"P[áa]gina\s+\d+", re.IGNORECASE)
CHOICE_RE = re.compile(r"^\(([A-D])\)\s*")
NUMBER_RE = re.compile(r"^\d{1,3}$")

# Running header/footer lines live in these top/bottom shares of the page height.
HEADER_BAND = 0.12
FOOTER_BAND = 0.12
# Used when a question page has a header but its footer line cannot be found.
FALLBACK_BODY_BOTTOM = 0.935
# A row starts at the column margin when its left edge is this close to it (points);
# wrapped choice lines hang ~14 pt to the right, so they never qualify.
MARGIN_TOLERANCE = 3.0
# A gap between two rows of one column this much (points) wider than the typical gap between
# wrapped lines is a paragraph break. Real booklets: 1.9-2.1 pt inside a paragraph, 2.4-4.1 pt
# between paragraphs or list items; gaps rather than baseline steps, because quotations and
# attributions in a smaller font have shorter steps yet visibly separate paragraphs.
PARAGRAPH_EXTRA_GAP = 0.3
# Vector drawings smaller than this in either dimension are rules (under question numbers,
# column separator, table borders), not pictures.
MIN_PICTURE_SIDE = 6.0
WHITE = 0xFFFFFF
# Text with vector blocks, so one interpretation of the page gives both. Images are left out:
# with them extractDICT encodes every logo and takes 4x longer (see _add_raster_pictures).
TEXT_FLAGS = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES) | pymupdf.TEXT_COLLECT_VECTORS
# An image of the same size and format on at least this many question pages (and half of them)
# is page furniture (the OAB and FGV logos of the running header and footer).
FURNITURE_MIN_PAGES = 3


class BookletParseError(ValueError):
    """The PDF is not a booklet whose structure this parser understands; the message says where."""


@dataclass(frozen=True)
class _Row:
    """One visual text row inside one column of a question page (fragments of a line merged)."""

    page: int  # 1-based
    column: int  # 0 = left, 1 = right
    x0: float
    y0: float
    y1: float
    baseline: float
    text: str  # whitespace collapsed, stripped
    bold: bool  # every non-blank span is bold


@dataclass(frozen=True)
class _PageLayout:
    """What the parser keeps of one question page: body rows and the picture boxes in the body."""

    number: int  # 1-based
    width: float
    body_top: float
    body_bottom: float
    edition: int
    rows: list[_Row]
    pictures: list[pymupdf.Rect]


@dataclass
class _Draft:
    """A question being assembled: its number row, then rows per field (stem, A, B, C, D)."""

    number: int
    start: _Row
    fields: dict[str, list[_Row]] = field(default_factory=lambda: {"stem": []})

    @property
    def current(self) -> str:
        return list(self.fields)[-1]

    def rows(self) -> Iterator[_Row]:
        yield self.start
        for rows in self.fields.values():
            yield from rows


def parse_booklet(pdf_bytes: bytes) -> ParsedBooklet:
    """Parse a booklet PDF into its 80 questions (stem, choices A-D, pages, picture flag).

    Raises BookletParseError naming the page and question when the structure is not understood.
    """
    doc = open_pdf(pdf_bytes, "booklet", BookletParseError)
    try:
        layouts = [layout for page in doc.pages() if (layout := _page_layout(page)) is not None]
        _add_raster_pictures(doc, layouts)
    finally:
        doc.close()
    if not layouts:
        raise BookletParseError(
            "no page carries the running header 'NNº EXAME DE ORDEM UNIFICADO': not an OAB booklet?"
        )
    edition = _single_edition(layouts)
    rows = [row for layout in layouts for row in layout.rows]
    drafts = _segment(rows)
    line_gap = _typical_gap(rows)
    by_page = {layout.number: layout for layout in layouts}
    questions = [
        _finish(draft, drafts[i + 1] if i + 1 < len(drafts) else None, line_gap, by_page)
        for i, draft in enumerate(drafts)
    ]
    return ParsedBooklet(edition_in_header=edition, questions=questions)


def _page_layout(page: pymupdf.Page) -> _PageLayout | None:
    """Body rows and pictures of a question page; None for pages without the running header."""
    height, width = page.rect.height, page.rect.width
    # One pass over the page content yields text and vector blocks alike; a separate
    # get_drawings() call would interpret the page once more.
    blocks = page.get_textpage(flags=TEXT_FLAGS).extractDICT()["blocks"]
    lines = list(_text_lines(blocks))
    edition, body_top = None, 0.0
    for bbox, text, _bold, _baseline in lines:
        match = HEADER_RE.search(text)
        if match and bbox[3] <= height * HEADER_BAND:
            edition, body_top = int(match.group(1)), max(body_top, bbox[3])
    if edition is None:
        return None  # cover, instructions, questionnaire, blank pages
    footers = [
        bbox[1]
        for bbox, text, _, _ in lines
        if FOOTER_RE.search(text) and bbox[1] >= height * (1 - FOOTER_BAND)
    ]
    body_bottom = min(footers) if footers else height * FALLBACK_BODY_BOTTOM
    fragments = [line for line in lines if body_top < (line[0][1] + line[0][3]) / 2 < body_bottom]
    rows = _merge_rows(page.number + 1, width / 2, fragments)
    body = pymupdf.Rect(0, body_top, width, body_bottom)
    pictures = [box for box in _picture_boxes(blocks) if body.contains(_center(box))]
    return _PageLayout(page.number + 1, width, body_top, body_bottom, edition, rows, pictures)


_Fragment = tuple[tuple[float, float, float, float], str, bool, float]


def _text_lines(blocks: list[dict[str, Any]]) -> Iterator[_Fragment]:
    """Every non-blank pymupdf line as (bbox, text, all-bold, baseline of its largest span)."""
    for block in blocks:
        for line in block.get("lines", ()) if block["type"] == 0 else ():
            spans = [span for span in line["spans"] if span["text"].strip()]
            if not spans:
                continue
            text = "".join(span["text"] for span in line["spans"])
            # pymupdf reports bold in flags bit 4; some fonts only say it in their name.
            bold = all(span["flags"] & 16 or "bold" in span["font"].lower() for span in spans)
            biggest = max(spans, key=lambda span: span["size"])
            yield tuple(line["bbox"]), text, bold, biggest["origin"][1]


def _merge_rows(page: int, mid: float, fragments: list[_Fragment]) -> list[_Row]:
    """Glue fragments on the same baseline of the same column into rows, in reading order.

    Justified lines come out of pymupdf as one "line" per word when the gaps are wide, so a
    visual row is every fragment whose baseline is within half a line height of the first.
    """
    rows: list[_Row] = []
    for column in (0, 1):
        in_column = sorted(
            (f for f in fragments if ((f[0][0] + f[0][2]) / 2 >= mid) == bool(column)),
            key=lambda f: (f[3], f[0][0]),
        )
        group: list[_Fragment] = []
        for fragment in in_column:
            if group and abs(fragment[3] - group[0][3]) > (group[0][0][3] - group[0][0][1]) * 0.5:
                rows.append(_row_from(page, column, group))
                group = []
            group.append(fragment)
        if group:
            rows.append(_row_from(page, column, group))
    return rows


def _row_from(page: int, column: int, group: list[_Fragment]) -> _Row:
    """One row out of its fragments, left to right, separated by a space."""
    group = sorted(group, key=lambda f: f[0][0])
    return _Row(
        page=page,
        column=column,
        x0=min(f[0][0] for f in group),
        y0=min(f[0][1] for f in group),
        y1=max(f[0][3] for f in group),
        baseline=group[0][3],
        text=_collapse(" ".join(f[1] for f in group)),
        bold=all(f[2] for f in group),
    )


def _collapse(text: str) -> str:
    """Collapse runs of whitespace (including no-break spaces) to one space and strip."""
    return " ".join(text.split())


def _picture_boxes(blocks: list[dict[str, Any]]) -> Iterator[pymupdf.Rect]:
    """Vector paths big enough and not plain white to be a picture."""
    for block in blocks:
        rect = pymupdf.Rect(block["bbox"])
        if block["type"] == 3:
            if rect.width < MIN_PICTURE_SIDE or rect.height < MIN_PICTURE_SIDE:
                continue  # rules under question numbers, the column separator, table borders
            if block.get("color") == WHITE and not block.get("stroked"):
                continue  # FGV paints white boxes behind paragraphs: background, not content
            yield rect


def _add_raster_pictures(doc: pymupdf.Document, layouts: Sequence[_PageLayout]) -> None:
    """Add the boxes of raster images lying in the body of question pages to their pictures.

    Locating images means interpreting the page again, so it is done only on pages holding an
    image that is not page furniture: the header/footer logos recur, same size and format, on
    most question pages, while a figure belongs to one question. The page's resource list
    (get_images) is read without interpreting the page.
    """
    signatures = {
        layout.number: {tuple(image[2:6]) for image in doc[layout.number - 1].get_images()}
        for layout in layouts
    }
    counts = Counter(signature for page_signatures in signatures.values() for signature in page_signatures)
    threshold = max(FURNITURE_MIN_PAGES, len(layouts) / 2)
    furniture = {signature for signature, count in counts.items() if count >= threshold}
    for layout in layouts:
        if signatures[layout.number] <= furniture:
            continue
        body = pymupdf.Rect(0, layout.body_top, layout.width, layout.body_bottom)
        for info in doc[layout.number - 1].get_image_info():
            box = pymupdf.Rect(info["bbox"])
            if body.contains(_center(box)):
                layout.pictures.append(box)


def _center(rect: pymupdf.Rect) -> pymupdf.Point:
    return pymupdf.Point((rect.x0 + rect.x1) / 2, (rect.y0 + rect.y1) / 2)


def _single_edition(layouts: Sequence[_PageLayout]) -> int:
    """The edition in the running header, which must be the same on every question page."""
    editions = Counter(layout.edition for layout in layouts)
    if len(editions) > 1:
        detail = ", ".join(f"page {layout.number}: {layout.edition}" for layout in layouts)
        raise BookletParseError(f"running headers disagree on the edition ({detail})")
    return next(iter(editions))


def _column_margins(rows: Iterable[_Row]) -> dict[int, float]:
    """Left margin of each column: the most common left edge (stems and choice openers sit there)."""
    margins: dict[int, float] = {}
    for column in (0, 1):
        edges = Counter(round(row.x0) for row in rows if row.column == column)
        if edges:
            margins[column] = float(edges.most_common(1)[0][0])
    return margins


def _segment(rows: list[_Row]) -> list[_Draft]:
    """Cut the rows in reading order into questions, and each question into stem and choices."""
    margins = _column_margins(rows)
    drafts: list[_Draft] = []
    stray_numbers: list[str] = []
    for row in rows:
        at_margin = abs(row.x0 - margins.get(row.column, row.x0)) <= MARGIN_TOLERANCE
        expected_number = drafts[-1].number + 1 if drafts else 1
        if at_margin and row.bold and NUMBER_RE.match(row.text):
            if int(row.text) == expected_number:
                if drafts:
                    _check_complete(drafts[-1])
                drafts.append(_Draft(number=expected_number, start=row))
                continue
            stray_numbers.append(f"{row.text} on page {row.page}")
        if not drafts:
            continue  # text before question 1 (none in real booklets) is not part of any question
        draft = drafts[-1]
        choice = CHOICE_RE.match(row.text) if at_margin else None
        if choice and _next_letter(draft) == choice.group(1):
            draft.fields[choice.group(1)] = [row]
        else:
            draft.fields[draft.current].append(row)
    if drafts:
        _check_complete(drafts[-1])
    if len(drafts) != EXPECTED_QUESTIONS:
        last = f"question {drafts[-1].number} (page {drafts[-1].start.page})" if drafts else "no question"
        stray = f"; bold numbers out of sequence: {', '.join(stray_numbers)}" if stray_numbers else ""
        raise BookletParseError(
            f"found {len(drafts)} questions, expected {EXPECTED_QUESTIONS}: the last one found is {last}"
            f" and question {len(drafts) + 1} was not found after it{stray}"
        )
    return drafts


def _next_letter(draft: _Draft) -> str | None:
    """The choice letter that may open next: A after the stem, then B, C, D, then none."""
    opened = len(draft.fields) - 1
    return LETTERS[opened] if opened < len(LETTERS) else None


def _check_complete(draft: _Draft) -> None:
    """A question needs a stem and all four choices; say which is missing and where."""
    missing = [f"({letter})" for letter in LETTERS if letter not in draft.fields]
    if missing:
        pages = sorted({row.page for row in draft.rows()})
        raise BookletParseError(
            f"question {draft.number} (page {', '.join(map(str, pages))}): choice {', '.join(missing)} not found"
        )
    if not draft.fields["stem"]:
        raise BookletParseError(f"question {draft.number} (page {draft.start.page}): empty stem")


def _typical_gap(rows: Sequence[_Row]) -> float:
    """Median vertical gap between consecutive rows of a column: the gap between wrapped lines."""
    gaps = [
        b.y0 - a.y1
        for a, b in itertools.pairwise(rows)
        if (a.page, a.column) == (b.page, b.column) and b.y0 > a.y0
    ]
    return statistics.median(gaps) if gaps else 0.0


def _finish(
    draft: _Draft, following: _Draft | None, line_gap: float, pages: dict[int, _PageLayout]
) -> ParsedQuestion:
    """Join each field's rows into text and work out pages and pictures for the question."""
    texts = {name: _join(rows, line_gap) for name, rows in draft.fields.items()}
    for letter in LETTERS:
        texts[letter] = CHOICE_RE.sub("", texts[letter], count=1)
        if not texts[letter].strip():
            raise BookletParseError(
                f"question {draft.number} (page {draft.fields[letter][0].page}): choice ({letter}) is empty"
            )
    rows = list(draft.rows())
    return ParsedQuestion(
        number=draft.number,
        stem=texts["stem"],
        choice_a=texts["A"],
        choice_b=texts["B"],
        choice_c=texts["C"],
        choice_d=texts["D"],
        pages=sorted({row.page for row in rows}),
        requires_image=_has_picture(rows, following, pages),
    )


def _join(rows: Sequence[_Row], line_gap: float) -> str:
    """Rows to text: a wrapped line joins with a space, after a trailing hyphen with nothing
    (the booklets only break lines at real hyphens: "jurídico-constitucional", "Trata-se"),
    and a wider-than-usual gap inside one column is a paragraph break."""
    parts: list[str] = []
    for previous, row in zip([None, *rows], rows, strict=False):
        if previous is not None:
            same_column = (previous.page, previous.column) == (row.page, row.column)
            if same_column and row.y0 - previous.y1 > line_gap + PARAGRAPH_EXTRA_GAP:
                parts.append("\n")
            elif not previous.text.endswith("-"):
                parts.append(" ")
        parts.append(row.text)
    return "".join(parts).strip()


def _has_picture(rows: Sequence[_Row], following: _Draft | None, pages: dict[int, _PageLayout]) -> bool:
    """True when an image or vector picture lies in the question's own region of some column.

    The region of a question in one column runs from its first row there (or the body top when
    it continues from elsewhere) down to the next question's number in that column (or the body
    bottom), across the column's width; logos in the header and footer are outside every body.
    """
    next_start = following.start if following else None
    for page_number, column in dict.fromkeys((row.page, row.column) for row in rows):
        layout = pages[page_number]
        mine = [row for row in rows if (row.page, row.column) == (page_number, column)]
        top = mine[0].y0 if mine[0] is rows[0] else layout.body_top
        bottom = layout.body_bottom
        if next_start and (next_start.page, next_start.column) == (page_number, column):
            bottom = next_start.y0
        left, right = (0.0, layout.width / 2) if column == 0 else (layout.width / 2, layout.width)
        region = pymupdf.Rect(left, top - 1, right, bottom)
        if any(region.contains(_center(box)) for box in layout.pictures):
            return True
    return False
