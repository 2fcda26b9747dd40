"""Import published OABench runs into `inferences` (source 'imported'), with no API call.

Each (model key × edition) cell found in the run folders is merged into that `inferences` partition,
the newest record per question winning. A cell that answers every active question of its edition (or
whose edition is not ingested yet) is reported as a materialization of that partition, so the UI and the
downstream automation see it like any other run. An incomplete cell (an aborted run) is not: its rows
are kept for `oabench status`, and `oabench import` then verifies it offline (`inferences` with
`offline: true`), which fails its blocking check, so the partition shows as failed, as status says.
Importing the same folder twice rewrites the same rows: nothing changes.
"""

from pathlib import Path

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    Config,
    Failure,
    MaterializeResult,
    asset,
)

from oabench_pipeline.core.published_runs import (
    ImportedRecord,
    PublishedRunError,
    merge_published_records,
    read_published_runs,
)
from oabench_pipeline.inference.cell import ANSWERED
from oabench_pipeline.metadata import table_schema
from oabench_pipeline.partitions import cell_partition_key
from oabench_pipeline.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse


class ImportConfig(Config):
    """Folder holding OABench run folders (`<run_id>/config.json` + `inferences.jsonl`)."""

    path: str


def unanswered_questions(store: Warehouse, edition: str, rows: pl.DataFrame) -> list[str]:
    """Active questions of the edition with no answer in `rows` (none when the edition is not ingested)."""
    questions = store.read("questions", edition)
    if questions.is_empty():
        return []
    active = set(questions.filter(pl.col("status") == "active")["qid"])
    answered = rows.filter(ANSWERED)["qid"]
    return sorted(active - set(answered))


def imported_row(record: ImportedRecord) -> dict:
    return {
        "model_key": record.model_key,
        "model": record.model,
        "protocol": record.protocol,
        "reasoning_effort": record.reasoning_effort,
        "web_search": False,
        "qid": record.qid,
        "edition": record.edition,
        "number": record.number,
        "raw_response": None if record.skipped else record.raw_response,
        "reasoning": record.reasoning,
        "answer_strict": record.answer_strict,
        "answer_lenient": record.answer_lenient,
        "parser_version": record.parser_version,
        "latency_ms": record.latency_ms,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "cost_usd": record.cost_usd,
        "error": record.error,
        "skipped": record.skipped,
        "source": "imported",
        "created_at": record.timestamp,
        "run_id": record.run_id,
    }


def merge_into_partition(store: Warehouse, partition_key: str, imported: pl.DataFrame) -> pl.DataFrame:
    """The partition's rows after the import: per question the newest row (by `created_at`) wins."""
    existing = store.read("inferences", partition_key)
    combined = (
        pl.concat([existing, imported], how="diagonal_relaxed") if not existing.is_empty() else imported
    )
    return (
        combined.with_row_index("_order")
        .sort(["created_at", "_order"])
        .unique(subset="qid", keep="last", maintain_order=True)
        .drop("_order")
        .sort("number")
    )


@asset(group_name="inference", metadata={"dagster/column_schema": table_schema("inferences").value})
def published_runs(
    context: AssetExecutionContext, config: ImportConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """Published OABench runs, imported into the `inferences` table as `source = 'imported'`."""
    try:
        records = merge_published_records(read_published_runs(Path(config.path)))
    except (OSError, PublishedRunError) as error:
        raise Failure(description=f"cannot import {config.path}: {error}") from None
    if not records:
        raise Failure(description=f"no OABench run folders (with config.json) under {config.path}")
    store = warehouse.warehouse()
    frame = pl.DataFrame([imported_row(r) for r in records], infer_schema_length=None)
    keys = sorted(frame["model_key"].unique())
    editions = sorted(str(e) for e in frame["edition"].unique())
    _register(context, "model_keys", keys)
    _register(context, "editions", editions)
    cells = frame.partition_by(["model_key", "edition"], as_dict=True)
    incomplete = []
    for (model_key, edition), rows in sorted(cells.items()):
        partition = cell_partition_key(str(model_key), int(edition))
        merged = merge_into_partition(store, str(partition), rows)
        store.write_partition("inferences", merged, str(partition))
        if unanswered := unanswered_questions(store, str(edition), merged):
            incomplete.append(f"{partition} ({len(unanswered)} unanswered)")
            continue
        context.log_event(
            AssetMaterialization(
                asset_key="inferences",
                partition=str(partition),
                metadata={"rows": merged.height, "source": "imported", "from": config.path},
            )
        )
    return MaterializeResult(
        metadata={
            "records": frame.height,
            "cells": len(cells),
            "incomplete_cells": ", ".join(incomplete) or "none",
            "model_keys": ", ".join(keys),
            "path": config.path,
        }
    )


def _register(context: AssetExecutionContext, partitions_name: str, keys: list[str]) -> None:
    missing = [k for k in keys if not context.instance.has_dynamic_partition(partitions_name, k)]
    if missing:
        context.instance.add_dynamic_partitions(partitions_name, missing)
