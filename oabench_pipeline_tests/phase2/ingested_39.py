"""The 2nd phase of edition 39 ingested once per test session, for every pytest-xdist worker, and copied into
each environment that answers it: `oabench ingest --phase 2 --editions 39` is two in-process Dagster runs
(~2.5 CPU-s), which each test module paid for itself before.

Usage, at a test module's top level: `phase2_39_template = phase2_39_template_fixture()` (a session-scoped
fixture of that name), then `copy_phase2_39(phase2_39_template, env)` into a fresh `make_env`. The copy is
the tables and raw files only, not the DuckDB file nor the Dagster instance, as `copy_ingested` does for the
1st phase: what is copied names no worker, server or folder.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer

PHASE2_EDITION = "39"


def phase2_39_template_fixture() -> Callable[..., Path]:
    """The `phase2_39_template` fixture, for a test module to bind at its top level."""

    @pytest.fixture(scope="session", name="phase2_39_template")
    def template(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> Path:
        return ingested_phase2_39(tmp_path_factory, mirror_server)

    return template


def ingested_phase2_39(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> Path:
    """The warehouse folder of an environment where the 2nd phase of edition 39 was ingested from the mirror.

    Built by the first worker (or module) to ask, under a lock in the folder the workers share (their base
    temp folders' parent; without xdist, the session's base temp folder), and only ever copied from."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    root = shared / f"phase2_{PHASE2_EDITION}_template"
    with (shared / f"phase2_{PHASE2_EDITION}_template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the worker dies
        done = root / "ingested"  # written last: a worker that died mid-ingest leaves none
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)
            with pytest.MonkeyPatch.context() as monkeypatch:
                env = make_env(root, monkeypatch, mirror_server.base_url)
                ingested = env.cli("ingest", "--phase", "2", "--editions", PHASE2_EDITION)
                assert ingested.exit_code == 0, ingested.output
                warehouse = env.settings.warehouse_path.parent
            done.write_text(str(warehouse), encoding="utf-8")
        return Path(done.read_text(encoding="utf-8"))


def copy_phase2_39(template: Path, env: PipelineEnv) -> None:
    """The template's tables and raw files into `env`'s (empty) warehouse folder. The DuckDB catalogue's
    marker (`tables/.views.json`) is left behind: the copy's catalogue is its own, built on first use."""
    warehouse = env.settings.warehouse_path.parent
    for table in sorted(p for p in (template / "tables").iterdir() if p.is_dir()):
        shutil.copytree(table, warehouse / "tables" / table.name)
    shutil.copytree(template / "raw", warehouse / "raw")
