"""Progress of model calls, reported to whoever listens: the CLI's progress bar, or the run log.

Besides the counts, a step can `notify` one-line notices a person running the command must see (a
damaged response-log line set aside): the CLI prints them above its bar; with nobody listening (a UI
run) they are only in the run's log, where the step also writes them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CellProgress:
    """Running totals for one benchmark cell (model key × edition)."""

    cell: str
    total: int
    already_done: int
    answered: int = 0
    errors: int = 0
    cost_usd: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        """Questions finished, with an answer or an error: how far the cell's bar has come."""
        return self.already_done + self.answered + self.errors

    @property
    def with_answer(self) -> int:
        """Questions that hold an answer (kept from before or received now); an error is asked again."""
        return self.already_done + self.answered

    def summary(self) -> str:
        """What the cell holds and what this run paid: `76/78 answered (8 kept from earlier runs), 2 errors,
        $0.2500 this run` (the count is the cell's, the cost this run's only)."""
        return answered_summary(self.with_answer, self.total, self.already_done, self.errors, self.cost_usd)

    def eta_s(self) -> float | None:
        finished_now = self.answered + self.errors
        remaining = self.total - self.done
        if finished_now == 0 or remaining <= 0:
            return None
        return (time.monotonic() - self.started) / finished_now * remaining


def answered_summary(with_answer: int, total: int, kept: int, errors: int, cost_usd: float) -> str:
    """Questions holding an answer of those asked (kept ones included, and said), errors, this run's cost."""
    earlier = f" ({kept} kept from earlier runs)" if kept else ""
    return f"{with_answer}/{total} answered{earlier}, {errors} errors, ${cost_usd:.4f} this run"


Listener = Callable[[CellProgress], None]
NoticeListener = Callable[[str], None]
_listeners: list[Listener] = []
_notice_listeners: list[NoticeListener] = []


@contextmanager
def listening(listener: Listener, on_notice: NoticeListener | None = None) -> Iterator[None]:
    """Receive every progress update (and notice) while the block runs (the CLI draws its bar with this)."""
    _listeners.append(listener)
    if on_notice is not None:
        _notice_listeners.append(on_notice)
    try:
        yield
    finally:
        _listeners.remove(listener)
        if on_notice is not None:
            _notice_listeners.remove(on_notice)


class BestEffort:
    """What a step reports besides its replies (lines in Dagster's log, the progress relay): none of it
    may stop or cancel anything, so a failure (a full disk, a database gone) is counted, the first one
    kept, and never raised. Safe from several threads (the event loop, the response log's syncing one)."""

    def __init__(self) -> None:
        self.failures = 0
        self.first: Exception | None = None
        self._lock = threading.Lock()

    def attempt(self, report: Callable[[], object]) -> None:
        try:
            report()
        except Exception as error:
            with self._lock:
                self.failures += 1
                self.first = self.first or error

    def summary(self) -> str | None:
        """One line saying what could not be reported, or None when everything was."""
        if self.first is None:
            return None
        why = " ".join(str(self.first).split())[:200]
        return f"{self.failures} progress report(s) could not be written ({type(self.first).__name__}: {why})"


def publish(progress: CellProgress) -> None:
    for listener in list(_listeners):
        listener(progress)


def notify(text: str) -> None:
    """A one-line notice for the person running the command (see the module docstring)."""
    for listener in list(_notice_listeners):
        listener(text)


# A launched run answers its cell in a process of its own; the `oabench run` that launched it asks it (run tag
# `PROGRESS_FILE_TAG`) to relay its progress and notices through a file, which it reads back and publishes
# as if they were its own. JSON, replaced atomically, so a reader never sees half of it.
PROGRESS_FILE_TAG = "oabench/progress-file"
RELAY_EVERY_S = 0.25


class ProgressRelay:
    """Writes a cell's progress and notices to `path` (at most every `RELAY_EVERY_S`, and at the end).

    Best effort: a write that fails (a full disk) is skipped and tried again at the next update, and
    `failure` keeps the first error; a relay never fails the cell it reports on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._progress: CellProgress | None = None
        self._notices: list[str] = []
        self._written = 0.0
        self.failure: OSError | None = None

    def update(self, progress: CellProgress) -> None:
        with self._lock:
            self._progress = progress
            if time.monotonic() - self._written >= RELAY_EVERY_S:
                self._write()

    def notice(self, text: str) -> None:
        with self._lock:
            self._notices.append(text)
            self._write()

    def flush(self) -> None:
        with self._lock:
            self._write()

    def _write(self) -> None:
        self._written = time.monotonic()
        progress = self._progress
        state = {
            "notices": self._notices,
            "progress": None
            if progress is None
            else {
                "cell": progress.cell,
                "total": progress.total,
                "already_done": progress.already_done,
                "answered": progress.answered,
                "errors": progress.errors,
                "cost_usd": progress.cost_usd,
                "elapsed_s": time.monotonic() - progress.started,
            },
        }
        partial = self.path.with_name(self.path.name + ".partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(state), encoding="utf-8")
            os.replace(partial, self.path)
        except OSError as error:
            self.failure = self.failure or error
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


@contextmanager
def relaying(path: Path) -> Iterator[None]:
    """Relay every progress update and notice published within the block to `path`."""
    relay = ProgressRelay(path)
    with listening(relay.update, relay.notice):
        try:
            yield
        finally:
            relay.flush()


class RelayReader:
    """The launching side: publishes what a relay file holds that it has not published yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._notices_seen = 0
        self._started = time.monotonic()

    def poll(self) -> None:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # not written yet
        notices = state.get("notices") or []
        for text in notices[self._notices_seen :]:
            notify(text)
        self._notices_seen = len(notices)
        if (fields := state.get("progress")) is not None:
            elapsed = fields.pop("elapsed_s", 0.0)
            publish(CellProgress(**fields, started=time.monotonic() - elapsed))
