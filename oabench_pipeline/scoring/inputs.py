"""Which cells the analysis tables are built from: the healthy ones, so one bad cell takes nothing down.

A cell (model key × edition) is healthy when its `inferences` and `scores` partitions are readable and
its scores cover its answers: every run of the cell has as many scored rows, and as many error rows, as
it has answer rows. Any other cell — a file damaged, a cell whose run failed before it was (re)scored, a
`scores` partition left from answers since replaced or deleted — is left out of every analysis table at
once (its key then misses that edition, so it is shown incomplete and unranked, as an aborted run is),
with one line saying why. The `leaderboard` step reads only what `AnalysisInputs.leave_out` leaves it
(`healthy_reader`; so do the report and `oabench leaderboard` when they rebuild the tables for an `as_of`
day), and when no cell is healthy it writes nothing: the tables keep their previous rows.

No Dagster here: the step logs the lines and decides what to do with an empty selection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline.warehouse import DamagedPartitionError, Warehouse, partition_key_of, repair_hint

if TYPE_CHECKING:
    import duckdb

CELL_TABLES = ("inferences", "scores")

# Per run of each cell: answer rows (of questions that exist) against scored rows, errors included.
_UNCOVERED_SQL = """
WITH answers AS (
    SELECT model_key, edition::INTEGER AS edition, run_id, count(*) AS n,
           count(*) FILTER (WHERE error IS NOT NULL) AS errors
    FROM inferences WHERE qid IN (SELECT qid FROM questions) GROUP BY ALL
), scored AS (
    SELECT model_key, edition::INTEGER AS edition, run_id, count(*) AS n,
           count(*) FILTER (WHERE has_error) AS errors
    FROM scores GROUP BY ALL
)
SELECT a.model_key, a.edition, a.run_id, a.n AS answers, coalesce(s.n, 0) AS scored,
       a.errors AS answer_errors, coalesce(s.errors, 0) AS scored_errors
FROM answers AS a
LEFT JOIN scored AS s
  ON s.model_key = a.model_key AND s.edition = a.edition AND s.run_id IS NOT DISTINCT FROM a.run_id
WHERE s.n IS DISTINCT FROM a.n OR s.errors IS DISTINCT FROM a.errors
ORDER BY a.edition, a.model_key, a.run_id
"""

# What `_UNCOVERED_SQL` reads: its reader makes views of these only (each view reads its files' footers).
_UNCOVERED_TABLES = (*CELL_TABLES, "questions")


@dataclass
class AnalysisInputs:
    """The cells to build from (`healthy`), and each cell left out with why (`left_out`: key → line)."""

    healthy: list[str]
    left_out: dict[str, str] = field(default_factory=dict)
    orphan_scores: list[str] = field(default_factory=list)
    """`scores` partitions whose cell has no `inferences` partition: read by nothing."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """The cells of `left_out` that are so because a file is unreadable (key → line), whatever else."""

    @property
    def leave_out(self) -> dict[str, list[str]]:
        """Partition keys per table for `Warehouse.reader(leave_out=...)`."""
        cells = sorted(self.left_out)
        return {"inferences": cells, "scores": sorted({*cells, *self.orphan_scores})}

    def lines(self) -> list[str]:
        return [f"cell {key}: left out of the analysis tables: {why}" for key, why in self.left_out.items()]


def analysis_inputs(store: Warehouse) -> AnalysisInputs:
    """Sort every cell of the warehouse into healthy and left out (see the module docstring)."""
    answered = set(store.partitions("inferences"))
    inputs = AnalysisInputs(
        healthy=[],
        orphan_scores=sorted(set(store.partitions("scores")) - answered),
    )
    for table in CELL_TABLES:
        for path in store.damaged_partitions(table, thorough=False):
            key = partition_key_of(path)
            if key in answered:
                line = f"table {table}: {path} is unreadable; {repair_hint(table, key)}"
                inputs.left_out.setdefault(key, line)
                inputs.unreadable.setdefault(key, line)
    _leave_out_uncovered(store, inputs)
    inputs.healthy = sorted(answered - set(inputs.left_out))
    return inputs


def _leave_out_uncovered(store: Warehouse, inputs: AnalysisInputs) -> None:
    """Leave out the cells whose scores do not cover their answers; a file whose data (not its footer)
    turns out damaged while counting is left out too, and the count taken again without it."""
    while True:
        try:
            with store.reader(leave_out=inputs.leave_out, tables=_UNCOVERED_TABLES) as con:
                uncovered = con.sql(_UNCOVERED_SQL).fetchall()
            break
        except DamagedPartitionError as error:
            if error.table not in CELL_TABLES or error.partition_key in inputs.left_out:
                raise
            inputs.left_out[error.partition_key] = inputs.unreadable[error.partition_key] = str(error)
    for model_key, edition, run_id, answers, scored, answer_errors, scored_errors in uncovered:
        key = cell_name(model_key, edition)
        if key in inputs.left_out:
            continue
        run = f"run {run_id}: " if run_id else ""
        inputs.left_out[key] = (
            f"its scores do not match its answers ({run}{answers} answer rows, {answer_errors} with an error; "
            f"{scored} scored, {scored_errors} with an error): "
            f"`oabench run --models {model_key} --editions {edition}` re-scores it"
        )


@contextmanager
def healthy_reader(store: Warehouse) -> Iterator[tuple[duckdb.DuckDBPyConnection, AnalysisInputs]]:
    """A reader over the healthy cells only, and the selection: what every builder of the analysis
    tables reads (the `leaderboard` step, the report and `oabench leaderboard` with an `as_of` day)."""
    inputs = analysis_inputs(store)
    with store.reader(leave_out=inputs.leave_out) as con:
        yield con, inputs
