"""`oabench status`: where every cell stands (the report itself: `oabench_pipeline/status.py`)."""

from __future__ import annotations

import json
import sys

import click

from oabench_pipeline.cli.common import (
    EDITIONS_HELP,
    _instance,
    _split,
    edition_keys,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.settings import Settings


@main.command(name="status")
@click.option("--models", "models_opt", help="Comma-separated model keys (default: all).")
@click.option("--editions", "editions_opt", help=f"The {EDITIONS_HELP} (default: all).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status_cmd(models_opt: str | None, editions_opt: str | None, fmt: str) -> None:
    """Each cell (edition × model key): complete, missing, failed, stale or running, and what completing costs.

    Exit code 0 only when every listed cell is complete.
    """
    editions = edition_keys(editions_opt)
    settings = Settings.from_env()
    from oabench_pipeline.status import collect_status

    report = collect_status(settings, _instance(settings), editions, _split(models_opt))
    if fmt == "json":
        click.echo(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        table = format_table(report.display_frame(), "table", wrap={"reason": 60})
        click.echo(table if report.cells else "no cells to show")
        click.echo(report.summary())
    sys.exit(0 if report.complete else 1)
