"""Every call of the door to Dagster's internals (`shared/dagster_internals.py`), against the installed Dagster.

A Dagster release that renames, moves or changes one of them fails here, in the test named after it. The
instance is a real one in a temporary DAGSTER_HOME, the code location the real definitions, loaded by a code
server Dagster starts; one run of `refresh_models_table` is launched through the default run launcher.
The last test keeps the door the only one: no other module of the package imports `dagster._`.
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, job, op
from dagster._core.errors import DagsterLaunchFailedError, DagsterUserCodeUnreachableError
from dagster._utils import get_run_crash_explanation

from oabench_pipeline import CODE_LOCATION_NAME
from oabench_pipeline.engine.launch import definitions_target
from oabench_pipeline.engine.runs import instance_for
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared import dagster_internals as door

PACKAGE = Path(door.__file__).resolve().parent.parent
LAUNCHED_JOB = "refresh_models_table"  # no partition, one cheap step: the models table


@op
def _noop() -> None:
    return None


@job
def _a_job() -> None:
    _noop()


@pytest.fixture(scope="module")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterInstance]:
    home = tmp_path_factory.mktemp("door")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OABENCH_WAREHOUSE", str(home / "warehouse" / "oabench.duckdb"))
        env.delenv("DAGSTER_HOME", raising=False)
        with instance_for(Settings.from_env()) as opened:
            yield opened


@pytest.fixture(scope="module")
def loaded(instance: DagsterInstance) -> Iterator[door.LoadedLocation]:
    with door.loaded_code_location(instance, definitions_target()) as location:
        yield location


@pytest.fixture(scope="module")
def launched(instance: DagsterInstance, loaded: door.LoadedLocation) -> str:
    """A run of `LAUNCHED_JOB` created and launched as `oabench run` does, followed to its end."""
    job_ = door.remote_job(loaded, LAUNCHED_JOB)
    plan = door.execution_plan_snapshot(loaded, job_, {}, instance)
    run_id = door.create_run(instance, loaded, job_, {}, {"oabench/test": "door"}, plan)
    door.launch_run(instance, loaded, run_id)
    deadline = time.monotonic() + 120
    while not _run(instance, run_id).is_finished:
        assert time.monotonic() < deadline, "the launched run never finished"
        time.sleep(0.2)
    return run_id


def _run(instance: DagsterInstance, run_id: str) -> DagsterRun:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run


def _created(instance: DagsterInstance, status: DagsterRunStatus = DagsterRunStatus.STARTED) -> DagsterRun:
    return instance.create_run_for_job(_a_job, status=status)


def test_module_target_and_loaded_code_location_serve_the_definitions(loaded: door.LoadedLocation) -> None:
    target = door.module_target("oabench_pipeline.definitions", "a_name", os.getcwd())
    assert [origin.location_name for origin in target.create_origins()] == ["a_name"]
    assert loaded.location.name == CODE_LOCATION_NAME  # what `oabench run` launches from
    assert LAUNCHED_JOB in {j.name for j in loaded.repository.get_all_jobs()}


def test_remote_job_and_execution_plan_snapshot(
    instance: DagsterInstance, loaded: door.LoadedLocation
) -> None:
    job_ = door.remote_job(loaded, LAUNCHED_JOB)
    assert job_.name == LAUNCHED_JOB and job_.job_snapshot is not None
    plan = door.execution_plan_snapshot(loaded, job_, {}, instance)
    assert [step.key for step in plan.steps] == ["models"]


def test_create_run_and_launch_run(instance: DagsterInstance, launched: str) -> None:
    run = _run(instance, launched)
    assert run.job_name == LAUNCHED_JOB
    assert run.tags["oabench/test"] == "door"  # the caller's tags, with the job's own
    assert run.status == DagsterRunStatus.SUCCESS  # the run launcher ran it in a process of its own
    # Past the run queue (docs/design/run-queue.md): no daemon runs here, and the run was never queued.
    assert not door.run_events(instance, launched, {DagsterEventType.RUN_ENQUEUED})


def test_run_events_and_run_worker_pid(instance: DagsterInstance, launched: str) -> None:
    events = door.run_events(
        instance, launched, {DagsterEventType.RUN_SUCCESS, DagsterEventType.STEP_SUCCESS}
    )
    assert [e.event_type for e in events] == [DagsterEventType.STEP_SUCCESS, DagsterEventType.RUN_SUCCESS]
    pid = door.run_worker_pid(instance, launched)
    assert pid is not None and pid != os.getpid()


def test_launching_code_server_and_local_processes(instance: DagsterInstance, launched: str) -> None:
    assert door.launches_local_processes(instance)
    info = door.launching_code_server(_run(instance, launched).tags)
    assert info is not None and (info.get("socket") or info.get("port"))
    assert door.launching_code_server({}) is None
    assert door.launching_code_server({door.GRPC_INFO_TAG: "not json"}) is None


def test_terminate_run(instance: DagsterInstance, launched: str) -> None:
    # A finished run: the launcher has nothing to stop, and says so rather than raising.
    assert door.terminate_run(instance, launched) is False


def test_process_end_reads_dagsters_crash_explanation() -> None:
    signalled = get_run_crash_explanation("Run execution process for r", -9)
    assert door.process_end(signalled) == "was terminated by signal 9 (SIGKILL)"
    assert (
        door.process_end(get_run_crash_explanation("Run execution process for r", 3)) == "exited with code 3"
    )
    assert door.process_end("Started process for run (pid: 12).") is None


def test_code_server_errors_are_one_code_server_error() -> None:
    """What `launch_run` and `execution_plan_snapshot` raise when the code server fails them (the whole path,
    a killed server: `inference/test_launch_failures.py`)."""
    timed_out = "User code server request timed out due to taking longer than 60 seconds to complete."
    with pytest.raises(door.CodeServerError) as caught, door._code_server_errors():
        raise DagsterUserCodeUnreachableError(timed_out)
    assert str(caught.value) == f"DagsterUserCodeUnreachableError: {timed_out}"
    assert caught.value.timed_out
    refused = "Tried to start a run on a server after telling it to shut down"
    with pytest.raises(door.CodeServerError) as caught, door._code_server_errors():
        raise DagsterLaunchFailedError(refused)
    assert str(caught.value) == f"DagsterLaunchFailedError: {refused}" and not caught.value.timed_out


def test_close_run_fails_or_cancels_and_frees_pool_slots(instance: DagsterInstance) -> None:
    run = _created(instance)
    storage = instance.event_log_storage
    storage.set_concurrency_slots("door_pool", 1)
    assert storage.claim_concurrency_slot("door_pool", run.run_id, "step").is_claimed
    door.close_run(instance, run, "Its process died.", canceled=False)
    assert _run(instance, run.run_id).status == DagsterRunStatus.FAILURE
    assert storage.get_concurrency_info("door_pool").active_slot_count == 0
    failures = door.run_events(instance, run.run_id, {DagsterEventType.RUN_FAILURE})
    assert [e.message for e in failures] == ["Its process died."]

    canceling = _created(instance, DagsterRunStatus.CANCELING)
    door.close_run(instance, canceling, "Canceled: gone.", canceled=True)
    assert _run(instance, canceling.run_id).status == DagsterRunStatus.CANCELED


def test_mark_run_failed_says_failed_from_outside_by_default_wording(instance: DagsterInstance) -> None:
    run = _created(instance)
    door.mark_run_failed(instance, run, "its process died")
    assert _run(instance, run.run_id).status == DagsterRunStatus.FAILURE
    # Dagster's own message for a run failed from outside, which `engine/runs.py` tells from a step's.
    silent = _created(instance)
    instance.report_run_failed(silent)
    (event,) = door.run_events(instance, silent.run_id, {DagsterEventType.RUN_FAILURE})
    assert event.message == door.FAILED_FROM_OUTSIDE


def test_mark_run_canceling(instance: DagsterInstance) -> None:
    run = _created(instance)
    door.mark_run_canceling(instance, run, "oabench: interrupted (SIGINT)")
    assert _run(instance, run.run_id).status == DagsterRunStatus.CANCELING


def test_report_engine_event_and_add_run_tags(instance: DagsterInstance) -> None:
    run = _created(instance)
    door.report_engine_event(instance, "oabench could not terminate the run", run)
    engine = door.run_events(instance, run.run_id, {DagsterEventType.ENGINE_EVENT})
    assert [e.message for e in engine] == ["oabench could not terminate the run"]
    door.add_run_tags(instance, run.run_id, {"oabench/endpoint": "offline"})
    assert _run(instance, run.run_id).tags["oabench/endpoint"] == "offline"


def test_coordinator_instance(instance: DagsterInstance) -> None:
    from oabench_pipeline.automation.run_coordinator import EndpointTaggingRunCoordinator

    coordinator = instance.run_coordinator
    assert isinstance(coordinator, EndpointTaggingRunCoordinator)  # the instance oabench writes uses it
    assert door.coordinator_instance(coordinator) is instance


def private_dagster_imports(path: Path) -> list[str]:
    """`dagster._...` modules `path` imports, at any depth (inside functions too)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [name for name in names if name.startswith("dagster._")]


def test_no_module_outside_the_door_imports_dagsters_private_names() -> None:
    assert private_dagster_imports(Path(door.__file__)), "the scan must see the door's own imports"
    outside = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != Path(door.__file__).resolve() and (found := private_dagster_imports(path))
    }
    assert outside == {}, "Dagster's private names belong in shared/dagster_internals.py"
