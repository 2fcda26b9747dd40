"""Key × edition and per-key aggregates of the canonical runs' scores, with cost and where it comes from.

Cost of a key: `cost_usd` is what the endpoint reported (summed over the calls that carry it);
`estimated_cost_usd` is tokens × a price snapshot, per edition: the published summary's snapshot for an
imported run, else the newest `model_pricing` snapshot of the model. `effective_cost_usd` is the reported
cost when every call carries one, else the estimate; `cost_source` says which ('reported', 'estimated').
"""

from __future__ import annotations

import polars as pl

from oabench_pipeline.core.analysis.frames import PASS_FRACTION, round_half_up, safe_div
from oabench_pipeline.core.scoring import QUESTION_STATUS_SQL

EDITION_TOTALS_SQL = f"""
SELECT q.edition,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} <> 'unresolved') AS n_questions,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'annulled') AS annulled,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'active') AS active
FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid
GROUP BY q.edition
"""


QUESTIONS_SQL = f"""
SELECT q.qid, q.edition, q.number, q.area, k.correct, {QUESTION_STATUS_SQL} AS status
FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid
ORDER BY q.edition, q.number, q.qid
"""


# Model id per key from the inferences, then registry metadata and the newest price snapshot.
KEY_META_SQL = """
WITH keys AS (
    SELECT model_key, any_value(model) AS model FROM inferences GROUP BY model_key
), price AS (
    SELECT model, prompt_price_per_token, completion_price_per_token, fetched_at
    FROM model_pricing
    QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1
)
SELECT k.model_key,
       coalesce(m.model, k.model) AS model,
       coalesce(m.label, k.model_key) AS label,
       coalesce(m.provider, split_part(coalesce(m.model, k.model), '/', 1)) AS provider,
       m.knowledge_cutoff,
       p.prompt_price_per_token,
       p.completion_price_per_token,
       p.fetched_at AS pricing_fetched_at
FROM keys AS k
LEFT JOIN models AS m ON m.model_key = k.model_key
LEFT JOIN price AS p ON p.model = coalesce(m.model, k.model)
"""


# One scan for both key x edition and key x area counts (GROUPING SETS); latency quantiles are a
# separate, cheaper query (inside the grouping sets they cost 5x more), per suite: quantiles do not add
# up across editions. A suite's key x area counts sum AREA_SQL's rows of its editions (integers: exact);
# a third grouping set here would reorder the float sums of the first two, moving today's costs in
# their last digits.
AGG_SQL = """
SELECT model_key, edition, area, GROUPING(area) = 1 AS by_edition,
       count(*) FILTER (WHERE status = 'active' AND NOT skipped) AS covered_active,
       count(*) FILTER (WHERE status = 'active') AS active_rows,
       count(*) FILTER (WHERE is_correct_technical) AS technical_score,
       count(*) FILTER (WHERE status = 'active' AND NOT is_valid) AS invalid_count,
       count(*) FILTER (WHERE NOT skipped) AS calls,
       count(*) FILTER (WHERE strict_compliant) AS strict_count,
       sum(latency_ms) FILTER (WHERE NOT skipped)::BIGINT AS latency_sum,
       sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens,
       sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
       sum(cost_usd) AS cost_usd,
       count(cost_usd) FILTER (WHERE NOT skipped) AS cost_calls
FROM {scores}
GROUP BY GROUPING SETS ((model_key, edition), (model_key, area))
"""


AREA_SQL = """
SELECT model_key, edition, area,
       count(*) FILTER (WHERE is_correct_technical) AS technical_score,
       count(*) FILTER (WHERE status = 'active') AS active_rows
FROM {scores}
GROUP BY model_key, edition, area
"""


# Per suite and key; `{suite_editions}` maps each suite to its editions (suite, edition).
LATENCY_SQL = """
SELECT se.suite, s.model_key,
       quantile_cont(s.latency_ms, 0.5) FILTER (WHERE NOT s.skipped) AS p50_latency_ms,
       quantile_cont(s.latency_ms, 0.95) FILTER (WHERE NOT s.skipped) AS p95_latency_ms
FROM {scores} AS s
JOIN {suite_editions} AS se ON se.edition = s.edition
GROUP BY se.suite, s.model_key
"""


def _rates() -> dict[str, pl.Expr]:
    """The ratios a key × edition row and a key row derive from their summed counts alike."""
    return {
        "official_accuracy": safe_div(pl.col("official_score"), pl.col("official_total")),
        "technical_accuracy": safe_div(pl.col("technical_score"), pl.col("technical_total")),
        "strict_compliance": safe_div(pl.col("strict_count"), pl.col("calls")),
        "avg_latency_ms": round_half_up(safe_div(pl.col("latency_sum"), pl.col("calls"))),
    }


def by_edition_rows(
    agg: pl.DataFrame, ed_totals: pl.DataFrame, required: set[int], canonical: pl.DataFrame
) -> pl.DataFrame:
    """Key x edition rows with official/technical scores, pass and completeness.

    `canonical` holds the canonical run of each cell (model_key, edition, complete) and, for imported
    runs, their summary's price snapshot (summary_prompt_price, summary_completion_price,
    summary_fetched_at). A cell is complete when its run is and no active question lacks a row.
    """
    return (
        agg.filter(pl.col("by_edition"))
        .drop("area")
        .join(ed_totals, on="edition", how="left")
        .join(
            canonical.select(
                "model_key",
                "edition",
                pl.col("complete").alias("run_complete"),
                "summary_prompt_price",
                "summary_completion_price",
                "summary_fetched_at",
            ),
            on=["model_key", "edition"],
            how="left",
        )
        .with_columns(pl.col("n_questions", "annulled", "active").fill_null(0))
        .with_columns(
            official_score=pl.col("technical_score") + pl.col("annulled"),
            official_total=pl.col("n_questions"),
            technical_total=pl.col("active"),
            missing_count=pl.col("active") - pl.col("covered_active"),
            pass_threshold=(pl.col("n_questions") * PASS_FRACTION).ceil().cast(pl.Int64),
            required=pl.col("edition").is_in(sorted(required)),
        )
        .with_columns(
            **_rates(),
            passed=(pl.col("official_score") >= pl.col("pass_threshold")) & (pl.col("n_questions") > 0),
            complete=(pl.col("missing_count") == 0) & pl.col("run_complete").fill_null(False),
        )
    )


def priced_editions(by_edition: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """Each key × edition row's estimated cost (tokens × its price snapshot), effective cost and its source.

    The same rule as a key's: reported when every call of the cell carries a cost, else the estimate.
    """
    snapshot = meta.select(
        "model_key", "prompt_price_per_token", "completion_price_per_token", "pricing_fetched_at"
    )
    fully_reported = (pl.col("cost_calls") == pl.col("calls")) & pl.col("cost_usd").is_not_null()
    return (
        by_edition.join(snapshot, on="model_key", how="left")
        .with_columns(
            estimated_cost_usd=pl.col("prompt_tokens")
            * pl.coalesce("summary_prompt_price", "prompt_price_per_token")
            + pl.col("completion_tokens")
            * pl.coalesce("summary_completion_price", "completion_price_per_token"),
            _price_fetched_at=pl.coalesce(
                pl.col("summary_fetched_at").cast(pl.Datetime("us", "UTC")),
                pl.col("pricing_fetched_at").cast(pl.Datetime("us", "UTC")),
            ),
        )
        .with_columns(
            effective_cost_usd=pl.when(fully_reported)
            .then(pl.col("cost_usd"))
            .otherwise(pl.col("estimated_cost_usd")),
            cost_source=pl.when(fully_reported)
            .then(pl.lit("reported"))
            .when(pl.col("estimated_cost_usd").is_not_null())
            .then(pl.lit("estimated")),
        )
        .drop("prompt_price_per_token", "completion_price_per_token", "pricing_fetched_at")
    )


def per_key_rows(
    priced: pl.DataFrame, latency: pl.DataFrame, meta: pl.DataFrame, n_required: int
) -> pl.DataFrame:
    """One row per key: sums over its editions (`priced_editions` rows), latency quantiles, metadata, cost."""
    sums = priced.group_by("model_key").agg(
        pl.col(
            "official_score",
            "official_total",
            "technical_score",
            "technical_total",
            "invalid_count",
            "missing_count",
            "calls",
            "strict_count",
            "latency_sum",
            "cost_calls",
        ).sum(),
        # An estimate only when every edition has a price; the newest snapshot used is reported.
        pl.when(pl.col("estimated_cost_usd").is_not_null().all())
        .then(pl.col("estimated_cost_usd").sum())
        .alias("estimated_cost_usd"),
        pl.col("_price_fetched_at").max().alias("_price_fetched_at"),
        pl.col("prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd").sum(),
        # sum() of an all-null column is 0; keep NULL so "no data" differs from "free".
        pl.col("cost_usd").is_not_null().any().alias("_has_cost"),
        pl.col("reasoning_tokens").is_not_null().any().alias("_has_reasoning"),
        pl.col("passed").filter(pl.col("required")).sum().alias("editions_passed"),
        (pl.col("complete") & pl.col("required")).sum().alias("_complete_required"),
    )
    fully_reported = (pl.col("cost_calls") == pl.col("calls")) & pl.col("_has_cost")
    return (
        sums.join(latency, on="model_key", how="left")
        .join(meta.drop("pricing_fetched_at"), on="model_key", how="left")
        .with_columns(
            cost_usd=pl.when(pl.col("_has_cost")).then(pl.col("cost_usd")),
            reasoning_tokens=pl.when(pl.col("_has_reasoning")).then(pl.col("reasoning_tokens")),
            pricing_fetched_at=pl.when(pl.col("estimated_cost_usd").is_not_null()).then(
                pl.col("_price_fetched_at")
            ),
            editions_total=pl.lit(n_required, pl.Int64),
            complete=pl.col("_complete_required") == n_required,
        )
        .with_columns(
            effective_cost_usd=pl.when(fully_reported)
            .then(pl.col("cost_usd"))
            .otherwise(pl.col("estimated_cost_usd")),
            cost_source=pl.when(fully_reported)
            .then(pl.lit("reported"))
            .when(pl.col("estimated_cost_usd").is_not_null())
            .then(pl.lit("estimated")),
        )
        .with_columns(
            **_rates(),
            passed_all=(pl.col("editions_passed") == n_required) & (n_required > 0),
            tokens_per_question=safe_div(
                pl.col("prompt_tokens") + pl.col("completion_tokens"), pl.col("calls")
            ),
            cost_per_correct_usd=safe_div(pl.col("effective_cost_usd"), pl.col("technical_score")),
        )
        .sort("model_key")
    )
