"""Schedules: a weekly safety net for edition discovery, and a daily snapshot of the model catalogue.

`daily_model_catalogue` (RUNNING by default) materializes `model_catalogue` and `model_pricing` every day
at 06:00 UTC: one GET of a public list and the price lists of the registry's other endpoints, so prices
stay current and the catalogue's history (what appeared, changed price, was retired) has a row a day
whether or not `model_catalogue_sensor` runs. It sends no request to a model.

A weekly safety net for edition discovery, independent of the portal sensor's cursor and status.

`weekly_portal_discovery` asks the portal every Monday at 07:00 (Brasília time) whatever the sensor
remembers: a sensor stopped in the UI, or a cursor pointing at the wrong time, cannot leave a new
edition unnoticed for more than a week. It does what the sensor's portal check does (TOFU pins, record in
the discovered-editions file), registers the new `editions` partitions itself (schedules cannot return
partition requests) and requests their ingest runs (`ingest_edition` job). The inference cells of those
editions, and the refresh of the editions table, are requested by `oab_portal_sensor` once their questions
are ingested.

Default status: RUNNING. It costs one page request a week when nothing is new, and a safety net that
must first be switched on is one nobody switches on.
"""

from __future__ import annotations

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from oabench_pipeline.automation.jobs import catalogue_job, ingest_edition_job, ingest_requests
from oabench_pipeline.automation.portal_sensor import check_portal, discovered_keys
from oabench_pipeline.automation.resources import PortalResource
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.shared.partitions import EDITIONS_PARTITIONS
from oabench_pipeline.shared.resources import WarehouseResource

WEEKLY_CRON = "0 7 * * 1"
DAILY_CATALOGUE_CRON = "0 6 * * *"
TIMEZONE = "America/Sao_Paulo"


def _discovery(
    context: ScheduleEvaluationContext,
    portal: PortalResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> list[RunRequest] | SkipReason:
    check = check_portal(portal, exam_sources, warehouse)
    context.log.info(f"weekly_portal_discovery: {check.reason}")
    # Also catches editions recorded earlier but never registered (e.g. found while the sensor was off).
    existing = set(context.instance.get_dynamic_partitions(EDITIONS_PARTITIONS))
    new_keys = sorted((k for k in discovered_keys(exam_sources) if k not in existing), key=int)
    if not new_keys:
        return SkipReason(check.reason)
    context.instance.add_dynamic_partitions(EDITIONS_PARTITIONS, new_keys)
    return ingest_requests(new_keys)


@schedule(
    name="weekly_portal_discovery",
    cron_schedule=WEEKLY_CRON,
    execution_timezone=TIMEZONE,
    default_status=DefaultScheduleStatus.RUNNING,
    job=ingest_edition_job,
    description="Weekly portal check for new editions, whatever the portal sensor's state; ingests them.",
)
def weekly_portal_discovery(
    context: ScheduleEvaluationContext,
    portal: PortalResource,
    exam_sources: ExamSourcesResource,
    warehouse: WarehouseResource,
) -> list[RunRequest] | SkipReason:
    # An error fails the tick (Dagster records it with its error); a skip says there is nothing new.
    return _discovery(context, portal, exam_sources, warehouse)


daily_model_catalogue = ScheduleDefinition(
    name="daily_model_catalogue",
    cron_schedule=DAILY_CATALOGUE_CRON,
    execution_timezone="UTC",
    job=catalogue_job,
    default_status=DefaultScheduleStatus.RUNNING,
    description="Daily snapshot of the model catalogue and the prices it gives (no request to a model).",
)
