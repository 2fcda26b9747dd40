"""Which differences between models are real: exact McNemar with Holm, rank intervals, letter display.

Only complete, ranked keys take part (an incomplete key's missing answers would enter the tests as
if they were answers, and its pairs would inflate Holm's family).

- `pairwise_comparison`: exact two-sided McNemar on the active questions both keys answered, Holm
  across all pairs of ranked keys.
- `rank_low` / `rank_high`: a key's rank interval from the same Holm-adjusted tests: 1 + the keys
  significantly better than it, and the number of ranked keys − the keys significantly worse.
- `tie_group` (kept for one release): a compact letter display from the same tests. Ranked keys are
  ordered by score; every maximal run of consecutive keys in which no pair differs significantly
  gets a letter, and a key lists the letters of all runs it belongs to. Two keys sharing a letter
  are never significantly different; keys with no letter in common may still be untested-apart when
  a key between them differs from one of them (then rank_low/high say more).
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from oabench_pipeline.core import stats
from oabench_pipeline.core.analysis.frames import SIGNIFICANCE, registered

LETTER_CODES = ("A", "B", "C", "D")
ABSENT = 5  # letter code for "no inference row"
_KEYS_TEMP = "_oabench_lb_keys"
_QUESTIONS_TEMP = "_oabench_lb_questions"

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


def matrices(
    con: duckdb.DuckDBPyConnection, scores: str, keys: pl.Series, questions: pl.DataFrame
) -> dict[str, np.ndarray]:
    """Dense keys x questions arrays: covered (E), correct (C) and letter code (L)."""
    keys_frame = pl.DataFrame({"model_key": keys, "ki": pl.int_range(keys.len(), eager=True, dtype=pl.Int32)})
    q_frame = questions.select("qid", qi=pl.int_range(questions.height, dtype=pl.Int32))
    with registered(con, {_KEYS_TEMP: keys_frame, _QUESTIONS_TEMP: q_frame}):
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


def pairwise(keys: pl.Series, covered: np.ndarray, correct: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """Exact McNemar for every unordered pair of `keys` on shared active questions, Holm across all pairs.

    `covered` / `correct` are the keys' rows of the keys × questions matrices. With E (covered) and
    C (correct) as 0/1 matrices and W = E & ~C, the discordant counts of all pairs are one matrix
    product: b = C @ W.T (a right, b wrong), and c = b.T. float32 matmuls are exact for counts below
    2**24. Returns the table and `better`: better[i, j] when i beats j significantly after Holm.
    """
    n_keys = keys.len()
    e = covered.astype(np.float32)
    c = correct.astype(np.float32)
    w = e - c
    shared = e @ e.T
    a_correct_on_shared = c @ e.T  # [i, j]: questions i got right that j also answered
    b_only = c @ w.T
    iu, ju = np.triu_indices(n_keys, k=1)
    n_shared = shared[iu, ju].astype(np.int64)
    a_only = b_only[iu, ju].astype(np.int64)
    b_only_pair = b_only[ju, iu].astype(np.int64)
    p = stats.mcnemar_exact_p(a_only, b_only_pair)
    p_holm = stats.holm_adjust(p)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_a = np.where(n_shared > 0, a_correct_on_shared[iu, ju] / n_shared, np.nan)
        acc_b = np.where(n_shared > 0, a_correct_on_shared[ju, iu] / n_shared, np.nan)
    significant = p_holm < SIGNIFICANCE
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
            "significant": significant,
        },
        schema_overrides={"model_a": pl.String, "model_b": pl.String},
        nan_to_null=True,
    )
    better = np.zeros((n_keys, n_keys), dtype=bool)
    better[iu, ju] = significant & (a_only > b_only_pair)
    better[ju, iu] = significant & (b_only_pair > a_only)
    return table, better


def rank_intervals(better: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank_low, rank_high) per key: 1 + keys significantly better; n − keys significantly worse."""
    n = better.shape[0]
    return 1 + better.sum(axis=0), n - better.sum(axis=1)


def _letters(index: int) -> str:
    """a, b, …, z, aa, ab, …: as many letters as there are groups."""
    out = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(ord("a") + rest) + out
    return out


def compact_letters(order: list[int], differs: np.ndarray) -> list[str]:
    """A compact letter display over keys in `order` (best first); `differs[i, j]`: significantly different.

    Each maximal run of consecutive keys in which no pair differs gets the next letter. Returns the
    letters per position of `order`.
    """
    n = len(order)
    runs: list[tuple[int, int]] = []
    end = 0
    for start in range(n):  # at most a few hundred ranked keys
        end = max(end, start)
        while end + 1 < n and not differs[order[end + 1], [order[k] for k in range(start, end + 1)]].any():
            end += 1
        if not runs or end > runs[-1][1]:
            runs.append((start, end))
    labels: list[list[str]] = [[] for _ in range(n)]
    for letter, (start, end) in enumerate(runs):
        for position in range(start, end + 1):
            labels[position].append(_letters(letter))
    separator = "" if len(runs) <= 26 else " "  # past z, letters have two characters: keep them apart
    return [separator.join(label) for label in labels]
