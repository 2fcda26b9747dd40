"""Small polars and DuckDB helpers the analyses share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import polars as pl

PASS_FRACTION = 0.5  # OAB: 40 of 80
SIGNIFICANCE = 0.05


def round_half_up(values: pl.Expr) -> pl.Expr:
    """JavaScript Math.round (what OABench used for avgLatencyMs): floor(x + 0.5)."""
    return (values + 0.5).floor().cast(pl.Int64)


def safe_div(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> Iterator[None]:
    """Register helper frames on `con` for the duration of a block, leaving no trace afterwards."""
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        yield
    finally:
        for name in frames:
            con.unregister(name)
