"""Runs launched from the UI or the daemon execute their steps in-process, like `oabench run`.

The UI launches an asset backfill through the implicit asset jobs and sensors through the named jobs; each
must resolve, with no run config, to in-process execution, not Dagster's multiprocess default (a subprocess
per step). docs/ui.md's explicit `{"in_process": {}}` config must stay valid, and `multiprocess` available.
"""

from __future__ import annotations

from dagster import Shape
from dagster._config import process_config

from oabench_pipeline.definitions import defs, in_process_by_default_executor


def test_every_job_executes_its_steps_in_process() -> None:
    jobs = defs.get_repository_def().get_all_jobs()
    names = {job.name for job in jobs}
    # The sensors' jobs and the implicit asset jobs the UI's "Materialize" and backfills use.
    assert {"run_inference_cell", "ingest_edition"} <= names
    assert any(name.startswith("__ASSET_JOB") for name in names)
    for job in jobs:
        assert job.executor_def is in_process_by_default_executor, job.name
    # `execution: config:` as Dagster resolves it for a run.
    execution = Shape({"config": in_process_by_default_executor.config_field})
    # What a run launched with no config (a UI backfill, a sensor's run request) executes with.
    assert process_config(execution, {}).value["config"].keys() == {"in_process"}  # type: ignore[index]
    for explicit in ({"in_process": {}}, {"multiprocess": {"max_concurrent": 2}}):
        resolved = process_config(execution, {"config": explicit})
        assert resolved.success and resolved.value["config"].keys() == explicit.keys()  # type: ignore[index]
