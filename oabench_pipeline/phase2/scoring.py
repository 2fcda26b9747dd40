"""The 2nd phase's scores: area-exam totals per judge × model, the leaderboard and its by-area table.

One step builds the three tables from `phase2_items`, `phase2_answers` and `phase2_judgments` (a few
thousand rows), so they never disagree; a blocking check failing writes none of them.
"""

from collections.abc import Iterator

import polars as pl
from dagster import AssetCheckResult, AssetKey, AssetSpec, DataVersion, MaterializeResult, multi_asset

from oabench_pipeline.core.phase2.items import AREA_EXAM_POINTS, PIECE_POINTS
from oabench_pipeline.core.phase2.scoring import area_exam_scores, leaderboard, leaderboard_by_area
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource

# Bump with any change to how the scores or the leaderboard are computed (stored with every table).
PHASE2_SCORING_VERSION = "phase2-scoring-1"
PHASE2_SCORE_TABLES = ("phase2_scores", "phase2_leaderboard", "phase2_leaderboard_by_area")
DESCRIPTIONS = {
    "phase2_scores": "One row per judge × model × area-exam (edition × area): the total of 10 (piece of 5, "
    "questions of 5), complete, passed (total rounded to hundredths >= 6.00; NULL when incomplete), missing "
    "and invalid judgments. Counts the newest complete answer run of each edition (docs/phase2.md).",
    "phase2_leaderboard": "One row per judge × model: mean area-exam total with its 95% Student t interval, "
    "exams passed of exams total, incomplete exams, rank and rank range among the judge's ranked models "
    "(paired t tests, Holm), answer and judging cost.",
    "phase2_leaderboard_by_area": "One row per judge × model × area of law: its area-exams over the "
    "editions, mean total and exams passed.",
}
SCORE_CHECKS = {
    "totals_within_points": "Every area-exam total is within 0-10, its piece within 0-5 and its questions "
    "within 0-5; blocking.",
}
# The judgments come from an import or from judging; the answers a judgment counts for, from either too.
DEPS = ["phase2_items", "phase2_import", "phase2_answers", "phase2_judgments"]


@multi_asset(
    name="phase2_scoring",
    specs=[
        AssetSpec(
            table,
            group_name="phase2_scoring",
            deps=DEPS,
            description=f"{DESCRIPTIONS[table]}\n\nTable `{table}` in the warehouse.",
            metadata={"dagster/column_schema": table_schema(table).value},
            code_version=PHASE2_SCORING_VERSION,
        )
        for table in PHASE2_SCORE_TABLES
    ],
    check_specs=check_specs("phase2_scores", SCORE_CHECKS, blocking=SCORE_CHECKS),
)
def phase2_scoring(warehouse: WarehouseResource) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Area-exam scores, the 2nd-phase leaderboard and its by-area table, from every judgment."""
    store = warehouse.warehouse()
    items, answers, judgments = (
        store.read(t) if store.has_table(t) else pl.DataFrame()
        for t in ("phase2_items", "phase2_answers", "phase2_judgments")
    )
    scores = area_exam_scores(items, answers, judgments) if not items.is_empty() else pl.DataFrame()
    if scores.is_empty():
        tables = {t: pl.DataFrame() for t in PHASE2_SCORE_TABLES}
    else:
        tables = {
            "phase2_scores": scores,
            "phase2_leaderboard": leaderboard(items, answers, judgments, scores),
            "phase2_leaderboard_by_area": leaderboard_by_area(scores),
        }
    results = [problems_result("totals_within_points", _total_problems(tables["phase2_scores"]))]
    yield from stop_on_blocking_failures(results, SCORE_CHECKS, "phase 2 scores")
    for table in PHASE2_SCORE_TABLES:
        frame = tables[table]
        if not frame.is_empty():
            store.write_partition(table, frame, version=PHASE2_SCORING_VERSION)
        yield MaterializeResult(
            asset_key=AssetKey(table),
            metadata={"rows": frame.height},
            check_results=results if table == "phase2_scores" else [],
            data_version=DataVersion(frame_version(frame)),
        )


def _total_problems(scores: pl.DataFrame) -> list[str]:
    if scores.is_empty():
        return []
    bad = scores.filter(
        ~pl.col("total").is_between(0, AREA_EXAM_POINTS)
        | ~pl.col("piece_points").is_between(0, PIECE_POINTS)
        | ~pl.col("questions_points").is_between(0, AREA_EXAM_POINTS - PIECE_POINTS)
    )
    return [
        f"{r['judge_key']} on {r['model_key']} {r['edition']}_{r['area']}: total {r['total']}"
        for r in bad.iter_rows(named=True)
    ]
