"""What a 2nd-phase cell sends and keeps, from its response log (no Dagster, no process): quick."""

from __future__ import annotations

import datetime as dt

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.phase2.protocol import JudgeTemplate, Phase2Item
from oabench_pipeline.core.provenance import Provenance
from oabench_pipeline.inference.types import ChatRequest, ChatResult
from oabench_pipeline.phase2.plans import (
    NOT_ASKED,
    JudgeSetup,
    Standard,
    answer_round,
    answer_rows,
    judgment_rows,
    plan_judgments,
)

MODEL = ModelConfig.model_validate({"id": "acme/model", "base_url": "http://127.0.0.1:1/v1"})
JUDGE = ModelConfig.model_validate({"id": "o3-2025-04-16", "base_url": "http://127.0.0.1:1/v1"})
PIECE = Phase2Item("39_x_peca", 39, "x", "piece", "Caso P", "Sistema", ("Redija a peça",), (5.0,))
QUESTION = Phase2Item("39_x_questao_1", 39, "x", "question", "Caso Q", "Sistema", ("A?", "B?"), (0.65, 0.6))
ITEMS = [PIECE, QUESTION]
TEMPLATES = {
    "single-oab-v1": JudgeTemplate("single-oab-v1", "S1", "{question}|{ref_answer_1}|{answer}|{value}"),
    "single-oab-v1-multi-turn": JudgeTemplate(
        "single-oab-v1-multi-turn", "S2", "{question_1}|{question_2}|{ref_answer_2}|{answer_2}|{value}"
    ),
}


def reply(
    request: ChatRequest, text: str | None, finish: str = "stop", error: str | None = None
) -> ChatResult:
    return ChatResult(
        qid=request.qid,
        request_hash=request.request_hash,
        raw_response=text,
        reasoning=None,
        latency_ms=10,
        prompt_tokens=100,
        completion_tokens=50,
        reasoning_tokens=None,
        cost_usd=0.01,
        error=error,
        attempts=1,
        finished_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        provenance=Provenance(finish_reason=finish),
    )


def test_sub_item_b_is_asked_only_after_a_has_its_reply_and_carries_it() -> None:
    first = answer_round(MODEL, ITEMS, {}, 4096)
    assert [r.qid for r in first.pending] == ["39_x_peca#1", "39_x_questao_1#1"]
    logged = {r.request_hash: reply(r, f"answer {r.qid}") for r in first.pending}
    second = answer_round(MODEL, ITEMS, logged, 4096)
    assert [r.qid for r in second.pending] == ["39_x_questao_1#2"]
    messages = second.pending[0].body["messages"]
    assert messages[2] == {"role": "assistant", "content": "answer 39_x_questao_1#1"}
    assert second.pending[0].body["max_tokens"] == 4096
    logged |= {r.request_hash: reply(r, "B answer", finish="length") for r in second.pending}
    assert answer_round(MODEL, ITEMS, logged, 4096).pending == []  # a rerun sends nothing
    assert answer_round(MODEL, ITEMS, logged, 8192).pending != []  # a new ceiling is a new request
    rows = answer_rows(MODEL, ITEMS, logged, 4096, "live:k:r1")
    assert [(r["item_id"], r["turn"], r["truncated"], r["max_completion_tokens"]) for r in rows] == [
        ("39_x_peca", 1, False, 4096),
        ("39_x_questao_1", 1, False, 4096),
        ("39_x_questao_1", 2, True, 4096),
    ]


def test_a_failed_sub_item_a_leaves_b_unasked_and_is_asked_again() -> None:
    first = answer_round(MODEL, [QUESTION], {}, None)
    logged = {first.pending[0].request_hash: reply(first.pending[0], None, error="HTTP 500 after 6 retries")}
    assert answer_round(MODEL, [QUESTION], logged, None).pending == first.pending
    rows = answer_rows(MODEL, [QUESTION], logged, None, "live:k:r1")
    assert [(r["turn"], r.get("answer"), r["error"]) for r in rows] == [
        (1, None, "HTTP 500 after 6 retries"),
        (2, None, NOT_ASKED),
    ]


def test_an_invalid_judgment_is_kept_and_asked_again_only_with_retry_invalid() -> None:
    setup = JudgeSetup(JUDGE, TEMPLATES, 20_000)
    standards = {"39_x_questao_1": [Standard("padrão A"), Standard("padrão B")]}
    answers = {"39_x_questao_1": ("live:k:r1", ["A answer", "B answer"])}
    planned = plan_judgments(setup, {"39_x_questao_1": QUESTION}, standards, answers, {})
    assert [j.pending.qid for j in planned if j.pending] == ["39_x_questao_1#1", "39_x_questao_1#2"]
    assert planned[1].pending is not None and planned[1].pending.body["temperature"] == 1.0
    logged = {
        planned[0].hash_at(0): reply(planned[0].pending, "Nota: [[0,65]]"),  # type: ignore[arg-type]
        planned[1].hash_at(0): reply(planned[1].pending, "Nota: 0,60"),  # type: ignore[arg-type]
    }
    again = plan_judgments(setup, {"39_x_questao_1": QUESTION}, standards, answers, logged)
    assert [j.pending for j in again] == [None, None]
    rows = judgment_rows(setup, "k", again, standards, logged)
    assert [(r["score"], r["valid"], r["invalid_reason"]) for r in rows] == [
        (0.65, True, None),
        (None, False, "no [[score]] in the judgment"),
    ]
    retry = plan_judgments(
        setup, {"39_x_questao_1": QUESTION}, standards, answers, logged, retry_invalid=True
    )
    assert retry[0].pending is None
    assert retry[1].pending is not None and retry[1].pending.request_hash == retry[1].hash_at(1)
    assert retry[1].pending.request_hash != planned[1].hash_at(0)  # the first judgment stays in the log
    logged[retry[1].hash_at(1)] = reply(retry[1].pending, "[[0.55]]")
    after = plan_judgments(setup, {"39_x_questao_1": QUESTION}, standards, answers, logged)
    assert [r["score"] for r in judgment_rows(setup, "k", after, standards, logged)] == [0.65, 0.55]


def test_a_structured_judgment_lists_the_criteria_and_sums_allowed_points() -> None:
    from oabench_pipeline.core.phase2.structured import Criterion

    setup = JudgeSetup(JUDGE, TEMPLATES, 20_000, structured=True)
    criteria = (Criterion("matriz de riscos", 0.55, (0.0, 0.45, 0.55)), Criterion("art. 22", 0.1, (0.0, 0.1)))
    standards = {"39_x_questao_1": [Standard("padrão A", criteria), Standard("padrão B")]}
    answers = {"39_x_questao_1": ("live:k:r1", ["A answer", "B answer"])}
    planned = plan_judgments(setup, {"39_x_questao_1": QUESTION}, standards, answers, {})
    prompt = planned[0].pending.body["messages"][1]["content"]  # type: ignore[union-attr]
    assert "1. matriz de riscos — valores permitidos: 0,00 / 0,45 / 0,55" in prompt
    assert planned[0].prompt_name == "structured-oab-v1"
    logged = {
        planned[0].hash_at(0): reply(planned[0].pending, '{"points": [0.45, 0.1]}'),  # type: ignore[arg-type]
        planned[1].hash_at(0): reply(planned[1].pending, '{"points": []}'),  # type: ignore[arg-type]
    }
    rows = judgment_rows(setup, "k", planned, standards, logged)
    assert [(r["score"], r["valid"], r.get("criteria_points"), r["invalid_reason"]) for r in rows] == [
        (0.55, True, [0.45, 0.1], None),
        (None, False, None, "the standard has no parsed criteria"),
    ]
