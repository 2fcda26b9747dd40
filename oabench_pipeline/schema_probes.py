"""Dagster's SQLite storages ask about their own schema on every event; a "yes" is remembered.

Dagster 1.13 keeps working on instances that predate a migration by checking, as it goes, whether a
table, column or data migration exists: `SqliteEventLogStorage.has_table` (with a new SQLAlchemy engine
and connection each time) for every asset check event, the asset-key columns for every asset event,
`runs` columns at each run's start and end. `oabench run --suite all` of the two baselines is 58 runs of
about 30 events each, and py-spy showed these probes at 7-8% of each run's time (issue 19's 30 s target).

Only a "yes" is kept: a migration (`dagster instance migrate`, in any process) adds tables, columns and
data-migration marks but never takes one away, and `wipe` empties tables but keeps them and the marks.
A "no" is asked again each time, as before, so a migration run while this process lives is seen at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

# Probe methods on Dagster's SQL event-log and run storages, each (name, the arguments that say what it
# looks for). `_has_asset_key_col_on_connection(conn, column)`: the column, not the connection, is the key.
EVENT_LOG_PROBES: dict[str, Callable[..., Hashable]] = {
    "has_table": lambda table_name: table_name,
    "has_secondary_index": lambda name: name,
    "_has_asset_key_col_on_connection": lambda conn, column_name: column_name,
}
RUN_STORAGE_PROBES: dict[str, Callable[..., Hashable]] = {
    "has_built_index": lambda migration_name: migration_name,
    "has_run_stats_index_cols": lambda: (),
    "has_bulk_actions_selector_cols": lambda: (),
    "has_backfill_id_column": lambda: (),
    "has_bulk_action_job_name_column": lambda: (),
    "has_backfill_tags_table": lambda: (),
}


def remember_schema_probes(instance: Any) -> None:
    """Make `instance`'s SQL event-log and run storages (SQLite's, or Postgres's: the same probes, the same
    reasoning) remember each probe that answered yes. In-memory storages are left alone; a second call
    changes nothing."""
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage
    from dagster._core.storage.runs.sql_run_storage import SqlRunStorage

    storages: list[tuple[Any, type, dict[str, Callable[..., Hashable]]]] = [
        (instance.event_log_storage, SqlEventLogStorage, EVENT_LOG_PROBES),
        (instance.run_storage, SqlRunStorage, RUN_STORAGE_PROBES),
    ]
    for storage, base, probes in storages:
        if not isinstance(storage, base) or hasattr(storage, _MARK):
            continue
        known: set[tuple[str, Hashable]] = set()  # (probe, what it looked for) that said yes
        setattr(storage, _MARK, known)
        for name, key in probes.items():
            setattr(storage, name, _remembering_yes(known, name, getattr(storage, name), key))


_MARK = "_oabench_schema_yes"  # on a storage whose probes remember: what they said yes to


def _remembering_yes(
    known: set[tuple[str, Hashable]], name: str, probe: Callable[..., bool], key: Callable[..., Hashable]
) -> Callable[..., bool]:
    @functools.wraps(probe)
    def probe_once_yes(*args: Any, **kwargs: Any) -> bool:
        asked = (name, key(*args, **kwargs))
        if asked in known:
            return True
        answer = bool(probe(*args, **kwargs))
        if answer:
            known.add(asked)  # a set's add is atomic: the cells' threads share it safely
        return answer

    return probe_once_yes
