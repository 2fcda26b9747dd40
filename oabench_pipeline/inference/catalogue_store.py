"""What the stored catalogue snapshots say about a model: its newest prices, and whether it is retired.

Read from `model_catalogue` (every snapshot, the newest row per model id): a model the latest listing no
longer shows keeps the last prices and dates it was listed with. Retirement is by model id: a model whose
newest `expiration_date` is today or past (UTC) is retired; it stays on the leaderboard, marked, and no
path sends it another request (`oabench run`, the sensors, the `inferences` step itself).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from oabench_pipeline.warehouse import Warehouse

NEWEST_PER_MODEL = "QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1"


@dataclass(frozen=True)
class Price:
    """USD per token, from the newest catalogue snapshot listing the model."""

    prompt: float | None
    completion: float | None


def catalogue_prices(store: Warehouse) -> dict[str, Price]:
    """Model id → its prices in the newest `model_catalogue` snapshot that lists it."""
    if not store.has_table("model_catalogue"):
        return {}
    return prices_of(store.query(f"SELECT * FROM model_catalogue {NEWEST_PER_MODEL}"))


def prices_of(listing: pl.DataFrame) -> dict[str, Price]:
    """Model id → its prices in `model_catalogue` rows (one row per model), per token."""
    rows = listing.select("model", "prompt_usd_per_mtok", "completion_usd_per_mtok").iter_rows()
    return {
        model: Price(
            None if prompt is None else prompt / 1e6, None if completion is None else completion / 1e6
        )
        for model, prompt, completion in rows
    }


def retired_models(store: Warehouse, today: dt.date | None = None) -> dict[str, dt.date]:
    """Model id → its expiration date, for the models whose newest listed `expiration_date` has come."""
    if not store.has_table("model_catalogue"):
        return {}
    today = today or dt.datetime.now(dt.UTC).date()
    newest = store.query(f"SELECT model, expiration_date FROM model_catalogue {NEWEST_PER_MODEL}")
    return {model: day for model, day in newest.iter_rows() if day is not None and day <= today}


def retirement_problem(store: Warehouse, model_id: str) -> str | None:
    """Why a model must not be requested (retired in the catalogue), or None."""
    day = retired_models(store).get(model_id)
    return None if day is None else f"retired: its expiration_date in the model catalogue is {day}"
