"""Imported at start-up by every Python process started with this folder first on PYTHONPATH
(`test_launch_failures.py`): the N-th run worker of Dagster's code server to start
(`OABENCH_TEST_KILL_CODE_SERVER_AT=N`, counted in the file `OABENCH_TEST_KILL_CODE_SERVER_COUNT`) SIGKILLs
that code server while the server still waits for it to start, as the OOM killer or a crash would.

Seen through the interpreter's own audit events, nothing replaced: a run worker connects to the instance's
SQLite storage (`sqlite3.connect`) once it has read what the server handed it, to read its run, before it
tells the server it started."""

import fcntl
import os
import signal
import sys
from pathlib import Path


def _is_code_server(pid: int) -> bool:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"api" in words and b"grpc" in words


def _count(path: str) -> int:
    """This worker's number, in the order the workers get here."""
    with open(path, "a+", encoding="utf-8") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        number = len(counter.read()) + 1
        counter.write("x")
        return number


if (at := os.environ.get("OABENCH_TEST_KILL_CODE_SERVER_AT")) and _is_code_server(os.getppid()):
    _counted = False

    def _kill_the_server_as_nth_worker(event: str, args: tuple) -> None:
        global _counted
        if _counted or event != "sqlite3.connect":
            return
        _counted = True
        if _count(os.environ["OABENCH_TEST_KILL_CODE_SERVER_COUNT"]) == int(at):
            os.kill(os.getppid(), signal.SIGKILL)

    sys.addaudithook(_kill_the_server_as_nth_worker)
