"""Runs left in progress by processes that died are told apart from live ones and closed (`engine/stale_runs.py`),
and `oabench run` stops following a run no live process can finish (`engine/launch.py`).

Real processes (a zombie, a reaped child, this test's own), a real SQLite instance and real cell locks; the
runs are created in the instance as `oabench run` creates them, with the tags its processes add.
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter, job, op
from dagster._utils import get_run_crash_explanation

from oabench_pipeline.engine import launch, stale_runs
from oabench_pipeline.engine.launch import RunLauncher, RunStorageError, read_storage
from oabench_pipeline.engine.runs import instance_for
from oabench_pipeline.engine.stale_runs import (
    IN_PROGRESS,
    LAUNCHER_HOST_TAG,
    LAUNCHER_PID_TAG,
    close_dead_runs,
    process_state,
)
from oabench_pipeline.engine.status import last_failure
from oabench_pipeline.inference.cell_lock import CellLock, cell_lock_path
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.run_tags import HOST_TAG, PID_TAG

HERE = socket.gethostname()


@op
def _noop() -> None:
    return None


@job
def _cell_like() -> None:
    _noop()


@pytest.fixture
def instance(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[DagsterInstance]:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with instance_for(Settings.from_env()) as opened:
        yield opened


@pytest.fixture
def zombie() -> Iterator[int]:
    """A child that exited and is not reaped yet: a zombie until the fixture reaps it."""
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while process_state(child.pid) != "zombie":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    yield child.pid
    child.wait()


@pytest.fixture
def gone() -> int:
    """The PID of a process that ended and was reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def started(instance: DagsterInstance, tags: dict[str, str], status=DagsterRunStatus.STARTED) -> str:
    run = instance.create_run_for_job(_cell_like, tags=tags, status=status)
    return run.run_id


def status_of(instance: DagsterInstance, run_id: str) -> DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def test_process_state_tells_a_zombie_and_a_reaped_process_from_a_live_one(zombie: int, gone: int) -> None:
    import os

    assert process_state(os.getpid()) == "live"
    assert process_state(zombie) == "zombie"
    assert process_state(gone) == "gone"


def test_every_run_no_live_process_holds_is_closed_and_no_other(
    instance: DagsterInstance,
    tmp_path: Path,
    zombie: int,
    gone: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    warehouse = tmp_path / "warehouse"
    live = started(instance, {PID_TAG: str(os.getpid()), HOST_TAG: HERE})
    of_a_zombie = started(instance, {PID_TAG: str(zombie), HOST_TAG: HERE})
    of_a_gone_pid = started(instance, {PID_TAG: str(gone), HOST_TAG: HERE})
    canceling = started(instance, {PID_TAG: str(gone), HOST_TAG: HERE}, DagsterRunStatus.CANCELING)
    elsewhere = started(instance, {PID_TAG: str(gone), HOST_TAG: "another-host"})
    # Launched by a command that died before the run's worker started (no PID yet): STARTING forever.
    never_started = started(
        instance, {LAUNCHER_HOST_TAG: HERE, LAUNCHER_PID_TAG: str(gone)}, DagsterRunStatus.STARTING
    )
    launcher_alive = started(
        instance, {LAUNCHER_HOST_TAG: HERE, LAUNCHER_PID_TAG: str(os.getpid())}, DagsterRunStatus.STARTING
    )
    # A cell's lock: held, its run is alive whatever its PID tag says; left behind free, its run died.
    held_cell, dead_cell = ("44|acme/held", "44|acme/dead")
    holding = started(instance, {PID_TAG: str(gone), HOST_TAG: HERE, "dagster/partition": held_cell})
    lock = CellLock(cell_lock_path(warehouse, "acme/held", "44"), run_id=holding)
    lock.acquire()
    died_holding = started(instance, {"dagster/partition": dead_cell, HOST_TAG: "another-host"})
    left_behind = CellLock(cell_lock_path(warehouse, "acme/dead", "44"), run_id=died_holding)
    left_behind.acquire()
    assert left_behind._fd is not None
    os.close(left_behind._fd)  # as the kernel frees a dead holder's lock: its record stays
    monkeypatch.setattr(stale_runs, "WORKER_START_GRACE_S", 0.0)
    try:
        closed = {dead.run.run_id: dead.why for dead in close_dead_runs(instance, warehouse)}
    finally:
        lock.release()

    assert set(closed) == {of_a_zombie, of_a_gone_pid, canceling, never_started, died_holding}
    assert "zombie" in closed[of_a_zombie]
    assert f"PID {gone}" in closed[of_a_gone_pid]
    assert "never started" in closed[never_started]
    assert "died holding the cell's lock" in closed[died_holding]
    for run_id in (of_a_zombie, of_a_gone_pid, never_started, died_holding):
        assert status_of(instance, run_id) == DagsterRunStatus.FAILURE
    assert status_of(instance, canceling) == DagsterRunStatus.CANCELED
    for run_id in (live, elsewhere, launcher_alive, holding):
        assert status_of(instance, run_id) in IN_PROGRESS
    # What the run queue counts against max_concurrent_runs: only runs a live process (or another host) holds.
    assert instance.get_runs_count(RunsFilter(statuses=IN_PROGRESS)) == 4


def test_a_dead_run_s_failure_says_how_its_process_ended(instance: DagsterInstance, gone: int) -> None:
    """Dagster's code server records a crashed run worker's exit; status says that, not "failed"."""
    cell = {"dagster/partition": "44|acme/m"}
    run_id = started(instance, cell)
    run = instance.get_run_by_id(run_id)
    assert run is not None
    instance.report_engine_event(get_run_crash_explanation(f"Run execution process for {run_id}", -9), run)
    instance.report_run_failed(run)
    failure = last_failure(instance, "acme/m", "44")
    assert failure is not None
    assert failure[0] == "its process was terminated by signal 9 (SIGKILL)"

    closed_run = started(instance, {**cell, PID_TAG: str(gone), HOST_TAG: HERE})
    close_dead_runs(instance, None)
    assert status_of(instance, closed_run) == DagsterRunStatus.FAILURE
    failure = last_failure(instance, "acme/m", "44")
    assert failure is not None and failure[0] == f"Its process (PID {gone}) died without ending the run."


def test_following_a_run_whose_process_died_ends_failed(
    instance: DagsterInstance, tmp_path: Path, gone: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code server that would report the run's crash died first: the command notices by itself."""
    monkeypatch.setattr(launch, "LIVENESS_EVERY_S", 0.2)
    run_id = started(instance, {PID_TAG: str(gone), HOST_TAG: HERE})
    engine = RunLauncher(instance, defs=None, progress_folder=tmp_path / "warehouse" / "progress")  # type: ignore[arg-type]
    outcomes = []
    follower = threading.Thread(target=lambda: outcomes.append(engine.follow(run_id)), daemon=True)
    follower.start()
    follower.join(timeout=60)
    assert outcomes, "still following a run whose process is gone"
    assert outcomes[0].status == DagsterRunStatus.FAILURE
    assert f"PID {gone}" in (outcomes[0].run_failure or "")


def test_reads_of_the_run_storage_are_retried_then_fail_in_one_line(
    instance: DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = started(instance, {})
    run = instance.get_run_by_id(run_id)
    assert run is not None
    instance.report_run_failed(run, "for the test")
    real_get_runs = instance.get_runs
    failures = iter([sqlite3.OperationalError("database is locked")] * 2)

    def flaky_get_runs(*args: object, **kwargs: object) -> object:
        error = next(failures, None)
        if error is not None:
            raise error
        return real_get_runs(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(instance, "get_runs", flaky_get_runs)
    engine = RunLauncher(instance, defs=None, progress_folder=tmp_path / "progress")  # type: ignore[arg-type]
    assert engine.follow(run_id).status == DagsterRunStatus.FAILURE

    def down() -> None:
        raise sqlite3.OperationalError("database or disk is full\nand more")

    with pytest.raises(RunStorageError) as raised:
        read_storage(down, "the runs followed", retry_s=1.0)
    assert "\n" not in str(raised.value)
    assert "database or disk is full" in str(raised.value)


def test_a_stop_does_not_wait_for_a_terminate_that_hangs(
    instance: DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A code server that heard the terminal's Ctrl-C too may hold the terminate's gRPC call for a minute;
    the stop file stops the run anyway, so the command stops following after its grace, not after that."""
    import os

    run_id = started(instance, {PID_TAG: str(os.getpid()), HOST_TAG: HERE})  # alive: this process
    engine = RunLauncher(instance, defs=None, progress_folder=tmp_path / "progress")  # type: ignore[arg-type]
    released = threading.Event()
    monkeypatch.setattr(engine, "terminate", lambda run_id: released.wait(timeout=120))
    outcomes = []
    follower = threading.Thread(
        target=lambda: outcomes.append(engine.follow(run_id, stop_requested=lambda: True, stop_grace_s=0.2)),
        daemon=True,
    )
    follower.start()
    follower.join(timeout=60)
    released.set()
    assert outcomes, "the stop waited for the terminate"
    assert "still started" in (outcomes[0].run_failure or "")


def test_a_run_whose_code_server_is_gone_never_starts(instance: DagsterInstance, tmp_path: Path) -> None:
    """Killed before its worker recorded a PID: the code server named in Dagster's `.dagster/grpc_info` tag
    refusing connections means no worker of it can start, while a listening one may still start it."""
    import json
    import os

    listening, gone_socket = str(tmp_path / "listening.sock"), str(tmp_path / "gone.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(listening)
    server.listen()
    with socket.socket(socket.AF_UNIX) as closed:
        closed.bind(gone_socket)  # its file stays, nothing listens: what a killed code server leaves
    launched = {LAUNCHER_HOST_TAG: HERE, LAUNCHER_PID_TAG: str(os.getpid())}  # its command still alive
    starting = DagsterRunStatus.STARTING
    try:
        gone = started(
            instance,
            {**launched, ".dagster/grpc_info": json.dumps({"host": "localhost", "socket": gone_socket})},
            starting,
        )
        alive = started(
            instance,
            {**launched, ".dagster/grpc_info": json.dumps({"host": "localhost", "socket": listening})},
            starting,
        )
        closed_runs = {dead.run.run_id: dead.why for dead in close_dead_runs(instance, None)}
    finally:
        server.close()
    assert list(closed_runs) == [gone]
    assert "code server that launched it is gone" in closed_runs[gone]
    assert status_of(instance, alive) == DagsterRunStatus.STARTING


def test_a_launched_run_is_judged_by_the_pid_its_worker_recorded(
    instance: DagsterInstance, gone: int
) -> None:
    """Killed before its step tagged it: the PID of "Started process for run (pid: N)" tells, when the run was
    launched on this host through the default run launcher."""
    import os

    from dagster._core.events import EngineEventData

    launched = {LAUNCHER_HOST_TAG: HERE, LAUNCHER_PID_TAG: str(os.getpid())}
    dead_worker, live_worker = started(instance, launched), started(instance, launched)
    for run_id, pid in ((dead_worker, gone), (live_worker, os.getpid())):
        run = instance.get_run_by_id(run_id)
        assert run is not None
        instance.report_engine_event(
            f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid)
        )
    closed = {dead.run.run_id: dead.why for dead in close_dead_runs(instance, None)}
    assert list(closed) == [dead_worker] and f"PID {gone}" in closed[dead_worker]
    assert status_of(instance, live_worker) == DagsterRunStatus.STARTED
