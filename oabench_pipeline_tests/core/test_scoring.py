"""Per-question scoring on a tiny hand-built warehouse whose every number is known by hand."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from oabench_pipeline.core.scoring import SCORES_COLUMNS, score_inferences

M1 = "openai/m1"
M2 = 'anthropic/it\'s; "two" ✓'  # quotes, semicolon, unicode: must go through bound parameters
M3 = "openai/m3-partial"

# Edition 43, five questions: q1 annulled, keys q2..q5 = A, B, C, D.
KEYS = {1: None, 2: "A", 3: "B", 4: "C", 5: "D"}
# (key, number) -> (lenient, strict, error, latency); q1 is a skipped row for every key.
ANSWERS: dict[tuple[str, int], tuple[str | None, str | None, str | None, int]] = {
    (M1, 2): ("A", "A", None, 1000),  # right
    (M1, 3): ("B", None, None, 1001),  # right, only the lenient parser found it
    (M1, 4): (None, None, "HTTP 500", 1000),  # error: invalid
    (M1, 5): ("D", "D", None, 1001),  # right
    (M2, 2): ("B", "B", None, 3000),  # wrong
    (M2, 3): ("B", "B", None, 3000),  # right
    (M2, 4): ("C", "C", None, 3000),  # right
    (M2, 5): ("A", "A", None, 3000),  # wrong
    (M3, 2): ("A", "A", None, 500),  # right; q3..q5 missing
}


def hand_built_tables() -> dict[str, pa.Table]:
    """questions, answer_keys, editions, inferences, models, model_pricing for the tiny case."""
    numbers = list(KEYS)
    qids = [f"oab-43-1f-q{n}" for n in numbers]
    status = ["annulled" if KEYS[n] is None else "active" for n in numbers]
    questions = pa.table(
        {
            "qid": qids,
            "edition": pa.array([43] * 5, pa.int32()),
            "number": pa.array(numbers, pa.int32()),
            "area": ["Ética Profissional"] * 5,
            "stem": ["?"] * 5,
            "choice_a": ["a"] * 5,
            "choice_b": ["b"] * 5,
            "choice_c": ["c"] * 5,
            "choice_d": ["d"] * 5,
            "status": status,
            "requires_image": [False] * 5,
            "pages": pa.array([[1]] * 5, pa.list_(pa.int32())),
            "source_sha256": ["0"] * 5,
        }
    )
    answer_keys = pa.table(
        {
            "qid": qids,
            "edition": pa.array([43] * 5, pa.int32()),
            "number": pa.array(numbers, pa.int32()),
            "correct": pa.array([KEYS[n] for n in numbers], pa.string()),
            "status": status,
        }
    )
    rows: list[dict[str, Any]] = []
    for key in (M1, M2, M3):
        rows.append(_row(key, 1, None, None, None, None, skipped=True))
        for (k, n), (lenient, strict, error, latency) in ANSWERS.items():
            if k == key:
                rows.append(_row(key, n, lenient, strict, error, latency, skipped=False))
    inferences = pa.Table.from_pylist(rows, schema=_INFERENCE_SCHEMA)
    models = pa.table(
        {
            "model_key": [M1, M3],
            "model": [M1, M3],
            "label": ["Model One", "Model Three"],
            "provider": ["openai", "openai"],
            "protocol": ["direto", "direto"],
            "reasoning_effort": pa.nulls(2, pa.string()),
            "web_search": [False, False],
            "base_url": pa.nulls(2, pa.string()),
            "kind": ["api", "api"],
            "knowledge_cutoff": pa.array([dt.date(2025, 1, 1), None], pa.date32()),
            "in_registry": [True, True],
        }
    )
    pricing = pa.table(
        {
            "fetched_at": pa.array([dt.datetime(2026, 1, 1), dt.datetime(2026, 3, 1)], pa.timestamp("us")),
            "base_url": ["https://openrouter.ai/api/v1"] * 2,
            "model": [M1, M1],
            "prompt_price_per_token": [9e-6, 1e-6],  # the older snapshot must be ignored
            "completion_price_per_token": [9e-6, 2e-6],
        }
    )
    editions = pa.table(
        {"edition": pa.array([43], pa.int32()), "exam_name": ["43º"], "exam_date": [dt.date(2025, 4, 13)]}
    )
    return {
        "questions": questions,
        "answer_keys": answer_keys,
        "editions": editions,
        "inferences": inferences,
        "models": models,
        "model_pricing": pricing,
    }


_INFERENCE_SCHEMA = pa.schema(
    [
        ("model_key", pa.string()),
        ("model", pa.string()),
        ("protocol", pa.string()),
        ("reasoning_effort", pa.string()),
        ("web_search", pa.bool_()),
        ("qid", pa.string()),
        ("edition", pa.int32()),
        ("number", pa.int32()),
        ("raw_response", pa.string()),
        ("reasoning", pa.string()),
        ("answer_strict", pa.string()),
        ("answer_lenient", pa.string()),
        ("parser_version", pa.string()),
        ("latency_ms", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("reasoning_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("error", pa.string()),
        ("skipped", pa.bool_()),
        ("attempts", pa.int32()),
        ("request_hash", pa.string()),
        ("source", pa.string()),
        ("created_at", pa.timestamp("us")),
        ("run_id", pa.string()),
    ]
)


def _row(
    key: str,
    number: int,
    lenient: str | None,
    strict: str | None,
    error: str | None,
    latency: int | None,
    *,
    skipped: bool,
) -> dict[str, Any]:
    called = not skipped
    return {
        "model_key": key,
        "model": key,
        "protocol": "direto",
        "web_search": False,
        "qid": f"oab-43-1f-q{number}",
        "edition": 43,
        "number": number,
        "raw_response": lenient,
        "answer_strict": strict,
        "answer_lenient": lenient,
        "parser_version": "1",
        "latency_ms": latency,
        "prompt_tokens": 100 if called else None,
        "completion_tokens": 2 if called else None,
        "cost_usd": 0.001 if called and key == M1 else None,
        "error": error,
        "skipped": skipped,
        "attempts": int(called),
        "source": "live",
        "created_at": dt.datetime(2026, 3, 3),
        "run_id": "r1",
    }


@pytest.fixture
def hand_con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for name, table in hand_built_tables().items():
        con.register(name, table)
    return con


def test_scores_rows_and_flags_by_hand(hand_con: duckdb.DuckDBPyConnection) -> None:
    scores = score_inferences(hand_con).sort("model_key", "number")
    assert tuple(scores.columns) == SCORES_COLUMNS
    assert scores.height == 5 + 5 + 2  # M3 has only q1 (skipped) and q2
    m1 = scores.filter(pl.col("model_key") == M1)
    assert m1["is_correct_official"].to_list() == [True, True, True, False, True]
    assert m1["is_correct_technical"].to_list() == [None, True, True, False, True]
    assert m1["is_valid"].to_list() == [False, True, True, False, True]
    assert m1["has_error"].to_list() == [False, False, False, True, False]
    assert m1["strict_compliant"].to_list() == [False, True, False, False, True]
    assert m1["correct"].to_list() == [None, "A", "B", "C", "D"]
    m2 = scores.filter(pl.col("model_key") == M2)
    assert m2["is_correct_technical"].to_list() == [None, False, True, True, False]
    assert m2["status"].to_list() == ["annulled", "active", "active", "active", "active"]


def test_filters_are_bound_parameters(hand_con: duckdb.DuckDBPyConnection) -> None:
    only = score_inferences(hand_con, model_key=M2)
    assert set(only["model_key"]) == {M2}
    assert only.height == 5
    assert score_inferences(hand_con, model_key="x' OR '1'='1").height == 0
    assert score_inferences(hand_con, edition=44).height == 0
    assert score_inferences(hand_con, model_key=M1, edition=43).height == 5


def test_error_with_an_answer_is_not_correct(hand_con: duckdb.DuckDBPyConnection) -> None:
    tables = hand_built_tables()
    inf = tables["inferences"].to_pylist()
    for row in inf:
        if row["model_key"] == M1 and row["number"] == 2:
            row["error"] = "timeout after partial stream"  # an answer was parsed, but the call failed
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(
            name, pa.Table.from_pylist(inf, schema=_INFERENCE_SCHEMA) if name == "inferences" else table
        )
    row = score_inferences(con, model_key=M1).filter(pl.col("number") == 2)
    assert row["is_valid"].item() is False
    assert row["is_correct_official"].item() is False
