"""The run queue, with the endpoint tag no launcher can forget.

`tag_concurrency_limits` on `oabench/endpoint` (docs/scaling.md) only hold runs that carry
the tag. `oabench run` and the sensors set it; a backfill launched from the UI sends no tags. This
`QueuedRunCoordinator` derives it from the run's `dagster/partition/model` tag (the models registry gives
the host) before the run is queued, so the daemon sees it when it applies the limits. Configured as
`run_coordinator` in the repository's `dagster.yaml` and in the one `oabench` writes for a new DAGSTER_HOME.
"""

from __future__ import annotations

import logging

from dagster import DagsterRun, QueuedRunCoordinator, SubmitRunContext

from oabench_pipeline.core.models_registry import ModelsRegistryError, known_models
from oabench_pipeline.inference.endpoints import endpoint_tags_for_run
from oabench_pipeline.settings import Settings, SettingsError
from oabench_pipeline.shared import dagster_internals

# Under Dagster's own logger, as the queued run coordinator's: the daemon and the UI print it.
LOGGER = logging.getLogger("dagster.run_coordinator.endpoint_tagging")


class EndpointTaggingRunCoordinator(QueuedRunCoordinator):
    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        run = context.dagster_run
        try:
            settings = Settings.from_env()
            registry = known_models(settings.models_files, settings.catalogue_models_file)
        except (ModelsRegistryError, SettingsError, OSError) as error:
            # Queue it untagged rather than not at all: the request limits still hold in the step.
            LOGGER.warning(f"run {run.run_id}: no oabench/endpoint tag ({error})")
            registry = []
        tags = endpoint_tags_for_run(run.tags, registry)
        if tags:
            dagster_internals.add_run_tags(dagster_internals.coordinator_instance(self), run.run_id, tags)
        return super().submit_run(context)
