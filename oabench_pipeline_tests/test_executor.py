"""Runs launched from the UI or the daemon execute their steps in-process, like `oabench run`.

The UI launches an asset backfill through the implicit asset jobs and sensors through the named jobs; each
must resolve to Dagster's in-process executor, not the multiprocess default (a subprocess per step).
"""

from __future__ import annotations

from dagster import in_process_executor

from oabench_pipeline.definitions import defs


def test_every_job_executes_its_steps_in_process() -> None:
    repo = defs.get_repository_def()
    jobs = repo.get_all_jobs()
    names = {job.name for job in jobs}
    # The sensors' jobs and the implicit asset jobs the UI's "Materialize" and backfills use.
    assert {"run_inference_cell", "ingest_edition"} <= names
    assert any(name.startswith("__ASSET_JOB") for name in names)
    for job in jobs:
        assert job.executor_def is in_process_executor, job.name
