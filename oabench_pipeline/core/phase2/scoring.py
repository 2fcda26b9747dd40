"""Area-exam scores and the 2nd-phase leaderboard, from items, answers and judgments (pure, polars).

Which answers count: per model key × edition, the newest complete answer run (every sub-item of the
edition answered, no error row; newest by its last `answered_at`, an import's NULL counting as oldest), else
the newest run started, shown and never ranked: the 1st phase's rule per cell. A judge's judgments count
for the answers of that run (`answer_run_id`); of several judgments of one sub-item, the newest valid one.

An area-exam (edition × area: the piece and 4 questions, 10.00 points) is complete when every sub-item has
an answer and a valid judgment; its total is the sum of the judged points, and it passes when the total
rounded to hundredths is at least 6.00. An incomplete exam has `passed` NULL: it is neither passed nor failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

# numpy (and core.stats over it) imported where used: every process that loads the definitions imports this.
if TYPE_CHECKING:
    import numpy as np

PASS_MARK = 6.0
CONFIDENCE = 0.95
SIGNIFICANCE = 0.05


def sub_items(items: pl.DataFrame) -> pl.DataFrame:
    """One row per sub-item: edition, area, item_id, kind, turn, points."""
    return (
        items.select("edition", "area", "item_id", "kind", "turn_points")
        .with_columns(pl.int_ranges(1, pl.col("turn_points").list.len() + 1).alias("turn"))
        .explode("turn_points", "turn")
        .rename({"turn_points": "points"})
        .with_columns(pl.col("turn").cast(pl.Int32), pl.col("edition").cast(pl.Int32))
    )


def counted_runs(answers: pl.DataFrame, subs: pl.DataFrame) -> pl.DataFrame:
    """Per model key × edition: the run that counts (`run_id`) and whether it is complete (`run_complete`)."""
    if answers.is_empty():
        return pl.DataFrame(
            schema={
                "model_key": pl.String,
                "edition": pl.Int32,
                "run_id": pl.String,
                "run_complete": pl.Boolean,
            }
        )
    needed = subs.group_by("edition").agg(pl.len().alias("needed"))
    runs = (
        answers.with_columns(pl.col("edition").cast(pl.Int32))
        .group_by("model_key", "edition", "run_id")
        .agg(
            pl.struct("item_id", "turn")
            .filter(pl.col("answer").is_not_null() & pl.col("error").is_null())
            .n_unique()
            .alias("answered"),
            pl.col("answered_at").max().alias("last_answer"),
        )
        .join(needed, on="edition", how="left")
        .with_columns((pl.col("answered") >= pl.col("needed")).fill_null(False).alias("run_complete"))
    )
    return (
        runs.sort("run_complete", "last_answer", "run_id", descending=True, nulls_last=True)
        .group_by("model_key", "edition", maintain_order=True)
        .first()
        .select("model_key", "edition", "run_id", "run_complete")
    )


def _counted_judgments(judgments: pl.DataFrame) -> pl.DataFrame:
    """One judgment per judge × model × answer run × sub-item: the newest valid one, else the newest."""
    return (
        judgments.with_columns(pl.col("edition").cast(pl.Int32))
        .sort("valid", "judged_at", descending=True, nulls_last=True)
        .group_by("judge_key", "model_key", "answer_run_id", "item_id", "turn", maintain_order=True)
        .first()
    )


def area_exam_scores(items: pl.DataFrame, answers: pl.DataFrame, judgments: pl.DataFrame) -> pl.DataFrame:
    """`phase2_scores`: one row per judge × model × area-exam of the editions the model answered."""
    subs = sub_items(items)
    runs = counted_runs(answers, subs)
    if judgments.is_empty() or runs.is_empty():
        return _empty_scores()
    pairs = judgments.select("judge_key", "model_key").unique()
    answered = answers.with_columns(pl.col("edition").cast(pl.Int32)).filter(
        pl.col("answer").is_not_null() & pl.col("error").is_null()
    )
    cells = (
        pairs.join(runs, on="model_key")
        .join(subs, on="edition")
        .join(
            answered.select(
                "model_key", "run_id", "item_id", "turn", pl.lit(True).alias("has_answer")
            ).unique(),
            on=["model_key", "run_id", "item_id", "turn"],
            how="left",
        )
        .join(
            _counted_judgments(judgments).select(
                "judge_key",
                "model_key",
                pl.col("answer_run_id").alias("run_id"),
                "item_id",
                "turn",
                "score",
                "valid",
                pl.col("error").alias("judge_error"),
            ),
            on=["judge_key", "model_key", "run_id", "item_id", "turn"],
            how="left",
        )
    )
    judged = pl.col("valid").is_not_null() & pl.col("judge_error").is_null()
    missing = pl.col("has_answer").is_null() | ~judged
    invalid = ~missing & ~pl.col("valid")
    points = pl.when(~missing & pl.col("valid")).then(pl.col("score")).otherwise(0.0)
    scores = (
        cells.group_by("judge_key", "model_key", "edition", "area")
        .agg(
            points.sum().round(2).alias("total"),
            points.filter(pl.col("kind") == "piece").sum().round(2).alias("piece_points"),
            points.filter(pl.col("kind") == "question").sum().round(2).alias("questions_points"),
            missing.sum().cast(pl.Int32).alias("missing"),
            invalid.sum().cast(pl.Int32).alias("invalid"),
        )
        .with_columns(((pl.col("missing") == 0) & (pl.col("invalid") == 0)).alias("complete"))
        .with_columns(
            pl.when(pl.col("complete"))
            .then(pl.col("total").round(2) >= PASS_MARK)
            .otherwise(None)
            .alias("passed")
        )
    )
    return scores.select(
        "judge_key",
        "model_key",
        "edition",
        "area",
        "total",
        "piece_points",
        "questions_points",
        "complete",
        "passed",
        "missing",
        "invalid",
    ).sort("judge_key", "model_key", "edition", "area")


def _empty_scores() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "judge_key": pl.String,
            "model_key": pl.String,
            "edition": pl.Int32,
            "area": pl.String,
            "total": pl.Float64,
            "piece_points": pl.Float64,
            "questions_points": pl.Float64,
            "complete": pl.Boolean,
            "passed": pl.Boolean,
            "missing": pl.Int32,
            "invalid": pl.Int32,
        }
    )


def t_interval(values: np.ndarray) -> tuple[float | None, float | None]:
    """The mean's two-sided 95% Student t interval; None with fewer than two values."""
    import numpy as np
    from scipy import special

    n = values.size
    if n < 2:
        return None, None
    half = float(special.stdtrit(n - 1, 0.5 + CONFIDENCE / 2) * values.std(ddof=1) / np.sqrt(n))
    mean = float(values.mean())
    return mean - half, mean + half


def paired_t_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the paired t test of equal means (NaN when undefined: n < 2 or no spread)."""
    import numpy as np
    from scipy import special

    diff = a - b
    n = diff.size
    if n < 2:
        return float("nan")
    sd = diff.std(ddof=1)
    if sd == 0:
        return 1.0 if diff.mean() == 0 else 0.0
    t = diff.mean() / (sd / np.sqrt(n))
    return float(2 * special.stdtr(n - 1, -abs(t)))


def _rank_ranges(totals: dict[str, dict[tuple[int, str], float]]) -> dict[str, tuple[int, int]]:
    """(rank_low, rank_high) per ranked model of one judge: 1 + the models significantly better, and the
    ranked models minus those significantly worse, by paired t tests over shared area-exams, Holm-corrected."""
    import numpy as np

    from oabench_pipeline.core.stats import holm_adjust

    keys = sorted(totals)
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
    diffs, pvalues = [], []
    for a, b in pairs:
        shared = sorted(set(totals[a]) & set(totals[b]))
        first = np.array([totals[a][e] for e in shared])
        second = np.array([totals[b][e] for e in shared])
        pvalues.append(paired_t_p(first, second))
        diffs.append(float(first.mean() - second.mean()) if shared else 0.0)
    adjusted = holm_adjust(pvalues) if pairs else np.array([])
    better = dict.fromkeys(keys, 0)
    worse = dict.fromkeys(keys, 0)
    for (a, b), diff, p in zip(pairs, diffs, adjusted, strict=True):
        if not p < SIGNIFICANCE:
            continue
        winner, loser = (a, b) if diff > 0 else (b, a)
        better[loser] += 1
        worse[winner] += 1
    return {k: (1 + better[k], len(keys) - worse[k]) for k in keys}


def _cost(frame: pl.DataFrame) -> float | None:
    """The summed cost, or None when any row's cost is unknown (an import records none)."""
    if frame.is_empty() or frame["cost_usd"].null_count() > 0:
        return None
    return float(frame["cost_usd"].sum())


def leaderboard(
    items: pl.DataFrame, answers: pl.DataFrame, judgments: pl.DataFrame, scores: pl.DataFrame
) -> pl.DataFrame:
    """`phase2_leaderboard`: one row per judge × model key (column contract in `core/tables.py`)."""
    import numpy as np

    exams_in_items = items.select("edition", "area").unique().height
    runs = counted_runs(answers, sub_items(items))
    counted = _counted_judgments(judgments) if not judgments.is_empty() else judgments
    rows = []
    for (judge_key, model_key), exams in sorted(
        scores.partition_by(["judge_key", "model_key"], as_dict=True).items()
    ):
        complete = exams.filter(pl.col("complete"))
        totals = complete["total"].to_numpy().astype(np.float64)
        low, high = t_interval(totals)
        model_runs = runs.filter(pl.col("model_key") == model_key)
        run_ids = sorted(set(model_runs["run_id"]))
        model_answers = answers.filter((pl.col("model_key") == model_key) & pl.col("run_id").is_in(run_ids))
        model_judgments = counted.filter(
            (pl.col("judge_key") == judge_key)
            & (pl.col("model_key") == model_key)
            & pl.col("answer_run_id").is_in(run_ids)
        )
        rows.append(
            {
                "judge_key": judge_key,
                "model_key": model_key,
                "mean_score": round(float(totals.mean()), 2) if totals.size else None,
                "mean_ci_low": None if low is None else round(low, 2),
                "mean_ci_high": None if high is None else round(high, 2),
                "exams_passed": int(exams["passed"].sum()),
                "exams_total": exams.height,
                "exams_complete": complete.height,
                "exams_incomplete": exams.height - complete.height,
                "invalid": int(exams["invalid"].sum()),
                "missing": int(exams["missing"].sum()),
                "ranked": complete.height == exams.height == exams_in_items
                and bool(model_runs["run_complete"].all()),
                "answer_cost_usd": _cost(model_answers),
                "judging_cost_usd": _cost(model_judgments),
                "answer_run_ids": run_ids,
                "_totals": dict(
                    zip(zip(complete["edition"], complete["area"], strict=True), totals, strict=True)
                ),
            }
        )
    return _ranked(rows)


def _ranked(rows: list[dict]) -> pl.DataFrame:
    by_judge: dict[str, list[dict]] = {}
    for row in rows:
        by_judge.setdefault(row["judge_key"], []).append(row)
    for judged in by_judge.values():
        ranked = [r for r in judged if r["ranked"]]
        ranges = _rank_ranges({r["model_key"]: r["_totals"] for r in ranked})
        for row in judged:
            if row["ranked"]:
                row["rank"] = 1 + sum(other["mean_score"] > row["mean_score"] for other in ranked)
                row["rank_low"], row["rank_high"] = ranges[row["model_key"]]
            else:
                row["rank"] = row["rank_low"] = row["rank_high"] = None
    frame = pl.DataFrame(
        [{k: v for k, v in row.items() if k != "_totals"} for row in rows],
        schema=LEADERBOARD_SCHEMA,
    )
    return frame.select(list(LEADERBOARD_SCHEMA)).sort(
        "judge_key", "rank", "mean_score", descending=[False, False, True], nulls_last=True
    )


LEADERBOARD_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "judge_key": pl.String,
    "rank": pl.Int64,
    "rank_low": pl.Int64,
    "rank_high": pl.Int64,
    "model_key": pl.String,
    "mean_score": pl.Float64,
    "mean_ci_low": pl.Float64,
    "mean_ci_high": pl.Float64,
    "exams_passed": pl.Int64,
    "exams_total": pl.Int64,
    "exams_complete": pl.Int64,
    "exams_incomplete": pl.Int64,
    "invalid": pl.Int64,
    "missing": pl.Int64,
    "ranked": pl.Boolean,
    "answer_cost_usd": pl.Float64,
    "judging_cost_usd": pl.Float64,
    "answer_run_ids": pl.List(pl.String),
}


def leaderboard_by_area(scores: pl.DataFrame) -> pl.DataFrame:
    """`phase2_leaderboard_by_area`: per judge × model × area, its area-exams over the editions."""
    return (
        scores.group_by("judge_key", "model_key", "area")
        .agg(
            pl.len().cast(pl.Int64).alias("exams_total"),
            pl.col("complete").sum().cast(pl.Int64).alias("exams_complete"),
            pl.col("total").filter(pl.col("complete")).mean().round(2).alias("mean_score"),
            pl.col("passed").sum().cast(pl.Int64).alias("exams_passed"),
            pl.col("edition").sort().alias("editions"),
        )
        .sort("judge_key", "model_key", "area")
    )
