"""`oabench ui`: the Dagster UI on the very instance `oabench` uses, with nothing to export.

`dg dev` (or `dagster dev`) run from the repository root with no DAGSTER_HOME works on the same storage,
through the repository's `dagster.yaml`, but Dagster then announces a temporary instance folder ("set the
environment variable DAGSTER_HOME") that holds nothing; with DAGSTER_HOME exported and that `dagster.yaml`
in the working directory it warns that the file is ignored. This command therefore starts `dg dev` with
DAGSTER_HOME set to the instance `oabench` opens (`engine/runs.instance_home`), from that folder, and with every
path setting made absolute, so the code server and the runs it launches read the same warehouse as the
command line, wherever it was started.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from oabench_pipeline.cli.group import main
from oabench_pipeline.settings import Settings

# The package (its lazy `defs`): the code location is then named `oabench_pipeline`, as for `dagster dev` from
# the repository root (`[tool.dagster]`) and `dagster sensor start ... -m oabench_pipeline`, so a sensor
# started or stopped in one is started or stopped in all.
DEFINITIONS_MODULE = "oabench_pipeline"


def ui_environment(settings: Settings, home: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` with DAGSTER_HOME and every path setting absolute (relative ones are read from the cwd,
    which the UI does not share): the warehouse, PDFs, registries, watch policy and a local mirror."""
    env = dict(environ)
    env.update(
        DAGSTER_HOME=str(home),
        OABENCH_WAREHOUSE=str(settings.warehouse_path),
        OABENCH_RAW_DIR=str(settings.raw_dir),
        OABENCH_EDITIONS_FILE=str(settings.editions_file),
        OABENCH_MODELS_FILE=str(settings.models_file),
        OABENCH_WATCH_FILE=str(settings.watch_file),
    )
    mirror = settings.source_base_url
    if mirror and ("://" not in mirror or mirror.startswith("file://")):
        env["OABENCH_SOURCE_BASE_URL"] = str(Path(mirror.removeprefix("file://")).resolve())
    return env


def dg_command(port: int, host: str) -> list[str]:
    """`dg dev` on the package's definitions: the `dg` beside this Python, which needs no activated venv."""
    dg = Path(sys.executable).with_name("dg")
    return [str(dg), "dev", "-m", DEFINITIONS_MODULE, "--port", str(port), "--host", host]


def listen_problem(host: str, port: int) -> str | None:
    """Why the webserver could not listen on host:port (None: it can), found before anything starts.

    `dg dev` starts its daemon first and only logs the webserver's `address already in use`: the UI was
    then not there, yet the daemon launched runs. Bound here with SO_REUSEADDR, as the webserver binds, so
    a port left in TIME_WAIT by a UI just stopped is free, and a port something listens on is not.
    """
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        return f"cannot listen on {host}:{port}: {error.strerror} (--host)"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return (
                        f"port {port} on {host} is already in use (another `oabench ui`?): stop what holds "
                        f"it or pick another with --port; nothing was started"
                    )
                return f"cannot listen on {host}:{port}: {error.strerror}; nothing was started"
    return None


@main.command(name="ui")
@click.option("--port", "-p", type=click.IntRange(1, 65535), default=3000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the webserver listens on.")
def ui_cmd(port: int, host: str) -> None:
    """The Dagster UI: webserver and daemon (sensors, schedules, run queue) on oabench's own instance.

    `dg dev` with DAGSTER_HOME set to the instance `oabench` uses (`<warehouse folder>/dagster_home`
    unless DAGSTER_HOME is exported). Ctrl-C stops it.
    """
    from oabench_pipeline.engine.runs import InstanceHomeError, instance_home

    settings = Settings.from_env()
    try:
        home, _ = instance_home(settings)
    except InstanceHomeError as error:
        raise click.ClickException(str(error)) from None
    if problem := listen_problem(host, port):
        raise click.ClickException(problem)
    command = dg_command(port, host)
    if not Path(command[0]).is_file():
        raise click.ClickException(f"{command[0]} not found: install the project (`pip install -e .`) first")
    click.echo(
        f"Dagster UI on http://{host}:{port} (instance {home}, warehouse {settings.warehouse_path}); "
        "Ctrl-C stops it",
        err=True,
    )
    env = ui_environment(settings, home, os.environ)  # before the chdir: relative paths are from here
    # From the instance folder: Dagster warns when the working directory holds another dagster.yaml.
    os.chdir(home)
    os.execve(command[0], command, env)
