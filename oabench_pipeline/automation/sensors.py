"""Sensors that keep the benchmark current with no one at the keyboard.

`oab_portal_sensor` watches the OAB portal. When an edition newer than every known one has both its
Tipo 1 booklet and its definitive answer key, it pins them on first download, records the edition in the
discovered-editions file, adds the `editions` partition and requests the ingest run (`exam_pdfs`,
`answer_keys`, `questions`) plus a refresh of the `editions` table. Inference cells read `questions`, so
they are requested on a later tick, once that edition's questions are in the warehouse: requesting them in
the same tick would race the ingest and fail. That is why the sensor ticks every 30 minutes while the
portal itself is only asked every `PortalResource.check_interval_hours` (6 h; the time of the last check is
in the cursor). Those cells follow the same opt-in as a new registry model's (below): baselines always,
an API model only within `OABENCH_AUTORUN_MAX_COST_USD` on the new edition.

`models_registry_sensor` watches the models registry file. Its first tick registers every registry
model key and every registry edition as partitions (so a fresh `dagster dev` shows them all). Afterwards
a new configuration gets its `model_keys` partition; a removed one keeps its history, and the `models`
table is re-materialized (it then marks the key `in_registry = false`). A new configuration's cells run
on the default suite's ingested editions only: a baseline's always (free), an API model's only when its
owner opted in with `OABENCH_AUTORUN_MAX_COST_USD` (its budget), its key variable is set in the sensor's
process and a price snapshot lets its cost be held to that budget. Neither sensor ever raises: any problem becomes a skip reason
naming it, so a bad file or a dead portal shows in the UI as a reason, not as a crashed tick.

The code lives in `portal_sensor.py`, `registry_sensor.py`, `jobs.py` (jobs and run requests) and
`sensor_support.py`; this module keeps the names other modules and tests import from here.
"""

from oabench_pipeline.automation.jobs import (
    cell_requests,
    editions_table_job,
    editions_table_request,
    inference_cell_job,
    ingest_edition_job,
    ingest_requests,
    models_table_job,
)
from oabench_pipeline.automation.portal_sensor import (
    PORTAL_SENSOR_TICK_S,
    PortalCheck,
    PortalCursor,
    check_portal,
    discovered_keys,
    oab_portal_sensor,
)
from oabench_pipeline.automation.registry_sensor import (
    MODELS_SENSOR_TICK_S,
    RegistryCursor,
    models_registry_sensor,
)
from oabench_pipeline.automation.sensor_support import ingested_editions, runnable_model_keys

__all__ = [
    "MODELS_SENSOR_TICK_S",
    "PORTAL_SENSOR_TICK_S",
    "PortalCheck",
    "PortalCursor",
    "RegistryCursor",
    "cell_requests",
    "check_portal",
    "discovered_keys",
    "editions_table_job",
    "editions_table_request",
    "inference_cell_job",
    "ingest_edition_job",
    "ingest_requests",
    "ingested_editions",
    "models_registry_sensor",
    "models_table_job",
    "oab_portal_sensor",
    "runnable_model_keys",
]
