"""What the 2nd phase's answers and judgments share: the model to send with, its lock, budget and client, and
its batch API (`--batch`: the 1st phase's crash-safe protocol, `inference/batch_cell.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from dagster import AssetExecutionContext, Failure

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.assets import (
    BATCH_PENDING_METADATA,
    CellLabels,
    _ceiling_gate,
    _check_budget_before,
    _paid,
    holding_lock,
    send_requests,
)
from oabench_pipeline.inference.batch_cell import BatchPending, answer_by_batch
from oabench_pipeline.inference.batches.cells import JournalKind, open_batches, pending_line
from oabench_pipeline.inference.catalogue_store import retirement_problem
from oabench_pipeline.inference.progress import PROGRESS_FILE_TAG, notify, relaying
from oabench_pipeline.inference.resources import (
    ModelClientResource,
    ModelsRegistryResource,
    UnknownModelError,
)
from oabench_pipeline.inference.response_log import latest_by_hash, read_log, repair
from oabench_pipeline.inference.types import ChatRequest, ChatResult
from oabench_pipeline.warehouse import Warehouse


@dataclass(frozen=True)
class BatchSending:
    """Where a 2nd-phase cell's batches are journalled, and whether it sends through its sender's batch API
    (`--batch`). The journal is found by `kind` ("phase2": answers, "judgments"), the sender's key and
    `other` (the edition, or the judged model's key)."""

    kind: JournalKind
    other: str
    enabled: bool = False
    collect_only: bool = False
    """`batch_results_sensor`'s runs: collect finished batches, submit nothing (they spend nothing)."""


def sending_model(models_registry: ModelsRegistryResource, store: Warehouse, key: str) -> ModelConfig:
    """The registry's model `key`, if it may send: an API model, not retired, written by hand (an entry the
    model catalogue registered runs only the 1st phase, under its watch policy's budgets)."""
    try:
        model = models_registry.model(key)
    except UnknownModelError as error:
        raise Failure(description=str(error.args[0])) from None
    if model.kind != "api":
        raise Failure(
            description=f"{key}: an offline baseline has nothing to answer or judge in the 2nd phase"
        )
    if key in models_registry.automatic():
        raise Failure(
            description=f"{key}: registered from the model catalogue; the 2nd phase sends for hand-written "
            f"entries only (`oabench catalogue add {model.id}` makes it one)"
        )
    if retired := retirement_problem(store, model.id):
        raise Failure(description=f"{key}: {retired}; it is never requested again")
    return model


@contextmanager
def followed(context: AssetExecutionContext, lock_path: Path, cell: str) -> Iterator[None]:
    """The command's progress relay and Ctrl-C, and the cell's lock, for the step's whole life."""
    relay = context.run.tags.get(PROGRESS_FILE_TAG)
    stop = context.run.tags.get(interrupts.STOP_FILE_TAG)
    with (
        relaying(Path(relay)) if relay else nullcontext(),
        interrupts.watching(Path(stop)) if stop else nullcontext(),
        holding_lock(context, lock_path, cell),
    ):
        yield


def read_logged(context: AssetExecutionContext, log_path: Path) -> dict[str, ChatResult]:
    """The log's best result per request hash, after setting damaged lines aside (under the lock only)."""
    for line in repair(log_path):
        context.log.warning(line)
    return latest_by_hash(read_log(log_path))


def send(
    context: AssetExecutionContext,
    model: ModelConfig,
    labels: CellLabels,
    pending: list[ChatRequest],
    total: int,
    logged: dict[str, ChatResult],
    log_path: Path,
    store: Warehouse,
    model_client: ModelClientResource,
    models_registry: ModelsRegistryResource,
    concurrency: int | None,
    max_cost_usd: float | None,
    batch: BatchSending,
) -> dict[str, ChatResult]:
    """Send `pending` as the 1st phase sends (`inference/assets.send_requests`) under the lower of the
    model's and the run's `max_cost_usd` (checked on the estimate first); the log as it then stands. With
    `batch.enabled`, one round of the batch protocol instead (`send_by_batch`); without, a cell whose batch
    is open is refused (chat completions would pay for its sub-items twice)."""
    if not pending:
        return logged
    limits = [limit for limit in (model.max_cost_usd, max_cost_usd) if limit is not None]
    ceiling = min(limits) if limits else None
    if batch.enabled:
        return send_by_batch(
            context,
            model,
            labels,
            pending,
            logged,
            log_path,
            store,
            model_client,
            models_registry,
            ceiling,
            batch,
        )
    if held := open_batches(store.root, model.key, batch.other, batch.kind):
        raise Failure(
            description=f"{labels.failure}: {pending_line(held)}; `--batch` collects it (chat completions now "
            "would pay for its sub-items twice)"
        )
    _check_budget_before(model, pending, store, logged, None, ceiling)
    gate = _ceiling_gate(store, model, logged, ceiling)
    send_requests(
        context,
        model,
        labels,
        pending,
        total,
        logged,
        log_path,
        model_client,
        concurrency,
        ceiling,
        models_registry.models(),
        store.root,
        None,
        gate,
    )
    return latest_by_hash(read_log(log_path))


def send_by_batch(
    context: AssetExecutionContext,
    model: ModelConfig,
    labels: CellLabels,
    pending: list[ChatRequest],
    logged: dict[str, ChatResult],
    log_path: Path,
    store: Warehouse,
    model_client: ModelClientResource,
    models_registry: ModelsRegistryResource,
    ceiling: float | None,
    batch: BatchSending,
) -> dict[str, ChatResult]:
    """One round of the batch protocol for `pending` (collect what finished, submit what no batch holds,
    the worst case held under `ceiling` first); the log as it then stands. While a batch is open the step
    fails as the 1st phase's does, marked pending (`BATCH_PENDING_METADATA`): the partition keeps its rows."""
    try:
        answer_by_batch(
            context,
            model,
            batch.other,
            pending,
            logged,
            log_path,
            model_client,
            models_registry.models(),
            store,
            ceiling,
            submit=not batch.collect_only,
            kind=batch.kind,
            cell=labels.failure,
        )
    except BatchPending as waiting:
        notify(str(waiting))
        raise Failure(description=str(waiting), metadata={BATCH_PENDING_METADATA: True}) from None
    return latest_by_hash(read_log(log_path))


def spent(logged: dict[str, ChatResult]) -> float:
    return sum(_paid(result) for result in logged.values())
