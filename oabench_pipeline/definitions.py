"""The one `Definitions` object: every domain's assets, checks, sensors and resources, assembled here."""

from __future__ import annotations

import gc
import multiprocessing

from dagster import (
    AssetsDefinition,
    Definitions,
    Field,
    Permissive,
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
from oabench_pipeline.catalogue.assets import catalogue_decisions, model_catalogue
from oabench_pipeline.catalogue.pricing import model_pricing
from oabench_pipeline.catalogue.resources import ModelCatalogueResource
from oabench_pipeline.exams.assets import answer_keys, editions, exam_pdfs, questions
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.assets import inferences
from oabench_pipeline.inference.imports import published_runs
from oabench_pipeline.inference.registry_assets import models
from oabench_pipeline.inference.resources import ModelClientResource, ModelsRegistryResource
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
from oabench_pipeline.scoring.analysis import leaderboard
from oabench_pipeline.scoring.reports import leaderboard_report
from oabench_pipeline.scoring.scores import scores
from oabench_pipeline.scoring.site_asset import leaderboard_site
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.resources import WarehouseResource

# Dagster's default executor with the other default: in-process unless a run asks for `multiprocess`.
# `configured` (Dagster's public way to give a definition's config a default) keeps its name and config, so
# `--config-json '{"execution":{"config":{"in_process":{}}}}'` (docs/ui.md) and `{"multiprocess": {...}}`
# from the launchpad keep working; only an empty config changes meaning. Each choice's own fields are
# checked by Dagster's executor, to which the config is passed as given.
in_process_by_default_executor = multi_or_in_process_executor.configured(
    lambda config: config,
    config_schema=Field(
        Selector({"in_process": Field(Permissive(), default_value={}), "multiprocess": Permissive()}),
        default_value={"in_process": {}},
    ),
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

# In a run worker, what exists now (Dagster, polars, these definitions) lives as long as the process:
# out of the garbage collector's sight (`gc.freeze`, Python's documented switch for long-lived objects), it is
# no longer traversed by every full collection nor at exit, about 0.5 s of the 2 s of CPU a process that
# imports this module and exits spends (docs/design/dagster-internals.md). Dagster's code server starts each
# run's worker with `multiprocessing` (spawn), so only such a child freezes: a test session, the UI or the
# daemon importing the definitions keeps its garbage collector whole.
if multiprocessing.parent_process() is not None:
    gc.freeze()
