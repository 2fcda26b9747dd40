"""The model catalogue's assets: `model_catalogue` (a snapshot per fetch) and `catalogue_decisions`.

`model_catalogue` is materialized by the `daily_model_catalogue` schedule, on demand (UI, `dagster asset
materialize`), and by every tick of `model_catalogue_sensor` and `oabench catalogue sync`, which report
their snapshot as a materialization of this same asset (`snapshot_materialization`). `catalogue_decisions`
is written only by those ticks, so it is an external asset (from its spec) whose materializations they report: the UI shows
both tables, their columns and every snapshot and decision, with the same truth as the CLI.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from dagster import (
    AssetMaterialization,
    AssetsDefinition,
    AssetSpec,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from oabench_pipeline.catalogue.listing import CatalogueFetchError
from oabench_pipeline.catalogue.resources import ModelCatalogueResource
from oabench_pipeline.catalogue.snapshots import (
    Snapshot,
    snapshot_changes,
    stored_snapshots,
    take_snapshot,
)
from oabench_pipeline.catalogue.watch import TickOutcome
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource

CATALOGUE_DECISIONS_DESCRIPTION = (
    "Every decision of the model catalogue watch (`model_catalogue_sensor`, `oabench catalogue sync`): per "
    "new model of a snapshot, registered (its registry keys, the suite's editions requested) or skipped, with "
    "the reason's kind (policy, price, budget, modality, retired, registry, suite), one line of detail, the "
    "estimated cost on the suite and what the month's budget had left. Written by those ticks only."
)

# An asset no run materializes (only ticks report it), as a definition like every other asset.
catalogue_decisions = AssetsDefinition(
    specs=[
        AssetSpec(
            "catalogue_decisions",
            group_name="inference",
            deps=["model_catalogue"],
            description=CATALOGUE_DECISIONS_DESCRIPTION,
            metadata={"dagster/column_schema": table_schema("catalogue_decisions").value},
        )
    ]
)

# The tag a materialization carries its data version in: the name Dagster reads when it compares versions
# (`dagster/data_version`, as the UI shows it), stated here since Dagster exports no constant for it.
DATA_VERSION_TAG = "dagster/data_version"


@asset(group_name="inference", metadata={"dagster/column_schema": table_schema("model_catalogue").value})
def model_catalogue(catalogue: ModelCatalogueResource, warehouse: WarehouseResource) -> MaterializeResult:
    """One snapshot of the model catalogue (`GET OABENCH_CATALOGUE_URL`, OpenRouter's by default) per fetch.

    Snapshots accumulate, one partition file each, so SQL answers what appeared, changed price or was
    retired, and when. A catalogue that is down, slow or not a listing fails the step with one line and
    writes nothing: the last snapshot stays. The data version is the listing's content (not its time), so
    an unchanged catalogue triggers nothing downstream.
    """
    store = warehouse.warehouse()
    previous = stored_snapshots(store, 1)
    try:
        snapshot, left_out = take_snapshot(store, catalogue.url, catalogue.timeout_s)
    except CatalogueFetchError as error:
        raise Failure(description=f"{error}; the last snapshot is unchanged") from None
    return MaterializeResult(
        metadata=snapshot_metadata(snapshot, previous[0] if previous else None, left_out),
        data_version=DataVersion(snapshot.data_version),
    )


def snapshot_metadata(snapshot: Snapshot, previous: Snapshot | None, left_out: int) -> dict[str, Any]:
    """What a snapshot holds and what changed since the one before it, for the asset page."""
    changes = snapshot_changes(previous.frame if previous else None, snapshot.frame)
    counts = dict(changes.group_by("change").len().iter_rows())
    listed = changes.filter(pl.col("change") != "gone").head(20)
    lines = [f"- `{model}`: {change}" for model, change in listed.select("model", "change").iter_rows()]
    return {
        "snapshot": snapshot.stamp,
        "models": snapshot.frame.height,
        "left_out": left_out,
        "new": counts.get("new", 0),
        "gone": counts.get("gone", 0),
        "price_changes": counts.get("price", 0),
        "expiration_changes": counts.get("expiration", 0),
        "changes": MetadataValue.md("\n".join(lines) or "none"),
    }


def tick_materializations(outcome: TickOutcome) -> list[AssetMaterialization]:
    """A tick's writes as materializations of `model_catalogue` and `catalogue_decisions`."""
    if outcome.snapshot is None:
        return []
    snapshot = outcome.snapshot
    events = [
        AssetMaterialization(
            "model_catalogue",
            description="snapshot taken by a catalogue watch tick",
            metadata=snapshot_metadata(snapshot, outcome.previous, outcome.left_out),
            tags={DATA_VERSION_TAG: snapshot.data_version},
        )
    ]
    if outcome.decisions:
        registered = [d for d in outcome.decisions if d.outcome == "registered"]
        events.append(
            AssetMaterialization(
                "catalogue_decisions",
                metadata={
                    "decisions": len(outcome.decisions),
                    "registered": MetadataValue.md(
                        "\n".join(f"- `{d.model}`: {d.detail}" for d in registered) or "none"
                    ),
                    "skipped": len(outcome.decisions) - len(registered),
                    "month": outcome.budget.line() if outcome.budget else "",
                },
            )
        )
    return events
