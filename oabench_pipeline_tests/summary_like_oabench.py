"""OABench's summary.json numbers recomputed from the warehouse, to check we reproduce the published files.

Test-only: the pipeline's own numbers are the leaderboard tables; this rebuilds the original tool's
shape for one key so the tests can compare it field by field with a published `summary.json`.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import polars as pl

from oabench_pipeline.core.analysis.aggregates import EDITION_TOTALS_SQL, KEY_META_SQL
from oabench_pipeline.core.analysis.frames import PASS_FRACTION
from oabench_pipeline.core.scoring import score_inferences


def summarize_like_oabench(con: duckdb.DuckDBPyConnection, model_key: str) -> dict[str, Any]:
    """The numbers of OABench's summary.json for one key: `editions`, `aggregate`, `cost`, `pricing`.

    Editions are those the key has rows in. `totalReasoningTokens` / `actualCostUsd` appear only
    when the key has such data, as in OABench. Float sums (actualCostUsd) may differ from the
    published file in the last bits because the summation order differs: compare with approx.
    """
    scores = score_inferences(con, model_key=model_key)
    ed_totals = con.sql(EDITION_TOTALS_SQL).pl()
    meta = con.sql(KEY_META_SQL).pl().filter(pl.col("model_key") == model_key)
    eds = (
        scores.group_by("edition")
        .agg(
            correct=pl.col("is_correct_technical").sum(),
            invalid=((pl.col("status") == "active") & ~pl.col("is_valid")).sum(),
            wrong=(
                (pl.col("status") == "active") & pl.col("is_valid") & ~pl.col("is_correct_technical")
            ).sum(),
            calls=(~pl.col("skipped")).sum(),
            strict=pl.col("strict_compliant").sum(),
        )
        .join(ed_totals, on="edition", how="left")
        .sort("edition")
    )
    editions: list[dict[str, Any]] = []
    for row in eds.iter_rows(named=True):  # a handful of editions
        official = row["correct"] + row["annulled"]
        editions.append(
            {
                "edition": row["edition"],
                "total": row["n_questions"],
                "annulled": row["annulled"],
                "active": row["active"],
                "correct": row["correct"],
                "incorrect": row["wrong"],
                "invalid": row["invalid"],
                "officialScore": official,
                "officialTotal": row["n_questions"],
                "officialAccuracy": official / row["n_questions"],
                "technicalScore": row["correct"],
                "technicalTotal": row["active"],
                "technicalAccuracy": row["correct"] / row["active"] if row["active"] else 0,
                "passed": official >= math.ceil(row["n_questions"] * PASS_FRACTION),
                "strictComplianceRate": row["strict"] / row["calls"] if row["calls"] else 0,
            }
        )
    total_q = sum(e["total"] for e in editions)
    active = sum(e["active"] for e in editions)
    official = sum(e["officialScore"] for e in editions)
    technical = sum(e["technicalScore"] for e in editions)
    invalid = sum(e["invalid"] for e in editions)
    calls = int(eds["calls"].sum())
    passed = sum(e["passed"] for e in editions)
    aggregate = {
        "totalQuestions": total_q,
        "totalAnnulled": sum(e["annulled"] for e in editions),
        "officialScore": official,
        "officialAccuracy": official / total_q if total_q else 0,
        "technicalScore": technical,
        "technicalTotal": active,
        "technicalAccuracy": technical / active if active else 0,
        "invalidCount": invalid,
        "invalidRate": invalid / active if active else 0,
        "strictComplianceRate": int(eds["strict"].sum()) / calls if calls else 0,
        "passedCount": passed,
        "passedAll": bool(editions) and passed == len(editions),
    }
    calls_df = scores.filter(~pl.col("skipped"))
    prompt = int(scores["prompt_tokens"].sum())
    completion = int(scores["completion_tokens"].sum())
    latency = int(calls_df["latency_ms"].sum())
    cost: dict[str, Any] = {"totalPromptTokens": prompt, "totalCompletionTokens": completion}
    if scores["reasoning_tokens"].is_not_null().any():
        cost["totalReasoningTokens"] = int(scores["reasoning_tokens"].sum())
    cost |= {
        "totalTokens": prompt + completion,
        "totalLatencyMs": latency,
        "avgLatencyMs": math.floor(latency / calls + 0.5) if calls else 0,
    }
    if scores["cost_usd"].is_not_null().any():
        cost["actualCostUsd"] = float(scores["cost_usd"].sum())
    summary: dict[str, Any] = {
        "model": meta["model"].item() if meta.height else None,
        "editions": editions,
        "aggregate": aggregate,
        "cost": cost,
    }
    if meta.height and meta["prompt_price_per_token"].item() is not None:
        pp, cp = meta["prompt_price_per_token"].item(), meta["completion_price_per_token"].item()
        summary["pricing"] = {
            "fetchedAt": meta["pricing_fetched_at"].item(),
            "promptPricePerToken": pp,
            "completionPricePerToken": cp,
            "estimatedCostUsd": prompt * pp + completion * cp,
        }
    return summary
