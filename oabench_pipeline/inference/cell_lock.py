"""One cell, one writer: a file lock per benchmark cell in the warehouse (`locks/<model key>/<edition>.lock`).

Whoever answers a cell (the `inferences` step of `oabench run`, a UI backfill, a sensor's run, on any
machine sharing the warehouse folder) holds its lock from planning what to send until the partition is
written, so two runs of one cell never send the same question: the second waits, then plans from the
response log the first one filled and sends only what is left.

The lock is `flock(2)` on the lock file, so the kernel releases it the moment its holder dies (SIGKILL, OOM,
a closed laptop lid's lost NFS lease): a killed run can never leave a lock that blocks forever. Beside it,
`<lock>.holder` says who holds it (PID, host, since when, Dagster run id), for the waiting message and for
`oabench status`. The holder removes that file before unlocking; finding it on acquiring therefore means the
previous holder died holding the lock: that stale lock is reported (`acquire` returns it) and taken over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from oabench_pipeline.core.files import write_atomically

POLL_S = 0.2


def cell_lock_path(warehouse_root: Path, model_key: str, edition: str) -> Path:
    return warehouse_root / "locks" / quote(model_key, safe="") / f"{edition}.lock"


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or held) a cell's lock."""

    pid: int
    host: str
    since: str
    run_id: str | None = None

    def describe(self) -> str:
        run = f", Dagster run {self.run_id[:8]}" if self.run_id else ""
        return f"PID {self.pid} on {self.host} (since {self.since}{run})"


class LockWaitStopped(Exception):
    """Waiting for a cell's lock was given up because the caller asked to stop (e.g. Ctrl-C)."""


def _holder_path(lock: Path) -> Path:
    return lock.with_name(lock.name + ".holder")


def read_holder(lock: Path) -> LockHolder | None:
    """The holder recorded beside `lock` (None: none recorded, or unreadable)."""
    try:
        record = json.loads(_holder_path(lock).read_text(encoding="utf-8"))
        return LockHolder(**record)
    except (OSError, ValueError, TypeError):
        return None


def is_held(lock: Path) -> bool:
    """Whether some process holds `lock` now. Read-only: creates nothing (a shared lock attempt)."""
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock, if it was taken
    return False


class CellLock:
    """The lock of one cell; `acquire` blocks until held, `release` (or leaving the `with`) gives it back."""

    def __init__(self, path: Path, run_id: str | None = None) -> None:
        self.path = path
        self.run_id = run_id
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(
        self,
        on_wait: Callable[[LockHolder | None], None] | None = None,
        should_stop: Callable[[], str | None] | None = None,
    ) -> LockHolder | None:
        """Hold the lock; returns the holder of a stale lock taken over (one that died holding it), or None.

        While another process holds it, `on_wait(holder)` is called once and `should_stop` polled every
        0.2 s: a reason from it raises `LockWaitStopped` (nothing was taken).
        """
        waiting = False
        while not self.try_acquire():
            if not waiting:
                waiting = True
                if on_wait is not None:
                    on_wait(read_holder(self.path))
            if should_stop is not None and (reason := should_stop()):
                raise LockWaitStopped(reason)
            time.sleep(POLL_S)
        stale = read_holder(self.path)
        me = LockHolder(os.getpid(), socket.gethostname(), _now(), self.run_id)
        write_atomically(_holder_path(self.path), json.dumps(asdict(me)))
        return stale

    def release(self) -> None:
        if self._fd is None:
            return
        # The record goes first: found with the lock free, it means the holder died holding it.
        with contextlib.suppress(FileNotFoundError):
            _holder_path(self.path).unlink()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> CellLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
