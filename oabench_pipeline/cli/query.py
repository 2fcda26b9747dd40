"""`oabench sql`: one read-only query over the warehouse's tables, from the shell.

It runs in the warehouse's in-memory reader (`Warehouse.reader()`: every table a view over its Parquet
files by absolute path), so it takes no lock on `oabench.duckdb` and works while a DuckDB session holds it.
Two walls keep it read-only:

- **DuckDB's own sandbox**, set before the query and then locked (`lock_configuration`): file access only
  under the warehouse folder (`allowed_directories`), no other external access (`enable_external_access
  = false`: no other file, no extension to install or load, no ATTACH). `read_csv('/etc/passwd')`,
  `glob('/root/*')` or a `COPY` outside end in DuckDB's `Permission Error`.
- **Only queries run**: DuckDB still lets a `COPY` write *inside* an allowed folder, so a statement is
  classified by DuckDB's own parser (`duckdb.extract_statements`, its statement type) and run only when
  it is a SELECT (SHOW, DESCRIBE, SUMMARIZE, FROM-first and PIVOT parse as SELECT) or an EXPLAIN
  [ANALYZE] of one. `EXPLAIN ANALYZE` executes what it explains, so the explained statement is parsed
  too: `explain analyze copy ... to ...` is a COPY and is refused.

Anything else (a COPY, an export, an ATTACH) is for the `duckdb` command line on `oabench.duckdb`.
"""

from __future__ import annotations

import duckdb
import polars as pl

from oabench_pipeline.warehouse import Warehouse

QUERY_STATEMENTS = frozenset({duckdb.StatementType.SELECT})


def elsewhere(warehouse: Warehouse) -> str:
    """Where a statement refused here can run: the duckdb command line on the catalogue (docs/sql.md)."""
    return f"anything else: the duckdb command line, `duckdb {warehouse.db_path}` (docs/sql.md)"


class QueryError(Exception):
    """The query was refused or failed; the message is one line."""


def run_read_only(warehouse: Warehouse, sql: str) -> pl.DataFrame:
    """The result of one read-only statement over the warehouse tables, inside DuckDB's sandbox."""
    statement = _one_statement(sql)
    refused = _writes(statement)
    if refused is not None:
        raise QueryError(
            f"read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not {refused}; {elsewhere(warehouse)}"
        )
    try:
        with warehouse.reader() as con:
            sandbox(con, warehouse)
            return con.sql(sql).pl()
    except duckdb.Error as error:
        raise QueryError(_one_line(error)) from None


def sandbox(con: duckdb.DuckDBPyConnection, warehouse: Warehouse) -> None:
    """Confine `con` to reading the warehouse folder, then lock its configuration (see module doc)."""
    folder = str(warehouse.root).rstrip("/") + "/"
    con.execute("SET allowed_directories = [$folder]", {"folder": folder})
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _one_statement(sql: str) -> duckdb.Statement:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as error:
        raise QueryError(_one_line(error)) from None
    if len(statements) != 1:
        raise QueryError(f"one statement at a time, got {len(statements)}")
    return statements[0]


def _writes(statement: duckdb.Statement) -> str | None:
    """None for a statement that only reads; else what it is (`COPY`, `EXPLAIN of COPY`, ...)."""
    kind = statement.type
    if kind in QUERY_STATEMENTS:
        return None
    if kind == duckdb.StatementType.EXPLAIN:
        explained = _explained(statement.query)
        if explained is None:
            return "an EXPLAIN whose statement could not be parsed on its own"
        inner = _writes(explained)
        return None if inner is None else f"EXPLAIN of {inner}"
    return kind.name


def _explained(sql: str) -> duckdb.Statement | None:
    """The statement an EXPLAIN [ANALYZE] [(options)] explains, found by DuckDB's parser: the first suffix
    of `sql`, starting at one of its tokens after EXPLAIN, that parses as exactly one statement."""
    tokens = [offset for offset, kind in duckdb.tokenize(sql) if kind != duckdb.token_type.comment]
    for offset in tokens[1:]:  # the first is EXPLAIN itself
        try:
            statements = duckdb.extract_statements(sql[offset:])
        except duckdb.Error:
            continue
        if len(statements) == 1:
            return statements[0]
    return None


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())
