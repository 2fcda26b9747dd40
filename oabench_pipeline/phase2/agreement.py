"""`phase2_judge_agreement`: how far the judges of the 2nd phase agree on the answers they all graded."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
from dagster import AssetCheckResult, AssetCheckSeverity, AssetKey, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.phase2.agreement import OVERALL, judge_agreement
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import markdown_preview, table_schema
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse

AGREEMENT_TABLE = "phase2_judge_agreement"
AGREEMENT_CHECKS = {
    "statistics_in_range": "MAE ≥ 0, correlations and ICC within [-1, 1], each ICC inside its interval, "
    "disagreeing exams no more than those compared (blocking)",
    "pairs_have_overall_row": "Each pair of judges has its row over every area (`area` = 'all') (blocking)",
}


JUDGMENT_SCHEMA = {
    "judge_key": pl.String,
    "model_key": pl.String,
    "item_id": pl.String,
    "turn": pl.Int32,
    "area": pl.String,
    "edition": pl.Int32,
    "score": pl.Float64,
    "max_points": pl.Float64,
}


def judgment_scores(store: Warehouse) -> pl.DataFrame:
    """The agreement's frame from `phase2_judgments`: the kept judgments (no error), invalid ones with NULL."""
    if not store.has_table("phase2_judgments"):
        return pl.DataFrame(schema=JUDGMENT_SCHEMA)
    judgments = store.read("phase2_judgments")
    if "error" in judgments.columns:
        judgments = judgments.filter(pl.col("error").is_null())
    return judgments.select(pl.col(name).cast(dtype) for name, dtype in JUDGMENT_SCHEMA.items())


def exam_sub_items(store: Warehouse) -> pl.DataFrame | None:
    """Sub-items per area-exam from `phase2_items` (a piece 1, a question 2), so an exam a judge left
    partly unjudged is not compared; None before the items are ingested."""
    if not store.has_table("phase2_items"):
        return None
    items = store.read("phase2_items")
    return items.group_by("edition", "area").agg(sub_items=pl.col("turn_points").list.len().sum())


@asset(
    group_name="phase2_agreement",
    deps=[AssetKey("phase2_items"), AssetKey("phase2_import"), AssetKey("phase2_judgments")],
    kinds={"polars"},
    check_specs=check_specs(AGREEMENT_TABLE, AGREEMENT_CHECKS, blocking=AGREEMENT_CHECKS),
    metadata={"dagster/column_schema": table_schema(AGREEMENT_TABLE).value},
)
def phase2_judge_agreement(warehouse: WarehouseResource) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Judges compared: for each pair of judges that graded the same answers of the 2nd phase, per area and
    over all areas, the MAE, Pearson and Spearman correlations and ICC(2,1) with its 95% interval of their
    points per sub-item, and on how many area-exams one judge passes the model and the other fails it.

    Empty while fewer than two judges graded a common answer (docs/phase2.md)."""
    store = warehouse.warehouse()
    table = judge_agreement(judgment_scores(store), exam_sub_items(store))
    results = agreement_checks(table)
    yield from stop_on_blocking_failures(results, AGREEMENT_CHECKS, AGREEMENT_TABLE)
    store.write_partition(AGREEMENT_TABLE, table)
    overall = table.filter(pl.col("area") == OVERALL)
    yield MaterializeResult(
        metadata={
            "pairs": overall.height,
            "judges": MetadataValue.text(
                ", ".join(sorted(set(overall["judge_a"].to_list()) | set(overall["judge_b"].to_list())))
                or "fewer than two"
            ),
            "preview": markdown_preview(
                overall, ["judge_a", "judge_b", "answers", "mae", "icc", "pass_disagreement_rate"]
            )
            if overall.height
            else "no pairs of judges",
        },
        check_results=results,
    )


def agreement_checks(table: pl.DataFrame) -> list[AssetCheckResult]:
    out_of_range = []
    for row in table.iter_rows(named=True):
        where = f"{row['judge_a']} vs {row['judge_b']}, {row['area']}"
        if row["mae"] is not None and row["mae"] < 0:
            out_of_range.append(f"{where}: MAE {row['mae']}")
        for name in ("pearson", "spearman", "icc"):
            if row[name] is not None and not -1 - 1e-9 <= row[name] <= 1 + 1e-9:
                out_of_range.append(f"{where}: {name} {row[name]}")
        # pingouin gives no interval (NaN, stored NULL) when the F statistic is degenerate: nothing to compare.
        low, high = row["icc_ci_low"], row["icc_ci_high"]
        if (
            row["icc"] is not None
            and low is not None
            and high is not None
            and not low - 1e-9 <= row["icc"] <= high + 1e-9
        ):
            out_of_range.append(
                f"{where}: ICC {row['icc']} outside [{row['icc_ci_low']}, {row['icc_ci_high']}]"
            )
        if row["exams_pass_disagree"] > row["exams_compared"]:
            out_of_range.append(f"{where}: {row['exams_pass_disagree']} > {row['exams_compared']} exams")
    pairs = table.select("judge_a", "judge_b").unique()
    with_overall = table.filter(pl.col("area") == OVERALL).select("judge_a", "judge_b")
    lacking = pairs.join(with_overall, on=["judge_a", "judge_b"], how="anti")
    return [
        problems_result("statistics_in_range", out_of_range),
        problems_result(
            "pairs_have_overall_row",
            [f"{a} vs {b}" for a, b in lacking.iter_rows()],
            AssetCheckSeverity.ERROR,
        ),
    ]
