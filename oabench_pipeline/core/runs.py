"""Runs as replicates: which run of a benchmark cell counts, and how runs of one key vary.

A *run* is one logical attempt at a model key's questions, stable across resumes:
- live: `live:<model key>:r<k>`, the k-th replicate `oabench run --replicates` asked for (replicate 1 is
  the plain run every earlier version made; its request hashes are unchanged);
- baseline: `baseline:<model key>` (deterministic, so one run is all there is);
- imported: the published folder's name (OABench's `runId`).

A run's part in one edition is a *run cell*. It is **complete** when
- imported: the run's `summary.json` lists the edition (OABench writes it only for editions it finished;
  a folder without a summary is an aborted run: kept, never complete);
- live or baseline: every active question has a reply (valid or not) and no error row remains.
A complete run cell's completion time is the summary's `completedAt` (imported) or its last answer.
The k-th complete run cell of a (model key, edition) by completion time is its **replicate k**; the
**canonical** run cell is the newest complete one (optionally: completed before the end of an `as_of`
day, UTC). A cell with no complete run falls back to its newest started run, which is shown but never
ranked.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import polars as pl

from oabench_pipeline.core.scoring import QUESTION_STATUS_SQL
from oabench_pipeline.core.tables import column_names

# duckdb is imported inside the one function that queries: every run's process loads this module with the
# Dagster definitions, and most never call it.
if TYPE_CHECKING:
    import duckdb

RUN_SUMMARIES_TABLE = "published_run_summaries"

_RUN_CELLS_SQL = f"""
WITH active AS (
    SELECT q.edition, count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'active') AS active
    FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid
    GROUP BY q.edition
)
SELECT i.model_key, i.edition::INTEGER AS edition, i.run_id,
       any_value(i.source) AS source,
       min(i.created_at) AS started_at,
       max(i.created_at) AS last_answer_at,
       count(DISTINCT i.qid) FILTER (
           WHERE {QUESTION_STATUS_SQL} = 'active' AND NOT coalesce(i.skipped, FALSE) AND i.error IS NULL
       ) AS replied,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'active' AND i.error IS NOT NULL) AS error_rows,
       any_value(a.active) AS active
FROM inferences AS i
JOIN questions AS q ON q.qid = i.qid
LEFT JOIN answer_keys AS k ON k.qid = q.qid
LEFT JOIN active AS a ON a.edition = q.edition
GROUP BY i.model_key, i.edition, i.run_id
"""

RUN_CELL_SCHEMA = {
    "model_key": pl.String(),
    "edition": pl.Int32(),
    "run_id": pl.String(),
    "source": pl.String(),
    "started_at": pl.Datetime("us", "UTC"),
    "completed_at": pl.Datetime("us", "UTC"),
    "complete": pl.Boolean(),
    "replicate": pl.Int64(),
}


def live_run_id(model_key: str, replicate: int) -> str:
    """The logical id of a live run: the same for every resume of that replicate."""
    return f"live:{model_key}:r{replicate}"


def baseline_run_id(model_key: str) -> str:
    return f"baseline:{model_key}"


def replicate_of(run_id: str | None, model_key: str) -> int | None:
    """k for `live:<model_key>:r<k>`, else None."""
    prefix = f"live:{model_key}:r"
    if run_id is None or not run_id.startswith(prefix) or not run_id[len(prefix) :].isdigit():
        return None
    return int(run_id[len(prefix) :])


def with_logical_run_ids(rows: pl.DataFrame, model_key: str) -> pl.DataFrame:
    """Rows written before runs existed carry the Dagster run id: a live row becomes replicate 1 (the
    only replicate there was), a baseline row the key's baseline run. Imported rows keep their folder."""
    if rows.is_empty():
        return rows
    live_prefix = f"live:{model_key}:r"
    # Asked of every cell by `status` and a no-op `run`: the few distinct (source, run id) pairs in Python
    # cost less than the nine Series operations of the same test.
    pairs = set(zip(rows["source"].to_list(), rows["run_id"].to_list(), strict=True))
    if not any(
        source == "baseline" or (source == "live" and not (run_id or "").startswith(live_prefix))
        for source, run_id in pairs
    ):  # the common case (rows this version wrote): nothing to rename
        return rows
    return rows.with_columns(
        run_id=pl.when(
            (pl.col("source") == "live") & ~pl.col("run_id").fill_null("").str.starts_with(live_prefix)
        )
        .then(pl.lit(live_run_id(model_key, 1)))
        .when(pl.col("source") == "baseline")
        .then(pl.lit(baseline_run_id(model_key)))
        .otherwise(pl.col("run_id"))
    )


def relation_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """True when `name` resolves on `con` (table, view or registered Arrow/polars object)."""
    import duckdb

    try:
        con.sql(f"SELECT * FROM {name} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


def _run_summaries(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """(run_id, summary_editions, summary_completed_at) of imported runs that have a summary."""
    schema = {
        "run_id": pl.String(),
        "summary_editions": pl.List(pl.Int32()),
        "summary_completed_at": pl.Datetime("us", "UTC"),
    }
    if not relation_exists(con, RUN_SUMMARIES_TABLE):
        return pl.DataFrame(schema=schema)
    frame = con.sql(
        f"SELECT run_id, editions AS summary_editions, completed_at AS summary_completed_at "
        f"FROM {RUN_SUMMARIES_TABLE} WHERE has_summary"
    ).pl()
    return frame.cast(schema)


def run_cells(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """One row per (model key, edition, run): its source, start, completion and replicate index.

    `con` must expose `inferences`, `questions` and `answer_keys`; `published_run_summaries` is used
    when present (without it no imported run cell is complete).
    """
    cells = con.sql(_RUN_CELLS_SQL).pl()
    if cells.is_empty():
        return pl.DataFrame(schema=RUN_CELL_SCHEMA)
    cells = cells.with_columns(
        pl.col("started_at", "last_answer_at").cast(pl.Datetime("us", "UTC")),
        pl.col("edition").cast(pl.Int32),
    )
    summaries = _run_summaries(con)
    cells = cells.join(summaries, on="run_id", how="left")
    in_summary = (
        pl.col("summary_editions").list.contains(pl.col("edition")).fill_null(False)
        if summaries.height
        else pl.lit(False)
    )
    imported = pl.col("source") == "imported"
    replied_all = (pl.col("replied") >= pl.col("active").fill_null(0)) & (pl.col("error_rows") == 0)
    cells = cells.with_columns(
        complete=pl.when(imported).then(in_summary).otherwise(replied_all & (pl.col("active") > 0))
    ).with_columns(
        completed_at=pl.when(~pl.col("complete"))
        .then(None)
        .when(imported)
        .then(pl.col("summary_completed_at"))
        .otherwise(pl.col("last_answer_at"))
    )
    return with_replicates(cells.select(list(RUN_CELL_SCHEMA)[:-1]))


def with_replicates(cells: pl.DataFrame) -> pl.DataFrame:
    """Number the complete run cells of each (model key, edition) 1, 2, … by completion time."""
    order = (
        pl.struct("completed_at", "run_id").rank("ordinal").over("model_key", "edition", pl.col("complete"))
    )
    return cells.with_columns(replicate=pl.when(pl.col("complete")).then(order.cast(pl.Int64))).cast(
        RUN_CELL_SCHEMA  # type: ignore[arg-type]
    )


def end_of_day(as_of: dt.date) -> dt.datetime:
    """The first instant after `as_of` (UTC): runs that finished before it count."""
    return dt.datetime.combine(as_of + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)


def as_of_cells(cells: pl.DataFrame, as_of: dt.date | None) -> pl.DataFrame:
    """The run cells as they stood at the end of `as_of` (UTC): complete ones finished by then, and
    incomplete ones started by then; all of them when `as_of` is None."""
    if as_of is None:
        return cells
    cutoff = end_of_day(as_of)
    return cells.filter(
        pl.when(pl.col("complete"))
        .then(pl.col("completed_at") < cutoff)
        .otherwise(pl.col("started_at") < cutoff)
    )


def canonical_run_cells(cells: pl.DataFrame, as_of: dt.date | None = None) -> pl.DataFrame:
    """Per (model key, edition): the newest complete run (finished before the end of `as_of`), else the
    newest run started by then (shown, never ranked). Columns: model_key, edition, run_id, complete,
    source, completed_at.
    """
    cells = as_of_cells(cells, as_of)
    newest = pl.coalesce("completed_at", "started_at")
    return (
        cells.sort(["complete", newest, "run_id"], descending=[True, True, True], nulls_last=True)
        .unique(subset=["model_key", "edition"], keep="first", maintain_order=True)
        .select("model_key", "edition", "run_id", "complete", "source", "completed_at")
        .sort("model_key", "edition")
    )


RUNS_COLUMNS = column_names("runs")


def runs_table(cells: pl.DataFrame) -> pl.DataFrame:
    """One row per run: `editions` it completed, `complete` when it completed every edition it started,
    `replicate` the lowest replicate index its cells got, `completed_at` its last completed cell."""
    return (
        cells.group_by("run_id", "model_key")
        .agg(
            source=pl.col("source").first(),
            replicate=pl.col("replicate").min(),
            started_at=pl.col("started_at").min(),
            completed_at=pl.col("completed_at").max(),
            editions=pl.col("edition").filter(pl.col("complete")).sort(),
            complete=pl.col("complete").all(),
        )
        .select(RUNS_COLUMNS)
        .sort("model_key", "started_at", "run_id")
    )
