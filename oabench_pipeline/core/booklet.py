"""Read the questions of an official OAB 1st-phase booklet ("Caderno de Prova") with pymupdf.

Every booklet since 2010 has the same bones: a cover and instructions, then question pages
carrying a running header or footer, two text columns, each question opening with its number at
the column margin, then its stem, then the choices A-D whose first line sits at the margin and
whose wrapped lines hang indented; after the last question, pages without the running line
(questionnaire, blank pages). What differs between the templates of the 33 editions (the running
line and other furniture, how a question opens, how a choice is marked) is a `Layout` of
`core/booklet_layouts.py`, recognised from the pages; a booklet that fits none is refused.

The parser works on geometry rather than on `page.get_text()` order because justified lines
come out of pymupdf as several word fragments, because a question may continue in the next
column or on the next page, and because the older files need their characters' positions to
read right (`core/booklet_text.py`): it keeps only body text between the running header and
footer furniture, rebuilds visual rows per column, walks them in reading order (left column,
right column, next page) and cuts at the question numbers and choice markers it expects next.
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pymupdf

from oabench_pipeline.core.booklet_layouts import END_OF_QUESTIONS, LAYOUTS, PAGE_NUMBER, Layout
from oabench_pipeline.core.booklet_text import (
    LIGATURE_GLYPHS,
    UNMAPPED,
    Fragment,
    Spellings,
    fragments,
    has_split_ligatures,
    has_unmapped_glyphs,
    needs_glyphs,
    origin_key,
    row_text,
)
from oabench_pipeline.core.edition_names import edition_in_text
from oabench_pipeline.core.pdf import open_pdf
from oabench_pipeline.core.records import LETTERS, ParsedBooklet, ParsedQuestion

# Its version is `core/versions.py: BOOKLET_PARSER_VERSION`: bump it with any change to what this parser extracts.

# Question 1 opens on one of the first pages that carry the running line.
FIRST_QUESTION_PAGES = 3
# An error lists at most this many question numbers found out of sequence.
STRAYS_SHOWN = 5
# Running header/footer lines live in these top/bottom shares of the page height.
HEADER_BAND = 0.12
FOOTER_BAND = 0.12
# A row starts at the column margin when its left edge is this close to it (points);
# wrapped choice lines hang ~14 pt to the right, so they never qualify.
MARGIN_TOLERANCE = 3.0
# The column margin is the leftmost left edge shared by this share of the column's rows, on
# its page when it has at least MARGIN_MIN_ROWS rows there.
MARGIN_MIN_ROWS = 8
MARGIN_MIN_SHARE = 0.1
# The gap between the columns is looked for this far (points) on either side of the page middle;
# a line reaching this far into both columns from it spans the gutter.
GUTTER_SEARCH = 40.0
GUTTER = 10.0
WIDE = -1  # the column of a row across the gutter
# A question's opener may sit this far right of the margin: the 1st edition centres
# `QUESTÃO N` in a label that starts at the margin.
OPENER_INDENT = 12.0
# A gap between two rows of one column this much (points) wider than the typical gap between
# wrapped lines is a paragraph break. Real booklets: 1.9-2.1 pt inside a paragraph, 2.4-4.1 pt
# between paragraphs or list items; gaps rather than baseline steps, because quotations and
# attributions in a smaller font have shorter steps yet visibly separate paragraphs.
PARAGRAPH_EXTRA_GAP = 0.3
# A line ending this far (points) left of its column's right edge, or starting further right of
# the margin than this share of the column's width, is not a justified full line; one ending this
# far short is a title or an attribution even in a ragged-right question.
SHORT_LINE = 5.0
SHORT_TITLE = 40.0
FULL_LINE_INDENT = 0.25
# A question set justified ends its wrapped lines at one right edge of its own (within
# JUSTIFIED_TOLERANCE points; some questions are set narrower than the rest of their column, 8th
# q56): when at least JUSTIFIED_SHARE of its wrapped lines do, a line ending a sentence more than
# SHORT_OF_JUSTIFIED points short of that edge is a paragraph's last line. Real booklets: wrapped
# lines end within 0.5 pt of it; last lines before a paragraph set without a gap, from 1.9 pt
# short (20th q73) to the 5 pt that SHORT_LINE catches.
JUSTIFIED_TOLERANCE = 0.6
JUSTIFIED_SHARE = 0.6
SHORT_OF_JUSTIFIED = 1.5
# Vector drawings smaller than this in either dimension are rules (under question numbers,
# column separator, table borders), not pictures.
MIN_PICTURE_SIDE = 6.0
WHITE = 0xFFFFFF
# A filled box at most this many row heights tall around one row is the row's label background.
LABEL_ROWS = 2.5
# Text with vector blocks, so one interpretation of the page gives both. Images are left out:
# with them extraction encodes every logo and takes 4x longer (see _add_raster_pictures). A glyph
# its font maps to no Unicode comes out as U+FFFD, not as its character code (which read "V" for
# the `ti` ligature of the 11th edition's q20), so that it is seen and spelled (`booklet_text.py`).
TEXT_FLAGS = (
    pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_CID_FOR_UNKNOWN_UNICODE
) | pymupdf.TEXT_COLLECT_VECTORS
# Characters no transcriber would type: a glyph with no Unicode (U+FFFD), private-use code points
# (symbol fonts' bullets), control characters. A question holding one is refused, never returned.
UNREADABLE = re.compile("[\ufffd\ue000-\uf8ff\x00-\x09\x0b-\x1f\x7f]")
# An image of the same size and format on at least this many question pages (and half of them)
# is page furniture (the OAB and FGV logos of the running header and footer).
FURNITURE_MIN_PAGES = 3


class BookletParseError(ValueError):
    """The PDF is not a booklet whose structure this parser understands; the message says where."""


@dataclass(frozen=True)
class _Row:
    """One visual text row inside one column of a question page (fragments of a line merged)."""

    page: int  # 1-based
    column: int  # 0 = left, 1 = right, WIDE = across both columns
    x0: float
    x1: float
    y0: float
    y1: float
    text: str  # whitespace collapsed, stripped
    bold: bool  # every fragment is bold
    lone_lead: bool  # its first fragment is one character in a font unlike the next fragment's


@dataclass(frozen=True)
class _BandRow:
    """A row of the header or footer band, across the page: where running lines are looked for."""

    top: float
    bottom: float
    text: str


@dataclass(frozen=True)
class _RawPage:
    """A page as pymupdf gives it: its text fragments, vector blocks and header/footer rows."""

    number: int  # 1-based
    width: float
    height: float
    fragments: list[Fragment]
    vectors: list[dict[str, Any]]
    bands: dict[Literal["top", "bottom"], list[_BandRow]]


@dataclass(frozen=True)
class _PageLayout:
    """What the parser keeps of one question page: body rows and the picture boxes in the body."""

    number: int  # 1-based
    width: float
    split: float  # the x where the right column starts
    body_top: float
    body_bottom: float
    edition: int | None
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


def parse_booklet(pdf_bytes: bytes, *, question_count: int = 80) -> ParsedBooklet:
    """Parse a booklet PDF into its `question_count` questions (stem, choices A-D, pages, picture flag).

    Raises BookletParseError naming the edition (when its pages say it), the page and what was
    expected when the structure is not understood; nothing is returned half-parsed.
    """
    doc = open_pdf(pdf_bytes, "booklet", BookletParseError)
    try:
        raw_pages = _raw_pages(doc)
        layout = _detect_layout(raw_pages)
        layouts = [pl for raw in raw_pages if (pl := _page_layout(raw, layout)) is not None]
        _add_raster_pictures(doc, layouts)
    finally:
        doc.close()
    edition = _single_edition(layouts)
    rows = [row for page_layout in layouts for row in page_layout.rows]
    try:
        drafts = _segment(rows, layout, question_count)
    except BookletParseError as error:
        raise BookletParseError(f"edition {edition} booklet ({layout.name} layout): {error}") from None
    joiner = _Joiner(
        line_gaps=_line_gaps(rows),
        margins=_column_margins(rows),
        right_edges=_right_edges(rows),
        words=_words(rows),
    )
    by_page = {page_layout.number: page_layout for page_layout in layouts}
    questions = [
        _finish(draft, drafts[i + 1] if i + 1 < len(drafts) else None, joiner, by_page, layout)
        for i, draft in enumerate(drafts)
    ]
    return ParsedBooklet(edition_in_header=edition, questions=questions)


def _raw_pages(doc: pymupdf.Document) -> list[_RawPage]:
    """Every page, read from its spans, and again glyph by glyph where it needs it (see
    `core/booklet_text.py`): on every page of a booklet with split ligatures, elsewhere on the
    pages whose lines overlap or are padded or hold a glyph with no Unicode (spelled from the
    page's text trace, which alone gives glyph ids). One text page per page serves both readings."""
    # One pass over the page content yields text and vector blocks alike; a separate
    # get_drawings() call would interpret the page once more.
    text_pages = [page.get_textpage(flags=TEXT_FLAGS) for page in doc.pages()]
    span_blocks = [text_page.extractDICT()["blocks"] for text_page in text_pages]
    spans = [list(fragments(blocks)) for blocks in span_blocks]
    every_page = any(has_split_ligatures(page) for page in spans)
    raw_pages = []
    for page, text_page, blocks, page_spans in zip(doc.pages(), text_pages, span_blocks, spans, strict=True):
        if every_page or needs_glyphs(page_spans, _baseline_groups(page_spans)):
            spellings = _ligature_spellings(page) if has_unmapped_glyphs(page_spans) else None
            blocks = text_page.extractRAWDICT()["blocks"]
            page_spans = list(fragments(blocks, spellings))
        raw_pages.append(_raw_page(page, blocks, page_spans))
    return raw_pages


def _ligature_spellings(page: pymupdf.Page) -> Spellings:
    """Where the page draws a known ligature glyph that its font maps to no Unicode, and the
    letters it stands for (`booklet_text.LIGATURE_GLYPHS`): the text trace gives each glyph's id."""
    return {
        origin_key(origin): LIGATURE_GLYPHS[span["font"], glyph]
        for span in page.get_texttrace()
        for unicode, glyph, origin, _ in span["chars"]
        if unicode == ord(UNMAPPED) and (span["font"], glyph) in LIGATURE_GLYPHS
    }


def _raw_page(page: pymupdf.Page, blocks: list[dict[str, Any]], text: list[Fragment]) -> _RawPage:
    height = page.rect.height
    return _RawPage(
        number=page.number + 1,
        width=page.rect.width,
        height=height,
        fragments=text,
        vectors=[block for block in blocks if block["type"] == 3],
        bands={
            "top": _band_rows([f for f in text if f.center_y <= height * HEADER_BAND]),
            "bottom": _band_rows([f for f in text if f.center_y >= height * (1 - FOOTER_BAND)]),
        },
    )


def _band_rows(band: list[Fragment]) -> list[_BandRow]:
    """Rows of the header or footer band, across the whole page width."""
    return [
        _BandRow(min(f.y0 for f in group), max(f.y1 for f in group), _collapse(row_text(group)))
        for group in _baseline_groups(band)
    ]


def _running_edition(raw: _RawPage, layout: Layout) -> tuple[bool, int | None]:
    """Whether the page carries the layout's running line, and the edition that line names."""
    for row in raw.bands[layout.running_band]:
        if layout.running.search(row.text):
            return True, edition_in_text(row.text)
    return False, None


def _detect_layout(pages: Sequence[_RawPage]) -> Layout:
    """The layout whose running line the pages carry and whose first question opens as it says.

    Templates sharing a running line (the roman footer of the 3rd-37th editions) differ in how a
    question opens and how its choices are marked: the first that finds question 1 followed by
    its choice A, in reading order, is the booklet's.
    """
    candidates = [
        (layout, marked)
        for layout in LAYOUTS
        if (marked := [raw for raw in pages if _running_edition(raw, layout)[0]])
    ]
    if not candidates:
        expected = "; ".join(f"'{layout.running_example}' ({layout.editions})" for layout in LAYOUTS)
        raise BookletParseError(
            f"no page carries the running header or footer of a known booklet layout (expected one of: "
            f"{expected}): not an OAB booklet?"
        )
    for layout, marked in candidates:
        if _opens_first_question(marked, layout):
            return layout
    first_layout, first_pages = candidates[0]
    edition = _running_edition(first_pages[0], first_layout)[1]
    expected = " or ".join(
        f"{layout.opener_example} then choice {_marker_example(layout)}" for layout, _ in candidates
    )
    searched = first_pages[:FIRST_QUESTION_PAGES]
    raise BookletParseError(
        f"edition {edition if edition is not None else 'unknown'} booklet, pages {searched[0].number}-"
        f"{searched[-1].number}: unknown booklet layout: question 1 not found, expected {expected}"
    )


def _marker_example(layout: Layout) -> str:
    names = {"parenthesized": "'(A)'", "closing-paren": "'A)'", "glyph": "'A' as a circled-letter glyph"}
    return " or ".join(names[style] for style in layout.choice_styles)


def _opens_first_question(pages: Sequence[_RawPage], layout: Layout) -> bool:
    """In reading order, the first opener of question 1 is followed by its choice (A) before any
    other opener (the questionnaire after the last question numbers its items from 1 again).
    Question 1 is looked for on the first pages carrying the running line (the 3rd-6th editions
    carry it on their cover too)."""
    opened = False
    for raw in pages[:FIRST_QUESTION_PAGES]:
        page_layout = _page_layout(raw, layout)
        rows = page_layout.rows if page_layout else []
        margins = _column_margins(rows)
        for row in rows:
            number = _opener_number(row, layout, margins)
            if number is not None:
                if opened:
                    return False
                opened = number == 1
            elif opened and _choice_letter(row, layout, margins) == "A":
                return True
    return False


def _page_layout(raw: _RawPage, layout: Layout) -> _PageLayout | None:
    """Body rows and pictures of a question page; None for pages without the running line."""
    carries_running, edition = _running_edition(raw, layout)
    if not carries_running:
        return None  # cover, instructions, questionnaire, blank pages
    furniture = {
        band: [row for row in rows if any(p.search(row.text) for p in _furniture_patterns(layout, band))]
        for band, rows in raw.bands.items()
    }
    body_top = max((row.bottom for row in furniture["top"]), default=0.0)
    body_bottom = min((row.top for row in furniture["bottom"]), default=raw.height)
    body = [f for f in raw.fragments if body_top < f.center_y < body_bottom]
    split = _column_split(body, raw.width / 2)
    rows = _body_rows(raw.number, split, body)
    body_rect = pymupdf.Rect(0, body_top, raw.width, body_bottom)
    pictures = [
        box
        for box in _picture_boxes(raw.vectors)
        if body_rect.contains(_center(box)) and not any(_is_label(box, row) for row in rows)
    ]
    return _PageLayout(raw.number, raw.width, split, body_top, body_bottom, edition, rows, pictures)


def _furniture_patterns(layout: Layout, band: Literal["top", "bottom"]) -> tuple[re.Pattern[str], ...]:
    """The header/footer lines of `band`. A bare number is a page number only in the band the layout
    prints it in: in the other band it is the bold number of a question that opens the page at its very
    edge (the 36th's page 13 starts with question 46 in the header band)."""
    patterns = (layout.running, *layout.furniture)
    if band == layout.bare_number_band:
        return patterns
    return tuple(p for p in patterns if p is not PAGE_NUMBER)


def _baseline_groups(fragments_: Iterable[Fragment]) -> Iterator[list[Fragment]]:
    """Fragments on one visual row, top to bottom: every fragment whose baseline is within half a
    line height of the first one's (justified lines come out of pymupdf as one "line" per word)."""
    group: list[Fragment] = []
    for fragment in sorted(fragments_, key=lambda f: (f.baseline, f.x0)):
        if group and abs(fragment.baseline - group[0].baseline) > (group[0].y1 - group[0].y0) * 0.5:
            yield group
            group = []
        group.append(fragment)
    if group:
        yield group


def _column_split(body: Sequence[Fragment], mid: float) -> float:
    """Where the left column ends and the right one starts: the point near the page middle that
    the fewest text fragments cross (the nearest to the middle among equals). The 1st edition's
    right column starts anywhere from 14 pt left of the middle to 12 pt right of it."""
    low, high = mid - GUTTER_SEARCH, mid + GUTTER_SEARCH
    near = [f for f in body if f.x0 < high and f.x1 > low]
    candidates = {
        mid,
        *(f.x1 + 0.01 for f in near if low < f.x1 < high),
        *(f.x0 - 0.01 for f in near if low < f.x0 < high),
    }
    return min(candidates, key=lambda x: (sum(f.x0 < x < f.x1 for f in near), abs(x - mid)))


def _body_rows(page: int, split: float, body: list[Fragment]) -> list[_Row]:
    """The body's rows in reading order: left column then right column, each top to bottom.

    A line across the gutter (the instructions above the 1st edition's first questions, the
    2nd's questionnaire) is a wide row; the columns above it are read before it, those below after.
    """
    is_wide = [f.x0 < split - GUTTER and f.x1 > split + GUTTER for f in body]
    wide = [
        _row(page, WIDE, group)
        for group in _baseline_groups(f for f, w in zip(body, is_wide, strict=True) if w)
    ]
    bands: list[list[Fragment]] = [[] for _ in range(len(wide) + 1)]
    for fragment, spans_gutter in zip(body, is_wide, strict=True):
        if not spans_gutter:
            bands[bisect.bisect([row.y0 for row in wide], fragment.center_y)].append(fragment)
    rows: list[_Row] = []
    for index, band in enumerate(bands):
        if index:
            rows.append(wide[index - 1])
        for column in (0, 1):
            in_column = [f for f in band if ((f.x0 + f.x1) / 2 >= split) == bool(column)]
            rows.extend(_row(page, column, group) for group in _baseline_groups(in_column))
    return [row for row in rows if row.text]


def _row(page: int, column: int, group: list[Fragment]) -> _Row:
    ordered = sorted(group, key=lambda f: f.x0)
    lead = ordered[0]
    return _Row(
        page=page,
        column=column,
        x0=lead.x0,
        x1=max(f.x1 for f in group),
        y0=min(f.y0 for f in group),
        y1=max(f.y1 for f in group),
        text=_collapse(row_text(group)),
        bold=all(f.bold for f in group),
        lone_lead=len(ordered) > 1 and len(lead.text.strip()) == 1 and lead.font != ordered[1].font,
    )


def _collapse(text: str) -> str:
    """Collapse runs of whitespace (including no-break spaces) to one space and strip."""
    return " ".join(text.split())


def _picture_boxes(vectors: list[dict[str, Any]]) -> Iterator[pymupdf.Rect]:
    """Vector paths big enough and not plain white to be a picture."""
    for block in vectors:
        rect = pymupdf.Rect(block["bbox"])
        if rect.width < MIN_PICTURE_SIDE or rect.height < MIN_PICTURE_SIDE:
            continue  # rules under question numbers, the column separator, table borders
        if block.get("color") == WHITE and not block.get("stroked"):
            continue  # FGV paints white boxes behind paragraphs: background, not content
        yield rect


def _is_label(box: pymupdf.Rect, row: _Row) -> bool:
    """A box drawn behind one row of text (the black `Questão N` labels of the 1st and 10th-25th
    editions) is that row's background, not a picture."""
    middle = (row.y0 + row.y1) / 2
    return (
        box.y0 <= middle <= box.y1 and box.x0 <= row.x0 + 1 and box.height <= LABEL_ROWS * (row.y1 - row.y0)
    )


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


def _single_edition(layouts: Sequence[_PageLayout]) -> int | None:
    """The edition in the running line, which must be the same on every question page."""
    editions = Counter(layout.edition for layout in layouts)
    if len(editions) > 1:
        detail = ", ".join(f"page {layout.number}: {layout.edition}" for layout in layouts)
        raise BookletParseError(f"running headers disagree on the edition ({detail})")
    return next(iter(editions))


Margins = dict[tuple[int, int], float]  # (page, column) -> left edge


def _column_margins(rows: Sequence[_Row]) -> Margins:
    """Left margin of each column of each page: the leftmost left edge that several rows share.

    Stems and choice openers sit there; wrapped choice lines, which may be most rows, hang to its
    right. Per page, because the 1st edition's right column moves from page to page; a column
    with few rows on its page takes the margin of that column over the whole booklet.
    """
    booklet = {column: _margin([row for row in rows if row.column == column]) for column in (0, 1)}
    margins: Margins = {}
    for (page, column), group in itertools.groupby(rows, key=lambda row: (row.page, row.column)):
        mine = list(group)
        if column != WIDE:
            margins[page, column] = _margin(mine) if len(mine) >= MARGIN_MIN_ROWS else booklet[column]
    return margins


def _margin(rows: Sequence[_Row]) -> float:
    edges = Counter(round(row.x0) for row in rows)
    if not edges:
        return 0.0
    enough = min(max(2, MARGIN_MIN_SHARE * len(rows)), max(edges.values()))
    return float(min(edge for edge, count in edges.items() if count >= enough))


def _opener_number(row: _Row, layout: Layout, margins: Margins) -> int | None:
    """The question number `row` opens with under `layout`, or None."""
    if row.column == WIDE:
        return None
    offset = row.x0 - margins.get((row.page, row.column), row.x0)
    if not -MARGIN_TOLERANCE <= offset <= OPENER_INDENT or (layout.opener_bold and not row.bold):
        return None
    match = layout.opener.match(row.text)
    return int(match.group(1)) if match else None


def _choice_letter(row: _Row, layout: Layout, margins: Margins) -> str | None:
    """The choice letter whose marker opens `row` at the column margin, or None."""
    if row.column == WIDE or abs(row.x0 - margins.get((row.page, row.column), row.x0)) > MARGIN_TOLERANCE:
        return None
    if layout.choice_styles == ("glyph",) and not row.lone_lead:
        return None
    match = layout.choice_marker(row.text)
    return match.group(1) if match else None


def _segment(rows: list[_Row], layout: Layout, question_count: int) -> list[_Draft]:
    """Cut the rows in reading order into questions, and each question into stem and choices."""
    margins = _column_margins(rows)
    drafts: list[_Draft] = []
    stray_numbers: list[str] = []
    for row in rows:
        if drafts and (row.column == WIDE or END_OF_QUESTIONS.match(row.text)):
            if len(drafts) == question_count:
                break  # the questionnaire or schedule after the last question
            what = "a line across both columns" if row.column == WIDE else "the end matter heading"
            raise BookletParseError(
                f"page {row.page}: {what} ({row.text[:60]!r}) interrupts question {drafts[-1].number}; "
                f"expected two columns of questions up to question {question_count}"
            )
        expected_number = drafts[-1].number + 1 if drafts else 1
        number = _opener_number(row, layout, margins)
        if number is not None:
            if number == expected_number:
                if drafts:
                    _check_complete(drafts[-1])
                drafts.append(_Draft(number=expected_number, start=row))
                continue
            stray_numbers.append(f"{number} on page {row.page}")
        if not drafts:
            continue  # text before question 1 (instructions) is not part of any question
        draft = drafts[-1]
        letter = _next_letter(draft)
        if letter is not None and _choice_letter(row, layout, margins) == letter:
            draft.fields[letter] = [row]
        else:
            draft.fields[draft.current].append(row)
    if drafts:
        _check_complete(drafts[-1])
    if len(drafts) > question_count:
        raise BookletParseError(
            f"found {len(drafts)} questions, expected {question_count}: the booklet goes on after question "
            f"{question_count} (page {drafts[question_count].start.page})"
        )
    if len(drafts) < question_count:
        last = f"question {drafts[-1].number} (page {drafts[-1].start.page})" if drafts else "no question"
        stray = ""
        if stray_numbers:
            more = (
                f" and {len(stray_numbers) - STRAYS_SHOWN} more" if len(stray_numbers) > STRAYS_SHOWN else ""
            )
            stray = f"; question numbers out of sequence: {', '.join(stray_numbers[:STRAYS_SHOWN])}{more}"
        raise BookletParseError(
            f"found {len(drafts)} questions, expected {question_count}: the last one found is {last}"
            f" and question {len(drafts) + 1} was not found after it (expected {layout.opener_example}){stray}"
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


def _line_gaps(rows: Sequence[_Row]) -> dict[tuple[int, int], float]:
    """The gap between wrapped lines in each column of each page: the booklet's median gap
    between consecutive rows of a column, or the column's own lower quartile where that is wider
    (the 1st edition sets some columns looser than others)."""
    gaps: dict[tuple[int, int], list[float]] = {}
    for a, b in itertools.pairwise(rows):
        if (a.page, a.column) == (b.page, b.column) and b.y0 > a.y0:
            gaps.setdefault((a.page, a.column), []).append(b.y0 - a.y1)
    everywhere = [gap for column in gaps.values() for gap in column]
    booklet = statistics.median(everywhere) if everywhere else 0.0
    return {
        key: max(booklet, statistics.quantiles(column, n=4)[0] if len(column) >= 2 else booklet)
        for key, column in gaps.items()
    }


def _finish(
    draft: _Draft,
    following: _Draft | None,
    joiner: _Joiner,
    pages: dict[int, _PageLayout],
    layout: Layout,
) -> ParsedQuestion:
    """Join each field's rows into text and work out pages and pictures for the question."""
    edges = _justified_edges(draft)
    texts = {name: joiner.join(rows, edges) for name, rows in draft.fields.items()}
    _check_readable(draft, texts)
    for letter in LETTERS:
        marker = layout.choice_marker(texts[letter])
        texts[letter] = texts[letter][marker.end() if marker else 0 :]
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


def _check_readable(draft: _Draft, texts: dict[str, str]) -> None:
    """Refuse a question holding a character no transcriber would type (`UNREADABLE`), naming it."""
    for name, text in texts.items():
        if unreadable := UNREADABLE.search(text):
            page = (draft.fields[name] or [draft.start])[0].page
            field_name = "the stem" if name == "stem" else f"choice ({name})"
            context = text[max(0, unreadable.start() - 20) : unreadable.end() + 20]
            raise BookletParseError(
                f"question {draft.number} (page {page}): {field_name} holds U+{ord(unreadable.group()):04X}, "
                f"a glyph the PDF maps to no letter ({context!r}); an unknown ligature? "
                f"(known: booklet_text.LIGATURE_GLYPHS)"
            )


# How a paragraph ends (sentence or list-item punctuation, a closing quote or bracket) and how one
# may start without the previous one ending so (a list item, a quotation, an enumerator, a capital
# after an attribution or a title).
_PARAGRAPH_END = re.compile(r"[.:;?!)\]”\"»…]$")
_LIST_OR_QUOTE_START = re.compile(r"[“\"«(•\-–]|(?:[IVXL]+|\d+|[a-zA-Z])\s*[.)–-]\s")
_PARAGRAPH_START = re.compile(rf"{_LIST_OR_QUOTE_START.pattern}|[A-ZÀ-Ý]")
# A row ending with a full stop, "?" or "!" before a row starting in lower case ends no sentence.
_SENTENCE_GOES_ON = re.compile(r"[.?!]$")
# A row introducing a list (ending with a colon; lists inside a sentence run on after ";"), and a
# list item's enumerator: "(a) ", "a) ", "I – ", "1. ", "• ".
_LIST_INTRO = re.compile(r":$")
_ENUMERATOR = re.compile(r"(?:\(?[a-zA-Z0-9]{1,3}\)|[IVXL]+\s*[.–-]|\d{1,2}\.|[•–-])\s")
_SENTENCE_END = re.compile(r"[.:;?!][)”\"»]?$")
_WORD = re.compile(r"\w+(?:-\w+)*")
_LINE_END_HYPHEN = re.compile(r"(\w+)-$")
_LINE_START_WORD = re.compile(r"^(\w+)")


def _right_edges(rows: Iterable[_Row]) -> dict[tuple[int, int], float]:
    """Where the longest rows of each column of each page end: the justified right edge."""
    edges: dict[tuple[int, int], float] = {}
    for row in rows:
        key = (row.page, row.column)
        edges[key] = max(edges.get(key, row.x1), row.x1)
    return edges


def _justified_edges(draft: _Draft) -> dict[tuple[int, int], float]:
    """Per (page, column) where the question sets its text justified: the right edge its wrapped
    lines end at (the rightmost line end that a fifth of its rows, at least two, share). Columns
    where fewer than JUSTIFIED_SHARE of its wrapped lines end there (ragged-right questions, 37th
    q40) are left out."""
    by_column: dict[tuple[int, int], list[_Row]] = {}
    for row in draft.rows():
        by_column.setdefault((row.page, row.column), []).append(row)
    wrapped = [
        a
        for rows in draft.fields.values()
        for a, b in itertools.pairwise(rows)
        if (a.page, a.column) == (b.page, b.column)
    ]
    edges: dict[tuple[int, int], float] = {}
    for key, rows in by_column.items():
        ends = sorted((row.x1 for row in rows), reverse=True)
        shared = max(2.0, 0.2 * len(ends))
        edge = next((x for x in ends if sum(abs(y - x) <= JUSTIFIED_TOLERANCE for y in ends) >= shared), None)
        lines = [row for row in wrapped if (row.page, row.column) == key]
        if edge is None or not lines:
            continue
        if sum(edge - row.x1 <= JUSTIFIED_TOLERANCE for row in lines) >= JUSTIFIED_SHARE * len(lines):
            edges[key] = edge
    return edges


def _words(rows: Iterable[_Row]) -> Counter[str]:
    """How often each word (hyphenated compounds whole) is printed inside a line of the booklet."""
    return Counter(word.lower() for row in rows for word in _WORD.findall(row.text))


@dataclass(frozen=True)
class _Joiner:
    """Joins a field's rows into text, with what the whole booklet says about its lines."""

    line_gaps: dict[tuple[int, int], float]  # per (page, column): the gap between wrapped lines
    margins: Margins  # per (page, column): where lines start
    right_edges: dict[tuple[int, int], float]  # per (page, column): where full lines end
    words: Counter[str]  # the booklet's vocabulary, see _words

    def join(self, rows: Sequence[_Row], justified: dict[tuple[int, int], float]) -> str:
        """Rows to text: a wrapped line joins with a space, a wider-than-usual gap inside one
        column is a paragraph break, and a word broken at a line-end hyphen joins without space
        (the booklets break lines at real hyphens: "jurídico-constitucional", "Trata-se").
        `justified`: the question's justified right edge per (page, column), see _justified_edges."""
        parts: list[str] = []
        gaps = [b.y0 - a.y1 for a, b in itertools.pairwise(rows) if (a.page, a.column) == (b.page, b.column)]
        # A field whose every line is set wider apart (12th q80, 16th q22) is one paragraph at
        # that spacing: only a gap wider than its narrowest may separate paragraphs.
        field_gap = min(gaps) if len(gaps) >= 2 else 0.0
        for previous, row in zip([None, *rows], rows, strict=False):
            if previous is not None:
                same_column = (previous.page, previous.column) == (row.page, row.column)
                if same_column and self._paragraph_break(previous, row, field_gap, justified):
                    parts.append("\n")
                elif hyphen := _LINE_END_HYPHEN.search(previous.text):
                    if self._syllable_break(hyphen.group(1), row.text):
                        parts[-1] = parts[-1][:-1]
                else:
                    parts.append(" ")
            parts.append(row.text)
        return "".join(parts).strip()

    def _paragraph_break(
        self, previous: _Row, row: _Row, field_gap: float, justified: dict[tuple[int, int], float]
    ) -> bool:
        """Whether `row` starts a new paragraph after `previous`, in the same column.

        After a wider gap than between wrapped lines, when `previous` ends a sentence, quotation
        or list item, or `row` starts a list item or a quotation. Some questions set all their
        lines wider apart (12th edition q80, 16th q26): a line that runs on mid-sentence is not
        a paragraph end there. With or without a gap (the 3rd-6th editions never add one), a line
        that stops short of the justified right edge ends its paragraph when it ends a sentence or
        the next line starts like a paragraph (a capital after a title, an attribution, the
        signature of a quoted law); in a question set justified, a sentence's end short of the
        question's own right edge, before a capital, ends a paragraph even when the column's
        longest lines end further right (21st q49 "... o prazo para impugnação." / "Você, como").
        """
        if _SENTENCE_GOES_ON.search(previous.text) and row.text[:1].islower():
            return False  # "... Ltda." / "responderão ...": an abbreviation, not a sentence end
        if _LIST_INTRO.search(previous.text) and _ENUMERATOR.match(row.text):
            return True  # "... aprovou lei que:" / "(a) reduziu ...": a list item on its own line
        line_gap = max(self.line_gaps[row.page, row.column], field_gap)
        wide_gap = row.y0 - previous.y1 > line_gap + PARAGRAPH_EXTRA_GAP
        if wide_gap and (_PARAGRAPH_END.search(previous.text) or _LIST_OR_QUOTE_START.match(row.text)):
            return True
        if _SENTENCE_END.search(previous.text) and not self._spans_column(previous, SHORT_LINE):
            return True
        edge = justified.get((row.page, row.column))
        if (
            edge is not None
            and previous.x1 < edge - SHORT_OF_JUSTIFIED
            and _SENTENCE_END.search(previous.text)
            and _PARAGRAPH_START.match(row.text)
        ):
            return True
        # Without a sentence end, only a line clearly short of the column (a title, an attribution)
        # ends its paragraph: a few questions are set ragged-right, not justified (12th q12).
        return bool(_PARAGRAPH_START.match(row.text)) and not self._spans_column(previous, SHORT_TITLE)

    def _spans_column(self, row: _Row, slack: float) -> bool:
        """A line across the column: it ends within `slack` points of the right edge and starts near
        the margin (a right-aligned attribution, "Ronald Dworkin", also ends at the right edge)."""
        key = (row.page, row.column)
        left, right = self.margins.get(key, row.x0), self.right_edges[key]
        return row.x1 >= right - slack and row.x0 <= left + FULL_LINE_INDENT * (right - left)

    def _syllable_break(self, left: str, following: str) -> bool:
        """A line-end hyphen that only splits a word: the 2nd edition hyphenates a few words
        ("excepcio-nalmente"). Told apart from a compound by the booklet's own vocabulary: the
        word is printed whole elsewhere in it, and never with that hyphen."""
        start = _LINE_START_WORD.match(following)
        if start is None or not start.group(1)[0].islower():
            return False
        right = start.group(1)
        return self.words[(left + right).lower()] > 0 and self.words[f"{left}-{right}".lower()] == 0


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
        left, right = (0.0, layout.split) if column == 0 else (layout.split, layout.width)
        if column == WIDE:
            left, right = 0.0, layout.width
        region = pymupdf.Rect(left, top - 1, right, bottom)
        if any(region.contains(_center(box)) for box in layout.pictures):
            return True
    return False
