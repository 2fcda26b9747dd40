"""`frame_version`: the same rows give the same version whatever their order; any changed value changes it."""

from __future__ import annotations

import datetime as dt

import polars as pl

from oabench_pipeline.core.versions import INFERENCE_BOOKKEEPING_COLUMNS, frame_version


def _rows() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "qid": ["43-1", "43-2"],
            "raw_response": ["A", None],
            "cost_usd": [0.001, 0.0],
            "created_at": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * 2,
            "dagster_run_id": ["r1", "r1"],
        }
    )


def test_same_rows_in_another_order_have_the_same_version() -> None:
    rows = _rows()
    assert frame_version(rows) == frame_version(rows.reverse().select(reversed(rows.columns)))


def test_a_changed_answer_changes_the_version() -> None:
    rows = _rows()
    changed = rows.with_columns(
        pl.when(pl.col("qid") == "43-1").then(pl.lit("B")).otherwise("raw_response").alias("raw_response")
    )
    assert frame_version(changed) != frame_version(rows)
    # NULL and the text "null" are different answers
    assert frame_version(rows.with_columns(pl.lit("null").alias("raw_response"))) != frame_version(
        rows.with_columns(pl.lit(None, pl.String).alias("raw_response"))
    )


def test_bookkeeping_columns_are_left_out_only_when_asked() -> None:
    rows = _rows()
    rebuilt = rows.with_columns(
        pl.lit(dt.datetime(2026, 2, 1, tzinfo=dt.UTC)).alias("created_at"),
        pl.lit("r2").alias("dagster_run_id"),
    )
    assert frame_version(rebuilt) != frame_version(rows)
    assert frame_version(rebuilt, INFERENCE_BOOKKEEPING_COLUMNS) == frame_version(
        rows, INFERENCE_BOOKKEEPING_COLUMNS
    )


def test_a_changed_type_or_column_name_changes_the_version() -> None:
    rows = _rows().select("qid", "cost_usd")
    assert frame_version(rows.with_columns(pl.col("cost_usd").cast(pl.Float32))) != frame_version(rows)
    assert frame_version(rows.rename({"cost_usd": "price"})) != frame_version(rows)
    assert frame_version(rows.head(0)) != frame_version(rows)
