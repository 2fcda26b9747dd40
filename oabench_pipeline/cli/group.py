"""The `oabench` command group: every command is registered on `main`."""

from __future__ import annotations

import click

from oabench_pipeline.cli.output import log_warnings_in_one_line
from oabench_pipeline.core.editions import EditionsRegistryError
from oabench_pipeline.core.toml_errors import TomlFileError
from oabench_pipeline.settings import Settings, SettingsError
from oabench_pipeline.warehouse import Warehouse, WarehouseError


class _OabenchGroup(click.Group):
    """Warehouse problems (a damaged partition, a held lock, a full disk), an unusable setting, an editions
    registry that cannot be used (`file: suite 'x': ...`) and a mistake in the models registry or the watch
    policy (`file:line: field 'x': ...`) end in their one-line message."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        # TomlFileError: the models registry (ModelsRegistryError) or the watch policy (WatchPolicyError).
        except (WarehouseError, SettingsError, EditionsRegistryError, TomlFileError) as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_OabenchGroup)
@click.version_option(package_name="oabench-pipeline", prog_name="oabench", message="%(prog)s %(version)s")
def main() -> None:
    """OABench Pipeline: LLMs on the Brazilian Bar Exam (OAB, 1st phase)."""
    log_warnings_in_one_line()
    _heal_catalogue(Settings.from_env())


def _heal_catalogue(settings: Settings) -> None:
    """Every command first makes sure the DuckDB catalogue holds today's views (warehouse.ensure_views).

    Quietly: a rebuild is routine (the first write of a new warehouse makes the file). When the warehouse
    folder does not exist there is nothing to heal, and a command that only reads must not create it (it
    names the folder it looked in instead: `read_warehouse`); when it is not a folder at all, the command
    itself says so in one line: no warning first.
    """
    folder = settings.warehouse_path.parent
    if not folder.is_dir():
        return
    try:
        Warehouse(settings.warehouse_path).ensure_views()
    except OSError as error:  # a read-only warehouse can still be read
        click.echo(f"warning: catalogue {settings.warehouse_path} not checked: {error}", err=True)
