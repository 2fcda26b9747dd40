"""Cells as runs that Dagster launches: `oabench run` hands each cell's run to the instance's run launcher,
as the UI's Launch button, a backfill or a sensor does, and follows it to its end.

The code location is this package's definitions module, loaded by Dagster into a code server of its own
(as `dagster job launch -m oabench_pipeline.definitions` loads it). Each run is created in the instance with
its job's snapshot and execution plan, its partition's tags and the caller's tags and config, then launched:
with the default launcher that is a process per run, its compute logs captured; with Docker's or
Kubernetes' launcher a container or a pod. So the UI shows the same runs, logs and states whichever way a
cell was started, and what a run does (one writer per cell, request limits across processes, the response
log) is the same code in every case.

Following a run reads only what Dagster records: its status, and its step failures and check evaluations
from the event log. Live progress comes through a small file the run writes (`inference/progress.py`).
A stop (Ctrl-C) is written at once to a file every launched run reads before each request
(`inference/interrupts.py`), then terminates every launched run through the run launcher.

Dagster has no public Python API to load a code location and launch a run of it: the private names and
undocumented calls this costs are behind one door, `shared/dagster_internals.py`.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy.exc
from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, Definitions, RunsFilter

from oabench_pipeline import CODE_LOCATION_NAME
from oabench_pipeline.engine.child_output import children_output_to
from oabench_pipeline.engine.runs import NOT_LAUNCHED, RunOutcome, run_failure_reason
from oabench_pipeline.engine.stale_runs import (
    LAUNCHER_HOST_TAG,
    LAUNCHER_PID_TAG,
    DeadRun,
    close,
    process_state,
    why_dead,
    worker_pid,
)
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.progress import PROGRESS_FILE_TAG, RelayReader
from oabench_pipeline.settings import GRPC_TIMEOUT_ENV, Settings
from oabench_pipeline.shared import dagster_internals

DEFINITIONS_MODULE = "oabench_pipeline.definitions"
PROGRESS_FOLDER = "progress"  # under the warehouse: the relay files of runs being followed, stop files
# Under the warehouse: what the code server and the runs' processes print (`engine/child_output.py`).
CODE_SERVER_LOG = Path("logs") / "code-server.log"
POLL_S = 0.5  # between looks at a launched run's status and progress
STOPPING_POLL_S = 0.1  # the same once a stop was asked: its runs end within a second or two
LIVENESS_EVERY_S = 5.0  # between looks at whether a followed run's process is still alive
START_TIMEOUT_S = 180.0  # a launched run whose worker has not started by then never will (run monitoring's)
STORAGE_RETRY_S = 60.0  # how long reads of the run storage are retried before the cell is given up
LAUNCHES_AT_ONCE = 4
"""Runs being started at once. Dagster's code server holds one of its gRPC threads (its default: CPUs + 4) for
each start until the run's process is up, a minute on a loaded 2-core machine; sixteen at once left none for
this command's heartbeat, and a server without one for 45 s shuts down, failing every launch after."""
T = TypeVar("T")


def storage_errors() -> tuple[type[BaseException], ...]:
    """What a run storage raises when it is unreachable or full: SQLite's and SQLAlchemy's errors, and
    dagster-postgres's "too many retries" when it is installed."""
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, sqlalchemy.exc.SQLAlchemyError)
    try:
        from dagster_postgres.utils import DagsterPostgresException
    except ImportError:
        return errors
    return (*errors, DagsterPostgresException)


class LaunchError(Exception):
    """A cell's run that Dagster's code server did not start (unreachable, too slow, refused): why, in one
    line. The run created for it, if any, is closed in the instance; nothing of the cell was sent."""


def _not_launched(error: dagster_internals.CodeServerError) -> str:
    hint = f" ({GRPC_TIMEOUT_ENV}={os.environ.get(GRPC_TIMEOUT_ENV, '60')})" if error.timed_out else ""
    return f"{NOT_LAUNCHED}Dagster's code server failed{hint}: {error}"


class RunStorageError(Exception):
    """The instance's run storage stayed unreadable for `STORAGE_RETRY_S`: one line saying what and why."""


def read_storage(read: Callable[[], T], what: str, retry_s: float | None = None) -> T:
    """`read()`, retried with backoff (0.5 s doubling to 5 s) while the run storage fails, for `retry_s`
    (default `STORAGE_RETRY_S`): PostgreSQL restarting or a full disk being freed is a pause, not the end of
    a command whose runs go on. Then `RunStorageError`, in one line."""
    deadline = time.monotonic() + (STORAGE_RETRY_S if retry_s is None else retry_s)
    wait = 0.5
    while True:
        try:
            return read()
        except storage_errors() as error:
            if time.monotonic() + wait > deadline:
                reason = " ".join(str(error).split())[:300]
                raise RunStorageError(
                    f"the Dagster run storage could not be read ({what}) for {retry_s or STORAGE_RETRY_S:.0f} s: "
                    f"{type(error).__name__}: {reason}"
                ) from None
            time.sleep(wait)
            wait = min(wait * 2, 5.0)


def definitions_target() -> dagster_internals.ModuleTarget:
    """The code location the cells' runs are launched from: the definitions module under the one location
    name every entry point serves (the UI lists these runs, and keeps sensor state, under it)."""
    return dagster_internals.module_target(DEFINITIONS_MODULE, CODE_LOCATION_NAME, os.getcwd())


@dataclass(frozen=True)
class RunSpec:
    """One run to launch: a job of the definitions, its partition, config and tags."""

    job: str
    partition_key: str | None = None
    run_config: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


class FollowedRuns:
    """The runs being followed, read for all of them in one query at a time: a command following sixteen
    runs asked the run storage sixteen times per poll, which was a third of its CPU."""

    def __init__(self, instance: DagsterInstance) -> None:
        self._instance = instance
        self._lock = threading.Lock()
        self._followed: set[str] = set()
        self._runs: dict[str, DagsterRun] = {}
        self._read_at = float("-inf")

    @contextmanager
    def following(self, run_id: str) -> Iterator[None]:
        with self._lock:
            self._followed.add(run_id)
            self._read_at = float("-inf")  # a run just launched is read at the next look
        try:
            yield
        finally:
            with self._lock:
                self._followed.discard(run_id)
                self._runs.pop(run_id, None)

    def run(self, run_id: str, max_age_s: float) -> DagsterRun | None:
        """`run_id` as read at most `max_age_s` ago (None: the instance has no such run). The first caller
        to find the last read too old reads every followed run again, for all callers."""
        with self._lock:
            if time.monotonic() - self._read_at >= max_age_s:
                followed = RunsFilter(run_ids=sorted(self._followed))
                runs = read_storage(lambda: self._instance.get_runs(followed), "the runs followed")
                self._runs = {run.run_id: run for run in runs}
                self._read_at = time.monotonic()
            return self._runs.get(run_id)


@dataclass(frozen=True)
class LaunchedOutcome:
    """How a launched run ended, read back from the instance."""

    run_id: str
    status: DagsterRunStatus
    step_failures: list[Any]
    """The run's STEP_FAILURE events (DagsterEvent), for `runs.step_failure_messages`/`interruption`."""
    failed_checks: list[str]
    run_failure: str | None
    """The run's own failure message when no step failed (a launch or process failure)."""

    @property
    def success(self) -> bool:
        return self.status == DagsterRunStatus.SUCCESS


class RunLauncher:
    """Launches runs of the definitions' jobs through `instance`'s run launcher; use as a context manager
    (it starts the code server on entry and stops it on exit). `progress_folder` holds the files through
    which its runs relay their progress and hear a stop."""

    def __init__(self, instance: DagsterInstance, defs: Definitions, progress_folder: Path) -> None:
        self.instance = instance
        self.progress_folder = progress_folder
        self.stop_file = progress_folder / f"{uuid.uuid4().hex}.stop"
        self.output_log = progress_folder.parent / CODE_SERVER_LOG
        self._defs = defs
        self._stack = ExitStack()
        self._plans: dict[tuple[str, str], Any] = {}
        self._plans_lock = threading.Lock()
        self._launched: set[str] = set()
        self._followed_runs = FollowedRuns(instance)
        self._launch_slots = threading.Semaphore(LAUNCHES_AT_ONCE)
        # Run id -> the PID of its worker, started although the launch call failed (`_settle_failed_launch`).
        self._late_workers: dict[str, int] = {}

    def __enter__(self) -> RunLauncher:
        self.progress_folder.mkdir(parents=True, exist_ok=True)
        _remove_old_stop_files(self.progress_folder)
        self._stack.enter_context(interrupts.announcing_stops_to(self.stop_file))
        # The code server, its runs' processes and their helpers write to `output_log`, not the terminal,
        # whose Ctrl-C they all hear (`engine/child_output.py`).
        with children_output_to(self.output_log):
            self._location = self._stack.enter_context(
                dagster_internals.loaded_code_location(self.instance, definitions_target())
            )
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def launch(self, spec: RunSpec) -> str:
        """Create the run in the instance and hand it to the run launcher; its run id. Raises `LaunchError`
        when the code server did not start it (its worker started all the same: followed as launched)."""
        job = dagster_internals.remote_job(self._location, spec.job)
        # Dagster's console logger at the command's level (WARNING unless OABENCH_LOG_LEVEL says otherwise):
        # a run's process writes to this command's terminal; the event log keeps everything for the UI.
        log_level = Settings.from_env().log_level
        run_config = {"loggers": {"console": {"config": {"log_level": log_level}}}, **spec.run_config}
        tags = {
            **self._partition_tags(spec),
            **spec.tags,
            interrupts.STOP_FILE_TAG: str(self.stop_file),
            # Who launched it, and where: a run whose worker never started is dead once this command is.
            LAUNCHER_HOST_TAG: socket.gethostname(),
            LAUNCHER_PID_TAG: str(os.getpid()),
        }
        try:
            plan = self._plan(job, run_config)
        except dagster_internals.CodeServerError as error:
            raise LaunchError(_not_launched(error)) from None
        run_id = dagster_internals.create_run(self.instance, self._location, job, run_config, tags, plan)
        self._launched.add(run_id)
        try:
            with self._launch_slots:
                dagster_internals.launch_run(self.instance, self._location, run_id)
        except dagster_internals.CodeServerError as error:
            if interrupts.requested() is not None:
                # A terminal's Ctrl-C reached the code server too, which quit: Dagster failed the run it
                # could not launch, and `follow` records it canceled, as a stop it is.
                return run_id
            self._settle_failed_launch(run_id, _not_launched(error))
        return run_id

    def _settle_failed_launch(self, run_id: str, why: str) -> None:
        """After a launch call that failed: a worker the code server started anyway (a start that took
        longer than the call's deadline) is followed like any run; else the run is closed, saying `why`, and
        `LaunchError` raised. A worker that starts later finds the run finished and ends without running it
        (Dagster's run worker checks the run's status after recording its PID, which is read here)."""
        run = read_storage(lambda: self.instance.get_run_by_id(run_id), f"run {run_id[:8]}")
        pid = read_storage(lambda: worker_pid(self.instance, run_id), f"the worker of run {run_id[:8]}")
        if run is not None and not run.is_finished and pid is None:
            dagster_internals.close_run(self.instance, run, why, canceled=False)
        elif run is not None:
            # Dagster's launch failed the run with its generic message: the line says what happened.
            dagster_internals.report_engine_event(self.instance, why, run)
        if pid is None:
            raise LaunchError(why)
        self._late_workers[run_id] = pid

    def _partition_tags(self, spec: RunSpec) -> Mapping[str, str]:
        if spec.partition_key is None:
            return {}
        partitions = self._defs.resolve_job_def(spec.job).partitions_def
        if partitions is None:
            raise ValueError(f"job {spec.job} is not partitioned: no partition {spec.partition_key!r}")
        return partitions.get_tags_for_partition_key(str(spec.partition_key))

    def _plan(self, job: Any, run_config: dict[str, Any]) -> Any:
        """The job's execution plan for this config: the same for every partition, so asked once."""
        key = (job.name, repr(sorted(run_config.items())))
        with self._plans_lock:
            if key not in self._plans:
                self._plans[key] = dagster_internals.execution_plan_snapshot(
                    self._location, job, run_config, self.instance
                )
            return self._plans[key]

    def terminate(self, run_id: str) -> None:
        """Ask the run launcher to stop the run (its process gets the interrupt a UI terminate sends). A
        launcher that cannot reach the run (its code server gone) leaves it to the stop file, which it
        reads before every request (`inference/interrupts.py`)."""
        run = self.instance.get_run_by_id(run_id)
        # CANCELING: already stopping (its step heard the stop and marked it so): asking again would set a
        # run that has just ended CANCELED back to CANCELING, and its code server would then fail it.
        if run is None or run.is_finished or run.status == DagsterRunStatus.CANCELING:
            return
        try:
            dagster_internals.terminate_run(self.instance, run_id)
        except Exception as error:  # any launcher's failure: the stop file still stops the run
            dagster_internals.report_engine_event(
                self.instance, f"oabench could not terminate the run through its run launcher: {error}", run
            )

    def follow(
        self,
        run_id: str,
        on_poll: Callable[[], None] | None = None,
        stop_requested: Callable[[], object] | None = None,
        stop_grace_s: float = 3.0,
    ) -> LaunchedOutcome:
        """Wait for the run to finish, calling `on_poll` at each look. Once `stop_requested()` is true the
        run is terminated; a run still not finished `stop_grace_s` later is left to its launcher and
        reported as it stands. Every `LIVENESS_EVERY_S` the run's process is looked at: a run no live
        process can finish (its worker killed, maybe with the code server that would have reported it) is
        closed in the instance and reported failed, instead of being followed forever."""
        stopped_at: float | None = None
        launched_at = checked_at = time.monotonic()
        with self._followed_runs.following(run_id):
            while True:
                poll_s = POLL_S if stopped_at is None else STOPPING_POLL_S
                run = self._followed_runs.run(run_id, max_age_s=poll_s)
                if on_poll is not None:
                    on_poll()
                if run is None or run.is_finished:
                    # A worker started after its launch had failed the run: it may be running it anyway.
                    late = self._late_workers.get(run_id)
                    if late is None or process_state(late) != "live":
                        break
                    time.sleep(poll_s)
                    continue
                if time.monotonic() - checked_at >= LIVENESS_EVERY_S:
                    checked_at = time.monotonic()
                    if self._closed_if_dead(run, checked_at - launched_at):
                        break
                if stop_requested is not None and stop_requested():
                    if stopped_at is None:
                        stopped_at = time.monotonic()
                        # On a thread: a code server that heard the terminal's Ctrl-C too may take the
                        # terminate's gRPC call a minute to refuse, and the stop file stops the run anyway.
                        threading.Thread(
                            target=self.terminate, args=(run_id,), name="oabench-terminate", daemon=True
                        ).start()
                    elif time.monotonic() - stopped_at > stop_grace_s:
                        self._closed_if_dead(run, time.monotonic() - launched_at)
                        break
                time.sleep(poll_s)
        if stop_requested is not None and (reason := stop_requested()):
            self._canceled_if_cut_short(run_id, str(reason))
        return self.outcome(run_id)

    def _canceled_if_cut_short(self, run_id: str, reason: str) -> None:
        """Record CANCELED a run that a stop ended FAILURE before its step could say it was interrupted.

        A terminal's Ctrl-C reaches the run's process too (it shares the terminal's process group): heard
        while the process is still starting, before any terminate marked the run canceling, Dagster ends
        the run FAILURE ("interrupted unexpectedly"), and a launch the code server could no longer take ends
        FAILURE as well. Either was this stop, and an interrupt is recorded one way: CANCELED. A run whose
        step failed for a reason of its own keeps its FAILURE."""
        try:
            run = self.instance.get_run_by_id(run_id)
            if run is None or run.status != DagsterRunStatus.FAILURE:
                return
            failures = dagster_internals.run_events(self.instance, run_id, {DagsterEventType.STEP_FAILURE})
            if all(_failed_by_interrupt(failure) for failure in failures):
                message = f"Canceled: {reason} while the run was starting."
                dagster_internals.close_run(self.instance, run, message, canceled=True)
        except storage_errors():  # it stays FAILURE; the command still reports the cell interrupted
            pass

    def _closed_if_dead(self, run: DagsterRun, followed_s: float) -> bool:
        """Close `run` in the instance when no live process can finish it (`engine/stale_runs.py`), or when
        its worker has not started `START_TIMEOUT_S` after the launch; whether it was closed. A storage error
        here skips this look: the next one asks again."""
        try:
            why = why_dead(self.instance, run, self.progress_folder.parent)
            if (
                why is None
                and run.status == DagsterRunStatus.STARTING
                and followed_s > START_TIMEOUT_S
                and worker_pid(self.instance, run.run_id) is None
            ):
                why = f"its process did not start within {START_TIMEOUT_S:.0f} s of its launch"
            if why is None:
                return False
            close(self.instance, DeadRun(run, why))
        except storage_errors():
            return False
        return True

    def outcome(self, run_id: str) -> LaunchedOutcome:
        """How the run ended, read back from the instance (retried while the run storage fails)."""
        return read_storage(lambda: self._read_outcome(run_id), f"how run {run_id[:8]} ended")

    def _read_outcome(self, run_id: str) -> LaunchedOutcome:
        run = self.instance.get_run_by_id(run_id)
        status = run.status if run is not None else DagsterRunStatus.FAILURE
        wanted = {
            DagsterEventType.STEP_FAILURE,
            DagsterEventType.ASSET_CHECK_EVALUATION,
            DagsterEventType.RUN_FAILURE,
            DagsterEventType.ENGINE_EVENT,  # how its process ended, when it crashed
        }
        events = dagster_internals.run_events(self.instance, run_id, wanted)
        failures = [e for e in events if e.is_step_failure]
        checks = []
        for event in events:
            if event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
                evaluation = event.asset_check_evaluation_data
                if not evaluation.passed:
                    partition = f" [{evaluation.partition}]" if evaluation.partition else ""
                    checks.append(
                        f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name}{partition}"
                    )
        run_failure = run_failure_reason(events)
        if run is not None and not run.is_finished:
            run_failure = (
                f"still {status.value.lower()} in the instance when this command stopped following it"
            )
        return LaunchedOutcome(run_id, status, failures, checks, None if failures else run_failure)


# How Dagster names the interrupt a step heard before its own handler was in place.
INTERRUPT_ERRORS = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")


def _failed_by_interrupt(failure: Any) -> bool:
    """Whether a STEP_FAILURE event is an interrupt: ours (`interrupts.INTERRUPTED_METADATA`) or Dagster's."""
    from oabench_pipeline.engine.runs import interruption

    error = failure.step_failure_data.error
    while error is not None and error.cause is not None:
        error = error.cause
    return interruption([failure]) is not None or (error is not None and error.cls_name in INTERRUPT_ERRORS)


def _storage_failure(error: BaseException) -> str:
    reason = " ".join(str(error).split())[:300]
    return f"the Dagster instance's storage failed: {type(error).__name__}: {reason}"


def _remove_old_stop_files(folder: Path, older_than_s: float = 86_400.0) -> None:
    """Stop files of interrupted commands (one each) outlive them for their runs; a day later no run of
    theirs is still starting."""
    for path in folder.glob("*.stop"):
        try:
            if time.time() - path.stat().st_mtime > older_than_s:
                path.unlink()
        except FileNotFoundError:
            continue


@contextmanager
def launcher(instance: DagsterInstance, defs: Definitions, warehouse_root: Path) -> Iterator[RunLauncher]:
    """A `RunLauncher` whose progress and stop files are in the warehouse's `PROGRESS_FOLDER`."""
    with RunLauncher(instance, defs, warehouse_root / PROGRESS_FOLDER) as opened:
        yield opened


class OnDemandLauncher:
    """The warehouse's `launcher`, opened by the first caller of `get` (from any thread) and closed on exit:
    a command whose cells all run in process starts no code server, a process of its own (~2.6 CPU-s)."""

    def __init__(self, instance: DagsterInstance, defs: Definitions, warehouse_root: Path) -> None:
        self._instance = instance
        self._defs = defs
        self._warehouse_root = warehouse_root
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._opened: RunLauncher | None = None

    def get(self) -> RunLauncher:
        with self._lock:
            if self._opened is None:
                opening = launcher(self._instance, self._defs, self._warehouse_root)
                self._opened = self._stack.enter_context(opening)
            return self._opened

    def __enter__(self) -> OnDemandLauncher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


def run_launched(engine: RunLauncher, spec: RunSpec) -> RunOutcome:
    """Launch `spec`, publish its progress here as it runs (`inference/progress.py` relays it from the
    run's process), and follow it to its end; a Ctrl-C here terminates it."""
    from oabench_pipeline.engine.runs import interruption, step_failure_messages

    relay = engine.progress_folder / f"{uuid.uuid4().hex}.json"
    reader = RelayReader(relay)
    tags = {**spec.tags, PROGRESS_FILE_TAG: str(relay)}
    run_id = ""
    storage_failed: tuple[type[BaseException], ...] = (RunStorageError, *storage_errors())
    try:
        run_id = engine.launch(replace(spec, tags=tags))
        launched = engine.follow(run_id, reader.poll, interrupts.requested)
    except LaunchError as error:
        # The code server did not start this cell's run: nothing was sent; the other cells go on.
        return RunOutcome(False, run_id, [str(error)], [], interrupts.requested() is not None)
    except storage_failed as error:
        # The instance's storage is down or full: this cell is given up in one line, the others go on.
        why = str(error) if isinstance(error, RunStorageError) else _storage_failure(error)
        return RunOutcome(False, run_id, [why], [], interrupts.requested() is not None)
    finally:
        relay.unlink(missing_ok=True)
    # A run that had not ended well when a stop came was stopped by it: terminated (CANCELED), or still
    # ending when this command stopped following it (a process still starting takes a while to hear).
    interrupted = interruption(launched.step_failures) is not None or (
        not launched.success and interrupts.requested() is not None
    )
    errors = step_failure_messages(launched.step_failures)
    if not errors and not launched.success:
        errors = [launched.run_failure or f"run {run_id} ended {launched.status.value.lower()}"]
        if not interrupted:  # a crash no step explains: its traceback, if any, is in the output log
            errors = [f"{errors[0]} (its process's output: {engine.output_log})"]
    return RunOutcome(launched.success, run_id, errors, launched.failed_checks, interrupted)
