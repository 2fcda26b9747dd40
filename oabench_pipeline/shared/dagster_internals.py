"""The one door to Dagster's private names and undocumented calls.

Everything else in the package uses Dagster's documented API. What is here is what `oabench run` needs to
launch a run of a code location from Python, follow it and close it when its process died, and Dagster
documents no public way to do: each function names the Dagster API it wraps and why no public one serves.
`oabench_pipeline_tests/test_dagster_internals.py` calls each one against the installed Dagster, so an upgrade
that changes one fails there, with its name; the same file fails when a module outside this one imports
`dagster._`. The list, with the reasons: docs/design/dagster-internals.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagster import (
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    DagsterRun,
    DefaultRunLauncher,
    QueuedRunCoordinator,
)
from dagster._core.errors import (
    DagsterLaunchFailedError,
    DagsterUserCodeProcessError,
    DagsterUserCodeUnreachableError,
)
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget

if TYPE_CHECKING:
    from dagster._core.remote_representation.code_location import CodeLocation
    from dagster._core.remote_representation.external import RemoteJob, RemoteRepository
    from dagster._core.snap import ExecutionPlanSnapshot
    from dagster._core.workspace.context import BaseWorkspaceRequestContext

GRPC_INFO_TAG = ".dagster/grpc_info"
"""The tag Dagster's default run launcher sets on a run before starting it: the code server that starts it."""

FAILED_FROM_OUTSIDE = "This run has been marked as failed from outside the execution context."
"""`DagsterInstance.report_run_failed`'s message when given none (a run failed by the code server or the
daemon, not by its own process)."""

CRASH_CLAUSES = ("was terminated by signal", "unexpectedly exited with code")
"""How the code server words a run worker's end in its engine event (`dagster._utils.
get_run_crash_explanation`): the clause, then the signal's name or the exit code."""


class CodeLocationLoadError(RuntimeError):
    """The definitions did not load in Dagster's code server: its message, in one line."""


class CodeServerError(RuntimeError):
    """Dagster's code server did not do what was asked (unreachable, timed out after
    `DAGSTER_GRPC_TIMEOUT_SECONDS`, or refused): its message, in one line; `timed_out` when it took too long."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@contextmanager
def _code_server_errors() -> Iterator[None]:
    """Dagster's errors of a call to the code server as one `CodeServerError`.

    Catches `dagster._core.errors`' `DagsterUserCodeUnreachableError` (gRPC unavailable or past its
    deadline), `DagsterLaunchFailedError` (the server refused the run) and `DagsterUserCodeProcessError`.
    Why: none of the three is public, and a launch that fails must end one cell, not the command.
    """
    try:
        yield
    except (DagsterUserCodeUnreachableError, DagsterLaunchFailedError, DagsterUserCodeProcessError) as error:
        info = getattr(error, "serializable_error_info", None)
        message = str(error) if str(error) not in ("", "None") else getattr(info, "message", "") or ""
        text = " ".join(f"{type(error).__name__}: {message}".split())[:300]
        raise CodeServerError(text, timed_out="timed out" in message) from error


@dataclass(frozen=True)
class LoadedLocation:
    """A code location loaded by Dagster into a code server of its own, ready to launch runs of."""

    workspace: BaseWorkspaceRequestContext
    location: CodeLocation
    repository: RemoteRepository


def module_target(module_name: str, location_name: str, working_directory: str) -> ModuleTarget:
    """The code location `location_name` served from the Python module `module_name`, as `dagster ... -m
    MODULE` names it.

    Wraps `dagster._core.workspace.load_target.ModuleTarget`. Why: `loaded_code_location` needs a load
    target, and Dagster has no public Python name for one.
    """
    return ModuleTarget(
        module_name=module_name,
        attribute=None,
        working_directory=working_directory,
        location_name=location_name,
    )


@contextmanager
def loaded_code_location(instance: DagsterInstance, target: ModuleTarget) -> Iterator[LoadedLocation]:
    """The code location of `target` loaded in a code server Dagster starts (as `dagster job launch -m
    MODULE` does), stopped on exit. Raises `CodeLocationLoadError`.

    Wraps `dagster._core.workspace.context.WorkspaceProcessContext`, its `create_request_context()`,
    `code_locations`, `get_code_location_error()` and the location's `get_repositories()`. Why:
    `DagsterInstance.launch_run` needs a workspace holding the run's code location, and Dagster has no
    public Python API to load one (only its command lines and the UI do).
    """
    with WorkspaceProcessContext(instance, target, code_server_log_level="WARNING") as process:
        workspace = process.create_request_context()
        error = workspace.get_code_location_error(target.location_name or "")
        if error is not None:
            raise CodeLocationLoadError(
                f"the definitions did not load in Dagster's code server: {error.message}"
            )
        (location,) = workspace.code_locations
        (repository,) = location.get_repositories().values()
        yield LoadedLocation(workspace, location, repository)


def remote_job(loaded: LoadedLocation, job_name: str) -> RemoteJob:
    """The code server's view of the job `job_name` (its snapshot, tags and origins).

    Wraps `RemoteRepository.get_full_job`. Why: a run created for a code server must carry the server's
    job snapshot and origins; the public `JobDefinition` of this process has neither.
    """
    return loaded.repository.get_full_job(job_name)


def execution_plan_snapshot(
    loaded: LoadedLocation, job: RemoteJob, run_config: Mapping[str, Any], instance: DagsterInstance
) -> ExecutionPlanSnapshot:
    """The job's execution plan for `run_config`, computed by the code server. Raises `CodeServerError`.

    Wraps `CodeLocation.get_execution_plan(...).execution_plan_snapshot`. Why: `create_run` stores a run's
    plan with it, and only the code location can compute it; Dagster's launch paths (UI, sensors,
    `dagster job launch`) all call this, none publicly.
    """
    with _code_server_errors():
        plan = loaded.location.get_execution_plan(
            job, dict(run_config), step_keys_to_execute=None, known_state=None, instance=instance
        )
    return plan.execution_plan_snapshot


def create_run(
    instance: DagsterInstance,
    loaded: LoadedLocation,
    job: RemoteJob,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    plan: ExecutionPlanSnapshot,
) -> str:
    """Create a run of `job` in the instance (NOT_STARTED), with the job's own tags under `tags`; its id.

    Wraps `DagsterInstance.create_run` and its 18 arguments (the job and plan snapshots, the remote and
    code origins, the asset graph). Why: the public ways to start a run (`execute_in_process`, a sensor's
    `RunRequest`, the GraphQL API) either run in this process or need a daemon or a web server; this is
    what `dagster job launch` does.
    """
    run = instance.create_run(
        job_name=job.name,
        run_id=None,
        run_config=dict(run_config),
        resolved_op_selection=None,
        step_keys_to_execute=None,
        op_selection=None,
        status=None,
        root_run_id=None,
        parent_run_id=None,
        tags={**job.tags, **tags},
        job_snapshot=job.job_snapshot,
        execution_plan_snapshot=plan,
        parent_job_snapshot=job.parent_job_snapshot,
        remote_job_origin=job.get_remote_origin(),
        job_code_origin=job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=loaded.repository.asset_graph,
    )
    return run.run_id


def launch_run(instance: DagsterInstance, loaded: LoadedLocation, run_id: str) -> None:
    """Hand the created run to the instance's run launcher (a process, a container, a pod).

    Wraps `DagsterInstance.launch_run(run_id, workspace)`. Why: it is what the run queue and the UI call
    once a run may start; it is not documented, and it bypasses the run queue (docs/design/run-queue.md).
    Raises `CodeServerError` when the code server did not start it; Dagster has then marked the run
    FAILURE, although a worker the server spawned before the call failed may still start (and, finding the
    run finished, end at once unless it had started executing already).
    """
    with _code_server_errors():
        instance.launch_run(run_id, loaded.workspace)


def terminate_run(instance: DagsterInstance, run_id: str) -> bool:
    """Ask the instance's run launcher to stop the run (what the UI's Terminate does); whether it could.

    Wraps `RunLauncher.terminate` on `DagsterInstance.run_launcher`. Why: the public `RunLauncher` class
    documents no method; the UI and `dagster run` reach it only through GraphQL.
    """
    return instance.run_launcher.terminate(run_id)


def launches_local_processes(instance: DagsterInstance) -> bool:
    """Whether the instance's run launcher starts each run as a process of this host (Dagster's default
    one), whose PID `run_worker_pid` then names; not a container's or a pod's.

    Reads `DagsterInstance.run_launcher`. Why: the instance documents no read of its configured launcher.
    """
    return isinstance(instance.run_launcher, DefaultRunLauncher)


def run_events(
    instance: DagsterInstance, run_id: str, of_type: set[DagsterEventType], limit: int | None = None
) -> list[DagsterEvent]:
    """The run's Dagster events of the given types, oldest first (at most `limit`).

    Wraps `DagsterInstance.get_records_for_run(...).records` and their `event_log_entry.dagster_event`.
    Why: Dagster documents no Python read of one run's event log (the UI reads it through GraphQL).
    """
    records = instance.get_records_for_run(run_id, of_type=of_type, limit=limit).records
    events = (record.event_log_entry.dagster_event for record in records)
    return [event for event in events if event is not None]


def run_worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
    """The PID of the run's worker process, as the code server recorded it when it started it.

    Reads the engine event "Started process for run (pid: N)" and its `pid` metadata
    (`EngineEventData.in_process`). Why: Dagster exposes a run's process only through that record, and
    `oabench` must tell a run whose worker died from one in progress without a daemon running.
    """
    for event in run_events(instance, run_id, {DagsterEventType.ENGINE_EVENT}, limit=20):
        data = event.engine_event_data
        value = data.metadata.get("pid") if data is not None else None
        if value is None:
            continue
        try:
            return int(str(getattr(value, "value", value)))
        except ValueError:
            continue
    return None


def launching_code_server(tags: Mapping[str, str]) -> Mapping[str, Any] | None:
    """Where the code server that launched a run listens (`socket`, or `host` and `port`), or None.

    Reads the `.dagster/grpc_info` tag Dagster's default run launcher sets. Why: a run whose worker never
    started is dead once that server is gone, and the tag is the only record of which server it was.
    """
    try:
        info = json.loads(tags.get(GRPC_INFO_TAG) or "null")
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


def process_end(message: str) -> str | None:
    """How a run's process ended, from the code server's engine event about it: "exited with code 1",
    "was terminated by signal 9 (SIGKILL)"; None when `message` says neither.

    Parses the wording of `dagster._utils.get_run_crash_explanation` (`CRASH_CLAUSES`). Why: Dagster
    records a run worker's exit code or signal only in that message.
    """
    for clause in CRASH_CLAUSES:
        if clause in message:
            ended = message[message.index(clause) :].split(". ")[0].rstrip(".")
            return ended.replace("unexpectedly exited", "exited")
    return None


def close_run(instance: DagsterInstance, run: DagsterRun, message: str, canceled: bool) -> None:
    """End a run no live process can finish: CANCELED (`canceled`) or FAILURE, saying `message`, and give
    back any pool slot it claimed.

    Wraps `DagsterInstance.report_run_canceled` / `report_run_failed` and the event log storage's
    `free_concurrency_slots_for_run`. Why: what run monitoring does from the daemon, done by a command that
    runs without one; Dagster documents none of the three.
    """
    if canceled:
        instance.report_run_canceled(run, message)
    else:
        instance.report_run_failed(run, message)
    if instance.event_log_storage.supports_global_concurrency_limits:
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)


def mark_run_failed(instance: DagsterInstance, run: DagsterRun, message: str) -> None:
    """Mark another process's run FAILURE, saying `message` (its pool slots stay until run monitoring frees
    them; `close_run` frees them at once).

    Wraps `DagsterInstance.report_run_failed`. Why: a step that finds the cell's lock left by a dead run
    says so in that run, as run monitoring would; Dagster documents no way to fail a run from outside.
    """
    instance.report_run_failed(run, message)


def mark_run_canceling(instance: DagsterInstance, run: DagsterRun, message: str) -> None:
    """Mark the run CANCELING, so that Dagster ends it CANCELED when its step fails.

    Wraps `DagsterInstance.report_run_canceling`. Why: a step stopped by a signal or the stop file is an
    interrupt, recorded as the UI's Terminate records one; the public step API can only fail the step.
    """
    instance.report_run_canceling(run, message=message)


def report_engine_event(instance: DagsterInstance, message: str, run: DagsterRun) -> None:
    """Write `message` into the run's event log as an engine event (shown in the UI's run view).

    Wraps `DagsterInstance.report_engine_event`. Why: the public loggers write only from inside a run.
    """
    instance.report_engine_event(message, run)


def add_run_tags(instance: DagsterInstance, run_id: str, tags: Mapping[str, str]) -> None:
    """Add `tags` to a run already created (the run coordinator's endpoint tag, a step's PID).

    Wraps `DagsterInstance.add_run_tags`. Why: tags are otherwise fixed when the run is requested, and
    a UI backfill's runs are requested with none of ours.
    """
    instance.add_run_tags(run_id, dict(tags))


def coordinator_instance(coordinator: QueuedRunCoordinator) -> DagsterInstance:
    """The instance a run coordinator configured in `dagster.yaml` belongs to.

    Reads `RunCoordinator._instance` (Dagster's `MayHaveInstanceWeakref`). Why: `submit_run` gets a
    `SubmitRunContext` holding the run and a workspace, not the instance; the attribute is the only way a
    coordinator reaches the instance it belongs to.
    """
    return coordinator._instance
