"""The output of the processes Dagster starts for `oabench`, in a log file instead of the terminal.

`oabench run` launches its cells through a Dagster code server, which starts a process per run, which starts
compute-log helpers (`tail` and Dagster's `watch_orphans.py`). They all inherit the command's stdout and
stderr, and they all share the terminal's process group, so a terminal's Ctrl-C reaches each of them: the
helpers, which handle no signal, each printed a `KeyboardInterrupt` traceback over the command's own lines.
They stay in the command's process group (a process-group SIGKILL of the command still kills all of them);
what they write goes to a log file instead (`children_output_to`), which a failed run's reason points to.
The UI keeps what it showed: the runs' event logs and their captured compute logs.

Dagster offers no option for its code server's stdio, so the file is what the server inherits: the command's
descriptors 1 and 2 point at it while the server starts, and the command's own `sys.stdout` and `sys.stderr`
write to the terminal meanwhile (through copies of the descriptors they had).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TextIO

ROTATE_AT_BYTES = 8 * 1024 * 1024  # past this size the log starts over, the previous one kept as `.1`
STREAMS = {1: "stdout", 2: "stderr"}


@contextmanager
def children_output_to(path: Path) -> Iterator[None]:
    """Within the block, processes started here write their stdout and stderr to `path` (appended to); this
    process's `sys.stdout` and `sys.stderr` go on writing where they did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _rotate(path)
    with ExitStack() as stack:
        log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        stack.callback(os.close, log)
        for fd, name in STREAMS.items():
            stack.enter_context(_descriptor_to(fd, name, log))
        yield


@contextmanager
def _descriptor_to(fd: int, name: str, log: int) -> Iterator[None]:
    """Descriptor `fd` points at `log` within the block; `sys.<name>`, when it wrote to `fd`, writes to a
    copy of what `fd` was."""
    stream: TextIO = getattr(sys, name)
    stream.flush()
    try:
        saved = os.dup(fd)
    except OSError:  # no such descriptor (a daemon's closed stdio): nothing to redirect
        yield
        return
    kept = _writer_to(saved, stream) if _fileno(stream) == fd else None
    os.dup2(log, fd)
    if kept is not None:
        setattr(sys, name, kept)
    try:
        yield
    finally:
        if kept is not None:
            setattr(sys, name, stream)
            kept.close()  # flushed; `saved` stays open (closefd=False) until closed below
        os.dup2(saved, fd)
        os.close(saved)


def _writer_to(fd: int, like: TextIO) -> TextIO:
    """A text stream on descriptor `fd` (not closing it) that encodes as `like` does, flushed each line."""
    return open(fd, "w", encoding=like.encoding, errors=like.errors, buffering=1, closefd=False)


def _fileno(stream: TextIO) -> int | None:
    """The descriptor a stream writes to, or None (a test runner's in-memory stream)."""
    try:
        return stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return None


def _rotate(path: Path) -> None:
    try:
        if path.stat().st_size > ROTATE_AT_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
