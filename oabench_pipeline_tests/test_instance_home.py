"""A DAGSTER_HOME that cannot hold the instance is one line naming DAGSTER_HOME, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main


def run_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: str | None) -> tuple[int, str]:
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
    home = tmp_path / "dagster_home"
    (home / "history" / "runs.db").mkdir(parents=True)  # a folder where SQLite expects its file
    code, output = run_status(monkeypatch, tmp_path, str(home))
    assert code == 1
    assert output.startswith(f"Error: DAGSTER_HOME {home}: cannot open the Dagster instance (")
    assert len(output.strip().splitlines()) == 1


def test_dynamic_partitions_are_read_once_and_reloaded_after_this_process_changes_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The CLI's instance answers partition lookups from memory (runner._cache_dynamic_partitions): a key
    added or deleted through it is seen at once; the storage is asked again only after such a change."""
    from oabench_pipeline.runner import instance_for
    from oabench_pipeline.settings import Settings

    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with instance_for(Settings.from_env()) as instance:
        storage = instance.event_log_storage
        loads: list[str] = []
        load = storage.get_dynamic_partitions
        monkeypatch.setattr(storage, "get_dynamic_partitions", lambda name: loads.append(name) or load(name))

        instance.add_dynamic_partitions("editions", ["43", "44"])
        assert instance.has_dynamic_partition("editions", "44")
        assert instance.has_dynamic_partition(partitions_def_name="editions", partition_key="44")
        assert not instance.has_dynamic_partition("editions", "45")
        assert instance.get_existing_dynamic_partitions("editions", ["43", "45"]) == {"43"}
        assert instance.get_dynamic_partitions("editions") == ["43", "44"]
        assert loads == ["editions"]

        instance.add_dynamic_partitions("editions", ["45"])
        instance.delete_dynamic_partition("editions", "43")
        assert instance.get_dynamic_partitions("editions") == ["44", "45"]
        assert not instance.has_dynamic_partition("editions", "43")
        assert loads == ["editions", "editions"]


def test_dagster_sqlite_storages_reuse_one_engine_per_database(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """After the CLI's instance is made (runner._reuse_sqlite_engines), Dagster's SQLite storages get the same
    engine back for the same database file, and the instance still reads what it wrote."""
    import importlib

    from oabench_pipeline.runner import _SQLITE_STORAGE_MODULES, instance_for
    from oabench_pipeline.settings import Settings

    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with instance_for(Settings.from_env()) as instance:
        for name in _SQLITE_STORAGE_MODULES:
            create_engine = importlib.import_module(name).create_engine
            url = f"sqlite:///{tmp_path / 'x.db'}"
            assert create_engine(url) is create_engine(url)
            assert create_engine(url) is not create_engine(f"sqlite:///{tmp_path / 'y.db'}")
        instance.add_dynamic_partitions("editions", ["43"])
        assert instance.event_log_storage.get_dynamic_partitions("editions") == ["43"]


def test_dagster_migration_scripts_are_read_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """runner._reuse_migration_scripts: one alembic ScriptDirectory per script location, and a run (whose
    event-log file Dagster creates and stamps with the head revision) still succeeds."""
    from alembic.script import ScriptDirectory
    from dagster import asset, materialize
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import get_alembic_config

    from oabench_pipeline.runner import instance_for
    from oabench_pipeline.settings import Settings

    @asset
    def one() -> int:
        return 1

    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    with instance_for(Settings.from_env()) as instance:
        config = get_alembic_config(sqlite_event_log.__file__)
        assert ScriptDirectory.from_config(config) is ScriptDirectory.from_config(
            get_alembic_config(sqlite_event_log.__file__)
        )
        result = materialize([one], instance=instance)
        assert result.success and instance.get_latest_materialization_event(one.key) is not None
