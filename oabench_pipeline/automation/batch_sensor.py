"""`batch_results_sensor`: a cell's batch that finished at the provider is collected without anyone
running `oabench run --batch` again.

Each tick reads the cells' batch journals (`inference/batches/cells.py`), asks the provider for the status
of each open batch, and launches the cell's run (answers, then scores) when one has finished, or when an
intent's batch id was lost (the run finds it again by its token). That run only collects
(`batch_collect_only`): the sensor spends nothing, so it runs by default. A cell with lines left to send
after collection (failed, expired) stays `batch pending` until `oabench run --batch` sends them. The 2nd
phase's answer and judgment cells (`oabench run --phase 2 --batch`, `oabench judge --batch`) are collected
the same way, by runs of their own jobs.
"""

from __future__ import annotations

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SensorResult, sensor

from oabench_pipeline.automation.jobs import cell_job
from oabench_pipeline.inference.batches.cells import (
    JOURNAL_KINDS,
    JournalKind,
    all_journals,
    open_batches,
    open_transport,
    ready_to_collect,
)
from oabench_pipeline.inference.batches.transport import BatchApiError
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.inference.resources import (
    MissingApiKeyError,
    ModelClientResource,
    ModelsRegistryResource,
)
from oabench_pipeline.phase2.jobs import PHASE2_JOBS, phase2_answers_job, phase2_judgments_job
from oabench_pipeline.shared.partitions import (
    cell_partition_key,
    judgment_partition_key,
    phase2_cell_partition_key,
)
from oabench_pipeline.shared.resources import WarehouseResource

BATCH_SENSOR_TICK_S = 60


def _batch_tick(
    context: SensorEvaluationContext,
    models_registry: ModelsRegistryResource,
    model_client: ModelClientResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    root = warehouse.warehouse().root
    models = models_registry.models()
    runs: list[RunRequest] = []
    waiting, problems = 0, []
    cells = [(kind, key, other) for kind in JOURNAL_KINDS for key, other, _ in all_journals(root, kind)]
    for kind, model_key, edition in cells:
        batches = open_batches(root, model_key, edition, kind)
        model = models.get(model_key)
        if not batches or model is None or model.batch_api is None:
            continue
        try:
            transport = open_transport(model.batch_api, model_client.endpoint(model, models.values()))
        except MissingApiKeyError as error:
            problems.append(f"{model_key} × {edition}: {error}")
            continue
        try:
            ready = ready_to_collect(batches, transport.status)
        except BatchApiError as error:
            problems.append(f"{model_key} × {edition}: {error}")
            continue
        finally:
            transport.close()
        if not ready:
            waiting += 1
            continue
        ids = "+".join(sorted(b.batch_id or b.token for b in batches))
        job, asset, partition = _cell_run(kind, model_key, edition)
        prefix = "batch-collect" if kind == "phase1" else f"batch-collect-{kind}"
        runs.append(
            RunRequest(
                job_name=job,
                partition_key=partition,
                run_key=f"{prefix}-{model_key}-{edition}-{ids}",  # once per finished batch
                run_config={"ops": {asset: {"config": {"batch": True, "batch_collect_only": True}}}},
                tags=endpoint_tags(model),
            )
        )
    if problems:
        context.log.warning("batch_results_sensor: " + "; ".join(problems))
    if not runs:
        return SensorResult(skip_reason=f"{waiting} cell(s) with batches still running; none finished")
    return SensorResult(run_requests=runs)


def _cell_run(kind: JournalKind, sender: str, other: str) -> tuple[str, str, str]:
    """The job, asset and partition key of the run that collects a cell of `kind`."""
    if kind == "phase2":
        return phase2_answers_job.name, "phase2_answers", str(phase2_cell_partition_key(sender, other))
    if kind == "judgments":
        return phase2_judgments_job.name, "phase2_judgments", str(judgment_partition_key(sender, other))
    return cell_job.name, "inferences", str(cell_partition_key(sender, int(other)))


@sensor(
    name="batch_results_sensor",
    minimum_interval_seconds=BATCH_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.RUNNING,
    jobs=[cell_job, *PHASE2_JOBS],
    description="Polls the open batches of `oabench run --batch` (from the cells' journals) and launches the "
    "run that collects a finished one. Its runs only collect what was already paid for: it spends nothing.",
)
def batch_results_sensor(
    context: SensorEvaluationContext,
    models_registry: ModelsRegistryResource,
    model_client: ModelClientResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    return _batch_tick(context, models_registry, model_client, warehouse)
