"""The one place that writes the warehouse.

Layout under the warehouse folder (default `warehouse/`, beside `oabench.duckdb`):

    tables/<table>/<partition>.parquet   one file per partition, replaced atomically (write, fsync, rename)
    oabench.duckdb                       views over those files, for `duckdb warehouse/oabench.duckdb`
    raw/<sha256>                         official PDFs, content-addressed (see exams/raw_store.py)

Why: DuckDB allows one writing process, while Dagster backfills run many steps at once. Steps therefore
never write the DuckDB file to store data: each writes its own partition file, which needs no lock and
replaces exactly that partition's rows. The DuckDB file only holds views; it is opened for writing (under
a file lock, with retries) just when a table appears for the first time or the warehouse moved. Readers
use an in-memory DuckDB over the same Parquet files, so they never contend for the file lock either.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, unquote

import duckdb
import polars as pl
from filelock import FileLock

from oabench_pipeline.tables import TABLES, conform, empty_frame

UNPARTITIONED = "all"
STALE_TEMPORARY_S = 3600.0  # a write takes seconds; an older temporary was left by a killed process
VIEW_LOCK_TIMEOUT_S = 60.0


def partition_file_name(partition_key: str) -> str:
    """A file name for any partition key (model keys hold `/`, `:`, quotes, unicode)."""
    return quote(partition_key, safe="") + ".parquet"


def partition_key_of(path: Path) -> str:
    return unquote(path.name.removesuffix(".parquet"))


def _remove_stale_temporaries(folder: Path) -> None:
    """Delete `.<uuid>.tmp` files a killed writer left behind (never one a live writer may still be using)."""
    cutoff = time.time() - STALE_TEMPORARY_S
    for leftover in folder.glob(".*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class Warehouse:
    """Partitioned Parquet tables with a DuckDB catalogue of views over them."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path.resolve()
        self.root = self.db_path.parent
        self.tables_dir = self.root / "tables"

    def table_dir(self, table: str) -> Path:
        return self.tables_dir / table

    def partition_path(self, table: str, partition_key: str = UNPARTITIONED) -> Path:
        return self.table_dir(table) / partition_file_name(partition_key)

    def has_table(self, table: str) -> bool:
        return any(self.table_dir(table).glob("*.parquet"))

    def partitions(self, table: str) -> list[str]:
        return sorted(partition_key_of(p) for p in self.table_dir(table).glob("*.parquet"))

    # -- writing ---------------------------------------------------------------------------------------

    def write_partition(self, table: str, frame: pl.DataFrame, partition_key: str = UNPARTITIONED) -> Path:
        """Replace one partition's rows with `frame`, atomically: readers see the old or the new file."""
        frame = conform(table, frame)
        target = self.partition_path(table, partition_key)
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{uuid.uuid4().hex}.tmp")
        try:
            frame.write_parquet(staged)
            with staged.open("rb") as handle:
                os.fsync(handle.fileno())
            os.replace(staged, target)
        finally:
            staged.unlink(missing_ok=True)
        _remove_stale_temporaries(target.parent)
        self.ensure_views()
        return target

    # -- reading ---------------------------------------------------------------------------------------

    def read(self, table: str, partition_key: str | None = None) -> pl.DataFrame:
        """One partition, or the whole table; an empty frame when nothing was written yet."""
        if partition_key is not None:
            path = self.partition_path(table, partition_key)
            return pl.read_parquet(path) if path.is_file() else pl.DataFrame()
        if not self.has_table(table):
            return pl.DataFrame()
        return pl.read_parquet(self.table_dir(table) / "*.parquet", missing_columns="insert")

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory DuckDB with every table as a view: no lock on the warehouse file.

        A contracted table with no file yet appears empty (with its columns), so queries need not care
        whether, say, a price snapshot was ever taken.
        """
        con = duckdb.connect()
        try:
            statements = self._view_statements()
            for statement in statements.values():
                con.execute(statement)
            for table in TABLES.keys() - statements.keys():
                con.register(table, empty_frame(table))
            yield con
        finally:
            con.close()

    def query(self, sql: str, params: list | dict | None = None) -> pl.DataFrame:
        with self.reader() as con:
            return con.sql(sql, params=params).pl()

    # -- the DuckDB catalogue ----------------------------------------------------------------------------

    def _tables(self) -> list[str]:
        if not self.tables_dir.is_dir():
            return []
        return sorted(p.name for p in self.tables_dir.iterdir() if p.is_dir() and any(p.glob("*.parquet")))

    def _view_statements(self) -> dict[str, str]:
        return {
            table: (
                f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet('
                f"{_sql_literal(str(self.table_dir(table) / '*.parquet'))}, union_by_name = true)"
            )
            for table in self._tables()
        }

    @property
    def _catalogue_marker(self) -> Path:
        return self.tables_dir / ".views.json"

    def ensure_views(self) -> None:
        """Create the DuckDB views for any table that has none yet (a no-op most of the time)."""
        statements = self._view_statements()
        wanted = {"root": str(self.root), "tables": sorted(statements)}
        if self._read_marker() == wanted and self.db_path.exists():
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.db_path) + ".lock", timeout=VIEW_LOCK_TIMEOUT_S):
            with _connect_with_retry(self.db_path) as con:
                for statement in statements.values():
                    con.execute(statement)
            self._catalogue_marker.write_text(json.dumps(wanted), encoding="utf-8")

    def _read_marker(self) -> dict | None:
        try:
            return json.loads(self._catalogue_marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


@contextmanager
def _connect_with_retry(
    db_path: Path, attempts: int = 40, pause_s: float = 0.25
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the DuckDB file for writing, waiting while another process (say, a user's shell) holds it."""
    for attempt in range(attempts):
        try:
            con = duckdb.connect(str(db_path))
            break
        except duckdb.IOException as error:
            if "lock" not in str(error).lower() or attempt == attempts - 1:
                raise
            time.sleep(min(pause_s * 2**attempt, 2.0))
    try:
        yield con
    finally:
        con.close()
