"""The `analysis` group: the leaderboard and the other analysis tables (one asset each, one step) and their
checks. The cells' `scores` are `scores.py`; the report is `reports.py`."""

import datetime as dt
from collections.abc import Iterator
from typing import Any

import polars as pl
from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetKey,
    AssetSpec,
    Config,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    multi_asset,
)

from oabench_pipeline.core.analysis.table_checks import TABLE_CHECKS, table_problems
from oabench_pipeline.core.editions import EditionsRegistryError, Suite, default_suite
from oabench_pipeline.core.tables import ANALYSIS_DESCRIPTIONS, ANALYSIS_TABLES
from oabench_pipeline.core.versions import ANALYSIS_VERSION, frame_version
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.scoring.conditions import LEADERBOARD_CONDITION
from oabench_pipeline.scoring.inputs import healthy_reader
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource

# The leaderboard's and the report's builders (`core/leaderboard.py`, `core/reports.py`, with numpy and
# jinja2) are imported inside the steps that use them: every cell run's process loads this module with the
# definitions, and does not pay for them.
LEADERBOARD_TABLES = ANALYSIS_TABLES  # every table the `leaderboard` step builds, one asset each

LEADERBOARD_CHECKS = {
    "edition_sums_equal_aggregate": "Each model key's official and technical scores equal the sums of its "
    "per-edition scores; blocking: the tables are not replaced.",
    "official_at_least_technical": "No model key's official score is below its technical score (annulled "
    "questions only add official credit); blocking.",
    "accuracies_within_0_1": "Every accuracy column lies in [0, 1]; blocking.",
    "complete_keys_have_80_rows_per_edition": "A model key marked complete has one scored row per question "
    "in each edition (80; 100 in the 1st-3rd); blocking.",
    "pricing_snapshot_not_older_than_runs": "Warning only: estimated costs use a price snapshot taken at "
    "most a day before the calls they price.",
}
BLOCKING_LEADERBOARD_CHECKS = [n for n in LEADERBOARD_CHECKS if n != "pricing_snapshot_not_older_than_runs"]
# The checks of every analysis table: the leaderboard's own above (run on each suite's rows of
# `leaderboard_by_suite` too), the others' in core/analysis.
CHECKS_BY_TABLE: dict[str, dict[str, str]] = {
    "leaderboard": LEADERBOARD_CHECKS,
    "leaderboard_by_suite": {name: f"In each suite: {text}" for name, text in LEADERBOARD_CHECKS.items()},
    **TABLE_CHECKS,
}
BLOCKING_CHECKS = {
    AssetCheckKey(AssetKey(table), name)
    for table, checks in CHECKS_BY_TABLE.items()
    for name in checks
    if name != "pricing_snapshot_not_older_than_runs"
}
# What every analysis table is computed from (the tables are siblings: none is read back from another).
ANALYSIS_DEPS = ["scores", "models", "model_pricing", "model_catalogue", "editions"]


class LeaderboardConfig(Config):
    """Shared by `leaderboard` and `leaderboard_report`: which runs count. (Every suite is built in every
    run: the default suite's tables never depend on run config.)"""

    as_of: str | None = None
    """YYYY-MM-DD: count only runs completed before the end of that day (UTC); default: the newest."""

    def as_of_date(self) -> dt.date | None:
        if self.as_of is None:
            return None
        try:
            return dt.date.fromisoformat(self.as_of)
        except ValueError:
            raise Failure(description=f"as_of {self.as_of!r}: not a date (YYYY-MM-DD)") from None


def _analysis_spec(table: str) -> AssetSpec:
    description = ANALYSIS_DESCRIPTIONS[table]
    return AssetSpec(
        table,
        # A group of their own: many siblings make a tall column that the lineage page cannot fit on
        # screen beside the rest; collapsed, the group is one box between `scores` and the report.
        group_name="analysis",
        deps=ANALYSIS_DEPS,
        description=f"{description}\n\nTable `{table}` in the warehouse; built with the other analysis "
        "tables by one step (`leaderboard`), which computes what they share once and writes the selected ones.",
        metadata={"dagster/column_schema": table_schema(table).value},
        kinds={"duckdb", "parquet"},
        code_version=ANALYSIS_VERSION,
        automation_condition=LEADERBOARD_CONDITION,  # rebuilt once after upstream updates (conditions.py)
    )


@multi_asset(
    name="leaderboard",
    specs=[_analysis_spec(table) for table in ANALYSIS_TABLES],
    check_specs=[
        spec
        for table, checks in CHECKS_BY_TABLE.items()
        for spec in check_specs(
            table, checks, [n for n in checks if AssetCheckKey(AssetKey(table), n) in BLOCKING_CHECKS]
        )
    ],
    can_subset=True,
)
def leaderboard(
    context: AssetExecutionContext,
    config: LeaderboardConfig,
    warehouse: WarehouseResource,
    exam_sources: ExamSourcesResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Every leaderboard and analysis table from the healthy scored cells: one pass, each table its own asset.

    A cell whose partitions are unreadable or whose scores do not cover its answers is left out, with a
    warning naming it (`scoring/inputs.py`); with no healthy cell the step fails and writes nothing.

    The shared work (canonical runs, the DuckDB aggregate, the keys × questions matrices) is done once per
    step, whatever is selected, and every suite of the editions registry is ranked from it; only the
    selected tables are written and only their checks evaluated. A selected blocking check that fails
    stops the step before any table is written.
    """
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables

    store = warehouse.warehouse()
    if not store.has_table("scores"):
        raise Failure(description="nothing is scored yet: materialize inferences and scores first")
    as_of = config.as_of_date()
    suites = _suites(exam_sources)
    selected = [t for t in ANALYSIS_TABLES if AssetKey(t) in context.selected_asset_keys]
    with healthy_reader(store) as (con, inputs):  # one bad cell takes nothing down (scoring/inputs.py)
        for line in inputs.lines():
            context.log.warning(line)
        if not inputs.healthy:
            left_out = (
                f"{len(inputs.left_out)} cell(s) left out, the first: {inputs.lines()[0]}"
                if inputs.left_out
                else "no cell has answers"
            )
            raise Failure(
                description=f"no healthy scored cell to build the analysis tables from ({left_out}); "
                "they keep their previous rows"
            )
        tables = build_leaderboard_tables(con, as_of=as_of, suites=list(suites.values()))
        row_counts = con.sql(
            "select model_key, edition, run_id, count(*) filter (where status <> 'unresolved') as n "
            "from scores group by all"
        ).pl()
        answered_at = con.sql(
            "select model_key, min(created_at) as first_answer from inferences where source = 'live' group by all"
        ).pl()
    checks = [
        result
        for result in analysis_checks(tables, row_counts, answered_at)
        if result.asset_key is not None
        and AssetCheckKey(result.asset_key, str(result.check_name)) in context.selected_asset_check_keys
    ]
    yield from stop_on_blocking_failures(checks, BLOCKING_CHECKS, "leaderboard")
    for name in selected:
        store.write_partition(name, tables[name], version=ANALYSIS_VERSION)
    as_of_text = as_of.isoformat() if as_of else "newest"
    for name in selected:
        metadata: dict[str, Any] = {"rows": tables[name].height, "as_of": as_of_text}
        if name == "leaderboard":
            metadata |= {
                "suite": default_suite(suites).label,
                "model_keys": tables[name].height,
                "complete": int(tables[name]["complete"].sum()),
            }
        elif name == "suites":
            metadata |= {"suites": MetadataValue.text(", ".join(s.label for s in suites.values()))}
        elif name == "key_audit":  # what `oabench audit-keys` prints, at a glance in the UI
            metadata["suspicious"] = int(tables[name]["suspicious"].sum())
        yield MaterializeResult(
            asset_key=name,
            metadata=metadata,
            check_results=[r for r in checks if r.asset_key == AssetKey(name)],
            data_version=DataVersion(frame_version(tables[name])),
        )


def _suites(exam_sources: ExamSourcesResource) -> dict[str, Suite]:
    try:
        return exam_sources.suites()
    except EditionsRegistryError as error:
        raise Failure(description=str(error)) from None


def analysis_checks(
    tables: dict[str, pl.DataFrame], row_counts: pl.DataFrame, answered_at: pl.DataFrame
) -> list[AssetCheckResult]:
    """Every check of every analysis table, each result naming its asset (check names repeat across them)."""
    from oabench_pipeline.core.leaderboard import suite_view

    default = tables["suites"].filter(pl.col("is_default")).row(0, named=True)
    # The plain leaderboard is the default suite's: its sums are over that suite's editions.
    plain = {**tables, **suite_view(tables, default["suite"], default["editions"], plain=True)}
    results = [
        r._replace(asset_key=AssetKey("leaderboard")) for r in _board_checks(plain, row_counts, answered_at)
    ]
    results += [
        r._replace(asset_key=AssetKey("leaderboard_by_suite"))
        for r in suite_board_checks(tables, row_counts, answered_at)
    ]
    for table in TABLE_CHECKS:
        for name, problems in table_problems(table, tables[table]).items():
            results.append(problems_result(name, problems)._replace(asset_key=AssetKey(table)))
    return results


PRICING_MAX_AGE = dt.timedelta(days=1)


def pricing_age_check(board: pl.DataFrame, answered_at: pl.DataFrame) -> AssetCheckResult:
    """Warn when a key's estimated cost uses prices fetched well before its calls were made.

    Providers change prices; an estimate is only as good as a snapshot taken around the run it prices
    (the original tool re-fetched live prices whenever it printed, long after the run).
    """
    priced = board.filter(pl.col("pricing_fetched_at").is_not_null()).join(answered_at, on="model_key")
    # DuckDB hands back "Etc/UTC", polars writes "UTC": the same zone, but polars compares only equal names.
    fetched, first = (pl.col(c).dt.convert_time_zone("UTC") for c in ("pricing_fetched_at", "first_answer"))
    stale = priced.filter(fetched < first - PRICING_MAX_AGE)
    return AssetCheckResult(
        check_name="pricing_snapshot_not_older_than_runs",
        passed=stale.is_empty(),
        severity=AssetCheckSeverity.WARN,
        metadata={
            "problem": MetadataValue.text(
                ", ".join(
                    f"{r['model_key']}: prices of {r['pricing_fetched_at']}"
                    for r in stale.iter_rows(named=True)
                )
                or "none"
            )
        },
    )


def _board_checks(
    tables: dict[str, pl.DataFrame], row_counts: pl.DataFrame, answered_at: pl.DataFrame
) -> list[AssetCheckResult]:
    return [*leaderboard_checks(tables, row_counts), pricing_age_check(tables["leaderboard"], answered_at)]


def suite_board_checks(
    tables: dict[str, pl.DataFrame], row_counts: pl.DataFrame, answered_at: pl.DataFrame
) -> list[AssetCheckResult]:
    """The leaderboard's checks on each suite's rows of `leaderboard_by_suite` (against the suite's editions
    of `leaderboard_by_edition`); a failure names the suite."""
    from oabench_pipeline.core.leaderboard import suite_view

    per_check: dict[str, list[AssetCheckResult]] = {}
    for suite in tables["suites"].iter_rows(named=True):
        view = suite_view(tables, suite["suite"], suite["editions"])
        for result in _board_checks(view, row_counts, answered_at):
            per_check.setdefault(str(result.check_name), []).append(
                result._replace(
                    metadata={
                        "problem": MetadataValue.text(
                            f"suite {suite['suite']}: {result.metadata['problem'].value}"
                        )
                    }
                )
            )
    return [
        AssetCheckResult(
            check_name=name,
            passed=all(r.passed for r in results),
            severity=results[0].severity,
            metadata={
                "problem": MetadataValue.text(
                    "; ".join(str(r.metadata["problem"].value) for r in results if not r.passed)[:2000]
                    or "none"
                )
            },
        )
        for name, results in per_check.items()
    ]


def leaderboard_checks(tables: dict[str, pl.DataFrame], row_counts: pl.DataFrame) -> list[AssetCheckResult]:
    board, by_edition = tables["leaderboard"], tables["leaderboard_by_edition"]
    sums = by_edition.group_by("model_key").agg(
        pl.col("official_score").sum().alias("ed_official"),
        pl.col("technical_score").sum().alias("ed_technical"),
    )
    joined = board.join(sums, on="model_key", how="left")
    mismatched = joined.filter(
        (pl.col("official_score") != pl.col("ed_official"))
        | (pl.col("technical_score") != pl.col("ed_technical"))
    )["model_key"].to_list()
    below = board.filter(pl.col("official_score") < pl.col("technical_score"))["model_key"].to_list()
    accuracy_columns = [c for c in board.columns if c.endswith("accuracy")]
    out_of_range = board.filter(
        pl.any_horizontal([(pl.col(c) < 0) | (pl.col(c) > 1) for c in accuracy_columns])
    )["model_key"].to_list()
    # Rows of the canonical run of each cell of a complete key (other runs of the cell are not counted).
    canonical = by_edition.filter(
        pl.col("model_key").is_in(board.filter(pl.col("complete"))["model_key"].implode())
    )
    short = (
        row_counts.join(
            canonical.select("model_key", "edition", "run_id", "official_total"),
            on=["model_key", "edition", "run_id"],
            how="inner",
            nulls_equal=True,
        ).filter(pl.col("n") != pl.col("official_total"))
        if not row_counts.is_empty()
        else row_counts
    )
    short_cells = [f"{r['model_key']}×{r['edition']}: {r['n']}" for r in short.iter_rows(named=True)]
    return [
        _check("edition_sums_equal_aggregate", mismatched),
        _check("official_at_least_technical", below),
        _check("accuracies_within_0_1", out_of_range),
        _check("complete_keys_have_80_rows_per_edition", short_cells),
    ]


def _check(name: str, problems: list[str]) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=name,
        passed=not problems,
        severity=AssetCheckSeverity.ERROR,
        metadata={"problem": MetadataValue.text(", ".join(map(str, problems))[:2000] or "none")},
    )
