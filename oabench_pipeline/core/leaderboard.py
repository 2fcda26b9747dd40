"""Leaderboard and analysis tables computed from the `scores` table and the warehouse relations.

Definitions (they reproduce OABench's published summary.json):
- official score = correct answers on active questions + every annulled question (the OAB
  credits annulled questions to everyone); official total = questions in the edition (80);
- technical score = correct answers on active questions; technical total = active questions;
- invalid = active question with no extracted answer (error, empty or unparseable response);
- strict compliance = strict-parsed answers / non-skipped calls;
- average latency = total latency / non-skipped calls, rounded half up (JavaScript Math.round);
- an edition is passed with official score >= half of its questions (40 of 80);
- estimated cost = prompt tokens x prompt price + completion tokens x completion price, using
  the newest `model_pricing` snapshot of the key's model id (reported as `pricing_fetched_at`);
  completion tokens already include reasoning tokens (as OpenRouter reports them);
- a key is `complete` when it has a non-skipped inference row (answered or errored) for every
  active question of every edition listed in `editions` that has questions; incomplete keys keep
  their numbers but get no rank. Scores of a key cover the editions it has rows in: a missing
  question counts as not correct (and is counted in `missing_count`, not as invalid).

Work is done in a few passes: one DuckDB GROUPING SETS aggregate over `scores`, one per-area
aggregate, one extraction of a keys x questions matrix (pairwise McNemar, item analysis), and
small polars/numpy steps over per-key rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb
import numpy as np
import polars as pl

from oabench_pipeline.core import stats
from oabench_pipeline.core.scoring import QUESTION_STATUS_SQL, score_inferences

PASS_FRACTION = 0.5  # OAB: 40 of 80
SIGNIFICANCE = 0.05
KEY_PROBLEM_AGREEMENT = 0.75  # share of strong keys agreeing on one non-key letter
HARD_SHARE = 0.25  # an item fewer than a quarter of keys get right is 'hard'
LETTER_CODES = ("A", "B", "C", "D")
NO_ANSWER = 4  # letter code for "no extracted answer"
ABSENT = 5  # letter code for "no inference row"
_SCORES_TEMP = "_oabench_scores"
_KEYS_TEMP = "_oabench_lb_keys"
_QUESTIONS_TEMP = "_oabench_lb_questions"

_EDITION_TOTALS_SQL = f"""
SELECT q.edition,
       count(*) AS n_questions,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'annulled') AS annulled,
       count(*) FILTER (WHERE {QUESTION_STATUS_SQL} = 'active') AS active
FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid
GROUP BY q.edition
"""

_QUESTIONS_SQL = f"""
SELECT q.qid, q.edition, q.number, q.area, k.correct, {QUESTION_STATUS_SQL} AS status
FROM questions AS q LEFT JOIN answer_keys AS k ON k.qid = q.qid
ORDER BY q.edition, q.number, q.qid
"""

# Model id per key from the inferences, then registry metadata and the newest price snapshot.
_KEY_META_SQL = """
WITH keys AS (
    SELECT model_key, any_value(model) AS model FROM inferences GROUP BY model_key
), price AS (
    SELECT model, prompt_price_per_token, completion_price_per_token, fetched_at
    FROM model_pricing
    QUALIFY row_number() OVER (PARTITION BY model ORDER BY fetched_at DESC) = 1
)
SELECT k.model_key,
       coalesce(m.model, k.model) AS model,
       coalesce(m.label, k.model_key) AS label,
       coalesce(m.provider, split_part(coalesce(m.model, k.model), '/', 1)) AS provider,
       m.knowledge_cutoff,
       p.prompt_price_per_token,
       p.completion_price_per_token,
       p.fetched_at AS pricing_fetched_at
FROM keys AS k
LEFT JOIN models AS m ON m.model_key = k.model_key
LEFT JOIN price AS p ON p.model = coalesce(m.model, k.model)
"""

# One scan for both key x edition and key x area counts (GROUPING SETS); latency quantiles are a
# separate, cheaper query (inside the grouping sets they cost 5x more).
_AGG_SQL = """
SELECT model_key, edition, area, GROUPING(area) = 1 AS by_edition,
       count(*) FILTER (WHERE status = 'active' AND NOT skipped) AS covered_active,
       count(*) FILTER (WHERE status = 'active') AS active_rows,
       count(*) FILTER (WHERE is_correct_technical) AS technical_score,
       count(*) FILTER (WHERE status = 'active' AND NOT is_valid) AS invalid_count,
       count(*) FILTER (WHERE NOT skipped) AS calls,
       count(*) FILTER (WHERE strict_compliant) AS strict_count,
       sum(latency_ms) FILTER (WHERE NOT skipped)::BIGINT AS latency_sum,
       sum(prompt_tokens)::BIGINT AS prompt_tokens,
       sum(completion_tokens)::BIGINT AS completion_tokens,
       sum(reasoning_tokens)::BIGINT AS reasoning_tokens,
       sum(cost_usd) AS cost_usd
FROM {scores}
GROUP BY GROUPING SETS ((model_key, edition), (model_key, area))
"""

_LATENCY_SQL = """
SELECT model_key,
       quantile_cont(latency_ms, 0.5) FILTER (WHERE NOT skipped) AS p50_latency_ms,
       quantile_cont(latency_ms, 0.95) FILTER (WHERE NOT skipped) AS p95_latency_ms
FROM {scores}
GROUP BY model_key
"""

_MATRIX_SQL = """
SELECT k.ki, q.qi,
       coalesce(s.is_correct_technical, FALSE) AS c,
       s.status = 'active' AND NOT s.skipped AS e,
       CASE WHEN NOT s.is_valid THEN 4
            WHEN s.answer = 'A' THEN 0 WHEN s.answer = 'B' THEN 1
            WHEN s.answer = 'C' THEN 2 WHEN s.answer = 'D' THEN 3 ELSE 4 END::TINYINT AS letter
FROM {scores} AS s
JOIN {keys} AS k ON k.model_key = s.model_key
JOIN {questions} AS q ON q.qid = s.qid
"""


def _relation_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """True when `name` resolves on `con` (table, view or registered Arrow/polars object)."""
    try:
        con.sql(f"SELECT * FROM {name} LIMIT 0")
    except duckdb.CatalogException:
        return False
    return True


@contextmanager
def _registered(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> Iterator[None]:
    """Register helper frames on `con` for the duration of a block, leaving no trace afterwards."""
    for name, frame in frames.items():
        con.register(name, frame)
    try:
        yield
    finally:
        for name in frames:
            con.unregister(name)


def _round_half_up(values: pl.Expr) -> pl.Expr:
    """JavaScript Math.round (what OABench used for avgLatencyMs): floor(x + 0.5)."""
    return (values + 0.5).floor().cast(pl.Int64)


def _safe_div(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den).otherwise(None)


# ---------------------------------------------------------------------------------------------
# Per-edition and per-key aggregates
# ---------------------------------------------------------------------------------------------


def _by_edition(agg: pl.DataFrame, ed_totals: pl.DataFrame, required: set[int]) -> pl.DataFrame:
    """Key x edition rows with official/technical scores, pass, completeness (no bootstrap yet)."""
    return (
        agg.filter(pl.col("by_edition"))
        .drop("area")
        .join(ed_totals, on="edition", how="left")
        .with_columns(pl.col("n_questions", "annulled", "active").fill_null(0))
        .with_columns(
            official_score=pl.col("technical_score") + pl.col("annulled"),
            official_total=pl.col("n_questions"),
            technical_total=pl.col("active"),
            missing_count=pl.col("active") - pl.col("covered_active"),
            pass_threshold=(pl.col("n_questions") * PASS_FRACTION).ceil().cast(pl.Int64),
            required=pl.col("edition").is_in(sorted(required)),
        )
        .with_columns(
            official_accuracy=_safe_div(pl.col("official_score"), pl.col("official_total")),
            technical_accuracy=_safe_div(pl.col("technical_score"), pl.col("technical_total")),
            passed=(pl.col("official_score") >= pl.col("pass_threshold")) & (pl.col("n_questions") > 0),
            strict_compliance=_safe_div(pl.col("strict_count"), pl.col("calls")),
            avg_latency_ms=_round_half_up(_safe_div(pl.col("latency_sum"), pl.col("calls"))),
            complete=pl.col("missing_count") == 0,
        )
    )


def _per_key(
    by_edition: pl.DataFrame, latency: pl.DataFrame, meta: pl.DataFrame, n_required: int
) -> pl.DataFrame:
    """One row per key: sums over its editions, latency quantiles, metadata and cost."""
    sums = by_edition.group_by("model_key").agg(
        pl.col(
            "official_score",
            "official_total",
            "technical_score",
            "technical_total",
            "invalid_count",
            "missing_count",
            "calls",
            "strict_count",
            "latency_sum",
        ).sum(),
        pl.col("prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd").sum(),
        # sum() of an all-null column is 0; keep NULL so "no data" differs from "free".
        pl.col("cost_usd").is_not_null().any().alias("_has_cost"),
        pl.col("reasoning_tokens").is_not_null().any().alias("_has_reasoning"),
        pl.col("passed").filter(pl.col("required")).sum().alias("editions_passed"),
        (pl.col("complete") & pl.col("required")).sum().alias("_complete_required"),
    )
    effective_cost = pl.coalesce("cost_usd", "estimated_cost_usd")
    return (
        sums.join(latency, on="model_key", how="left")
        .join(meta, on="model_key", how="left")
        .with_columns(
            cost_usd=pl.when(pl.col("_has_cost")).then(pl.col("cost_usd")),
            reasoning_tokens=pl.when(pl.col("_has_reasoning")).then(pl.col("reasoning_tokens")),
            estimated_cost_usd=pl.col("prompt_tokens") * pl.col("prompt_price_per_token")
            + pl.col("completion_tokens") * pl.col("completion_price_per_token"),
            editions_total=pl.lit(n_required, pl.Int64),
            complete=pl.col("_complete_required") == n_required,
        )
        .with_columns(
            official_accuracy=_safe_div(pl.col("official_score"), pl.col("official_total")),
            technical_accuracy=_safe_div(pl.col("technical_score"), pl.col("technical_total")),
            passed_all=(pl.col("editions_passed") == n_required) & (n_required > 0),
            strict_compliance=_safe_div(pl.col("strict_count"), pl.col("calls")),
            avg_latency_ms=_round_half_up(_safe_div(pl.col("latency_sum"), pl.col("calls"))),
            tokens_per_question=_safe_div(
                pl.col("prompt_tokens") + pl.col("completion_tokens"), pl.col("calls")
            ),
            cost_per_correct_usd=_safe_div(effective_cost, pl.col("technical_score")),
        )
        .sort("model_key")
    )


def _add_bootstrap(
    keys_df: pl.DataFrame,
    by_edition: pl.DataFrame,
    editions: list[int],
    required: set[int],
    seed: int,
    samples: int,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Accuracy intervals per key and pass probabilities per key x edition and across editions."""
    off_low, off_high = stats.bootstrap_accuracy_ci(
        keys_df["official_score"].to_numpy(), keys_df["official_total"].to_numpy(), samples, seed
    )
    tech_low, tech_high = stats.bootstrap_accuracy_ci(
        keys_df["technical_score"].to_numpy(), keys_df["technical_total"].to_numpy(), samples, seed + 1
    )
    # Dense keys x editions matrices; an edition the key did not sit has total 0.
    keys = keys_df["model_key"]
    ki = by_edition["model_key"].replace_strict(
        keys, pl.int_range(keys.len(), eager=True), return_dtype=pl.Int64
    )
    ei = by_edition["edition"].replace_strict(editions, list(range(len(editions))), return_dtype=pl.Int64)
    shape = (keys.len(), len(editions))
    score, total, threshold = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    score[ki, ei] = by_edition["official_score"].to_numpy()
    total[ki, ei] = by_edition["official_total"].to_numpy()
    threshold[ki, ei] = by_edition["pass_threshold"].to_numpy()
    req_cols = np.array([e in required for e in editions], dtype=bool)
    per_edition, joint = stats.bootstrap_pass_probability(
        score, total, threshold, samples, seed + 2, joint_columns=req_cols
    )
    keys_df = keys_df.with_columns(
        accuracy_ci_low=pl.Series(off_low),
        accuracy_ci_high=pl.Series(off_high),
        technical_ci_low=pl.Series(tech_low),
        technical_ci_high=pl.Series(tech_high),
        p_pass=pl.Series(joint),
    )
    by_edition = by_edition.with_columns(p_pass=pl.Series(per_edition[ki.to_numpy(), ei.to_numpy()]))
    return keys_df, by_edition


# ---------------------------------------------------------------------------------------------
# Keys x questions matrix: pairwise McNemar and item analysis
# ---------------------------------------------------------------------------------------------


def _matrices(
    con: duckdb.DuckDBPyConnection, scores: str, keys: pl.Series, questions: pl.DataFrame
) -> dict[str, np.ndarray]:
    """Dense keys x questions arrays: covered (E), correct (C) and letter code (L)."""
    keys_frame = pl.DataFrame({"model_key": keys, "ki": pl.int_range(keys.len(), eager=True, dtype=pl.Int32)})
    q_frame = questions.select("qid", qi=pl.int_range(questions.height, dtype=pl.Int32))
    with _registered(con, {_KEYS_TEMP: keys_frame, _QUESTIONS_TEMP: q_frame}):
        cells = con.sql(
            _MATRIX_SQL.format(scores=scores, keys=_KEYS_TEMP, questions=_QUESTIONS_TEMP)
        ).fetchnumpy()
    shape = (keys.len(), questions.height)
    ki, qi = np.asarray(cells["ki"]), np.asarray(cells["qi"])
    covered = np.zeros(shape, dtype=bool)
    correct = np.zeros(shape, dtype=bool)
    letters = np.full(shape, ABSENT, dtype=np.int8)
    covered[ki, qi] = np.asarray(cells["e"], dtype=bool)
    correct[ki, qi] = np.asarray(cells["c"], dtype=bool)
    letters[ki, qi] = np.asarray(cells["letter"], dtype=np.int8)
    return {"E": covered, "C": correct, "L": letters}


def _pairwise(keys: pl.Series, covered: np.ndarray, correct: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """Exact McNemar for every unordered pair on shared active questions, Holm across all pairs.

    With E (covered) and C (correct) as keys x questions 0/1 matrices and W = E & ~C, the
    discordant counts of all pairs are one matrix product: b = C @ W.T (a right, b wrong), and
    c = b.T. float32 matmuls are exact for counts below 2**24.
    """
    e = covered.astype(np.float32)
    c = correct.astype(np.float32)
    w = e - c
    shared = e @ e.T
    a_correct_on_shared = c @ e.T  # [i, j]: questions i got right that j also answered
    b_only = c @ w.T
    iu, ju = np.triu_indices(keys.len(), k=1)
    n_shared = shared[iu, ju].astype(np.int64)
    a_only = b_only[iu, ju].astype(np.int64)
    b_only_pair = b_only[ju, iu].astype(np.int64)
    p = stats.mcnemar_exact_p(a_only, b_only_pair)
    p_holm = stats.holm_adjust(p)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_a = np.where(n_shared > 0, a_correct_on_shared[iu, ju] / n_shared, np.nan)
        acc_b = np.where(n_shared > 0, a_correct_on_shared[ju, iu] / n_shared, np.nan)
    table = pl.DataFrame(
        {
            "model_a": keys.gather(iu),
            "model_b": keys.gather(ju),
            "n_shared": n_shared,
            "accuracy_a": acc_a,
            "accuracy_b": acc_b,
            "a_only_correct": a_only,
            "b_only_correct": b_only_pair,
            "p_value": p,
            "p_holm": p_holm,
            "significant": p_holm < SIGNIFICANCE,
        },
        nan_to_null=True,
    )
    holm_matrix = np.ones((keys.len(), keys.len()))
    holm_matrix[iu, ju] = p_holm
    holm_matrix[ju, iu] = p_holm
    return table, holm_matrix


def _tie_groups(leaderboard: pl.DataFrame, holm_matrix: np.ndarray) -> pl.Series:
    """Group ranked keys: walking down the ranking, a key joins the current group while its
    difference to the group's leader is not significant after Holm; otherwise it leads a new one.
    """
    order = (
        leaderboard.with_row_index("_i")
        .filter(pl.col("rank").is_not_null())
        .sort(["rank", "technical_score", "model_key"], descending=[False, True, False])["_i"]
        .to_list()
    )
    groups: list[int | None] = [None] * leaderboard.height
    group, leader = 0, None
    for i in order:  # at most a few hundred ranked keys
        if leader is None or holm_matrix[leader, i] < SIGNIFICANCE:
            group, leader = group + 1, i
        groups[i] = group
    return pl.Series("tie_group", groups, dtype=pl.Int64)


def _item_analysis(
    questions: pl.DataFrame, mats: dict[str, np.ndarray], key_accuracy: np.ndarray
) -> pl.DataFrame:
    """Per question: share correct, discrimination, answer distribution, modal answer and flags.

    Discrimination is the corrected item-rest point-biserial correlation (item correctness vs the
    key's accuracy on the other items) across the keys that answered the item. A question is
    flagged 'possible_key_problem' when, among the strong keys (top quarter by technical accuracy,
    at least 3) that answered it, at least 3/4 chose the same letter and it is not the key's letter;
    'hard' when fewer than a quarter of keys got it right; 'annulled' for annulled questions.
    """
    covered, correct, letters = mats["E"], mats["C"], mats["L"]
    present = letters != ABSENT
    counts = np.stack([(letters == code).sum(axis=0) for code in range(len(LETTER_CODES))])  # (4, Q)
    n_models = present.sum(axis=0)
    n_covered = covered.sum(axis=0)
    share = np.where(n_covered > 0, correct.sum(axis=0) / np.maximum(n_covered, 1), np.nan)
    disc = stats.point_biserial_rest(
        correct, covered, correct.sum(axis=1).astype(np.float64), covered.sum(axis=1).astype(np.float64)
    )
    modal = counts.argmax(axis=0)
    modal_count = counts.max(axis=0)
    n_strong = max(3, math.ceil(len(key_accuracy) / 4))
    strong = np.argsort(-np.nan_to_num(key_accuracy, nan=-1.0), kind="stable")[:n_strong]
    strong_counts = np.stack([(letters[strong] == code).sum(axis=0) for code in range(len(LETTER_CODES))])
    strong_n = covered[strong].sum(axis=0)
    strong_modal = strong_counts.argmax(axis=0)
    key_code = questions["correct"].replace_strict(
        list(LETTER_CODES), list(range(len(LETTER_CODES))), default=-1, return_dtype=pl.Int64
    )
    active = (questions["status"] == "active").to_numpy()
    key_problem = (
        active
        & (strong_n >= 3)
        & (strong_counts.max(axis=0) >= KEY_PROBLEM_AGREEMENT * strong_n)
        & (strong_modal != key_code.to_numpy())
        & (len(key_accuracy) >= 3)
    )
    flag = np.where(
        ~active,
        "annulled",
        np.where(key_problem, "possible_key_problem", np.where(share < HARD_SHARE, "hard", "")),
    )
    letters_arr = np.array(LETTER_CODES)
    table = questions.select("qid", "edition", "number", "area", "correct", "status").with_columns(
        n_models=pl.Series(n_models.astype(np.int64)),
        share_correct=pl.Series(np.where(active, share, np.nan)),
        discrimination=pl.Series(np.where(active, disc, np.nan)),
        answer_distribution=pl.DataFrame(
            {
                **{code: counts[i].astype(np.int64) for i, code in enumerate(LETTER_CODES)},
                "none": (n_models - counts.sum(axis=0)).astype(np.int64),
            }
        ).to_struct(),
        modal_answer=pl.Series(np.where(modal_count > 0, letters_arr[modal], "")).replace("", None),
        modal_share=pl.Series(np.where(n_models > 0, modal_count / np.maximum(n_models, 1), np.nan)),
        flag=pl.Series(flag).replace("", None),
    )
    table = table.with_columns(pl.col("share_correct", "discrimination", "modal_share").fill_nan(None))
    priority = pl.col("flag").replace_strict(
        {"possible_key_problem": 0, "hard": 1, "annulled": 3}, default=2, return_dtype=pl.Int64
    )
    return table.sort([priority, "share_correct", "discrimination", "edition", "number"], nulls_last=True)


# ---------------------------------------------------------------------------------------------
# Small derived tables
# ---------------------------------------------------------------------------------------------


def _provider_summary(leaderboard: pl.DataFrame) -> pl.DataFrame:
    return (
        leaderboard.sort(["official_accuracy", "model_key"], descending=[True, False], nulls_last=True)
        .group_by("provider", maintain_order=True)
        .agg(
            n_keys=pl.len(),
            best_key=pl.col("model_key").first(),
            best_accuracy=pl.col("official_accuracy").first(),
            mean_accuracy=pl.col("official_accuracy").mean(),
            max_accuracy=pl.col("official_accuracy").max(),
            # NULL (not 0) when no key of the provider has cost data.
            total_cost_usd=pl.when(pl.col("cost_usd").is_not_null().any()).then(pl.col("cost_usd").sum()),
            total_estimated_cost_usd=pl.when(pl.col("estimated_cost_usd").is_not_null().any()).then(
                pl.col("estimated_cost_usd").sum()
            ),
        )
        .sort(["max_accuracy", "provider"], descending=[True, False], nulls_last=True)
    )


def _edition_deltas(by_edition: pl.DataFrame) -> pl.DataFrame:
    ordered = by_edition.sort("model_key", "edition")
    return (
        ordered.group_by("model_key", maintain_order=True)
        .agg(
            first_edition=pl.col("edition").first(),
            last_edition=pl.col("edition").last(),
            first_accuracy=pl.col("technical_accuracy").first(),
            last_accuracy=pl.col("technical_accuracy").last(),
        )
        .with_columns(delta=pl.col("last_accuracy") - pl.col("first_accuracy"))
    )


def _pareto(leaderboard: pl.DataFrame) -> pl.DataFrame:
    """Cost (reported, else estimated) vs official accuracy. Only complete keys with a cost take
    part; a key is on the frontier unless another one costs no more and is strictly more accurate.
    """
    table = leaderboard.select(
        "model_key",
        "label",
        "complete",
        cost_usd=pl.coalesce("cost_usd", "estimated_cost_usd"),
        cost_source=pl.when(pl.col("cost_usd").is_not_null())
        .then(pl.lit("reported"))
        .when(pl.col("estimated_cost_usd").is_not_null())
        .then(pl.lit("estimated")),
        accuracy=pl.col("official_accuracy"),
    )
    eligible = (
        table["complete"] & table["cost_usd"].is_not_null() & table["accuracy"].is_not_null()
    ).to_numpy()
    cost = table["cost_usd"].fill_null(np.inf).to_numpy()
    acc = table["accuracy"].fill_null(-1.0).to_numpy()
    # keys x keys is fine for hundreds of keys and says exactly what "dominated" means.
    dominated = ((cost[None, :] <= cost[:, None]) & (acc[None, :] > acc[:, None]) & eligible[None, :]).any(
        axis=1
    )
    on_frontier = pl.when(pl.Series(eligible)).then(pl.Series(~dominated))
    return table.with_columns(on_frontier=on_frontier).sort("cost_usd", "accuracy", nulls_last=True)


def _latency_correlation(leaderboard: pl.DataFrame) -> pl.DataFrame:
    ranked = leaderboard.filter(pl.col("complete"))
    rho, p = stats.spearman(
        ranked["p50_latency_ms"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
        ranked["official_accuracy"].cast(pl.Float64).fill_null(np.nan).to_numpy(),
    )
    return pl.DataFrame(
        {
            "latency_measure": ["p50_latency_ms"],
            "accuracy_measure": ["official_accuracy"],
            "spearman_rho": [rho],
            "p_value": [p],
            "n": [ranked.height],
        },
        nan_to_null=True,
    )


def _contamination(
    by_edition: pl.DataFrame, keys_df: pl.DataFrame, edition_dates: pl.DataFrame
) -> pl.DataFrame:
    """Technical accuracy on editions held after vs on/before each key's knowledge cutoff."""
    rows = (
        by_edition.join(keys_df.select("model_key", "knowledge_cutoff"), on="model_key")
        .filter(pl.col("knowledge_cutoff").is_not_null())
        .join(edition_dates, on="edition", how="inner")
        .with_columns(after=pl.col("exam_date") > pl.col("knowledge_cutoff"))
    )
    after, before = pl.col("after"), ~pl.col("after")
    return (
        rows.group_by("model_key", "knowledge_cutoff")
        .agg(
            editions_after=after.sum(),
            correct_after=pl.col("technical_score").filter(after).sum(),
            total_after=pl.col("technical_total").filter(after).sum(),
            editions_before=before.sum(),
            correct_before=pl.col("technical_score").filter(before).sum(),
            total_before=pl.col("technical_total").filter(before).sum(),
        )
        .with_columns(
            accuracy_after=_safe_div(pl.col("correct_after"), pl.col("total_after")),
            accuracy_before=_safe_div(pl.col("correct_before"), pl.col("total_before")),
        )
        .with_columns(delta=pl.col("accuracy_after") - pl.col("accuracy_before"))
        .sort("model_key")
    )


LEADERBOARD_COLUMNS: tuple[str, ...] = (
    "rank",
    "tie_group",
    "model_key",
    "label",
    "provider",
    "official_score",
    "official_total",
    "official_accuracy",
    "accuracy_ci_low",
    "accuracy_ci_high",
    "technical_score",
    "technical_total",
    "technical_accuracy",
    "technical_ci_low",
    "technical_ci_high",
    "editions_passed",
    "editions_total",
    "passed_all",
    "p_pass",
    "invalid_count",
    "missing_count",
    "strict_compliance",
    "avg_latency_ms",
    "p50_latency_ms",
    "p95_latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "tokens_per_question",
    "cost_usd",
    "estimated_cost_usd",
    "pricing_fetched_at",
    "cost_per_correct_usd",
    "complete",
)

BY_EDITION_COLUMNS: tuple[str, ...] = (
    "model_key",
    "edition",
    "official_score",
    "official_total",
    "official_accuracy",
    "technical_score",
    "technical_total",
    "technical_accuracy",
    "passed",
    "p_pass",
    "invalid_count",
    "missing_count",
    "strict_compliance",
    "avg_latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cost_usd",
    "complete",
)


def _scores_name(con: duckdb.DuckDBPyConnection) -> tuple[str, pl.DataFrame | None]:
    """Use the `scores` relation when the caller has one, else score the inferences now."""
    if _relation_exists(con, "scores"):
        return "scores", None
    return _SCORES_TEMP, score_inferences(con)


def build_leaderboard_tables(
    con: duckdb.DuckDBPyConnection, *, seed: int = 0, bootstrap_samples: int = 2000
) -> dict[str, pl.DataFrame]:
    """All leaderboard and analysis tables, keyed by table name (see module docstring).

    `con` must expose `inferences`, `questions`, `answer_keys`, `editions`, `models` and
    `model_pricing`; a `scores` relation is used when present (else computed). Deterministic for a
    given `seed`.
    """
    scores_name, computed = _scores_name(con)
    temp = {_SCORES_TEMP: computed} if computed is not None else {}
    with _registered(con, temp):
        ed_totals = con.sql(_EDITION_TOTALS_SQL).pl()
        edition_dates = con.sql("SELECT edition::INTEGER AS edition, exam_date FROM editions").pl()
        questions = con.sql(_QUESTIONS_SQL).pl()
        meta = con.sql(_KEY_META_SQL).pl()
        agg = con.sql(_AGG_SQL.format(scores=scores_name)).pl()
        latency = con.sql(_LATENCY_SQL.format(scores=scores_name)).pl()
        required = set(edition_dates["edition"].to_list()) & set(ed_totals["edition"].to_list())
        by_edition = _by_edition(agg, ed_totals, required)
        keys_df = _per_key(by_edition, latency, meta, len(required))
        mats = _matrices(con, scores_name, keys_df["model_key"], questions)

    universe = sorted(required | set(by_edition["edition"].to_list()))
    keys_df, by_edition = _add_bootstrap(keys_df, by_edition, universe, required, seed, bootstrap_samples)
    # Rank among complete keys only: rank the complete subset and join back (others stay NULL).
    ranks = keys_df.filter(pl.col("complete")).select(
        "model_key", rank=pl.col("official_score").rank("dense", descending=True).cast(pl.Int64)
    )
    keys_df = keys_df.join(ranks, on="model_key", how="left", maintain_order="left")
    pairwise, holm_matrix = _pairwise(keys_df["model_key"], mats["E"], mats["C"])
    keys_df = keys_df.with_columns(_tie_groups(keys_df, holm_matrix))

    key_accuracy = mats["C"].sum(axis=1) / np.maximum(mats["E"].sum(axis=1), 1)
    leaderboard = keys_df.select(LEADERBOARD_COLUMNS).sort(
        ["rank", "official_score", "model_key"], descending=[False, True, False], nulls_last=True
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
            accuracy=_safe_div(pl.col("technical_score"), pl.col("active_rows")),
        )
        .sort("model_key", "area_order")
    )
    return {
        "leaderboard": leaderboard,
        "leaderboard_by_edition": by_edition_out,
        "leaderboard_by_area": by_area_out,
        "pairwise_comparison": pairwise,
        "item_analysis": _item_analysis(questions, mats, key_accuracy),
        "provider_summary": _provider_summary(keys_df),
        "edition_deltas": _edition_deltas(by_edition),
        "pareto_frontier": _pareto(keys_df),
        "latency_accuracy_correlation": _latency_correlation(keys_df),
        "contamination_by_cutoff": _contamination(by_edition, keys_df, edition_dates),
    }


# ---------------------------------------------------------------------------------------------
# OABench summary.json shape
# ---------------------------------------------------------------------------------------------


def summarize_like_oabench(con: duckdb.DuckDBPyConnection, model_key: str) -> dict[str, Any]:
    """The numbers of OABench's summary.json for one key: `editions`, `aggregate`, `cost`, `pricing`.

    Editions are those the key has rows in. `totalReasoningTokens` / `actualCostUsd` appear only
    when the key has such data, as in OABench. Float sums (actualCostUsd) may differ from the
    published file in the last bits because the summation order differs: compare with approx.
    """
    scores = score_inferences(con, model_key=model_key)
    ed_totals = con.sql(_EDITION_TOTALS_SQL).pl()
    meta = con.sql(_KEY_META_SQL).pl().filter(pl.col("model_key") == model_key)
    eds = (
        scores.group_by("edition")
        .agg(
            correct=pl.col("is_correct_technical").sum(),
            invalid=((pl.col("status") == "active") & ~pl.col("is_valid")).sum(),
            wrong=(
                (pl.col("status") == "active") & pl.col("is_valid") & ~pl.col("is_correct_technical")
            ).sum(),
            calls=(~pl.col("skipped")).sum(),
            strict=pl.col("strict_compliant").sum(),
        )
        .join(ed_totals, on="edition", how="left")
        .sort("edition")
    )
    editions: list[dict[str, Any]] = []
    for row in eds.iter_rows(named=True):  # a handful of editions
        official = row["correct"] + row["annulled"]
        editions.append(
            {
                "edition": row["edition"],
                "total": row["n_questions"],
                "annulled": row["annulled"],
                "active": row["active"],
                "correct": row["correct"],
                "incorrect": row["wrong"],
                "invalid": row["invalid"],
                "officialScore": official,
                "officialTotal": row["n_questions"],
                "officialAccuracy": official / row["n_questions"],
                "technicalScore": row["correct"],
                "technicalTotal": row["active"],
                "technicalAccuracy": row["correct"] / row["active"] if row["active"] else 0,
                "passed": official >= math.ceil(row["n_questions"] * PASS_FRACTION),
                "strictComplianceRate": row["strict"] / row["calls"] if row["calls"] else 0,
            }
        )
    total_q = sum(e["total"] for e in editions)
    active = sum(e["active"] for e in editions)
    official = sum(e["officialScore"] for e in editions)
    technical = sum(e["technicalScore"] for e in editions)
    invalid = sum(e["invalid"] for e in editions)
    calls = int(eds["calls"].sum())
    passed = sum(e["passed"] for e in editions)
    aggregate = {
        "totalQuestions": total_q,
        "totalAnnulled": sum(e["annulled"] for e in editions),
        "officialScore": official,
        "officialAccuracy": official / total_q if total_q else 0,
        "technicalScore": technical,
        "technicalTotal": active,
        "technicalAccuracy": technical / active if active else 0,
        "invalidCount": invalid,
        "invalidRate": invalid / active if active else 0,
        "strictComplianceRate": int(eds["strict"].sum()) / calls if calls else 0,
        "passedCount": passed,
        "passedAll": bool(editions) and passed == len(editions),
    }
    calls_df = scores.filter(~pl.col("skipped"))
    prompt = int(scores["prompt_tokens"].sum())
    completion = int(scores["completion_tokens"].sum())
    latency = int(calls_df["latency_ms"].sum())
    cost: dict[str, Any] = {"totalPromptTokens": prompt, "totalCompletionTokens": completion}
    if scores["reasoning_tokens"].is_not_null().any():
        cost["totalReasoningTokens"] = int(scores["reasoning_tokens"].sum())
    cost |= {
        "totalTokens": prompt + completion,
        "totalLatencyMs": latency,
        "avgLatencyMs": math.floor(latency / calls + 0.5) if calls else 0,
    }
    if scores["cost_usd"].is_not_null().any():
        cost["actualCostUsd"] = float(scores["cost_usd"].sum())
    summary: dict[str, Any] = {
        "model": meta["model"].item() if meta.height else None,
        "editions": editions,
        "aggregate": aggregate,
        "cost": cost,
    }
    if meta.height and meta["prompt_price_per_token"].item() is not None:
        pp, cp = meta["prompt_price_per_token"].item(), meta["completion_price_per_token"].item()
        summary["pricing"] = {
            "fetchedAt": meta["pricing_fetched_at"].item(),
            "promptPricePerToken": pp,
            "completionPricePerToken": cp,
            "estimatedCostUsd": prompt * pp + completion * cp,
        }
    return summary
