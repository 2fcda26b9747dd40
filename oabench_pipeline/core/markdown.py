"""The one Markdown table writer: the CLI's `--format markdown`, the report, and asset previews."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence


def markdown_cell(text: str) -> str:
    """Escape what would break a Markdown table cell (a backslash, a pipe, a line break) and HTML, which
    Markdown renderers pass through (`<`, `>`, `&`: a label or a reply is text, never markup)."""
    escaped = html.escape(text, quote=False)
    return escaped.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a Markdown table: the header, its rule, then one line per row (cells escaped)."""
    return [
        "| " + " | ".join(markdown_cell(c) for c in header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows),
    ]
