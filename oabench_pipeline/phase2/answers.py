"""The `phase2_answers` asset: one partition per model key × edition, OAB-Bench's protocol (`core/phase2`).

As the 1st phase's cells (`inference/assets.py`): every reply is appended to the cell's response log
(`responses/phase2/<model>/<edition>.jsonl`) the moment it arrives, under the cell's lock; the partition is
rebuilt from the log, so a crash loses nothing paid for and a rerun sends only what has no reply. Rows of
other runs (an imported OAB-Bench folder) stay as they are. The partition is written only when every
sub-item asked has a row; a stop (Ctrl-C, budget, fatal endpoint error) fails the step and the table keeps
its last good rows.
"""

from collections.abc import Iterator

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    asset,
)

from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.core.tables import conform
from oabench_pipeline.inference.assets import CellLabels
from oabench_pipeline.inference.resources import ModelClientResource, ModelsRegistryResource
from oabench_pipeline.phase2.plans import (
    ANSWER_REPLICATE,
    answer_round,
    answer_rows,
    answers_lock_path,
    answers_log_path,
    edition_items,
    items_from_frame,
    recorded_ceiling,
)
from oabench_pipeline.phase2.sending import (
    BatchSending,
    followed,
    read_logged,
    send,
    sending_model,
    spent,
)
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import phase2_cells_partitions
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

ANSWER_CHECKS = {
    "every_sub_item_has_a_row": "Each sub-item of the items asked has a row of the live run (a reply, an "
    "error, or why it was not asked); blocking: nothing is written.",
    "one_row_per_sub_item": "No sub-item appears twice in a run; blocking.",
    "no_truncated_answer": "No reply hit the completion ceiling (finish_reason 'length'); not blocking: "
    "a truncated answer is kept, flagged `truncated`, and judged as it is.",
}
BLOCKING_ANSWER_CHECKS = ["every_sub_item_has_a_row", "one_row_per_sub_item"]


class Phase2AnswerConfig(Config):
    """Per-run settings: `oabench run --phase 2`'s options land here."""

    concurrency: int | None = None
    areas: list[str] | None = None
    """Only these areas of the edition (`direito_civil`, ...); None: all of them."""
    max_completion_tokens: int | None = None
    """The completion ceiling of every request; None: the one the cell's live run was asked with (none at
    first). It is part of each request: a new ceiling asks every sub-item again."""
    max_cost_usd: float | None = None
    batch: bool = False
    """Send through the model's batch API (`oabench run --phase 2 --batch`, docs/batch.md)."""
    batch_collect_only: bool = False
    """Collect finished batches, submit nothing (`batch_results_sensor`'s runs spend nothing)."""


def _keys(context: AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, MultiPartitionKey)
    return key.keys_by_dimension["model"], key.keys_by_dimension["edition"]


@asset(
    group_name="phase2_answers",
    partitions_def=phase2_cells_partitions,
    deps=["phase2_items"],
    metadata={"dagster/column_schema": table_schema("phase2_answers").value},
    check_specs=check_specs("phase2_answers", ANSWER_CHECKS, blocking=BLOCKING_ANSWER_CHECKS),
    pool="model_calls",
)
def phase2_answers(
    context: AssetExecutionContext,
    config: Phase2AnswerConfig,
    models_registry: ModelsRegistryResource,
    model_client: ModelClientResource,
    warehouse: WarehouseResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The model's answers to the edition's 2nd phase: each area-exam's piece and 4 questions (sub-items A
    and B in one conversation), asked as OAB-Bench asks (docs/phase2.md, "Answering")."""
    model_key, edition = _keys(context)
    store = warehouse.warehouse()
    model = sending_model(models_registry, store, model_key)
    frame = edition_items(store.read("phase2_items"), edition)
    if frame.is_empty():
        raise Failure(description=f"edition {edition} has no 2nd-phase items: run `oabench ingest --phase 2`")
    if config.areas:
        unknown = sorted(set(config.areas) - set(frame["area"]))
        if unknown:
            raise Failure(description=f"edition {edition} has no 2nd-phase area(s) {', '.join(unknown)}")
        frame = frame.filter(pl.col("area").is_in(config.areas))
    items = items_from_frame(frame)
    run_id = live_run_id(model.key, ANSWER_REPLICATE)
    log_path = answers_log_path(store.root, model.key, edition)
    cell = f"{model.key} × edition {edition} (2nd phase)"
    with followed(context, answers_lock_path(store.root, model.key, edition), cell):
        existing = store.read("phase2_answers", str(context.partition_key))
        ceiling = config.max_completion_tokens or recorded_ceiling(existing, run_id)
        logged = read_logged(context, log_path)
        labels = CellLabels(progress=f"{model.key} × {edition} (2nd phase)", failure=cell)
        sent: set[str] = set()
        spent_before = spent(logged)
        batch = BatchSending("phase2", edition, config.batch, config.batch_collect_only)
        for _ in range(max(item.turns for item in items)):  # one round per turn: B once A has its reply
            # A request that failed this run is not sent again in its next round: a rerun asks it.
            pending = [
                r for r in answer_round(model, items, logged, ceiling).pending if r.request_hash not in sent
            ]
            if not pending:
                break
            context.log.info(f"{cell}: {len(pending)} sub-item(s) to send")
            logged = send(
                context,
                model,
                labels,
                pending,
                sum(i.turns for i in items),
                logged,
                log_path,
                store,
                model_client,
                models_registry,
                config.concurrency,
                config.max_cost_usd,
                batch,
            )
            sent |= {r.request_hash for r in pending}
        rows = answer_rows(model, items, logged, ceiling, run_id)
        for row in rows:
            row["dagster_run_id"] = context.run_id
        new = conform("phase2_answers", pl.DataFrame(rows, infer_schema_length=None))
        asked = set(new["item_id"])
        # Other runs' rows stay; this run's rows of the areas not asked this time stay too.
        kept = (
            existing.filter((pl.col("run_id") != run_id) | ~pl.col("item_id").is_in(list(asked)))
            if not existing.is_empty()
            else existing
        )
        partition = pl.concat([conform("phase2_answers", kept), new]) if not kept.is_empty() else new
        yield from _finish(context, store, partition, new, len(sent), spent(logged) - spent_before)


def _finish(
    context: AssetExecutionContext,
    store: Warehouse,
    partition: pl.DataFrame,
    new: pl.DataFrame,
    sent: int,
    cost: float,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    unanswered = sorted(
        f"{r['item_id']} turn {r['turn']}: {r['error']}"
        for r in new.filter(pl.col("answer").is_null() & pl.col("error").is_null()).iter_rows(named=True)
    )
    duplicated = sorted(
        f"{run}: {item} turn {turn}"
        for run, item, turn in partition.filter(pl.struct("run_id", "item_id", "turn").is_duplicated())
        .select("run_id", "item_id", "turn")
        .unique()
        .iter_rows()
    )
    truncated = new.filter(pl.col("truncated").fill_null(False))
    errors = new.filter(pl.col("error").is_not_null()).height
    checks = [
        problems_result("every_sub_item_has_a_row", unanswered),
        problems_result("one_row_per_sub_item", [f"{key} twice or more" for key in duplicated]),
        problems_result(
            "no_truncated_answer",
            [f"{r['item_id']} turn {r['turn']}" for r in truncated.iter_rows(named=True)],
            severity=AssetCheckSeverity.WARN,
            summary=f"{truncated.height} answer(s) cut at the completion ceiling",
        ),
    ]
    yield from stop_on_blocking_failures(checks, BLOCKING_ANSWER_CHECKS, f"cell {context.partition_key}")
    store.write_partition("phase2_answers", partition, str(context.partition_key))
    yield MaterializeResult(
        metadata={
            "rows": partition.height,
            "sub_items": new.height,
            "requests_sent": sent,
            "errors": errors,
            "truncated": truncated.height,
            "cost_usd": MetadataValue.float(float(cost)),
        },
        check_results=checks,
    )
