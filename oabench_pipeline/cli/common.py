"""What several `oabench` commands share: option parsing, the Dagster instance and runs, damaged files."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from oabench_pipeline.settings import Settings
from oabench_pipeline.tables import ANALYSIS_TABLES
from oabench_pipeline.warehouse import Warehouse

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions

    from oabench_pipeline.runner import RunOutcome

# `--format` of the commands that print a table: `format_table` renders each (cli/output.py).
table_format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
)


def _split(value: str | None) -> list[str] | None:
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


EDITIONS_HELP = "editions: numbers and ranges, e.g. 43,44 or 1-25,37"


def edition_keys(value: str | None) -> list[str] | None:
    """`--editions 1-25,37` as partition keys ("1" ... "25", "37"), in the order given, each once.

    Every command that takes `--editions` reads it here. A malformed item is a usage error (exit 2) in
    one line naming the item and the expected form.
    """
    items = _split(value)
    if not items:
        return None
    keys: list[str] = []
    for item in items:
        first, dash, last = item.partition("-")
        low, high = _edition_number(first, item), _edition_number(last, item) if dash else None
        if high is not None and high < low:
            raise click.UsageError(f"--editions: range {item!r} runs backwards; write it as {high}-{low}")
        keys += [str(n) for n in range(low, (high or low) + 1) if str(n) not in keys]
    return keys


def _edition_number(text: str, item: str) -> int:
    text = text.strip()
    if not text.isdigit() or int(text) < 1:
        raise click.UsageError(
            f"--editions: {item!r} is not an edition number or a range (expected e.g. 43 or 1-25)"
        )
    return int(text)


def compact_editions(keys: list[str]) -> str:
    """Edition keys as the shortest list of numbers and ranges: 1-25, 37, 43-45."""
    numbers = sorted({int(k) for k in keys})
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


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
    from oabench_pipeline.runner import InstanceHomeError, instance_for

    try:
        instance = instance_for(settings)
    except InstanceHomeError as error:
        raise click.ClickException(str(error)) from None
    return click.get_current_context().with_resource(instance)


def ensure_partitions(instance: DagsterInstance, partitions_name: str, keys: list[str]) -> list[str]:
    from oabench_pipeline.runner import ensure_partitions as ensure

    return ensure(instance, partitions_name, keys)


def run_assets(
    defs: Definitions, instance: DagsterInstance, selection: list[str], **kwargs: Any
) -> RunOutcome:
    from oabench_pipeline.runner import run_assets as run

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


# Cell runs in flight in one `oabench` process. Requests are bounded by the models' capacities, not by
# this; it only bounds the threads (and Dagster bookkeeping) at once.
MAX_CELL_RUNS = 32


def _cell_pool(cells: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=max(1, min(cells, MAX_CELL_RUNS)), thread_name_prefix="oabench-cell"
    )
