"""Assets describing the models: the registry as a table, and dated price snapshots."""

import datetime as dt

import polars as pl
from dagster import AssetExecutionContext, DataVersion, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.inference.pricing import PricingFetchError, fetch_model_prices
from oabench_pipeline.inference.resources import ModelsRegistryResource, api_key_for
from oabench_pipeline.metadata import table_schema
from oabench_pipeline.resources import WarehouseResource


def model_row(model: ModelConfig, in_registry: bool = True) -> dict:
    return {
        "model_key": model.key,
        "model": model.id,
        "label": model.label,
        "provider": model.provider,
        "protocol": model.protocol,
        "reasoning_effort": model.reasoning_effort,
        "web_search": model.web_search,
        "base_url": model.base_url,
        "kind": model.kind,
        "concurrency": model.concurrency,
        "max_cost_usd": model.max_cost_usd,
        "knowledge_cutoff": model.knowledge_cutoff,
        "in_registry": in_registry,
    }


@asset(group_name="inference", metadata={"dagster/column_schema": table_schema("models").value})
def models(models_registry: ModelsRegistryResource, warehouse: WarehouseResource) -> MaterializeResult:
    """Every model configuration: the registry's, plus keys known only from history (`in_registry` false).

    A configuration removed from the registry keeps its rows and results but leaves the ranking.
    """
    store = warehouse.warehouse()
    registry = models_registry.models()
    rows = [model_row(m) for m in registry.values()]
    previous = store.read("models")
    if not previous.is_empty():
        gone = previous.filter(~pl.col("model_key").is_in(list(registry)))
        rows += gone.with_columns(in_registry=pl.lit(False)).to_dicts()
    known = {r["model_key"] for r in rows}
    if store.has_table("inferences"):
        history = store.query("select distinct model_key, model, protocol, reasoning_effort from inferences")
        for r in history.filter(~pl.col("model_key").is_in(list(known))).iter_rows(named=True):
            rows.append(
                {
                    **r,
                    "label": r["model"],
                    "provider": r["model"].split("/", 1)[0],
                    "kind": "imported",
                    "in_registry": False,
                }
            )
    frame = pl.DataFrame(rows, infer_schema_length=None)
    store.write_partition("models", frame)
    return MaterializeResult(
        metadata={
            "rows": frame.height,
            "in_registry": int(frame["in_registry"].sum()),
            "keys": MetadataValue.md("\n".join(f"- `{k}`" for k in frame["model_key"])),
        },
        data_version=DataVersion(frame_version(frame)),
    )


@asset(group_name="inference", metadata={"dagster/column_schema": table_schema("model_pricing").value})
def model_pricing(
    context: AssetExecutionContext, models_registry: ModelsRegistryResource, warehouse: WarehouseResource
) -> MaterializeResult:
    """A dated snapshot of each endpoint's price list (`GET {base_url}/models`).

    Snapshots accumulate (one file per fetch), so an estimated cost can always be recomputed from the
    snapshot it used. An endpoint that cannot be reached is skipped with a warning; older snapshots stay.
    """
    store = warehouse.warehouse()
    endpoints: dict[str, ModelConfig] = {}
    for model in models_registry.models().values():
        if model.kind == "api" and model.base_url and credentials_problem(model) is None:
            endpoints.setdefault(model.base_url, model)
    rows, skipped = [], []
    for base_url, model in endpoints.items():
        try:
            rows += fetch_model_prices(base_url, api_key_for(model), api_key_header=model.api_key_header)
        except PricingFetchError as error:
            skipped.append(str(error))
            context.log.warning(f"price list not fetched: {error}")
    if rows:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%S")
        store.write_partition("model_pricing", pl.DataFrame(rows), stamp)
    return MaterializeResult(
        metadata={
            "models_priced": len(rows),
            "endpoints": len(endpoints),
            "skipped": MetadataValue.md("\n".join(f"- {s}" for s in skipped) or "none"),
            "snapshots": len(store.partitions("model_pricing")),
        }
    )
