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
  it is a SELECT (SHOW, DESCRIBE, SUMMARIZE, FROM-first, UNPIVOT and a PIVOT with an `IN` list parse as
  SELECT) or an EXPLAIN [ANALYZE] of one. `EXPLAIN ANALYZE` executes what it explains, so the explained
  statement is parsed too: `explain analyze copy ... to ...` is a COPY and is refused. A PIVOT without
  an `IN` list parses as a MULTI statement (DuckDB first creates an in-memory ENUM of the pivoted values,
  then runs the query), whatever wraps it (`copy (pivot ...) to ...` too), so a MULTI runs only when no
  keyword of its tokens starts a statement other than a query (`WRITING_KEYWORDS`).

Bounded: spilling to disk is off (`temp_directory = ''`; DuckDB would otherwise add its temporary folder,
`<cwd>/.tmp/`, to the allowed directories, and a file there would be readable), memory is capped
(`memory_limit`, `--memory`, 2 GB by default instead of DuckDB's 80% of RAM) and so is time (`--timeout`,
120 s by default). The query runs on a worker thread so that the main thread can answer Ctrl-C (SIGINT,
SIGTERM) and the deadline with DuckDB's `interrupt()`, which stops it within a fraction of a second; a
second Ctrl-C exits at once.

Anything else (a COPY, an export, an ATTACH) is for the `duckdb` command line on `oabench.duckdb`.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from oabench_pipeline.inference import interrupts
from oabench_pipeline.warehouse import Warehouse

QUERY_STATEMENTS = frozenset({duckdb.StatementType.SELECT})
# The first words of every DuckDB statement that is not a query: a MULTI statement (a PIVOT without an IN
# list, whatever wraps it) runs only when none of its keyword tokens is one of these.
WRITING_KEYWORDS = frozenset(
    {
        "alter", "attach", "call", "checkpoint", "comment", "copy", "create", "deallocate", "delete",
        "detach", "drop", "execute", "export", "force", "import", "insert", "install", "load", "merge",
        "pragma", "prepare", "reset", "set", "truncate", "update", "use", "vacuum",
    }
)  # fmt: skip
DEFAULT_TIMEOUT_S = 120.0  # `oabench sql --timeout`: the analysis queries of docs/sql.md take well under 1 s
DEFAULT_MEMORY = "2GB"  # `--memory`: a join of every reply's raw text fits; DuckDB's default is 80% of RAM
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_OUT_OF_MEMORY = re.compile(r"Out of Memory Error: [^()]*\([^)]*\)")
POLL_S = 0.05  # how often the waiting thread looks at Ctrl-C and the deadline


@dataclass(frozen=True)
class QueryLimits:
    """How long a query may run (seconds) and how much memory DuckDB may take (a DuckDB size: `2GB`)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory: str = DEFAULT_MEMORY


def elsewhere(warehouse: Warehouse) -> str:
    """Where a statement refused here can run: the duckdb command line on the catalogue (docs/sql.md)."""
    return f"anything else: the duckdb command line, `duckdb {warehouse.db_path}` (docs/sql.md)"


class QueryError(Exception):
    """The query was refused or failed; the message is one line."""


class QueryInterrupted(QueryError):
    """Ctrl-C (SIGINT) or SIGTERM stopped the query; `exit_code` is 130 or 143."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_read_only(warehouse: Warehouse, sql: str, limits: QueryLimits | None = None) -> pl.DataFrame:
    """The result of one read-only statement over the warehouse tables, inside DuckDB's sandbox and limits."""
    limits = limits or QueryLimits()
    statement = _one_statement(sql)
    refused = _writes(statement)
    if refused is not None:
        raise QueryError(
            f"read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not {refused}; {elsewhere(warehouse)}"
        )
    try:
        with warehouse.reader() as con:
            sandbox(con, warehouse, limits.memory)
            return _run_stoppably(con, sql, limits)
    except duckdb.OutOfMemoryException as error:
        found = _OUT_OF_MEMORY.match(_one_line(error))  # DuckDB's advice after it (SET ...) cannot apply here
        raise QueryError(
            f"{found.group() if found else _one_line(error)}; the limit is --memory {limits.memory}: raise it "
            "(e.g. --memory 8GB) or narrow the query"
        ) from None
    except duckdb.Error as error:
        raise QueryError(_one_line(error)) from None


def sandbox(con: duckdb.DuckDBPyConnection, warehouse: Warehouse, memory: str = DEFAULT_MEMORY) -> None:
    """Confine `con` to reading the warehouse folder with bounded memory and no spilling, then lock its
    configuration (see module doc)."""
    folder = str(warehouse.root).rstrip("/") + "/"
    con.execute("SET temp_directory = ''")  # no spilling: else `<cwd>/.tmp/` is an allowed directory
    try:
        con.execute("SET memory_limit = $memory", {"memory": memory})
    except duckdb.Error as error:
        raise QueryError(f"--memory {memory!r}: {_one_line(error)} (a size such as 2GB or 512MB)") from None
    con.execute("SET allowed_directories = [$folder]", {"folder": folder})
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _run_stoppably(con: duckdb.DuckDBPyConnection, sql: str, limits: QueryLimits) -> pl.DataFrame:
    """Run `sql` on a worker thread; from this one, `con.interrupt()` at Ctrl-C/SIGTERM or the deadline.

    DuckDB holds the thread that runs a query until it ends (the GIL released, no Python bytecode run), so
    a signal handler on that thread would wait for the query: the waiting is done here instead.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["frame"] = con.sql(sql).pl()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error

    worker = threading.Thread(target=work, name="oabench-sql", daemon=True)
    deadline = time.monotonic() + limits.timeout_s
    stopped: str | None = None
    with interrupts.stop_on_signals():
        worker.start()
        while worker.is_alive():
            worker.join(POLL_S)
            if stopped is None:
                stopped = interrupts.requested() or ("timeout" if time.monotonic() > deadline else None)
            if stopped is not None and worker.is_alive():
                con.interrupt()  # again at each poll: one sent before the query began would be lost
    if stopped == "timeout":
        raise QueryError(
            f"stopped after {limits.timeout_s:g} s (--timeout {limits.timeout_s:g}); give it longer with "
            "--timeout SECONDS or narrow the query"
        )
    if stopped is not None:
        code = interrupts.exit_code()
        interrupts.reset()
        raise QueryInterrupted(stopped, code)
    if "error" in outcome:
        raise outcome["error"]
    frame: pl.DataFrame = outcome["frame"]
    return frame


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
    if kind == duckdb.StatementType.MULTI:  # a PIVOT without an IN list, in whatever statement holds it
        words = _keywords(statement.query) & WRITING_KEYWORDS
        return None if not words else f"{min(words).upper()} (around a PIVOT)"
    if kind == duckdb.StatementType.EXPLAIN:
        explained = _explained(statement.query)
        if explained is None:
            return "an EXPLAIN whose statement could not be parsed on its own"
        inner = _writes(explained)
        return None if inner is None else f"EXPLAIN of {inner}"
    return kind.name


def _keywords(sql: str) -> set[str]:
    """The keywords among `sql`'s tokens (not identifiers, strings or comments), lower-cased."""
    words = (
        _WORD.match(sql, offset) for offset, kind in duckdb.tokenize(sql) if kind == duckdb.token_type.keyword
    )
    return {word.group().lower() for word in words if word}


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
