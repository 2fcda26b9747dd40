"""Accuracy on editions held after a model's knowledge cutoff vs on or before it."""

from __future__ import annotations

import polars as pl

from oabench_pipeline.core.analysis.frames import safe_div


def contamination_by_cutoff(
    by_edition: pl.DataFrame, keys_df: pl.DataFrame, edition_dates: pl.DataFrame
) -> pl.DataFrame:
    """Technical accuracy on editions held after vs on/before each key's knowledge cutoff."""
    rows = (
        by_edition.join(keys_df.select("model_key", "knowledge_cutoff"), on="model_key")
        .filter(pl.col("knowledge_cutoff").is_not_null())
        .join(edition_dates, on="edition", how="inner")
        .with_columns(after=pl.col("exam_date") > pl.col("knowledge_cutoff"))
    )
    after, before = pl.col("after"), ~pl.col("after")
    return (
        rows.group_by("model_key", "knowledge_cutoff")
        .agg(
            editions_after=after.sum(),
            correct_after=pl.col("technical_score").filter(after).sum(),
            total_after=pl.col("technical_total").filter(after).sum(),
            editions_before=before.sum(),
            correct_before=pl.col("technical_score").filter(before).sum(),
            total_before=pl.col("technical_total").filter(before).sum(),
        )
        .with_columns(
            accuracy_after=safe_div(pl.col("correct_after"), pl.col("total_after")),
            accuracy_before=safe_div(pl.col("correct_before"), pl.col("total_before")),
        )
        .with_columns(delta=pl.col("accuracy_after") - pl.col("accuracy_before"))
        .sort("model_key")
    )
