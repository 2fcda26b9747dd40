"""Runs the instance says are in progress although no live process executes them: told apart and closed.

A run is STARTING, STARTED or CANCELING in the instance until its own process says otherwise; killed with
SIGKILL (a process-group kill, the OOM killer) it never does. Dagster's run monitoring closes such runs from
the daemon (`run_monitoring` in the instance's `dagster.yaml`), but only with a timeout and only while a daemon
runs (`oabench ui`); `oabench run` and `oabench status` run without one. So they ask here, run by run, whether
a live process holds it, and close those none holds as run monitoring would, failed (or canceled for a run
that was being canceled), through `shared/dagster_internals.py`: the run queue and the pools stop counting it.

A run's process is known from, in this order:
- the cell's lock (`inference/cell_lock.py`): held, its holder is alive, whatever else is said; free with a
  holder record naming the run, that run's process died holding it;
- on this host, its PID: `oabench/pid` with `oabench/host` (the `inferences` step and in-process runs tag
  them), or, for a run `oabench run` launched here through the default run launcher (`oabench/launcher-host`),
  the PID Dagster's run worker records when it starts ("Started process for run"). A zombie is dead: it
  exited, and only its parent has not reaped it;
- a run whose worker never started: dead once the code server that launched it refuses connections
  (Dagster's `.dagster/grpc_info` tag), or once the `oabench` command that launched it
  (`oabench/launcher-pid`) is gone.
Runs of other hosts, or of no known process (a UI backfill's run before its worker starts), are left to run
monitoring.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    RunsFilter,
)

from oabench_pipeline.inference.cell_lock import cell_lock_path, is_held, read_holder
from oabench_pipeline.inference.interrupts import STOP_FILE_TAG
from oabench_pipeline.shared import dagster_internals
from oabench_pipeline.shared.run_tags import HOST_TAG, PID_TAG

LAUNCHER_PID_TAG = "oabench/launcher-pid"  # the `oabench` command that launched the run,
LAUNCHER_HOST_TAG = "oabench/launcher-host"  # and its host
PARTITION_TAG = "dagster/partition"
IN_PROGRESS = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
WORKER_START_GRACE_S = 30.0
"""How long a launched run may go without its worker's PID before its launcher's death means it never
started: the worker records its PID within a second of being spawned."""

ProcessState = Literal["live", "zombie", "gone"]


def process_state(pid: int) -> ProcessState:
    """Whether `pid` is a live process of this host, a zombie (exited, not yet reaped), or gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return "gone"
    except OSError:  # no /proc (macOS): a zombie cannot be told from a live process there
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "gone"
        except PermissionError:
            return "live"
        return "live"
    # "pid (comm) S ...": the state follows the last ')', since comm may hold spaces and parentheses.
    fields = stat.rpartition(")")[2].split()
    return "zombie" if fields and fields[0] in ("Z", "X", "x") else "live"


@dataclass(frozen=True)
class DeadRun:
    run: DagsterRun
    why: str
    """Its process, and what became of it, for the run's failure message (`its process (PID 123) died`)."""


def why_dead(instance: DagsterInstance, run: DagsterRun, warehouse_root: Path | None) -> str | None:
    """Why no live process can finish `run` (in progress in the instance), or None: it may still be alive."""
    holder_verdict = _lock_verdict(run, warehouse_root)
    if holder_verdict is not None:
        return holder_verdict or None
    here = socket.gethostname()
    pid = _tagged_pid(run.tags.get(PID_TAG)) if run.tags.get(HOST_TAG) == here else None
    # Launched here by `oabench run` through the default run launcher: its worker is a process of this
    # host, whose PID Dagster records (with Docker's or Kubernetes' it is a container's, not ours to check).
    launched_here = run.tags.get(LAUNCHER_HOST_TAG) == here and dagster_internals.launches_local_processes(
        instance
    )
    if pid is None and launched_here:
        pid = worker_pid(instance, run.run_id)
    if pid is not None:
        state = process_state(pid)
        if state == "live":
            return None
        if state == "zombie":
            return f"its process (PID {pid}) died: it is a zombie its parent never reaped"
        return f"its process (PID {pid}) died without ending the run"
    if not launched_here:
        return None
    if code_server_gone(run.tags):
        return "its process never started: the code server that launched it is gone"
    launcher = _tagged_pid(run.tags.get(LAUNCHER_PID_TAG))
    if launcher is None or process_state(launcher) == "live":
        return None
    record = instance.get_run_record_by_id(run.run_id)
    created = record.create_timestamp.timestamp() if record is not None else 0.0
    if time.time() - created < WORKER_START_GRACE_S:
        return None
    return f"its process never started, and the oabench command that launched it (PID {launcher}) died"


def _lock_verdict(run: DagsterRun, warehouse_root: Path | None) -> str | None:
    """What the cell's lock says of `run`: "" alive (it holds the lock), a reason (it died holding it), or
    None (the lock says nothing of this run)."""
    cell = run.tags.get(PARTITION_TAG, "")
    edition, sep, model_key = cell.partition("|")
    if warehouse_root is None or not sep:
        return None
    lock = cell_lock_path(warehouse_root, model_key, edition)
    holder = read_holder(lock)
    if holder is None or holder.run_id != run.run_id:
        return None
    if is_held(lock):
        return ""
    # Free with the record still there: the holder died holding it (a clean release deletes the record
    # first). Read again, in case the holder had just taken the lock between the two reads.
    if read_holder(lock) != holder or is_held(lock):
        return ""
    return f"its process ({holder.describe()}) died holding the cell's lock"


def code_server_gone(tags: Mapping[str, str]) -> bool:
    """Whether the code server that launched the run (the `.dagster/grpc_info` tag Dagster's default run
    launcher sets before starting it) refuses connections on this host: no worker of it can still start."""
    info = dagster_internals.launching_code_server(tags)
    if info is None:
        return False
    try:
        if info.get("socket"):
            with socket.socket(socket.AF_UNIX) as probe:
                probe.settimeout(1.0)
                probe.connect(str(info["socket"]))
        elif info.get("port") and info.get("host") in ("localhost", "127.0.0.1", "::1"):
            socket.create_connection((str(info["host"]), int(info["port"])), timeout=1.0).close()
        else:
            return False  # another host's: not ours to tell
    except (FileNotFoundError, ConnectionRefusedError):
        return True
    except (OSError, ValueError):
        return False
    return False


def _tagged_pid(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def worker_pid(instance: DagsterInstance, run_id: str) -> int | None:
    """The PID Dagster's run worker recorded when it started ("Started process for run (pid: N)")."""
    return dagster_internals.run_worker_pid(instance, run_id)


def dead_runs(
    instance: DagsterInstance, warehouse_root: Path | None, runs: Iterable[DagsterRun] | None = None
) -> list[DeadRun]:
    """The runs in progress (or those of `runs`) that no live process can finish."""
    if runs is None:
        runs = instance.get_runs(RunsFilter(statuses=IN_PROGRESS))
    dead = []
    for run in runs:
        if run.status in IN_PROGRESS and (why := why_dead(instance, run, warehouse_root)):
            dead.append(DeadRun(run, why))
    return dead


def close(instance: DagsterInstance, dead: DeadRun) -> None:
    """End a dead run in the instance: FAILURE (CANCELED when it was being canceled, or when the command that
    launched it was stopped: its process died of that Ctrl-C), saying why; any pool slot it claimed is given
    back."""
    run = instance.get_run_by_id(dead.run.run_id)
    if run is None or run.is_finished:
        return
    stop_file = run.tags.get(STOP_FILE_TAG)
    if run.status == DagsterRunStatus.CANCELING or (stop_file and Path(stop_file).is_file()):
        dagster_internals.close_run(instance, run, f"Canceled: {dead.why}.", canceled=True)
    else:
        dagster_internals.close_run(instance, run, f"{dead.why[:1].upper()}{dead.why[1:]}.", canceled=False)


def close_dead_runs(instance: DagsterInstance, warehouse_root: Path | None) -> list[DeadRun]:
    """Close every run in progress that no live process can finish; the runs closed."""
    dead = dead_runs(instance, warehouse_root)
    for each in dead:
        close(instance, each)
    return dead


def closed_line(closed: list[DeadRun]) -> str:
    """One line for the runs closed (for the command's output)."""
    shown = ", ".join(
        f"{d.run.run_id[:8]} ({d.run.tags.get(PARTITION_TAG) or d.run.job_name})" for d in closed[:5]
    )
    more = f" and {len(closed) - 5} more" if len(closed) > 5 else ""
    return f"closed {len(closed)} run(s) left in progress by processes that died: {shown}{more}"
