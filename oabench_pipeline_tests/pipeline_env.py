"""A throwaway pipeline environment: warehouse, DAGSTER_HOME and sources in a temporary folder."""

from __future__ import annotations

import json
import shutil
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
    # Retries back off for milliseconds, not the default half-second and up: the tests check which
    # requests are retried and that none is paid twice, not how long the client waits (test_client.py
    # checks the backoff and Retry-After themselves).
    monkeypatch.setenv("OABENCH_MODEL_BACKOFF_S", "0.01")
    for name in ("OABENCH_RAW_DIR", "OABENCH_EDITIONS_FILE", "OABENCH_MODELS_FILE"):
        monkeypatch.delenv(name, raising=False)
    return PipelineEnv(root, monkeypatch)


EXAM_TABLES = ("editions", "source_files", "questions", "answer_keys")
# The editions of the OABench study, which most tests ingest (`--editions`; the registry holds 29).
STUDY_EDITIONS = "43-45"


def copy_ingested(template: Path, warehouse_dir: Path) -> None:
    """Copy the exam tables and raw PDFs of an ingested warehouse (not its DuckDB file or instance)."""
    for table in EXAM_TABLES:
        shutil.copytree(template / "tables" / table, warehouse_dir / "tables" / table)
    shutil.copytree(template / "raw", warehouse_dir / "raw")


def write_models_file(path: Path, entries: list[dict]) -> Path:
    """A models registry with the given `[[models]]` tables (values: str, int, float or bool)."""
    blocks = []
    for entry in entries:
        lines = ["[[models]]"]
        for name, value in entry.items():
            lines.append(f"{name} = {json.dumps(value, ensure_ascii=False)}")
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path
