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

An endpoint's host is also a rate limit that adapts (`SharedLimit`, AIMD as TCP's congestion window): a
429 halves the requests the host may have in flight, every `limit` answers raise it by one, up to its
ceiling. The limit lives in `<warehouse>/capacity/endpoint/<host>/limit.json`, read and changed under a
`flock`, so the cells of one endpoint (separate processes) slow down together on the first 429 instead of
each spending its questions' retries on it. A host's slot is held per attempt, not per request, so a
request waiting out a 429's backoff leaves its slot to one that can be sent.

No Dagster import: the client and the benchmarks use this directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

POLL_S = 0.01  # wait between looks at another process's slot files (by one request of a process at a time)
# A shared limit untouched this long is forgotten: a later run starts again at the ceiling.
LIMIT_RESET_AFTER_S = 300.0


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


@dataclass(frozen=True)
class LimitState:
    limit: int
    """Requests in flight allowed now."""
    answered: int
    """Answers since the limit last changed: at `limit` of them, it grows by one."""
    epoch: int
    """Bumped at each decrease: a 429 to a request sent before the last decrease was already answered by
    it, and lowers nothing more."""
    updated: float
    """`time.time()` of the last change."""


class SharedLimit:
    """An endpoint's in-flight limit, shared by every process using `folder` (in this process only with
    `folder=None`): halved on a 429, raised by one after `limit` answers, between 1 and `ceiling`."""

    def __init__(self, folder: Path | None, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"a limit's ceiling must be >= 1, got {ceiling}")
        self.ceiling = ceiling
        self._path = folder / "limit.json" if folder is not None else None
        self._lock = threading.Lock()
        self._memory = LimitState(ceiling, 0, 0, time.time())
        self._cached: tuple[int, LimitState] | None = None  # (file's mtime_ns, what it held)

    def current(self) -> tuple[int, int]:
        """(requests in flight allowed now, epoch)."""
        state = self._fresh(self._read())
        return max(1, min(self.ceiling, state.limit)), state.epoch

    def rate_limited(self, epoch: int) -> None:
        """A 429 to a request sent in `epoch`: halve the limit, once per epoch."""

        def halve(state: LimitState) -> LimitState | None:
            if state.epoch != epoch:
                return None
            return LimitState(max(1, min(self.ceiling, state.limit) // 2), 0, epoch + 1, time.time())

        self._change(halve)

    def answered(self) -> None:
        """A request answered (not a 429): one more in flight after `limit` of them."""

        def raise_slowly(state: LimitState) -> LimitState | None:
            if state.limit >= self.ceiling:
                return None
            if state.answered + 1 < state.limit:
                return replace(state, answered=state.answered + 1, updated=time.time())
            return replace(state, limit=state.limit + 1, answered=0, updated=time.time())

        if self._fresh(self._read()).limit < self.ceiling:  # at the ceiling (no 429 lately): no lock taken
            self._change(raise_slowly)

    def _fresh(self, state: LimitState) -> LimitState:
        if time.time() - state.updated > LIMIT_RESET_AFTER_S:
            return LimitState(self.ceiling, 0, state.epoch, time.time())
        return state

    def _change(self, change: Callable[[LimitState], LimitState | None]) -> None:
        with self._lock:
            if self._path is None:
                self._memory = change(self._fresh(self._memory)) or self._memory
                return
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path.with_name("limit.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                new = change(self._fresh(self._read()))
                if new is not None:
                    partial = self._path.with_name(f"limit.{os.getpid()}.partial")
                    partial.write_text(json.dumps(asdict(new)), encoding="utf-8")
                    os.replace(partial, self._path)
            finally:
                os.close(fd)  # and its lock

    def _read(self) -> LimitState:
        """The shared state; the ceiling when none was written (or it cannot be read: a rate limit is
        never a reason to stop)."""
        if self._path is None:
            return self._memory
        try:
            mtime = os.stat(self._path).st_mtime_ns
            if self._cached is not None and self._cached[0] == mtime:
                return self._cached[1]
            data = json.loads(self._path.read_text(encoding="utf-8"))
            state = LimitState(
                int(data["limit"]), int(data["answered"]), int(data["epoch"]), float(data["updated"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            return LimitState(self.ceiling, 0, 0, time.time())
        self._cached = (mtime, state)
        return state


class FileSlots:
    """`limit` slot files; taking one holds its `flock` (exclusive) until given back or the process dies."""

    def __init__(self, folder: Path, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        self._held: set[int] = set()

    def try_take(self, allowed: int | None = None) -> int | None:
        """A free slot's index below `allowed` (all of them by default), now held; None when every such
        slot is held (by this or another process)."""
        with self._lock:
            for index in range(min(self.limit, allowed or self.limit)):
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


class MemorySlots:
    """`FileSlots` for one process only: what an adaptive capacity with no folder takes its slots from."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: set[int] = set()

    def try_take(self, allowed: int | None = None) -> int | None:
        with self._lock:
            for index in range(min(self.limit, allowed or self.limit)):
                if index not in self._held:
                    self._held.add(index)
                    return index
        return None

    def give(self, index: int) -> None:
        with self._lock:
            self._held.discard(index)


class Capacity:
    """`limit` requests in flight for one name (a model key or a host), in this process and across all.

    `adaptive`: `limit` is a ceiling, and a `SharedLimit` says how many of its slots may be taken now (the
    client tells it of each 429 and answer: `observe`)."""

    def __init__(self, name: str, limit: int, folder: Path | None, adaptive: bool = False) -> None:
        self.name = name
        self.limit = limit
        self._semaphore = CrossLoopSemaphore(limit)
        self._slots: FileSlots | MemorySlots | None = (
            FileSlots(folder, limit) if folder is not None else MemorySlots(limit) if adaptive else None
        )
        self.shared_limit = SharedLimit(folder, limit) if adaptive else None
        self._poller = CrossLoopSemaphore(1)  # the one request of this process looking for a file slot

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one slot; yields the shared limit's epoch when it was taken (0 when not adaptive)."""
        await self._semaphore.acquire()
        try:
            index, epoch = await self._take_slot()
            try:
                yield epoch
            finally:
                if index is not None and self._slots is not None:
                    self._slots.give(index)
        finally:
            self._semaphore.release()

    def observe(self, status: int, epoch: int) -> None:
        """What the endpoint answered a request sent in `epoch`: a 429 lowers the shared limit, an
        answer raises it slowly; other statuses say nothing of its rate limit."""
        if self.shared_limit is None:
            return
        with contextlib.suppress(OSError):  # a rate limit that cannot be recorded still lets requests go
            if status == 429:
                self.shared_limit.rate_limited(epoch)
            elif 200 <= status < 300:
                self.shared_limit.answered()

    def _try_take(self) -> tuple[int | None, int]:
        assert self._slots is not None
        if self.shared_limit is None:
            return self._slots.try_take(), 0
        allowed, epoch = self.shared_limit.current()
        return self._slots.try_take(allowed), epoch

    async def _take_slot(self) -> tuple[int | None, int]:
        if self._slots is None:
            return None, 0
        if (taken := self._try_take())[0] is not None:
            return taken
        await self._poller.acquire()
        try:
            while (taken := self._try_take())[0] is None:
                await asyncio.sleep(POLL_S)
            return taken
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


_registry: dict[tuple[str, str, str, int, bool], Capacity] = {}
_registry_lock = threading.Lock()


def shared_capacity(root: Path | None, kind: str, name: str, limit: int, adaptive: bool = False) -> Capacity:
    """The process-wide capacity of `kind` (`model` or `endpoint`) `name`, with slot files under `root`
    (the warehouse's `capacity` folder) or, with `root=None`, in this process only; `adaptive`: `limit`
    is the ceiling of a `SharedLimit`."""
    key = (str(root), kind, name, limit, adaptive)
    with _registry_lock:
        capacity = _registry.get(key)
        if capacity is None:
            folder = root / kind / slot_folder_name(name) if root is not None else None
            capacity = _registry[key] = Capacity(name, limit, folder, adaptive)
        return capacity


def slot_folder_name(name: str) -> str:
    """A file name for a model key or host: readable, and unique (a short hash of the exact name)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80]
    return f"{readable}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
