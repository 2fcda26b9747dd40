"""A pipeline environment built once per test module and handed to each test as it was built.

Building a scored warehouse costs Dagster runs and an `oabench run`; the tests that start from one only need
its state. `EnvSnapshot.take` copies the environment's whole root folder (warehouse, DAGSTER_HOME, models
file) aside once it is built; `restore` deletes the root and copies the snapshot back *at the same path*.
The same path matters: the DuckDB catalogue refuses files of another location by design (a copied
catalogue must not read the original's files), and the Dagster instance's SQLite storage lives in
DAGSTER_HOME under the root. No Dagster instance may be open on the root across a restore: each test
opens its own after it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EnvSnapshot:
    root: Path  # where the environment lives, and where each test gets it back
    saved: Path  # the copy taken once the environment was built

    @classmethod
    def take(cls, root: Path, saved: Path) -> EnvSnapshot:
        shutil.copytree(root, saved, symlinks=True)
        return cls(root, saved)

    def restore(self) -> None:
        """The root exactly as it was when the snapshot was taken, whatever the last test did to it."""
        _end_processes_using(self.root)
        _remove_tree(self.root)
        shutil.copytree(self.saved, self.root, symlinks=True)


def _end_processes_using(root: Path, within_s: float = 10.0) -> None:
    """Processes the last test left on this environment (their DAGSTER_HOME or warehouse under `root`): a
    code server whose cleanup opens the instance after its command is gone, a run's process still ending.
    Waited for, then killed. One that opened the instance while the root was copied back saw its SQLite files
    half-written and created them again: a second alembic stamp, and every later open failed ("more than
    one head"). Linux's /proc names them; elsewhere none is found."""
    deadline = time.monotonic() + within_s
    while (left := _processes_using(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _processes_using(root: Path) -> list[int]:
    marks = [f"{name}={root}{os.sep}".encode() for name in ("DAGSTER_HOME", "OABENCH_WAREHOUSE")]
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        if pid == os.getpid():
            continue
        try:
            variables = environ.read_bytes().split(b"\0")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if any(variable.startswith(mark) for variable in variables for mark in marks):
            found.append(pid)
    return found


def _remove_tree(root: Path, within_s: float = 10.0) -> None:
    """`shutil.rmtree`, again while it fails: the last test's launched cell runs end their processes a moment
    after the instance records them finished, writing their last files (compute logs, event-log files)
    meanwhile, so a folder emptied can be refilled before it is removed."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            shutil.rmtree(root)
            return
        except OSError:  # a file gone or added under it meanwhile
            if not root.exists():
                return
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
