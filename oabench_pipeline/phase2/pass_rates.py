"""`candidate_pass_rates`: candidates' 1st-phase pass rates per edition, from `registry/pass_rates.toml`."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
from dagster import AssetCheckResult, Failure, MaterializeResult, asset

from oabench_pipeline.core.pass_rates import (
    PASS_RATES_FILE,
    PassRatesError,
    load_pass_rates,
    pass_rate_problems,
)
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import markdown_preview, table_schema
from oabench_pipeline.shared.resources import WarehouseResource

PASS_RATES_TABLE = "candidate_pass_rates"
PASS_RATE_CHECKS = {
    "rates_agree_with_counts": "Each rate lies in [0, 1] and, where the source gives both counts, equals "
    "approved / denominator to within half a percentage point (blocking)",
}


@asset(
    group_name="candidates",
    kinds={"polars"},
    check_specs=check_specs(PASS_RATES_TABLE, PASS_RATE_CHECKS, blocking=PASS_RATE_CHECKS),
    metadata={"dagster/column_schema": table_schema(PASS_RATES_TABLE).value},
)
def candidate_pass_rates(warehouse: WarehouseResource) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Candidates' 1st-phase pass rates per edition, each with its source (URL, title, date) and what it is
    taken over (present candidates, inscribed ones), from the packaged `registry/pass_rates.toml`.

    A pass rate says how many passed, not how they scored: no per-question data of candidates is public, so
    it is shown beside the models' scores, never compared question by question (docs/phase2.md)."""
    try:
        table = load_pass_rates(PASS_RATES_FILE)
    except PassRatesError as error:
        raise Failure(description=str(error)) from None
    results = [problems_result("rates_agree_with_counts", pass_rate_problems(table))]
    yield from stop_on_blocking_failures(results, PASS_RATE_CHECKS, PASS_RATES_TABLE)
    warehouse.warehouse().write_partition(PASS_RATES_TABLE, table)
    yield MaterializeResult(
        metadata={
            "editions": table.height,
            "with_rate": table.filter(pl.col("pass_rate").is_not_null()).height,
            "preview": markdown_preview(
                table, ["edition", "pass_rate", "approved", "denominator", "denominator_kind"], rows=20
            ),
        },
        check_results=results,
    )
