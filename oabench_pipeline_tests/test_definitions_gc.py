"""What importing the definitions costs a run worker: the garbage collector's freeze, and the libraries loaded.

Dagster's code server starts each run's worker as a `multiprocessing` (spawn) child, a process that imports
the definitions, runs one cell and exits: there `gc.freeze()` saves the traversal of everything imported
(docs/design/dagster-internals.md). Any other process importing them (a test session, the UI, the daemon)
keeps its garbage collector as it was. Every such process (~46 run workers and ~20 code servers in a default
test run) pays the definitions' imports, so what only some steps use (DuckDB, httpx, stamina, the published
runs' readers) is imported inside those steps, not with the definitions.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys

import pytest

# Imported by the steps (sensor ticks, asset bodies, resource methods) that use them, never at definition time.
LAZY_MODULES = ("duckdb", "httpx", "stamina", "tenacity", "oabench_pipeline.core.published_runs")


def _freeze_count_after_import() -> int:
    import oabench_pipeline.definitions  # noqa: F401

    return gc.get_freeze_count()


def _report(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    freeze_count = _freeze_count_after_import()
    queue.put((freeze_count, [name for name in LAZY_MODULES if name in sys.modules]))


@pytest.fixture(scope="module")
def run_worker_like_child() -> tuple[int, list[str]]:
    """(objects frozen, lazy modules loaded) in a child started as Dagster's code server starts a run's
    worker (spawn), once it has imported the definitions."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_report, args=(queue,))
    child.start()
    try:
        return queue.get(timeout=120)  # type: ignore[no-any-return]
    finally:
        child.join(timeout=30)


def test_importing_the_definitions_freezes_nothing_in_an_ordinary_process() -> None:
    assert _freeze_count_after_import() == 0


def test_a_run_worker_like_child_freezes_what_it_imported(
    run_worker_like_child: tuple[int, list[str]],
) -> None:
    frozen, _ = run_worker_like_child
    assert frozen > 10_000  # Dagster, polars and the definitions


def test_a_run_worker_imports_nothing_that_only_a_later_step_uses(
    run_worker_like_child: tuple[int, list[str]],
) -> None:
    _, loaded = run_worker_like_child
    assert loaded == []
