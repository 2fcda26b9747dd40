"""Is a slower model a more accurate one? Spearman's rho across complete keys."""

from __future__ import annotations

import numpy as np
import polars as pl

from oabench_pipeline.core import stats


def latency_accuracy_correlation(leaderboard: pl.DataFrame) -> pl.DataFrame:
    ranked = leaderboard.filter(pl.col("complete"))
    rho, p = stats.spearman(
        ranked["p50_latency_ms"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        ranked["official_accuracy"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
    )
    return pl.DataFrame(
        {
            "latency_measure": ["p50_latency_ms"],
            "accuracy_measure": ["official_accuracy"],
            "spearman_rho": [rho],
            "p_value": [p],
            "n": [ranked.height],
        },
        nan_to_null=True,
    )
