"""The instance's event log keeps one connection per file open (`oabench_pipeline/event_log_connections.py`):
every event is still committed as it is stored, readers elsewhere see it at once, and nothing is left
open once the instance is disposed. A real SQLite instance in a temporary folder, real runs."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
import sqlalchemy as db
from dagster import DagsterInstance, asset, materialize

from oabench_pipeline.event_log_connections import keep_event_log_connections


@asset
def a_table() -> int:
    return 1


def _count_in_another_connection(database: str, query: str) -> int:
    """What another process would read: a plain sqlite3 connection of its own."""
    with closing(sqlite3.connect(database)) as other:
        return int(other.execute(query).fetchone()[0])


def test_each_event_is_committed_and_disposing_closes_every_file(tmp_path: Path) -> None:
    instance = DagsterInstance.local_temp(str(tmp_path))
    storage = instance.event_log_storage
    keep_event_log_connections(storage)
    result = materialize([a_table], instance=instance)
    assert result.success
    run_file = storage.path_for_shard(result.run_id)
    index_file = storage.path_for_shard("index")
    # Kept open: the run's write-ahead log was not checkpointed away after each event...
    assert Path(run_file + "-wal").exists()
    # ...and yet every event the instance holds is already committed, readable from elsewhere.
    stored = len(instance.all_logs(result.run_id))
    assert _count_in_another_connection(run_file, "select count(*) from event_logs") == stored
    assert _count_in_another_connection(index_file, "select count(*) from asset_keys") == 1
    instance.dispose()
    assert not Path(run_file + "-wal").exists()  # closed, so checkpointed into the file
    assert not Path(index_file + "-wal").exists()


def test_a_failed_use_is_rolled_back_and_the_next_one_commits(tmp_path: Path) -> None:
    instance = DagsterInstance.local_temp(str(tmp_path))
    storage = instance.event_log_storage
    keep_event_log_connections(storage)
    insert = db.text("insert into dynamic_partitions (partitions_def_name, partition) values ('d', :key)")
    with pytest.raises(RuntimeError), storage.index_connection() as connection:
        connection.execute(insert, {"key": "lost"})
        raise RuntimeError("a failure half-way through a use")
    with storage.index_connection() as connection:
        connection.execute(insert, {"key": "kept"})
    assert storage.get_dynamic_partitions("d") == ["kept"]
    instance.dispose()


def test_threads_store_events_of_their_own_runs_at_once(tmp_path: Path) -> None:
    """The shape of `oabench run`: one run per thread, every event through the one storage."""
    instance = DagsterInstance.local_temp(str(tmp_path))
    keep_event_log_connections(instance.event_log_storage)
    results = []

    def one_run() -> None:
        results.append(materialize([a_table], instance=instance))

    threads = [threading.Thread(target=one_run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.success for r in results] == [True] * 6
    record = instance.get_latest_materialization_event(a_table.key)
    assert record is not None and record.run_id in {r.run_id for r in results}
    assert len(instance.get_records_for_run(results[0].run_id).records) == len(
        instance.all_logs(results[0].run_id)
    )
    instance.dispose()
