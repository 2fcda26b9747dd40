"""How the OAB's own documents name an edition: `45º EXAME`, `XXV EXAME`, or, for the first three, `2010.2`.

One place for these rules, used by the answer-key parser, the booklet parser, the portal parser and the
editions registry (an edition's `exam_label` must name that edition).
"""

from __future__ import annotations

import re

# The first three unified exams were named by year and round; the 4th was the first called by its number
# (`IV EXAME DE ORDEM UNIFICADO`). The names are the documents' own: `EXAME DE ORDEM UNIFICADO 2010.1`.
YEAR_NAMED_EDITIONS: dict[str, int] = {"2010.1": 1, "2010.2": 2, "2010.3": 3}

_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
# A well-formed numeral up to 399, so that a word such as CIVIL or VIL is not read as a number.
_ROMAN_NUMERAL = re.compile(r"C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")

_NAMES = re.compile(
    r"(?P<arabic>\b\d{1,3})\s*[ºo°ª]\s*EXAME\b"
    r"|\b(?P<roman>[IVXLC]+)\s+EXAME\b"
    r"|\bEXAME\s+D[AEO]\s+ORDEM(?:\s+UNIFICADO)?\s*[–—-]?\s*(?P<year>20\d\d\.\d)\b"
    r"|\bEXAME\s+UNIFICADO\s*[–—-]?\s*(?P<year2>20\d\d\.\d)\b",
    re.IGNORECASE,
)


def roman_value(numeral: str) -> int | None:
    """The value of a well-formed Roman numeral (`XXXVII` -> 37), None for anything else."""
    numeral = numeral.upper()
    if not numeral or not _ROMAN_NUMERAL.fullmatch(numeral):
        return None
    total = 0
    for here, after in zip(numeral, [*numeral[1:], ""], strict=True):
        value = _ROMAN_VALUES[here]
        total += -value if after and _ROMAN_VALUES[after] > value else value
    return total


def edition_in_text(text: str) -> int | None:
    """The first edition named in `text`: `43º EXAME`, `XXV EXAME`, `EXAME DE ORDEM UNIFICADO 2010.3`."""
    for found in _NAMES.finditer(text):
        if found["arabic"]:
            return int(found["arabic"])
        if found["roman"]:
            value = roman_value(found["roman"])
            if value is not None:
                return value
            continue
        year_name = found["year"] or found["year2"]
        if year_name in YEAR_NAMED_EDITIONS:
            return YEAR_NAMED_EDITIONS[year_name]
    return None
