"""Text of a booklet's visual rows, rebuilt from pymupdf's characters by their geometry.

pymupdf's own line text is not good enough for the older booklets, for three reasons that the
characters' positions settle:
- justified lines come out as one "line" per word when the gaps are wide, so the words of a row
  must be put back together, with a space where there is a visible gap between two glyphs;
- the 15th and 16th editions' booklets carry two overlapping text layers that meet mid-line, so
  the glyph at the seam is there twice, at the same place (`julgame` + `ento` gave `julgameento`);
  a glyph drawn where the same glyph already is, is dropped;
- the ligature glyphs of the 2nd edition's booklet (`ﬁ`, and `ti` mapped to two letters) are
  followed by a space character drawn back inside the ligature (`Uniﬁ cado`, `consti tucionalista`):
  a space that leaves no visible gap between the glyphs around it is not a word break.
Ligature code points are spelled out as plain letters, and the U+2010 hyphen as `-`.
"""

from __future__ import annotations

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
    """One pymupdf line: its box, the baseline of its largest span, its glyphs and font facts."""

    x0: float
    y0: float
    x1: float
    y1: float
    baseline: float
    size: float
    bold: bool  # every non-blank span is bold
    font: str  # font of the first non-blank span
    glyphs: tuple[Glyph, ...]

    @property
    def text(self) -> str:
        return "".join(glyph[0] for glyph in self.glyphs)

    @property
    def center_y(self) -> float:
        return (self.y0 + self.y1) / 2


def fragments(blocks: Iterable[dict[str, Any]]) -> Iterator[Fragment]:
    """Every non-blank text line of pymupdf's rawdict blocks as a Fragment."""
    for block in blocks:
        for line in block.get("lines", ()) if block["type"] == 0 else ():
            spans = [span for span in line["spans"] if any(not c["c"].isspace() for c in span["chars"])]
            if not spans:
                continue
            biggest = max(spans, key=lambda span: span["size"])
            glyphs = tuple(
                [
                    (char["c"], char["bbox"][0], char["bbox"][2])
                    for span in line["spans"]
                    for char in span["chars"]
                ]
            )
            # The box of the ink, not of the line: Word pads some lines with spaces to the far margin.
            first = next(glyph for glyph in glyphs if not glyph[0].isspace())
            last = next(glyph for glyph in reversed(glyphs) if not glyph[0].isspace())
            _, y0, _, y1 = line["bbox"]
            yield Fragment(
                x0=first[1],
                y0=y0,
                x1=last[2],
                y1=y1,
                baseline=biggest["origin"][1],
                size=biggest["size"],
                # pymupdf reports bold in flags bit 4; some fonts only say it in their name.
                bold=all(span["flags"] & 16 or "bold" in span["font"].lower() for span in spans),
                font=spans[0]["font"],
                glyphs=glyphs,
            )


def row_text(row: Sequence[Fragment]) -> str:
    """The text of one visual row made of `row`'s fragments, left to right (see the module doc)."""
    size = max(fragment.size for fragment in row)
    space_gap, word_gap = MIN_SPACE_GAP * size, MIN_WORD_GAP * size
    kept: list[tuple[str, float]] = []  # the glyphs placed so far: character and left edge
    parts: list[str] = []
    previous_right = -1e9
    for fragment in sorted(row, key=lambda f: f.x0):
        space_seen = False
        for char, left, right in fragment.glyphs:
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


def _is_duplicate(kept: list[tuple[str, float]], char: str, left: float, right: float) -> bool:
    """The same character already placed at nearly the same left edge (the 2nd edition also draws
    some italic letters over their upright twins)."""
    tolerance = min(1.0, DUPLICATE_OFFSET * max(right - left, 0.5))
    return any(other == char and abs(left - other_left) <= tolerance for other, other_left in kept)
