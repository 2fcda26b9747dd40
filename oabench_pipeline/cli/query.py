"""`oabench sql`: one read-only query over the warehouse's tables, from the shell.

It runs in the warehouse's in-memory reader (`Warehouse.reader()`: every table a view over its Parquet
files), so it takes no lock on `oabench.duckdb` and needs no DuckDB command-line tool. Only queries are
accepted (SELECT, including SHOW / DESCRIBE / SUMMARIZE, and EXPLAIN): a COPY, CREATE, ATTACH or SET
is refused before it runs, so nothing can be written through it.
"""

from __future__ import annotations

import duckdb
import polars as pl

from oabench_pipeline.warehouse import Warehouse

READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class QueryError(Exception):
    """The query was refused or failed; the message is one line."""


def run_read_only(warehouse: Warehouse, sql: str) -> pl.DataFrame:
    """The result of one read-only statement over the warehouse tables."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(_one_line(error)) from None
    if len(statements) != 1:
        raise QueryError(f"one statement at a time, got {len(statements)}")
    kind = statements[0].type
    if kind not in READ_ONLY_STATEMENTS:
        raise QueryError(f"read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not {kind.name}")
    try:
        return warehouse.query(sql)
    except duckdb.Error as error:
        raise QueryError(_one_line(error)) from None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
