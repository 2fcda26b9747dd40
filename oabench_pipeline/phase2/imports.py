"""`oabench import` of an OAB-Bench `data/oab_bench` folder: its answers into `phase2_answers`, its judgments
into `phase2_judgments`, with no API call.

Every file is read and checked before anything is written: a damaged line, an unknown item, an unsafe model
key or a judgment of an answer the folder lacks refuses the whole folder. The folder is one answer run per
model, `oab-bench:<commit>` (the commit its path names, else the folder's name); its rows replace that run's
earlier import in each partition and leave every other run's rows (a live run's) as they are. Each partition
is read, merged and written under the cell lock that `oabench run --phase 2` and `oabench judge` hold while
they send and write it, so an import and a live run of one partition never drop each other's rows.
"""

from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, AssetMaterialization, Config, Failure, MaterializeResult, asset

from oabench_pipeline.core.phase2.items import Phase2DataError, Phase2Item, items_from_rows
from oabench_pipeline.core.phase2.oab_bench import (
    ANSWERS_DIR,
    JUDGMENT_SUFFIX,
    JUDGMENTS_DIR,
    ImportedAnswer,
    ImportedJudgment,
    parse_answer_file,
    parse_judgment_file,
    run_label,
)
from oabench_pipeline.inference.assets import holding_lock
from oabench_pipeline.phase2.plans import answers_lock_path, judgments_lock_path
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import (
    MODEL_KEYS_PARTITIONS,
    PHASE2_EDITIONS_PARTITIONS,
    judgment_partition_key,
    phase2_cell_partition_key,
)
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

IMPORT_PREFIX = "oab-bench:"


class Phase2ImportConfig(Config):
    """An OAB-Bench `data/oab_bench` folder (`model_answer/*.jsonl`, `model_judgment/*_single.jsonl`)."""

    path: str


def read_oab_bench_folder(
    folder: Path, items: dict[str, Phase2Item]
) -> tuple[str, list[ImportedAnswer], list[ImportedJudgment]]:
    """(run id, answers, judgments) of the folder, every file checked; raises `Phase2DataError` or `OSError`."""
    run_id = IMPORT_PREFIX + run_label(folder.resolve().parts, folder.name)
    answer_files = sorted((folder / ANSWERS_DIR).glob("*.jsonl"))
    if not answer_files:
        raise Phase2DataError(f"no {ANSWERS_DIR}/*.jsonl")
    judgment_files = sorted((folder / JUDGMENTS_DIR).glob(f"*{JUDGMENT_SUFFIX}"))

    def source(path: Path) -> str:
        return f"{run_id} {path.relative_to(folder).as_posix()}"

    answers = [
        a
        for path in answer_files
        for a in parse_answer_file(path.read_text(encoding="utf-8"), source(path), items)
    ]
    by_model: dict[str, str] = {}
    for answer in answers:
        if by_model.setdefault(answer.model_key, answer.source) != answer.source:
            raise Phase2DataError(
                f"{answer.source}: answers of {answer.model_key} also in {by_model[answer.model_key]}"
            )
    judgments = [
        j
        for path in judgment_files
        for j in parse_judgment_file(path.read_text(encoding="utf-8"), source(path), items)
    ]
    answered = {(a.model_key, a.item.item_id, a.turn) for a in answers}
    for judgment in judgments:
        if (judgment.model_key, judgment.item.item_id, judgment.turn) not in answered:
            raise Phase2DataError(
                f"{judgment.source}: judges {judgment.model_key}'s {judgment.item.item_id} sub-item "
                f"{judgment.turn}, which {ANSWERS_DIR}/ does not answer"
            )
    return run_id, answers, judgments


def answer_row(answer: ImportedAnswer, run_id: str, dagster_run_id: str) -> dict:
    return {
        "model_key": answer.model_key,
        "edition": answer.item.edition,
        "item_id": answer.item.item_id,
        "area": answer.item.area,
        "turn": answer.turn,
        "run_id": run_id,
        "answer": answer.answer,
        "source": answer.source,
        "dagster_run_id": dagster_run_id,
    }


def judgment_row(judgment: ImportedJudgment, run_id: str, dagster_run_id: str) -> dict:
    return {
        "judge_key": judgment.judge_key,
        "model_key": judgment.model_key,
        "edition": judgment.item.edition,
        "item_id": judgment.item.item_id,
        "area": judgment.item.area,
        "turn": judgment.turn,
        "score": judgment.score,
        "max_points": judgment.max_points,
        "valid": judgment.valid,
        "invalid_reason": judgment.invalid_reason,
        "judgment": judgment.judgment,
        "prompt_name": judgment.prompt_name,
        "structured": False,
        "answer_run_id": run_id,
        "source": judgment.source,
        "dagster_run_id": dagster_run_id,
        "recorded_score": judgment.recorded_score,
        "score_source": judgment.score_source,
    }


def _merge(
    store: Warehouse, table: str, partition: str, rows: pl.DataFrame, run_column: str, run_id: str
) -> None:
    """Write the partition with this import's rows in place of its earlier import's; other runs' rows stay."""
    existing = store.read(table, partition)
    if not existing.is_empty():
        earlier = (pl.col(run_column) == run_id) & pl.col("source").str.starts_with(IMPORT_PREFIX)
        existing = existing.filter(~earlier)
    combined = pl.concat([existing, rows], how="diagonal_relaxed") if not existing.is_empty() else rows
    store.write_partition(table, combined.sort("item_id", "turn", run_column), partition)


@asset(group_name="phase2_answers", metadata={"dagster/column_schema": table_schema("phase2_answers").value})
def phase2_import(
    context: AssetExecutionContext, config: Phase2ImportConfig, warehouse: WarehouseResource
) -> MaterializeResult:
    """OAB-Bench's published answers and judgments of an `oab_bench` folder, imported into `phase2_answers`
    (model key × edition) and `phase2_judgments` (judge × model key), `source` naming each file."""
    store = warehouse.warehouse()
    items = items_from_rows(store.read("phase2_items").to_dicts()) if store.has_table("phase2_items") else {}
    if not items:
        raise Failure(description="no phase-2 items in the warehouse: run `oabench ingest --phase 2` first")
    folder = Path(config.path)
    try:
        run_id, answers, judgments = read_oab_bench_folder(folder, items)
    except (OSError, Phase2DataError) as error:
        raise Failure(description=f"cannot import {folder}: {error}; nothing was written") from None
    answer_frame = pl.DataFrame([answer_row(a, run_id, context.run_id) for a in answers])
    judgment_frame = (
        pl.DataFrame(
            [judgment_row(j, run_id, context.run_id) for j in judgments],
            schema_overrides={
                "score": pl.Float64,
                "invalid_reason": pl.String,
                "recorded_score": pl.Float64,
                "score_source": pl.String,
            },
        )
        if judgments
        else pl.DataFrame()
    )
    keys = sorted({a.model_key for a in answers} | {j.judge_key for j in judgments})
    _register(context, MODEL_KEYS_PARTITIONS, keys)
    _register(context, PHASE2_EDITIONS_PARTITIONS, sorted({str(a.item.edition) for a in answers}))
    for (model_key, edition), rows in sorted(
        answer_frame.partition_by(["model_key", "edition"], as_dict=True).items()
    ):
        partition = str(phase2_cell_partition_key(str(model_key), int(edition)))
        lock = answers_lock_path(store.root, str(model_key), str(edition))
        with holding_lock(context, lock, f"{model_key} × edition {edition} (2nd phase)"):
            _merge(store, "phase2_answers", partition, rows, "run_id", run_id)
        context.log_event(
            AssetMaterialization(
                "phase2_answers", partition=partition, metadata={"rows": rows.height, "from": str(folder)}
            )
        )
    if not judgment_frame.is_empty():
        for (judge_key, model_key), rows in sorted(
            judgment_frame.partition_by(["judge_key", "model_key"], as_dict=True).items()
        ):
            partition = str(judgment_partition_key(str(judge_key), str(model_key)))
            lock = judgments_lock_path(store.root, str(judge_key), str(model_key))
            with holding_lock(context, lock, f"{judge_key} judging {model_key}"):
                _merge(store, "phase2_judgments", partition, rows, "answer_run_id", run_id)
            context.log_event(
                AssetMaterialization(
                    "phase2_judgments",
                    partition=partition,
                    metadata={"rows": rows.height, "from": str(folder)},
                )
            )
    return MaterializeResult(
        metadata={
            "run_id": run_id,
            "answers": answer_frame.height,
            "models": ", ".join(sorted({a.model_key for a in answers})),
            "judgments": len(judgments),
            "invalid_judgments": sum(not j.valid for j in judgments),
            "scores_from_the_files_record": sum(j.score_source == "recorded" for j in judgments),
            "scores_disagreeing_with_the_files_record": sum(j.disagrees for j in judgments),
            "path": str(folder),
        }
    )


def _register(context: AssetExecutionContext, partitions_name: str, keys: list[str]) -> None:
    missing = [k for k in keys if not context.instance.has_dynamic_partition(partitions_name, k)]
    if missing:
        context.instance.add_dynamic_partitions(partitions_name, missing)
