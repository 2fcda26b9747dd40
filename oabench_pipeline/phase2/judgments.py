"""The `phase2_judgments` asset: one partition per judge key × judged model key.

The judge grades each sub-item of the model's answers against the examiners' answer standard with
OAB-Bench's prompts (`core/phase2/protocol.py`), or per criterion as JSON (`structured`). Every judgment
is appended to `responses/judgments/<judge>/<model>.jsonl` the moment it arrives, under the cell's lock; a
rerun sends only sub-items with no judgment in the log. A judgment without a `[[score]]`, or above the
sub-item's points, is invalid (score NULL); `retry_invalid` asks again under a new request hash.
"""

import warnings
from collections.abc import Iterator

import polars as pl
from dagster import (
    AllPartitionMapping,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetDep,
    AssetExecutionContext,
    BetaWarning,
    Config,
    DimensionPartitionMapping,
    Failure,
    IdentityPartitionMapping,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionMapping,
    asset,
)

from oabench_pipeline.core.phase2.protocol import (
    MULTI_TURN_PROMPT,
    SINGLE_TURN_PROMPT,
    JudgeTemplate,
    Phase2Item,
    default_judge_ceiling,
)
from oabench_pipeline.core.phase2.structured import Criterion
from oabench_pipeline.core.tables import conform
from oabench_pipeline.inference.assets import CellLabels
from oabench_pipeline.inference.resources import ModelClientResource, ModelsRegistryResource
from oabench_pipeline.phase2.plans import (
    LIVE_SOURCE,
    JudgeSetup,
    Standard,
    items_from_frame,
    judgment_rows,
    judgments_lock_path,
    judgments_log_path,
    plan_judgments,
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
from oabench_pipeline.shared.partitions import judgment_cells_partitions
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

JUDGE_PROMPTS_TABLE = "phase2_judge_prompts"
JUDGMENT_CHECKS = {
    "one_row_per_sub_item": "No sub-item is judged twice by one prompt family and source; blocking.",
    "judgments_valid": "Every judgment has a score within the sub-item's points; not blocking: an invalid "
    "one is kept with no score (never 0), counted, and asked again by `oabench judge --retry-invalid`.",
}
BLOCKING_JUDGMENT_CHECKS = ["one_row_per_sub_item"]


class Phase2JudgeConfig(Config):
    """Per-run settings: `oabench judge`'s options land here."""

    concurrency: int | None = None
    structured: bool = False
    retry_invalid: bool = False
    max_completion_tokens: int | None = None
    """The judge's completion ceiling; None: OAB-Bench's (20,000 for an o1/o3 judge, else 2,048)."""
    max_cost_usd: float | None = None
    answer_run_id: str | None = None
    """Which of the model's answer runs to judge; None: its live run, else its only (first) other run."""
    batch: bool = False
    """Send through the judge's batch API (`oabench judge --batch`, docs/batch.md)."""
    batch_collect_only: bool = False
    """Collect finished batches, submit nothing (`batch_results_sensor`'s runs spend nothing)."""


def _keys(context: AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, MultiPartitionKey)
    return key.keys_by_dimension["judge"], key.keys_by_dimension["model"]


# Dagster's MultiPartitionMapping is public but marked beta: its BetaWarning, raised when the mapping is built,
# would print in every process that loads the definitions (each launched cell's) for a mapping we chose.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", BetaWarning)
    _SAME_MODEL_EVERY_EDITION = MultiPartitionMapping(
        {"model": DimensionPartitionMapping("model", IdentityPartitionMapping())}
    )


@asset(
    group_name="phase2_judgments",
    partitions_def=judgment_cells_partitions,
    # A judge × model cell reads that model's answers to every edition (model to model, every edition) and
    # every edition's standards: Dagster cannot infer either mapping between these partitions.
    deps=[
        AssetDep("phase2_answers", partition_mapping=_SAME_MODEL_EVERY_EDITION),
        AssetDep("phase2_standards", partition_mapping=AllPartitionMapping()),
    ],
    metadata={"dagster/column_schema": table_schema("phase2_judgments").value},
    check_specs=check_specs("phase2_judgments", JUDGMENT_CHECKS, blocking=BLOCKING_JUDGMENT_CHECKS),
    pool="model_calls",
)
def phase2_judgments(
    context: AssetExecutionContext,
    config: Phase2JudgeConfig,
    models_registry: ModelsRegistryResource,
    model_client: ModelClientResource,
    warehouse: WarehouseResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The judge's grade of every sub-item the model answered, against the examiners' answer standard
    (docs/phase2.md, "Judging")."""
    judge_key, model_key = _keys(context)
    store = warehouse.warehouse()
    judge = sending_model(models_registry, store, judge_key)
    items = {item.item_id: item for item in items_from_frame(store.read("phase2_items"))}
    if not items:
        raise Failure(description="no 2nd-phase items yet: run `oabench ingest --phase 2`")
    answers = model_answers(store.read("phase2_answers"), model_key, config.answer_run_id, items)
    if not answers:
        raise Failure(
            description=f"{model_key} has no complete 2nd-phase answer to judge: `oabench run --phase 2`"
        )
    setup = JudgeSetup(
        judge=judge,
        templates=judge_templates(store),
        ceiling=config.max_completion_tokens or default_judge_ceiling(judge.id),
        structured=config.structured,
    )
    standards = standards_by_item(store.read("phase2_standards"))
    log_path = judgments_log_path(store.root, judge.key, model_key)
    cell = f"{judge.key} judging {model_key}"
    with followed(context, judgments_lock_path(store.root, judge.key, model_key), cell):
        logged = read_logged(context, log_path)
        planned = plan_judgments(setup, items, standards, answers, logged, config.retry_invalid)
        pending = [j.pending for j in planned if j.pending is not None]
        spent_before = spent(logged)
        context.log.info(f"{cell}: {len(planned)} sub-item(s), {len(pending)} to send")
        logged = send(
            context,
            judge,
            CellLabels(progress=cell, failure=cell),
            pending,
            len(planned),
            logged,
            log_path,
            store,
            model_client,
            models_registry,
            config.concurrency,
            config.max_cost_usd,
            BatchSending("judgments", model_key, config.batch, config.batch_collect_only),
        )
        planned = plan_judgments(setup, items, standards, answers, logged)  # the retries now in the log
        rows = judgment_rows(setup, model_key, planned, standards, logged)
        for row in rows:
            row["dagster_run_id"] = context.run_id
        new = conform("phase2_judgments", pl.DataFrame(rows, infer_schema_length=None))
        existing = store.read("phase2_judgments", str(context.partition_key))
        kept = (
            existing.filter(
                (pl.col("source") != LIVE_SOURCE)
                | (pl.col("structured").fill_null(False) != config.structured)
            )
            if not existing.is_empty()
            else existing
        )
        partition = pl.concat([conform("phase2_judgments", kept), new]) if not kept.is_empty() else new
        yield from _finish(context, store, partition, new, len(pending), spent(logged) - spent_before)


def model_answers(
    answers: pl.DataFrame, model_key: str, run_id: str | None, items: dict[str, Phase2Item]
) -> dict[str, tuple[str, list[str]]]:
    """item id → (the answer run judged, the replies of its turns from the first, up to the first missing)."""
    if answers.is_empty():
        return {}
    own = answers.filter(pl.col("model_key") == model_key)
    if run_id is None:
        runs = sorted(set(own["run_id"].drop_nulls()), key=lambda r: (not r.startswith("live:"), r))
        if not runs:
            return {}
        run_id = runs[0]
    chosen: dict[str, dict[int, str]] = {}
    for row in own.filter((pl.col("run_id") == run_id) & pl.col("answer").is_not_null()).iter_rows(
        named=True
    ):
        chosen.setdefault(row["item_id"], {})[row["turn"]] = row["answer"]
    found = {}
    for item_id, by_turn in chosen.items():
        replies = []
        for turn in range(1, (items[item_id].turns if item_id in items else 0) + 1):
            if turn not in by_turn:
                break
            replies.append(by_turn[turn])
        if replies:
            found[item_id] = (run_id, replies)
    return found


def standards_by_item(frame: pl.DataFrame) -> dict[str, list[Standard]]:
    """item id → its sub-items' standards, in turn order, with the criteria parsed from their tables."""
    found: dict[str, list[Standard]] = {}
    for row in frame.sort("item_id", "turn").iter_rows(named=True):
        criteria = tuple(
            Criterion(c["text"], float(c["max_points"]), tuple(float(v) for v in c["allowed"]))
            for c in row.get("criteria") or []
        )
        found.setdefault(row["item_id"], []).append(Standard(row["standard"], criteria))
    return found


def judge_templates(store: Warehouse) -> dict[str, JudgeTemplate]:
    """OAB-Bench's judge prompts as `oabench ingest --phase 2` stored them (its `judge_prompts.jsonl`)."""
    frame = store.read(JUDGE_PROMPTS_TABLE)
    templates = (
        {
            row["name"]: JudgeTemplate(row["name"], row["system_prompt"], row["prompt_template"])
            for row in frame.iter_rows(named=True)
        }
        if not frame.is_empty()
        else {}
    )
    missing = [name for name in (SINGLE_TURN_PROMPT, MULTI_TURN_PROMPT) if name not in templates]
    if missing:
        raise Failure(
            description=f"no judge prompt {', '.join(missing)} in {JUDGE_PROMPTS_TABLE}: run `oabench ingest --phase 2`"
        )
    return templates


def _finish(
    context: AssetExecutionContext,
    store: Warehouse,
    partition: pl.DataFrame,
    new: pl.DataFrame,
    sent: int,
    cost: float,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    duplicated = sorted(
        f"{source}: {item} turn {turn}"
        for source, item, turn in partition.filter(
            pl.struct("source", "structured", "answer_run_id", "item_id", "turn").is_duplicated()
        )
        .select("source", "item_id", "turn")
        .unique()
        .iter_rows()
    )
    invalid = new.filter(~pl.col("valid").fill_null(False))
    checks = [
        problems_result("one_row_per_sub_item", [f"{key} twice or more" for key in duplicated]),
        problems_result(
            "judgments_valid",
            [
                f"{r['item_id']} turn {r['turn']}: {r['invalid_reason']}"
                for r in invalid.iter_rows(named=True)
            ],
            severity=AssetCheckSeverity.WARN,
            summary=f"{invalid.height} of {new.height} judgment(s) invalid (no score; never counted as 0)",
        ),
    ]
    yield from stop_on_blocking_failures(
        checks, BLOCKING_JUDGMENT_CHECKS, f"judgments {context.partition_key}"
    )
    store.write_partition("phase2_judgments", partition, str(context.partition_key))
    yield MaterializeResult(
        metadata={
            "rows": partition.height,
            "judged": new.height,
            "invalid": invalid.height,
            "requests_sent": sent,
            "cost_usd": MetadataValue.float(float(cost)),
        },
        check_results=checks,
    )
