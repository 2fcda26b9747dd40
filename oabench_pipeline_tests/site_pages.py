"""Reading generated HTML without a browser: tables as rows of text, and a link checker for the site.

`html.parser` from the standard library: the checks read the files as a static host serves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Row:
    attrs: dict[str, str]
    cells: list[str] = field(default_factory=list)


class _Tables(HTMLParser):
    """Every <table>: its id and its body rows (cell text, whitespace collapsed, tags dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[tuple[str | None, list[Row]]] = []
        self._cell: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "table":
            self.tables.append((values.get("id"), []))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr" and self.tables and not self._in_head:
            self.tables[-1][1].append(Row(values))
        elif tag in ("td", "th") and self.tables and not self._in_head and self.tables[-1][1]:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "thead":
            self._in_head = False
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][1][-1].cells.append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(html: str) -> dict[str | None, list[Row]]:
    """Table id (None when it has none: the first such table wins) → its body rows."""
    parser = _Tables()
    parser.feed(html)
    found: dict[str | None, list[Row]] = {}
    for table_id, rows in parser.tables:
        found.setdefault(table_id, rows)
    return found


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (attribute, value)
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append((f"{tag}[{name}]", value))
            if name == "id" and value:
                self.ids.add(value)


def broken_links(site: Path) -> list[str]:
    """Every internal link of every page that does not resolve to a file of the site (or to an anchor of
    the page it names), and every resource (`src`, stylesheet) fetched from outside the folder."""
    problems: list[str] = []
    pages = sorted(site.rglob("*.html"))
    ids: dict[Path, set[str]] = {}
    parsed: dict[Path, _Links] = {}
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        parsed[page], ids[page.resolve()] = parser, parser.ids
    for page, parser in parsed.items():
        for where, link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc:
                if where != "a[href]":  # a link out is fine; a resource from elsewhere is a request out
                    problems.append(f"{page.relative_to(site)}: {where} {link} is outside the site")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
            if not target.is_relative_to(site.resolve()):
                problems.append(f"{page.relative_to(site)}: {link} leaves the site folder")
            elif not target.is_file():
                problems.append(f"{page.relative_to(site)}: {link} does not exist")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in ids.get(target, set()):
                problems.append(f"{page.relative_to(site)}: {link} names no anchor of that page")
    return problems
