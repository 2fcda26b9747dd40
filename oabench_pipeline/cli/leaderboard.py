"""`oabench leaderboard`: the leaderboard tables, sized for a terminal."""

from __future__ import annotations

import datetime as dt
from datetime import datetime

import click
import polars as pl

from oabench_pipeline.cli.common import choose_suite, load_registry_suites, suite_option, table_format_option
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table, leaderboard_summary
from oabench_pipeline.core.public_endpoints import public_frame
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse


@main.command(name="leaderboard")
@click.option("--by", type=click.Choice(["model", "edition", "area"]), default="model", show_default=True)
@table_format_option
@click.option(
    "--wide", is_flag=True, help="Every column in the table (csv, json and markdown always have them)."
)
@click.option(
    "--rank-by",
    "rank_by",
    type=click.Choice(["accuracy", "ability"]),
    default="accuracy",
    show_default=True,
    help="accuracy: official score among keys that ran every edition; ability: Rasch ability (one scale "
    "for keys that ran different editions), among keys whose every edition run is complete.",
)
@click.option(
    "--as-of",
    "as_of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Count only runs completed before the end of this day (UTC), e.g. 2026-03-03.",
)
@suite_option(
    "Rank this suite of editions (default: oabench-2026, the study's 43rd-45th; `all`: every edition)."
)
def leaderboard_cmd(
    by: str, fmt: str, wide: bool, rank_by: str, as_of: datetime | None, suite: str | None
) -> None:
    """Print the leaderboard (or its per-edition / per-area breakdown) from the warehouse.

    The default table fits 120 columns; csv and json keep every column at full precision. With --as-of
    the tables are computed for that day from the scored runs (nothing is written). --suite ranks another
    suite of editions (default: oabench-2026, the study's 43rd-45th).
    """
    settings = Settings.from_env()
    table = {"model": "leaderboard", "edition": "leaderboard_by_edition", "area": "leaderboard_by_area"}[by]
    warehouse = Warehouse(settings.warehouse_path)
    if as_of is not None and not warehouse.has_table("scores"):
        raise click.ClickException("nothing is scored yet: run `oabench run` or `oabench import` first")
    heading = None
    if suite is None and as_of is None:  # the plain tables: the default suite's, as stored
        tables = _default_suite_tables(warehouse, table)
        frame, by_edition = tables[table], tables["leaderboard_by_edition"]
    else:
        tables, heading = _suite_tables(settings, warehouse, suite, as_of.date() if as_of else None)
        frame, by_edition = tables[table], tables["leaderboard_by_edition"]
        if as_of is not None and frame.is_empty():
            raise click.ClickException(f"no run had started by the end of {as_of.date()} (UTC)")
    if frame.is_empty():
        raise click.ClickException(f"no {table} table yet: run `oabench run` or `oabench import` first")
    note = None
    if by == "model" and rank_by == "ability" and "ability_rank" not in frame.columns:
        raise click.ClickException(
            "the leaderboard has no abilities yet: rebuild it with `oabench run` (nothing is asked again)"
        )
    if by == "model":
        rank = "ability_rank" if rank_by == "ability" else "rank"
        second = "ability" if rank_by == "ability" else "official_score"
        frame = frame.sort(rank, second, nulls_last=True, descending=[False, True])
    if fmt == "table" and not wide:
        if by == "model":
            from oabench_pipeline.core.reports import editions_covered

            frame, note = leaderboard_summary(frame, editions_covered(by_edition), rank_by, suite)
        else:
            if "effective_cost_usd" in frame.columns:  # the per-edition cost, marked when estimated
                from oabench_pipeline.cli.output import ESTIMATED_NOTE, cost_text

                estimated = (frame["cost_source"] == "estimated").any()
                note = f"* after a cost: {ESTIMATED_NOTE}" if estimated else None
                frame = frame.with_columns(
                    pl.Series(
                        "cost_usd",
                        [
                            cost_text(c, s)
                            for c, s in frame.select("effective_cost_usd", "cost_source").iter_rows()
                        ],
                    )
                )
            columns = {c: h for c, h in TERMINAL_COLUMNS[by].items() if c in frame.columns}
            frame = frame.select(list(columns)).rename(columns)
    click.echo(format_table(public_frame(frame), fmt))  # an endpoint column, if one is ever added
    if note:
        click.echo(note)
    if heading and suite is not None and fmt == "table":  # people asked for a suite: say what it covers
        click.echo(heading)


# What fits a terminal for the breakdowns (`--by model` has its own summary); `--wide` shows every column.
TERMINAL_COLUMNS = {
    "edition": {
        "model_key": "model",
        "edition": "edition",
        "official_score": "score",
        "official_total": "of",
        "official_accuracy": "accuracy",
        "technical_accuracy": "technical",
        "passed": "passed",
        "p_pass": "p_pass",
        "invalid_count": "invalid",
        "avg_latency_ms": "avg ms",
        "cost_usd": "cost $",
    },
    "area": {
        "model_key": "model",
        "area": "area",
        "correct": "correct",
        "total": "of",
        "accuracy": "accuracy",
    },
}


def _default_suite_tables(warehouse: Warehouse, table: str) -> dict[str, pl.DataFrame]:
    """`table` and the per-edition rows as the default suite sees them (`leaderboard` is its own; the
    editions and areas are its editions'), from the stored tables; a warehouse built before suites: as is."""
    from oabench_pipeline.core.leaderboard import suite_view

    tables = {name: warehouse.read(name) for name in {table, "leaderboard_by_edition", "suites"}}
    suites = tables["suites"]
    default = suites.filter(pl.col("is_default")) if "is_default" in suites.columns else suites.clear()
    if default.is_empty():
        return tables
    if table == "leaderboard_by_area":
        tables["leaderboard_by_area_by_suite"] = warehouse.read("leaderboard_by_area_by_suite")
    return suite_view(tables, default["suite"][0], default["editions"][0].to_list(), plain=True)


def _suite_tables(
    settings: Settings, warehouse: Warehouse, name: str | None, as_of: dt.date | None
) -> tuple[dict[str, pl.DataFrame], str]:
    """The tables as suite `name` (None: the default) sees them: the stored `_by_suite` rows, or with
    `as_of` every suite computed for that day; and a line naming the suite and what it covers."""
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables, suite_view
    from oabench_pipeline.core.reports import suite_heading

    registry = load_registry_suites(settings)
    suite = choose_suite(registry, name)
    if as_of is not None:
        from oabench_pipeline.scoring.inputs import healthy_reader

        with healthy_reader(warehouse) as (con, _):  # the cells the stored tables are built from
            tables = build_leaderboard_tables(con, as_of=as_of, suites=list(registry.values()))
    else:
        tables = {t: warehouse.read(t) for t in ("suites", "leaderboard_by_edition", *SUITE_SOURCES)}
    stored = (
        tables["suites"].filter(pl.col("suite") == suite.name)
        if "suite" in tables["suites"].columns
        else None
    )
    if stored is None or stored.is_empty():
        raise click.ClickException(
            f"suite {suite.name} is not in the leaderboard tables yet (they were built before it was added, "
            "or nothing is scored): `oabench run` rebuilds them"
        )
    row = stored.row(0, named=True)
    heading = suite_heading(row) + f"; {row['ranked_keys']} of {row['model_keys']} model key(s) ranked"
    return suite_view(tables, suite.name, row["editions"]), heading


# What `--suite` reads besides `suites` and `leaderboard_by_edition`: the twins the three views show.
SUITE_SOURCES = ("leaderboard_by_suite", "leaderboard_by_area_by_suite")
