"""`oabench status`: where every cell stands (the report itself: `oabench_pipeline/engine/status.py`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from oabench_pipeline.cli.common import (
    EDITIONS_HELP,
    _split,
    choose_suite,
    edition_keys,
    load_registry_suites,
    no_warehouse_note,
    suite_option,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.settings import Settings

if TYPE_CHECKING:
    from dagster import DagsterInstance


def _instance_if_it_opens(settings: Settings) -> DagsterInstance | None:
    """The instance, or None with one line saying why when its storage does not open (PostgreSQL down):
    the warehouse and the response logs still tell every cell's answers, only not its last run's outcome.
    A DAGSTER_HOME to fix (not writable, relative) stays an error."""
    from oabench_pipeline.engine.runs import InstanceHomeError, InstanceUnavailableError, instance_for

    try:
        instance = instance_for(settings)
    except InstanceUnavailableError as error:
        click.echo(
            f"{error}; showing what the warehouse tells (no run states: failed, queued, running and "
            "interrupted need the instance)",
            err=True,
        )
        return None
    except InstanceHomeError as error:
        raise click.ClickException(str(error)) from None
    return click.get_current_context().with_resource(instance)


@main.command(name="status")
@click.option("--models", "models_opt", help="Comma-separated model keys (default: all).")
@click.option("--editions", "editions_opt", help=f"The {EDITIONS_HELP} (default: all).")
@suite_option("Only the editions of this suite, and which model keys are complete on all of them.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--phase",
    type=click.Choice(["1", "2"]),
    default="1",
    show_default=True,
    help="2: the 2nd phase's answer cells (model × edition) and judgment cells (judge × model) instead.",
)
def status_cmd(
    models_opt: str | None, editions_opt: str | None, suite: str | None, fmt: str, phase: str
) -> None:
    """Each cell (edition × model key): complete, missing, failed, interrupted, stale, queued or running, and
    what completing costs. `--phase 2`: the 2nd phase's answer and judgment cells instead (docs/phase2.md).

    Exit code 0 only when every listed cell is complete.
    """
    listed = edition_keys(editions_opt)
    settings = Settings.from_env()
    if phase == "2":
        _phase2_status(settings, listed, _split(models_opt), suite, fmt)
        return
    if suite is not None and editions_opt is not None:
        raise click.UsageError("--suite and --editions both choose the editions: give one")
    chosen = choose_suite(load_registry_suites(settings), suite) if suite is not None else None
    editions = [str(e) for e in chosen.editions] if chosen else listed
    from oabench_pipeline.engine.status import collect_status
    from oabench_pipeline.warehouse import Warehouse

    warehouse = Warehouse(settings.warehouse_path)
    exists = warehouse.root.exists()  # a file there is a broken setup: the instance says so
    # A read writes nothing: with no warehouse there is no instance either (opening one would create it).
    report = collect_status(
        settings, _instance_if_it_opens(settings) if exists else None, editions, _split(models_opt)
    )
    if not exists:
        click.echo(no_warehouse_note(warehouse), err=True)
    if fmt == "json":
        document = report.as_json() | ({"suite": report.suite_json(chosen)} if chosen else {})
        click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        table = format_table(report.display_frame(), "table", wrap={"reason": 60})
        click.echo(table if report.cells else "no cells to show")
        click.echo(report.summary())
        if chosen:
            click.echo(report.suite_summary(chosen))
    sys.exit(0 if report.complete else 1)


def _phase2_status(
    settings: Settings, editions: list[str] | None, models: list[str] | None, suite: str | None, fmt: str
) -> None:
    """`oabench status --phase 2` (`engine/phase2_status.py`); exit code 0 only when every cell is complete."""
    if suite is not None:
        raise click.UsageError("--suite is a 1st-phase option: the 2nd phase has editions, not suites")
    from oabench_pipeline.engine.phase2_status import collect_phase2_status
    from oabench_pipeline.warehouse import Warehouse

    warehouse = Warehouse(settings.warehouse_path)
    exists = warehouse.root.exists()  # a file there is a broken setup: the instance says so
    # As the 1st phase's: a read writes nothing (no warehouse, no instance), and a storage that does not open
    # still leaves what the warehouse tells.
    report = collect_phase2_status(
        settings, _instance_if_it_opens(settings) if exists else None, editions, models
    )
    if not exists:
        click.echo(no_warehouse_note(warehouse), err=True)
    if fmt == "json":
        click.echo(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        table = format_table(report.display_frame(), "table", wrap={"reason": 50})
        click.echo(
            table
            if report.cells
            else "no 2nd-phase cells: no item ingested (`oabench ingest --phase 2`) or no model answered yet "
            "(`--models KEY` lists its cells)"
        )
        click.echo(report.summary())
    sys.exit(0 if report.complete else 1)
