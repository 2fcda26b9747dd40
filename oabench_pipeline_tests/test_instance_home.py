"""A DAGSTER_HOME that cannot hold the instance is one line naming DAGSTER_HOME, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main


def run_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: str | None) -> tuple[int, str]:
    """`oabench status` over a warehouse folder that exists (with none, a read opens no instance at all)."""
    if not (tmp_path / "warehouse").exists():
        (tmp_path / "warehouse").mkdir()
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    if home is None:
        monkeypatch.delenv("DAGSTER_HOME", raising=False)
    else:
        monkeypatch.setenv("DAGSTER_HOME", home)
    result = CliRunner().invoke(main, ["status", "--editions", "44"])
    return result.exit_code, result.output


def test_home_that_cannot_be_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, output = run_status(monkeypatch, tmp_path, str(blocker / "dagster_home"))
    assert code == 1
    assert output.startswith(f"Error: DAGSTER_HOME {blocker / 'dagster_home'} is not a writable folder")
    assert len(output.strip().splitlines()) == 1


def test_default_home_inside_an_unusable_warehouse_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With DAGSTER_HOME unset it lives in the warehouse folder: the message says so."""
    (tmp_path / "warehouse").write_text("a file where the warehouse folder should be")
    code, output = run_status(monkeypatch, tmp_path, None)
    assert code == 1
    assert "DAGSTER_HOME (unset: defaults to <warehouse folder>/dagster_home)" in output
    assert "is not a writable folder" in output and len(output.strip().splitlines()) == 1


def test_read_only_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes through read-only permissions; the unusable-folder cases cover the path")
    home = tmp_path / "dagster_home"
    home.mkdir()
    home.chmod(0o555)
    try:
        code, output = run_status(monkeypatch, tmp_path, str(home))
    finally:
        home.chmod(0o755)
    assert code == 1 and f"DAGSTER_HOME {home} is not a writable folder" in output


def test_relative_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, output = run_status(monkeypatch, tmp_path, "relative/home")
    assert code == 1
    assert output.strip() == "Error: DAGSTER_HOME 'relative/home' must be an absolute path"


def test_unreadable_instance_storage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The folder is fine but its storage does not open: one line, then `status` shows what the warehouse
    tells (a command that must write runs, `oabench run`, stops at that one line)."""
    home = tmp_path / "dagster_home"
    (home / "history" / "runs.db").mkdir(parents=True)  # a folder where SQLite expects its file
    (tmp_path / "warehouse").mkdir()
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    result = CliRunner().invoke(main, ["status", "--editions", "44"])
    assert result.exit_code == 1  # cells not complete
    assert result.stderr.startswith(f"DAGSTER_HOME {home}: cannot open the Dagster instance (")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "edition not ingested" in result.stdout
