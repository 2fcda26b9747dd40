"""Stored snapshots of the model catalogue: one `model_catalogue` partition file per fetch, and what
changed between two of them (no Dagster: the asset, the sensor and the CLI use these)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from oabench_pipeline.core.tables import conform
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.warehouse import Warehouse

if TYPE_CHECKING:
    from oabench_pipeline.catalogue.client import Listing

STAMP_FORMAT = "%Y-%m-%dT%H-%M-%S-%fZ"  # a snapshot's file name: its fetch time, to the microsecond


@dataclass(frozen=True)
class Snapshot:
    """One stored listing: its partition name, when it was fetched and its rows."""

    stamp: str
    fetched_at: dt.datetime
    frame: pl.DataFrame

    @property
    def catalogue_url(self) -> str | None:
        """The listing this snapshot was fetched from (not the URL set now, which may have changed since)."""
        urls = self.frame["catalogue_url"].drop_nulls() if "catalogue_url" in self.frame.columns else None
        return urls[0] if urls is not None and len(urls) else None

    @property
    def data_version(self) -> str:
        """What the listing says, not when it was read: an unchanged catalogue keeps its version."""
        return frame_version(self.frame, ("fetched_at",))


def snapshot_of(listing: Listing) -> Snapshot:
    frame = conform(
        "model_catalogue",
        pl.DataFrame(listing.rows, infer_schema_length=None).with_columns(
            fetched_at=pl.lit(listing.fetched_at), catalogue_url=pl.lit(listing.url)
        ),
    )
    return Snapshot(listing.fetched_at.strftime(STAMP_FORMAT), listing.fetched_at, frame)


def take_snapshot(store: Warehouse, url: str, timeout_s: float) -> tuple[Snapshot, int]:
    """Fetch the catalogue and store it as a new snapshot: (snapshot, items left out of the listing).

    Raises `CatalogueFetchError` (one line) before anything is written.
    """
    from oabench_pipeline.catalogue.client import fetch_listing  # httpx: only when fetching

    listing = fetch_listing(url, timeout_s)
    snapshot = snapshot_of(listing)
    store.write_partition("model_catalogue", snapshot.frame, snapshot.stamp)
    return snapshot, listing.left_out


def stored_snapshots(store: Warehouse, newest: int = 2) -> list[Snapshot]:
    """The `newest` stored snapshots, newest first."""
    stamps = sorted(store.partitions("model_catalogue"), reverse=True)[:newest]
    snapshots = []
    for stamp in stamps:
        frame = store.read("model_catalogue", stamp)
        snapshots.append(Snapshot(stamp, frame["fetched_at"][0], frame))
    return snapshots


def snapshot_changes(previous: pl.DataFrame | None, current: pl.DataFrame) -> pl.DataFrame:
    """What changed from one listing to the next: `change` ('new', 'gone', 'price', 'expiration') per model."""
    columns = ["model", "name", "prompt_usd_per_mtok", "completion_usd_per_mtok", "expiration_date"]
    now = current.select(columns)
    if previous is None or previous.is_empty():
        return now.with_columns(change=pl.lit("new"), before=pl.lit(None, pl.String))
    joined = now.with_columns(_listed=pl.lit(True)).join(
        previous.select(columns).with_columns(_listed=pl.lit(True)),
        on="model",
        how="full",
        suffix="_before",
        coalesce=True,
    )
    prices = ["prompt_usd_per_mtok", "completion_usd_per_mtok"]
    price_changed = pl.any_horizontal([pl.col(c).ne_missing(pl.col(f"{c}_before")) for c in prices])
    return (
        joined.with_columns(
            change=pl.when(pl.col("_listed").is_null())
            .then(pl.lit("gone"))
            .when(pl.col("_listed_before").is_null())
            .then(pl.lit("new"))
            .when(price_changed)
            .then(pl.lit("price"))
            .when(pl.col("expiration_date").ne_missing(pl.col("expiration_date_before")))
            .then(pl.lit("expiration")),
            before=pl.when(pl.col("_listed_before")).then(
                pl.format(
                    "${}/${} per Mtok, expires {}",
                    *[pl.col(f"{c}_before").cast(pl.String).fill_null("—") for c in prices],
                    pl.col("expiration_date_before").cast(pl.String).fill_null("never"),
                )
            ),
        )
        .filter(pl.col("change").is_not_null())
        .select(*columns, "change", "before")
        .sort("change", "model")
    )
