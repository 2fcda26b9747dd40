"""`downstream_automation`: the sensor that evaluates the scoring assets' automation conditions.

The conditions, and what each asset waits for, are in `scoring/conditions.py`, beside the assets they are
attached to.
"""

from __future__ import annotations

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
)

from oabench_pipeline.core.tables import ANALYSIS_TABLES

DOWNSTREAM_SENSOR_NAME = "downstream_automation"
DOWNSTREAM_ASSETS = ("scores", *ANALYSIS_TABLES, "leaderboard_report", "leaderboard_site")
# The asset daemon's own floor is 30 s; a minute is plenty for tables that take seconds to rebuild.
DOWNSTREAM_TICK_S = 60


def downstream_automation_sensor(enabled: bool = True) -> AutomationConditionSensorDefinition:
    """The sensor evaluating the conditions above; `enabled=False` only changes its default status."""
    return AutomationConditionSensorDefinition(
        DOWNSTREAM_SENSOR_NAME,
        target=AssetSelection.assets(*DOWNSTREAM_ASSETS),
        default_status=DefaultSensorStatus.RUNNING if enabled else DefaultSensorStatus.STOPPED,
        minimum_interval_seconds=DOWNSTREAM_TICK_S,
        description="Re-scores changed cells and rebuilds the leaderboard, its report and the site after upstream "
        "updates.",
    )
