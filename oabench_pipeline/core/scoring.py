"""Per-question scoring of model answers against the official answer key (the `scores` table).

Rules follow OABench and the OAB itself:
- an annulled question is credited to every candidate: `is_correct_official` is true, and it is
  left out of the technical score (`is_correct_technical` is NULL);
- an unresolved question (its later key unknown and disputed, `answer_keys.status_note`) is left out of
  both scores: both columns are NULL, and the edition's totals do not count it;
- an answer counts only when one was extracted (lenient parse present) and the call did not error;
- only questions that have an inference row for a model key appear (a missing row is not scored
  here; coverage is reported by the leaderboard's `complete` column).

The input `inferences` relation holds one row per (model_key, qid, run_id): every run of a cell is
scored, and the leaderboard picks which run counts (`core/runs.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from oabench_pipeline.core.tables import column_names

if TYPE_CHECKING:
    import duckdb

# The `scores` asset's code version: bump it with any change to the scoring rules, so that the automation
# re-scores every cell (`scoring/conditions.py`) and the UI shows every scores partition stale until then.
SCORING_VERSION = "scoring-2"  # 2: unresolved questions scored in neither score

# The answer key is authoritative for annulment; `questions.status` is the fallback when a key row
# is missing (then `correct` is NULL and an active question can only be answered wrong).
QUESTION_STATUS_SQL = "coalesce(k.status, q.status)"

SCORES_COLUMNS = column_names("scores")

# Values are bound as parameters ($model_key, $edition), never spliced into the text: model keys
# may contain quotes, semicolons or any unicode.
_SCORES_SQL = f"""
WITH scored AS (
    SELECT
        i.model_key,
        q.qid,
        q.edition,
        q.number,
        q.area,
        {QUESTION_STATUS_SQL} AS status,
        k.correct,
        i.answer_lenient AS answer,
        i.answer_strict,
        coalesce(i.answer_lenient IS NOT NULL AND i.error IS NULL AND NOT i.skipped, FALSE) AS is_valid,
        i.error IS NOT NULL AS has_error,
        coalesce(i.skipped, FALSE) AS skipped,
        coalesce(NOT i.skipped AND i.answer_strict IS NOT NULL, FALSE) AS strict_compliant,
        i.latency_ms,
        i.prompt_tokens,
        i.completion_tokens,
        i.reasoning_tokens,
        i.cost_usd,
        i.source,
        i.run_id
    FROM inferences AS i
    JOIN questions AS q ON q.qid = i.qid
    LEFT JOIN answer_keys AS k ON k.qid = q.qid
    WHERE ($model_key IS NULL OR i.model_key = $model_key)
      AND ($edition IS NULL OR q.edition = $edition)
)
SELECT
    model_key, qid, edition, number, area, status, correct, answer, answer_strict,
    CASE WHEN status = 'annulled' THEN TRUE
         WHEN status = 'unresolved' THEN NULL
         ELSE coalesce(is_valid AND answer = correct, FALSE) END AS is_correct_official,
    CASE WHEN status IN ('annulled', 'unresolved') THEN NULL
         ELSE coalesce(is_valid AND answer = correct, FALSE) END AS is_correct_technical,
    is_valid, has_error, skipped, strict_compliant,
    latency_ms, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, source, run_id
FROM scored
"""


def score_inferences(
    con: duckdb.DuckDBPyConnection, model_key: str | None = None, edition: int | None = None
) -> pl.DataFrame:
    """Build the `scores` table: one row per (model key, question) that has an inference row.

    `con` must expose `inferences`, `questions` and `answer_keys`. `model_key` / `edition` restrict
    the result (None = all). Columns are `SCORES_COLUMNS`. Row order is not significant: sorting a
    million rows would triple the cost, and every consumer groups or joins.
    """
    params = {"model_key": model_key, "edition": edition}
    return con.sql(_SCORES_SQL, params=params).pl()
