"""The durable record of a cell's batches: an append-only JSON Lines file, every record fsynced.

A batch is paid for once it is created, so the journal must know about it before the API does: the
intent (its client token and the lines' custom ids) is written and fsynced before the create request is
sent, and the batch id the moment the API returns it. Whatever happens in between, a restart finds either
the id, or the token to look the batch up by (`protocol.py`). One record a line:

    {"event": "intent",    "token": T, "model": M, "at": ISO, "lines": [{"custom_id", "qid", "request_hash"}]}
    {"event": "submitted", "token": T, "batch_id": B, "at": ISO, "recovered": bool}
    {"event": "collected", "token": T, "batch_id": B, "at": ISO, "status": S,
                           "answered": [custom ids], "failed": [custom ids]}
    {"event": "abandoned", "token": T, "at": ISO, "reason": "..."}   # no batch was created for it
    {"event": "rejected",  "token": T, "at": ISO, "reason": "..."}   # the API refused it at create

A torn last line (a crash mid-write) is ignored on reading and closed with a newline before the next
append, so it never glues onto the next record. Nothing is ever rewritten in place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

Closure = Literal["collected", "abandoned", "rejected"]
LineKey = Literal["qid", "request_hash"]
"""What tells a cell's lines apart across its batches: the question, or the exact request."""


@dataclass(frozen=True)
class JournalLine:
    """One request in a batch: its custom id there, and the question and request it answers."""

    custom_id: str
    qid: str
    request_hash: str


@dataclass
class Intent:
    """A batch as the journal knows it: intended, then submitted (an id), then closed."""

    token: str
    model: str
    lines: tuple[JournalLine, ...]
    recorded_at: datetime
    batch_id: str | None = None
    submitted_at: datetime | None = None
    closed: Closure | None = None
    final_status: str | None = None
    answered: frozenset[str] = frozenset()
    failed: frozenset[str] = frozenset()
    reason: str | None = None

    @property
    def is_open(self) -> bool:
        """Not closed: its lines may still be answered by the API, so nothing may send them again."""
        return self.closed is None

    @property
    def counts_as_attempt(self) -> bool:
        """Everything but an intent whose create never reached the API counts against the lines' attempts."""
        return self.closed != "abandoned"


@dataclass
class JournalState:
    """The journal replayed: every intent by token, in the order they were recorded."""

    intents: dict[str, Intent] = field(default_factory=dict)
    ignored_lines: int = 0

    @property
    def known_batch_ids(self) -> set[str]:
        return {i.batch_id for i in self.intents.values() if i.batch_id}

    def open_intents(self) -> list[Intent]:
        return [i for i in self.intents.values() if i.is_open]

    def answered_qids(self, by: LineKey = "qid") -> set[str]:
        """The questions (or, `by` "request_hash", the requests) a collected batch answered."""
        return {
            getattr(line, by)
            for i in self.intents.values()
            for line in i.lines
            if line.custom_id in i.answered
        }

    def held_qids(self, by: LineKey = "qid") -> set[str]:
        """Questions in a batch that is not closed yet (open, or intended and not found yet)."""
        return {getattr(line, by) for i in self.open_intents() for line in i.lines}

    def attempts(self, by: LineKey = "qid") -> dict[str, int]:
        """How many batches each question was put in (an abandoned intent reached no API: not counted)."""
        counts: dict[str, int] = {}
        for intent in self.intents.values():
            if intent.counts_as_attempt:
                for line in intent.lines:
                    key = getattr(line, by)
                    counts[key] = counts.get(key, 0) + 1
        return counts


def _now() -> str:
    return datetime.now(UTC).isoformat()


class BatchJournal:
    """The journal file of one cell. Each `record_*` returns once the record is on disk (fsynced)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    # ------------------------------------------------------------------------------------- writing

    def _append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if not created and _ends_torn(fd):
                line = b"\n" + line  # close a line a crash left half-written
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # the new file's name must survive a power cut too
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def record_intent(self, token: str, model: str, lines: Sequence[JournalLine]) -> None:
        self._append(
            {
                "event": "intent",
                "token": token,
                "model": model,
                "at": _now(),
                "lines": [
                    {"custom_id": x.custom_id, "qid": x.qid, "request_hash": x.request_hash} for x in lines
                ],
            }
        )

    def record_submitted(self, token: str, batch_id: str, recovered: bool = False) -> None:
        self._append(
            {"event": "submitted", "token": token, "batch_id": batch_id, "at": _now(), "recovered": recovered}
        )

    def record_collected(
        self, token: str, batch_id: str, status: str, answered: Iterable[str], failed: Iterable[str]
    ) -> None:
        self._append(
            {
                "event": "collected",
                "token": token,
                "batch_id": batch_id,
                "at": _now(),
                "status": status,
                "answered": sorted(answered),
                "failed": sorted(failed),
            }
        )

    def record_abandoned(self, token: str, reason: str) -> None:
        self._append({"event": "abandoned", "token": token, "at": _now(), "reason": reason})

    def record_rejected(self, token: str, reason: str) -> None:
        self._append({"event": "rejected", "token": token, "at": _now(), "reason": reason})

    # ------------------------------------------------------------------------------------- reading

    def replay(self) -> JournalState:
        """The state the records add up to; unreadable lines (a torn last one) are counted, not fatal."""
        state = JournalState()
        if not self.path.exists():
            return state
        for raw in self.path.read_bytes().split(b"\n"):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
                _apply(state, record)
            except (ValueError, KeyError, TypeError):
                state.ignored_lines += 1
        return state


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def _apply(state: JournalState, record: dict[str, Any]) -> None:
    event = record["event"]
    at = datetime.fromisoformat(record["at"])
    if event == "intent":
        lines = tuple(
            JournalLine(str(x["custom_id"]), str(x["qid"]), str(x["request_hash"])) for x in record["lines"]
        )
        state.intents[record["token"]] = Intent(record["token"], str(record["model"]), lines, at)
        return
    intent = state.intents[record["token"]]
    if event == "submitted":
        intent.batch_id, intent.submitted_at = str(record["batch_id"]), at
    elif event == "collected":
        intent.closed, intent.final_status = "collected", str(record["status"])
        intent.answered, intent.failed = frozenset(record["answered"]), frozenset(record["failed"])
    elif event in ("abandoned", "rejected"):
        intent.closed, intent.reason = event, str(record["reason"])
    else:
        raise ValueError(f"unknown journal event {event!r}")
