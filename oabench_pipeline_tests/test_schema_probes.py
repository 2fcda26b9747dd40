"""The instance's storages remember each schema probe that said yes (`oabench_pipeline/schema_probes.py`),
and ask again each one that said no. A real SQLite instance in a temporary folder, real runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from dagster import AssetCheckResult, DagsterInstance, asset, asset_check, materialize

from oabench_pipeline.schema_probes import remember_schema_probes


@asset
def a_table() -> int:
    return 1


@asset_check(asset=a_table)
def a_table_is_one() -> AssetCheckResult:
    return AssetCheckResult(passed=True)


def _counting(storage: Any, name: str) -> list[tuple[Any, ...]]:
    """Record each call that reaches the storage's own `name` (the probe beneath the remembering one)."""
    calls: list[tuple[Any, ...]] = []
    probe: Callable[..., bool] = getattr(storage, name)

    def counted(*args: Any) -> bool:
        calls.append(args)
        return probe(*args)

    setattr(storage, name, counted)
    return calls


def test_a_yes_is_asked_once_across_runs(tmp_path: Path) -> None:
    instance = DagsterInstance.local_temp(str(tmp_path))
    storage: Any = instance.event_log_storage  # a SqliteEventLogStorage
    table_probes = _counting(storage, "has_table")
    run_column_probes = _counting(instance.run_storage, "has_run_stats_index_cols")
    remember_schema_probes(instance)
    remember_schema_probes(instance)  # a second call changes nothing
    for _ in range(3):
        result = materialize([a_table, a_table_is_one], instance=instance)
        assert result.success
        (evaluation,) = result.get_asset_check_evaluations()
        assert evaluation.passed
    # Every check evaluation asks whether the checks' table exists: it was asked once.
    assert table_probes.count(("asset_check_executions",)) == 1
    assert len(run_column_probes) == 1
    assert storage.has_table("asset_check_executions")
    instance.dispose()


def test_a_no_is_asked_again(tmp_path: Path) -> None:
    """A migration in another process may add a table while this one runs: a "no" is not kept."""
    instance = DagsterInstance.local_temp(str(tmp_path))
    storage: Any = instance.event_log_storage  # a SqliteEventLogStorage
    remember_schema_probes(instance)
    assert storage.has_table("added_by_a_migration") is False
    with closing(sqlite3.connect(storage.path_for_shard("index"))) as other:
        other.execute("create table added_by_a_migration (id integer)")
        other.commit()
    assert storage.has_table("added_by_a_migration") is True
    instance.dispose()
