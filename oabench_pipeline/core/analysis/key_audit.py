"""Which published answer keys look wrong: strong keys agreeing on another letter (`key_audit`).

Each key's vote on a question is weighted by how far above chance it answers a question of average
difficulty: w_i = max(0, (expit(θ_i) − 1/4) / (3/4)) with θ_i its Rasch ability (`item_response`), so a
key at chance weighs 0 and a perfect one 1. The offline baselines (`baseline/random`,
`baseline/longest-choice`) weigh 0 and are not counted at all: they are floors, not readers of the
question, and a fitted ability only near chance would still give them a small vote. Per question, the
weighted share of each letter among the models that answered it (an unparseable reply is a vote for no
letter), the consensus letter (the largest share) and its share.

A question is `suspicious` when the consensus letter is not the published key and either
- its weighted share is at least `CLEAR_SHARE` (0.8) with at least `MIN_AGREEING` (3) keys of weight
  above 0 behind it, or
- its share is at least `SUSPICIOUS_SHARE` (0.7), at least `MIN_LED_AGREEING` (6) such keys chose it, and
  they are on average more able than the keys that answered anything else.
Why: under a right key, a strong key's wrong answers spread over three distractors, so a clear majority
on one of them takes a trap nearly every strong key falls for; on a trap the keys that still find the
published letter are the stronger ones, while under a wrong key the stronger keys are the ones choosing
the consensus (the true letter), which lets a smaller majority count when many keys stand behind it.
On 100 simulated benchmarks of the study's shape (11 keys, 3 editions; `test_item_response.py`), the
rule flagged 760 of 800 wrong keys planted on questions of ordinary difficulty and 19 of 23,200 right
keys (0.08%). On the published runs (4 models with their answers, 3 editions, definitive keys) it flags
2 of 240 questions, the ones all four models answered alike against the key. A flag asks for a person
to read the question and the examiners' definitive key; it is not a verdict. Real models' mistakes are
more alike than the simulation's (shared training data), so expect more flags on hard questions.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from oabench_pipeline.core.analysis.pairwise import LETTER_CODES

SUSPICIOUS_SHARE = 0.7
CLEAR_SHARE = 0.8
MIN_AGREEING = 3
MIN_LED_AGREEING = 6
CHANCE = 0.25


def vote_weights(ability: np.ndarray) -> np.ndarray:
    """Chance-corrected accuracy on a question of average difficulty, in [0, 1]; 0 without an ability."""
    from scipy import special  # scipy is imported by the analyses that use it, not by every command

    accuracy = special.expit(np.nan_to_num(ability, nan=-np.inf))
    return np.clip((accuracy - CHANCE) / (1.0 - CHANCE), 0.0, 1.0)


def audit_keys(
    letters: np.ndarray,
    key_codes: np.ndarray,
    active: np.ndarray,
    ability: np.ndarray,
    real_models: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Per question: weighted letter shares (4, J), consensus code, its share, agreeing keys, the flag.

    `letters`: keys × questions letter codes (0..3 A–D, 4 no letter, 5 not answered); `key_codes`: the
    published key's code per question (-1 when annulled); `active`: the question counts; `real_models`
    (one boolean per key, default all): which keys are models; the others (offline baselines) neither
    vote nor count.
    """
    if real_models is not None:
        letters, ability = letters[real_models], ability[real_models]
    weights = vote_weights(ability)
    answered = letters <= 4
    total = (weights[:, None] * answered).sum(axis=0)
    votes = np.stack(
        [(weights[:, None] * (letters == code)).sum(axis=0) for code in range(len(LETTER_CODES))]
    )
    shares = np.where(total > 0, votes / np.where(total > 0, total, 1.0), np.nan)
    consensus = np.where(total > 0, votes.argmax(axis=0), -1)
    consensus_share = np.where(total > 0, votes.max(axis=0) / np.where(total > 0, total, 1.0), np.nan)
    chose = letters == consensus[None, :]
    agreeing = (chose & (weights[:, None] > 0)).sum(axis=0)
    # Under a wrong key the keys choosing the consensus are the stronger ones (the true letter); under a
    # hard question whose distractor is a trap, the keys that still find the key are the stronger ones.
    theta = np.nan_to_num(ability, nan=0.0)[:, None]
    rest = answered & ~chose
    mean_consensus = (theta * chose).sum(axis=0) / np.maximum(chose.sum(axis=0), 1)
    mean_rest = (theta * rest).sum(axis=0) / np.maximum(rest.sum(axis=0), 1)
    share = np.nan_to_num(consensus_share)
    clear = (share >= CLEAR_SHARE) & (agreeing >= MIN_AGREEING)
    led = (
        (share >= SUSPICIOUS_SHARE)
        & (agreeing >= MIN_LED_AGREEING)
        & (~rest.any(axis=0) | (mean_consensus > mean_rest))
    )
    suspicious = active & (consensus >= 0) & (consensus != key_codes) & (clear | led)
    return {
        "shares": shares,
        "consensus": consensus,
        "consensus_share": consensus_share,
        "agreeing": agreeing,
        "suspicious": suspicious,
    }


def key_audit(
    questions: pl.DataFrame,
    letters: np.ndarray,
    ability: np.ndarray,
    difficulty: np.ndarray,
    real_models: np.ndarray | None = None,
) -> pl.DataFrame:
    """The `key_audit` table: one row per question of `questions` (in its order, matching `letters`' columns).

    `questions` has qid, edition, number, correct (the published letter), status and key_status (NULL
    where the answer keys do not say whether the key is preliminary or definitive); `real_models`: as in
    `audit_keys` (baselines are left out of every column, `n_models` too).
    """
    if real_models is not None:
        letters, ability = letters[real_models], ability[real_models]
    key_codes = (
        questions["correct"]
        .replace_strict(list(LETTER_CODES), list(range(len(LETTER_CODES))), default=-1, return_dtype=pl.Int64)
        .to_numpy()
    )
    active = (questions["status"] == "active").to_numpy()
    audit = audit_keys(letters, key_codes, active, ability)
    letters_arr = np.array([*LETTER_CODES, ""])
    key_share = np.where(
        key_codes >= 0,
        np.take_along_axis(np.nan_to_num(audit["shares"]), np.maximum(key_codes, 0)[None, :], 0)[0],
        np.nan,
    )
    no_votes = np.isnan(audit["consensus_share"])
    table = questions.select("qid", "edition", "number", "correct", "status", "key_status").with_columns(
        n_models=pl.Series((letters <= 4).sum(axis=0).astype(np.int64)),
        **{
            f"weight_{code.lower()}": pl.Series(audit["shares"][i], dtype=pl.Float64)
            for i, code in enumerate(LETTER_CODES)
        },
        consensus=pl.Series(letters_arr[audit["consensus"]]).replace("", None),
        consensus_weight=pl.Series(audit["consensus_share"], dtype=pl.Float64),
        key_weight=pl.Series(np.where(no_votes | ~active, np.nan, key_share), dtype=pl.Float64),
        agreeing_models=pl.Series(audit["agreeing"].astype(np.int64)),
        difficulty=pl.Series(difficulty, dtype=pl.Float64),
        suspicious=pl.Series(audit["suspicious"]),
    )
    table = table.with_columns(pl.col(pl.Float64).fill_nan(None))
    return table.sort(
        ["suspicious", "consensus_weight", "edition", "number"],
        descending=[True, True, False, False],
        nulls_last=True,
    )
