"""The plausibility checks, on the real parsed booklets and on deliberately broken questions."""

from __future__ import annotations

from pathlib import Path

from oabench_pipeline.core.exam_validation import (
    area_sanity,
    empty_fields,
    header_footer_leaks,
    numbering_problems,
    swallowed_choices,
)
from oabench_pipeline.core.records import ParsedQuestion
from oabench_pipeline_tests.core.test_booklet import EDITIONS, real_booklet

# Area ranges of the 1st phase, as in the shared README (same in all three editions).
AREA_RANGES = [
    (1, 8, "Ética Profissional"), (9, 10, "Filosofia do Direito"), (11, 16, "Direito Constitucional"),
    (17, 18, "Direitos Humanos"), (19, 20, "Direito Eleitoral"), (21, 22, "Direito Internacional"),
    (23, 24, "Direito Financeiro"), (25, 29, "Direito Tributário"), (30, 34, "Direito Administrativo"),
    (35, 36, "Direito Ambiental"), (37, 42, "Direito Civil"), (43, 44, "ECA"),
    (45, 46, "Direito do Consumidor"), (47, 50, "Direito Empresarial"), (51, 56, "Processo Civil"),
    (57, 62, "Direito Penal"), (63, 68, "Processo Penal"), (69, 70, "Direito Previdenciário"),
    (71, 75, "Direito do Trabalho"), (76, 80, "Processo do Trabalho"),
]  # fmt: skip


def area_of(number: int) -> str:
    return next(area for low, high, area in AREA_RANGES if low <= number <= high)


def full_text(q: ParsedQuestion) -> str:
    return " ".join([q.stem, q.choice_a, q.choice_b, q.choice_c, q.choice_d])


def make(
    number: int, stem: str = "Enunciado.", choices: tuple[str, ...] = ("a", "b", "c", "d")
) -> ParsedQuestion:
    a, b, c, d = choices
    return ParsedQuestion(number=number, stem=stem, choice_a=a, choice_b=b, choice_c=c, choice_d=d, pages=[3])


def test_real_booklets_pass_every_check(shared_oab: Path) -> None:
    for edition in EDITIONS:
        questions = real_booklet(edition).questions
        assert header_footer_leaks(questions) == []
        assert swallowed_choices(questions) == []
        assert numbering_problems(questions) == []
        assert empty_fields(questions) == []
        assert area_sanity([(q.number, area_of(q.number), full_text(q)) for q in questions]) == []


def test_area_sanity_flags_shifted_areas(shared_oab: Path) -> None:
    """Areas assigned ten questions off: the checked areas lose most of their keywords."""
    questions = real_booklet(43).questions
    shifted = [(q.number, area_of((q.number + 9) % 80 + 1), full_text(q)) for q in questions]
    warnings = area_sanity(shifted)
    assert any(w.startswith("Direito Penal: only 0/6 questions (0%)") for w in warnings), warnings
    assert len(warnings) >= 4


def test_area_sanity_reports_share_and_questions() -> None:
    rows = [
        (1, "Ética Profissional", "O advogado e a OAB."),
        (2, "Ética Profissional", "Um contrato de compra."),
    ]
    assert area_sanity(rows, min_share=0.6) == [
        "Ética Profissional: only 1/2 questions (50%) mention OAB/advogad*/advocacia; questions without: [2]"
    ]
    assert area_sanity(rows, min_share=0.5) == []
    assert area_sanity([(9, "Filosofia do Direito", "Kant.")]) == []  # no rule for this area


def test_header_footer_leak_is_reported() -> None:
    leaked = make(5, stem="Texto do enunciado 43o EXAME DO ORDEM UNIFICADO continua.")
    footer = make(6, choices=("a", "b Tipo  Branca – Página 7", "c", "d"))
    assert header_footer_leaks([leaked, footer, make(7, stem="Página da internet do escritório.")]) == [
        "question 5 stem: header/footer text '43o EXAME DO ORDEM UNIFICADO'",
        "question 6 choice_b: header/footer text 'Tipo  Branca'",
        "question 6 choice_b: header/footer text 'Branca – Página 7'",
    ]


def test_furniture_of_the_older_booklets_is_reported() -> None:
    leaks = [
        "Texto XXV EXAME DE ORDEM UNIFICADO – TIPO 01 – BRANCA continua.",
        "Texto EXAME DE ORDEM UNIFICADO 2010.3 – TIPO 1 – BRANCO Página 3 continua.",
        "Texto PROVA APLICADA EM 08/04/2018 continua.",
        "Texto Caderno de Prova 01 – 2 – continua.",
        "Texto OAB – Exame de Ordem 2010.1 Caderno AFONSO ARINOS continua.",
        "Texto 06 A00420 www.questoesdeconcursos.com.br continua.",
        "Última opção. QUESTIONÁRIO DE PERCEPÇÃO SOBRE A PROVA",
    ]
    found = header_footer_leaks([make(n, stem=text) for n, text in enumerate(leaks, start=1)])
    assert [problem.split(":")[0] for problem in found] == [
        "question 1 stem", "question 1 stem",
        "question 2 stem", "question 2 stem", "question 2 stem",
        "question 3 stem",
        "question 4 stem", "question 4 stem",
        "question 5 stem", "question 5 stem",
        "question 6 stem", "question 6 stem",
        "question 7 stem",
    ]  # fmt: skip
    # Running text may name an exam or a page in mixed case.
    assert (
        header_footer_leaks(
            [make(1, stem="Aprovado no XX Exame de Ordem Unificado, leu a página 3 do edital.")]
        )
        == []
    )


def test_swallowed_choices() -> None:
    glued_stem = make(1, stem="Assinale a correta.\n(A) Primeira. (B) Segunda.")
    glued_choice = make(2, choices=("Primeira. (B) Segunda opção.", "b", "c", "d"))
    next_question = make(
        3, choices=("a", "b", "c", "Última. 4 Maria comprou... assinale a afirmativa correta.")
    )
    quoting = make(
        4, stem="Conforme o item (A) do edital.", choices=("O item (A) vale.", "(A) e (B).", "c", "d")
    )
    closing_paren = make(5, choices=("Primeira. B) Segunda opção.", "b", "c", "d"))
    assert swallowed_choices([glued_stem, glued_choice, next_question, quoting, closing_paren]) == [
        "question 1 stem contains choice markers ['A', 'B']",
        "question 2 choice_a contains the marker of choice (B)",
        "question 3 choice_d contains a stem's 'assinale a ...' request",
        "question 5 choice_a contains the marker of choice (B)",
    ]


def test_numbering_and_empty_fields() -> None:
    questions = [make(n) for n in (1, 2, 2, 4, 3, 81)]
    assert numbering_problems(questions, expected=4) == [
        "6 questions, expected 4",
        "duplicate question numbers [2]",
        "question numbers outside 1..4: [81]",
        "questions are not in ascending order",
    ]
    assert numbering_problems([make(1), make(3)], expected=3) == [
        "2 questions, expected 3",
        "missing question numbers [2]",
    ]
    blank = ParsedQuestion(
        number=1, stem=" ", choice_a="a", choice_b="", choice_c="c", choice_d="d", pages=[]
    )
    assert empty_fields([blank, make(2)]) == [
        "question 1 stem is empty",
        "question 1 choice_b is empty",
        "question 1 has no page numbers",
    ]
