"""What the stored catalogue snapshots say about a model: its prices over time, and whether it is retired.

Read from `model_catalogue` (every snapshot, the newest row per model id): a model the latest listing no
longer shows keeps the last prices and dates it was listed with. A `Price` is the newest, and keeps every
price the model was listed at before, so a reply is priced at the price of the moment it arrived: a later
price change does not rewrite what a month spent. Retirement is by model id: a model whose
newest `expiration_date` is today or past (UTC) is retired; it stays on the leaderboard, marked, and no
path sends it another request (`oabench run`, the sensors, the `inferences` step itself).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import polars as pl

from oabench_pipeline.warehouse import Warehouse

NEWEST_PER_MODEL = "QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1"


# Each model's first listing and every listing whose prices differ from the one before: its price history.
PRICE_CHANGES = """
SELECT model, fetched_at, prompt_usd_per_mtok, completion_usd_per_mtok FROM model_catalogue
WINDOW w AS (PARTITION BY model ORDER BY fetched_at)
QUALIFY row_number() OVER w = 1
    OR prompt_usd_per_mtok IS DISTINCT FROM lag(prompt_usd_per_mtok) OVER w
    OR completion_usd_per_mtok IS DISTINCT FROM lag(completion_usd_per_mtok) OVER w
ORDER BY model, fetched_at
"""


@dataclass(frozen=True)
class Price:
    """USD per token, from the newest catalogue snapshot listing the model; `listed`: every price it was
    listed at, as (since, prompt, completion) oldest first (empty: this one only)."""

    prompt: float | None
    completion: float | None
    listed: tuple[tuple[dt.datetime, float | None, float | None], ...] = ()

    def at(self, moment: dt.datetime | None) -> Price:
        """The price listed when `moment` came: the newest listing fetched at or before it (before the
        first listing: the first one, the price the model was taken at); without a moment, the newest."""
        if moment is None or not self.listed:
            return self
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
        _, prompt, completion = self.listed[0]
        for since, listed_prompt, listed_completion in self.listed:
            if since > moment:
                break
            prompt, completion = listed_prompt, listed_completion
        return Price(prompt, completion)


def catalogue_prices(store: Warehouse) -> dict[str, Price]:
    """Model id → its prices in the newest `model_catalogue` snapshot that lists it, and those before."""
    if not store.has_table("model_catalogue"):
        return {}
    return prices_of(store.query(PRICE_CHANGES))


def prices_of(listings: pl.DataFrame) -> dict[str, Price]:
    """Model id → its prices (per token) in `model_catalogue` rows, the newest last for each model."""
    history: dict[str, list[tuple[dt.datetime, float | None, float | None]]] = {}
    rows = listings.select("model", "fetched_at", "prompt_usd_per_mtok", "completion_usd_per_mtok")
    for model, since, prompt, completion in rows.iter_rows():
        history.setdefault(model, []).append(
            (
                since,
                None if prompt is None else prompt / 1e6,
                None if completion is None else completion / 1e6,
            )
        )
    return {model: Price(listed[-1][1], listed[-1][2], tuple(listed)) for model, listed in history.items()}


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
