"""Commands that only read write nothing: run where there is no warehouse, they name the folder they looked
in, and `status` lists every cell missing with a cost nobody can know yet (null, not $0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A working directory outside the repository, with no warehouse and nothing naming one."""
    for name in ("OABENCH_WAREHOUSE", "DAGSTER_HOME", "OABENCH_MODELS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", [["leaderboard"], ["leaderboard", "--current-law"], ["audit-keys"]])
def test_a_read_with_no_warehouse_names_the_folder_and_writes_nothing(
    elsewhere: Path, command: list[str]
) -> None:
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: no warehouse at {elsewhere / 'warehouse'}: nothing ingested or run there yet "
        "(OABENCH_WAREHOUSE names another; `oabench ingest` creates it)"
    ]
    assert list(elsewhere.iterdir()) == []


def test_status_with_nothing_ingested_totals_an_unknown_cost_and_writes_nothing(elsewhere: Path) -> None:
    result = CliRunner().invoke(main, ["status", "--format", "json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["est_cost_usd"] is None and document["est_cost_known_usd"] == 0.0
    assert {cell["state"] for cell in document["cells"]} == {"missing"}
    assert f"no warehouse at {elsewhere / 'warehouse'}" in result.stderr
    table = CliRunner().invoke(main, ["status", "--editions", "43-45"])
    assert "est. prompt cost to complete unknown (edition(s) 43-45 not ingested" in table.stdout
    assert "$0.0000" not in table.stdout.splitlines()[-1]
    assert list(elsewhere.iterdir()) == []


def test_version() -> None:
    from importlib.metadata import version

    result = CliRunner().invoke(main, ["--version"])
    assert (result.exit_code, result.output) == (0, f"oabench {version('oabench-pipeline')}\n")
