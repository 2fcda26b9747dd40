"""Scores per benchmark cell; the leaderboard and analysis tables (one asset each, one step); the report."""

import base64
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
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
    asset,
    multi_asset,
)

from oabench_pipeline.core.analysis.table_checks import TABLE_CHECKS, table_problems
from oabench_pipeline.core.editions import EditionsRegistryError, Suite, default_suite
from oabench_pipeline.core.scoring import SCORING_VERSION, score_inferences
from oabench_pipeline.core.tables import ANALYSIS_DESCRIPTIONS, ANALYSIS_TABLES
from oabench_pipeline.core.versions import ANALYSIS_VERSION, REPORT_VERSION, frame_version
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.assets import cell_keys
from oabench_pipeline.scoring.conditions import (
    LEADERBOARD_CONDITION,
    REPORT_CONDITION,
    SCORES_CONDITION,
)
from oabench_pipeline.scoring.inputs import healthy_reader
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import model_edition_partitions
from oabench_pipeline.shared.resources import WarehouseResource

# The leaderboard's and the report's builders (`core/leaderboard.py`, `core/reports.py`, with numpy and
# jinja2) are imported inside the steps that use them: every cell run's process loads this module for
# `scores`, and does not pay for them.
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


@asset(
    group_name="scoring",
    partitions_def=model_edition_partitions,
    deps=["inferences", "answer_keys", "questions"],
    code_version=SCORING_VERSION,
    metadata={"dagster/column_schema": table_schema("scores").value},
    automation_condition=SCORES_CONDITION,  # re-score a cell when its inputs change (scoring/conditions.py)
)
def scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """One row per question and model key: the answer, the key's letter, official and technical credit.

    Annulled questions are credited to everyone (`is_correct_official` true) and left out of the
    technical score (`is_correct_technical` NULL); an answer counts only when one was extracted.
    """
    model_key, edition = cell_keys(context)
    store = warehouse.warehouse()
    if store.read("inferences", str(context.partition_key)).is_empty():
        raise Failure(
            description=f"no inferences for {model_key} × edition {edition}: materialize inferences first"
        )
    # The cell's own partitions only: another cell's unreadable file is that cell's to rebuild, and a view
    # over every file of a table would cost more with every cell the warehouse holds.
    cell_inputs = {"inferences": str(context.partition_key), "questions": edition, "answer_keys": edition}
    # Their data versions, recorded with the scores (`inference/freshness.py`), read before the rows themselves.
    inputs = store.input_versions(cell_inputs)
    with store.partitions_reader(cell_inputs) as con:
        frame = score_inferences(con, model_key=model_key, edition=int(edition))
    version = frame_version(frame)  # a re-score that changes no row changes nothing downstream
    store.write_partition(
        "scores",
        frame,
        str(context.partition_key),
        version=SCORING_VERSION,
        data_version=version,
        inputs=inputs,
    )
    # One line per run of the cell (a partition holds every run): summing across runs would mean nothing.
    per_run = (
        frame.group_by("run_id")
        .agg(
            official=pl.col("is_correct_official").sum(),
            technical=pl.col("is_correct_technical").sum(),
            active=(pl.col("status") == "active").sum(),
            invalid=((pl.col("status") == "active") & ~pl.col("is_valid")).sum(),
        )
        .sort("run_id")
    )
    return MaterializeResult(
        metadata={
            "rows": frame.height,
            "runs": per_run.height,
            "scores_by_run": MetadataValue.md(
                "\n".join(
                    f"- `{r['run_id']}`: official {r['official']}, technical {r['technical']}/{r['active']}, "
                    f"invalid {r['invalid']}"
                    for r in per_run.iter_rows(named=True)
                )
            ),
        },
        data_version=DataVersion(version),
    )


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


class ReportConfig(LeaderboardConfig):
    """`leaderboard_report`'s settings: which runs count, and which suite it ranks."""

    suite: str | None = None
    """A suite of the editions registry (`suites` table); default: the default suite (oabench-2026),
    written to `reports/`. Another suite's report goes to `reports/suites/<name>/`."""


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


@asset(
    group_name="reports",
    deps=list(ANALYSIS_TABLES),
    code_version=REPORT_VERSION,
    automation_condition=REPORT_CONDITION,
    metadata={"dagster/column_schema": table_schema("leaderboard").value},  # leaderboard.csv / .parquet
)
def leaderboard_report(
    config: ReportConfig, warehouse: WarehouseResource, exam_sources: ExamSourcesResource
) -> MaterializeResult:
    """The leaderboard for people: HTML, Markdown, CSV/Parquet exports and two charts in `warehouse/reports/`.

    Headed by when it was generated and the newest answer it covers. `cost_vs_accuracy.png` puts cost
    on a log axis with the Pareto frontier drawn; `accuracy_by_area.png` is a legal area × model heatmap;
    `accuracy_by_exam_date.png` (when a key has a knowledge cutoff) each such key's accuracy by exam date
    with its cutoff marked and the effect net of difficulty.
    `summary` shows inline here; the full table and each chart open from their "[Show Markdown]" (the UI
    shows a Markdown value inline only under 1,000 characters, and an embedded PNG is far longer).
    With `as_of` set, the tables are rebuilt in memory for that day (the stored ones are left as they are).
    The suite it ranks heads it (`suite`: the default one, else `reports/suites/<name>/`).
    """
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables
    from oabench_pipeline.core.reports import write_reports

    store = warehouse.warehouse()
    as_of = config.as_of_date()
    if as_of is None:
        tables = {name: store.read(name) for name in LEADERBOARD_TABLES}
    else:
        with healthy_reader(store) as (con, _):
            tables = build_leaderboard_tables(con, as_of=as_of, suites=list(_suites(exam_sources).values()))
    suites = tables["suites"]
    if "suite" not in suites.columns:
        raise Failure(
            description="the analysis tables predate suites (no `suites` table): rebuild them first"
        )
    default = suites.filter(pl.col("is_default"))["suite"].to_list()
    suite = config.suite or (default[0] if default else None)
    if config.suite is not None and config.suite not in suites["suite"].to_list():
        raise Failure(
            description=f"suite {config.suite!r} is not in the analysis tables (they have "
            f"{', '.join(suites['suite'].to_list()) or 'none'}): add it to the editions registry, then "
            "rebuild them (`oabench run`)"
        )
    board = (
        tables["leaderboard_by_suite"].filter(pl.col("suite") == suite) if suite else tables["leaderboard"]
    )
    if board.is_empty():
        raise Failure(description=f"the leaderboard of suite {suite} is empty: score some inferences first")
    out_dir = store.root / "reports"
    if suite is not None and suite not in default:
        out_dir = out_dir / "suites" / suite
    newest = "select max(created_at) as newest from inferences"
    if as_of is not None:  # the newest answer the as-of tables can count
        newest += f" where created_at < timestamptz '{as_of + dt.timedelta(days=1)} 00:00:00+00'"
    data_as_of = store.read_around_damage(lambda con: con.sql(newest).pl(), "inferences")["newest"][0]
    generated_at = dt.datetime.now(dt.UTC)
    editions = store.read("editions") if store.has_table("editions") else None
    answer_keys = store.read("answer_keys") if store.has_table("answer_keys") else None
    files = write_reports(
        tables,
        out_dir,
        data_as_of=data_as_of,
        generated_at=generated_at,
        editions=editions,
        suite=suite,
        answer_keys=answer_keys,
    )
    caption = f"\n\n{files.cost_plot_caption}" if files.cost_plot_caption else ""
    return MaterializeResult(
        metadata={
            "summary": MetadataValue.md(files.summary),
            "generated_at": MetadataValue.timestamp(generated_at),
            "data_as_of": MetadataValue.timestamp(data_as_of)
            if data_as_of
            else MetadataValue.text("no answers"),
            "leaderboard": MetadataValue.md(files.markdown.read_text(encoding="utf-8")),
            "cost_vs_accuracy": MetadataValue.md(_inline_png(files.cost_plot, "cost vs accuracy") + caption),
            "accuracy_by_area": MetadataValue.md(_inline_png(files.area_plot, "accuracy by area")),
            **(
                {
                    "accuracy_by_exam_date": MetadataValue.md(
                        _inline_png(files.cutoff_plot, "accuracy by exam date")
                    )
                }
                if files.cutoff_plot
                else {}
            ),
            "as_of": as_of.isoformat() if as_of else "newest",
            "suite": suite or "none",
            "html": MetadataValue.path(str(files.html)),
            "folder": MetadataValue.path(str(files.html.parent)),
        }
    )


def _inline_png(path: Path, alt: str) -> str:
    return f"![{alt}](data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()})"
