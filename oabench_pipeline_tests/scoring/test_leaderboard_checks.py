"""The leaderboard asset's own checks, on small frames shaped like the real tables."""

from __future__ import annotations

import datetime as dt

import polars as pl

from oabench_pipeline.scoring.analysis import pricing_age_check

UTC = dt.UTC


def board(fetched: dt.datetime | None) -> pl.DataFrame:
    return pl.DataFrame(
        {"model_key": ["m"], "pricing_fetched_at": [fetched]},
        schema={"model_key": pl.String, "pricing_fetched_at": pl.Datetime("us", "Etc/UTC")},
    )


def answered(first: dt.datetime) -> pl.DataFrame:
    return pl.DataFrame(
        {"model_key": ["m"], "first_answer": [first]},
        schema={"model_key": pl.String, "first_answer": pl.Datetime("us", "UTC")},
    )


def test_snapshot_taken_around_the_run_passes() -> None:
    run = dt.datetime(2026, 3, 3, 12, tzinfo=UTC)
    assert pricing_age_check(board(run - dt.timedelta(hours=2)), answered(run)).passed
    assert pricing_age_check(board(run + dt.timedelta(days=30)), answered(run)).passed


def test_snapshot_much_older_than_the_run_warns() -> None:
    run = dt.datetime(2026, 3, 3, 12, tzinfo=UTC)
    result = pricing_age_check(board(run - dt.timedelta(days=9)), answered(run))
    assert not result.passed
    assert "m: prices of" in result.metadata["problem"].value


def test_keys_without_prices_or_live_calls_are_not_judged() -> None:
    run = dt.datetime(2026, 3, 3, 12, tzinfo=UTC)
    assert pricing_age_check(board(None), answered(run)).passed
    assert pricing_age_check(board(run - dt.timedelta(days=9)), answered(run).clear()).passed
