"""One open SQLite connection per event-log file of the instance, instead of one per event stored.

Dagster's default event log (`SqliteEventLogStorage`: a file per run, plus `index.db` across runs, both in
WAL mode) opens a connection, writes, commits and closes for every event, under one lock for the whole
instance. Closing the last connection of a WAL database checkpoints it (copies the log into the database)
and deletes the log: each event paid for a checkpoint, and an asset event three of them (its run's file,
then `index.db` twice). `oabench run` runs cells in threads whose events all queue on that lock, so the
bookkeeping, not the cells, set the wall time of a many-cell run.

Kept open, a connection commits each event exactly as before (same statements, same transaction per use,
the same durability: the WAL is synced at each commit), and SQLite checkpoints when the log grows
(1,000 pages) or when the connection closes: at eviction, `instance.dispose()`, or the process's end. A
reader in another process (the UI, `dagster`, `oabench status`) sees each commit at once, as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Event-log files kept open at once: the running cells' files and `index.db`. The least recently used is
# closed beyond this (a finished run's file is written no more).
KEPT_OPEN = 32


def keep_event_log_connections(event_log_storage: Any) -> None:
    """Make `event_log_storage` (a `SqliteEventLogStorage`) keep its connections open. Other storages
    (Postgres, the consolidated SQLite one) are left alone; a second call changes nothing."""
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

    if type(event_log_storage) is not SqliteEventLogStorage:
        return
    storage: Any = event_log_storage  # its methods are replaced on this one object, not on the class
    if hasattr(storage, "_open_connections"):
        return
    connections = _OpenConnections(storage)
    storage._open_connections = connections
    storage._connect = connections.connect
    storage.dispose = _closing_first(connections, storage.dispose)
    storage.wipe = _closing_first(connections, storage.wipe)  # it deletes the files


def _closing_first(connections: _OpenConnections, method: Callable[[], None]) -> Callable[[], None]:
    def close_then_call() -> None:
        connections.close_all()
        method()

    return close_then_call


class _OpenConnections:
    """The storage's `_connect(shard)`, with the connection kept per shard (file) between uses.

    Used under the storage's own lock, as Dagster's is: one thread at a time uses a connection (hence
    `check_same_thread=False`), and no use is nested in another (the lock is not re-entrant).
    """

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.open: OrderedDict[str, Any] = OrderedDict()
        self.lock: threading.Lock = storage._db_lock

    @contextmanager
    def connect(self, shard: str) -> Iterator[Any]:
        with self.lock:
            connection = self.open.get(shard)
            if connection is None:
                connection = self._keep(shard)
            self.open.move_to_end(shard)
            try:
                with connection.begin():
                    yield connection
            except BaseException:
                self._close(shard)  # rolled back; a connection an error went through is not reused
                raise

    def close_all(self) -> None:
        with self.lock:
            for shard in list(self.open):
                self._close(shard)

    def _keep(self, shard: str) -> Any:
        connection = self.open[shard] = self._open(shard)
        while len(self.open) > KEPT_OPEN:
            self._close(next(iter(self.open)))
        return connection

    def _open(self, shard: str) -> Any:
        from dagster._core.storage.event_log.sqlite import sqlite_event_log as dagster_module
        from sqlalchemy.pool import NullPool

        storage = self.storage
        engine = dagster_module.create_engine(  # the module's own, as its `_connect` calls it
            storage.conn_string_for_shard(shard),
            poolclass=NullPool,
            connect_args={"timeout": dagster_module.SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
        )
        if shard not in storage._initialized_dbs:
            storage._initdb(engine)
            storage._initialized_dbs.add(shard)
        return engine.connect()

    def _close(self, shard: str) -> None:
        connection = self.open.pop(shard, None)
        if connection is not None:
            connection.close()
