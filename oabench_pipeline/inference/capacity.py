"""Requests in flight shared by every cell of a model key (and of an endpoint host), across threads and
processes.

A model's `concurrency` is a property of the model key, not of one cell: its three editions, run at once
(one run, so one process, per cell, whether `oabench run`, a UI backfill or the daemon launched them), draw
on one pool of that many slots, so the pool never drains between editions and never overflows when cells
overlap. The optional `endpoint_concurrency` caps every key on one `base_url` host the same way.

Two layers, because each alone falls short:

- In the process, a FIFO semaphore any event loop can await (`CrossLoopSemaphore`): cells answered in one
  process (in-process runs, each on its own asyncio loop in its own thread) are served in the order their
  requests wait, so the cells of a key interleave instead of one starving the others.
- Across processes, slot files under the warehouse (`<warehouse>/capacity/<kind>/<name>/<i>.lock`), each
  held with `flock` while a request is in flight (`FileSlots`). The kernel drops a lock when its holder
  dies, SIGKILL included, so a crashed run never leaves a slot taken. A process only looks for a file
  slot after its own semaphore let it through, so within one process the file is always free at once.
  When other processes hold every slot, one request of the process polls for the next free one every
  `POLL_S` and the others queue behind it (FIFO): a cell run in its own process, with twenty requests
  waiting, costs one poll per `POLL_S`, not twenty, and leaves the cores to the requests in flight.

No Dagster import: the client and the benchmarks use this directly.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

POLL_S = 0.01  # wait between looks at another process's slot files (by one request of a process at a time)


class CrossLoopSemaphore:
    """A counting semaphore, FIFO, that coroutines on different event loops (threads) can share."""

    def __init__(self, value: int) -> None:
        if value < 1:
            raise ValueError(f"a capacity must be >= 1, got {value}")
        self._lock = threading.Lock()
        self._value = value
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._value > 0 and not self._waiters:
                self._value -= 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except BaseException:
            with self._lock:
                try:
                    self._waiters.remove((loop, waiter))
                    raise
                except ValueError:
                    pass  # a release already handed us the slot (or will: `_grant` passes it on)
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._grant, waiter)
                    return
                except RuntimeError:  # that loop is closed: its waiter is gone
                    continue
            self._value += 1

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        if waiter.cancelled():
            self.release()  # cancelled between the hand-over and now: pass the slot on
        else:
            waiter.set_result(None)


class FileSlots:
    """`limit` slot files; taking one holds its `flock` (exclusive) until given back or the process dies."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        self._held: set[int] = set()

    def try_take(self) -> int | None:
        """A free slot's index, now held; None when every slot is held (by this or another process)."""
        with self._lock:
            for index in range(self.limit):
                if index in self._held:
                    continue
                fd = self._fd(index)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                self._held.add(index)
                return index
        return None

    def give(self, index: int) -> None:
        with self._lock:
            self._held.discard(index)
            fcntl.flock(self._fds[index], fcntl.LOCK_UN)

    def _fd(self, index: int) -> int:
        fd = self._fds.get(index)
        if fd is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / f"{index}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            self._fds[index] = fd
        return fd


class Capacity:
    """`limit` requests in flight for one name (a model key or a host), in this process and across all."""

    def __init__(self, name: str, limit: int, folder: Path | None) -> None:
        self.name = name
        self.limit = limit
        self._semaphore = CrossLoopSemaphore(limit)
        self._files = FileSlots(folder, limit) if folder is not None else None
        self._poller = CrossLoopSemaphore(1)  # the one request of this process looking for a file slot

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self._semaphore.acquire()
        try:
            index = await self._take_file_slot()
            try:
                yield
            finally:
                if index is not None and self._files is not None:
                    self._files.give(index)
        finally:
            self._semaphore.release()

    async def _take_file_slot(self) -> int | None:
        if self._files is None:
            return None
        if (index := self._files.try_take()) is not None:
            return index
        await self._poller.acquire()
        try:
            while (index := self._files.try_take()) is None:
                await asyncio.sleep(POLL_S)
            return index
        finally:
            self._poller.release()


@asynccontextmanager
async def all_slots(capacities: Sequence[Capacity]) -> AsyncIterator[None]:
    """Hold one slot of each capacity, taken in order (model key, then host: never the other way round,
    so two requests never wait on each other)."""
    async with AsyncExitStack() as stack:
        for capacity in capacities:
            await stack.enter_async_context(capacity.slot())
        yield


_registry: dict[tuple[str, str, str, int], Capacity] = {}
_registry_lock = threading.Lock()


def shared_capacity(root: Path | None, kind: str, name: str, limit: int) -> Capacity:
    """The process-wide capacity of `kind` (`model` or `endpoint`) `name`, with slot files under `root`
    (the warehouse's `capacity` folder) or, with `root=None`, in this process only."""
    key = (str(root), kind, name, limit)
    with _registry_lock:
        capacity = _registry.get(key)
        if capacity is None:
            folder = root / kind / slot_folder_name(name) if root is not None else None
            capacity = _registry[key] = Capacity(name, limit, folder)
        return capacity


def slot_folder_name(name: str) -> str:
    """A file name for a model key or host: readable, and unique (a short hash of the exact name)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80]
    return f"{readable}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
