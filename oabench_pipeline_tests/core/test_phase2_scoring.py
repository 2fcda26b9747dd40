"""Area-exam scores and the 2nd-phase leaderboard on small made-up tables: which run counts, incomplete
exams, pass marks at the hundredth, rank ranges."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from oabench_pipeline.core.phase2.scoring import (
    area_exam_scores,
    counted_runs,
    leaderboard,
    paired_t_p,
    sub_items,
    t_interval,
)

PIECE, QUESTION = [5.0], [0.65, 0.6]


def _items(areas: list[str], edition: int = 39) -> pl.DataFrame:
    rows = []
    for area in areas:
        rows.append(
            {
                "item_id": f"{edition}_{area}_peca",
                "edition": edition,
                "area": area,
                "kind": "piece",
                "turn_points": PIECE,
            }
        )
        rows += [
            {
                "item_id": f"{edition}_{area}_q{n}",
                "edition": edition,
                "area": area,
                "kind": "question",
                "turn_points": QUESTION if n < 4 else [0.6, 0.65],
            }
            for n in range(1, 5)
        ]
    return pl.DataFrame(rows)


def _answers(
    items: pl.DataFrame, model: str, run_id: str, at: dt.datetime | None, skip: int = 0
) -> pl.DataFrame:
    subs = sub_items(items)
    return pl.DataFrame(
        {
            "model_key": model,
            "edition": subs["edition"],
            "item_id": subs["item_id"],
            "turn": subs["turn"],
            "run_id": run_id,
            "answer": ["..."] * (subs.height - skip) + [None] * skip,
            "error": [None] * subs.height,
            "answered_at": [at] * subs.height,
            "cost_usd": [0.01] * subs.height,
        },
        schema_overrides={"error": pl.String, "answered_at": pl.Datetime("us", "UTC")},
    )


def _judgments(items: pl.DataFrame, judge: str, model: str, run_id: str, share: float) -> pl.DataFrame:
    """Every sub-item scored `share` of its points (rounded to hundredths)."""
    subs = sub_items(items)
    return pl.DataFrame(
        {
            "judge_key": judge,
            "model_key": model,
            "edition": subs["edition"],
            "item_id": subs["item_id"],
            "turn": subs["turn"],
            "answer_run_id": run_id,
            "score": (subs["points"] * share).round(2),
            "valid": True,
            "error": [None] * subs.height,
            "judged_at": [None] * subs.height,
            "cost_usd": [None] * subs.height,
        },
        schema_overrides={"error": pl.String, "judged_at": pl.Datetime("us", "UTC"), "cost_usd": pl.Float64},
    )


def test_the_newest_complete_run_counts_and_an_import_is_oldest() -> None:
    items = _items(["civil"])
    at = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    answers = pl.concat(
        [
            _answers(items, "m", "oab-bench:abc", None),
            _answers(items, "m", "live:m:r1", at),
            _answers(items, "m", "live:m:r2", at + dt.timedelta(days=1), skip=1),  # newer, incomplete
        ]
    )
    runs = counted_runs(answers, sub_items(items))
    assert runs.select("run_id", "run_complete").rows() == [("live:m:r1", True)]
    only_import = counted_runs(answers.filter(pl.col("run_id") != "live:m:r1"), sub_items(items))
    assert only_import.select("run_id", "run_complete").rows() == [("oab-bench:abc", True)]


def test_an_invalid_or_missing_judgment_makes_the_exam_incomplete_not_failed() -> None:
    items = _items(["civil", "penal"])
    answers = _answers(items, "m", "r", None)
    judgments = _judgments(items, "j", "m", "r", 0.6)  # 6.00 exactly: passes at the hundredth
    scores = area_exam_scores(items, answers, judgments)
    assert scores.select("area", "total", "passed").rows() == [("civil", 6.0, True), ("penal", 6.0, True)]
    broken = judgments.with_columns(
        pl.when(pl.col("item_id") == "39_civil_q1").then(None).otherwise(pl.col("score")).alias("score"),
        (pl.col("item_id") != "39_civil_q1").alias("valid"),
    ).filter(~((pl.col("item_id") == "39_penal_q2") & (pl.col("turn") == 2)))
    scores = area_exam_scores(items, answers, broken)
    civil, penal = scores.sort("area").iter_rows(named=True)
    assert (civil["complete"], civil["passed"], civil["invalid"], civil["missing"]) == (False, None, 2, 0)
    assert (penal["complete"], penal["passed"], penal["invalid"], penal["missing"]) == (False, None, 0, 1)
    board = leaderboard(items, answers, broken, scores).row(0, named=True)
    assert (board["exams_incomplete"], board["exams_passed"], board["ranked"], board["rank"]) == (
        2,
        0,
        False,
        None,
    )
    assert board["mean_score"] is None  # no complete exam: no mean, never 0


def test_just_below_the_mark_fails() -> None:
    items = _items(["civil"])
    answers = _answers(items, "m", "r", None)
    judgments = _judgments(items, "j", "m", "r", 0.6).with_columns(
        pl.when(pl.col("item_id") == "39_civil_peca").then(2.99).otherwise(pl.col("score")).alias("score")
    )
    assert area_exam_scores(items, answers, judgments).select("total", "passed").row(0) == (5.99, False)


def test_rank_ranges_separate_only_models_the_tests_tell_apart() -> None:
    areas = ["a", "b", "c", "d", "e", "f", "g"]
    items = pl.concat([_items(areas, e) for e in (39, 40, 41)])
    answers = pl.concat([_answers(items, m, f"r-{m}", None) for m in ("top", "mid", "twin")])
    rng = np.random.default_rng(7)
    frames = []
    for model, share in (("top", 0.85), ("mid", 0.6), ("twin", 0.6)):
        judged = _judgments(items, "j", model, f"r-{model}", share)
        noise = rng.uniform(-0.05, 0.05, judged.height) * judged["score"].to_numpy()
        frames.append(judged.with_columns((pl.col("score") + noise).clip(0).round(2).alias("score")))
    judgments = pl.concat(frames)
    board = leaderboard(items, answers, judgments, area_exam_scores(items, answers, judgments))
    ranges = {r["model_key"]: (r["rank"], r["rank_low"], r["rank_high"]) for r in board.iter_rows(named=True)}
    assert ranges["top"] == (1, 1, 1)
    assert ranges["mid"][1:] == ranges["twin"][1:] == (2, 3)
    top = board.filter(pl.col("model_key") == "top").row(0, named=True)
    assert (top["exams_total"], top["exams_passed"], top["answer_cost_usd"], top["judging_cost_usd"]) == (
        21,
        21,
        pytest.approx(21 * 9 * 0.01),
        None,
    )


def test_t_interval_and_paired_test_match_scipy_stats() -> None:
    stats = pytest.importorskip("scipy.stats")
    values = np.array([8.2, 7.9, 9.1, 6.95, 8.4])
    low, high = t_interval(values)
    expected = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert (low, high) == pytest.approx(expected)
    other = np.array([6.1, 7.0, 8.8, 5.0, 7.7])
    assert paired_t_p(values, other) == pytest.approx(stats.ttest_rel(values, other).pvalue)
