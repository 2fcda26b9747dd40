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

A cell run that `oabench run` launched is a process of its own, which a Ctrl-C sent to the command alone
never reaches; Dagster's terminate reaches it only after a round trip through the code server. So the
command also writes the stop to a file the moment the signal arrives (`announcing_stops_to`), and its runs,
told the file's path by a run tag (`STOP_FILE_TAG`), read it before every request (`watching`): nothing is
sent after the signal, whatever the launcher. Such a run leaves a second signal to the command that
launched it (which exits at once): it only finishes saving the replies in flight.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The metadata key a step's `Failure` carries when a signal stopped it: `oabench run`'s live line and
# `oabench status` then say "interrupted" (a cell to resume), not "failed" (engine/runs.interruption).
INTERRUPTED_METADATA = "oabench/interrupted"
# The run tag naming the file a launched run reads its launcher's stop from (see the module docstring).
STOP_FILE_TAG = "oabench/stop-file"
_received: list[int] = []
_reason: list[str] = []  # what `requested` said first
_announced_to: list[Path] = []  # written when a signal arrives here
_watched: list[Path] = []  # read by `requested`: the stop of the command that launched this run


def requested() -> str | None:
    """Why sending must stop ("interrupted (SIGINT)"), or None. In a launched run the launching command's
    stop comes first: it names the user's signal, where the SIGINT of Dagster's terminate that follows it
    would not. Once given, the reason stays, so a step compares its stop with it."""
    if not _reason:
        for path in _watched:
            try:
                _reason.append(path.read_text(encoding="utf-8") or "interrupted")
                break
            except FileNotFoundError:
                continue
        else:
            if _received:
                _reason.append(f"interrupted ({signal.Signals(_received[0]).name})")
    return _reason[0] if _reason else None


@contextmanager
def announcing_stops_to(path: Path) -> Iterator[None]:
    """Within the block, a signal here is also written to `path` (at once if one came already). The file
    stays after the block: a launched run still starting when the command exits must find it."""
    _announced_to.append(path)
    if reason := requested():
        _write_stop(path, reason)
    try:
        yield
    finally:
        _announced_to.remove(path)


@contextmanager
def watching(path: Path) -> Iterator[None]:
    """Within the block, a stop written to `path` by the launching command counts as a signal here."""
    _watched.append(path)
    try:
        yield
    finally:
        _watched.remove(path)


def _write_stop(path: Path, reason: str) -> None:
    """Whole or not at all: a reader sees no file or the reason (written beside it, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(reason, encoding="utf-8")
    os.replace(partial, path)


def exit_code() -> int:
    """130 after SIGINT, 143 after SIGTERM (128 + the signal's number), as shells report them."""
    return 128 + _received[0] if _received else 0


def reset() -> None:
    """Forget a received signal (tests running several commands in one process)."""
    _received.clear()
    _reason.clear()


def _handler(announce: Callable[[str], None] | None) -> Callable[[int, Any], None]:
    def handle(signum: int, _frame: Any) -> None:
        if _received:
            if _watched:
                return  # a launched run: the command that launched it quits at once, this one saves what lands
            os._exit(128 + signum)  # the second one: at once
        _received.append(signum)
        for path in _announced_to:
            _write_stop(path, f"interrupted ({signal.Signals(signum).name})")
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
