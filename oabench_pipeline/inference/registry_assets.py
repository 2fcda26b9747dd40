"""The models registry as a table (`models`); its dated price snapshots are `catalogue/pricing.py`."""

import os

import polars as pl
from dagster import DataVersion, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.text_safety import clean_label
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.inference.redaction import redact
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource


def model_row(model: ModelConfig, in_registry: bool = True) -> dict:
    """The model's `models` row; its `base_url` with any secret of the environment it uses redacted."""
    return {
        "model_key": model.key,
        "model": model.id,
        "label": model.label,
        "provider": model.provider,
        "protocol": model.protocol,
        "reasoning_effort": model.reasoning_effort,
        "web_search": model.web_search,
        "base_url": redact(model.base_url, environment_secrets(model)) if model.base_url else None,
        "kind": model.kind,
        "concurrency": model.concurrency,
        "max_cost_usd": model.max_cost_usd,
        "knowledge_cutoff": model.knowledge_cutoff,
        "in_registry": in_registry,
    }


def environment_secrets(model: ModelConfig) -> list[str]:
    """The API key and secret header values the model reads from the environment, those that are set: a
    key pasted into `base_url` too (`?key=...`) is then kept out of the warehouse as out of every log."""
    names = [model.api_key_env, *(v.env for v in model.extra_headers.values() if not isinstance(v, str))]
    return [value for name in names if name and (value := os.environ.get(name))]


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
        # A cell's unreadable file is its own run's to rebuild (or `oabench import`'s): it must not stop
        # this step, and with it every other cell's run. Its key is back once the file is.
        history = store.read_around_damage(
            lambda con: con.sql(
                "select distinct model_key, model, protocol, reasoning_effort from inferences"
            ).pl(),
            "inferences",
        )
        for r in history.filter(~pl.col("model_key").is_in(list(known))).iter_rows(named=True):
            rows.append(
                {
                    **r,
                    "label": clean_label(r["model"]) or r["model"],
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
