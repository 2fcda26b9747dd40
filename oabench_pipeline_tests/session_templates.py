"""A warehouse built once per test session for every pytest-xdist worker, and only ever copied from: the
ingested states many tests start from (`ingested_template` in `conftest.py`, `phase2/ingested.py`)."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """What `build(root)` returned (a warehouse folder) the first time any worker asked for `name`.

    The first worker to ask builds it in the folder the workers share (their base temp folders' parent;
    without xdist, the session's base temp folder), under a lock the others wait on."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    root = shared / name
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the worker dies
        done = root / "ingested"  # written last: a worker that died mid-build leaves none
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)
            done.parent.mkdir(parents=True, exist_ok=True)
            warehouse = build(root)
            done.write_text(str(warehouse), encoding="utf-8")
        return Path(done.read_text(encoding="utf-8"))
