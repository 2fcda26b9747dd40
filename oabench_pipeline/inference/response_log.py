"""The durable record of every paid answer: an append-only JSON Lines file per benchmark cell.

Each result is written (and flushed to the kernel) the moment it arrives, so a SIGKILL loses nothing
already received; an fsync at most every second also covers a machine crash within a second. A torn last
line (a crash mid-write) is ignored on reading. A rerun reads the log and sends only requests whose
`request_hash` has no successful answer yet: the paid work is never repeated.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from oabench_pipeline.inference.types import ChatResult

FSYNC_INTERVAL_S = 1.0


def cell_log_path(root: Path, model_key: str, edition: str) -> Path:
    return root / quote(model_key, safe="") / f"{edition}.jsonl"


def _encode(result: ChatResult) -> str:
    record: dict[str, Any] = asdict(result)
    record["finished_at"] = result.finished_at.isoformat()
    return json.dumps(record, ensure_ascii=False)


_FIELDS = frozenset(f.name for f in fields(ChatResult))


def _decode(line: str) -> ChatResult | None:
    """A log line as a result; lines written before a field existed read with its default."""
    try:
        record = json.loads(line)
        record["finished_at"] = datetime.fromisoformat(record["finished_at"])
        return ChatResult(**{name: value for name, value in record.items() if name in _FIELDS})
    except (ValueError, TypeError, KeyError):
        return None


def read_log(path: Path) -> list[ChatResult]:
    """Every intact record in the log, in arrival order."""
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", errors="replace") as handle:
        return [result for line in handle if (result := _decode(line)) is not None]


def latest_by_hash(results: list[ChatResult]) -> dict[str, ChatResult]:
    """The best result per request: a successful answer wins over errors; among equals, the latest."""
    best: dict[str, ChatResult] = {}
    for result in results:
        current = best.get(result.request_hash)
        if current is None or result.ok or not current.ok:
            best[result.request_hash] = result
    return best


class ResponseLog:
    """Appends results to one cell's log file; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: TextIO | None = None
        self._last_sync = 0.0

    def __enter__(self) -> ResponseLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        self._ensure_line_boundary()
        return self

    def _ensure_line_boundary(self) -> None:
        # A crash can leave a torn last line; start ours on a fresh line so it stays readable.
        assert self._handle is not None
        if self.path.stat().st_size == 0:
            return
        with self.path.open("rb") as reader:
            reader.seek(-1, os.SEEK_END)
            if reader.read(1) != b"\n":
                self._handle.write("\n")
                self._handle.flush()

    def append(self, result: ChatResult) -> None:
        assert self._handle is not None, "use ResponseLog as a context manager"
        self._handle.write(_encode(result) + "\n")
        self._handle.flush()
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_INTERVAL_S:
            os.fsync(self._handle.fileno())
            self._last_sync = now

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None
