"""`models_registry_sensor`: the models registry file becomes partitions, cells and the `models` table.

Its first tick registers every registry model key and every registry edition as partitions (so a fresh
`dagster dev` shows them all). Afterwards a new configuration gets its `model_keys` partition and
`inferences` runs for its cells on every edition whose questions are ingested; a removed one keeps its
history, and the `models` table is re-materialized (it then marks the key `in_registry = false`). Only
models that can run unattended get cells: baselines, and API models whose key variable is set in the
environment of the sensor's process and that the model catalogue has not retired. Entries the catalogue
sensor generated get their partition here but their cells from that sensor (on its policy's suite, within
its budget). The sensor never raises: a problem becomes a skip reason.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
)
from oabench_pipeline.automation.sensor_support import (
    ingested_editions,
    missing_partitions,
    never_raise,
    runnable_model_keys,
)
from oabench_pipeline.core.editions import load_editions
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.freshness import inferences_are_current
from oabench_pipeline.inference.catalogue_store import retired_models
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.partitions import (
    EDITIONS_PARTITIONS,
    MODEL_KEYS_PARTITIONS,
    editions_partitions,
    model_keys_partitions,
)
from oabench_pipeline.resources import ExamSourcesResource, WarehouseResource

MODELS_SENSOR_TICK_S = 60


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
    try:
        models = models_registry.models()  # validates: a broken file is reported, not half-applied
        sha256 = hashlib.sha256(b"".join(path.read_bytes() for path in models_registry.files())).hexdigest()
    except (OSError, ValueError) as error:
        return SensorResult(
            skip_reason=f"models registry unusable, nothing changed: {error}", cursor=context.cursor
        )
    previous = RegistryCursor.parse(context.cursor)
    current = RegistryCursor(tuple(sorted(models)), sha256)
    registry_editions = [e.partition_key for e in load_editions(Path(exam_sources.editions_file))]
    new_editions = missing_partitions(context.instance, EDITIONS_PARTITIONS, registry_editions)
    new_model_partitions = missing_partitions(context.instance, MODEL_KEYS_PARTITIONS, models)
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
        editions = {*context.instance.get_dynamic_partitions(EDITIONS_PARTITIONS), *new_editions}
        # Entries the catalogue sensor generated run on its policy's suite, requested by that sensor.
        automatic = models_registry.automatic()
        hand_written = [models[k] for k in added if k not in automatic]
        runs += _cells_for_new_models(context, hand_written, editions, warehouse)
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
    runnable, held_back = runnable_model_keys(added, retired_models(warehouse.warehouse()))
    if held_back:
        context.log.warning(f"models_registry_sensor: not run automatically: {'; '.join(held_back)}")
    editions = sorted(registered & ingested_editions(warehouse), key=int)
    chosen = [m for m in added if m.key in runnable]
    # The same test as `oabench run` and `oabench status` (freshness.py): a key removed then added back
    # runs only its cells that are not complete (resuming its log); a complete cell costs no run at all.
    store = warehouse.warehouse()
    todo = [(e, m) for e in editions for m in chosen if not inferences_are_current(store, m, e)]
    if done := len(editions) * len(chosen) - len(todo):
        context.log.info(f"models_registry_sensor: {done} cell(s) of added keys already complete, not run")
    # The run key carries a timestamp: a key removed then added back is run again.
    prefix = f"registry-{int(time.time())}"
    return [request for e, m in todo for request in cell_requests([e], [m], run_key_prefix=prefix)]


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
