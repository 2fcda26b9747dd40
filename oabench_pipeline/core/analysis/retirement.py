"""Which ranked models the model catalogue has retired: their newest listed `expiration_date` has come.

A retired model stays on the leaderboard with every number it earned, marked `retired`, and is never
requested again (`inference/catalogue_store.py` holds the same rule for the request side). By model id,
on the day the tables are built for: `as_of` when set, else today (UTC).
"""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl

from oabench_pipeline.core.runs import relation_exists

_RETIRED_SQL = """
SELECT model, expiration_date IS NOT NULL AND expiration_date <= ? AS retired
FROM model_catalogue
QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1
"""


def with_retirement(con: duckdb.DuckDBPyConnection, meta: pl.DataFrame, day: dt.date) -> pl.DataFrame:
    """`meta` (one row per key, with its `model`) plus `retired`: false when no snapshot lists the model."""
    if relation_exists(con, "model_catalogue"):
        retired = con.sql(_RETIRED_SQL, params=[day]).pl().cast({"model": pl.String, "retired": pl.Boolean})
    else:
        retired = pl.DataFrame(schema={"model": pl.String, "retired": pl.Boolean})
    return meta.join(retired, on="model", how="left", maintain_order="left").with_columns(
        pl.col("retired").fill_null(False)
    )
