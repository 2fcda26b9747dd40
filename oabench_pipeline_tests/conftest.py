"""Fixtures shared by the whole suite: the real exam data beside the repo, and loopback servers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oabench_pipeline_tests.servers.static_files import StaticFileServer

REPO_ROOT = Path(__file__).resolve().parents[1]

# The slowest test files of each run (`pytest --durations`), handed to the workers first so that none of them
# is left running alone at the end of a parallel run: the default run's, and those of the tests marked `slow`
# (`pytest -m slow`), which a file's other tests do not slow down. Order only: every test still runs, in its
# file's order.
SLOW_FILES_FIRST = (  # by their time in a whole default run (slowest first), but for the second
    "test_status.py",
    # Second, so that the other worker starts on it (xdist deals the first files out in turn): it needs no
    # ingested warehouse, and would otherwise wait for the one the first file's worker is building.
    "inference/test_client.py",
    "scoring/test_analysis_assets.py",
    "inference/test_run_replay.py",
    "scoring/test_import_published.py",
    "core/test_site.py",
    "automation/test_catalogue_watch.py",
    "exams/test_bad_sources.py",
    "core/test_site_phase2.py",
    "test_hostile_labels.py",
    "automation/test_sensors.py",
    "test_dagster_internals.py",
    "phase2/test_phase2_import.py",
    "test_stale_runs.py",
    "inference/test_batches.py",
    "test_catalogue_healing.py",
    "exams/test_archived_editions.py",
    "core/test_reports.py",
)
SLOW_MARKED_FILES_FIRST = (  # by their time in a whole `-m slow` run (slowest first)
    "test_postgres_instance.py",
    "inference/test_faults.py",
    "inference/test_run_safety.py",
    "phase2/test_phase2_batch.py",
    "inference/test_run_signals.py",
    "inference/test_disk_full.py",
    "test_damaged_partitions.py",
    "automation/test_downstream.py",
    "inference/test_crash_safety.py",
    "test_browser.py",
    "inference/test_budget_and_fatal.py",
    "automation/test_catalogue_watch.py",
    "test_status.py",
    "inference/test_run_batch.py",
    "inference/test_run_batch_rounds.py",
    "inference/test_cli_run.py",
    "inference/test_launch_failures.py",
    "phase2/test_phase2_replay.py",
    "inference/test_real_endpoints.py",
    "test_site_publishing.py",
    "inference/test_batch_watch_budget.py",
    "phase2/test_phase2_status.py",
    "exams/test_dagster_clis.py",
    "phase2/test_phase2_cost_ceiling.py",
    "test_failing_cells.py",
    "inference/test_capacity.py",
    "inference/test_secrets.py",
    "inference/test_empty_answers.py",
    "automation/test_end_to_end.py",
    "inference/test_concurrent_backfill.py",
    "inference/test_batch_openai_and_cancel.py",
    "scoring/test_runs_as_replicates.py",
)


RAM_DISK = Path("/dev/shm")
RAM_NEEDED = 2 * 1024**3  # bytes free; a container's default /dev/shm (64 MB) is far too small


def pytest_configure(config: pytest.Config) -> None:
    _interruptible_children()
    _scratch_in_ram(config)
    _registries_of_their_own()


def _registries_of_their_own() -> None:
    """A test that sets OABENCH_MODELS_FILE means that file to be the whole registry: the packaged models
    (the study's and the baselines) are left out, as `OABENCH_PACKAGED_MODELS=off` does for users. Set
    once for the session (each worker and every child process inherits it, fixtures of any scope see it);
    the tests of the packaged models added to a user's file unset it."""
    os.environ.setdefault("OABENCH_PACKAGED_MODELS", "off")


def _interruptible_children() -> None:
    """SIGINT handled as Python's default, even when pytest was started with it ignored (`pytest &` in a
    script, a CI runner): each in-process Dagster run maps SIGTERM to SIGINT's handler when it ends
    (`dagster._utils.interrupts.capture_interrupts`), so an ignored SIGINT became an ignored SIGTERM, and
    every child started after that (an `oabench` under test, a lock holder, a code server) inherited it:
    `terminate()` did nothing and the suite hung. Runs in the xdist controller and in each worker."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _scratch_in_ram(config: pytest.Config) -> None:
    """Scratch space in RAM where the machine has one (Linux's /dev/shm), unless the user chose a place.

    Every warehouse, DAGSTER_HOME and server folder of the suite is scratch. On disk, the suite spends a
    fifth of its wall time waiting for fsyncs (the Dagster instance's SQLite commits one per event, the
    response log one per answer): 157 s against 128 s in RAM on the 2-core CI machine. No test depends on
    the data reaching a disk: a SIGKILL loses a process, not the page cache, and the disk-full test mounts
    a tmpfs of its own. Runs in the xdist controller, before any temp folder exists; the workers and every
    child process inherit TMPDIR, and `--basetemp` or an exported TMPDIR still win. Passed tests' folders
    are removed as they end (`tmp_path_retention_policy` in pyproject.toml), so little RAM stays in use.
    """
    if config.option.basetemp or "TMPDIR" in os.environ or "PYTEST_XDIST_WORKER" in os.environ:
        return
    if RAM_DISK.is_dir() and os.access(RAM_DISK, os.W_OK) and shutil.disk_usage(RAM_DISK).free >= RAM_NEEDED:
        os.environ["TMPDIR"] = str(RAM_DISK)
        tempfile.tempdir = None  # `tempfile.gettempdir()` (and pytest's temp root) reads TMPDIR again


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        first = SLOW_MARKED_FILES_FIRST if item.get_closest_marker("slow") else SLOW_FILES_FIRST
        ranks = [i for i, name in enumerate(first) if path.endswith("oabench_pipeline_tests/" + name)]
        return ranks[0] if ranks else len(first)

    items.sort(key=rank)  # stable: the files and tests keep their order otherwise


def shared_oab_dir() -> Path:
    """`../shared/oab` beside the repo (or `$OABENCH_SHARED_DIR/oab`): real PDFs and published runs, read-only."""
    base = Path(os.environ.get("OABENCH_SHARED_DIR", REPO_ROOT.parent / "shared"))
    return (base / "oab").resolve()


def pinned_archive_entries() -> dict[int, dict[str, Any]]:
    """`archive-manifest.json`'s entries for the editions the registry pins, by edition.

    Shared data may hold more editions than the registry pins (an edition is added to `../shared` before the
    registry pins it): tests of the shared data take the pinned ones, so they never fail only because shared
    grew. `unpinned_archive_editions()` names the others.
    """
    from oabench_pipeline.core.editions import load_editions

    pinned = {e.edition for e in load_editions()}
    return {number: entry for number, entry in _archive_entries().items() if number in pinned}


def unpinned_archive_editions() -> list[int]:
    """The editions `../shared` archives that the registry does not pin (yet)."""
    from oabench_pipeline.core.editions import load_editions

    pinned = {e.edition for e in load_editions()}
    return sorted(set(_archive_entries()) - pinned)


def _archive_entries() -> dict[int, dict[str, Any]]:
    manifest = json.loads((shared_oab_dir() / "archive-manifest.json").read_text(encoding="utf-8"))
    return {entry["edition"]: entry for entry in manifest["editions"]}


@pytest.fixture(autouse=True)
def _no_dagster_state_from_an_earlier_test() -> Iterator[None]:
    """Each test starts with no "current definitions-state storage".

    Dagster keeps it in a context variable that an instance's exit can leave pointing at the disposed
    instance; a later test in the same process that builds a repository then fails with "undefined
    DagsterInstance weakref" (which test comes later depends on how the files are spread over workers).
    """
    if "dagster" not in sys.modules:  # nothing to reset, and pure tests need not import Dagster
        yield
        return
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield


@pytest.fixture(scope="session")
def shared_oab() -> Path:
    path = shared_oab_dir()
    if not (path / "manifest.json").is_file():
        pytest.fail(f"real exam data not found at {path}: ../shared/oab must sit beside the repository")
    return path


@pytest.fixture(scope="session")
def manifest(shared_oab: Path) -> dict[str, Any]:
    return json.loads((shared_oab / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def mirror_server(shared_oab: Path) -> Iterator[StaticFileServer]:
    """`../shared/oab/mirror` served on 127.0.0.1: an offline stand-in for the official file host."""
    with StaticFileServer(shared_oab / "mirror") as server:
        yield server


@pytest.fixture(scope="session")
def ingested_template(tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer) -> Path:
    """A warehouse with the study's three real editions ingested once per test session; tests copy it (`fresh_env`).

    Once for all pytest-xdist workers, not once per worker (`session_templates.built_once`). What is copied
    from it (exam tables and PDFs, `copy_ingested`) names no server or worker.
    """
    from oabench_pipeline_tests.session_templates import built_once

    return built_once(tmp_path_factory, "ingested_template", lambda root: _ingest(root, mirror_server))


def _ingest(root: Path, mirror_server: StaticFileServer) -> Path:
    """`oabench ingest` of the study's three editions from the mirror into a pipeline environment at `root`;
    its warehouse folder. (The registry knows 33 editions; the suite's tests are written against these
    three, the archived ones have tests of their own.)"""
    from oabench_pipeline_tests.pipeline_env import STUDY_EDITIONS, make_env

    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, mirror_server.base_url)
        result = env.cli("ingest", "--editions", STUDY_EDITIONS)
        assert result.exit_code == 0, result.output
        return env.settings.warehouse_path.parent


@pytest.fixture
def fresh_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ingested_template: Path, mirror_server: StaticFileServer
):
    """A private pipeline environment whose warehouse already holds the ingested editions."""
    from oabench_pipeline_tests.pipeline_env import copy_ingested, make_env

    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_ingested(ingested_template, env.settings.warehouse_path.parent)
    return env
