"""`oab_portal_sensor`: new OAB editions found on the portal become partitions, ingest runs and cells.

When an edition newer than every known one has both its Tipo 1 booklet and its definitive answer key,
the sensor pins them on first download, records the edition in the discovered-editions file, adds the
`editions` partition and requests the ingest run (`exam_pdfs`, `answer_keys`, `questions`) plus a refresh
of the `editions` table. Inference cells read `questions`, so they are requested on a later tick, once
that edition's questions are in the warehouse: requesting them in the same tick would race the ingest and
fail. That is why the sensor ticks every 30 minutes while the portal itself is only asked every
`PortalResource.check_interval_hours` (6 h; the time of the last check is in the cursor). Nothing spends
money by surprise: the cells are those of the registered models that can run unattended, by the rule a
new registry model's follow (`sensor_support.autorun_cells`): baselines (offline, free) always; an API
model only when its owner opted in with `OABENCH_AUTORUN_MAX_COST_USD` (off by default), a price snapshot
lists it and its estimated cost on the new edition is within that budget (per edition), its cell run then
stopping at it. The weekly schedule (`schedules.py`) reuses `check_portal`. The sensor never raises:
a problem becomes a skip reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from oabench_pipeline.automation.discovery import AreaScheme, DiscoveryOutcome, discover_new_editions
from oabench_pipeline.automation.discovery import record_discovered_editions as record_editions
from oabench_pipeline.automation.jobs import (
    editions_table_job,
    editions_table_request,
    inference_cell_job,
    ingest_edition_job,
    ingest_requests,
)
from oabench_pipeline.automation.resources import PortalResource
from oabench_pipeline.automation.sensor_support import (
    AUTORUN_ENV,
    autorun_cells,
    ingested_editions,
    missing_partitions,
    runnable_model_keys,
)
from oabench_pipeline.core.editions import Edition, load_editions
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.catalogue_store import retired_models
from oabench_pipeline.inference.resources import ModelsRegistryResource
from oabench_pipeline.shared.partitions import (
    EDITIONS_PARTITIONS,
    MODEL_KEYS_PARTITIONS,
    editions_partitions,
)
from oabench_pipeline.shared.resources import WarehouseResource

PORTAL_SENSOR_TICK_S = 30 * 60


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
    new_editions = missing_partitions(context.instance, EDITIONS_PARTITIONS, discovered)
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
    registered = set(context.instance.get_dynamic_partitions(MODEL_KEYS_PARTITIONS))
    try:
        # Entries the catalogue sensor generated run on its policy's suite only, within its budget.
        automatic = models_registry.automatic()
        models = [
            m for key, m in models_registry.models().items() if key in registered and key not in automatic
        ]
    except ValueError as error:  # a registry being edited: the editions keep waiting for the next tick
        return [], [], [*notes, f"editions {', '.join(ready)} wait: models registry unusable: {error}"]
    runnable, held_back = runnable_model_keys(models, retired_models(warehouse.warehouse()))
    if held_back:
        context.log.info(f"oab_portal_sensor: no cells for {'; '.join(held_back)}")
    if not runnable:
        # No model can run yet (none registered, or no credentials): keep the editions awaiting.
        return [], [], [*notes, f"editions {', '.join(ready)}: no registered model can run unattended"]
    requests: list[RunRequest] = []
    not_run: list[str] = []
    store = warehouse.warehouse()
    budget = models_registry.autorun_max_cost_usd
    chosen = sorted((m for m in models if m.key in runnable), key=lambda m: m.key)
    for edition, model in ((e, m) for e in sorted(ready, key=int) for m in chosen):
        # The rule a new registry model follows: an API model only opted in, within the budget per edition.
        by_hand = f"oabench run --models {model.key} --editions {edition}"
        autorun = autorun_cells(store, model, [edition], budget, "portal", f"edition {edition}", by_hand)
        requests += autorun.requests
        not_run += [autorun.held_back] if autorun.held_back else []
    if not_run:
        context.log.warning(f"oab_portal_sensor: not run automatically: {'; '.join(not_run)}")
    return requests, ready, notes


@sensor(
    name="oab_portal_sensor",
    minimum_interval_seconds=PORTAL_SENSOR_TICK_S,
    default_status=DefaultSensorStatus.RUNNING,
    jobs=[ingest_edition_job, editions_table_job, inference_cell_job],
    description="Finds new OAB editions on the portal (TOFU pins) and ingests them, then runs their cells: "
    "baselines (free) always; API models only when opted in with "
    f"{AUTORUN_ENV} (off by default: nothing is spent), each within that budget in USD on the new edition, "
    "and never one no price snapshot lists.",
)
def oab_portal_sensor(
    context: SensorEvaluationContext,
    portal: PortalResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
    models_registry: ModelsRegistryResource,
) -> SensorResult:
    return _portal_tick(context, portal, exam_sources, warehouse, models_registry)
