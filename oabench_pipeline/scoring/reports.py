"""The `reports` group's leaderboard report (`leaderboard_report`); the site beside it is `site_asset.py`."""

import base64
import datetime as dt
from pathlib import Path

import polars as pl
from dagster import Failure, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.core.versions import REPORT_VERSION
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.scoring.analysis import LEADERBOARD_TABLES, LeaderboardConfig, _suites
from oabench_pipeline.scoring.conditions import REPORT_CONDITION
from oabench_pipeline.scoring.inputs import healthy_reader
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.resources import WarehouseResource


class ReportConfig(LeaderboardConfig):
    """`leaderboard_report`'s settings: which runs count, and which suite it ranks."""

    suite: str | None = None
    """A suite of the editions registry (`suites` table); default: the default suite (oabench-2026),
    written to `reports/`. Another suite's report goes to `reports/suites/<name>/`."""


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
    data_as_of = store.read_around_damage(
        lambda con: con.sql(newest).pl(), "inferences", tables=["inferences"]
    )["newest"][0]
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
