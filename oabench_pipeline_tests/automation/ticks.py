"""Evaluations of the automation conditions tick by tick, reading the dynamic partitions once per tick, as
the daemon does."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from dagster import AssetKey, DagsterInstance, Definitions, evaluate_automation_conditions
from dagster._core.definitions.asset_daemon_cursor import AssetDaemonCursor

from oabench_pipeline.core.tables import ANALYSIS_TABLES

SCORES, REPORT, SITE = AssetKey("scores"), AssetKey("leaderboard_report"), AssetKey("leaderboard_site")
TABLES = tuple(AssetKey(t) for t in ANALYSIS_TABLES)  # `leaderboard` and the other analysis tables


@contextmanager
def dynamic_partitions_read_once(instance: DagsterInstance) -> Iterator[None]:
    """Within the block, each dynamic partitions definition's keys are read from the instance once.

    The asset daemon builds a tick's new cursor under its per-tick `CachingInstanceQueryer`, which reads
    each definition's keys once (`AutomationTickEvaluationContext._get_updated_cursor`, Dagster 1.13).
    `evaluate_automation_conditions` builds it under the bare instance, and serializing the cursor lists a
    dynamic definition's keys per subset: about 700 SQLite connections per tick over these assets, most of
    a tick's cost. Nothing adds a partition during an evaluation, so the answers are the same.
    """
    read = instance.get_dynamic_partitions
    keys: dict[str, Sequence[str]] = {}

    def read_once(partitions_def_name: str) -> Sequence[str]:
        if partitions_def_name not in keys:
            keys[partitions_def_name] = read(partitions_def_name)
        return keys[partitions_def_name]

    instance.get_dynamic_partitions = read_once  # type: ignore[method-assign]
    try:
        yield
    finally:
        del instance.get_dynamic_partitions  # the class's method again


class Ticks:
    """Successive evaluations of the automation conditions, carrying the cursor like the sensor does."""

    def __init__(self, defs: Definitions, instance: DagsterInstance) -> None:
        self.defs, self.instance = defs, instance
        self.cursor: AssetDaemonCursor | None = None

    def tick(self) -> dict[AssetKey, set[str | None]]:
        with dynamic_partitions_read_once(self.instance):
            result = evaluate_automation_conditions(
                defs=self.defs, instance=self.instance, cursor=self.cursor
            )
        self.cursor = result.cursor
        requested = {
            key: set(result.get_requested_partitions(key)) for key in (SCORES, *TABLES, REPORT, SITE)
        }
        assert result.total_requested == sum(len(v) for v in requested.values())  # nothing else requested
        return {key: parts for key, parts in requested.items() if parts}
