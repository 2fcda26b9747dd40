"""First → last edition change of each complete key, with Fisher's exact test.

The deltas are per model and NOT corrected for multiple comparisons: with many models, some p-values
below 0.05 are expected by chance alone.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from oabench_pipeline.core.stats import fisher_exact_p


def edition_deltas(by_edition: pl.DataFrame, complete_keys: pl.Series) -> pl.DataFrame:
    """Per complete key: official and technical accuracy on its first and last edition, the deltas in
    percentage points, and the two-sided Fisher exact p-value of correct vs wrong (active questions:
    annulled ones are credited to everyone and carry no information) between the two editions.
    """
    ordered = by_edition.filter(pl.col("model_key").is_in(complete_keys.implode())).sort(
        "model_key", "edition"
    )
    table = ordered.group_by("model_key", maintain_order=True).agg(
        first_edition=pl.col("edition").first(),
        last_edition=pl.col("edition").last(),
        first_accuracy=pl.col("official_accuracy").first(),
        last_accuracy=pl.col("official_accuracy").last(),
        _first_technical=pl.col("technical_accuracy").first(),
        _last_technical=pl.col("technical_accuracy").last(),
        _first_correct=pl.col("technical_score").first(),
        _first_total=pl.col("technical_total").first(),
        _last_correct=pl.col("technical_score").last(),
        _last_total=pl.col("technical_total").last(),
    )
    p_values = _fisher_p(table)
    return table.with_columns(
        delta=pl.col("last_accuracy") - pl.col("first_accuracy"),
        official_delta_pp=(pl.col("last_accuracy") - pl.col("first_accuracy")) * 100,
        technical_delta_pp=(pl.col("_last_technical") - pl.col("_first_technical")) * 100,
        fisher_p=pl.Series(p_values, dtype=pl.Float64).fill_nan(None),
    ).select(
        "model_key",
        "first_edition",
        "last_edition",
        "first_accuracy",
        "last_accuracy",
        "delta",
        "official_delta_pp",
        "technical_delta_pp",
        "fisher_p",
    )


def _fisher_p(table: pl.DataFrame) -> np.ndarray:
    """Fisher exact p per row; NaN (→ NULL) when a key sat a single edition."""
    if table.is_empty():
        return np.array([], dtype=np.float64)
    out = np.full(table.height, np.nan)
    rows = table.select(
        "first_edition", "last_edition", "_first_correct", "_first_total", "_last_correct", "_last_total"
    )
    for i, (first, last, fc, ft, lc, lt) in enumerate(rows.iter_rows()):  # one row per key: hundreds at most
        if first != last and ft and lt:
            out[i] = fisher_exact_p(fc, ft - fc, lc, lt - lc)
    return out
