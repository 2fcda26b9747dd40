"""One benchmark cell without Dagster: what `plan_cell` sends and which rows a cell ends with."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from oabench_pipeline.core.baselines import BASELINE_IDS
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.prompts import request_hash
from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.core.tables import conform, empty_frame
from oabench_pipeline.inference.cell import (
    api_cell_rows,
    baseline_cell_rows,
    build_requests,
    plan_cell,
    replicate_plans,
)
from oabench_pipeline.inference.types import ChatRequest, ChatResult

T0 = dt.datetime(2026, 3, 3, 12, 0, tzinfo=dt.UTC)
MODEL = ModelConfig.model_validate({"id": "acme/jurista-1", "base_url": "http://127.0.0.1:9/v1"})


def questions(stem_of_q2: str = "Segundo a Constituição, é correto afirmar que") -> pl.DataFrame:
    """Four questions of a made-up edition 99; q3 is annulled."""
    rows = []
    for number in range(1, 5):
        rows.append(
            {
                "qid": f"oab-99-1f-q{number}",
                "edition": 99,
                "number": number,
                "area": "Ética",
                "stem": stem_of_q2 if number == 2 else f"Enunciado da questão {number}",
                "choice_a": "curta",
                "choice_b": "uma alternativa bem mais longa que as outras",
                "choice_c": "média aqui",
                "choice_d": "outra",
                "status": "annulled" if number == 3 else "active",
            }
        )
    return conform("questions", pl.DataFrame(rows))


def answered(request: ChatRequest, answer: str | None = "B", error: str | None = None) -> ChatResult:
    return ChatResult(
        qid=request.qid,
        request_hash=request.request_hash,
        raw_response=answer,
        reasoning=None,
        latency_ms=300,
        prompt_tokens=800,
        completion_tokens=1,
        reasoning_tokens=None,
        cost_usd=0.001,
        error=error,
        attempts=1,
        finished_at=T0,
    )


def first_plan() -> tuple[pl.DataFrame, list[ChatRequest]]:
    qs = questions()
    return qs, plan_cell(MODEL, qs, {}, empty_frame("inferences")).requests


def test_every_active_question_is_pending_on_a_fresh_cell() -> None:
    qs, requests = first_plan()
    plan = plan_cell(MODEL, qs, {}, empty_frame("inferences"))
    assert [r.qid for r in plan.pending] == ["oab-99-1f-q1", "oab-99-1f-q2", "oab-99-1f-q4"]
    assert plan.pending == requests and plan.kept == {}
    assert all(r.body["model"] == "acme/jurista-1" for r in requests)


def test_only_unanswered_requests_are_pending() -> None:
    qs, (q1, q2, q4) = first_plan()
    logged = {q1.request_hash: answered(q1), q2.request_hash: answered(q2, answer=None, error="HTTP 503")}
    plan = plan_cell(MODEL, qs, logged, empty_frame("inferences"))
    assert [r.qid for r in plan.pending] == [q2.qid, q4.qid]


def test_answered_rows_of_this_run_are_kept_and_rows_of_other_runs_are_not_mixed_in() -> None:
    qs, (q1, q2, q4) = first_plan()
    r1 = live_run_id(MODEL.key, 1)
    existing = conform(
        "inferences",
        pl.DataFrame(
            [
                {"qid": q1.qid, "raw_response": "C", "source": "imported", "run_id": "folder"},
                {
                    "qid": q2.qid,
                    "raw_response": "D",
                    "source": "live",
                    "request_hash": q2.request_hash,
                    "run_id": r1,
                },
                {"qid": q4.qid, "raw_response": None, "error": "not sent", "source": "live", "run_id": r1},
            ]
        ),
    )
    plan = plan_cell(MODEL, qs, {}, existing)
    assert set(plan.kept) == {q2.qid}  # the imported answer belongs to another run
    assert [r.qid for r in plan.pending] == [q1.qid, q4.qid]
    rows = {r["qid"]: r for r in api_cell_rows(MODEL, qs, plan, {}, run_id=r1)}
    assert rows[q2.qid]["raw_response"] == "D"
    assert rows[q4.qid]["error"] == "not sent" and rows[q4.qid]["request_hash"] == q4.request_hash


def test_replicate_one_hashes_as_before_and_later_replicates_are_new_requests() -> None:
    qs, (q1, _, _) = first_plan()
    assert q1.request_hash == request_hash(q1.body)  # existing logs stay valid: nothing is paid twice
    second = build_requests(MODEL, qs, replicate=2)
    assert second[0].body == q1.body and second[0].request_hash != q1.request_hash
    assert build_requests(MODEL, qs, replicate=3)[0].request_hash not in {
        q1.request_hash,
        second[0].request_hash,
    }


def test_replicate_plans_resume_the_current_replicate_then_start_the_next() -> None:
    qs, requests = first_plan()
    fresh = replicate_plans(MODEL, qs, {}, empty_frame("inferences"), target=2)
    assert [p.replicate for p in fresh] == [1, 2] and all(len(p.pending) == 3 for p in fresh)
    # Replicate 1 answered and written; one answer of it still failed: it is resumed, nothing more.
    logged = {r.request_hash: answered(r) for r in requests}
    logged[requests[1].request_hash] = answered(requests[1], None, "HTTP 503")
    rows = api_cell_rows(
        MODEL,
        qs,
        plan_cell(MODEL, qs, logged, empty_frame("inferences")),
        logged,
        run_id=live_run_id(MODEL.key, 1),
    )
    existing = conform("inferences", pl.DataFrame(rows))
    (resume,) = replicate_plans(MODEL, qs, logged, existing, target=1)
    assert (resume.replicate, [r.qid for r in resume.pending]) == (1, [requests[1].qid])
    # Once complete, one replicate is enough; two ask for replicate 2; an imported complete run counts.
    logged[requests[1].request_hash] = answered(requests[1])
    rows = api_cell_rows(
        MODEL, qs, plan_cell(MODEL, qs, logged, existing), logged, run_id=live_run_id(MODEL.key, 1)
    )
    existing = conform("inferences", pl.DataFrame(rows))
    assert replicate_plans(MODEL, qs, logged, existing, target=1) == []
    assert [p.replicate for p in replicate_plans(MODEL, qs, logged, existing, target=2)] == [2]
    assert replicate_plans(MODEL, qs, logged, existing, target=2, complete_elsewhere=1) == []


def test_a_changed_prompt_is_a_new_request_and_is_asked_again() -> None:
    _, (q1, q2, q4) = first_plan()
    logged = {r.request_hash: answered(r) for r in (q1, q2, q4)}
    old_row = {"qid": q2.qid, "raw_response": "B", "source": "live", "request_hash": q2.request_hash}
    reworded = questions(stem_of_q2="Segundo a Constituição Federal, é correto afirmar que")
    plan = plan_cell(MODEL, reworded, logged, conform("inferences", pl.DataFrame([old_row])))
    assert [r.qid for r in plan.pending] == [q2.qid]
    assert plan.pending[0].request_hash != q2.request_hash
    assert plan.kept == {}


def test_another_model_config_never_reuses_answers() -> None:
    qs, requests = first_plan()
    logged = {r.request_hash: answered(r) for r in requests}
    effort = ModelConfig.model_validate(
        {"id": "acme/jurista-1", "reasoning_effort": "high", "base_url": "http://127.0.0.1:9/v1"}
    )
    assert len(plan_cell(effort, qs, logged, empty_frame("inferences")).pending) == 3


def test_cell_rows_one_per_question_annulled_skipped() -> None:
    qs, (q1, q2, q4) = first_plan()
    logged = {q1.request_hash: answered(q1, "Resposta: B"), q2.request_hash: answered(q2, None, "HTTP 400")}
    plan = plan_cell(MODEL, qs, logged, empty_frame("inferences"))
    rows = conform("inferences", pl.DataFrame(api_cell_rows(MODEL, qs, plan, logged, run_id="r1")))
    assert rows["qid"].to_list() == [f"oab-99-1f-q{n}" for n in range(1, 5)]
    by_qid = {r["qid"]: r for r in rows.iter_rows(named=True)}
    assert by_qid[q1.qid]["answer_lenient"] == "B" and by_qid[q1.qid]["error"] is None
    assert by_qid[q2.qid]["error"] == "HTTP 400" and by_qid[q2.qid]["answer_lenient"] is None
    skipped = by_qid["oab-99-1f-q3"]
    assert skipped["skipped"] and skipped["raw_response"] is None and skipped["attempts"] == 0
    assert by_qid[q4.qid]["error"] == "not sent"


@pytest.mark.parametrize("baseline", BASELINE_IDS)
def test_baseline_rows_answer_every_active_question_deterministically(baseline: str) -> None:
    model = ModelConfig.model_validate({"id": baseline, "kind": "baseline"})
    qs = questions()
    rows = conform("inferences", pl.DataFrame(baseline_cell_rows(model, qs, run_id="r1")))
    again = conform("inferences", pl.DataFrame(baseline_cell_rows(model, qs, run_id="r2")))
    assert rows.height == 4 and set(rows["source"]) == {"baseline"}
    active = rows.filter(~pl.col("skipped"))
    assert active["qid"].to_list() == ["oab-99-1f-q1", "oab-99-1f-q2", "oab-99-1f-q4"]
    assert set(active["answer_strict"]) <= set("ABCD")
    assert active["raw_response"].to_list() == again.filter(~pl.col("skipped"))["raw_response"].to_list()
    assert rows.filter(pl.col("skipped"))["qid"].to_list() == ["oab-99-1f-q3"]


def test_longest_choice_picks_the_longest() -> None:
    model = ModelConfig.model_validate({"id": "baseline/longest-choice", "kind": "baseline"})
    rows = baseline_cell_rows(model, questions(), run_id="r1")
    assert {r["raw_response"] for r in rows if not r["skipped"]} == {"B"}
