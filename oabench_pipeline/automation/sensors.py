"""Sensors that keep the benchmark current with no one at the keyboard.

`oab_portal_sensor` watches the OAB portal. When an edition newer than every known one has both its
Tipo 1 booklet and its definitive answer key, it pins them on first download, records the edition in the
discovered-editions file, adds the `editions` partition and requests the ingest run (`exam_pdfs`,
`answer_keys`, `questions`) plus a refresh of the `editions` table. Inference cells read `questions`, so
they are requested on a later tick, once that edition's questions are in the warehouse: requesting them in
the same tick would race the ingest and fail. That is why the sensor ticks every 30 minutes while the
portal itself is only asked every `PortalResource.check_interval_hours` (6 h; the time of the last check is
in the cursor).

`models_registry_sensor` watches the models registry file. Its first tick registers every registry
model key and every registry edition as partitions (so a fresh `dagster dev` shows them all). Afterwards
a new configuration gets its `model_keys` partition and `inferences` runs for its cells on every edition
whose questions are ingested; a removed one keeps its history, and the `models` table is re-materialized
(it then marks the key `in_registry = false`).

Only models that can run unattended get cells: baselines, and API models whose key variable is set in
the environment of the sensor's process. Neither sensor ever raises: any problem becomes a skip reason
naming it, so a bad file or a dead portal shows in the UI as a reason, not as a crashed tick.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    AssetSelection,
    DagsterInstance,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    define_asset_job,
    sensor,
)

from oabench_pipeline.automation.discovery import AreaScheme, DiscoveryOutcome, discover_new_editions
from oabench_pipeline.automation.discovery import record_discovered_editions as record_editions
from oabench_pipeline.automation.resources import PortalResource
from oabench_pipeline.core.editions import Edition, load_editions
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.partitions import editions_partitions, model_edition_partitions, model_keys_partitions
from oabench_pipeline.resources import ExamSourcesResource, WarehouseResource

PORTAL_SENSOR_TICK_S = 30 * 60
MODELS_SENSOR_TICK_S = 60

# One job per partitions definition: Dagster runs one partition of one partitions definition per run, so a
# sensor targeting a mixed asset selection cannot even be loaded. Sensors pick the job per request.
ingest_edition_job = define_asset_job(
    "ingest_edition",
    selection=AssetSelection.assets("exam_pdfs", "answer_keys", "questions"),
    partitions_def=editions_partitions,
    description="Download, parse and validate one edition: official PDFs, answer key, questions.",
)
inference_cell_job = define_asset_job(
    "run_inference_cell",
    selection=AssetSelection.assets("inferences"),
    partitions_def=model_edition_partitions,
    description="One benchmark cell: a model configuration's answers to one edition.",
)
editions_table_job = define_asset_job(
    "refresh_editions_table",
    selection=AssetSelection.assets("editions"),
    description="Rebuild the editions table.",
)
models_table_job = define_asset_job(
    "refresh_models_table", selection=AssetSelection.assets("models"), description="Rebuild the models table."
)
AUTOMATION_JOBS = [ingest_edition_job, inference_cell_job, editions_table_job, models_table_job]


# ---------------------------------------------------------------------------------------------------------
# Run requests shared by the sensors and the schedule
# ---------------------------------------------------------------------------------------------------------


def ingest_requests(edition_keys: Iterable[str]) -> list[RunRequest]:
    """One ingest run per new edition."""
    return [
        RunRequest(job_name=ingest_edition_job.name, partition_key=key, run_key=f"ingest-{key}")
        for key in sorted(edition_keys, key=int)
    ]


def editions_table_request(edition_keys: Sequence[str], stage: str) -> list[RunRequest]:
    """A refresh of the (unpartitioned) editions table once editions were added or ingested."""
    if not edition_keys:
        return []
    keys = "-".join(sorted(edition_keys, key=int))
    return [RunRequest(job_name=editions_table_job.name, run_key=f"editions-table-{stage}-{keys}")]


def cell_requests(
    edition_keys: Iterable[str], models: Iterable[ModelConfig], run_key_prefix: str
) -> list[RunRequest]:
    """One `inferences` run per (edition, model) cell, tagged with its endpoint (per-provider run limits);
    run keys make a repeated request a no-op."""
    return [
        RunRequest(
            job_name=inference_cell_job.name,
            partition_key=MultiPartitionKey({"edition": edition, "model": model.key}),
            run_key=f"{run_key_prefix}-{edition}-{model.key}",
            tags=endpoint_tags(model),
        )
        for edition in sorted(edition_keys, key=int)
        for model in sorted(models, key=lambda m: m.key)
    ]


def runnable_model_keys(models: Iterable[ModelConfig]) -> tuple[list[str], list[str]]:
    """(keys that can run unattended, reasons for the others): baselines and API models with a key set."""
    runnable, held_back = [], []
    for model in models:
        problem = credentials_problem(model)
        if problem is None:
            runnable.append(model.key)
        else:
            held_back.append(f"{model.key}: {problem}")
    return runnable, held_back


def ingested_editions(warehouse: WarehouseResource) -> set[str]:
    """Editions whose questions are in the warehouse: the `inferences` asset can run on them."""
    return set(warehouse.warehouse().partitions("questions"))


def _missing(instance: DagsterInstance, partitions_name: str, keys: Iterable[str]) -> list[str]:
    existing = set(instance.get_dynamic_partitions(partitions_name))
    return sorted({k for k in keys if k not in existing})


def never_raise(
    sensor_name: str, context: SensorEvaluationContext, evaluate: Callable[[], SensorResult]
) -> SensorResult:
    """Run a tick; an unexpected error becomes a skip reason (the cursor stays, so the tick is retried)."""
    try:
        return evaluate()
    except Exception as error:  # a crashed tick shows no reason and stops nothing: report instead
        context.log.exception(f"{sensor_name}: tick failed")
        return SensorResult(
            skip_reason=f"{sensor_name} could not complete this tick: {type(error).__name__}: {error}",
            cursor=context.cursor,
        )


# ---------------------------------------------------------------------------------------------------------
# Portal discovery (also used by the weekly schedule)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PortalCheck:
    """One portal check: its outcome and the editions it recorded in the discovered-editions file."""

    outcome: DiscoveryOutcome
    recorded: list[Edition]

    @property
    def reason(self) -> str:
        return self.outcome.summary()


def check_portal(
    portal: PortalResource, exam_sources: ExamSourcesResource, warehouse: WarehouseResource
) -> PortalCheck:
    """Discover new editions and record the complete ones; failures come back in the outcome."""
    if not exam_sources.discovered_file:
        error = "exam_sources.discovered_file is not set: there is nowhere to record discovered editions"
        return PortalCheck(DiscoveryOutcome(error=error), [])
    known = sorted(exam_sources.editions().values(), key=lambda e: e.edition)
    if not known:
        return PortalCheck(
            DiscoveryOutcome(error="the editions registry is empty: no area scheme to give"), []
        )
    outcome = discover_new_editions(
        portal.base_url,
        {e.edition for e in known},
        warehouse.raw_store(),
        AreaScheme.of(known[-1]),  # the latest edition's scheme: a new edital would need a registry entry
        policy=portal.policy(),
    )
    recorded = record_editions(Path(exam_sources.discovered_file), outcome.found) if outcome.found else []
    return PortalCheck(outcome, recorded)


def discovered_keys(exam_sources: ExamSourcesResource) -> list[str]:
    """Partition keys of the editions in the discovered-editions file (registry editions are not here)."""
    path = Path(exam_sources.discovered_file) if exam_sources.discovered_file else None
    if path is None or not path.is_file():
        return []
    return [e.partition_key for e in load_editions(path)]


@dataclass
class PortalCursor:
    """The portal sensor's memory: when the portal was last asked, which editions got their cells."""

    last_check: float | None = None
    cells_requested: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: str | None) -> PortalCursor:
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
            return cls(data.get("last_check"), [str(k) for k in data.get("cells_requested", [])])
        except (ValueError, AttributeError, TypeError):
            return cls()  # an unreadable cursor only costs one early portal check

    def dump(self) -> str:
        return json.dumps({"last_check": self.last_check, "cells_requested": sorted(self.cells_requested)})

    def check_due(self, now: float, interval_hours: float) -> bool:
        return self.last_check is None or now - self.last_check >= interval_hours * 3600


def _portal_tick(
    context: SensorEvaluationContext,
    portal: PortalResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
    models_registry: ModelsRegistryResource,
) -> SensorResult:
    state = PortalCursor.parse(context.cursor)
    now = time.time()
    notes: list[str] = []
    if state.check_due(now, portal.check_interval_hours):
        check = check_portal(portal, exam_sources, warehouse)
        state.last_check = now
        notes.append(check.reason)
        context.log.info(f"oab_portal_sensor: {check.reason}")
    else:
        hours = (state.last_check + portal.check_interval_hours * 3600 - now) / 3600  # type: ignore[operator]
        notes.append(f"next portal check in {hours:.1f} h")
    discovered = discovered_keys(exam_sources)
    new_editions = _missing(context.instance, editions_partitions.name, discovered)
    runs = [*ingest_requests(new_editions), *editions_table_request(new_editions, "added")]
    cells, handled, waiting_notes = _cells_for_ingested(
        context, discovered, state, warehouse, models_registry
    )
    # Editions the weekly schedule registered got no table refresh from it (a schedule has one job).
    cells += editions_table_request(handled, "ingested")
    state.cells_requested = sorted({*state.cells_requested, *handled}, key=int)
    notes += waiting_notes
    partitions = [editions_partitions.build_add_request(new_editions)] if new_editions else []
    if not runs and not cells:
        return SensorResult(
            skip_reason="; ".join(notes), cursor=state.dump(), dynamic_partitions_requests=partitions
        )
    context.log.info(
        f"oab_portal_sensor: ingest {new_editions or 'none'}; inference cells for {handled or 'none'}"
    )
    return SensorResult(
        run_requests=[*runs, *cells], dynamic_partitions_requests=partitions, cursor=state.dump()
    )


def _cells_for_ingested(
    context: SensorEvaluationContext,
    discovered: Sequence[str],
    state: PortalCursor,
    warehouse: WarehouseResource,
    models_registry: ModelsRegistryResource,
) -> tuple[list[RunRequest], list[str], list[str]]:
    """Cells for discovered editions whose questions just became available: (runs, editions, notes)."""
    awaiting = [k for k in discovered if k not in state.cells_requested]
    if not awaiting:
        return [], [], []
    ingested = ingested_editions(warehouse)
    ready = [k for k in awaiting if k in ingested]
    notes = [f"edition {k}: inference cells wait for its questions" for k in awaiting if k not in ingested]
    if not ready:
        return [], [], notes
    registered = set(context.instance.get_dynamic_partitions(model_keys_partitions.name))
    try:
        models = [m for key, m in models_registry.models().items() if key in registered]
    except ValueError as error:  # a registry being edited: the editions keep waiting for the next tick
        return [], [], [*notes, f"editions {', '.join(ready)} wait: models registry unusable: {error}"]
    runnable, held_back = runnable_model_keys(models)
    if held_back:
        context.log.info(f"oab_portal_sensor: no cells for {'; '.join(held_back)}")
    if not runnable:
        # No model can run yet (none registered, or no credentials): keep the editions awaiting.
        return [], [], [*notes, f"editions {', '.join(ready)}: no registered model can run unattended"]
    chosen = [m for m in models if m.key in runnable]
    return cell_requests(ready, chosen, run_key_prefix="portal"), ready, notes


@sensor(
    name="oab_portal_sensor",
    minimum_interval_seconds=PORTAL_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.RUNNING,
    jobs=[ingest_edition_job, editions_table_job, inference_cell_job],
    description="Finds new OAB editions on the portal (TOFU pins), ingests them, then runs their cells.",
)
def oab_portal_sensor(
    context: SensorEvaluationContext,
    portal: PortalResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
    models_registry: ModelsRegistryResource,
) -> SensorResult:
    return never_raise(
        "oab_portal_sensor",
        context,
        lambda: _portal_tick(context, portal, exam_sources, warehouse, models_registry),
    )


# ---------------------------------------------------------------------------------------------------------
# Models registry
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryCursor:
    """The registry as last seen: its model keys and the SHA-256 of the file."""

    keys: tuple[str, ...]
    sha256: str

    @classmethod
    def parse(cls, raw: str | None) -> RegistryCursor | None:
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(tuple(data["keys"]), str(data["sha256"]))
        except (ValueError, KeyError, TypeError):
            return None  # treated as a first tick: registers partitions, requests no cells

    def dump(self) -> str:
        return json.dumps({"keys": sorted(self.keys), "sha256": self.sha256})


def _registry_tick(
    context: SensorEvaluationContext,
    models_registry: ModelsRegistryResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    path = Path(models_registry.path)
    try:
        models = models_registry.models()  # validates: a broken file is reported, not half-applied
        sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    except (OSError, ValueError) as error:
        return SensorResult(
            skip_reason=f"models registry unusable, nothing changed: {error}", cursor=context.cursor
        )
    previous = RegistryCursor.parse(context.cursor)
    current = RegistryCursor(tuple(sorted(models)), sha256)
    registry_editions = [e.partition_key for e in load_editions(Path(exam_sources.editions_file))]
    new_editions = _missing(context.instance, editions_partitions.name, registry_editions)
    new_model_partitions = _missing(context.instance, model_keys_partitions.name, models)
    partitions = [
        *([editions_partitions.build_add_request(new_editions)] if new_editions else []),
        *([model_keys_partitions.build_add_request(new_model_partitions)] if new_model_partitions else []),
    ]
    runs: list[RunRequest] = []
    if previous is None or previous.sha256 != sha256:
        # The models table mirrors the registry (and flags removed keys): refresh it on any change.
        runs.append(RunRequest(job_name=models_table_job.name, run_key=f"models-{sha256[:16]}"))
    if previous is not None:
        added = [k for k in current.keys if k not in previous.keys]
        removed = [k for k in previous.keys if k not in current.keys]
        editions = {*context.instance.get_dynamic_partitions(editions_partitions.name), *new_editions}
        runs += _cells_for_new_models(context, [models[k] for k in added], editions, warehouse)
        if removed:
            context.log.info(f"models_registry_sensor: removed from the registry (history kept): {removed}")
    if not runs:
        return SensorResult(
            skip_reason=f"models registry unchanged ({len(models)} configurations)",
            cursor=current.dump(),
            dynamic_partitions_requests=partitions,
        )
    return SensorResult(run_requests=runs, dynamic_partitions_requests=partitions, cursor=current.dump())


def _cells_for_new_models(
    context: SensorEvaluationContext,
    added: Sequence[ModelConfig],
    registered: set[str],
    warehouse: WarehouseResource,
) -> list[RunRequest]:
    """Cells of new configurations on every registered edition whose questions are ingested."""
    if not added:
        return []
    runnable, held_back = runnable_model_keys(added)
    if held_back:
        context.log.warning(f"models_registry_sensor: not run automatically: {'; '.join(held_back)}")
    editions = sorted(registered & ingested_editions(warehouse), key=int)
    # The run key carries a timestamp: a key removed then added back is run again (resuming its log).
    chosen = [m for m in added if m.key in runnable]
    return cell_requests(editions, chosen, run_key_prefix=f"registry-{int(time.time())}")


@sensor(
    name="models_registry_sensor",
    minimum_interval_seconds=MODELS_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.RUNNING,
    jobs=[models_table_job, inference_cell_job],
    description="Registers model keys and editions as partitions; runs the cells of new model configurations.",
)
def models_registry_sensor(
    context: SensorEvaluationContext,
    models_registry: ModelsRegistryResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    return never_raise(
        "models_registry_sensor",
        context,
        lambda: _registry_tick(context, models_registry, exam_sources, warehouse),
    )
