"""`oabench sql`: one read-only query over the warehouse (the query itself: `cli/query.py`)."""

from __future__ import annotations

import click

from oabench_pipeline.cli.common import table_format_option
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse


@main.command(name="sql")
@click.argument("query")
@table_format_option
def sql_cmd(query: str, fmt: str) -> None:
    """Run one read-only SQL query (DuckDB dialect) over the warehouse tables and print the result.

    Example: oabench sql "select model_key, official_score from leaderboard order by rank"
    """
    from oabench_pipeline.cli.query import QueryError, run_read_only

    settings = Settings.from_env()
    try:
        frame = run_read_only(Warehouse(settings.warehouse_path), query)
    except QueryError as error:
        raise click.ClickException(f"query failed: {error}") from None
    click.echo(format_table(frame, fmt))
