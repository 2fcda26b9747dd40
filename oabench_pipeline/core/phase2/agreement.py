"""How far two judges of the 2nd phase agree, when both graded the same answers (`phase2_judge_agreement`).

One frame in, the judgments: `judge_key`, `model_key`, `item_id`, `turn`, `area`, `edition`, `score` (NULL
for an invalid judgment), and optionally `max_points`. Each pair of judges is compared on the sub-items both
scored validly (a sub-item is one answer: model × item × turn), per area and over all areas:

- `mae`, `mean_difference`: in points;
- `pearson`, `spearman` and the ICC on each sub-item's share of its points when `max_points` is given (a piece is
  worth 5.00 and a sub-item about 0.60: on raw points the ICC would mostly measure that the judges tell a piece
  from a sub-item), else on the points;
- `icc`, `icc_ci_low`, `icc_ci_high`: ICC(2,1), two-way random effects, absolute agreement, one rater
  (McGraw & Wong's ICC(A,1)), with its 95% interval, from pingouin's `intraclass_corr`;
- pass or fail per area-exam (edition × area × model), from each judge's exam total (the total rounded to
  hundredths ≥ 6.00, as `phase2_scores`): how many exams both judges scored completely, and on how many one
  passes the exam and the other fails it.

A statistic that cannot be computed (too few answers, a judge giving one score to every answer) is NULL.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import polars as pl

# numpy is imported where used: every process that loads the definitions (code servers, runs) imports this.
if TYPE_CHECKING:
    import numpy as np

PASS_MARK = 6.0
OVERALL = "all"  # the `area` of the rows over every area
MIN_ANSWERS_FOR_ICC = 5  # pingouin's two-way ANOVA needs a few targets; below, the ICC is NULL
KEYS = ["model_key", "edition", "area", "item_id", "turn"]


def score_pairs(judgments: pl.DataFrame) -> pl.DataFrame:
    """Each pair of judges (judge_a < judge_b) on each sub-item both scored validly: KEYS, judge_a,
    judge_b, score_a, score_b, and share_a, share_b (the score over max_points, or the score without it)."""
    share = pl.col("score") / pl.col("max_points") if "max_points" in judgments.columns else pl.col("score")
    valid = judgments.filter(pl.col("score").is_not_null()).select(
        *KEYS, "judge_key", "score", share.cast(pl.Float64).alias("share")
    )
    frames = []
    for judge_a, judge_b in _judge_pairs(judgments):
        left = valid.filter(pl.col("judge_key") == judge_a).drop("judge_key")
        left = left.rename({"score": "score_a", "share": "share_a"})
        right = valid.filter(pl.col("judge_key") == judge_b).drop("judge_key")
        right = right.rename({"score": "score_b", "share": "share_b"})
        joined = left.join(right, on=KEYS, how="inner")
        frames.append(joined.with_columns(judge_a=pl.lit(judge_a), judge_b=pl.lit(judge_b)))
    if not frames:
        return pl.DataFrame(
            schema={
                **{key: judgments.schema[key] for key in KEYS},
                "score_a": pl.Float64,
                "share_a": pl.Float64,
                "score_b": pl.Float64,
                "share_b": pl.Float64,
                "judge_a": pl.String,
                "judge_b": pl.String,
            }
        )
    return pl.concat(frames)


def exam_pass_pairs(judgments: pl.DataFrame, exam_sub_items: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each pair of judges on each area-exam (model × edition × area) both scored completely: judge_a,
    judge_b, model_key, edition, area, total_a, total_b, passed_a, passed_b.

    An exam is complete for a judge when every sub-item it judged there has a valid score and, given
    `exam_sub_items` (edition, area, sub_items), when it judged all of them; both judges must have judged the
    same sub-items, so the totals compare like with like."""
    exam = ["model_key", "edition", "area"]
    per_judge = judgments.group_by("judge_key", *exam).agg(
        total=pl.col("score").sum(),
        sub_items=pl.struct("item_id", "turn").unique().sort(),
        judged=pl.len(),
        invalid=pl.col("score").is_null().sum(),
    )
    complete = per_judge.filter(pl.col("invalid") == 0)
    if exam_sub_items is not None:
        complete = complete.join(
            exam_sub_items.select("edition", "area", expected=pl.col("sub_items")), on=["edition", "area"]
        ).filter(pl.col("judged") == pl.col("expected"))
    complete = complete.select("judge_key", *exam, "total", "sub_items")
    frames = []
    for judge_a, judge_b in _judge_pairs(judgments):
        left = complete.filter(pl.col("judge_key") == judge_a).drop("judge_key")
        right = complete.filter(pl.col("judge_key") == judge_b).drop("judge_key")
        joined = left.join(right, on=exam, how="inner", suffix="_b").filter(
            pl.col("sub_items") == pl.col("sub_items_b")
        )
        frames.append(
            joined.select(
                pl.lit(judge_a).alias("judge_a"),
                pl.lit(judge_b).alias("judge_b"),
                *exam,
                pl.col("total").alias("total_a"),
                pl.col("total_b"),
            )
        )
    schema: dict[str, pl.DataType | type[pl.DataType]] = {"judge_a": pl.String, "judge_b": pl.String}
    schema |= {k: judgments.schema[k] for k in exam}
    pairs = (
        pl.concat(frames)
        if frames
        else pl.DataFrame(schema={**schema, "total_a": pl.Float64, "total_b": pl.Float64})
    )
    return pairs.with_columns(
        passed_a=pl.col("total_a").round(2) >= PASS_MARK,
        passed_b=pl.col("total_b").round(2) >= PASS_MARK,
    )


def judge_agreement(judgments: pl.DataFrame, exam_sub_items: pl.DataFrame | None = None) -> pl.DataFrame:
    """The `phase2_judge_agreement` table: one row per pair of judges and area, plus one over all areas
    (`area` = "all"). Empty when fewer than two judges graded a common answer."""
    pairs = score_pairs(judgments)
    exams = exam_pass_pairs(judgments, exam_sub_items)
    rows = []
    for (judge_a, judge_b), pair in _grouped(pairs, ["judge_a", "judge_b"]):
        pair_exams = exams.filter((pl.col("judge_a") == judge_a) & (pl.col("judge_b") == judge_b))
        scopes: list[tuple[str, pl.DataFrame, pl.DataFrame]] = [(OVERALL, pair, pair_exams)]
        for (area,), area_pairs in _grouped(pair, ["area"]):
            scopes.append((str(area), area_pairs, pair_exams.filter(pl.col("area") == area)))
        for area, scope_pairs, scope_exams in scopes:
            rows.append(
                {
                    "judge_a": judge_a,
                    "judge_b": judge_b,
                    "area": area,
                    **score_statistics(
                        scope_pairs["score_a"].to_numpy(),
                        scope_pairs["score_b"].to_numpy(),
                        scope_pairs["share_a"].to_numpy(),
                        scope_pairs["share_b"].to_numpy(),
                    ),
                    **pass_statistics(scope_exams),
                }
            )
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA).sort(
        "judge_a", "judge_b", pl.col("area") != OVERALL, "area"
    )


AGREEMENT_SCHEMA = {
    "judge_a": pl.String,
    "judge_b": pl.String,
    "area": pl.String,
    "answers": pl.Int64,
    "mae": pl.Float64,
    "mean_difference": pl.Float64,
    "pearson": pl.Float64,
    "spearman": pl.Float64,
    "icc": pl.Float64,
    "icc_ci_low": pl.Float64,
    "icc_ci_high": pl.Float64,
    "exams_compared": pl.Int64,
    "exams_pass_disagree": pl.Int64,
    "pass_disagreement_rate": pl.Float64,
}


def score_statistics(
    score_a: np.ndarray,
    score_b: np.ndarray,
    share_a: np.ndarray | None = None,
    share_b: np.ndarray | None = None,
) -> dict[str, float | int | None]:
    """MAE and mean difference (a − b) of paired points; Pearson, Spearman and ICC(2,1) with its 95% interval
    of the paired shares of the points (the points themselves when no shares are given)."""
    if share_a is None or share_b is None:
        share_a, share_b = score_a, score_b
    n = len(score_a)
    out: dict[str, float | int | None] = {"answers": n}
    if n == 0:
        return out | dict.fromkeys(
            ["mae", "mean_difference", "pearson", "spearman", "icc", "icc_ci_low", "icc_ci_high"]
        )
    import numpy as np
    from scipy import stats  # imported where used: importing core stays light (test_stats.py)

    out["mae"] = float(np.mean(np.abs(score_a - score_b)))
    out["mean_difference"] = float(np.mean(score_a - score_b))
    varies = n >= 3 and np.ptp(share_a) > 0 and np.ptp(share_b) > 0
    out["pearson"] = _finite(stats.pearsonr(share_a, share_b).statistic) if varies else None
    out["spearman"] = _finite(stats.spearmanr(share_a, share_b).statistic) if varies else None
    out |= icc_2_1(share_a, share_b)
    return out


def icc_2_1(score_a: np.ndarray, score_b: np.ndarray) -> dict[str, float | None]:
    """ICC(2,1) of two raters over the same targets, with its 95% interval (pingouin's ICC(A,1), unrounded).
    NULL when there are fewer than MIN_ANSWERS_FOR_ICC targets or every score is the same."""
    import numpy as np

    empty: dict[str, float | None] = {"icc": None, "icc_ci_low": None, "icc_ci_high": None}
    n = len(score_a)
    if n < MIN_ANSWERS_FOR_ICC or np.ptp(np.concatenate([score_a, score_b])) == 0:
        return empty
    import pandas as pd  # pingouin's frame type; imported here so that importing core stays light
    import pingouin

    long = pd.DataFrame(
        {
            "target": np.concatenate([np.arange(n), np.arange(n)]),
            "rater": np.repeat(["a", "b"], n),
            "score": np.concatenate([score_a, score_b]).astype(float),
        }
    )
    with _unrounded_intervals(pingouin.options):
        table = pingouin.intraclass_corr(long, targets="target", raters="rater", ratings="score")
    row = table.set_index("Type").loc["ICC(A,1)"]
    low, high = row["CI95"]
    return {"icc": _finite(row["ICC"]), "icc_ci_low": _finite(low), "icc_ci_high": _finite(high)}


def pass_statistics(exams: pl.DataFrame) -> dict[str, float | int | None]:
    """Area-exams both judges scored completely, and on how many one passes and the other fails."""
    compared = exams.height
    disagree = exams.filter(pl.col("passed_a") != pl.col("passed_b")).height
    return {
        "exams_compared": compared,
        "exams_pass_disagree": disagree,
        "pass_disagreement_rate": disagree / compared if compared else None,
    }


@contextmanager
def _unrounded_intervals(options: dict[str, object]) -> Iterator[None]:
    """pingouin rounds its CI95 column to 2 decimals by default (`pingouin.options`, its documented
    setting); the table keeps the interval at full precision, then the option is put back."""
    key = "round.column.CI95"
    had, previous = key in options, options.get(key)
    options[key] = None
    try:
        yield
    finally:
        if had:
            options[key] = previous
        else:
            options.pop(key, None)


def _judge_pairs(judgments: pl.DataFrame) -> list[tuple[str, str]]:
    judges = sorted(judgments["judge_key"].unique().to_list())
    return list(itertools.combinations(judges, 2))


def _grouped(frame: pl.DataFrame, by: list[str]) -> list[tuple[tuple[object, ...], pl.DataFrame]]:
    return sorted(frame.group_by(by, maintain_order=True), key=lambda group: [str(v) for v in group[0]])


def _finite(value: object) -> float | None:
    number = float(value)  # type: ignore[arg-type]
    return number if math.isfinite(number) else None
