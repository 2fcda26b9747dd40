"""One code location name everywhere: `dg dev` and `dagster dev` from the repository root, the repository's
workspace.yaml, `oabench ui`, `dagster ... -m oabench_pipeline` and the runs `oabench run` launches. Dagster
keeps sensor and schedule state per location name: two names would be two sets of states, each start of one
removing the other's."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster._core.workspace.load_target import ModuleTarget, WorkspaceFileTarget, get_target_from_toml_data

from oabench_pipeline import CODE_LOCATION_NAME
from oabench_pipeline.cli.ui import dg_command
from oabench_pipeline.engine.launch import definitions_target

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def at_root() -> Iterator[None]:
    """Dagster reads a working directory relative to the process's (as the CLIs do from the root)."""
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(before)


def _names(target: object) -> list[str]:
    targets = target if isinstance(target, list) else [target]
    return [origin.location_name for t in targets for origin in t.create_origins()]


def test_every_entry_point_serves_one_location_name(at_root: None) -> None:
    from dagster_dg_core.context import DgContext

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    command = dg_command(3000, "127.0.0.1")
    module = command[command.index("-m") + 1]
    names = {
        # `dagster dev` / `dagster sensor ...` from the root: [tool.dagster] comes before workspace.yaml.
        "dagster dev": _names(get_target_from_toml_data(pyproject)),
        "workspace.yaml": _names(WorkspaceFileTarget(paths=[str(ROOT / "workspace.yaml")])),
        # `dg dev` from the root: dg's project config, which otherwise names the location after the folder.
        "dg dev": [DgContext.for_project_environment(ROOT, {}).code_location_name],
        "oabench ui": _names(ModuleTarget(module, None, str(ROOT), None)),
        "dagster asset materialize -m oabench_pipeline": _names(
            ModuleTarget("oabench_pipeline", None, str(ROOT), None)
        ),
        "oabench run": _names(definitions_target()),
    }
    assert names == {entry: [CODE_LOCATION_NAME] for entry in names}
