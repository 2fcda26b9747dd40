"""Does a key do worse on questions whose law changed after the exam, net of difficulty? And the ranking
without them (docs/law_currency.md).

`law_currency_effect` is the training-cutoff effect's machinery (`cutoff_effect.py`) with another split:
a question's side is `possibly_superseded` (`core/law_currency.py`) instead of "held after the key's
cutoff". Per key,

    P(right on question j) = E_b[ expit(α + δ·superseded_j − b) ],   b ~ the difficulty of j from the other keys

so δ is the key's change in log-odds on possibly-superseded questions relative to what the other keys'
answers make of the same questions. What it measures follows from that: a key answering by today's law
more than the others do (a newer model, say) shows δ < 0; a drop every key shares on the same questions
is indistinguishable from those questions being harder and is absorbed into their difficulty, as is the
pooled effect's share of it (the raw accuracies, `accuracy_superseded` and `accuracy_current`, show it,
confounded with the areas' difficulty). 95% Wald interval and two-sided p-value, as for the cutoff.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from oabench_pipeline.core.analysis.cutoff_effect import CutoffEffect, cutoff_effect, key_cutoff_data
from oabench_pipeline.core.analysis.frames import safe_div
from oabench_pipeline.core.analysis.intervals import official_interval, wilson_interval
from oabench_pipeline.core.analysis.item_response import RaschFit
from oabench_pipeline.core.analysis.pairwise import LETTER_CODES
from oabench_pipeline.core.tables import column_names, column_schema

# The cutoff analysis's notes, in this split's words.
_WORDS = (
    ("is on or before the cutoff", "is a current-law question"),
    ("is after the cutoff", "is possibly superseded"),
    ("on or before the cutoff", "on current-law questions"),
    ("after the cutoff", "on possibly-superseded questions"),
    ("no before/after contrast", "no superseded/current contrast"),
    ("both sides of its cutoff", "both kinds of question"),
)


def _reworded(note: str | None) -> str | None:
    if note is None:
        return None
    for cutoff_words, words in _WORDS:
        note = note.replace(cutoff_words, words)
    return note


def _effect_columns(effect: CutoffEffect) -> dict[str, object]:
    return {
        "questions_superseded": effect.n_after,
        "questions_current": effect.n_before,
        "effect_log_odds": effect.effect,
        "effect_ci_low": effect.ci_low,
        "effect_ci_high": effect.ci_high,
        "p_value": effect.p_value,
        "note": _reworded(effect.note),
    }


def contested_questions(audit: pl.DataFrame, questions: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per question of `questions` (in its order): the key audit calls it suspicious, and the consensus
    letter's code (-1 without one)."""
    joined = questions.select("qid").join(
        audit.select("qid", "suspicious", "consensus"), on="qid", how="left", maintain_order="left"
    )
    codes = joined["consensus"].replace_strict(
        list(LETTER_CODES), list(range(len(LETTER_CODES))), default=-1, return_dtype=pl.Int64
    )
    return joined["suspicious"].fill_null(False).to_numpy(), codes.to_numpy()


def law_currency_effect(
    keys: pl.Series,
    fit: RaschFit,
    mats: dict[str, np.ndarray],
    superseded: np.ndarray,
    contested: tuple[np.ndarray, np.ndarray] | None = None,
) -> pl.DataFrame:
    """The `law_currency_effect` table: a row per key with an answer (`keys`: the rows of `mats` and of
    the fit), then the pooled row. `superseded[j]`: question j (a column) is possibly superseded;
    `contested`: `contested_questions` of the key audit, for `contested_superseded`."""
    flagged = np.asarray(superseded, dtype=bool)
    covered, correct = mats["E"], mats["C"] & mats["E"]
    suspicious, consensus = contested if contested is not None else (np.zeros(flagged.size, bool), None)
    rows, datas, starts = [], [], []
    for i, key in enumerate(keys.to_list()):
        if not covered[i].any():
            continue
        # A degenerate fit (every key alike on an edition) makes some difficulty posteriors NaN:
        # cutoff_effect then says the effect is not estimable, so numpy's warnings say nothing new.
        with np.errstate(divide="ignore", invalid="ignore"):
            data = key_cutoff_data(fit, i, correct, covered, flagged)
        effect = cutoff_effect([data], [fit.ability[i]])
        chose_consensus = (
            (mats["L"][i] == consensus) if consensus is not None else np.zeros(flagged.size, bool)
        )
        rows.append(
            {
                "model_key": key,
                "correct_superseded": int((correct[i] & flagged).sum()),
                "total_superseded": int((covered[i] & flagged).sum()),
                "correct_current": int((correct[i] & ~flagged).sum()),
                "total_current": int((covered[i] & ~flagged).sum()),
                "contested_superseded": int((suspicious & flagged & chose_consensus & covered[i]).sum()),
                "pooled": False,
                **_effect_columns(effect),
            }
        )
        datas.append(data)
        starts.append(fit.ability[i])
    if datas:
        pooled = cutoff_effect(datas, starts)
        estimable = sum(1 for d in datas if 0 < d.after.sum() < d.after.size)
        why = f"; {_reworded(pooled.note)}" if pooled.note else ""
        summed = {
            name: sum(int(r[name]) for r in rows)
            for name in ("correct_superseded", "total_superseded", "correct_current", "total_current")
        }
        rows.append(
            {
                "model_key": None,
                **summed,
                "contested_superseded": int((suspicious & flagged).sum()),
                "pooled": True,
                **_effect_columns(pooled),
                "note": f"pooled: one effect shared by {len(datas)} model key(s), each its own level "
                f"({estimable} with both possibly-superseded and current-law questions){why}",
            }
        )
    schema = column_schema("law_currency_effect")
    frame = pl.DataFrame(rows, schema={n: schema[n] for n in schema if n not in _DERIVED})
    return (
        frame.with_columns(
            accuracy_superseded=safe_div(pl.col("correct_superseded"), pl.col("total_superseded")),
            accuracy_current=safe_div(pl.col("correct_current"), pl.col("total_current")),
        )
        .with_columns(delta=pl.col("accuracy_superseded") - pl.col("accuracy_current"))
        .select(column_names("law_currency_effect"))
    )


_DERIVED = {"accuracy_superseded", "accuracy_current", "delta"}


def current_law_leaderboard(
    suite: str,
    keys_df: pl.DataFrame,
    keys: pl.Series,
    mats: dict[str, np.ndarray],
    questions: pl.DataFrame,
    in_suite: np.ndarray,
    superseded: np.ndarray,
) -> pl.DataFrame:
    """One suite's rows of `leaderboard_current_law`: each key of `keys_df` (the suite's leaderboard rows:
    model_key, complete, rank, official_accuracy) scored on the suite's questions (`in_suite`: the
    ingested editions' columns of `mats`) not flagged possibly_superseded, ranked among complete keys:
    right answers on the active ones plus the annulled ones (credited), of the active and annulled ones."""
    current = np.asarray(in_suite, dtype=bool) & ~np.asarray(superseded, dtype=bool)
    active = (questions["status"] == "active").to_numpy()
    # Annulled questions are credited to everyone; any other status (one whose key is unknown) counts in
    # neither score, as in the leaderboard.
    annulled = (questions["status"] == "annulled").to_numpy()
    technical_total = int((current & active).sum())
    total = technical_total + int((current & annulled).sum())
    rows = np.searchsorted(keys.to_numpy(), keys_df["model_key"].to_numpy())
    technical = (mats["C"][rows] & mats["E"][rows])[:, current & active].sum(axis=1).astype(np.int64)
    low, high = wilson_interval(technical, technical_total)
    official_low, official_high = official_interval(low, high, technical_total, total)
    frame = keys_df.select(
        pl.lit(suite, pl.String).alias("suite"),
        "model_key",
        "complete",
        rank_all_questions="rank",
        official_accuracy_all_questions="official_accuracy",
    ).with_columns(
        technical_score=pl.Series(technical, dtype=pl.Int64),
        technical_total=pl.lit(technical_total, pl.Int64),
        official_score=pl.Series(technical + (total - technical_total), dtype=pl.Int64),
        official_total=pl.lit(total, pl.Int64),
        official_ci_low=pl.Series(official_low, dtype=pl.Float64),
        official_ci_high=pl.Series(official_high, dtype=pl.Float64),
    )
    frame = frame.with_columns(
        official_accuracy=safe_div(pl.col("official_score"), pl.col("official_total")),
        technical_accuracy=safe_div(pl.col("technical_score"), pl.col("technical_total")),
        official_ci_low=pl.col("official_ci_low").fill_nan(None),
        official_ci_high=pl.col("official_ci_high").fill_nan(None),
    )
    ranks = frame.filter(pl.col("complete")).select(
        "model_key", rank=pl.col("official_score").rank("dense", descending=True).cast(pl.Int64)
    )
    return (
        frame.join(ranks, on="model_key", how="left", maintain_order="left")
        .select(column_names("leaderboard_current_law"))
        .sort(["rank", "official_score", "model_key"], descending=[False, True, False], nulls_last=True)
    )
