"""Runs launched from the UI or the daemon execute their steps in-process, like `oabench run`.

The UI launches an asset backfill through the implicit asset jobs and sensors through the named jobs; each
must resolve, with no run config, to in-process execution, not Dagster's multiprocess default (a subprocess
per step). docs/ui.md's explicit `{"in_process": {}}` config must stay valid, and `multiprocess` available.
"""

from __future__ import annotations

import pytest
from dagster import DagsterInvalidConfigError, Shape, validate_run_config
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


def test_a_run_s_executor_config_is_resolved_and_checked_by_dagsters_executor() -> None:
    """What a run of a named job resolves to (Dagster's public `validate_run_config`): in-process with no
    config, `multiprocess` on request, and a wrong field refused by Dagster's own executor schema."""
    job = defs.resolve_job_def("refresh_models_table")
    resolved = validate_run_config(job, {})["execution"]["multi_or_in_process_executor"]
    assert resolved.keys() == {"in_process"}
    multiprocess = {"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}}
    resolved = validate_run_config(job, multiprocess)["execution"]["multi_or_in_process_executor"]
    assert resolved["multiprocess"]["max_concurrent"] == 2
    with pytest.raises(DagsterInvalidConfigError, match="max_concurrent"):
        validate_run_config(job, {"execution": {"config": {"multiprocess": {"max_concurrent": "two"}}}})
