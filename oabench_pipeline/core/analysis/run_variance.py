"""How much replicates of one key differ: the spread of its official score and how often answers flip.

A key's replicate k is complete when every required edition has a k-th complete run (`core/runs.py`);
`runs` counts those. Its score is the official score summed over the required editions.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from oabench_pipeline.core.analysis.frames import registered
from oabench_pipeline.core.tables import column_schema

_REPLICATES_TEMP = "_oabench_replicates"

_REPLICATE_ANSWERS_SQL = """
SELECT s.model_key, s.edition::INTEGER AS edition, r.replicate, s.qid, s.status,
       s.is_correct_official, coalesce(s.answer, '') AS answer
FROM {scores} AS s
JOIN {replicates} AS r
  ON r.model_key = s.model_key AND r.edition = s.edition AND r.run_id = s.run_id
"""

RUN_VARIANCE_SCHEMA = column_schema("run_variance")


def complete_replicates(cells: pl.DataFrame, required: list[int]) -> pl.DataFrame:
    """(model_key, runs): complete replicates per key, for keys with at least one."""
    per_edition = (
        cells.filter(pl.col("complete") & pl.col("edition").is_in(required))
        .group_by("model_key", "edition")
        .agg(replicates=pl.col("replicate").max())
    )
    return (
        per_edition.group_by("model_key")
        .agg(editions=pl.len(), runs=pl.col("replicates").min().cast(pl.Int64))
        .filter((pl.col("editions") == len(required)) & (pl.col("runs") >= 1))
        .select("model_key", "runs")
    )


ANSWERS_SCHEMA = {
    "model_key": pl.String(),
    "edition": pl.Int32(),
    "replicate": pl.Int64(),
    "qid": pl.String(),
    "status": pl.String(),
    "is_correct_official": pl.Boolean(),
    "answer": pl.String(),
}


@dataclass(frozen=True)
class ReplicateAnswers:
    """Every complete run cell's answers, and its official score: read once for every suite."""

    answers: pl.DataFrame
    scores: pl.DataFrame  # model_key, edition, replicate, score


def replicate_answers(con: duckdb.DuckDBPyConnection, scores: str, cells: pl.DataFrame) -> ReplicateAnswers:
    """The answers of every complete run cell with its replicate index, and each cell's score: each
    suite's `run_variance` then takes the editions it requires."""
    replicates = cells.filter(pl.col("complete")).select("model_key", "edition", "run_id", "replicate")
    if replicates.is_empty():
        answers = pl.DataFrame(schema=ANSWERS_SCHEMA)
    else:
        with registered(con, {_REPLICATES_TEMP: replicates}):
            answers = con.sql(_REPLICATE_ANSWERS_SQL.format(scores=scores, replicates=_REPLICATES_TEMP)).pl()
        answers = answers.cast(ANSWERS_SCHEMA)
    cell_scores = answers.group_by("model_key", "edition", "replicate").agg(
        score=pl.col("is_correct_official").sum().cast(pl.Int64)
    )
    return ReplicateAnswers(answers, cell_scores)


def run_variance(replicates: ReplicateAnswers, cells: pl.DataFrame, required: list[int]) -> pl.DataFrame:
    """Per key with ≥ 1 complete replicate over the `required` editions: `runs`, score mean/min/max/sd
    (sd NULL with one run) and `flip_rate`, the share of active questions whose answer differs between
    replicates (NULL with one)."""
    keys = complete_replicates(cells, required)
    if keys.is_empty() or not required:
        return pl.DataFrame(schema=RUN_VARIANCE_SCHEMA)

    def counted(frame: pl.DataFrame) -> pl.DataFrame:  # the required editions' first `runs` replicates
        return (
            frame.filter(pl.col("edition").is_in(required))
            .join(keys, on="model_key")
            .filter(pl.col("replicate") <= pl.col("runs"))
        )

    totals = (
        counted(replicates.scores)
        .group_by("model_key", "replicate")
        .agg(score=pl.col("score").sum())
        .group_by("model_key")
        .agg(
            score_mean=pl.col("score").mean(),
            score_min=pl.col("score").min(),
            score_max=pl.col("score").max(),
            score_sd=pl.col("score").std(ddof=1),
        )
    )
    # Answers flip only between replicates: the keys with one alone (most) need no pass over their answers.
    several = keys.filter(pl.col("runs") >= 2)["model_key"]
    flips = (
        counted(replicates.answers.filter(pl.col("model_key").is_in(several.implode())))
        .filter(pl.col("status") == "active")
        .group_by("model_key", "qid")
        .agg(flipped=pl.col("answer").n_unique() > 1)
        .group_by("model_key")
        .agg(flip_rate=pl.col("flipped").mean())
    )
    return (
        keys.join(totals, on="model_key", how="left")
        .join(flips, on="model_key", how="left")
        .with_columns(flip_rate=pl.when(pl.col("runs") >= 2).then(pl.col("flip_rate")))
        .select(list(RUN_VARIANCE_SCHEMA))
        .cast(RUN_VARIANCE_SCHEMA)  # type: ignore[arg-type]
        .sort("model_key")
    )
