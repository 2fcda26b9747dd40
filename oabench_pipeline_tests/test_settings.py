"""Environment variables are read in settings.py only, and a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main
from oabench_pipeline.settings import (
    DEFAULT_PORTAL_URL,
    GRPC_TIMEOUT_ENV,
    Settings,
    SettingsError,
    apply_dagster_defaults,
)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OABENCH_MODEL_TIMEOUT_S", "abc"),
        ("OABENCH_MODEL_TIMEOUT_S", "-1"),
        ("OABENCH_DOWNLOAD_TIMEOUT_S", "nan"),
        ("OABENCH_MODEL_BACKOFF_S", "-0.5"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"environment variable {name}='{value}'"):
        Settings.from_env()


def test_the_cli_says_which_variable_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("OABENCH_MODEL_TIMEOUT_S", "2 minutes")
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1
    assert "OABENCH_MODEL_TIMEOUT_S='2 minutes'" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "warehouse").exists()  # nothing half-written


def test_empty_means_unset_and_values_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OABENCH_MODEL_TIMEOUT_S", "")
    monkeypatch.setenv("OABENCH_PORTAL_URL", "")
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "w" / "oabench.duckdb"))
    monkeypatch.setenv("OABENCH_DOWNLOAD_TIMEOUT_S", "2.5")
    monkeypatch.setenv("OABENCH_MODEL_BACKOFF_S", "0")
    monkeypatch.setenv("OABENCH_AUTOMATION", "Off")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    settings = Settings.from_env()
    assert settings.model_timeout_s == 120.0
    assert settings.portal_url == DEFAULT_PORTAL_URL
    assert settings.raw_dir == tmp_path / "w" / "raw"
    assert settings.download_timeout_s == 2.5
    assert settings.model_backoff_s == 0.0
    assert settings.automation is False
    assert settings.dagster_home == str(tmp_path / "home")


def test_dagsters_grpc_timeout_gets_oabenchs_default_unless_set() -> None:
    """Dagster's 60 s for a call to its code server (a run's launch) is 300 s under `oabench`, unless set."""
    unset: dict[str, str] = {GRPC_TIMEOUT_ENV: ""}
    apply_dagster_defaults(unset)
    assert unset[GRPC_TIMEOUT_ENV] == "300"
    chosen = {GRPC_TIMEOUT_ENV: "45"}
    apply_dagster_defaults(chosen)
    assert chosen[GRPC_TIMEOUT_ENV] == "45"
    with pytest.raises(SettingsError, match=f"^{GRPC_TIMEOUT_ENV}='5 min': expected a whole number"):
        apply_dagster_defaults({GRPC_TIMEOUT_ENV: "5 min"})
