"""Downstream follows upstream: scores and the leaderboard rebuild themselves when their inputs change.

Declarative automation, evaluated by one `AutomationConditionSensorDefinition` (`downstream_automation`):

- `scores` (one partition per cell) uses `AutomationCondition.eager()`: a cell is re-scored when its own
  `inferences` partition, or its edition's `answer_keys` / `questions`, is materialized by a run that did
  not score it already (`oabench run` materializes inferences and scores together: nothing left to do).
  Only the changed cells are requested; a cell whose inferences are missing waits for them.
- `leaderboard` and every other analysis table (`tables.ANALYSIS_TABLES`: unpartitioned assets of one
  multi-asset step, each reading every scored cell) use `after_any_upstream_update()`: it fires once
  when any upstream partition was updated since it was last requested, and waits while a scores cell is
  due on the same tick or any input is being materialized, so a burst of re-scored cells costs one
  rebuild, and never before a first cell is scored (the step could only fail). The tables share their inputs, so they are requested together, and run as one step. Unlike `eager()` it ignores missing upstream partitions: a cell never run (an API model
  without a key) must not block it forever.
- `leaderboard_report` uses `eager()`: it is requested in the same run as the tables it renders.

The sensor is RUNNING by default, like the portal and registry sensors: a stale leaderboard after an
automated run is the failure it exists to prevent. Turn it off with the toggle in the UI (Automation
page; a state set there wins over the code default) or for a whole deployment with
`OABENCH_AUTOMATION=off` (read in `settings.py`), which makes its default status STOPPED.
"""

from __future__ import annotations

from dagster import (
    AssetSelection,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
)

from oabench_pipeline.tables import ANALYSIS_TABLES

DOWNSTREAM_SENSOR_NAME = "downstream_automation"
DOWNSTREAM_ASSETS = ("scores", *ANALYSIS_TABLES, "leaderboard_report")
# The asset daemon's own floor is 30 s; a minute is plenty for tables that take seconds to rebuild.
DOWNSTREAM_TICK_S = 60

SCORES_CONDITION = AutomationCondition.eager()


def after_any_upstream_update() -> AutomationCondition:
    """True once after any partition of any dependency updated, when nothing upstream is in flight.

    `newly_updated` without `will_be_requested`: an unpartitioned table over many cells is rebuilt on the
    tick after the cells landed, not in a backfill mixed with them. Updates made by a run that also
    materialized this asset (e.g. `oabench run` rebuilding the leaderboard itself) do not count.
    """
    updated = AutomationCondition.any_deps_match(
        AutomationCondition.newly_updated() & ~AutomationCondition.executed_with_root_target()
    ).with_label("any_dep_newly_updated")
    # Cells due on this very tick (scores of cells whose inferences just landed) come first: the trigger
    # stays true until the table is requested, so it fires once they are done. `will_be_requested` cannot
    # say this: it only sees dependencies that can run in the same run (same partitions definition).
    upstream_requested = AutomationCondition.any_deps_match(SCORES_CONDITION).allow(
        AssetSelection.assets("scores")
    )
    # Nothing to rank before a first cell is scored: the tables' step fails "nothing is scored yet", and on
    # a fresh instance the editions/models tables the sensors build would make that red run the first one.
    any_scored = (
        AutomationCondition.any_deps_match(~AutomationCondition.missing())
        .allow(AssetSelection.assets("scores"))
        .with_label("any_cell_scored")
    )
    return (
        updated.since_last_handled()
        & any_scored
        & ~upstream_requested.with_label("scores_due_this_tick")
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("after_any_upstream_update")


LEADERBOARD_CONDITION = after_any_upstream_update()
REPORT_CONDITION = AutomationCondition.eager()


def downstream_automation_sensor(enabled: bool = True) -> AutomationConditionSensorDefinition:
    """The sensor evaluating the conditions above; `enabled=False` only changes its default status."""
    return AutomationConditionSensorDefinition(
        DOWNSTREAM_SENSOR_NAME,
        target=AssetSelection.assets(*DOWNSTREAM_ASSETS),
        default_status=DefaultSensorStatus.RUNNING if enabled else DefaultSensorStatus.STOPPED,
        minimum_interval_seconds=DOWNSTREAM_TICK_S,
        description="Re-scores changed cells and rebuilds the leaderboard and its report after upstream updates.",
    )
