"""What several `oabench` commands share: option parsing, the Dagster instance and runs, damaged files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from oabench_pipeline.core.editions import (
    EditionsRegistryError,
    Suite,
    load_suites,
    parse_edition_spec,
    resolve_suite,
)
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions

    from oabench_pipeline.engine.runs import RunOutcome

# `--format` of the commands that print a table: `format_table` renders each (cli/output.py).
table_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
)


def suite_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--suite NAME`: a suite of the editions registry (`[suites]`, plus the built-in `all`)."""
    return click.option("--suite", "suite", metavar="NAME", help=help_text)


def load_registry_suites(settings: Settings) -> dict[str, Suite]:
    """Every suite of the editions registry (and `all`); a bad registry is its one-line error."""
    try:
        return load_suites(settings.editions_file, settings.discovered_editions_file)
    except EditionsRegistryError as error:
        raise click.ClickException(str(error)) from None


def choose_suite(suites: dict[str, Suite], name: str | None) -> Suite:
    """The suite `--suite` names (None: the default one); an unknown name is a usage error listing them."""
    try:
        return resolve_suite(name, suites)
    except EditionsRegistryError as error:
        raise click.BadParameter(str(error), param_hint="'--suite'") from None


def _split(value: str | None) -> list[str] | None:
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


EDITIONS_HELP = "editions: numbers and ranges, e.g. 43,44 or 1-25,37"


def edition_keys(value: str | None) -> list[str] | None:
    """`--editions 1-25,37` as partition keys ("1" ... "25", "37"), ascending, each once (None: not given).

    Every command that takes `--editions` reads it here (the ranges themselves: `parse_edition_spec`). A
    malformed item is a usage error (exit 2) in one line, before any work.
    """
    if value is None:
        return None
    try:
        return [str(n) for n in parse_edition_spec(value)]
    except ValueError as error:
        raise click.UsageError(f"--editions: {error}") from None


def read_warehouse(settings: Settings) -> Warehouse:
    """The warehouse a reading command reads; a one-line error naming the folder it looked in when there is
    none (a read writes nothing: run outside the repository, it would otherwise leave a `warehouse/`)."""
    warehouse = Warehouse(settings.warehouse_path)
    if not warehouse.root.is_dir():
        raise click.ClickException(no_warehouse_note(warehouse))
    return warehouse


def no_warehouse_note(warehouse: Warehouse) -> str:
    return (
        f"no warehouse at {warehouse.root}: nothing ingested or run there yet "
        "(OABENCH_WAREHOUSE names another; `oabench ingest` creates it)"
    )


def _dagster(settings: Settings) -> tuple[Definitions, DagsterInstance]:
    """The project's definitions and the persistent instance, entered for the rest of the command.

    Imported here, not at the top: Dagster and the asset modules take seconds to import, and a
    command with nothing to do (everything up to date) should not pay for them.
    """
    from oabench_pipeline.definitions import build_definitions

    instance = _instance(settings)
    return build_definitions(settings), instance


def _instance(settings: Settings) -> DagsterInstance:
    """The persistent Dagster instance, entered (made current) until the command ends."""
    from oabench_pipeline.engine.runs import InstanceHomeError, instance_for

    try:
        instance = instance_for(settings)
    except InstanceHomeError as error:
        raise click.ClickException(str(error)) from None
    return click.get_current_context().with_resource(instance)


def ensure_partitions(instance: DagsterInstance, partitions_name: str, keys: list[str]) -> list[str]:
    from oabench_pipeline.engine.runs import ensure_partitions as ensure

    return ensure(instance, partitions_name, keys)


def run_assets(
    defs: Definitions, instance: DagsterInstance, selection: list[str], **kwargs: Any
) -> RunOutcome:
    from oabench_pipeline.engine.runs import run_assets as run

    return run(defs, instance, selection, **kwargs)


def _set_aside_damaged(
    warehouse: Warehouse, table: str, partition_keys: list[str], rebuilt_by: str, thorough: bool = True
) -> int:
    """Move unreadable partition files out of the way, so this command rebuilds them like missing ones."""
    damaged = warehouse.damaged_partitions(table, partition_keys, thorough)
    for path in damaged:
        aside = warehouse.set_aside(path)
        click.echo(
            f"table {table}, file {path}: unreadable, set aside as {aside.name}; {rebuilt_by}", err=True
        )
    return len(damaged)


def _fail(what: str, errors: list[str]) -> None:
    click.echo(f"{what}: FAILED", err=True)
    for message in errors:
        click.echo(f"  {message}", err=True)
    sys.exit(1)


def _must(outcome: RunOutcome, what: str) -> None:
    if not outcome.success:
        _fail(what, outcome.errors)


# Every analysis table (one asset each, built by one step) and the report that renders them.
REPORT_ASSETS = [*ANALYSIS_TABLES, "leaderboard_report"]


def leaderboard_outputs(warehouse: Warehouse) -> str:
    """Where a rebuilt leaderboard is to be seen, said after each rebuild."""
    report = warehouse.root / "reports" / "leaderboard.html"
    return f"`oabench leaderboard` prints it, the HTML report is {report}, `oabench site` writes the site"


# Cell runs one `oabench` command has in flight, each a process of its own (with the default run launcher):
# as many as a new instance's `max_concurrent_runs`. Requests are bounded by the models' capacities, not by
# this; edition-major order starts every model's first cell before any second one.
MAX_CELL_RUNS = 16


def _cell_pool(cells: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=max(1, min(cells, MAX_CELL_RUNS)), thread_name_prefix="oabench-cell"
    )
