"""Providers: the complete keys of each maker, grouped case-insensitively ("OpenAI" and "openai" are one)."""

from __future__ import annotations

import polars as pl


def display_names(providers: pl.Series) -> pl.DataFrame:
    """(provider_id, provider): one display name per lower-cased provider, the spelling most keys use
    (ties: the alphabetically first)."""
    return (
        pl.DataFrame({"provider": providers})
        .drop_nulls()
        .group_by("provider")
        .len()
        .with_columns(provider_id=pl.col("provider").str.to_lowercase())
        .sort(["provider_id", "len", "provider"], descending=[False, True, False])
        .unique("provider_id", keep="first", maintain_order=True)
        .select("provider_id", "provider")
    )


def provider_summary(keys: pl.DataFrame) -> pl.DataFrame:
    """Per provider over its complete keys: best key, mean / min / max official accuracy, and mean cost
    (reported, else estimated) over the keys whose cost is known, with their count.

    Incomplete keys are left out: their accuracy counts unanswered questions as wrong.
    `total_cost_usd` / `total_estimated_cost_usd` are NULL unless every key of the provider has that
    cost (a sum silently dropping unknown costs would understate it).
    """
    complete = keys.filter(pl.col("complete")).with_columns(provider_id=pl.col("provider").str.to_lowercase())
    names = display_names(complete["provider"])
    cost = pl.col("effective_cost_usd")
    return (
        complete.sort(["official_accuracy", "model_key"], descending=[True, False], nulls_last=True)
        .group_by("provider_id", maintain_order=True)
        .agg(
            n_keys=pl.len(),
            best_key=pl.col("model_key").first(),
            best_accuracy=pl.col("official_accuracy").first(),
            mean_accuracy=pl.col("official_accuracy").mean(),
            min_accuracy=pl.col("official_accuracy").min(),
            max_accuracy=pl.col("official_accuracy").max(),
            mean_cost_usd=cost.mean(),
            n_keys_with_cost=cost.is_not_null().sum(),
            total_cost_usd=pl.when(pl.col("cost_usd").is_not_null().all()).then(pl.col("cost_usd").sum()),
            total_estimated_cost_usd=pl.when(pl.col("estimated_cost_usd").is_not_null().all()).then(
                pl.col("estimated_cost_usd").sum()
            ),
        )
        .with_columns(accuracy_range=pl.col("max_accuracy") - pl.col("min_accuracy"))
        .join(names, on="provider_id", how="left")
        .select(
            "provider",
            "n_keys",
            "best_key",
            "best_accuracy",
            "mean_accuracy",
            "min_accuracy",
            "max_accuracy",
            "accuracy_range",
            "mean_cost_usd",
            "n_keys_with_cost",
            "total_cost_usd",
            "total_estimated_cost_usd",
        )
        .sort(["max_accuracy", "provider"], descending=[True, False], nulls_last=True)
    )
