"""Cost against accuracy: which keys no cheaper-or-equal key beats."""

from __future__ import annotations

import numpy as np
import polars as pl


def pareto_frontier(leaderboard: pl.DataFrame) -> pl.DataFrame:
    """Cost vs official accuracy. The cost is the key's `effective_cost_usd`: reported when every call
    carries a reported cost, else estimated (`cost_source` says which). Only complete keys with a cost
    take part; a key is on the frontier unless another one costs no more and is strictly more accurate.
    """
    table = leaderboard.select(
        "model_key",
        "label",
        "complete",
        cost_usd=pl.col("effective_cost_usd"),
        cost_source=pl.col("cost_source"),
        accuracy=pl.col("official_accuracy"),
    )
    eligible = (
        table["complete"] & table["cost_usd"].is_not_null() & table["accuracy"].is_not_null()
    ).to_numpy()
    cost = table["cost_usd"].fill_null(np.inf).to_numpy()
    acc = table["accuracy"].fill_null(-1.0).to_numpy()
    # keys x keys is fine for hundreds of keys and says exactly what "dominated" means.
    dominated = ((cost[None, :] <= cost[:, None]) & (acc[None, :] > acc[:, None]) & eligible[None, :]).any(
        axis=1
    )
    on_frontier = pl.when(pl.Series(eligible)).then(pl.Series(~dominated))
    return table.with_columns(on_frontier=on_frontier).sort("cost_usd", "accuracy", nulls_last=True)
