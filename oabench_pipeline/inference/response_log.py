"""The durable record of every paid answer: an append-only JSON Lines file per benchmark cell.

Each result is written to the file (the kernel's page cache: it survives a SIGKILL) the moment it
arrives, on the caller's thread; a syncing thread then fsyncs it (results that arrived meanwhile share
one fsync) and only then reports it as received (`on_durable`). The event loop never waits on the disk,
so an fsync per answer costs the model client nothing. Every line is validated on reading
(`log_records.py`): a torn last line (a crash mid-write) or a damaged one is named and set aside by the
next run of the cell, never fatal. A rerun reads the log and sends only requests whose
`request_hash` has no successful answer yet: the paid work is never repeated.

Disk full: each cell reserves room for the answers in flight (a preallocated `.reserve` file beside the
log). When a write fails for want of space, the reserve is given back, the write retried, and `stop_reason`
asks the caller to start no new request; answers still in flight then land in the room the reserve made.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from oabench_pipeline.inference.log_records import inspect_log, repair_log
from oabench_pipeline.inference.types import ChatResult

# Room kept for the answers in flight when the disk fills up (a reply is a few KB; 64 in flight at most).
RESERVE_BYTES = 2 * 1024 * 1024


def cell_log_path(root: Path, model_key: str, edition: str) -> Path:
    return root / quote(model_key, safe="") / f"{edition}.jsonl"


def _encode(result: ChatResult) -> str:
    # Flat, one key per provenance column: the log's lines keep the shape they had before `Provenance`.
    record: dict[str, Any] = {**asdict(result), **result.provenance.columns()}
    del record["provenance"]
    record["finished_at"] = result.finished_at.isoformat() if result.finished_at is not None else None
    return json.dumps(record, ensure_ascii=False)


def read_log(path: Path) -> list[ChatResult]:
    """Every usable record in the log, in arrival order; damaged lines are validated away
    (`log_records.py`: a reply whose text survived is kept with its broken fields NULL)."""
    return inspect_log(path).results


def repair(path: Path) -> list[str]:
    """Set the log's damaged lines aside (`log_records.repair_log`); one line per damaged line."""
    return repair_log(path, _encode)


def latest_by_hash(results: list[ChatResult]) -> dict[str, ChatResult]:
    """The best result per request: a successful answer wins over errors; among equals, the latest."""
    best: dict[str, ChatResult] = {}
    for result in results:
        current = best.get(result.request_hash)
        if current is None or result.ok or not current.ok:
            best[result.request_hash] = result
    return best


class ResponseLogError(OSError):
    """The log cannot be opened for appending (no room for its reserve, no permission): nothing was sent."""


class ResponseLog:
    """Appends results to one cell's log file, durably; use as a context manager.

    `append` writes without waiting for the disk. `on_durable(result)` runs on the syncing thread once
    the result is fsynced: that is when it counts as received. On a write error (disk full, I/O error)
    `stop_reason()` says so; results that could not be written stay in `unwritten` (and are retried on
    every later write).
    """

    def __init__(
        self,
        path: Path,
        on_durable: Callable[[ChatResult], None] | None = None,
        reserve_bytes: int = RESERVE_BYTES,
    ) -> None:
        self.path = path
        self.reserve_path = path.with_name(f".{path.name}.reserve")
        self.on_durable = on_durable
        self.reserve_bytes = reserve_bytes
        self.unwritten: list[ChatResult] = []
        self.written = 0
        self.failure: OSError | None = None
        self._fd: int | None = None
        self._queue: queue.SimpleQueue[ChatResult | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._callback_error: Exception | None = None

    def __enter__(self) -> ResponseLog:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as error:
            raise _disk_full_or(error, self.path, "cannot open the response log") from None
        try:
            self._ensure_line_boundary()
            self._reserve()
        except OSError as error:
            os.close(self._fd)
            self._fd = None
            if isinstance(error, ResponseLogError):
                raise
            raise _disk_full_or(error, self.path, "cannot append to the response log") from None
        self._thread = threading.Thread(target=self._sync_loop, name=f"response-log {self.path}", daemon=True)
        self._thread.start()
        return self

    def _ensure_line_boundary(self) -> None:
        # A crash can leave a torn last line; start ours on a fresh line so it stays readable.
        assert self._fd is not None
        if self.path.stat().st_size == 0:
            return
        with self.path.open("rb") as reader:
            reader.seek(-1, os.SEEK_END)
            if reader.read(1) != b"\n":
                _write_all(self._fd, b"\n")

    def _reserve(self) -> None:
        """Preallocate the room the answers in flight need should the disk fill up (see module doc)."""
        if self.reserve_bytes <= 0:
            return
        fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.posix_fallocate(fd, 0, self.reserve_bytes)
        except OSError as error:
            self.reserve_path.unlink(missing_ok=True)
            raise _disk_full_or(error, self.path, "cannot reserve room for the response log") from None
        finally:
            os.close(fd)

    def append(self, result: ChatResult) -> None:
        """Write `result` to the file now (no fsync: the syncing thread does that, then reports it)."""
        assert self._thread is not None, "use ResponseLog as a context manager"
        pending = [*self.unwritten, result]
        if self._write(pending):
            for item in pending:
                self._queue.put(item)

    def stop_reason(self) -> str | None:
        """Why no new request should be sent (the log cannot be written), or None."""
        if self.failure is None:
            return None
        return f"{_describe(self.failure)} writing the response log {self.path}"

    def _write(self, results: list[ChatResult]) -> bool:
        """Append `results` whole, or nothing (kept in `unwritten`); on a full disk, use the reserve."""
        data = "".join(_encode(r) + "\n" for r in results).encode("utf-8")
        try:
            self._write_whole(data)
        except OSError as error:
            self.failure = self.failure or error
            if not (error.errno == errno.ENOSPC and self._give_back_reserve()):
                self.unwritten = results
                return False
            try:
                self._write_whole(data)
            except OSError:
                self.unwritten = results
                return False
        self.unwritten = []
        return True

    def _sync_loop(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            done = batch[-1] is None
            results = [r for r in batch if r is not None]
            if not results:
                continue
            assert self._fd is not None
            try:
                os.fsync(self._fd)
            except OSError as error:  # written but not known to be on disk: not counted as received
                self.failure = self.failure or error
                continue
            self.written += len(results)
            if self.on_durable is not None:
                for result in results:
                    try:
                        self.on_durable(result)
                    except Exception as error:
                        self._callback_error = self._callback_error or error

    def _write_whole(self, data: bytes) -> None:
        """Append `data`; on failure the file is cut back to where it was (no torn line left)."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        try:
            _write_all(self._fd, data)
        except OSError:
            # Cut back the torn line (a failed ftruncate leaves it: reading skips it anyway).
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise

    def _give_back_reserve(self) -> bool:
        if not self.reserve_path.exists():
            return False
        self.reserve_path.unlink(missing_ok=True)
        return True

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            leftover = self.unwritten
            if leftover and self._write(leftover):  # last try: space may have been freed meanwhile
                for item in leftover:
                    self._queue.put(item)
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.reserve_path.unlink(missing_ok=True)
        if self._callback_error is not None:
            raise self._callback_error


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _describe(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "disk full (no space left on device)"
    return f"{error.strerror or error} (errno {error.errno})"


def _disk_full_or(error: OSError, path: Path, what: str) -> ResponseLogError:
    return ResponseLogError(error.errno, f"{what} {path}: {_describe(error)}")
