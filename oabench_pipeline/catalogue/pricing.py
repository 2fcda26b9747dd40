"""`model_pricing`: a dated snapshot of the price of every registry model, from the newest catalogue
snapshot where the catalogue describes the model, else from its endpoint's own price list."""

import datetime as dt

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from oabench_pipeline.catalogue.resources import ModelCatalogueResource
from oabench_pipeline.catalogue.snapshots import stored_snapshots
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.inference.pricing import PricingFetchError, fetch_model_prices
from oabench_pipeline.inference.resources import ModelsRegistryResource, api_key_for
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse


@asset(
    group_name="inference",
    deps=["model_catalogue"],
    metadata={"dagster/column_schema": table_schema("model_pricing").value},
)
def model_pricing(
    context: AssetExecutionContext,
    models_registry: ModelsRegistryResource,
    catalogue: ModelCatalogueResource,
    warehouse: WarehouseResource,
) -> MaterializeResult:
    """A dated snapshot of the price of every registry model.

    Models the model catalogue describes (an endpoint whose `{base_url}/models` is the catalogue, i.e.
    OpenRouter's by default, or an entry the catalogue sensor registered) take the newest `model_catalogue`
    snapshot's prices, dated with that snapshot: the catalogue is not fetched a second time. Other
    endpoints (a vLLM, Azure) are asked `GET {base_url}/models` with the model's key. Snapshots accumulate
    (one file per materialization), so an estimated cost can always be recomputed from the snapshot it
    used. An endpoint that cannot be reached is skipped with a warning; older snapshots stay.
    """
    store = warehouse.warehouse()
    automatic = models_registry.automatic()
    api = [m for m in models_registry.models().values() if m.kind == "api" and m.base_url]
    described = [m for m in api if m.key in automatic or catalogue.models_url_of(m.base_url or "")]
    rows, skipped = catalogue_price_rows(store, described)
    endpoints: dict[str, ModelConfig] = {}
    for model in api:
        if model not in described and credentials_problem(model) is None:
            endpoints.setdefault(model.base_url or "", model)
    priced_by_catalogue = {m.id for m in described}
    for base_url, model in endpoints.items():
        try:
            listed = fetch_model_prices(base_url, api_key_for(model), api_key_header=model.api_key_header)
        except PricingFetchError as error:
            skipped.append(str(error))
            context.log.warning(f"price list not fetched: {error}")
            continue
        rows += [r for r in listed if r["model"] not in priced_by_catalogue]
    if rows:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%S")
        store.write_partition("model_pricing", pl.DataFrame(rows), stamp)
    return MaterializeResult(
        metadata={
            "models_priced": len(rows),
            "from_catalogue": len(priced_by_catalogue),
            "endpoints": len(endpoints),
            "skipped": MetadataValue.md("\n".join(f"- {s}" for s in skipped) or "none"),
            "snapshots": len(store.partitions("model_pricing")),
        }
    )


def catalogue_price_rows(store: Warehouse, models: list[ModelConfig]) -> tuple[list[dict], list[str]]:
    """`model_pricing` rows for `models` from the newest catalogue snapshot (dated with it), and notes on
    the models it does not price. Rows already taken from that snapshot are not repeated."""
    if not models:
        return [], []
    snapshots = stored_snapshots(store, 1)
    if not snapshots:
        return [], ["no model_catalogue snapshot yet: materialize model_catalogue first"]
    snapshot = snapshots[0]
    listed = {row["model"]: row for row in snapshot.frame.to_dicts()}
    taken = store.query(
        "SELECT DISTINCT model, base_url FROM model_pricing WHERE fetched_at = ?", [snapshot.fetched_at]
    )
    done = set(taken.iter_rows())
    rows, notes = [], []
    for model in models:
        row = listed.get(model.id)
        prompt, completion = (
            (row or {}).get("prompt_usd_per_mtok"),
            (row or {}).get("completion_usd_per_mtok"),
        )
        if prompt is None or completion is None:
            notes.append(f"{model.id}: no price in the catalogue snapshot {snapshot.stamp}")
        elif (model.id, model.base_url) not in done:
            done.add((model.id, model.base_url))
            rows.append(
                {
                    "fetched_at": snapshot.fetched_at,
                    "base_url": model.base_url,
                    "model": model.id,
                    "prompt_price_per_token": prompt / 1e6,
                    "completion_price_per_token": completion / 1e6,
                }
            )
    return rows, notes
