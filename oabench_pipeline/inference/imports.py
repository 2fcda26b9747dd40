"""Import published OABench runs into `inferences` (source 'imported'), with no API call.

Each run folder is one run (its folder name is the run id). Its rows replace that run's rows in every
`inferences` partition (model key × edition) it touches; the rows of other runs stay, so a rerun never
overwrites the study's run (which run counts is decided by the leaderboard, `core/runs.py`). Each
folder's summary (or its absence: an aborted run) lands in `published_run_summaries`. A touched cell that
answers every active question of its edition (or whose edition is not ingested yet) is reported as a
materialization of that partition. An incomplete one (a run its authors aborted, or that ended with error
rows) is reported as an
observation instead, saying what it holds: its rows are kept, shown and never ranked, but the cell has no
complete run, so the UI shows the partition as missing, as `oabench status` does, and not as failed:
nothing of this pipeline failed, and a newcomer importing the published runs is not greeted by a red
asset for an expected gap. Importing the same folder twice rewrites the same rows: nothing changes.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetMaterialization,
    AssetObservation,
    Config,
    Failure,
    MaterializeResult,
    asset,
)

from oabench_pipeline.core.versions import INFERENCE_BOOKKEEPING_COLUMNS, frame_version
from oabench_pipeline.inference.cell import ANSWERED
from oabench_pipeline.inference.cell_lock import CellLock, cell_lock_path
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

# The published runs' readers (ten pydantic models, ~20 ms to build) are imported inside the asset that uses
# them: every run's process loads this module with the Dagster definitions, and few import runs.
if TYPE_CHECKING:
    from oabench_pipeline.core.published_runs import ImportedRecord


class ImportConfig(Config):
    """Folder holding OABench run folders (`<run_id>/config.json` + `inferences.jsonl`)."""

    path: str


def unanswered_questions(store: Warehouse, edition: str, rows: pl.DataFrame) -> list[str]:
    """Active questions of the edition with no answer in `rows` (none when the edition is not ingested)."""
    return unanswered_in(store.read("questions", edition), rows)


def unanswered_in(questions: pl.DataFrame, rows: pl.DataFrame) -> list[str]:
    """Active questions of `questions` (one edition's) with no answer in `rows` (none when it is empty)."""
    if questions.is_empty():
        return []
    active = set(questions.filter(pl.col("status") == "active")["qid"])
    answered = rows.filter(ANSWERED)["qid"]
    return sorted(active - set(answered))


def imported_row(record: "ImportedRecord", dagster_run_id: str) -> dict:
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
        "dagster_run_id": dagster_run_id,
        **record.provenance.columns(),
    }


def merge_into_partition(store: Warehouse, partition_key: str, imported: pl.DataFrame) -> pl.DataFrame:
    """The partition's rows after the import: the imported runs' rows replace their earlier import,
    every other run's rows stay as they are."""
    existing = store.read("inferences", partition_key)
    if not existing.is_empty():
        existing = existing.filter(~pl.col("run_id").is_in(imported["run_id"].unique().implode()))
    combined = (
        pl.concat([existing, imported], how="diagonal_relaxed") if not existing.is_empty() else imported
    )
    return combined.sort("run_id", "number")


@asset(group_name="inference", metadata={"dagster/column_schema": table_schema("inferences").value})
def published_runs(
    context: AssetExecutionContext, config: ImportConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """Published OABench runs, imported into the `inferences` table as `source = 'imported'`."""
    from oabench_pipeline.core.published_runs import (
        PublishedRunError,
        published_run_dirs,
        read_published_run,
        read_run_summary,
        validate_published_runs,
    )

    store = warehouse.warehouse()
    try:
        validate_published_runs(Path(config.path), store.partitions("questions"))
        run_dirs = published_run_dirs(Path(config.path))
        summaries = [read_run_summary(d) for d in run_dirs]
        records = [record for d in run_dirs for record in read_published_run(d)]
    except (OSError, PublishedRunError) as error:
        raise Failure(description=f"cannot import {config.path}: {error}") from None
    if not records:
        raise Failure(description=f"no OABench run folders (with config.json) under {config.path}")
    frame = pl.DataFrame([imported_row(r, context.run_id) for r in records], infer_schema_length=None)
    keys = sorted(frame["model_key"].unique())
    editions = sorted(str(e) for e in frame["edition"].unique())
    _register(context, "model_keys", keys)
    _register(context, "editions", editions)
    for summary in summaries:
        store.write_partition("published_run_summaries", pl.DataFrame([summary.model_dump()]), summary.run_id)
    cells = frame.partition_by(["model_key", "edition"], as_dict=True)
    incomplete = []
    for (model_key, edition), rows in sorted(cells.items()):
        partition = cell_partition_key(str(model_key), int(edition))
        # Under the cell's lock: a live run of the cell must not rebuild it from rows read before this write.
        with CellLock(cell_lock_path(store.root, str(model_key), str(edition)), run_id=context.run_id):
            inputs = store.input_versions({"questions": str(edition)})
            merged = merge_into_partition(store, str(partition), rows)
            version = frame_version(merged, INFERENCE_BOOKKEEPING_COLUMNS)
            store.write_partition("inferences", merged, str(partition), data_version=version, inputs=inputs)
        if unanswered := unanswered_questions(store, str(edition), merged):
            incomplete.append(f"{partition} ({len(unanswered)} unanswered)")
            context.log_event(
                AssetObservation(
                    asset_key="inferences",
                    partition=str(partition),
                    metadata={
                        "rows": merged.height,
                        "source": "imported",
                        "from": config.path,
                        "unanswered": len(unanswered),
                        "state": "an incomplete run (aborted, or ended with errors): kept and shown, never "
                        "ranked; the cell has no complete run",
                    },
                )
            )
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
            "runs": len(summaries),
            "aborted_runs": sum(not s.has_summary for s in summaries),
            "model_keys": ", ".join(keys),
            "path": config.path,
        }
    )


def _register(context: AssetExecutionContext, partitions_name: str, keys: list[str]) -> None:
    missing = [k for k in keys if not context.instance.has_dynamic_partition(partitions_name, k)]
    if missing:
        context.instance.add_dynamic_partitions(partitions_name, missing)
