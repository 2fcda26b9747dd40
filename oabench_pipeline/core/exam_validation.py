"""Plausibility checks on parsed questions, for the Dagster asset checks of the exam assets.

Each function returns a list of human-readable problems (empty = fine), naming the question
and the field, so an asset check can show them as they are. They look for the ways a booklet
parser goes wrong silently: running header/footer text pulled into a question, a choice marker
left inside the stem (or the next question swallowed by choice D), gaps in the numbering,
blank fields, and questions whose words do not fit the legal area they were assigned to.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from oabench_pipeline.core.records import ParsedQuestion

FIELDS = ("stem", "choice_a", "choice_b", "choice_c", "choice_d")

# Text of the running headers/footers, page furniture and end matter of the booklets of every
# edition (FGV and the 1st edition's CESPE); none belongs in a question. Upper-case patterns are
# case-sensitive: a stem may mention "o XX Exame de Ordem Unificado" in running text.
HEADER_FOOTER_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\d{1,3}\s*[oº°]?\s*EXAME\s+D[EO]\s+ORDEM\s+UNIFICADO"),  # 43º EXAME DO ORDEM UNIFICADO
    re.compile(r"\b[IVXLC]+\s+EXAME\s+DE\s+ORDEM\s+UNIFICADO"),  # XXV EXAME DE ORDEM UNIFICADO
    re.compile(r"EXAME\s+DE\s+ORDEM(?:\s+UNIFICADO)?\s+20\d\d\.\d", re.IGNORECASE),  # ... 2010.3
    re.compile(r"TIPO\s+0?1\s*[–-]\s*BRANC[AO]"),
    re.compile(r"Tipo\s+Branca", re.IGNORECASE),
    re.compile(r"Branca\s*[–-]\s*P[áa]gina\s+\d+", re.IGNORECASE),
    re.compile(r"(?<!– )(?<!- )\bPágina\s+\d{1,3}\b"),  # alone (3rd-6th); after "Branca – ", above
    re.compile(r"PROVA\s+APLICADA\s+EM"),
    re.compile(r"Caderno\s+de\s+Prova\s+\d+|Caderno\s+AFONSO\s+ARINOS", re.IGNORECASE),
    re.compile(r"questoesdeconcursos", re.IGNORECASE),
    re.compile(r"(?:^|\s)–\s\d{1,3}\s–(?:\s|$)"),  # the page number "– 2 –"
    re.compile(r"\bA\d{5}\b"),  # the 2nd edition's item codes
    re.compile(r"QUESTIONÁRIO\s+DE\s+PERCEPÇÃO", re.IGNORECASE),
    re.compile(r"FGV\s+CONHECIMENTO", re.IGNORECASE),
    re.compile(r"Qualquer semelhança nominal", re.IGNORECASE),
)
# A choice marker as the booklets print it, "(B) " or (7th-37th editions) "B) ", followed by
# the start of a sentence.
CHOICE_MARKER_RE = re.compile(r"(?:^|\s)\(?([A-D])\)\s+[A-ZÀ-ÝÉ0-9“\"]")
# The closing request of a stem; inside a choice it means the next question's stem leaked in.
STEM_CLOSING_RE = re.compile(r"assinale a (?:afirmativa|opção|alternativa)", re.IGNORECASE)

# Words expected in most questions of an area: (area-name pattern, keyword pattern, description).
AREA_KEYWORDS: tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...] = (
    (
        re.compile(r"Ética", re.IGNORECASE),
        re.compile(r"\bOAB\b|advoga|Estatuto da Advocacia", re.IGNORECASE),
        "OAB/advogad*/advocacia",
    ),
    (
        re.compile(r"Trabalho", re.IGNORECASE),
        re.compile(r"\bCLT\b|\bTST\b|trabalh|emprega", re.IGNORECASE),
        "CLT/TST/trabalh*/emprega*",
    ),
    (
        re.compile(r"Tributário", re.IGNORECASE),
        re.compile(r"tribut|impost|contribui|\bICMS\b|\bISS\b|\bIPTU\b", re.IGNORECASE),
        "tribut*/impost*/contribui*",
    ),
    (
        re.compile(r"Penal", re.IGNORECASE),
        re.compile(r"crime|delito|pena\b|penal|réu|acusad|denúncia|pris", re.IGNORECASE),
        "crime/pena/réu/acusad*/prisão",
    ),
)
# Below this share of keyword-bearing questions an area assignment looks wrong.
MIN_AREA_SHARE = 0.6


def _fields(question: ParsedQuestion) -> list[tuple[str, str]]:
    return [(name, getattr(question, name)) for name in FIELDS]


def header_footer_leaks(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Running header/footer (or cover) text found inside any stem or choice."""
    problems = []
    for question in questions:
        for name, text in _fields(question):
            for pattern in HEADER_FOOTER_PATTERNS:
                match = pattern.search(text)
                if match:
                    problems.append(
                        f"question {question.number} {name}: header/footer text '{match.group(0)}'"
                    )
    return problems


def swallowed_choices(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Signs that segmentation missed a boundary.

    - the stem holds a choice marker "(A) Xxx" at a line start or two or more markers anywhere
      (the choices were glued to the stem);
    - a choice holds the marker of a later choice "(C) Xxx" (the next choice was glued to it);
    - a choice holds a stem's closing request "assinale a afirmativa/opção" (the next question
      leaked in; no choice of the real booklets contains it).
    A single "(A)" quoted inside a choice or the stem's prose is not reported.
    """
    problems = []
    for question in questions:
        markers = CHOICE_MARKER_RE.findall(question.stem)
        line_start = [m for m in re.findall(r"(?m)^\(?([A-D])\)\s", question.stem)]
        if len(markers) >= 2 or line_start:
            problems.append(
                f"question {question.number} stem contains choice markers {sorted(set(markers + line_start))}"
            )
        for index, (name, text) in enumerate(_fields(question)[1:]):
            later = [m for m in CHOICE_MARKER_RE.findall(text) if "ABCD".index(m) > index]
            if later:
                problems.append(
                    f"question {question.number} {name} contains the marker of choice ({later[0]})"
                )
            if STEM_CLOSING_RE.search(text):
                problems.append(
                    f"question {question.number} {name} contains a stem's 'assinale a ...' request"
                )
    return problems


def numbering_problems(questions: Sequence[ParsedQuestion], expected: int = 80) -> list[str]:
    """Count, duplicates, gaps and order of the question numbers against 1..expected."""
    numbers = [q.number for q in questions]
    problems = []
    if len(numbers) != expected:
        problems.append(f"{len(numbers)} questions, expected {expected}")
    duplicates = sorted(n for n, count in Counter(numbers).items() if count > 1)
    if duplicates:
        problems.append(f"duplicate question numbers {duplicates}")
    missing = sorted(set(range(1, expected + 1)) - set(numbers))
    if missing:
        problems.append(f"missing question numbers {missing}")
    extra = sorted(n for n in set(numbers) if not 1 <= n <= expected)
    if extra:
        problems.append(f"question numbers outside 1..{expected}: {extra}")
    if numbers != sorted(numbers):
        problems.append("questions are not in ascending order")
    return problems


def empty_fields(questions: Sequence[ParsedQuestion]) -> list[str]:
    """Blank stems or choices, and questions without pages."""
    problems = [
        f"question {question.number} {name} is empty"
        for question in questions
        for name, text in _fields(question)
        if not text.strip()
    ]
    problems += [f"question {q.number} has no page numbers" for q in questions if not q.pages]
    return problems


def area_sanity(
    questions_with_area: Sequence[tuple[int, str, str]], *, min_share: float = MIN_AREA_SHARE
) -> list[str]:
    """Warnings for areas whose questions rarely mention the area's typical words.

    `questions_with_area` holds (question number, area name, full question text — stem plus
    choices). For each area matching a rule of AREA_KEYWORDS (Ética Profissional; Direito and
    Processo do Trabalho; Direito Tributário; Direito and Processo Penal), the share of its
    questions mentioning a keyword is computed; below `min_share` a warning gives the share and
    the questions without a keyword. Areas without a rule are not judged. These are warnings:
    a low share suggests shifted area ranges or mis-numbered questions, not a certain error.
    """
    by_area: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for number, area, text in questions_with_area:
        by_area[area].append((number, text))
    warnings = []
    for area, items in sorted(by_area.items()):
        for area_re, keyword_re, description in AREA_KEYWORDS:
            if not area_re.search(area):
                continue
            without = [number for number, text in items if not keyword_re.search(text)]
            share = 1 - len(without) / len(items)
            if share < min_share:
                warnings.append(
                    f"{area}: only {len(items) - len(without)}/{len(items)} questions ({share:.0%}) mention "
                    f"{description}; questions without: {without}"
                )
            break
    return warnings
