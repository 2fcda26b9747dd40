"""The one place that writes the warehouse.

Layout under the warehouse folder (default `warehouse/`, beside `oabench.duckdb`):

    tables/<table>/<partition>.parquet   one file per partition, replaced atomically (write, fsync, rename)
    oabench.duckdb                       views over those files, for `duckdb warehouse/oabench.duckdb`
    raw/<sha256>                         official PDFs, content-addressed (see shared/raw_store.py)

Why: DuckDB allows one writing process, while Dagster backfills run many steps at once. Steps therefore
never write the DuckDB file to store data: each writes its own partition file, which needs no lock and
replaces exactly that partition's rows. The DuckDB file only holds views, derived from the files: it is
rebuilt whenever it is missing, emptied, outdated or copied from elsewhere (see `ensure_views`). Readers
use an in-memory DuckDB over the same Parquet files, so they never contend for the file lock either.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote, unquote

import polars as pl
from filelock import FileLock
from filelock import Timeout as FileLockTimeout

from oabench_pipeline.core.files import write_atomically
from oabench_pipeline.core.tables import TABLES, conform, empty_frame

# duckdb (~0.1 s to import) is imported inside the methods that open a connection: every run's process loads
# this module with the Dagster definitions (the warehouse resource), and many never query.
if TYPE_CHECKING:
    import duckdb

UNPARTITIONED = "all"
VERSION_METADATA = "oabench_version"  # Parquet key-value metadata: the code version that wrote the rows
# Parquet key-value metadata: the partition's data version (the one reported to Dagster), and the data
# versions of the partitions it was computed from (JSON, table → version): `inference/freshness.py` compares
# them, so "up to date" means what Dagster's data versions mean.
DATA_VERSION_METADATA = "oabench_data_version"
INPUTS_METADATA = "oabench_inputs"
STALE_TEMPORARY_S = 3600.0  # a write takes seconds; an older temporary was left by a killed process
CATALOGUE_LOCK_TIMEOUT_S = 60.0  # a user's DuckDB session holding the catalogue: wait this long, then fail
LOCK_POLL_S = 0.25
# Bump when the catalogue's views change shape: an older catalogue is then rebuilt by the next command.
CATALOGUE_VERSION = 2
# The storage format of the catalogue file: one the `duckdb` command line from PyPI (duckdb-cli 1.5) reads;
# the python package's default (2.0) is not readable by it.
CATALOGUE_STORAGE_VERSION = "v1.4.0"

T = TypeVar("T")
log = logging.getLogger(__name__)


def partition_file_name(partition_key: str) -> str:
    """A file name for any partition key (model keys hold `/`, `:`, quotes, unicode)."""
    return quote(partition_key, safe="") + ".parquet"


def partition_key_of(path: Path) -> str:
    return unquote(path.name.removesuffix(".parquet"))


ROW_GROUP_BYTES = 16 * 1024 * 1024  # polars encodes a whole row group at once: ~4× its bytes at the peak


def _rows_per_group(frame: pl.DataFrame) -> int | None:
    """Rows per Parquet row group so that one holds about `ROW_GROUP_BYTES` (None: polars' default, one
    group for any ordinary partition). A cell whose replies carry a megabyte of reasoning each is encoded a
    few replies at a time instead of whole (benchmarks/reasoning_memory.py)."""
    size = int(frame.estimated_size())
    if size <= ROW_GROUP_BYTES or frame.height <= 1:
        return None
    return max(1, frame.height * ROW_GROUP_BYTES // size)


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete `.<uuid>.tmp` files a killed writer left behind (never one a live writer may still be using)."""
    cutoff = time.time() - STALE_TEMPORARY_S
    for leftover in folder.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# Set inside `views_refreshed_once`: the warehouses whose catalogue a write left to refresh at its end.
_deferred_view_refresh: ContextVar[dict[Path, Warehouse] | None] = ContextVar(
    "oabench_deferred_view_refresh", default=None
)


@contextmanager
def views_refreshed_once() -> Iterator[None]:
    """Partition writes inside leave the catalogue alone; each warehouse written refreshes it once at the end.

    For a whole run (engine/runs.run_assets): the leaderboard step writes a dozen tables, and a fresh warehouse
    rebuilt its catalogue after each new one. Nothing inside a run reads the catalogue (steps read the
    files through an in-memory DuckDB), and a run killed before the end leaves partition files whose views
    the next `oabench` command makes, as after any crash.
    """
    pending: dict[Path, Warehouse] = {}
    token = _deferred_view_refresh.set(pending)
    try:
        yield
    finally:
        _deferred_view_refresh.reset(token)
    for warehouse in pending.values():
        warehouse.ensure_views()


class Warehouse:
    """Partitioned Parquet tables with a DuckDB catalogue of views over them."""

    def __init__(self, db_path: Path, lock_timeout_s: float = CATALOGUE_LOCK_TIMEOUT_S) -> None:
        self._given_path = db_path
        self.db_path = db_path.resolve()
        self.lock_timeout_s = lock_timeout_s
        self.root = self.db_path.parent
        self.tables_dir = self.root / "tables"
        self._metadata_cache: dict[Path, tuple[list[int], dict[str, str] | str]] = {}

    def table_dir(self, table: str) -> Path:
        return self.tables_dir / table

    def partition_path(self, table: str, partition_key: str = UNPARTITIONED) -> Path:
        return self.table_dir(table) / partition_file_name(partition_key)

    def has_table(self, table: str) -> bool:
        return any(self.table_dir(table).glob("*.parquet"))

    def partitions(self, table: str) -> list[str]:
        return sorted(partition_key_of(p) for p in self.table_dir(table).glob("*.parquet"))

    # -- writing ---------------------------------------------------------------------------------------

    def write_partition(
        self,
        table: str,
        frame: pl.DataFrame,
        partition_key: str = UNPARTITIONED,
        version: str | None = None,
        data_version: str | None = None,
        inputs: Mapping[str, str] | None = None,
    ) -> Path:
        """Replace one partition's rows with `frame`, atomically: readers see the old or the new file.

        `version`: the code version that computed the rows, kept in the file (`written_version`), so a
        command can tell rows an older version computed without asking Dagster. `data_version`: the rows'
        data version (`core/versions.py`), and `inputs`: the data versions of the partitions they were
        computed from (`input_versions`), both kept in the file so that freshness needs no Dagster.
        """
        frame = conform(table, frame)
        target = self.partition_path(table, partition_key)
        metadata = {VERSION_METADATA: version} if version else {}
        if data_version:
            metadata[DATA_VERSION_METADATA] = data_version
        if inputs is not None:
            metadata[INPUTS_METADATA] = json.dumps(dict(sorted(inputs.items())))
        # Encoded in memory first: polars reports a full disk as "Invalid thrift: transport error",
        # while a plain file write says ENOSPC, which the user can act on.
        encoded = io.BytesIO()
        frame.write_parquet(
            encoded,
            metadata=metadata or None,
            row_group_size=_rows_per_group(frame),
        )
        try:
            write_atomically(target, encoded.getvalue())
        except OSError as error:
            if error.errno == errno.ENOSPC:
                raise DiskFullError(
                    f"disk full writing {target}: free space on that disk and rerun "
                    f"(table {table}, partition {partition_key} keeps its previous rows)"
                ) from None
            raise
        _remove_stale_temporaries(target.parent)
        pending = _deferred_view_refresh.get()
        if pending is None:
            self.ensure_views()
        else:
            pending.setdefault(self.db_path, self)
        return target

    # -- reading ---------------------------------------------------------------------------------------

    def written_version(self, table: str, partition_key: str = UNPARTITIONED) -> str | None:
        """The code version a partition's rows were computed by (`write_partition(version=)`); None when
        the file is missing, unreadable, or was written without one (by an older release)."""
        return self.file_metadata(table, partition_key).get(VERSION_METADATA)

    def file_metadata(self, table: str, partition_key: str = UNPARTITIONED) -> dict[str, str]:
        """The partition file's key-value metadata (empty when the file is missing or unreadable).

        Remembered per file identity (inode, size, mtime): one command asks for an edition's questions once
        per cell, and a replaced file is read again."""
        metadata = self._footer(self.partition_path(table, partition_key))
        return metadata if isinstance(metadata, dict) else {}

    def _footer(self, path: Path) -> dict[str, str] | str | None:
        """The file's key-value metadata, read from its footer; text: why the footer cannot be read; None:
        no file. Remembered per file identity (inode, size, mtime): a replaced file is read again."""
        identity = _file_identity(path)
        if identity is None:
            return None
        cached = self._metadata_cache.get(path)
        if cached is not None and cached[0] == identity:
            return cached[1]
        footer: dict[str, str] | str
        try:
            footer = dict(pl.read_parquet_metadata(path))
        except (pl.exceptions.PolarsError, OSError) as error:
            footer = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        self._metadata_cache[path] = (identity, footer)
        return footer

    def data_version(self, table: str, partition_key: str, exclude: Iterable[str] = ()) -> str | None:
        """The partition's data version: the one written with it, else (a file an older release wrote)
        computed from its rows without `exclude`, as `core/versions.frame_version` does. None: no file."""
        if (recorded := self.file_metadata(table, partition_key).get(DATA_VERSION_METADATA)) is not None:
            return recorded
        if not self.partition_path(table, partition_key).is_file():
            return None
        from oabench_pipeline.core.versions import frame_version

        return frame_version(self.read(table, partition_key), exclude)

    def input_versions(self, inputs: Mapping[str, str]) -> dict[str, str]:
        """table → data version of each partition of `inputs` (table → partition key) that exists: what a
        partition computed from them records (`write_partition(inputs=)`)."""
        from oabench_pipeline.core.versions import exclude_from_version

        versions = {t: self.data_version(t, k, exclude_from_version(t)) for t, k in inputs.items()}
        return {table: version for table, version in versions.items() if version is not None}

    def recorded_inputs(self, table: str, partition_key: str) -> dict[str, str] | None:
        """The input data versions a partition was written with (None: written without, by an older release
        or by a path that does not record them)."""
        text = self.file_metadata(table, partition_key).get(INPUTS_METADATA)
        if text is None:
            return None
        try:
            recorded = json.loads(text)
        except ValueError:
            return None
        return recorded if isinstance(recorded, dict) else None

    def read(self, table: str, partition_key: str | None = None) -> pl.DataFrame:
        """One partition, or the whole table; an empty frame when nothing was written yet.

        An unreadable file raises `DamagedPartitionError`, whose message names the file and the remedy.
        """
        if partition_key is not None:
            path = self.partition_path(table, partition_key)
            if not path.is_file():
                return pl.DataFrame()
            try:
                return pl.read_parquet(path)
            except (pl.exceptions.PolarsError, OSError) as error:
                raise DamagedPartitionError(self, table, path, error) from None
        if not self.has_table(table):
            return pl.DataFrame()
        try:
            return pl.read_parquet(self.table_dir(table) / "*.parquet", missing_columns="insert")
        except (pl.exceptions.PolarsError, OSError) as error:
            self._raise_if_damaged([table])
            raise error

    def damaged_partitions(
        self, table: str, partition_keys: Iterable[str] | None = None, thorough: bool = True
    ) -> list[Path]:
        """The files of `table` (or of the given partitions) that cannot be read in full.

        `thorough=False` reads only each file's footer: enough for a truncated file (the common damage),
        and cheap enough for a large table checked on every command.
        """
        if partition_keys is None:
            paths = sorted(self.table_dir(table).glob("*.parquet"))
        else:
            paths = [p for k in partition_keys if (p := self.partition_path(table, k)).is_file()]
        if not thorough:  # the footer, as `file_metadata` reads it (once per file version)
            return [path for path in paths if isinstance(self._footer(path), str)]
        return [path for path in paths if _unreadable(path, thorough) is not None]

    def set_aside(self, path: Path) -> Path:
        """Move a damaged partition file out of its table (kept for inspection as `.<name>.damaged`).

        The table then reads as if the partition was never written, so the step that owns it rebuilds it.
        """
        aside = path.with_name(f".{path.name}.damaged")
        os.replace(path, aside)
        return aside

    def raise_damaged(self, table: str, path: Path) -> None:
        """Raise the one-line `DamagedPartitionError` for a file `damaged_partitions` returned."""
        raise DamagedPartitionError(self, table, path, _unreadable(path) or "unreadable")

    def _raise_if_damaged(
        self, tables: Iterable[str], leave_out: Mapping[str, Collection[str]] | None = None
    ) -> None:
        for table in tables:
            skipped = {partition_file_name(key) for key in (leave_out or {}).get(table, ())}
            for path in sorted(self.table_dir(table).glob("*.parquet")):
                if path.name in skipped:
                    continue
                if (problem := _unreadable(path)) is not None:
                    raise DamagedPartitionError(self, table, path, problem)

    @contextmanager
    def reader(
        self,
        leave_out: Mapping[str, Collection[str]] | None = None,
        tables: Collection[str] | None = None,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB with every table as a view: no lock on the warehouse file.

        A contracted table with no file yet appears empty (with its columns), so queries need not care
        whether, say, a price snapshot was ever taken. A query that fails on a damaged partition raises
        `DamagedPartitionError` naming it instead of DuckDB's message. A table whose damaged file keeps its
        view from being made (DuckDB reads every footer to bind it) gets no view, and only a query that
        names it fails so: one cell's damaged `scores` file must not stop every reader of `inferences`.
        `leave_out`: table → partition keys whose files the views skip (a reader over the healthy part of
        a table; see `scoring/inputs.py`). `tables`: only these get a view. Making a view reads the footer
        of every file of its table, so a query run once per cell names its tables: a reader over all of
        them costs ~60 ms of CPU.
        """
        import duckdb

        leave_out = leave_out or {}
        con = duckdb.connect()
        try:
            statements = self._view_statements(guarded=False, leave_out=leave_out, only=tables)
            wanted = TABLES.keys() if tables is None else TABLES.keys() & set(tables)
            without_view: dict[str, DamagedPartitionError] = {}
            for table, statement in statements.items():
                try:
                    con.execute(statement)
                except duckdb.Error:
                    try:
                        self._raise_if_damaged([table], leave_out)
                    except DamagedPartitionError as damage:
                        without_view[table] = damage
                        continue
                    self._raise_if_damaged(sorted(statements.keys() - without_view.keys()), leave_out)
                    raise
            for table in wanted - statements.keys():
                con.register(table, empty_frame(table))
            try:
                yield con
            except duckdb.Error as error:
                for table, damaged in without_view.items():
                    if re.search(rf"\b{re.escape(table)}\b", str(error)):
                        raise damaged from None
                self._raise_if_damaged(sorted(statements.keys() - without_view.keys()), leave_out)
                raise
        finally:
            con.close()

    @contextmanager
    def partitions_reader(self, partitions: Mapping[str, str]) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB holding one partition of each named table (table → partition key) as that
        table: what a step working on one cell reads, at a cost that does not grow with the warehouse."""
        import duckdb

        con = duckdb.connect()
        try:
            for table, partition_key in partitions.items():
                frame = self.read(table, partition_key)
                con.register(table, frame if frame.width else empty_frame(table))
            yield con
        finally:
            con.close()

    def query(
        self, sql: str, params: list | dict | None = None, tables: Collection[str] | None = None
    ) -> pl.DataFrame:
        """One query's result; `tables`: the tables it reads, when known (a cheaper reader, above)."""
        with self.reader(tables=tables) as con:
            return con.sql(sql, params=params).pl()

    def read_around_damage(
        self,
        read: Callable[[duckdb.DuckDBPyConnection], T],
        table: str,
        needed: Collection[str] = (),
        tables: Collection[str] | None = None,
    ) -> T:
        """`read(con)` in a `reader` whose view of `table` leaves out each damaged file it meets (but those
        of the partitions in `needed`, whose damage is raised): one cell's unreadable file must not stop a
        step that reads other cells (the models table, another cell's scores, the report's date). Costs
        nothing more while no file is damaged (each damaged file found costs one more try). `tables`: the
        only tables `read` names, when known (a cheaper reader, as `reader(tables=)`)."""
        skipped: list[str] = []
        while True:
            try:
                with self.reader(leave_out={table: skipped}, tables=tables) as con:
                    return read(con)
            except DamagedPartitionError as damage:
                if damage.table != table or damage.partition_key in (*needed, *skipped):
                    raise
                log.debug("left out of this read: %s", damage)
                skipped.append(damage.partition_key)

    # -- the DuckDB catalogue ----------------------------------------------------------------------------
    #
    # The catalogue is derived from the files, so it heals: `ensure_views()` (run by every `oabench`
    # command and every table write) rebuilds it when it is missing, emptied, from an older version or
    # built for another folder, and leaves a healthy file untouched (not even opened when its size and
    # time match what the last check recorded in `tables/.views.json`).

    def tables(self) -> list[str]:
        """The tables that have at least one partition file."""
        if not self.tables_dir.is_dir():
            return []
        return sorted(p.name for p in self.tables_dir.iterdir() if p.is_dir() and any(p.glob("*.parquet")))

    def _view_statements(
        self,
        guarded: bool = True,
        leave_out: Mapping[str, Collection[str]] | None = None,
        only: Collection[str] | None = None,
    ) -> dict[str, str]:
        """`CREATE VIEW` per table (per table of `only`, if given); `guarded` views fail in a copy of the
        catalogue (see `_place_guard`).

        A table with partitions in `leave_out` reads the list of its other files instead of its glob
        (and gets no view when none is left: the reader then registers it empty).
        """
        guard = f" WHERE {self._place_guard()}" if guarded else ""
        statements = {}
        for table in self.tables():
            if only is not None and table not in only:
                continue
            skipped = {partition_file_name(key) for key in (leave_out or {}).get(table, ())}
            if skipped:
                files = sorted(p for p in self.table_dir(table).glob("*.parquet") if p.name not in skipped)
                if not files:
                    continue
                source = "[" + ", ".join(_sql_literal(str(f)) for f in files) + "]"
            else:
                source = _sql_literal(str(self.table_dir(table) / "*.parquet"))
            statements[table] = (
                f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet('
                f"{source}, union_by_name = true){guard}"
            )
        return statements

    def _place_guard(self) -> str:
        """A condition true only when the catalogue this view lives in is the file it was built as.

        Views hold absolute paths (DuckDB resolves relative ones against the reader's working directory,
        not the catalogue's folder), so a copied catalogue would silently read the original's files. The
        guard compares the paths DuckDB reports for the attached databases with this file's path and
        otherwise fails with `error(...)`; DuckDB evaluates it once per query, so an empty table fails too.
        """
        places = sorted({str(self.db_path), os.path.abspath(self._given_path)})
        message = (
            f"this DuckDB catalogue was built for {self.db_path}: the warehouse was copied or moved. "
            "Run an `oabench` command (e.g. `oabench status`) with OABENCH_WAREHOUSE set to the new "
            "catalogue to rebuild its views for the new place"
        )
        return (
            "EXISTS (SELECT 1 FROM duckdb_databases() WHERE path IN ("
            + ", ".join(_sql_literal(p) for p in places)
            + f")) OR error({_sql_literal(message)})"
        )

    @property
    def _catalogue_marker(self) -> Path:
        return self.tables_dir / ".views.json"

    def _fingerprint(self, statements: dict[str, str]) -> str:
        text = json.dumps([CATALOGUE_VERSION, CATALOGUE_STORAGE_VERSION, sorted(statements.items())])
        return hashlib.sha256(text.encode()).hexdigest()

    def ensure_views(self) -> bool:
        """Make the catalogue hold exactly the views of today's tables; True when it had to be rebuilt."""
        statements = self._view_statements()
        fingerprint = self._fingerprint(statements)
        marker = self._read_marker()
        if marker is not None and marker == {
            "fingerprint": fingerprint,
            "file": _file_identity(self.db_path),
        }:
            return False
        if self._catalogue_fingerprint() == fingerprint:
            self._write_marker(fingerprint)  # healthy, touched by someone else (say a DuckDB session)
            return False
        # Threads of this process (cells run at once) take turns here, quietly: the file lock below is
        # for other processes, and its message says so.
        with _thread_lock(self.db_path):
            return self._ensure_views_locked(statements, fingerprint)

    def _ensure_views_locked(self, statements: dict[str, str], fingerprint: str) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        self.tables_dir.mkdir(exist_ok=True)
        lock = FileLock(str(self.db_path) + ".lock", timeout=self.lock_timeout_s)
        try:
            lock.acquire(timeout=0)
        except FileLockTimeout:
            log.warning(
                "waiting for another oabench process refreshing the catalogue (%s.lock), up to %.0f s",
                self.db_path,
                self.lock_timeout_s,
            )
        else:
            lock.release()
        try:
            with lock:
                # Another process may have rebuilt it while this one waited for the lock.
                if self._catalogue_fingerprint() == fingerprint:
                    self._write_marker(fingerprint)
                    return False
                complete = self._rebuild_catalogue(statements, fingerprint)
        except FileLockTimeout:
            raise CatalogueLockedError(
                f"another oabench process kept the catalogue lock {self.db_path}.lock for more than "
                f"{self.lock_timeout_s:.0f} s; rerun when it has finished"
            ) from None
        if complete:
            self._write_marker(fingerprint)
        return True

    def _catalogue_fingerprint(self) -> str | None:
        """The fingerprint recorded inside the catalogue file; None when absent, unreadable or locked."""
        import duckdb

        if not self.db_path.is_file() or self.db_path.stat().st_size == 0:
            return None
        try:
            with contextlib.closing(duckdb.connect(str(self.db_path), read_only=True)) as con:
                found = con.execute(
                    "SELECT fingerprint FROM main._oabench_catalogue WHERE version = ?", [CATALOGUE_VERSION]
                ).fetchone()
                views = {
                    row[0]
                    for row in con.execute(
                        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
                    ).fetchall()
                }
        except duckdb.Error:
            return None
        if found is None or views != {*self.tables(), "_oabench_catalogue"}:
            return None
        return found[0]

    def _rebuild_catalogue(self, statements: dict[str, str], fingerprint: str) -> bool:
        """Write a fresh catalogue beside the old one and rename it over it (readers see old or new).

        A fresh file, rather than views replaced in place, also upgrades the storage format: the file is
        written in a format the `duckdb` command line (PyPI `duckdb-cli`, 1.5) reads too. The old file's
        DuckDB lock is taken first, so a session still holding it (a user's `duckdb` shell) is waited for
        (bounded, with a message naming its process) instead of being pulled from under it.
        """
        import duckdb

        self._wait_for_duckdb_lock()
        staged = self.db_path.with_name(f".{self.db_path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with contextlib.closing(
                duckdb.connect(
                    str(staged), config={"storage_compatibility_version": CATALOGUE_STORAGE_VERSION}
                )
            ) as con:
                skipped = self._create_views(con, statements)
                if skipped:  # recorded as unfinished, so the next check tries again once they are rebuilt
                    fingerprint = "incomplete: " + ", ".join(skipped)
                con.execute(
                    "CREATE VIEW _oabench_catalogue AS SELECT "
                    f"{CATALOGUE_VERSION} AS version, {_sql_literal(fingerprint)} AS fingerprint, "
                    f"{_sql_literal(str(self.root))} AS warehouse"
                )
                con.execute("CHECKPOINT")
            with staged.open("rb") as handle:
                os.fsync(handle.fileno())
            os.replace(staged, self.db_path)
            Path(str(self.db_path) + ".wal").unlink(missing_ok=True)
            return not skipped
        finally:
            staged.unlink(missing_ok=True)
            Path(str(staged) + ".wal").unlink(missing_ok=True)

    def _create_views(self, con: duckdb.DuckDBPyConnection, statements: dict[str, str]) -> list[str]:
        """Create each view; a table with a damaged file gets none (DuckDB reads files to bind a view).

        Returns the tables left out, each announced with its one-line `DamagedPartitionError` message.
        """
        import duckdb

        skipped = []
        for table, statement in statements.items():
            try:
                con.execute(statement)
            except duckdb.Error:
                try:
                    self._raise_if_damaged([table])
                except DamagedPartitionError as damage:
                    log.warning("no view for %s: %s", table, damage)
                    skipped.append(table)
                    continue
                raise
        return skipped

    def _wait_for_duckdb_lock(self) -> None:
        """Wait (bounded) until no other process holds the catalogue's DuckDB lock."""
        import duckdb

        if not self.db_path.is_file():
            return
        deadline = time.monotonic() + self.lock_timeout_s
        announced = False
        while True:
            try:
                duckdb.connect(str(self.db_path)).close()
                return
            except duckdb.Error as error:
                text = str(error)
                if "lock" not in text.lower():
                    return  # not a DuckDB file we can open (emptied, damaged, newer): it is replaced
                holder = _lock_holder(text)
                if time.monotonic() >= deadline:
                    raise CatalogueLockedError(
                        f"the DuckDB catalogue {self.db_path} is still locked by {holder} after "
                        f"{self.lock_timeout_s:.0f} s: close that DuckDB session and rerun"
                    ) from None
                if not announced:
                    log.warning(
                        "waiting for the DuckDB catalogue lock held by %s on %s (up to %.0f s)",
                        holder,
                        self.db_path,
                        self.lock_timeout_s,
                    )
                    announced = True
                time.sleep(LOCK_POLL_S)

    def _read_marker(self) -> dict | None:
        try:
            return json.loads(self._catalogue_marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _write_marker(self, fingerprint: str) -> None:
        marker = {"fingerprint": fingerprint, "file": _file_identity(self.db_path)}
        write_atomically(self._catalogue_marker, json.dumps(marker))


class WarehouseError(Exception):
    """A problem with the warehouse whose message (one line) says what, where and what to do."""


class DamagedPartitionError(WarehouseError):
    def __init__(self, warehouse: Warehouse, table: str, path: Path, problem: object) -> None:
        self.table, self.path = table, path
        self.partition_key = partition_key_of(path)
        detail = str(problem).strip().splitlines()[0] if str(problem).strip() else type(problem).__name__
        super().__init__(
            f"table {table}, partition {self.partition_key}: {path} is unreadable ({detail}); "
            f"{repair_hint(table, self.partition_key)}"
        )


class CatalogueLockedError(WarehouseError):
    pass


class DiskFullError(WarehouseError):
    pass


def repair_hint(table: str, partition_key: str) -> str:
    """What rebuilds a table's partition (the damaged file is set aside by that command)."""
    if table in ("questions", "answer_keys", "source_files"):
        return f"`oabench ingest --editions {partition_key}` rebuilds it from the stored PDFs"
    if table in ("inferences", "scores"):
        edition, _, model = partition_key.partition("|")
        return (
            f"`oabench run --models {model} --editions {edition}` rebuilds it from the response log "
            "(no request is sent)"
        )
    return "`oabench run` rebuilds it"


def _unreadable(path: Path, thorough: bool = True) -> str | None:
    """Why a Parquet file cannot be read in full, or (not `thorough`) its footer (None: it can)."""
    # Imported here: pyarrow (with numpy) is a sixth of a second of every cell run's start-up, and only
    # damage checks need it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if thorough:
            _read_in_full(path)
        else:
            pq.read_metadata(path)
    except (pa.ArrowException, OSError) as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return None


def _read_in_full(path: Path) -> None:
    """Read every row group of `path` as `pq.read_table` does, raising what it raises.

    `ParquetFile` reads a healthy file without the dataset layer, whose first use in a process costs ~0.2 s
    of CPU (every `oabench run` checks the exam tables so); a file it cannot read is read again by
    `read_table`, whose error (naming the file) is the one said to the user.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as parquet:
            parquet.read()
    except (pa.ArrowException, OSError):
        pq.read_table(path)


def _file_identity(path: Path) -> list[int] | None:
    """What changes when a file is replaced, emptied or rewritten (inode, size, mtime)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def _lock_holder(message: str) -> str:
    """`PID 1234 (/usr/bin/duckdb)` from DuckDB's lock error, when it names the holder."""
    found = re.search(r"Conflicting lock is held in (.+?) \(PID (\d+)\)", message)
    if found:
        return f"PID {found.group(2)} ({found.group(1)})"
    found = re.search(r"PID (\d+)", message)
    return f"PID {found.group(1)}" if found else "another process"


_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


def _thread_lock(db_path: Path) -> threading.Lock:
    """One lock per catalogue for the threads of this process."""
    with _thread_locks_guard:
        return _thread_locks.setdefault(str(db_path), threading.Lock())
