"""The one `Definitions` object: every domain's assets, checks, sensors and resources, assembled here."""

from __future__ import annotations

import gc
from typing import cast

from dagster import (
    AssetsDefinition,
    Definitions,
    ExecutorDefinition,
    Field,
    Selector,
    multi_or_in_process_executor,
)

from oabench_pipeline.automation.batch_sensor import batch_results_sensor
from oabench_pipeline.automation.catalogue_sensor import model_catalogue_sensor
from oabench_pipeline.automation.downstream import downstream_automation_sensor
from oabench_pipeline.automation.jobs import ASSET_JOBS
from oabench_pipeline.automation.portal_sensor import oab_portal_sensor
from oabench_pipeline.automation.registry_sensor import models_registry_sensor
from oabench_pipeline.automation.resources import PortalResource
from oabench_pipeline.automation.schedules import daily_model_catalogue, weekly_portal_discovery
from oabench_pipeline.exams.assets import answer_keys, editions, exam_pdfs, questions
from oabench_pipeline.inference.assets import inferences
from oabench_pipeline.inference.catalogue_assets import catalogue_decisions, model_catalogue
from oabench_pipeline.inference.imports import published_runs
from oabench_pipeline.inference.registry_assets import model_pricing, models
from oabench_pipeline.inference.resources import (
    ModelCatalogueResource,
    ModelClientResource,
    ModelsRegistryResource,
)
from oabench_pipeline.phase2.agreement import phase2_judge_agreement
from oabench_pipeline.phase2.answers import phase2_answers
from oabench_pipeline.phase2.assets import (
    phase2_items,
    phase2_judge_prompts,
    phase2_source_files,
    phase2_standards,
)
from oabench_pipeline.phase2.imports import phase2_import
from oabench_pipeline.phase2.jobs import PHASE2_JOBS
from oabench_pipeline.phase2.judgments import phase2_judgments
from oabench_pipeline.phase2.pass_rates import candidate_pass_rates
from oabench_pipeline.phase2.resources import Phase2SourcesResource
from oabench_pipeline.phase2.scoring import phase2_scoring
from oabench_pipeline.scoring.assets import leaderboard, leaderboard_report, scores
from oabench_pipeline.scoring.site_asset import leaderboard_site
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.resources import ExamSourcesResource, WarehouseResource

# Dagster's default executor with the other default: in-process unless a run asks for `multiprocess`. The
# same name and config as Dagster's, so `--config-json '{"execution":{"config":{"in_process":{}}}}'` (docs/ui.md)
# and `{"multiprocess": {...}}` from the launchpad keep working; only an empty config changes meaning.
# Its two choices, read from its own (public) config schema: a Selector of `multiprocess` and `in_process`.
_EXECUTOR_CHOICES = cast("Selector", multi_or_in_process_executor.config_schema.config_type).fields
in_process_by_default_executor = ExecutorDefinition(
    name=multi_or_in_process_executor.name,
    config_schema=Field(
        Selector(dict(_EXECUTOR_CHOICES)),
        default_value={"in_process": {}},
    ),
    requirements=multi_or_in_process_executor.get_requirements,
    executor_creation_fn=multi_or_in_process_executor.executor_creation_fn,
    description="In-process by default (one process per run); `multiprocess` on request.",
)

ASSETS: list[AssetsDefinition] = [
    editions,
    exam_pdfs,
    answer_keys,
    questions,
    models,
    model_catalogue,
    catalogue_decisions,
    model_pricing,
    published_runs,
    inferences,
    scores,
    leaderboard,
    leaderboard_report,
    leaderboard_site,
    phase2_judge_agreement,
    candidate_pass_rates,
    phase2_source_files,
    phase2_items,
    phase2_standards,
    phase2_judge_prompts,
    phase2_import,
    phase2_scoring,
    phase2_answers,
    phase2_judgments,
]


def build_resources(settings: Settings) -> dict[str, object]:
    return {
        "warehouse": WarehouseResource(path=str(settings.warehouse_path), raw_dir=str(settings.raw_dir)),
        "exam_sources": ExamSourcesResource(
            editions_file=str(settings.editions_file),
            discovered_file=str(settings.discovered_editions_file),
            source_base_url=settings.source_base_url,
            download_timeout_s=settings.download_timeout_s,
        ),
        "models_registry": ModelsRegistryResource(
            path=str(settings.models_file),
            packaged_path=str(settings.packaged_models_file) if settings.packaged_models_file else None,
            catalogue_file=str(settings.catalogue_models_file),
            watch_file=str(settings.watch_file),
            autorun_max_cost_usd=settings.autorun_max_cost_usd,
        ),
        "catalogue": ModelCatalogueResource(
            url=settings.catalogue_url, timeout_s=settings.catalogue_timeout_s
        ),
        "model_client": ModelClientResource(
            timeout_s=settings.model_timeout_s, backoff_base_s=settings.model_backoff_s
        ),
        "portal": PortalResource(base_url=settings.portal_url),
        "phase2_sources": Phase2SourcesResource(
            source_base_url=settings.source_base_url, download_timeout_s=settings.download_timeout_s
        ),
    }


def build_definitions(settings: Settings | None = None) -> Definitions:
    settings = settings or Settings.from_env()
    return Definitions(
        assets=ASSETS,
        sensors=[
            oab_portal_sensor,
            models_registry_sensor,
            model_catalogue_sensor,
            batch_results_sensor,
            downstream_automation_sensor(enabled=settings.automation),
        ],
        schedules=[weekly_portal_discovery, daily_model_catalogue],
        jobs=[
            *ASSET_JOBS,
            *PHASE2_JOBS,
        ],  # `oabench`'s runs execute these too (`engine/runs.py`): the UI names what each run is
        resources=build_resources(settings),
        # Every run (UI backfill, sensor, schedule, `dagster asset materialize`) executes its steps in the
        # run's own process, as `oabench run` does: a subprocess per step re-imports the code location
        # (Dagster, polars, duckdb, pymupdf: seconds of CPU each), which made a UI backfill of 12 cells
        # take 2.4x the CLI's time. Steps of one run then run one after another; cells still run at once,
        # each its own run (docs/design/in-process-executor.md).
        executor=in_process_by_default_executor,
    )


defs = build_definitions()

# What exists now (Dagster, polars, duckdb, these definitions) lives as long as the process: out of the
# garbage collector's sight (`gc.freeze`, Python's documented switch for long-lived objects), it is no
# longer traversed by every full collection nor at exit. Each cell run is a process that imports this
# module, does a few seconds' work and exits; that traversal was a fifth of its CPU.
gc.freeze()
