"""The tables built on the Rasch fit: abilities, difficulties, the key audit and the training-cutoff effect.

One fit (`item_response.fit_rasch`) over the canonical answers of every key (the keys × questions
matrices of `pairwise.matrices`: active questions only, an unparseable reply counted wrong) serves all of
them; `core/leaderboard.py` adds the abilities to the leaderboard.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from oabench_pipeline.core.analysis.contamination import contamination_by_cutoff
from oabench_pipeline.core.analysis.cutoff_effect import CutoffEffect, cutoff_effect, key_cutoff_data
from oabench_pipeline.core.analysis.frames import safe_div
from oabench_pipeline.core.analysis.item_response import Z95, RaschFit, fit_rasch
from oabench_pipeline.core.analysis.key_audit import key_audit
from oabench_pipeline.core.analysis.law_currency_effect import contested_questions, law_currency_effect

# Abilities equal to this many decimals share a rank (keys with the same answers get the same ability,
# up to the last bits of floating point).
_RANK_DECIMALS = 6


def edition_groups(questions: pl.DataFrame) -> tuple[np.ndarray, list[int]]:
    """Each question's edition as 0..G-1, and the editions in that order."""
    editions = sorted({int(e) for e in questions["edition"].to_list()})
    index = {e: i for i, e in enumerate(editions)}
    return np.array([index[int(e)] for e in questions["edition"].to_list()], dtype=np.int64), editions


def fit_answers(questions: pl.DataFrame, mats: dict[str, np.ndarray]) -> RaschFit:
    groups, editions = edition_groups(questions)
    return fit_rasch(mats["C"], mats["E"], groups, len(editions))


def item_abilities(keys: pl.Series, fit: RaschFit, mats: dict[str, np.ndarray]) -> pl.DataFrame:
    """One row per key with an answer: its ability with a 95% Wald interval and what it rests on."""
    answered = mats["E"].sum(axis=1)
    frame = pl.DataFrame(
        {
            "model_key": keys,
            "n_questions": answered.astype(np.int64),
            "n_correct": (mats["C"] & mats["E"]).sum(axis=1).astype(np.int64),
            "ability": fit.ability,
            "ability_se": fit.ability_se,
            "link_group": fit.link_group + 1,
        },
        schema_overrides={"model_key": pl.String, "link_group": pl.Int64},
        nan_to_null=True,
    )
    return (
        frame.filter(pl.col("n_questions") > 0)
        .with_columns(
            ability_ci_low=pl.col("ability") - Z95 * pl.col("ability_se"),
            ability_ci_high=pl.col("ability") + Z95 * pl.col("ability_se"),
        )
        .select(
            "model_key",
            "ability",
            "ability_se",
            "ability_ci_low",
            "ability_ci_high",
            "n_questions",
            "n_correct",
            "link_group",
        )
        .sort("ability", "model_key", descending=[True, False], nulls_last=True)
    )


def item_difficulties(questions: pl.DataFrame, fit: RaschFit, mats: dict[str, np.ndarray]) -> pl.DataFrame:
    """One row per active question: its difficulty (posterior mean, 95% interval), its edition's mean."""
    groups, _ = edition_groups(questions)
    n_models = mats["E"].sum(axis=0)
    frame = questions.select("qid", "edition", "number", "area").with_columns(
        n_models=pl.Series(n_models.astype(np.int64)),
        n_correct=pl.Series((mats["C"] & mats["E"]).sum(axis=0).astype(np.int64)),
        difficulty=pl.Series(fit.difficulty, dtype=pl.Float64),
        difficulty_sd=pl.Series(fit.difficulty_sd, dtype=pl.Float64),
        edition_difficulty=pl.Series(fit.group_mean[groups], dtype=pl.Float64),
        edition_difficulty_se=pl.Series(fit.group_mean_se[groups], dtype=pl.Float64),
    )
    active = (questions["status"] == "active").to_numpy()
    return (
        frame.filter(pl.Series(active))
        .with_columns(pl.col(pl.Float64).fill_nan(None))
        .with_columns(
            share_correct=pl.when(pl.col("n_models") > 0).then(pl.col("n_correct") / pl.col("n_models")),
            difficulty_ci_low=pl.col("difficulty") - Z95 * pl.col("difficulty_sd"),
            difficulty_ci_high=pl.col("difficulty") + Z95 * pl.col("difficulty_sd"),
        )
        .select(
            "qid",
            "edition",
            "number",
            "area",
            "n_models",
            "n_correct",
            "share_correct",
            "difficulty",
            "difficulty_sd",
            "difficulty_ci_low",
            "difficulty_ci_high",
            "edition_difficulty",
            "edition_difficulty_se",
        )
        .sort("edition", "number")
    )


def ability_columns(keys_df: pl.DataFrame, abilities: pl.DataFrame, by_edition: pl.DataFrame) -> pl.DataFrame:
    """The leaderboard's ability, its interval and `ability_rank`: dense rank by ability among keys whose
    every edition run is complete, whichever editions those are (so keys that ran different editions
    are ranked together, on one scale)."""
    complete_runs = by_edition.group_by("model_key").agg(_all_complete=pl.col("complete").all())
    ranked = (
        abilities.select("model_key", "ability", "ability_ci_low", "ability_ci_high")
        .join(complete_runs, on="model_key", how="left")
        .with_columns(
            ability_rank=pl.when(pl.col("_all_complete").fill_null(False) & pl.col("ability").is_not_null())
            .then(pl.col("ability").round(_RANK_DECIMALS))
            .rank("dense", descending=True)
            .cast(pl.Int64)
        )
        .drop("_all_complete")
    )
    return keys_df.join(ranked, on="model_key", how="left", maintain_order="left")


def _exam_days(questions: pl.DataFrame, edition_dates: pl.DataFrame) -> np.ndarray:
    """Each question's exam date as days since 1970 (NaN where the edition has no date)."""
    dates = questions.select("edition").join(edition_dates, on="edition", how="left", maintain_order="left")
    return dates["exam_date"].cast(pl.Int32).cast(pl.Float64).to_numpy()


def cutoff_tables(
    by_edition: pl.DataFrame,
    keys_df: pl.DataFrame,
    edition_dates: pl.DataFrame,
    questions: pl.DataFrame,
    mats: dict[str, np.ndarray],
    fit: RaschFit,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`contamination_by_cutoff` (the raw before/after accuracies, and the effect net of difficulty per
    key, then a pooled row when some key has a cutoff) and `contamination_pooled` (that pooled effect:
    one shared by every key with a cutoff, with how many keys it rests on)."""
    raw = contamination_by_cutoff(by_edition, keys_df, edition_dates)
    index = {key: i for i, key in enumerate(keys_df["model_key"].to_list())}
    exam_day = _exam_days(questions, edition_dates)
    dated = ~np.isnan(exam_day)
    per_key, datas, starts = [], [], []
    cutoffs = raw.select("model_key", cutoff_day=pl.col("knowledge_cutoff").cast(pl.Int32))
    for key, cutoff_day in cutoffs.iter_rows():
        i = index[key]
        after = dated & (np.nan_to_num(exam_day) > cutoff_day)
        data = key_cutoff_data(fit, i, mats["C"], mats["E"], after, dated)
        effect = cutoff_effect([data], [fit.ability[i]])
        per_key.append({"model_key": key, **_effect_columns(effect)})
        datas.append(data)
        starts.append(fit.ability[i])
    effects = pl.DataFrame(per_key, schema=_EFFECT_SCHEMA | {"model_key": pl.String})
    table = raw.join(effects, on="model_key", how="left", maintain_order="left").with_columns(
        pooled=pl.lit(False)
    )
    pooled = cutoff_effect(datas, starts) if datas else None
    estimable = sum(1 for d in datas if 0 < d.after.sum() < d.after.size)
    pooled_row = {
        "n_models": len(datas),
        "n_models_estimable": estimable,
        **(_effect_columns(pooled) if pooled else dict.fromkeys(_EFFECT_SCHEMA)),
    }
    if pooled is None:
        pooled_row["note"] = "no model key with a knowledge cutoff"
    pooled_table = pl.DataFrame(
        [pooled_row], schema={"n_models": pl.Int64, "n_models_estimable": pl.Int64, **_EFFECT_SCHEMA}
    )
    if pooled is not None:
        table = pl.concat([table, _pooled_row(raw, pooled, len(datas), estimable)], how="diagonal_relaxed")
    return table, pooled_table


def _pooled_row(raw: pl.DataFrame, pooled: CutoffEffect, n_models: int, estimable: int) -> pl.DataFrame:
    """`contamination_by_cutoff`'s last row: every key with a cutoff together (model_key NULL, `pooled`
    true), the raw counts summed over them and the one shared effect of `contamination_pooled`."""
    why = f"; {pooled.note}" if pooled.note else ""
    note = (
        f"pooled: one effect shared by {n_models} model key(s) with a knowledge cutoff, each its own "
        f"level ({estimable} with questions on both sides of its cutoff){why}"
    )
    return (
        raw.select(pl.sum("correct_after", "total_after", "correct_before", "total_before"))
        .with_columns(
            accuracy_after=safe_div(pl.col("correct_after"), pl.col("total_after")),
            accuracy_before=safe_div(pl.col("correct_before"), pl.col("total_before")),
        )
        .with_columns(delta=pl.col("accuracy_after") - pl.col("accuracy_before"))
        .with_columns(
            model_key=pl.lit(None, dtype=pl.String),
            pooled=pl.lit(True),
            **{
                name: pl.lit(value, dtype=_EFFECT_SCHEMA[name])
                for name, value in (_effect_columns(pooled) | {"note": note}).items()
            },
        )
    )


_EFFECT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "questions_after": pl.Int64,
    "questions_before": pl.Int64,
    "effect_log_odds": pl.Float64,
    "effect_ci_low": pl.Float64,
    "effect_ci_high": pl.Float64,
    "p_value": pl.Float64,
    "note": pl.String,
}


def _effect_columns(effect: CutoffEffect) -> dict[str, object]:
    return {
        "questions_after": effect.n_after,
        "questions_before": effect.n_before,
        "effect_log_odds": effect.effect,
        "effect_ci_low": effect.ci_low,
        "effect_ci_high": effect.ci_high,
        "p_value": effect.p_value,
        "note": effect.note,
    }


def item_response_tables(
    keys_df: pl.DataFrame,
    by_edition: pl.DataFrame,
    questions: pl.DataFrame,
    mats: dict[str, np.ndarray],
    edition_dates: pl.DataFrame,
    superseded: np.ndarray | None = None,
    real_models: np.ndarray | None = None,
) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    """Every table of the module, and `keys_df` with the leaderboard's ability columns. With `superseded`
    (per question of `questions`: possibly superseded by later law), `law_currency_effect` on the same fit.
    `real_models` (one boolean per key): the key audit counts only these (offline baselines never vote)."""
    fit = fit_answers(questions, mats)
    abilities = item_abilities(keys_df["model_key"], fit, mats)
    contamination, pooled = cutoff_tables(by_edition, keys_df, edition_dates, questions, mats, fit)
    audit = key_audit(questions, mats["L"], fit.ability, fit.difficulty, real_models)
    tables = {
        "item_abilities": abilities,
        "item_difficulties": item_difficulties(questions, fit, mats),
        "key_audit": audit,
        "contamination_by_cutoff": contamination,
        "contamination_pooled": pooled,
    }
    if superseded is not None:
        contested = contested_questions(audit, questions)
        tables["law_currency_effect"] = law_currency_effect(
            keys_df["model_key"], fit, mats, superseded, contested
        )
    return tables, ability_columns(keys_df, abilities, by_edition)
