"""OAB-Bench's 2nd-phase protocol: the conversation, the judge prompts (byte for byte), the scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.core.phase2.judge_score import parse_judge_score
from oabench_pipeline.core.phase2.protocol import (
    answer_messages,
    judge_prompt_name,
    judge_user_prompt,
    phase2_request_hash,
    request_body,
)
from oabench_pipeline.core.phase2.structured import Criterion, parse_structured, structured_user_prompt
from oabench_pipeline_tests import phase2_data


@pytest.fixture(scope="module")
def data(shared_oab: Path) -> Path:
    return phase2_data.oab_bench_data(shared_oab)


def test_every_recorded_judge_prompt_is_reproduced_byte_for_byte(data: Path) -> None:
    items, standards, templates = (
        phase2_data.items(data),
        phase2_data.standards(data),
        phase2_data.templates(data),
    )
    answers = {m: phase2_data.answers(data, m) for m in phase2_data.ANSWERING_MODELS}
    recorded = phase2_data.judgments(data)
    assert len(recorded) == 378
    reproduced = 0
    for judgment in recorded:
        judgment_prompt_name = judge_prompt_name(judgment.turn)
        assert judgment_prompt_name == judgment.prompt_name
        item = items[judgment.item_id]
        prompt = judge_user_prompt(
            templates[judgment_prompt_name],
            item,
            standards[item.item_id],
            answers[judgment.model][item.item_id][: judgment.turn],
            judgment.turn,
        )
        reproduced += prompt == judgment.user_prompt
    assert reproduced == 378


def test_every_recorded_bracketed_score_is_parsed_as_recorded(data: Path) -> None:
    items = phase2_data.items(data)
    bracketed = invalid = 0
    for judgment in phase2_data.judgments(data):
        points = items[judgment.item_id].turn_points[judgment.turn - 1]
        parsed = parse_judge_score(judgment.judgment, points)
        if "[[" in judgment.judgment and parsed.valid:
            bracketed += 1
            assert parsed.score == judgment.score
        else:
            invalid += 1
            assert parsed.score is None
    assert bracketed == 373 and invalid == 5  # 5 recorded corrections carry no [[score]]


def test_conversation_is_system_then_statement_and_first_turn_then_second_turn(data: Path) -> None:
    item = phase2_data.items(data)["39_direito_administrativo_questao_1"]
    first = answer_messages(item, 1, [])
    assert first == [
        {"role": "system", "content": item.system},
        {"role": "user", "content": item.statement + "\n" + item.turn_prompts[0]},
    ]
    second = answer_messages(item, 2, ["reply A"])
    assert second == [
        *first,
        {"role": "assistant", "content": "reply A"},
        {"role": "user", "content": item.turn_prompts[1]},
    ]
    with pytest.raises(ValueError):
        answer_messages(item, 2, [])


def test_request_hash_changes_with_the_earlier_reply_the_ceiling_and_a_retry(data: Path) -> None:
    item = phase2_data.items(data)["39_direito_administrativo_questao_1"]
    body = request_body("m", answer_messages(item, 2, ["A"]), 0.7, 4096)
    assert body["max_tokens"] == 4096
    hashes = {
        phase2_request_hash(body),
        phase2_request_hash(request_body("m", answer_messages(item, 2, ["B"]), 0.7, 4096)),
        phase2_request_hash(request_body("m", answer_messages(item, 2, ["A"]), 0.7, 8192)),
        phase2_request_hash(body, retry=1),
    }
    assert len(hashes) == 4


@pytest.mark.parametrize(
    ("text", "points", "score", "valid"),
    [
        ("Nota final: [[0,60]]", 0.65, 0.6, True),
        ("[[0.65]] then [[0.10]]", 0.65, 0.65, True),
        ("[[ 5 ]]", 5.0, 5.0, True),
        ("[[nota]] ... [[4.5]]", 5.0, 4.5, True),
        ("Nota: 0.60", 0.65, None, False),
        ("[0.60]", 0.65, None, False),
        ("[[0.70]]", 0.65, None, False),
        ("", 1.25, None, False),
        (None, 1.25, None, False),
    ],
)
def test_judge_score(text: str | None, points: float, score: float | None, valid: bool) -> None:
    parsed = parse_judge_score(text, points)
    assert (parsed.score, parsed.valid) == (score, valid)
    assert (parsed.invalid_reason is None) == valid


CRITERIA = [
    Criterion("Sim, a matriz é obrigatória", 0.55, (0.0, 0.45, 0.55)),
    Criterion("art. 22, § 3º", 0.10, (0.0, 0.10)),
]


@pytest.mark.parametrize(
    ("reply", "score", "reason"),
    [
        ('```json\n{"points": [0.45, 0.1]}\n```', 0.55, None),
        ('{"points": [0.55, 0]}', 0.55, None),
        ('{"points": [0.5, 0.1]}', None, "criterion 1: 0.5 is not one of its allowed values"),
        ('{"points": [0.55]}', None, "1 value(s) for 2 criteria"),
        ('{"points": ["0.55", 0.1]}', None, 'no list of numbers under "points"'),
        ("0.55 and 0.10", None, "no JSON object in the judgment"),
        ('{"points": [0.55, 0.1,}', None, "the judgment's JSON does not parse"),
    ],
)
def test_structured_judgment_is_validated_against_the_allowed_values(
    reply: str, score: float | None, reason: str | None
) -> None:
    parsed = parse_structured(reply, CRITERIA, 0.65)
    assert (parsed.score, parsed.invalid_reason) == (score, reason)
    assert parsed.valid == (score is not None)


def test_structured_prompt_lists_each_criterion_with_its_allowed_values() -> None:
    prompt = structured_user_prompt("Q?", "Standard", CRITERIA, "Answer", 0.65)
    assert "1. Sim, a matriz é obrigatória — valores permitidos: 0,00 / 0,45 / 0,55" in prompt
    assert "exatamente 2 números" in prompt and "[Início da Resposta do Candidato]\nAnswer\n" in prompt
