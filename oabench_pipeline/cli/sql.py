"""`oabench sql`: one read-only query over the warehouse (the query itself: `cli/query.py`)."""

from __future__ import annotations

import click

from oabench_pipeline.cli.common import table_format_option
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

DEFAULT_TIMEOUT_S = 120.0  # as cli/query.py's; repeated here so that `--help` needs no DuckDB import
DEFAULT_MEMORY = "2GB"


@main.command(name="sql")
@click.argument("query")
@table_format_option
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Stop the query after this long.",
)
@click.option(
    "--memory",
    default=DEFAULT_MEMORY,
    show_default=True,
    metavar="SIZE",
    help="The most memory DuckDB may use (e.g. 512MB, 8GB); nothing spills to disk.",
)
def sql_cmd(query: str, fmt: str, timeout_s: float, memory: str) -> None:
    """Run one read-only SQL query (DuckDB dialect) over the warehouse tables and print the result.

    Ctrl-C stops it at once. Example: oabench sql "select model_key, official_score from leaderboard order by rank"
    """
    from oabench_pipeline.cli.query import QueryError, QueryInterrupted, QueryLimits, run_read_only

    settings = Settings.from_env()
    try:
        frame = run_read_only(Warehouse(settings.warehouse_path), query, QueryLimits(timeout_s, memory))
    except QueryInterrupted as error:
        click.echo(f"Error: query stopped, {error}; nothing was printed", err=True)
        raise SystemExit(error.exit_code) from None
    except QueryError as error:
        raise click.ClickException(f"query failed: {error}") from None
    click.echo(format_table(frame, fmt))
