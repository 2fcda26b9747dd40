"""The booklet layouts of the 33 editions: the few rules that differ between eras.

Every booklet is read by the one parser of `core/booklet.py`: question pages with a running
header or footer, two columns, questions opened by their number, four choices lettered A-D at
the column margin. What differs is small and listed here, one `Layout` per template:
- the running header/footer line that marks a question page and names the edition (arabic
  `43º EXAME DO ORDEM UNIFICADO`, roman `XXV EXAME DE ORDEM UNIFICADO – TIPO 01 – BRANCA`, or the
  year-and-round names of the first exams, `EXAME DE ORDEM UNIFICADO 2010.3`);
- the other page furniture in the header and footer bands (page numbers `3`, `– 2 –`, `Página 3`,
  `PROVA APLICADA EM 08/04/2018`, `Caderno de Prova 01`, a download site's watermark);
- how a question opens (a bold number alone, `Questão 5`, `QUESTÃO 5` in a label, or `05` beside
  the item code `A00420`), and how a choice is marked (`(A)`, `A)`, or a circled-letter glyph).
The layout is recognised from the pages (never from file names or PDF metadata, which can be
wrong: the 21st edition's booklet calls itself XX there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

ChoiceStyle = Literal["parenthesized", "closing-paren", "glyph"]

# The running line naming the edition, in its three spellings (read by `core/edition_names.py`).
# The first exams were named by year and round: 2010.1, 2010.2 and 2010.3 are the 1st-3rd editions.
ARABIC_RE = re.compile(r"\b(\d{1,3})\s*[oOº°ª]?\s*EXAME\s+D[EO]\s+ORDEM\s+UNIFICADO", re.IGNORECASE)
ROMAN_RE = re.compile(r"\b([IVXLC]+)\s+EXAME\s+DE\s+ORDEM\s+UNIFICADO\s*[–-]\s*TIPO\s+0?1\s*[–-]\s*BRANC[AO]")
# The 38th's header line alone: `XXXVIII EXAME DO ORDEM UNIFICADO` (the 4th-37th print type and colour after it).
ROMAN_HEADER_RE = re.compile(r"^([IVXLC]+)\s+EXAME\s+D[EO]\s+ORDEM\s+UNIFICADO$")
YEAR_ROUND_RE = re.compile(r"EXAME\s+DE\s+ORDEM(?:\s+UNIFICADO)?\s+2010\.([1-3])\b", re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """One booklet template: how its question pages, questions and choices are recognised."""

    name: str
    editions: str  # the editions known to use it (documentation and error messages)
    running: re.Pattern[str]  # a header/footer line of every question page, naming the edition
    running_band: Literal["top", "bottom"]  # where that line sits
    running_example: str  # what it looks like, for error messages
    furniture: tuple[re.Pattern[str], ...]  # other header/footer lines: page numbers, watermarks
    opener: re.Pattern[str]  # a row opening question N (group 1 = N), the whole row
    opener_bold: bool  # the opener row must be bold
    opener_example: str
    choice_styles: tuple[ChoiceStyle, ...]  # the first is the booklet's; some questions use another
    # Where a bare page number (`PAGE_NUMBER` in `furniture`) is printed: beside the running line unless
    # said otherwise. In the other band a bare number is a question's own number opening the page.
    page_number_band: Literal["top", "bottom"] | None = None

    @property
    def bare_number_band(self) -> Literal["top", "bottom"]:
        return self.page_number_band or self.running_band

    def choice_marker(self, text: str) -> re.Match[str] | None:
        """The choice marker opening `text` (group 1 = the letter), in any of the layout's styles."""
        for style in self.choice_styles:
            if match := CHOICE_MARKERS[style].match(text):
                return match
        return None


CHOICE_MARKERS: dict[ChoiceStyle, re.Pattern[str]] = {
    "parenthesized": re.compile(r"^\(([A-D])\)\s*"),
    "closing-paren": re.compile(r"^([A-D])\)\s*"),
    # A circled letter drawn with a glyph of its own font; the row reads "A optar, com ..." and the
    # parser also asks that the letter be a fragment of its own in a font unlike the text's.
    "glyph": re.compile(r"^([A-D])\s+"),
}

# The heading of what follows the last question on pages that still carry the running line.
END_OF_QUESTIONS = re.compile(r"^(?:QUESTIONÁRIO\s+DE\s+PERCEPÇÃO|CRONOGRAMA\s+OPERACIONAL)", re.IGNORECASE)

PAGE_NUMBER = re.compile(r"^\d{1,3}$")
DASHED_PAGE_NUMBER = re.compile(r"(?:^|\s)[–-]\s*\d{1,3}\s*[–-]$")
PAGINA = re.compile(r"^P[áa]gina\s+\d{1,3}$")
PROVA_APLICADA = re.compile(r"^PROVA\s+APLICADA\s+EM\s+\d{1,2}/\d{1,2}/\d{4}$")
WATERMARK = re.compile(r"www\.questoesdeconcursos\.com\.br")
CADERNO = re.compile(r"Caderno\s+(?:de\s+Prova\s+\d+|AFONSO\s+ARINOS)", re.IGNORECASE)
BOLD_NUMBER = re.compile(r"^(\d{1,3})$")

# In the order they are tried (`core/booklet.py: _detect_layout`): templates sharing a running line
# (the roman footer of the 4th-37th editions) are told apart by question 1's opener and choice A,
# so the 3rd-6th's "(A)" only comes before the 37th's "A)"-or-"(A)".
LAYOUTS: tuple[Layout, ...] = (
    Layout(
        name="FGV, arabic running header",
        editions="43-45",
        running=ARABIC_RE,
        running_band="top",
        running_example="43º EXAME DE ORDEM UNIFICADO",
        furniture=(re.compile(r"Tipo\s+Branca\s*[–-]\s*P[áa]gina\s+\d+", re.IGNORECASE),),
        opener=BOLD_NUMBER,
        opener_bold=True,
        opener_example="a bold question number alone on its row",
        choice_styles=("parenthesized",),
    ),
    Layout(
        name="FGV, roman running footer, 'Questão N', 'A)'",
        editions="7-26, 28",
        running=ROMAN_RE,
        running_band="bottom",
        running_example="XXV EXAME DE ORDEM UNIFICADO – TIPO 01 – BRANCA",
        furniture=(PAGE_NUMBER, PROVA_APLICADA),
        opener=re.compile(r"^Quest[ãa]o\s*(\d{1,3})$"),  # the 25th prints one "Questão29"
        opener_bold=False,
        opener_example="'Questão N' alone on its row",
        choice_styles=("closing-paren", "parenthesized"),
    ),
    Layout(
        name="FGV 2010.3-2011, running footer with 'Página N'",
        editions="3-6",
        running=re.compile(rf"{ROMAN_RE.pattern}|EXAME\s+DE\s+ORDEM\s+UNIFICADO\s+2010\.3\s*[–-]\s*TIPO\s+1"),
        running_band="bottom",
        running_example="EXAME DE ORDEM UNIFICADO 2010.3 – TIPO 1 – BRANCO",
        furniture=(PAGINA,),
        opener=BOLD_NUMBER,
        opener_bold=True,
        opener_example="a bold question number alone on its row",
        choice_styles=("parenthesized",),
    ),
    Layout(
        name="FGV, roman running footer, bold number, 'A)'",
        editions="36-37",
        running=ROMAN_RE,
        running_band="bottom",
        running_example="XXXVII EXAME DE ORDEM UNIFICADO – TIPO 1 – BRANCA",
        furniture=(PAGE_NUMBER, PROVA_APLICADA),
        opener=BOLD_NUMBER,
        opener_bold=True,
        opener_example="a bold question number alone on its row",
        choice_styles=("closing-paren", "parenthesized"),
    ),
    Layout(
        name="FGV, roman running header, bold number, '(A)'",
        editions="38",
        running=ROMAN_HEADER_RE,
        running_band="top",
        running_example="XXXVIII EXAME DO ORDEM UNIFICADO",
        # `TIPO 1 – BRANCA – Página 3`; from page 10 on the number sits on a row of its own
        furniture=(re.compile(r"TIPO\s+1\s*[–-]\s*BRANCA\s*[–-]\s*P[áa]gina\b", re.IGNORECASE), PAGE_NUMBER),
        page_number_band="bottom",
        opener=BOLD_NUMBER,
        opener_bold=True,
        opener_example="a bold question number alone on its row",
        choice_styles=("parenthesized", "closing-paren"),  # question 2 uses "A)"
    ),
    Layout(
        name="FGV 2010.2, item codes",
        editions="2",
        running=YEAR_ROUND_RE,
        running_band="top",
        running_example="OAB – Exame de Ordem Unificado 2010.2",
        furniture=(WATERMARK, CADERNO, DASHED_PAGE_NUMBER),
        opener=re.compile(r"^(\d{2,3})\s+A\d{5}$"),
        opener_bold=False,
        opener_example="the question number beside its item code, as '01 A00413'",
        choice_styles=("parenthesized",),
    ),
    Layout(
        name="CESPE 2010.1, 'QUESTÃO N' labels, circled letters",
        editions="1",
        running=YEAR_ROUND_RE,
        running_band="bottom",
        running_example="OAB – Exame de Ordem 2010.1",
        furniture=(CADERNO, DASHED_PAGE_NUMBER),
        opener=re.compile(r"^QUEST[ÃA]O\s+(\d{1,3})$"),
        opener_bold=False,
        opener_example="a 'QUESTÃO N' label",
        choice_styles=("glyph",),
    ),
)
