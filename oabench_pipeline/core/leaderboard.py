"""Leaderboard and analysis tables computed from the `scores` table and the warehouse relations.

Which rows count: every run of a cell is scored, and each (model key, edition) is represented by its
canonical run (`core/runs.py`): the newest complete one, or the newest complete one finished before
the end of an `as_of` day (UTC). A cell with no complete run shows its newest started run, unranked.

Definitions (they reproduce OABench's published summary.json):
- official score = correct answers on active questions + every annulled question (the OAB
  credits annulled questions to everyone); official total = questions in the edition (80);
- technical score = correct answers on active questions; technical total = active questions;
- invalid = active question with no extracted answer (error, empty or unparseable response);
- strict compliance = strict-parsed answers / non-skipped calls;
- average latency = total latency / non-skipped calls, rounded half up (JavaScript Math.round);
- an edition is passed with official score >= half of its questions (40 of 80);
- cost: see `analysis/aggregates.py` (reported where every call carries it, else estimated);
- a key is `complete` when the canonical run of every edition listed in `editions` that has
  questions is complete (`core/runs.py`) and has a row for every active question; incomplete keys
  keep their numbers but get no rank, and take no part in the tests, provider means or deltas.
- intervals and p_pass: `analysis/intervals.py`; tests, rank intervals, tie_group: `analysis/pairwise.py`;
- `retired`: the model catalogue's newest `expiration_date` for the model has come (`analysis/retirement.py`).

Work is done in a few passes: one DuckDB GROUPING SETS aggregate over the canonical scores, one
latency query, one extraction of a keys x questions matrix (pairwise McNemar, item analysis), and
small polars/numpy steps over per-key rows.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import polars as pl

from oabench_pipeline.core import runs as runs_core
from oabench_pipeline.core.analysis import aggregates, intervals, pairwise
from oabench_pipeline.core.analysis.contamination import contamination_by_cutoff
from oabench_pipeline.core.analysis.edition_deltas import edition_deltas
from oabench_pipeline.core.analysis.frames import registered
from oabench_pipeline.core.analysis.items import item_analysis
from oabench_pipeline.core.analysis.latency import latency_accuracy_correlation
from oabench_pipeline.core.analysis.pareto import pareto_frontier
from oabench_pipeline.core.analysis.providers import provider_summary
from oabench_pipeline.core.analysis.retirement import with_retirement
from oabench_pipeline.core.analysis.run_variance import run_variance
from oabench_pipeline.core.scoring import score_inferences
from oabench_pipeline.tables import column_names

# The analysis tables' code version: bump it with any change to how a table is computed, so that the
# automation rebuilds them once (`automation/downstream.py`).
ANALYSIS_VERSION = "analysis-2"  # 2: the leaderboard's `retired` column

_SCORES_TEMP = "_oabench_scores"
_CANONICAL_TEMP = "_oabench_canonical"

# The scores of the canonical run of each cell; `run_id` NULL matches NULL (rows written before runs).
_CANONICAL_SCORES_SQL = """(
    SELECT s.* FROM {scores} AS s
    SEMI JOIN {canonical} AS c
      ON c.model_key = s.model_key AND c.edition = s.edition AND c.run_id IS NOT DISTINCT FROM s.run_id
)"""

LEADERBOARD_COLUMNS = column_names("leaderboard")

BY_EDITION_COLUMNS = column_names("leaderboard_by_edition")


def _today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _scores_name(con: duckdb.DuckDBPyConnection) -> tuple[str, pl.DataFrame | None]:
    """Use the `scores` relation when the caller has one, else score the inferences now."""
    if runs_core.relation_exists(con, "scores"):
        return "scores", None
    return _SCORES_TEMP, score_inferences(con)


def _summary_prices(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    schema = {
        "run_id": pl.String(),
        "summary_prompt_price": pl.Float64(),
        "summary_completion_price": pl.Float64(),
        "summary_fetched_at": pl.Datetime("us", "UTC"),
    }
    if not runs_core.relation_exists(con, runs_core.RUN_SUMMARIES_TABLE):
        return pl.DataFrame(schema=schema)
    frame = con.sql(
        f"""SELECT run_id, prompt_price_per_token AS summary_prompt_price,
                   completion_price_per_token AS summary_completion_price,
                   pricing_fetched_at AS summary_fetched_at
            FROM {runs_core.RUN_SUMMARIES_TABLE}"""
    ).pl()
    return frame.cast(schema)


def _add_intervals(
    keys_df: pl.DataFrame, by_edition: pl.DataFrame, required: set[int]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Wilson intervals per key; exact pass probabilities per key × edition and across required editions."""
    tech_low, tech_high = intervals.wilson_interval(keys_df["technical_score"], keys_df["technical_total"])
    off_low, off_high = intervals.official_interval(
        tech_low, tech_high, keys_df["technical_total"], keys_df["official_total"]
    )
    by_edition = by_edition.with_columns(
        p_pass=pl.Series(
            intervals.pass_probability(
                by_edition["official_score"], by_edition["official_total"], by_edition["pass_threshold"]
            ),
            dtype=pl.Float64,
        )
    )
    joint = (
        by_edition.filter(pl.col("edition").is_in(sorted(required)))
        .group_by("model_key")
        .agg(_p=pl.col("p_pass").sort_by("edition").product(), _sat=pl.len())
    )
    keys_df = (
        keys_df.with_columns(
            accuracy_ci_low=pl.Series(off_low),
            accuracy_ci_high=pl.Series(off_high),
            technical_ci_low=pl.Series(tech_low),
            technical_ci_high=pl.Series(tech_high),
        )
        .with_columns(
            pl.col("accuracy_ci_low", "accuracy_ci_high", "technical_ci_low", "technical_ci_high").fill_nan(
                None
            )
        )
        .join(joint, on="model_key", how="left", maintain_order="left")
        # An edition required but not sat cannot be passed (and with none required, nothing is passed).
        .with_columns(
            p_pass=pl.when(pl.col("_sat").fill_null(0) == len(required))
            .then(pl.col("_p").fill_null(0.0))
            .otherwise(0.0)
        )
        .drop("_p", "_sat")
    )
    return keys_df, by_edition


def _add_tests(keys_df: pl.DataFrame, mats: dict[str, np.ndarray]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """McNemar/Holm over the ranked keys, their rank intervals and the compact letter display."""
    ranked = (
        keys_df.with_row_index("_i")
        .filter(pl.col("rank").is_not_null())
        .sort(["rank", "technical_score", "model_key"], descending=[False, True, False])
    )
    rows = ranked["_i"].to_numpy()
    table, better = pairwise.pairwise(ranked["model_key"], mats["E"][rows], mats["C"][rows])
    low, high = pairwise.rank_intervals(better)
    letters = pairwise.compact_letters(list(range(len(rows))), better | better.T)
    tests = pl.DataFrame(
        {
            "model_key": ranked["model_key"],
            "rank_low": pl.Series(low, dtype=pl.Int64),
            "rank_high": pl.Series(high, dtype=pl.Int64),
            "tie_group": pl.Series(letters, dtype=pl.String),
        }
    )
    return keys_df.join(tests, on="model_key", how="left", maintain_order="left"), table


def build_leaderboard_tables(
    con: duckdb.DuckDBPyConnection, *, as_of: dt.date | None = None
) -> dict[str, pl.DataFrame]:
    """All leaderboard and analysis tables, keyed by table name (see module docstring).

    `con` must expose `inferences`, `questions`, `answer_keys`, `editions`, `models` and
    `model_pricing`; `scores` and `published_run_summaries` are used when present (scores are
    computed otherwise). `as_of`: count only runs completed before the end of that day (UTC).
    Deterministic: no random numbers anywhere.
    """
    scores_name, computed = _scores_name(con)
    temp = {_SCORES_TEMP: computed} if computed is not None else {}
    with registered(con, temp):
        cells = runs_core.as_of_cells(runs_core.run_cells(con), as_of)
        canonical = runs_core.canonical_run_cells(cells, as_of).join(
            _summary_prices(con), on="run_id", how="left"
        )
        with registered(con, {_CANONICAL_TEMP: canonical.select("model_key", "edition", "run_id")}):
            canonical_scores = _CANONICAL_SCORES_SQL.format(scores=scores_name, canonical=_CANONICAL_TEMP)
            ed_totals = con.sql(aggregates.EDITION_TOTALS_SQL).pl()
            edition_dates = con.sql("SELECT edition::INTEGER AS edition, exam_date FROM editions").pl()
            questions = con.sql(aggregates.QUESTIONS_SQL).pl()
            meta = with_retirement(con, con.sql(aggregates.KEY_META_SQL).pl(), as_of or _today())
            agg = con.sql(aggregates.AGG_SQL.format(scores=canonical_scores)).pl()
            latency = con.sql(aggregates.LATENCY_SQL.format(scores=canonical_scores)).pl()
            required = set(edition_dates["edition"].to_list()) & set(ed_totals["edition"].to_list())
            by_edition = aggregates.by_edition_rows(agg, ed_totals, required, canonical)
            keys_df = aggregates.per_key_rows(by_edition, latency, meta, len(required))
            mats = pairwise.matrices(con, canonical_scores, keys_df["model_key"], questions)
        variance = run_variance(con, scores_name, cells, sorted(required))

    keys_df, by_edition = _add_intervals(keys_df, by_edition, required)
    # Rank among complete keys only: rank the complete subset and join back (others stay NULL).
    ranks = keys_df.filter(pl.col("complete")).select(
        "model_key", rank=pl.col("official_score").rank("dense", descending=True).cast(pl.Int64)
    )
    keys_df = keys_df.join(ranks, on="model_key", how="left", maintain_order="left")
    keys_df, pairwise_table = _add_tests(keys_df, mats)
    keys_df = keys_df.join(
        variance.select(
            "model_key",
            replicates="runs",
            replicate_spread=pl.when(pl.col("runs") >= 2).then(pl.format("{}–{}", "score_min", "score_max")),
        ),
        on="model_key",
        how="left",
        maintain_order="left",
    ).with_columns(pl.col("replicates").fill_null(0))

    key_accuracy = mats["C"].sum(axis=1) / np.maximum(mats["E"].sum(axis=1), 1)
    leaderboard = keys_df.select(LEADERBOARD_COLUMNS).sort(
        ["rank", "official_score", "model_key"], descending=[False, True, False], nulls_last=True
    )
    by_edition = by_edition.join(
        canonical.select("model_key", "edition", "run_id"), on=["model_key", "edition"], how="left"
    )
    by_edition_out = by_edition.select(BY_EDITION_COLUMNS).sort("model_key", "edition")
    area_order = questions.group_by("area").agg(area_order=pl.col("number").min())
    by_area_out = (
        agg.filter(~pl.col("by_edition"))
        .join(area_order, on="area", how="left")
        .select(
            "model_key",
            "area",
            "area_order",
            correct=pl.col("technical_score"),
            total=pl.col("active_rows"),
            accuracy=pl.when(pl.col("active_rows") > 0).then(
                pl.col("technical_score") / pl.col("active_rows")
            ),
        )
        .sort("model_key", "area_order")
    )
    complete_keys = keys_df.filter(pl.col("complete"))["model_key"]
    return {
        "leaderboard": leaderboard,
        "leaderboard_by_edition": by_edition_out,
        "leaderboard_by_area": by_area_out,
        "pairwise_comparison": pairwise_table,
        "item_analysis": item_analysis(questions, mats, key_accuracy),
        "provider_summary": provider_summary(keys_df),
        "edition_deltas": edition_deltas(by_edition, complete_keys),
        "pareto_frontier": pareto_frontier(keys_df),
        "latency_accuracy_correlation": latency_accuracy_correlation(keys_df),
        "contamination_by_cutoff": contamination_by_cutoff(by_edition, keys_df, edition_dates),
        "runs": runs_core.runs_table(cells),
        "run_variance": variance,
    }
