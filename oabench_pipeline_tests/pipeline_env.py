"""A throwaway pipeline environment: warehouse, DAGSTER_HOME and sources in a temporary folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from oabench_pipeline.cli import main
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse


@dataclass
class PipelineEnv:
    root: Path
    monkeypatch: pytest.MonkeyPatch

    @property
    def settings(self) -> Settings:
        return Settings.from_env()

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.settings.warehouse_path)

    def set(self, name: str, value: str | Path) -> None:
        self.monkeypatch.setenv(name, str(value))

    def cli(self, *args: str) -> Result:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)


def make_env(root: Path, monkeypatch: pytest.MonkeyPatch, source_base_url: str) -> PipelineEnv:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(root / "warehouse" / "oabench.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    monkeypatch.setenv("OABENCH_SOURCE_BASE_URL", source_base_url)
    for name in ("OABENCH_RAW_DIR", "OABENCH_EDITIONS_FILE", "OABENCH_MODELS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return PipelineEnv(root, monkeypatch)
