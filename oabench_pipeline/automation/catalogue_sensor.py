"""`model_catalogue_sensor`: new models in the catalogue, taken under the watch policy, become cells.

STOPPED by default: turning it on (the UI's Automation page, or `dagster sensor start
model_catalogue_sensor`) is the owner's opt-in to automatic spending, and even then nothing is registered
or sent without a watch policy file. Each tick (every 6 hours) is `catalogue.watch.run_tick`: a snapshot of
the catalogue (reported as a materialization of `model_catalogue`), a decision on every model that needs
one (logged one line each, and written to `catalogue_decisions`), the taken models appended to the
generated registry file; then this sensor adds their `model_keys` partitions and requests their cells on
the policy's suite (the ingested editions of it), tagged with their endpoint like every cell run, plus a
refresh of the `models` table. When the listing changed (or models were taken) it also requests
`model_pricing`, which takes the prices from this very snapshot (no second fetch), so the leaderboard's
estimated costs follow a price change and price the new models. A problem (no policy, a bad policy or registry, the catalogue down, slow or
not JSON) writes nothing and is the tick's skip reason, in one line; the sensor never raises.
"""

from __future__ import annotations

from pathlib import Path

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from oabench_pipeline.automation.jobs import (
    cell_requests,
    inference_cell_job,
    models_table_job,
    pricing_job,
)
from oabench_pipeline.automation.sensor_support import missing_partitions
from oabench_pipeline.catalogue.assets import tick_materializations
from oabench_pipeline.catalogue.resources import ModelCatalogueResource
from oabench_pipeline.catalogue.watch import TickOutcome, WatchSetup, run_tick
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.shared.partitions import (
    EDITIONS_PARTITIONS,
    MODEL_KEYS_PARTITIONS,
    editions_partitions,
    model_keys_partitions,
)
from oabench_pipeline.shared.resources import WarehouseResource

CATALOGUE_SENSOR_NAME = "model_catalogue_sensor"
# Several models appear in the catalogue every week: four looks a day find them within hours, and keep
# the snapshots (one file per fetch, ~50 KB) to a few a day.
CATALOGUE_SENSOR_TICK_S = 6 * 3600


def watch_setup(
    catalogue: ModelCatalogueResource,
    models_registry: ModelsRegistryResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> WatchSetup:
    """Where a tick reads and writes, from the resources (the same ones the assets use)."""
    if not models_registry.catalogue_file or not models_registry.watch_file:
        raise ValueError("models_registry.catalogue_file and watch_file must be set for the catalogue watch")
    return WatchSetup(
        store=warehouse.warehouse(),
        models_file=Path(models_registry.path),
        catalogue_file=Path(models_registry.catalogue_file),
        watch_file=Path(models_registry.watch_file),
        catalogue_url=catalogue.url,
        timeout_s=catalogue.timeout_s,
        editions_file=Path(exam_sources.editions_file),
        discovered_editions_file=Path(exam_sources.discovered_file) if exam_sources.discovered_file else None,
        packaged_models_file=Path(models_registry.packaged_path) if models_registry.packaged_path else None,
    )


def _catalogue_tick(context: SensorEvaluationContext, setup: WatchSetup) -> SensorResult:
    outcome = run_tick(setup)
    if outcome.problem:
        context.log.warning(f"{CATALOGUE_SENSOR_NAME}: {outcome.problem}")
        return SensorResult(skip_reason=outcome.problem, cursor=context.cursor)
    for decision in outcome.decisions:
        context.log.info(f"{CATALOGUE_SENSOR_NAME}: {decision.line()}")
    if outcome.budget is not None:
        context.log.info(f"{CATALOGUE_SENSOR_NAME}: {outcome.budget.line()}")
    context.log.info(f"{CATALOGUE_SENSOR_NAME}: {outcome.summary()}")
    partitions = _partition_requests(context, outcome)
    runs = _run_requests(outcome)
    events = tick_materializations(outcome)
    if not runs:
        return SensorResult(
            skip_reason=outcome.summary(), asset_events=events, dynamic_partitions_requests=partitions
        )
    return SensorResult(run_requests=runs, asset_events=events, dynamic_partitions_requests=partitions)


def _partition_requests(context: SensorEvaluationContext, outcome: TickOutcome) -> list:
    keys = missing_partitions(context.instance, MODEL_KEYS_PARTITIONS, [m.key for m in outcome.registered])
    editions = missing_partitions(context.instance, EDITIONS_PARTITIONS, outcome.editions) if keys else []
    return [
        *([model_keys_partitions.build_add_request(keys)] if keys else []),
        *([editions_partitions.build_add_request(editions)] if editions else []),
    ]


def _run_requests(outcome: TickOutcome) -> list[RunRequest]:
    """The taken models' cells on the suite's ingested editions and the models table that lists them; and,
    when the listing changed or models were taken, `model_pricing` from this snapshot (as `oabench catalogue
    sync` does), so the leaderboard's estimated costs follow the new prices and price the new models."""
    if outcome.snapshot is None:
        return []
    stamp = outcome.snapshot.stamp
    runs = []
    if outcome.prices_changed:
        runs.append(RunRequest(job_name=pricing_job.name, run_key=f"pricing-catalogue-{stamp}"))
    if outcome.registered:
        runs.append(RunRequest(job_name=models_table_job.name, run_key=f"models-catalogue-{stamp}"))
        runs += cell_requests(outcome.editions, outcome.registered, run_key_prefix=f"catalogue-{stamp}")
    return runs


@sensor(
    name=CATALOGUE_SENSOR_NAME,
    minimum_interval_seconds=CATALOGUE_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.STOPPED,
    jobs=[models_table_job, inference_cell_job, pricing_job],
    description="Snapshots the model catalogue and benchmarks new models the watch policy takes, within "
    "its budgets (stopped by default: starting it is the opt-in to automatic spending).",
)
def model_catalogue_sensor(
    context: SensorEvaluationContext,
    catalogue: ModelCatalogueResource,
    models_registry: ModelsRegistryResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    return _catalogue_tick(context, watch_setup(catalogue, models_registry, exam_sources, warehouse))
