"""Fixtures of the inference tests."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def stop_children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Subprocesses a test started; any still alive at its end is SIGKILLed with its process group."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
