"""`models_registry_sensor`: the models registry file becomes partitions, cells and the `models` table.

Its first tick registers every registry model key and every registry edition as partitions (so a fresh
`dagster dev` shows them all). Afterwards a new configuration gets its `model_keys` partition; a removed
one keeps its history, and the `models` table is re-materialized (it then marks the key `in_registry =
false`). Nothing spends money by surprise: a new configuration gets `inferences` runs only on the default
suite's ingested editions (what `oabench leaderboard` ranks), and only when it can run unattended —
baselines (offline, free) always; an API model only when its owner opted in with
`OABENCH_AUTORUN_MAX_COST_USD` (off by default), its key variable is set in the sensor's process, the
model catalogue has not retired it, and a price snapshot lists it with an estimated cost on the suite
within that budget. Its cells then run with that budget split between them as a ceiling on reported
spend. An opted-in model no snapshot prices waits (a pricing run is requested) instead of running
unbounded, so an entry that can never run (a local server not listening, a misspelt id) launches
nothing. Entries the catalogue sensor generated get their partition here but their cells from that
sensor (on its policy's suite, within its budget). The sensor never raises: a problem becomes a skip
reason.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Collection, Sequence
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
    inference_cell_job,
    models_table_job,
    pricing_job,
)
from oabench_pipeline.automation.sensor_support import (
    AUTORUN_ENV,
    autorun_cells,
    ingested_editions,
    missing_partitions,
    runnable_model_keys,
)
from oabench_pipeline.core.editions import Suite, default_suite, load_editions
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.catalogue_store import retired_models
from oabench_pipeline.inference.freshness import inferences_are_current
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.shared.partitions import (
    EDITIONS_PARTITIONS,
    MODEL_KEYS_PARTITIONS,
    editions_partitions,
    model_keys_partitions,
)
from oabench_pipeline.shared.resources import WarehouseResource

MODELS_SENSOR_TICK_S = 60


@dataclass(frozen=True)
class RegistryCursor:
    """The registry as last seen: its model keys and the SHA-256 of the file; `waiting`: opted-in API
    keys whose cells wait for a price snapshot (their cost must be held to the budget before they run)."""

    keys: tuple[str, ...]
    sha256: str
    waiting: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: str | None) -> RegistryCursor | None:
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(tuple(data["keys"]), str(data["sha256"]), tuple(data.get("waiting", ())))
        except (ValueError, KeyError, TypeError):
            return None  # treated as a first tick: registers partitions, requests no cells

    def dump(self) -> str:
        return json.dumps({"keys": sorted(self.keys), "sha256": self.sha256, "waiting": sorted(self.waiting)})


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
    waiting: list[str] = []
    if previous is not None:
        added = [k for k in sorted(models) if k not in previous.keys]
        removed = [k for k in previous.keys if k not in models]
        editions = {*context.instance.get_dynamic_partitions(EDITIONS_PARTITIONS), *new_editions}
        # Entries the catalogue sensor generated run on its policy's suite, requested by that sensor.
        automatic = models_registry.automatic()
        candidates = [k for k in added if k not in automatic]
        candidates += [k for k in previous.waiting if k in models and k not in automatic and k not in added]
        cells, waiting = _cells_for_new_models(
            context,
            [models[k] for k in candidates],
            editions,
            warehouse,
            default_suite(exam_sources.suites()),
            models_registry.autorun_max_cost_usd,
            already_waiting=set(previous.waiting),
        )
        runs += cells
        if waiting:  # a price snapshot for them (no model is asked); the run key: once per registry state
            runs.append(RunRequest(job_name=pricing_job.name, run_key=f"pricing-registry-{sha256[:16]}"))
        if removed:
            context.log.info(f"models_registry_sensor: removed from the registry (history kept): {removed}")
    cursor = RegistryCursor(tuple(sorted(models)), sha256, tuple(waiting)).dump()
    if not runs:
        return SensorResult(
            skip_reason=f"models registry unchanged ({len(models)} configurations)",
            cursor=cursor,
            dynamic_partitions_requests=partitions,
        )
    return SensorResult(run_requests=runs, dynamic_partitions_requests=partitions, cursor=cursor)


def _cells_for_new_models(
    context: SensorEvaluationContext,
    added: Sequence[ModelConfig],
    registered: set[str],
    warehouse: WarehouseResource,
    suite: Suite,
    budget_usd: float | None,
    already_waiting: Collection[str] = (),
) -> tuple[list[RunRequest], list[str]]:
    """(cell runs of new configurations on the default suite's registered, ingested editions; the opted-in
    keys that wait for a price). Baselines always; API models only within the opt-in budget. A key in
    `already_waiting` was logged when it began to wait, not again at every tick."""
    if not added:
        return [], []
    runnable, held_back = runnable_model_keys(added, retired_models(warehouse.warehouse()))
    ingested = registered & ingested_editions(warehouse)
    editions = [str(e) for e in suite.editions if str(e) in ingested]
    store = warehouse.warehouse()
    # The run key carries a timestamp: a key removed then added back is run again.
    prefix = f"registry-{int(time.time())}"
    requests: list[RunRequest] = []
    waiting: list[str] = []
    for model in (m for m in added if m.key in runnable):
        # The same test as `oabench run` and `oabench status` (inference/freshness.py): a key removed then added back
        # runs only its cells that are not complete (resuming its log); a complete cell costs no run at all.
        todo = [e for e in editions if not inferences_are_current(store, model, e)]
        if done := len(editions) - len(todo):
            context.log.info(f"models_registry_sensor: {model.key}: {done} cell(s) already complete, not run")
        if not todo:
            continue
        by_hand = f"oabench run --models {model.key}"
        autorun = autorun_cells(store, model, todo, budget_usd, prefix, f"suite {suite.name}", by_hand)
        requests += autorun.requests
        if autorun.unpriced:
            waiting.append(model.key)
            if model.key in already_waiting:
                continue  # said when it began to wait: not again at every tick
        if autorun.held_back:
            held_back.append(autorun.held_back)
    if held_back:
        context.log.warning(f"models_registry_sensor: not run automatically: {'; '.join(held_back)}")
    return requests, waiting


@sensor(
    name="models_registry_sensor",
    minimum_interval_seconds=MODELS_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.RUNNING,
    jobs=[models_table_job, inference_cell_job, pricing_job],
    description="Registers model keys and editions as partitions and refreshes the models table. Runs a new "
    "configuration's cells on the default suite only: baselines (free) always; API models only when opted in "
    f"with {AUTORUN_ENV} (off by default: nothing is spent), each within that budget in USD, and never one "
    "no price snapshot lists (a local server not listening, a misspelt id).",
)
def models_registry_sensor(
    context: SensorEvaluationContext,
    models_registry: ModelsRegistryResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> SensorResult:
    return _registry_tick(context, models_registry, exam_sources, warehouse)
