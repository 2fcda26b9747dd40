"""What one line of a response log must hold, and what happens to a line that does not.

Every line is validated when it is read, against `LoggedReply` (strict types: `"latency_ms": "abc"` or
`"raw_response": {"x": 1}` is damage, not something to guess at). A damaged line is never fatal:

- when the reply itself survived (`qid`, `request_hash`, `raw_response` and `error` are intact), it is kept
  and only the broken fields read as NULL (a bad `latency_ms`, a garbled `finished_at`);
- otherwise (not JSON, not UTF-8, JSON nested too deep, a half-written last line, an answer of the wrong
  type) the line counts as not answered, so the next run asks that question again, once (unless another
  answer to it is kept: a later line of the log, or the cell's table, written before the crash): its new
  answer is appended and the damaged line is gone from the log.

`repair_log` (run by the `inferences` step under the cell's lock, the only writer) moves each damaged line
to a sidecar beside the log (`45.jsonl.damaged`, JSON lines: file, line, why, the text as it was) and
rewrites the log with the salvaged replies in place, so no rerun meets the same damage twice. Readers
without the lock (`oabench status`, the freshness checks) only look: `inspect_log`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from oabench_pipeline.core.files import write_atomically
from oabench_pipeline.core.provenance import PROVENANCE_COLUMNS, Provenance
from oabench_pipeline.inference.types import ChatResult

# Without these a line says nothing usable about which request it answers or what the answer was.
ESSENTIAL_FIELDS = frozenset({"qid", "request_hash", "raw_response", "error"})
MAX_INT64 = 2**63 - 1


class LoggedReply(BaseModel):
    """One line of a response log: a `ChatResult` with its provenance as flat keys (see `response_log`).

    Fields added over time have defaults, so lines written before they existed still read; unknown
    keys (from a newer version) are ignored.
    """

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)

    qid: str = Field(min_length=1)
    request_hash: str = Field(min_length=1)
    raw_response: str | None
    error: str | None
    reasoning: str | None = None
    # Counts an Int64 column holds: a line with `10**400` tokens is damage (that field NULL), not a
    # number that fails the cell's Parquet write on every rerun.
    latency_ms: int | None = Field(None, ge=0, le=MAX_INT64)
    prompt_tokens: int | None = Field(None, ge=0, le=MAX_INT64)
    completion_tokens: int | None = Field(None, ge=0, le=MAX_INT64)
    reasoning_tokens: int | None = Field(None, ge=0, le=MAX_INT64)
    cost_usd: float | None = None
    attempts: int | None = Field(None, ge=0, le=MAX_INT64)
    finished_at: datetime | None = None
    total_cost_usd: float | None = None
    cost_note: str | None = None
    batch_id: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    finish_reason: str | None = None
    response_provider: str | None = None
    system_fingerprint: str | None = None

    def result(self) -> ChatResult:
        """The `ChatResult` this line records (its provenance keys regrouped, `finished_at` in UTC)."""
        values = self.model_dump(exclude=set(PROVENANCE_COLUMNS))
        finished = self.finished_at
        if finished is not None:  # written by us always with an offset; a naive one is taken as UTC
            values["finished_at"] = (
                finished.astimezone(UTC) if finished.tzinfo else finished.replace(tzinfo=UTC)
            )
        return ChatResult(**values, provenance=Provenance.from_columns(self.__dict__))


@dataclass(frozen=True)
class DamagedLine:
    """A line that did not validate: where, why, and the reply salvaged from it (None: unusable)."""

    number: int
    why: str
    text: bytes
    salvaged: ChatResult | None
    lost: tuple[str, ...] = ()
    """The fields read as NULL in the salvaged reply."""

    def describe(self, path: Path) -> str:
        """`file:line: why; what happens to it` — the one line a person reads."""
        if self.salvaged is not None:
            outcome = f"the reply is kept, with {', '.join(self.lost)} NULL"
        else:
            outcome = (
                "the answer is unusable: counted as not answered, "
                "asked again once unless another answer to it is kept"
            )
        return f"{path}:{self.number}: {self.why}; {outcome}"


@dataclass(frozen=True)
class LogContents:
    """Every usable reply of a log in arrival order (salvaged ones included), and the damaged lines."""

    results: list[ChatResult]
    damaged: list[DamagedLine]


def inspect_log(path: Path, keep_results: bool = True) -> LogContents:
    """Read and validate every line of the log at `path` (a missing log is empty). Changes nothing.

    `keep_results=False`: only the damaged lines are wanted (`results` stays empty; no reply is held).
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return LogContents([], [])
    results: list[ChatResult] = []
    damaged: list[DamagedLine] = []
    # Line by line, never the whole file at once: a reply's reasoning (a megabyte, for some models) is then
    # held once, as its `ChatResult`, plus the one line being read (benchmarks/reasoning_memory.py).
    with handle:
        for number, line in enumerate(handle, start=1):
            torn = not line.endswith(b"\n")  # only the last line can lack one: a crash while writing it
            raw = line if torn else line[:-1]
            del line
            if not raw.strip():
                continue  # an empty line (the fresh line started after a torn one) holds nothing
            if not keep_results and _is_valid(raw):
                continue  # no reply wanted: a valid line need not become a `ChatResult`
            outcome = _validate(raw, half_written=torn)
            if isinstance(outcome, ChatResult):
                if keep_results:
                    results.append(outcome)
                continue
            why, salvaged, lost = outcome
            damaged.append(DamagedLine(number, why, raw, salvaged, lost))
            if salvaged is not None and keep_results:
                results.append(salvaged)
    return LogContents(results, damaged)


def _is_valid(raw: bytes) -> bool:
    """The line validates as a `LoggedReply` (what `_validate` tries first)."""
    try:
        LoggedReply.model_validate_json(raw)
    except ValidationError:
        return False
    return True


def _validate(raw: bytes, half_written: bool) -> ChatResult | tuple[str, ChatResult | None, tuple[str, ...]]:
    """The line's reply, or (why it is damaged, the reply salvaged from it or None, the fields lost)."""
    try:
        return LoggedReply.model_validate_json(raw).result()
    except ValidationError as error:
        problems = error.errors(include_url=False)
    if half_written:
        return "half-written last line (the process was killed while writing it?)", None, ()
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as bad:
        return f"not valid UTF-8 (byte {bad.start})", None, ()
    except ValueError as bad:
        return f"not valid JSON ({str(bad).split(':')[0]})", None, ()
    except RecursionError:  # `[[[[...` thousands deep: no reply of ours looks like that
        return "JSON nested too deep to decode", None, ()
    if not isinstance(record, dict):
        return f"not a JSON object (a {type(record).__name__})", None, ()
    why = "; ".join(_describe(problem) for problem in problems)
    fields = {str(p["loc"][0]) for p in problems if p["loc"]}
    if fields & ESSENTIAL_FIELDS or not fields:
        return why, None, ()
    kept = {name: value for name, value in record.items() if name not in fields}
    try:
        return why, LoggedReply.model_validate_json(json.dumps(kept)).result(), tuple(sorted(fields))
    except ValidationError:
        return why, None, ()


def _describe(problem: Any) -> str:
    field = ".".join(str(part) for part in problem["loc"]) or "the line"
    shown = repr(problem.get("input"))
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    if problem["type"] == "missing":
        return f"field '{field}' is missing"
    return f"field '{field}': {problem['msg']} (got {shown})"


def sidecar_path(path: Path) -> Path:
    """Where a log's damaged lines are set aside: beside it, `<name>.damaged` (not `*.jsonl`)."""
    return path.with_name(f"{path.name}.damaged")


def repair_log(path: Path, encode: Callable[[ChatResult], str]) -> list[str]:
    """Set the log's damaged lines aside and rewrite it with the salvaged replies in their place.

    Only the cell's writer may call this (the `inferences` step holds the cell lock): the log is
    replaced atomically (fsynced), after the damaged lines are safely in the sidecar, so a crash at any
    point loses nothing (at worst a line is set aside twice). `encode` turns a `ChatResult` into its line
    (`response_log._encode`). Returns one line per damaged line (`file:line: why; ...`); [] when clean.
    """
    contents = inspect_log(path)
    if not contents.damaged:
        return []
    by_number = {line.number: line for line in contents.damaged}
    now = datetime.now(UTC).isoformat()
    sidecar = sidecar_path(path)
    with sidecar.open("a", encoding="utf-8") as handle:
        for line in contents.damaged:
            entry = {
                "log": str(path),
                "line": line.number,
                "why": line.why,
                "set_aside_at": now,
                "salvaged": line.salvaged is not None,
                "text": line.text.decode("utf-8", errors="backslashreplace"),
            }
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    kept: list[bytes] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        damaged = by_number.get(number)
        if damaged is None:
            if raw.strip():
                kept.append(raw)
        elif damaged.salvaged is not None:
            kept.append(encode(damaged.salvaged).encode("utf-8"))
    write_atomically(path, b"".join(line + b"\n" for line in kept))
    return [f"{line.describe(path)} (set aside in {sidecar.name})" for line in contents.damaged]
