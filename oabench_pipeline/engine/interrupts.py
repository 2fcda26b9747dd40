"""Ctrl-C that stops: the first SIGINT/SIGTERM asks every sender to stop, a second one exits at once.

Why not Dagster's own handling: during a step Dagster raises its interrupt exception wherever the main
thread happens to be, and inside an asyncio event loop that exception lands in a callback, where the loop
logs and swallows it: the model calls went on. Here a signal only sets a flag that the model client polls
before every request and every retry (`requested`), so sending stops at once, the replies in flight still
land in the response log, and the step fails cleanly without writing its partition.

`oabench run` runs its Dagster work on a worker thread (`run_stoppably`): Dagster installs signal handlers
only on the main thread, so it leaves ours in place, and the main thread stays free to answer a second
Ctrl-C by exiting at once (`os._exit`: nothing is flushed, as with SIGKILL; every answer already written to
a response log is kept). A step that runs on a process's main thread (`dagster asset materialize`, a run
worker) installs the same handlers around its model calls (`stop_on_signals`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The metadata key a step's `Failure` carries when a signal stopped it: `oabench run`'s live line and
# `oabench status` then say "interrupted" (a cell to resume), not "failed" (engine/runs.interruption).
INTERRUPTED_METADATA = "oabench/interrupted"
_received: list[int] = []


def requested() -> str | None:
    """Why sending must stop ("interrupted (SIGINT)"), or None."""
    if not _received:
        return None
    return f"interrupted ({signal.Signals(_received[0]).name})"


def exit_code() -> int:
    """130 after SIGINT, 143 after SIGTERM (128 + the signal's number), as shells report them."""
    return 128 + _received[0] if _received else 0


def reset() -> None:
    """Forget a received signal (tests running several commands in one process)."""
    _received.clear()


def _handler(announce: Callable[[str], None] | None) -> Callable[[int, Any], None]:
    def handle(signum: int, _frame: Any) -> None:
        if _received:
            os._exit(128 + signum)  # the second one: at once
        _received.append(signum)
        if announce is not None:
            announce(
                f"{signal.Signals(signum).name}: stopping; no new request is sent, replies in flight are "
                "still saved (press Ctrl-C again to quit at once)"
            )

    return handle


@contextmanager
def stop_on_signals(announce: Callable[[str], None] | None = None) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM set the stop flag (a second one exits); the old handlers come back
    after. Outside the main thread (where handlers cannot be set) it only relies on the flag."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    handle = _handler(announce)
    for signum in SIGNALS:
        signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def run_stoppably(work: Callable[[], T], announce: Callable[[str], None] | None = None) -> T:
    """Run `work` on a worker thread with `stop_on_signals` on this (main) thread; its result or exception.

    `SystemExit` raised by `work` (click's `sys.exit`) comes back here too.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:
            outcome["error"] = error

    worker = threading.Thread(target=target, name="oabench-run", daemon=True)
    with stop_on_signals(announce):
        worker.start()
        while worker.is_alive():
            worker.join(timeout=0.1)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def echo_err(message: str) -> None:
    """Announce on stderr, unbuffered (a signal handler must not wait on a pipe's buffer)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
