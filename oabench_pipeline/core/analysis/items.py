"""Per-question analysis across keys: share correct, discrimination, answer distribution, flags."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from oabench_pipeline.core import stats
from oabench_pipeline.core.analysis.pairwise import ABSENT, LETTER_CODES

KEY_PROBLEM_AGREEMENT = 0.75  # share of strong keys agreeing on one non-key letter
HARD_SHARE = 0.25  # an item fewer than a quarter of keys get right is 'hard'
# Below this many real models on a question, its share correct says little about the question: "0% (0/2)"
# of two guessers is no difficulty. No 'hard' flag then.
MIN_MODELS_FOR_DIFFICULTY = 3


def item_analysis(
    questions: pl.DataFrame,
    mats: dict[str, np.ndarray],
    key_accuracy: np.ndarray,
    real_models: np.ndarray | None = None,
) -> pl.DataFrame:
    """Per question: share correct, discrimination, answer distribution, modal answer and flags.

    `real_models` (one boolean per row of `mats`) says which keys are models rather than offline baselines:
    every statistic here is over the real models only (a random guesser says nothing of a question). Default:
    every key.

    Discrimination is the corrected item-rest point-biserial correlation (item correctness vs the
    key's accuracy on the other items) across the keys that answered the item. A question is
    flagged 'possible_key_problem' when, among the strong keys (top quarter by technical accuracy,
    at least 3) that answered it, at least 3/4 chose the same letter and it is not the key's letter;
    'hard' when fewer than a quarter of keys got it right, once at least `MIN_MODELS_FOR_DIFFICULTY` keys
    answered it; 'annulled' for annulled questions.
    """
    if real_models is not None:
        mats = {name: mats[name][real_models] for name in ("E", "C", "L")}
        key_accuracy = key_accuracy[real_models]
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
        np.where(
            key_problem,
            "possible_key_problem",
            np.where((share < HARD_SHARE) & (n_covered >= MIN_MODELS_FOR_DIFFICULTY), "hard", ""),
        ),
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
