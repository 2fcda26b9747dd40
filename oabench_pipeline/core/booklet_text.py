"""Text of a booklet's visual rows, rebuilt by geometry from pymupdf's spans or characters.

pymupdf's own line text is not good enough, for reasons that the positions settle:
- justified lines come out as one "line" per word when the gaps are wide, so the words of a row
  must be put back together, with a space where there is a visible gap;
- the 15th and 16th editions' booklets carry two overlapping text layers that meet mid-line, so
  the glyph at the seam is there twice, at the same place (`julgame` + `ento` gave `julgameento`);
  a glyph drawn where the same glyph already is, is dropped;
- the ligature glyphs of the 2nd edition's booklet (`ﬁ`, and `ti` mapped to two letters) are
  followed by a space character drawn back inside the ligature (`Uniﬁ cado`, `consti tucionalista`):
  a space that leaves no visible gap between the glyphs around it is not a word break.
Ligature code points are spelled out as plain letters, and the U+2010 hyphen as `-`.

Characters cost five times as much to read as spans (pymupdf's rawdict builds a dict per
character), so a page is read from its spans unless it shows one of those defects (`needs_glyphs`:
lines of one row overlapping, a ligature followed by a space, a line padded with spaces), and then
re-read, from the same text page, glyph by glyph.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# A space character separates words only if the glyphs around it are at least this far apart
# (share of the font size). Over the 29 booklets, the bogus spaces after ligatures leave a gap of
# -0.04 to 0 em, real spaces at least 0.08 em (the 2nd edition squeezes some lines that much).
MIN_SPACE_GAP = 0.04
# Two glyphs with no space character between them are separate words when this far apart (share
# of the font size): the word fragments of justified lines, which pymupdf reports without spaces,
# and a space the 2nd edition left out of its text but not of its layout ("herança de Joaquim",
# 0.146 em). Inside a word, the glyphs of the 29 booklets are never more than 0.08 em apart.
MIN_WORD_GAP = 0.1
# A glyph is a duplicate of one already in the row when it is the same character starting this
# close (share of its own width, and at most 1 pt): a second text layer drawing it again.
DUPLICATE_OFFSET = 0.3
# Copies are looked for only for a glyph starting more than OVERLAP points left of the previous
# glyph's right edge (kerning stays well within that), which is rare: the scan may be long.
OVERLAP = 0.5

# A line starting or ending with this many spaces in all is padded: its box reaches past its ink.
PADDING = 3
# The width of a space (share of the font size) in Calibri, the booklets' font since 2010.3.
SPACE_WIDTH = 0.226
_LIGATURE_SPACE = re.compile("[\ufb00-\ufb06] ")

# A span this much smaller than its line's largest, with its baseline raised by this share of that
# size, is a superscript; an "o" or "a" so printed after a number is an ordinal indicator.
SUPERSCRIPT_SIZE = 0.8
SUPERSCRIPT_RISE = 0.15
_ORDINALS = {"o": "º", "a": "ª"}

# Ligature code points (Alphabetic Presentation Forms) spelled out; the U+2010/U+2011 hyphens
# of Word exports as the ASCII hyphen every transcription uses.
_SPELLED_OUT = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
        "\u2010": "-",
        "\u2011": "-",
    }
)

Glyph = tuple[str, float, float]  # character, left and right edge


@dataclass(frozen=True)
class Fragment:
    """One pymupdf line: its box (of the ink), the baseline of its largest span, its text, font
    facts and, when read glyph by glyph, its glyphs."""

    x0: float
    y0: float
    x1: float
    y1: float
    baseline: float
    size: float
    bold: bool  # every non-blank span is bold
    font: str  # font of the first non-blank span
    text: str
    glyphs: tuple[Glyph, ...] | None  # None when read from spans

    @property
    def center_y(self) -> float:
        return (self.y0 + self.y1) / 2


def fragments(blocks: Iterable[dict[str, Any]]) -> Iterator[Fragment]:
    """Every non-blank text line of pymupdf's dict or rawdict blocks as a Fragment."""
    for block in blocks:
        for line in block.get("lines", ()) if block["type"] == 0 else ():
            spans = line["spans"]
            fragment = _glyph_fragment(line) if spans and "chars" in spans[0] else _span_fragment(line)
            if fragment is not None:
                yield fragment


def _facts(line: dict[str, Any], inked: list[dict[str, Any]]) -> dict[str, Any]:
    biggest = max(inked, key=lambda span: span["size"])
    _, y0, _, y1 = line["bbox"]
    return {
        "y0": y0,
        "y1": y1,
        "baseline": biggest["origin"][1],
        "size": biggest["size"],
        # pymupdf reports bold in flags bit 4; some fonts only say it in their name.
        "bold": all(span["flags"] & 16 or "bold" in span["font"].lower() for span in inked),
        "font": inked[0]["font"],
    }


def _span_fragment(line: dict[str, Any]) -> Fragment | None:
    inked = [span for span in line["spans"] if span["text"].strip()]
    if not inked:
        return None
    # A span's box covers its spaces: the ink starts and ends a space's width (estimated) inside
    # it per leading and trailing space (a line padded with more is read glyph by glyph).
    first, last = inked[0], inked[-1]
    lead = (len(first["text"]) - len(first["text"].lstrip())) * SPACE_WIDTH * first["size"]
    trail = (len(last["text"]) - len(last["text"].rstrip())) * SPACE_WIDTH * last["size"]
    return Fragment(
        x0=first["bbox"][0] + lead,
        x1=max(last["bbox"][2] - trail, first["bbox"][0] + lead),
        text="".join(_span_texts(line["spans"], [span["text"] for span in line["spans"]])),
        glyphs=None,
        **_facts(line, inked),
    )


def _glyph_fragment(line: dict[str, Any]) -> Fragment | None:
    inked = [span for span in line["spans"] if any(not c["c"].isspace() for c in span["chars"])]
    if not inked:
        return None
    texts = _span_texts(
        line["spans"], ["".join(char["c"] for char in span["chars"]) for span in line["spans"]]
    )
    glyphs = tuple(
        [
            (char, raw["bbox"][0], raw["bbox"][2])
            for span, text in zip(line["spans"], texts, strict=True)
            for raw, char in zip(span["chars"], text, strict=True)
        ]
    )
    # The box of the ink, not of the line: Word pads some lines with spaces to the far margin.
    first = next(glyph for glyph in glyphs if not glyph[0].isspace())
    last = next(glyph for glyph in reversed(glyphs) if not glyph[0].isspace())
    return Fragment(
        x0=first[1],
        x1=last[2],
        text="".join(glyph[0] for glyph in glyphs),
        glyphs=glyphs,
        **_facts(line, inked),
    )


def _span_texts(spans: list[dict[str, Any]], texts: list[str]) -> list[str]:
    """The spans' texts, with an ordinal indicator printed as a raised small "o" or "a" after a
    number ("art. 2" + superscript "o", 7th and 12th editions) written as the sign it stands for."""
    if len(spans) < 2:
        return texts
    size = max(span["size"] for span in spans)
    baseline = max(spans, key=lambda span: span["size"])["origin"][1]
    out = list(texts)
    for index in range(1, len(spans)):
        span = spans[index]
        raised = baseline - span["origin"][1] > SUPERSCRIPT_RISE * size
        small = span["size"] < SUPERSCRIPT_SIZE * size
        if texts[index] in _ORDINALS and small and raised and texts[index - 1][-1:].isdigit():
            out[index] = _ORDINALS[texts[index]]
    return out


def has_split_ligatures(page: Sequence[Fragment]) -> bool:
    """A ligature code point followed by a space: the mark of the 2nd edition's ligature glyphs,
    whose `ti` (no code point of its own) needs the glyphs' positions too, on every page."""
    return any(_LIGATURE_SPACE.search(fragment.text) for fragment in page)


def needs_glyphs(page: Sequence[Fragment], rows: Iterable[Sequence[Fragment]]) -> bool:
    """Whether a page read from its spans must be read glyph by glyph (see the module doc): two
    lines of one row overlap (a second text layer), or a line is padded with spaces (its box is
    not its ink's)."""
    if any(_padded(fragment.text) for fragment in page):
        return True
    for row in rows:
        ordered = sorted(row, key=lambda f: f.x0)
        if any(b.x0 < a.x1 - OVERLAP for a, b in itertools.pairwise(ordered)):
            return True
    return has_split_ligatures(page)


def _padded(text: str) -> bool:
    return len(text) - len(text.strip()) >= PADDING


def row_text(row: Sequence[Fragment]) -> str:
    """The text of one visual row made of `row`'s fragments, left to right (see the module doc)."""
    size = max(fragment.size for fragment in row)
    ordered = sorted(row, key=lambda f: f.x0)
    if any(fragment.glyphs is None for fragment in ordered):
        return _span_row_text(ordered, size)
    space_gap, word_gap = MIN_SPACE_GAP * size, MIN_WORD_GAP * size
    kept: list[tuple[str, float]] = []  # the glyphs placed so far: character and left edge
    parts: list[str] = []
    previous_right = -1e9
    for fragment in ordered:
        space_seen = False
        for char, left, right in fragment.glyphs or ():
            if char.isspace():
                space_seen = True
                continue
            # Only a glyph starting well inside the previous one can be a second layer's copy.
            if left < previous_right - OVERLAP and _is_duplicate(kept, char, left, right):
                continue
            if left - previous_right > (space_gap if space_seen else word_gap) and parts:
                parts.append(" ")
            kept.append((char, left))
            parts.append(char)
            previous_right = right
            space_seen = False
    return "".join(parts).translate(_SPELLED_OUT)


def _span_row_text(ordered: Sequence[Fragment], size: float) -> str:
    """Fragments read from spans, left to right, a space between two that a space or a visible
    gap separates (pages where they overlap are read glyph by glyph instead)."""
    parts: list[str] = []
    previous: Fragment | None = None
    for fragment in ordered:
        if previous is not None and (
            previous.text[-1:].isspace()
            or fragment.text[:1].isspace()
            or fragment.x0 - previous.x1 > MIN_WORD_GAP * size
        ):
            parts.append(" ")
        parts.append(fragment.text)
        previous = fragment
    return "".join(parts).translate(_SPELLED_OUT)


def _is_duplicate(kept: list[tuple[str, float]], char: str, left: float, right: float) -> bool:
    """The same character already placed at nearly the same left edge (the 2nd edition also draws
    some italic letters over their upright twins)."""
    tolerance = min(1.0, DUPLICATE_OFFSET * max(right - left, 0.5))
    return any(other == char and abs(left - other_left) <= tolerance for other, other_left in kept)
