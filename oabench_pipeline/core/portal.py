"""Read the OAB exam portal's pages: the list of exams, and one exam's 1st-phase files.

The portal (`https://examedeordem.oab.org.br`) has no API. Its exam list page
(`EditaisProvas?NumeroExame=0`) carries a `<select id="cmb-edital">` with one `<option value="{exam id}">`
per exam, named like `45º EXAME DE ORDEM UNIFICADO`; each exam's page (`EditaisProvas?NumeroExame={id}`)
has a table of documents per phase. The 1st phase table (its heading mentions "1ª fase" and "prova
objetiva") links the question booklets (`21/12/2025 - Caderno de Prova - Tipo 1`) and the answer keys
(`19/01/2026 - Gabaritos Definitivos - Prova Objetiva (1ª fase)`; a preliminary key says "Gabarito(s)
Preliminar(es)").

Everything here is pure (stdlib `html.parser`, no network): the automation fetches, this reads. A page
whose structure is not the one described raises `PortalLayoutError` saying what is missing, so a portal
redesign stops discovery loudly instead of registering a half-understood edition.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin

from oabench_pipeline.core.edition_names import roman_value

EXAM_LIST_PATH = "EditaisProvas?NumeroExame=0"
EXAM_SELECT_ID = "cmb-edital"

# Element names whose text can title a table (besides the table's own caption and header cells).
_HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "caption", "th", "legend", "strong", "b"})
_DATE = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_EDITION_NAME = re.compile(r"^\s*(\d{1,3})\s*[ºo°]?\s*\.?\s*exame", re.IGNORECASE)
_ROMAN_NAME = re.compile(r"^\s*([IVXLC]+)\s+exame", re.IGNORECASE)
_TIPO_1 = re.compile(r"\btipo\s*0?1\b")
# Adapted booklets (large print, braille...) carry the same questions in another layout: never pin those.
_ADAPTED_BOOKLET_WORDS = ("ampliad", "braille", "ledor", "libras", "adaptad")


class PortalLayoutError(ValueError):
    """A portal page does not have the structure the parser knows; the message says what is missing."""


@dataclass(frozen=True)
class ExamListing:
    """One exam offered in the portal's exam list."""

    edition: int
    exam_id: str
    name: str
    page_url: str


@dataclass(frozen=True)
class PortalLink:
    """A document link of an exam page: its visible label, absolute URL and the date in the label."""

    label: str
    url: str
    date: dt.date | None


@dataclass(frozen=True)
class FirstPhaseFiles:
    """What an exam page offers for the 1st phase (prova objetiva); absent documents are None."""

    page_url: str
    booklet: PortalLink | None
    definitive_key: PortalLink | None
    preliminary_key: PortalLink | None

    @property
    def exam_date(self) -> dt.date | None:
        """The exam day: the date the booklet was published under (the portal dates it on the exam day)."""
        return self.booklet.date if self.booklet else None

    @property
    def complete(self) -> bool:
        """Both the Tipo 1 booklet and the definitive key are out: the edition can be benchmarked."""
        return self.booklet is not None and self.definitive_key is not None


def normalize(text: str) -> str:
    """Casefolded, accent-free, single-spaced text, so "1ª Fase" and "1a fase" compare equal.

    NFKD turns the ordinal "ª" into "a" and "º" into "o" and splits accents off their letters.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(stripped.casefold().split())


def exam_list_url(base_url: str) -> str:
    """The exam list page under a portal base URL (the official host or a test server)."""
    return urljoin(base_url.rstrip("/") + "/", EXAM_LIST_PATH)


def parse_date(text: str) -> dt.date | None:
    """The first dd/mm/yyyy date in `text`, or None (also for an impossible date like 31/02)."""
    found = _DATE.search(text)
    if not found:
        return None
    day, month, year = (int(part) for part in found.groups())
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def edition_number(name: str) -> int | None:
    """The edition number in an exam name: `45º EXAME ...` -> 45; old Roman names (`XXXV EXAME`) too."""
    found = _EDITION_NAME.match(name)
    if found:
        return int(found.group(1))
    roman = _ROMAN_NAME.match(name)
    return roman_value(roman.group(1)) if roman else None


# ---------------------------------------------------------------------------------------------------------
# The exam list page
# ---------------------------------------------------------------------------------------------------------


class _SelectParser(HTMLParser):
    """Collects (value, text) of the options inside `<select id="cmb-edital">`."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found_select = False
        self.options: list[tuple[str, str]] = []
        self._in_select = False
        self._option_value: str | None = None
        self._option_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "select" and attributes.get("id") == EXAM_SELECT_ID:
            self.found_select, self._in_select = True, True
        elif tag == "option" and self._in_select:
            self._close_option()  # HTML lets </option> be omitted
            self._option_value = attributes.get("value") or ""
        # Other tags inside an option are ignored; their text still counts.

    def handle_endtag(self, tag: str) -> None:
        if tag == "option":
            self._close_option()
        elif tag == "select" and self._in_select:
            self._close_option()
            self._in_select = False

    def handle_data(self, data: str) -> None:
        if self._option_value is not None:
            self._option_text.append(data)

    def _close_option(self) -> None:
        if self._option_value is not None:
            self.options.append((self._option_value.strip(), " ".join("".join(self._option_text).split())))
        self._option_value, self._option_text = None, []


def parse_exam_list(html: str, list_url: str) -> list[ExamListing]:
    """Every exam in the list page's `cmb-edital` select, sorted by edition number.

    Options without an exam id or an edition number in their name (a "Selecione..." prompt) are left
    out. Raises `PortalLayoutError` when the select is missing or lists no exam at all.
    """
    parser = _SelectParser()
    parser.feed(html)
    parser.close()
    if not parser.found_select:
        raise PortalLayoutError(f"{list_url}: no <select id={EXAM_SELECT_ID!r}> listing the exams")
    listings: dict[int, ExamListing] = {}
    for value, name in parser.options:
        number = edition_number(name)
        if not value or value == "0" or number is None:
            continue
        page_url = urljoin(list_url, f"EditaisProvas?NumeroExame={value}")
        # The first option naming an edition wins: a duplicate further down is not a second exam.
        listings.setdefault(number, ExamListing(number, value, name, page_url))
    if not listings:
        raise PortalLayoutError(
            f"{list_url}: the {EXAM_SELECT_ID!r} select lists no exam with an edition number"
        )
    return sorted(listings.values(), key=lambda listing: listing.edition)


# ---------------------------------------------------------------------------------------------------------
# An exam page
# ---------------------------------------------------------------------------------------------------------


@dataclass
class _Table:
    """A top-level table with the heading text around it and its links, each with its row's text."""

    heading: list[str]
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (href, label, row text)


class _TablesParser(HTMLParser):
    """Splits a page into its top-level tables.

    A table's heading is the text of heading-like elements (h1-h6, strong, legend...) seen since the
    previous table ended, plus its own caption and header cells: sections of the exam page are titled
    that way, and resetting after each table keeps the 2nd phase's heading off the 1st phase's table.
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[_Table] = []
        self._heading_since_table: list[str] = []
        self._heading_depth = 0
        self._table_depth = 0
        self._row_text: list[str] = []
        self._row_links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._link_text: list[str] = []

    @property
    def _current(self) -> _Table | None:
        return self.tables[-1] if self._table_depth else None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table_depth += 1
            if self._table_depth == 1:
                self.tables.append(_Table(heading=self._heading_since_table))
                self._heading_since_table = []
        elif tag in _HEADING_TAGS:
            self._heading_depth += 1
        elif tag == "tr" and self._table_depth:
            self._flush_row()
        elif tag == "a" and self._table_depth:
            self._href, self._link_text = dict(attrs).get("href"), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table_depth:
            self._table_depth -= 1
            if self._table_depth == 0:
                self._flush_row()
        elif tag in _HEADING_TAGS and self._heading_depth:
            self._heading_depth -= 1
        elif tag == "a" and self._href is not None:
            self._row_links.append((self._href, " ".join("".join(self._link_text).split())))
            self._href = None
        elif tag == "tr":
            self._flush_row()

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._link_text.append(data)
        if self._table_depth:
            self._row_text.append(data)
        if self._heading_depth and data.strip():
            target = self._current.heading if self._current else self._heading_since_table
            target.append(data)

    def _flush_row(self) -> None:
        table = self._current or (self.tables[-1] if self.tables else None)
        if table is not None:
            row_text = " ".join("".join(self._row_text).split())
            table.links.extend((href, label, row_text) for href, label in self._row_links)
        self._row_text, self._row_links = [], []


def _is_first_phase_heading(heading: str) -> bool:
    text = normalize(heading)
    return bool(re.search(r"\b1a\.? fase\b", text)) and "prova objetiva" in text


def _link(page_url: str, href: str, label: str, row_text: str) -> PortalLink:
    # The date normally opens the label; a page that puts it in a cell of its own still dates the row.
    return PortalLink(
        label=label, url=urljoin(page_url, href), date=parse_date(label) or parse_date(row_text)
    )


def _is_booklet_tipo_1(label: str) -> bool:
    text = normalize(label)
    return (
        "caderno de prova" in text
        and bool(_TIPO_1.search(text))
        and not any(word in text for word in _ADAPTED_BOOKLET_WORDS)
    )


def _is_key(label: str, word: str) -> bool:
    text = normalize(label)
    return "gabarito" in text and word in text


def parse_exam_page(html: str, page_url: str) -> FirstPhaseFiles:
    """The 1st phase documents of an exam page: Tipo 1 booklet, definitive and preliminary answer keys.

    The first link of each kind wins (the portal lists each document once). Raises `PortalLayoutError`
    when no table is headed as the 1st phase's prova objetiva.
    """
    parser = _TablesParser()
    parser.feed(html)
    parser.close()
    first_phase = [t for t in parser.tables if _is_first_phase_heading(" ".join(t.heading))]
    if not first_phase:
        headings = [" ".join(" ".join(t.heading).split()) for t in parser.tables]
        raise PortalLayoutError(
            f"{page_url}: no table headed '1ª fase' / 'prova objetiva' "
            f"({len(parser.tables)} tables, headings: {headings or 'none'})"
        )
    links = [_link(page_url, href, label, row) for t in first_phase for href, label, row in t.links if href]
    return FirstPhaseFiles(
        page_url=page_url,
        booklet=next((k for k in links if _is_booklet_tipo_1(k.label)), None),
        definitive_key=next((k for k in links if _is_key(k.label, "definitiv")), None),
        preliminary_key=next((k for k in links if _is_key(k.label, "preliminar")), None),
    )
