"""Progress of model calls, reported to whoever listens: the CLI's progress bar, or the run log."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


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
        return self.already_done + self.answered + self.errors

    def eta_s(self) -> float | None:
        finished_now = self.answered + self.errors
        remaining = self.total - self.done
        if finished_now == 0 or remaining <= 0:
            return None
        return (time.monotonic() - self.started) / finished_now * remaining


Listener = Callable[[CellProgress], None]
_listeners: list[Listener] = []


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Receive every progress update while the block runs (the CLI draws its bar with this)."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def publish(progress: CellProgress) -> None:
    for listener in list(_listeners):
        listener(progress)
