"""The phase-2 parsers on OAB-Bench's real files: every item, standard and criterion; and the judge score."""

from __future__ import annotations

import pytest

from oabench_pipeline.core.phase2.items import (
    Phase2DataError,
    area_exam_problems,
    criteria_total_problems,
    criterion_problems,
    parse_criteria,
    parse_items,
    parse_points_cell,
    parse_standards,
)
from oabench_pipeline.core.phase2.judge_prompts import parse_judge_prompts
from oabench_pipeline.core.phase2.judge_score import NO_SCORE, JudgeScore, parse_judge_score
from oabench_pipeline_tests.phase2.oab_bench import mirror_file


@pytest.fixture(scope="module")
def items():
    return parse_items(mirror_file("questions").read_text(encoding="utf-8"))


def test_105_items_in_21_area_exams_of_10_points(items) -> None:
    assert len(items) == 105
    exams = {i.area_exam for i in items}
    assert len(exams) == 21 and {e for e, _ in exams} == {39, 40, 41}
    assert area_exam_problems(items) == []
    piece = next(i for i in items if i.item_id == "39_direito_administrativo_peca_praticoprofissional")
    assert (piece.kind, piece.number, piece.turn_points, piece.turn_prompts) == ("piece", None, (5.0,), ("",))
    question = next(i for i in items if i.item_id == "39_direito_administrativo_questao_4")
    assert (question.kind, question.number, question.turn_points) == ("question", 4, (0.6, 0.65))
    assert question.statement and question.system.startswith("Você é um bacharel em direito")


def test_every_standard_and_criterion_parses(items) -> None:
    text = mirror_file("standards").read_text(encoding="utf-8")
    standards = parse_standards(text, {i.item_id: i for i in items})
    assert len(standards) == 21 + 84 * 2  # a turn per piece, two per question
    criteria = [c for s in standards for c in s.criteria]
    assert len(criteria) == 512
    assert all(c.allowed and c.max_points == max(c.allowed) for c in criteria)
    assert criterion_problems(standards) == []
    first = standards[0].criteria[0]
    assert (first.allowed, first.max_points) == ((0.0, 0.1, 0.2), 0.2) and first.text.startswith("1. Exmo.")
    assert [f"{s.item_id}:{s.turn}" for s in standards if s.annulled] == [
        "41_direito_do_trabalho_questao_3:2"
    ]
    # The source's own tables disagree with its items here (checked by hand, kept as a warning).
    assert criteria_total_problems(standards) == [
        "39_direito_penal_questao_1 sub-item 1: criteria add up to 0.65, the sub-item has 0.60",
        "39_direito_penal_questao_1 sub-item 2: criteria add up to 0.60, the sub-item has 0.65",
        "40_direito_administrativo_peca_praticoprofissional sub-item 1: criteria add up to 6.20, the sub-item has 5.00",
    ]


@pytest.mark.parametrize(
    ("cell", "allowed"),
    [
        ("0,00/0,10/0,20", (0.0, 0.1, 0.2)),
        ("0,0/0,10/0,20/ 0,30/0,40/0,50", (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)),
        ("0,00/0,20/0,30/0,40 0,50/0,60/0,70", (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)),
        ("0.00/0,55/0,65", (0.0, 0.55, 0.65)),
        ("0,00/0,25/0,30/0,35 /0,40/0,55/0,65", (0.0, 0.25, 0.3, 0.35, 0.4, 0.55, 0.65)),
        ("0,15/0,25/0,35", (0.15, 0.25, 0.35)),
    ],
)
def test_points_cells_in_every_format_the_standards_use(cell: str, allowed: tuple[float, ...]) -> None:
    assert parse_points_cell(cell) == allowed


@pytest.mark.parametrize("cell", ["0,00/0,20/0,10", "até 0,50", "0,00-0,10", ""])
def test_odd_points_are_refused(cell: str) -> None:
    with pytest.raises(ValueError, match="points"):
        parse_points_cell(cell)


def test_a_table_with_a_third_column_is_refused_naming_the_row() -> None:
    table = "| ITEM | PONTUAÇÃO |\n|:--|:--|\n| Pedidos | nan |\n| 1. Pedido (0,10) | 0,00/0,10 | extra |\n"
    with pytest.raises(Phase2DataError, match=r"X sub-item 1: table row .*3 cells"):
        parse_criteria(table, "X sub-item 1")
    assert parse_criteria(table.replace(" extra |", ""), "X")[0].allowed == (0.0, 0.1)


def test_judge_prompts_hold_the_two_oab_prompts() -> None:
    prompts = {
        p.name: p for p in parse_judge_prompts(mirror_file("judge_prompts").read_text(encoding="utf-8"))
    }
    assert len(prompts) == 10
    single, multi = prompts["single-oab-v1"], prompts["single-oab-v1-multi-turn"]
    assert (single.type, single.output_format, multi.output_format) == ("single", "[[rating]]", "[[rating]]")
    assert "{ref_answer_1}" in multi.prompt_template


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Nota final: [[0.60]]", 0.6),
        ("Nota final: [[0,6]]", 0.6),
        ("[[ 1,25 ]] e depois [[0.10]]", 1.25),  # the first one counts
        ("Nota [[0]]", 0.0),
        ("[[nota]] ... [[0.5]]", 0.5),  # a bracketed word is no score
    ],
)
def test_judge_score_is_the_first_bracketed_number(text: str, score: float) -> None:
    assert parse_judge_score(text, 1.25) == JudgeScore(score, True, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Nota total: 0,65", NO_SCORE),
        ("", NO_SCORE),
        ("[[0.70]]", "score 0.70 is above the sub-item's 0.65 points"),
        ("[[-1]]", "score -1 is below 0"),
    ],
)
def test_a_judgment_without_a_valid_score_is_invalid_never_zero(text: str, reason: str) -> None:
    parsed = parse_judge_score(text, 0.65)
    assert (parsed.score, parsed.valid, parsed.invalid_reason) == (None, False, reason)
