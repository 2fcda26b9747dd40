"""The definitions freeze the garbage collector's view of what they import only in a run worker.

Dagster's code server starts each run's worker as a `multiprocessing` (spawn) child, a process that imports
the definitions, runs one cell and exits: there `gc.freeze()` saves the traversal of everything imported
(docs/design/dagster-internals.md). Any other process importing them (a test session, the UI, the daemon)
keeps its garbage collector as it was.
"""

from __future__ import annotations

import gc
import multiprocessing


def _freeze_count_after_import() -> int:
    import oabench_pipeline.definitions  # noqa: F401

    return gc.get_freeze_count()


def _report(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(_freeze_count_after_import())


def test_importing_the_definitions_freezes_nothing_in_an_ordinary_process() -> None:
    assert _freeze_count_after_import() == 0


def test_a_run_worker_like_child_freezes_what_it_imported() -> None:
    context = multiprocessing.get_context("spawn")  # as Dagster's code server starts a run's worker
    queue = context.Queue()
    child = context.Process(target=_report, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) > 10_000  # Dagster, polars, duckdb and the definitions
    finally:
        child.join(timeout=30)
