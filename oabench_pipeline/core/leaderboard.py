"""Leaderboard and analysis tables computed from the `scores` table and the warehouse relations.

Which rows count: every run of a cell is scored, and each (model key, edition) is represented by its
canonical run (`core/runs.py`): the newest complete one, or the newest complete one finished before
the end of an `as_of` day (UTC). A cell with no complete run shows its newest started run, unranked.

Definitions (they reproduce OABench's published summary.json):
- official score = correct answers on active questions + every annulled question (the OAB
  credits annulled questions to everyone); official total = questions in the edition (80; 100 in the 1st-3rd);
- technical score = correct answers on active questions; technical total = active questions;
- invalid = active question with no extracted answer (error, empty or unparseable response);
- strict compliance = strict-parsed answers / non-skipped calls;
- average latency = total latency / non-skipped calls, rounded half up (JavaScript Math.round);
- an edition is passed with official score >= half of its questions (40 of 80);
- cost: see `analysis/aggregates.py` (reported where every call carries it, else estimated);
- suites (`core/editions.py`): a key is `complete` in a suite when the canonical run of every edition
  of the suite listed in `editions` that has questions is complete (`core/runs.py`) and has a row for
  every active question; incomplete keys keep their numbers but get no rank, and take no part in the
  tests, provider means or deltas. Sums, ranks and tests are per suite: `<table>_by_suite` holds every
  suite's rows, the plain table the default suite's (`tables.BY_SUITE`).
- intervals and p_pass: `analysis/intervals.py`; tests, rank intervals, tie_group: `analysis/pairwise.py`;
  abilities, difficulties, the key audit and the training-cutoff effect: `analysis/irt_tables.py` (one
  Rasch fit over every key and question, one scale whatever the suite; each suite ranks its keys on it).
- `retired`: the model catalogue's newest `expiration_date` for the model has come (`analysis/retirement.py`).

Work is done in a few passes shared by every suite: one DuckDB GROUPING SETS aggregate over the
canonical scores, one key x edition x area count, one latency query per (suite, key), one extraction of
a keys x questions matrix (pairwise McNemar on each suite's rows and columns, item analysis), and small
polars/numpy steps over per-key rows, per suite.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

from oabench_pipeline.core import runs as runs_core
from oabench_pipeline.core.analysis import aggregates, intervals, pairwise
from oabench_pipeline.core.analysis.edition_deltas import edition_deltas
from oabench_pipeline.core.analysis.frames import registered
from oabench_pipeline.core.analysis.irt_tables import ability_columns, item_response_tables
from oabench_pipeline.core.analysis.items import item_analysis
from oabench_pipeline.core.analysis.latency import latency_accuracy_correlation
from oabench_pipeline.core.analysis.law_currency_effect import current_law_leaderboard
from oabench_pipeline.core.analysis.pareto import pareto_frontier
from oabench_pipeline.core.analysis.providers import provider_summary
from oabench_pipeline.core.analysis.retirement import with_retirement
from oabench_pipeline.core.analysis.run_variance import ReplicateAnswers, replicate_answers, run_variance
from oabench_pipeline.core.editions import ALL_SUITE, ALL_SUITE_DESCRIPTION, Suite, default_suite
from oabench_pipeline.core.law_currency import (
    LawCurrency,
    legal_reforms_table,
    load_law_currency,
    question_law_currency,
)
from oabench_pipeline.core.scoring import score_inferences
from oabench_pipeline.core.tables import ANALYSIS_TABLES, BY_SUITE, column_names, column_schema
from oabench_pipeline.core.text_safety import clean_label_expr

_SCORES_TEMP = "_oabench_scores"
_CANONICAL_TEMP = "_oabench_canonical"
_SUITE_EDITIONS_TEMP = "_oabench_suite_editions"

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


def _key_status(con: duckdb.DuckDBPyConnection, questions: pl.DataFrame) -> pl.DataFrame:
    """`questions` with each key's `key_status` ('preliminary' / 'definitive') where `answer_keys` says."""
    columns = {row[0] for row in con.sql("DESCRIBE answer_keys").fetchall()}
    if "key_status" not in columns:
        return questions.with_columns(key_status=pl.lit(None, pl.String))
    status = con.sql("SELECT qid, key_status::VARCHAR AS key_status FROM answer_keys").pl()
    return questions.join(status, on="qid", how="left", maintain_order="left")


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


def _with_pass_probability(by_edition: pl.DataFrame) -> pl.DataFrame:
    """Each key × edition row's exact chance of passing again at its observed rate (suite-independent)."""
    return by_edition.with_columns(
        p_pass=pl.Series(
            intervals.pass_probability(
                by_edition["official_score"], by_edition["official_total"], by_edition["pass_threshold"]
            ),
            dtype=pl.Float64,
        )
    )


def _add_intervals(keys_df: pl.DataFrame, by_edition: pl.DataFrame, required: set[int]) -> pl.DataFrame:
    """Wilson intervals per key; the exact pass probability across the required editions."""
    tech_low, tech_high = intervals.wilson_interval(keys_df["technical_score"], keys_df["technical_total"])
    off_low, off_high = intervals.official_interval(
        tech_low, tech_high, keys_df["technical_total"], keys_df["official_total"]
    )
    joint = (
        by_edition.filter(pl.col("edition").is_in(sorted(required)))
        .group_by("model_key")
        .agg(_p=pl.col("p_pass").sort_by("edition").product(), _sat=pl.len())
    )
    return (
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


@dataclass(frozen=True)
class _Shared:
    """What every suite's tables are computed from: built once per call, whatever the suites."""

    by_edition: pl.DataFrame  # key × edition rows of every canonical cell, with p_pass
    areas: pl.DataFrame  # key × edition × area counts (a suite sums its editions')
    all_areas: pl.DataFrame  # key × area counts over every edition
    latency: pl.DataFrame  # p50/p95 per suite and key
    meta: pl.DataFrame
    questions: pl.DataFrame
    keys: pl.Series  # every key with a canonical cell, sorted: the rows of `mats`
    mats: dict[str, np.ndarray]
    answers: ReplicateAnswers  # every complete run cell's answers and score (run_variance)
    cells: pl.DataFrame
    required: set[int]  # editions with questions (and in `editions`)
    irt: dict[str, pl.DataFrame]  # the Rasch tables (`analysis/irt_tables.py`), over every edition
    currency: pl.DataFrame  # `question_law_currency`, one row per question
    superseded: np.ndarray  # per question of `questions` (a column of `mats`): possibly superseded


def _suites_frame(suites: Sequence[Suite]) -> pl.DataFrame:
    return pl.DataFrame(
        [(s.name, e) for s in suites for e in s.editions],
        schema={"suite": pl.String, "edition": pl.Int32},
        orient="row",
    )


def _shared(
    con: duckdb.DuckDBPyConnection, as_of: dt.date | None, suites: Sequence[Suite], law: LawCurrency
) -> _Shared:
    scores_name, computed = _scores_name(con)
    temp = {_SCORES_TEMP: computed} if computed is not None else {}
    with registered(con, temp):
        cells = runs_core.as_of_cells(runs_core.run_cells(con), as_of)
        canonical = runs_core.canonical_run_cells(cells, as_of).join(
            _summary_prices(con), on="run_id", how="left"
        )
        helpers = {
            _CANONICAL_TEMP: canonical.select("model_key", "edition", "run_id"),
            _SUITE_EDITIONS_TEMP: _suites_frame(suites),
        }
        with registered(con, helpers):
            canonical_scores = _CANONICAL_SCORES_SQL.format(scores=scores_name, canonical=_CANONICAL_TEMP)
            ed_totals = con.sql(aggregates.EDITION_TOTALS_SQL).pl()
            edition_dates = con.sql("SELECT edition::INTEGER AS edition, exam_date FROM editions").pl()
            questions = _key_status(con, con.sql(aggregates.QUESTIONS_SQL).pl())
            meta = with_retirement(con, con.sql(aggregates.KEY_META_SQL).pl(), as_of or _today())
            meta = meta.with_columns(clean_label_expr("label"))  # a key shown as its label, too
            agg = con.sql(aggregates.AGG_SQL.format(scores=canonical_scores)).pl()
            areas = con.sql(aggregates.AREA_SQL.format(scores=canonical_scores)).pl()
            latency = con.sql(
                aggregates.LATENCY_SQL.format(scores=canonical_scores, suite_editions=_SUITE_EDITIONS_TEMP)
            ).pl()
            required = set(edition_dates["edition"].to_list()) & set(ed_totals["edition"].to_list())
            by_edition = aggregates.priced_editions(
                aggregates.by_edition_rows(agg, ed_totals, required, canonical), meta
            )
            keys = by_edition["model_key"].unique().sort()
            mats = pairwise.matrices(con, canonical_scores, keys, questions)
        answers = replicate_answers(con, scores_name, cells)
    by_edition = _with_pass_probability(
        by_edition.join(
            canonical.select("model_key", "edition", "run_id"),
            on=["model_key", "edition"],
            how="left",
            maintain_order="left",  # the order per-key float sums add up in, as before suites
        )
    )
    all_areas = agg.filter(~pl.col("by_edition")).select(
        "model_key", "area", "technical_score", "active_rows"
    )
    keys_frame = pl.DataFrame({"model_key": keys}).join(
        meta.select("model_key", "knowledge_cutoff"), on="model_key", how="left", maintain_order="left"
    )
    currency = question_law_currency(questions, edition_dates, law)
    superseded = (
        questions.select("qid")
        .join(currency.select("qid", "possibly_superseded"), on="qid", how="left", maintain_order="left")[
            "possibly_superseded"
        ]
        .fill_null(False)
        .to_numpy()
    )
    # One Rasch fit over every key and question (`mats`' rows and columns): abilities on one scale.
    irt, _ = item_response_tables(
        keys_frame, by_edition, questions, mats, edition_dates, superseded, _real_models(con, keys)
    )
    return _Shared(
        by_edition,
        areas,
        all_areas,
        latency,
        meta,
        questions,
        keys,
        mats,
        answers,
        cells,
        required,
        irt,
        currency,
        superseded,
    )


def _by_area(areas: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """Key × area over the given rows: correct answers, active questions, accuracy, in booklet order."""
    area_order = questions.group_by("area").agg(area_order=pl.col("number").min())
    return (
        areas.group_by("model_key", "area")
        .agg(correct=pl.col("technical_score").sum(), total=pl.col("active_rows").sum())
        .join(area_order, on="area", how="left")
        .select(
            "model_key",
            "area",
            "area_order",
            "correct",
            "total",
            accuracy=pl.when(pl.col("total") > 0).then(pl.col("correct") / pl.col("total")),
        )
        .sort("model_key", "area_order", "area")
    )


def _suite_tables(shared: _Shared, suite: Suite) -> tuple[dict[str, pl.DataFrame], dict[str, object]]:
    """The suite-scoped tables of one suite (`tables.BY_SUITE`), and its row of `suites`."""
    editions = sorted(suite.editions)
    required = shared.required & set(editions)
    by_edition = shared.by_edition.filter(pl.col("edition").is_in(editions)).with_columns(
        required=pl.col("edition").is_in(sorted(required))
    )
    latency = shared.latency.filter(pl.col("suite") == suite.name).drop("suite")
    keys_df = aggregates.per_key_rows(by_edition, latency, shared.meta, len(required))
    keys_df = _add_intervals(keys_df, by_edition, required)
    # Rank among complete keys only: rank the complete subset and join back (others stay NULL).
    ranks = keys_df.filter(pl.col("complete")).select(
        "model_key", rank=pl.col("official_score").rank("dense", descending=True).cast(pl.Int64)
    )
    keys_df = keys_df.join(ranks, on="model_key", how="left", maintain_order="left")
    rows = np.searchsorted(shared.keys.to_numpy(), keys_df["model_key"].to_numpy())
    columns = shared.questions["edition"].is_in(editions).to_numpy()
    mats = {name: matrix[rows][:, columns] for name, matrix in shared.mats.items()}
    keys_df, pairwise_table = _add_tests(keys_df, mats)
    variance = run_variance(shared.answers, shared.cells, sorted(required))
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
    # The one scale's abilities; `ability_rank` among the keys whose runs of the suite are all complete.
    keys_df = ability_columns(keys_df, shared.irt["item_abilities"], by_edition)
    leaderboard = keys_df.select(LEADERBOARD_COLUMNS).sort(
        ["rank", "official_score", "model_key"], descending=[False, True, False], nulls_last=True
    )
    complete_keys = keys_df.filter(pl.col("complete"))["model_key"]
    ingested = shared.questions["edition"].is_in(sorted(required)).to_numpy()
    current_law = current_law_leaderboard(
        suite.name, keys_df, shared.keys, shared.mats, shared.questions, ingested, shared.superseded
    )
    tables = {
        "leaderboard": leaderboard,
        "leaderboard_by_area": _by_area(
            shared.areas.filter(pl.col("edition").is_in(editions)),
            shared.questions.filter(pl.col("edition").is_in(editions)),
        ),
        "pairwise_comparison": pairwise_table,
        "provider_summary": provider_summary(keys_df),
        "edition_deltas": edition_deltas(by_edition, complete_keys),
        "pareto_frontier": pareto_frontier(keys_df),
        "latency_accuracy_correlation": latency_accuracy_correlation(keys_df),
        "run_variance": variance,
        "leaderboard_current_law": current_law,
    }
    summary = {
        "suite": suite.name,
        "description": suite.description,
        "editions": editions,
        "editions_ingested": sorted(required),
        "questions": int(shared.questions["edition"].is_in(sorted(required)).sum()),
        "model_keys": keys_df.height,
        "ranked_keys": complete_keys.len(),
        "questions_current_law": int((ingested & ~shared.superseded).sum()),
        "questions_possibly_superseded": int((ingested & shared.superseded).sum()),
    }
    return tables, summary


def _with_suite(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(pl.lit(name, pl.String).alias("suite"), pl.all())


def build_leaderboard_tables(
    con: duckdb.DuckDBPyConnection,
    *,
    as_of: dt.date | None = None,
    suites: Sequence[Suite] | None = None,
    law: LawCurrency | None = None,
) -> dict[str, pl.DataFrame]:
    """All leaderboard and analysis tables, keyed by table name (see module docstring).

    `con` must expose `inferences`, `questions`, `answer_keys`, `editions`, `models` and
    `model_pricing`; `scores` and `published_run_summaries` are used when present (scores are
    computed otherwise). `as_of`: count only runs completed before the end of that day (UTC).
    `suites`: the suites to rank (`load_suites`); default: `all`, every edition of `editions`. The plain
    suite-scoped tables are the default suite's (`default_suite`), their `_by_suite` twins every suite's.
    `law`: the legal reforms and per-question notes (`core/law_currency.py`); default: the packaged ones.
    Deterministic: no random numbers anywhere.
    """
    if suites is None:
        editions = con.sql("SELECT DISTINCT edition::INTEGER AS e FROM editions ORDER BY e").pl()["e"]
        suites = [
            Suite(name=ALL_SUITE, editions=tuple(editions.to_list()), description=ALL_SUITE_DESCRIPTION)
        ]
    default = default_suite({s.name: s for s in suites}).name
    law = law if law is not None else load_law_currency()
    shared = _shared(con, as_of, suites, law)
    per_suite = {suite.name: _suite_tables(shared, suite) for suite in suites}
    tables: dict[str, pl.DataFrame] = dict(per_suite[default][0])
    for name, base in BY_SUITE.items():
        tables[name] = pl.concat(
            [_with_suite(suite, frames[base]) for suite, (frames, _) in per_suite.items()],
            how="vertical_relaxed",
        )
    tables["leaderboard_current_law"] = pl.concat(
        [frames["leaderboard_current_law"] for frames, _ in per_suite.values()], how="vertical_relaxed"
    ).select(column_names("leaderboard_current_law"))
    tables["suites"] = pl.DataFrame(
        [{**summary, "is_default": suite == default} for suite, (_, summary) in per_suite.items()],
        schema=column_schema("suites"),
    ).select(column_names("suites"))
    key_accuracy = shared.mats["C"].sum(axis=1) / np.maximum(shared.mats["E"].sum(axis=1), 1)
    tables |= {
        "leaderboard_by_edition": shared.by_edition.select(BY_EDITION_COLUMNS).sort("model_key", "edition"),
        # Descriptive, per key over every edition it ran (per suite: leaderboard_by_area_by_suite).
        "leaderboard_by_area": _by_area(shared.all_areas, shared.questions),
        "item_analysis": item_analysis(
            shared.questions,
            shared.mats,
            key_accuracy,
            real_models=_real_models(con, shared.keys),
        ),
        # Abilities on one scale, question difficulties, the key audit, and the cutoff comparison (exam
        # dates on both sides of a cutoff need every edition, not one suite's few months).
        **shared.irt,
        "key_audit": _audit_with_law_currency(shared.irt["key_audit"], shared.currency),
        "runs": runs_core.runs_table(shared.cells),
        "legal_reforms": legal_reforms_table(law, shared.currency),
        "question_law_currency": shared.currency,
    }
    return {name: tables[name] for name in ANALYSIS_TABLES}


def _real_models(con: duckdb.DuckDBPyConnection, keys: pl.Series) -> np.ndarray:
    """One boolean per key of `keys`: a model, not an offline baseline (`models.kind`, which keeps every key
    that ran, removed ones included)."""
    baselines = con.sql("SELECT model_key FROM models WHERE kind = 'baseline'").pl()["model_key"]
    return ~keys.is_in(baselines.implode()).to_numpy()


def _audit_with_law_currency(audit: pl.DataFrame, currency: pl.DataFrame) -> pl.DataFrame:
    """`key_audit` with each question's law currency; a suspicious key on a possibly-superseded question
    first (later law may be why strong keys contest it), then the other suspicious ones, as before."""
    return audit.join(
        currency.select("qid", "possibly_superseded", "reforms_after"),
        on="qid",
        how="left",
        maintain_order="left",
    ).sort(
        ["suspicious", "possibly_superseded", "consensus_weight", "edition", "number"],
        descending=[True, True, True, False, False],
        nulls_last=True,
    )


def suite_view(
    tables: Mapping[str, pl.DataFrame], suite: str, editions: Sequence[int], *, plain: bool = False
) -> dict[str, pl.DataFrame]:
    """The analysis tables as one suite sees them: each suite-scoped table its rows of `<table>_by_suite`
    (`leaderboard_by_area` included), `leaderboard_by_edition` the suite's editions, the rest as they are.
    What the report, `oabench leaderboard --suite` and the per-suite checks read. `plain`: for the default
    suite, keep the plain tables (its rows) but `leaderboard_by_area` (every edition's) and `_by_edition`."""
    view = dict(tables)
    for name, base in BY_SUITE.items():
        if name in tables and (not plain or base == "leaderboard_by_area"):
            view[base] = tables[name].filter(pl.col("suite") == suite).drop("suite")
    if "leaderboard_by_edition" in tables:
        view["leaderboard_by_edition"] = tables["leaderboard_by_edition"].filter(
            pl.col("edition").is_in(list(editions))
        )
    return view
