"""Leaderboard tables: exact numbers on a hand-built case, invariants on synthetic data, and exact
reproduction of OABench's published summary.json files from their inferences.jsonl."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline.core.published_runs import read_run_summary
from oabench_pipeline.core.scoring import score_inferences
from oabench_pipeline_tests.core.synthetic_results import area_of, make_synthetic_warehouse, register
from oabench_pipeline_tests.core.test_scoring import _INFERENCE_SCHEMA, M1, M2, M3, hand_built_tables
from oabench_pipeline_tests.summary_like_oabench import summarize_like_oabench


def _errors_as_empty_replies(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The hand-built tables with every error row turned into an empty reply: invalid, but complete."""
    inferences = pl.from_arrow(tables["inferences"])
    assert isinstance(inferences, pl.DataFrame)
    fixed = inferences.with_columns(error=pl.lit(None, pl.String))
    return {**tables, "inferences": fixed.to_arrow().cast(tables["inferences"].schema)}


@pytest.fixture(scope="module")
def hand_tables() -> dict[str, pl.DataFrame]:
    con = duckdb.connect()
    for name, table in _errors_as_empty_replies(hand_built_tables()).items():
        con.register(name, table)
    return build_leaderboard_tables(con)


def test_an_unretried_error_leaves_the_key_unranked() -> None:
    con = duckdb.connect()
    for name, table in hand_built_tables().items():  # M1's q4 is an error row: its run is not complete
        con.register(name, table)
    board = build_leaderboard_tables(con)["leaderboard"]
    m1 = _row(board, model_key=M1)
    assert (m1["complete"], m1["rank"], m1["tie_group"], m1["official_score"]) == (False, None, None, 4)
    assert _row(board, model_key=M2)["rank"] == 1


def _row(frame: pl.DataFrame, **where: Any) -> dict[str, Any]:
    filtered = frame.filter(*(pl.col(k) == v for k, v in where.items()))
    assert filtered.height == 1, where
    return filtered.row(0, named=True)


def test_hand_built_leaderboard_numbers(hand_tables: dict[str, pl.DataFrame]) -> None:
    lb = hand_tables["leaderboard"]
    assert lb["model_key"].to_list() == [M1, M2, M3]  # ranked first, incomplete last
    m1 = _row(lb, model_key=M1)
    assert (m1["official_score"], m1["official_total"], m1["technical_score"], m1["technical_total"]) == (
        4,
        5,
        3,
        4,
    )
    assert m1["official_accuracy"] == pytest.approx(0.8)
    assert m1["invalid_count"] == 1
    assert m1["strict_compliance"] == pytest.approx(0.5)  # strict on q2, q5 of 4 calls
    assert m1["avg_latency_ms"] == 1001  # 1000.5 rounds half up, as JavaScript Math.round
    assert (m1["prompt_tokens"], m1["completion_tokens"]) == (400, 8)
    assert m1["cost_usd"] == pytest.approx(0.004)
    assert m1["estimated_cost_usd"] == pytest.approx(400 * 1e-6 + 8 * 2e-6)  # newest snapshot only
    assert m1["pricing_fetched_at"] == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    assert m1["cost_per_correct_usd"] == pytest.approx(0.004 / 3)
    assert (m1["label"], m1["provider"], m1["rank"], m1["complete"], m1["passed_all"]) == (
        "Model One",
        "openai",
        1,
        True,
        True,
    )
    assert m1["accuracy_ci_low"] <= 0.8 <= m1["accuracy_ci_high"]
    m2 = _row(lb, model_key=M2)
    assert (m2["official_score"], m2["technical_score"], m2["invalid_count"]) == (3, 2, 0)
    assert m2["strict_compliance"] == 1.0
    assert (m2["cost_usd"], m2["estimated_cost_usd"]) == (None, None)
    assert (m2["provider"], m2["label"], m2["rank"]) == ("anthropic", M2, 2)  # derived: not in `models`
    assert m2["tie_group"] == m1["tie_group"] == "a"  # 2 vs 1 discordant: far from significant
    assert (m1["rank_low"], m1["rank_high"], m2["rank_low"], m2["rank_high"]) == (1, 2, 1, 2)
    assert (m1["cost_source"], m1["effective_cost_usd"]) == ("reported", pytest.approx(0.004))
    m3 = _row(lb, model_key=M3)
    assert (m3["complete"], m3["rank"], m3["tie_group"], m3["missing_count"]) == (False, None, None, 3)
    assert (m3["rank_low"], m3["rank_high"]) == (None, None)
    assert m3["official_score"] == 2


def test_hand_built_pairwise_items_and_small_tables(hand_tables: dict[str, pl.DataFrame]) -> None:
    pw = hand_tables["pairwise_comparison"]
    assert pw.height == 1  # ranked keys only: the incomplete M3 is not tested
    pair = _row(pw, model_a=M1, model_b=M2)  # in rank order
    assert (pair["n_shared"], pair["a_only_correct"], pair["b_only_correct"]) == (4, 2, 1)
    assert (pair["accuracy_a"], pair["accuracy_b"]) == (0.75, 0.5)
    assert pair["p_value"] == pytest.approx(1.0)

    items = hand_tables["item_analysis"]
    q2 = _row(items, number=2)
    assert (q2["n_models"], q2["modal_answer"]) == (3, "A")
    assert q2["share_correct"] == pytest.approx(2 / 3)
    assert q2["answer_distribution"] == {"A": 2, "B": 1, "C": 0, "D": 0, "none": 0}
    q4 = _row(items, number=4)
    assert q4["answer_distribution"] == {"A": 0, "B": 0, "C": 1, "D": 0, "none": 1}
    assert q4["share_correct"] == pytest.approx(0.5)
    q1 = _row(items, number=1)
    assert (q1["flag"], q1["share_correct"], q1["n_models"]) == ("annulled", None, 3)
    assert items["flag"].to_list()[-1] == "annulled"  # suspicious/hard first, annulled last

    area = _row(hand_tables["leaderboard_by_area"], model_key=M1)
    assert (area["correct"], area["total"], area["area_order"]) == (3, 4, 1)
    by_ed = _row(hand_tables["leaderboard_by_edition"], model_key=M1, edition=43)
    assert (by_ed["official_score"], by_ed["passed"], by_ed["complete"]) == (4, True, True)
    contamination = _row(hand_tables["contamination_by_cutoff"], model_key=M1)
    assert (contamination["correct_after"], contamination["total_after"], contamination["total_before"]) == (
        3,
        4,
        0,
    )
    pareto = hand_tables["pareto_frontier"]
    assert _row(pareto, model_key=M1)["on_frontier"] is True
    assert _row(pareto, model_key=M2)["on_frontier"] is None  # no cost data at all


def test_hand_built_summary_like_oabench() -> None:
    con = duckdb.connect()
    for name, table in hand_built_tables().items():
        con.register(name, table)
    summary = summarize_like_oabench(con, M1)
    (edition,) = summary["editions"]
    assert edition == {
        "edition": 43, "total": 5, "annulled": 1, "active": 4, "correct": 3, "incorrect": 0, "invalid": 1,
        "officialScore": 4, "officialTotal": 5, "officialAccuracy": 0.8, "technicalScore": 3,
        "technicalTotal": 4, "technicalAccuracy": 0.75, "passed": True, "strictComplianceRate": 0.5,
    }  # fmt: skip
    assert summary["cost"]["avgLatencyMs"] == 1001
    assert "totalReasoningTokens" not in summary["cost"]
    assert summary["pricing"]["estimatedCostUsd"] == pytest.approx(0.000416)


@pytest.fixture(scope="module")
def synthetic() -> tuple[Any, dict[str, pl.DataFrame], pl.DataFrame]:
    warehouse = make_synthetic_warehouse(n_models=12, n_editions=4, seed=11)
    con = register(duckdb.connect(), warehouse)
    scores = score_inferences(con)
    con.register("scores", scores)
    return warehouse, build_leaderboard_tables(con), scores


def test_synthetic_invariants(synthetic: tuple[Any, dict[str, pl.DataFrame], pl.DataFrame]) -> None:
    warehouse, tables, scores = synthetic
    lb, by_ed = tables["leaderboard"], tables["leaderboard_by_edition"]
    assert sorted(lb["model_key"]) == sorted(warehouse.model_keys)
    sums = by_ed.group_by("model_key").agg(pl.col("official_score", "technical_score", "invalid_count").sum())
    joined = lb.join(sums, on="model_key", suffix="_ed")
    for col in ("official_score", "technical_score", "invalid_count"):
        assert (joined[col] == joined[f"{col}_ed"]).all(), col
    assert (lb["official_score"] >= lb["technical_score"]).all()
    for col in ("official_accuracy", "technical_accuracy", "strict_compliance", "p_pass"):
        assert lb[col].is_between(0, 1).all(), col
    assert (lb["accuracy_ci_low"] <= lb["official_accuracy"]).all()
    assert (lb["official_accuracy"] <= lb["accuracy_ci_high"]).all()
    # The scores table agrees with the leaderboard on a direct recount.
    direct = scores.group_by("model_key").agg(pl.col("is_correct_technical").sum())
    assert dict(direct.iter_rows()) == dict(lb.select("model_key", "technical_score").iter_rows())


def test_synthetic_planted_anomalies(synthetic: tuple[Any, dict[str, pl.DataFrame], pl.DataFrame]) -> None:
    warehouse, tables, _ = synthetic
    lb = tables["leaderboard"]
    incomplete = _row(lb, model_key=warehouse.incomplete_key)
    assert incomplete["rank"] is None and incomplete["complete"] is False and incomplete["missing_count"] > 0
    ranked = lb.filter(pl.col("complete"))
    assert ranked["rank"].null_count() == 0 and ranked["rank"].min() == 1
    # Dense rank follows the official score.
    assert ranked.sort("rank")["official_score"].is_sorted(descending=True)
    assert (
        _row(lb, model_key=warehouse.unregistered_key)["provider"] == warehouse.unregistered_key.split("/")[0]
    )
    assert warehouse.weird_key in lb["model_key"].to_list()
    items = tables["item_analysis"]
    assert _row(items, qid=warehouse.planted_qid)["flag"] == "possible_key_problem"
    assert items["flag"][0] == "possible_key_problem"
    errored = _row(lb, model_key=warehouse.errored_key)
    assert errored["rank"] is None and errored["complete"] is False and errored["missing_count"] == 0
    k = ranked.height
    assert k == lb.height - 2  # the incomplete and the errored key take no part in the tests
    assert tables["pairwise_comparison"].height == k * (k - 1) // 2
    assert warehouse.errored_key not in tables["pairwise_comparison"]["model_a"].to_list()
    # The letter display starts at 'a' and every ranked key has at least one letter.
    letters = ranked.sort("rank", "official_score", descending=[False, True])["tie_group"].to_list()
    assert letters[0].startswith("a") and all(letters)
    assert (ranked["rank_low"] <= ranked["rank_high"]).all()
    eds = tables["leaderboard_by_edition"]
    assert not _row(eds, model_key=warehouse.incomplete_key, edition=warehouse.editions[-1])["complete"]
    frontier = tables["pareto_frontier"].filter(pl.col("on_frontier"))
    assert frontier.height >= 1
    cheapest = (
        tables["pareto_frontier"].filter(pl.col("on_frontier").is_not_null()).sort("cost_usd", "accuracy")
    )
    assert cheapest["on_frontier"][0] or cheapest["cost_usd"][0] == cheapest["cost_usd"][1]
    corr = tables["latency_accuracy_correlation"].row(0, named=True)
    assert corr["n"] == lb["complete"].sum() and -1 <= corr["spearman_rho"] <= 1


def test_cutoff_table_ends_with_the_pooled_row(
    synthetic: tuple[Any, dict[str, pl.DataFrame], pl.DataFrame],
) -> None:
    """Issue 22: `contamination_by_cutoff` keeps its raw columns, gains the effect net of difficulty per
    key, and a pooled row: every key with a cutoff together, the effect of `contamination_pooled`."""
    from oabench_pipeline.core.analysis.table_checks import table_problems

    _, tables, _ = synthetic
    cutoff, pooled = tables["contamination_by_cutoff"], tables["contamination_pooled"].row(0, named=True)
    keys = cutoff.filter(~pl.col("pooled"))
    assert keys.height >= 3 and keys["model_key"].null_count() == 0
    assert keys["effect_log_odds"].null_count() < keys.height  # some keys have exams on both sides
    last = cutoff.row(-1, named=True)
    assert last["pooled"] is True and cutoff["pooled"].sum() == 1
    assert (last["model_key"], last["knowledge_cutoff"], last["editions_after"]) == (None, None, None)
    for column in ("correct_after", "total_after", "correct_before", "total_before"):
        assert last[column] == keys[column].sum(), column
    assert last["accuracy_after"] == pytest.approx(last["correct_after"] / last["total_after"])
    assert last["delta"] == pytest.approx(last["accuracy_after"] - last["accuracy_before"])
    for column in ("effect_log_odds", "effect_ci_low", "effect_ci_high", "p_value"):
        assert last[column] == pooled[column], column
    assert last["effect_ci_low"] < last["effect_log_odds"] < last["effect_ci_high"]
    assert last["note"].startswith(f"pooled: one effect shared by {keys.height} model key(s)")
    checks = table_problems("contamination_by_cutoff", cutoff)
    assert set(checks) == {"one_row_per_key", "correct_within_total", "effect_interval_valid"}
    assert not any(checks.values()), checks
    twice = pl.concat([cutoff, cutoff.tail(1)])
    assert table_problems("contamination_by_cutoff", twice)["one_row_per_key"] == [
        "(pooled): 2 rows",
        f"{keys.height} key row(s) and 2 pooled row(s)",
    ]


def test_deterministic_for_a_seed(synthetic: tuple[Any, dict[str, pl.DataFrame], pl.DataFrame]) -> None:
    warehouse, tables, _ = synthetic
    again = build_leaderboard_tables(register(duckdb.connect(), warehouse))
    for name, frame in tables.items():
        assert frame.equals(again[name]), name


# -------------------------------------------------------------------------------------------------
# Published OABench runs: rebuild the warehouse relations from inferences.jsonl + scored.jsonl and
# compare with summary.json.
# -------------------------------------------------------------------------------------------------


def _published_connection(run_dir: Path) -> tuple[duckdb.DuckDBPyConnection, str, dict[str, Any]]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    last: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "inferences.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        last[record["qid"]] = record  # a resumed run appends: the last line wins
    scored = [
        json.loads(line) for line in (run_dir / "scored.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    model = summary["model"]
    rows = []
    for r in last.values():
        usage = r.get("tokenUsage") or {}
        rows.append(
            {
                "model_key": model, "model": model, "protocol": r["protocol"], "web_search": False,
                "qid": r["qid"], "edition": r["edition"], "number": r["questionNumber"],
                "raw_response": r["rawResponse"], "answer_strict": r["parsedAnswer"]["strict"],
                "answer_lenient": r["parsedAnswer"]["lenient"], "parser_version": "oabench",
                "latency_ms": r["latencyMs"], "prompt_tokens": usage.get("promptTokens"),
                "completion_tokens": usage.get("completionTokens"),
                "reasoning_tokens": usage.get("reasoningTokens"), "cost_usd": r.get("cost"),
                "error": r["error"], "skipped": r["skipped"], "attempts": 1, "source": "imported",
                "created_at": dt.datetime(2026, 3, 3), "run_id": summary["runId"],
            }
        )  # fmt: skip
    numbers = np.array([s["questionNumber"] for s in scored])
    questions = pl.DataFrame(
        {
            "qid": [s["qid"] for s in scored],
            "edition": pl.Series([s["edition"] for s in scored], dtype=pl.Int32),
            "number": pl.Series(numbers, dtype=pl.Int32),
            "area": area_of(numbers).tolist(),
            "status": [s["status"] for s in scored],
        }
    )
    answer_keys = questions.select("qid", "edition", "number", "status").with_columns(
        correct=pl.Series([s["correctAnswer"] for s in scored], dtype=pl.String)
    )
    pricing = summary["pricing"]
    con = duckdb.connect()
    con.register("inferences", pa.Table.from_pylist(rows, schema=_INFERENCE_SCHEMA))
    con.register("questions", questions)
    con.register("answer_keys", answer_keys)
    # The summary says which editions the run completed (the import writes the same relation).
    con.register("published_run_summaries", pl.DataFrame([read_run_summary(run_dir).model_dump()]))
    con.register("editions", pl.DataFrame({"edition": [43, 44, 45], "exam_date": [dt.date(2025, 4, 13)] * 3}))
    con.register(
        "models",
        pl.DataFrame(
            schema={
                "model_key": pl.String,
                "model": pl.String,
                "label": pl.String,
                "provider": pl.String,
                "kind": pl.String,
                "knowledge_cutoff": pl.Date,
            }
        ),
    )
    con.register(
        "model_pricing",
        pl.DataFrame(
            {
                "fetched_at": [
                    dt.datetime.fromisoformat(pricing["fetchedAt"].replace("Z", "+00:00")).replace(
                        tzinfo=None
                    )
                ],
                "base_url": ["https://openrouter.ai/api/v1"],
                "model": [model],
                "prompt_price_per_token": [pricing["promptPricePerToken"]],
                "completion_price_per_token": [pricing["completionPricePerToken"]],
            }
        ),
    )
    return con, model, summary


def _published_runs(shared: Path) -> list[Path]:
    return sorted(p.parent for p in (shared / "published-runs").glob("*/summary.json"))


def test_reproduces_published_summaries(shared_oab: Path) -> None:
    runs = _published_runs(shared_oab)
    assert len(runs) == 4
    for run in runs:
        con, model, published = _published_connection(run)
        ours = summarize_like_oabench(con, model)
        assert ours["editions"] == published["editions"], run.name
        assert ours["aggregate"] == published["aggregate"], run.name
        expected_cost = dict(published["cost"])
        actual = expected_cost.pop("actualCostUsd", None)
        got_actual = ours["cost"].pop("actualCostUsd", None)
        assert ours["cost"] == expected_cost, run.name
        assert (got_actual is None) == (actual is None)
        if actual is not None:
            assert math.isclose(got_actual, actual, rel_tol=1e-12)  # float sums differ in order only
        assert ours["pricing"]["estimatedCostUsd"] == pytest.approx(
            published["pricing"]["estimatedCostUsd"], rel=1e-12
        )

        # The leaderboard carries the same figures.
        tables = build_leaderboard_tables(con)
        row = _row(tables["leaderboard"], model_key=model)
        agg = published["aggregate"]
        assert (row["official_score"], row["technical_score"], row["technical_total"]) == (
            agg["officialScore"],
            agg["technicalScore"],
            agg["technicalTotal"],
        )
        assert row["strict_compliance"] == agg["strictComplianceRate"]
        assert row["avg_latency_ms"] == published["cost"]["avgLatencyMs"]
        assert row["passed_all"] is agg["passedAll"] and row["complete"] is True
        assert row["estimated_cost_usd"] == pytest.approx(published["pricing"]["estimatedCostUsd"], rel=1e-12)
