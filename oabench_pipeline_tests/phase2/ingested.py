"""The 2nd phase ingested once per test session, for every pytest-xdist worker, and copied into each
environment that needs it: `oabench ingest --phase 2` is two in-process Dagster runs (~2.5 CPU-s for edition
39, more for all three), which each test module, or each test, paid for itself before. Two templates: edition
39 alone (the one the answering tests send) and every 2nd-phase edition (39-41, as a bare
`oabench ingest --phase 2` ingests).

Usage, at a test module's top level: `phase2_39_template = phase2_39_template_fixture()` (or
`phase2_all_template = phase2_all_template_fixture()`: a session-scoped fixture of that name), then
`copy_phase2(phase2_39_template, env)` into a fresh `make_env`. The copy is the tables and raw files only,
not the DuckDB file nor the Dagster instance, as `copy_ingested` does for the 1st phase: what is copied
names no worker, server or folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer
from oabench_pipeline_tests.session_templates import built_once

PHASE2_EDITION = "39"


def phase2_39_template_fixture() -> Callable[..., Path]:
    """The `phase2_39_template` fixture (edition 39's 2nd phase), for a test module to bind at its top level."""

    @pytest.fixture(scope="session", name="phase2_39_template")
    def template(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> Path:
        return ingested_phase2(tmp_path_factory, mirror_server, PHASE2_EDITION)

    return template


def phase2_all_template_fixture() -> Callable[..., Path]:
    """The `phase2_all_template` fixture (every 2nd-phase edition), for a test module to bind at its top
    level."""

    @pytest.fixture(scope="session", name="phase2_all_template")
    def template(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> Path:
        return ingested_phase2(tmp_path_factory, mirror_server, None)

    return template


def ingested_phase2(
    tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer, edition: str | None
) -> Path:
    """The warehouse folder of an environment where the 2nd phase of `edition` (None: every edition) was
    ingested from the mirror, once per session (`session_templates.built_once`)."""

    def ingest(root: Path) -> Path:
        with pytest.MonkeyPatch.context() as monkeypatch:
            env = make_env(root, monkeypatch, mirror_server.base_url)
            editions = ("--editions", edition) if edition else ()
            ingested = env.cli("ingest", "--phase", "2", *editions)
            assert ingested.exit_code == 0, ingested.output
            return env.settings.warehouse_path.parent

    return built_once(tmp_path_factory, f"phase2_{edition or 'all'}_template", ingest)


def copy_phase2(template: Path, env: PipelineEnv) -> None:
    """The template's tables and raw files into `env`'s (empty) warehouse folder. The DuckDB catalogue's
    marker (`tables/.views.json`) is left behind: the copy's catalogue is its own, built on first use."""
    warehouse = env.settings.warehouse_path.parent
    for table in sorted(p for p in (template / "tables").iterdir() if p.is_dir()):
        shutil.copytree(table, warehouse / "tables" / table.name)
    shutil.copytree(template / "raw", warehouse / "raw")
