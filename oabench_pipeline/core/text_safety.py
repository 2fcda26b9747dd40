"""Text that leaves the machine or reaches a screen, made harmless: spreadsheet formulas, terminal escapes,
and characters that reorder or hide what a reader sees.

Labels come from places we do not control (a catalogue's model names, a user's registry, an imported run),
and replies come from models. Three rules, each applied where the text goes out:

- `spreadsheet_safe`: a CSV cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is read
  as a formula by spreadsheet programs; it gets a leading apostrophe (OWASP's advice on CSV injection).
- `terminal_safe`: control characters (ESC sequences recolour, move the cursor or retitle a terminal) are
  shown as `\\x1b`-style escapes instead of being sent to the terminal.
- `clean_label`: a display label loses its control characters, bidirectional overrides and isolates (they
  reverse the text around them) and zero-width characters (they hide a difference between two labels).
"""

from __future__ import annotations

import re

import polars as pl

# Cells a spreadsheet evaluates: OWASP's list (formula prefixes, and tab/CR, which some programs skip).
FORMULA_START = re.compile(r"^[=+\-@\t\r]")
# C0 and C1 control characters and DEL; a tab or line break in a terminal table is turned into a space
# before this (render_cell), so none of them is legitimate text here.
_CONTROL_CLASS = "[\x00-\x1f\x7f-\x9f]"
_CONTROL = re.compile(_CONTROL_CLASS)
# Bidirectional embeddings, overrides, isolates and marks; zero-width spaces and joiners, word joiner, BOM.
_INVISIBLE_CLASS = "[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
_INVISIBLE = re.compile(_INVISIBLE_CLASS)


def spreadsheet_safe(text: str) -> str:
    """`text` as a CSV cell no spreadsheet evaluates: a leading apostrophe before a formula's first sign."""
    return "'" + text if FORMULA_START.match(text) else text


def terminal_safe(text: str) -> str:
    """`text` with each control character written as its escape (`\\x1b`), so none reaches the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clean_label(text: str) -> str:
    """A display label without control, bidirectional-override or zero-width characters, spaces collapsed."""
    return " ".join(_INVISIBLE.sub("", _CONTROL.sub(" ", text)).split())


def clean_label_expr(column: str) -> pl.Expr:
    """`clean_label` over a String column, vectorised (the same character classes, for Polars' engine)."""
    return (
        pl.col(column)
        .str.replace_all(_CONTROL_CLASS, " ")
        .str.replace_all(_INVISIBLE_CLASS, "")
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def spreadsheet_safe_expr(column: str) -> pl.Expr:
    """`spreadsheet_safe` over a String column, vectorised."""
    return pl.col(column).str.replace(FORMULA_START.pattern, "'$0")
