"""The cell lock on its own: held across processes, freed by the kernel when its holder is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from oabench_pipeline.inference.cell_lock import (
    CellLock,
    LockHolder,
    LockWaitStopped,
    cell_lock_path,
    is_held,
    read_holder,
)

HOLD_AND_SLEEP = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from oabench_pipeline.inference.cell_lock import CellLock
    lock = CellLock(Path(sys.argv[1]), run_id="run-of-the-child")
    lock.acquire()
    print("held", flush=True)
    time.sleep(600)
    """
)


def hold_in_child(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_AND_SLEEP, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def test_the_path_keeps_model_keys_in_one_folder_level(tmp_path: Path) -> None:
    assert cell_lock_path(tmp_path, "openai/gpt-5.2:high", "43") == (
        tmp_path / "locks" / "openai%2Fgpt-5.2%3Ahigh" / "43.lock"
    )


def test_a_second_holder_waits_and_can_give_up(tmp_path: Path) -> None:
    path = cell_lock_path(tmp_path, "acme/m", "45")
    assert not is_held(path)  # no file yet: nothing created by asking
    assert not path.parent.exists()
    child = hold_in_child(path)
    try:
        assert is_held(path)
        waited: list[LockHolder | None] = []
        polls = iter(range(3))
        with pytest.raises(LockWaitStopped, match="interrupted"):
            CellLock(path).acquire(
                waited.append, lambda: "interrupted (SIGINT)" if next(polls, 2) == 2 else None
            )
        assert len(waited) == 1 and waited[0] is not None
        assert (waited[0].pid, waited[0].run_id) == (child.pid, "run-of-the-child")
        assert "PID" in waited[0].describe() and "run-of-t" in waited[0].describe()
    finally:
        child.terminate()
        child.wait()


def test_a_killed_holder_frees_the_lock_and_is_reported_as_stale(tmp_path: Path) -> None:
    path = cell_lock_path(tmp_path, "acme/m", "45")
    child = hold_in_child(path)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert not is_held(path)
    lock = CellLock(path, run_id="next")
    stale = lock.acquire()  # at once: the kernel released the dead holder's lock
    assert stale is not None and stale.pid == child.pid and stale.run_id == "run-of-the-child"
    mine = read_holder(path)
    assert mine is not None and (mine.pid, mine.run_id) == (os.getpid(), "next")
    assert is_held(path)
    lock.release()
    assert read_holder(path) is None and not is_held(path)
    clean = CellLock(path)
    assert clean.acquire() is None  # a clean release leaves nothing stale behind
    clean.release()
