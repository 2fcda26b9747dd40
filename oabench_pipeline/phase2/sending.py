"""What the 2nd phase's answers and judgments share: the model to send with, its lock, budget and client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from dagster import AssetExecutionContext, Failure

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.assets import (
    CellLabels,
    _ceiling_gate,
    _check_budget_before,
    _paid,
    holding_lock,
    send_requests,
)
from oabench_pipeline.inference.catalogue_store import retirement_problem
from oabench_pipeline.inference.progress import PROGRESS_FILE_TAG, relaying
from oabench_pipeline.inference.resources import (
    ModelClientResource,
    ModelsRegistryResource,
    UnknownModelError,
)
from oabench_pipeline.inference.response_log import latest_by_hash, read_log, repair
from oabench_pipeline.inference.types import ChatRequest, ChatResult
from oabench_pipeline.warehouse import Warehouse


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
) -> dict[str, ChatResult]:
    """Send `pending` as the 1st phase sends (`inference/assets.send_requests`) under the lower of the
    model's and the run's `max_cost_usd` (checked on the estimate first); the log as it then stands."""
    if not pending:
        return logged
    limits = [limit for limit in (model.max_cost_usd, max_cost_usd) if limit is not None]
    ceiling = min(limits) if limits else None
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


def spent(logged: dict[str, ChatResult]) -> float:
    return sum(_paid(result) for result in logged.values())
