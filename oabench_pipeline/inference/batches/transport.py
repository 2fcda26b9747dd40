"""What the protocol asks of a batch API, and how one result line becomes the chat path's `ChatResult`.

Two transports implement `BatchTransport` over httpx: `openai.py` (a JSONL file uploaded, output and error
files read back) and `openrouter.py` (inline requests, results read by cursor). Both are synchronous: a
batch is a handful of calls, never a latency race.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from oabench_pipeline.core.provenance import Provenance
from oabench_pipeline.inference.batches.journal import Intent
from oabench_pipeline.inference.client import (
    _InBodyTransientError,
    _MalformedBody,
    clean_error_text,
    parse_completion,
    request_headers,
    trusted_cost,
)
from oabench_pipeline.inference.redaction import redact
from oabench_pipeline.inference.types import ChatResult, EndpointConfig

# httpx is imported inside `new_client`: every run's process loads this module with the Dagster definitions
# (the batch sensor), and only a batch step opens a client.
if TYPE_CHECKING:
    import httpx

# Statuses after which a batch changes no more (both APIs use the same eight names).
TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
OPEN_STATUSES = frozenset({"validating", "in_progress", "finalizing", "cancelling"})

StepHook = Callable[[str], None]
"""Called with a step's name right after the step (`protocol.STEPS`): the crash tests' kill point."""


def no_hook(step: str) -> None:
    """The default `StepHook`: nothing."""


@dataclass(frozen=True)
class BatchLine:
    """One request of a batch: its custom id and the chat-completions body to send."""

    custom_id: str
    body: dict[str, Any]


@dataclass(frozen=True)
class BatchInfo:
    """A batch as the API reports it."""

    batch_id: str
    status: str
    total: int | None = None
    completed: int | None = None
    failed: int | None = None
    error: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class LineOutcome:
    """One result line: a 200 body (`body`), or why there is none (`error`)."""

    custom_id: str
    body: dict[str, Any] | None
    error: str | None


@dataclass(frozen=True)
class Found:
    batch_id: str


@dataclass(frozen=True)
class Unresolved:
    """A batch that may be the intent's is still running and cannot be told apart yet: wait."""

    batch_id: str


@dataclass(frozen=True)
class NotFound:
    pass


FindOutcome = Found | Unresolved | NotFound


class BatchRejected(RuntimeError):
    """The API refused the batch at create (a validation error): nothing was created, nothing billed."""


class BatchApiError(RuntimeError):
    """An unexpected reply from the batch API (status, body): the step stops, the journal stays as is."""


class BatchTransport(Protocol):
    name: str
    max_lines: int

    def create(self, token: str, model: str, lines: Sequence[BatchLine], after_step: StepHook) -> str: ...

    def status(self, batch_id: str) -> BatchInfo: ...

    def results(self, batch_id: str) -> Iterator[list[LineOutcome]]: ...

    def find(self, intent: Intent, known_batch_ids: set[str]) -> FindOutcome: ...

    def cancel(self, batch_id: str) -> BatchInfo: ...

    def close(self) -> None: ...


ApiName = Literal["openai", "openrouter"]


def new_client(endpoint: EndpointConfig) -> httpx.Client:
    """A synchronous client with the chat path's headers (key, extra headers) and timeouts. httpx sets
    each request's Content-Type (JSON, or multipart for a file upload)."""
    import httpx

    headers = request_headers(endpoint)
    headers.pop("Content-Type")
    return httpx.Client(
        headers=headers,
        timeout=httpx.Timeout(endpoint.timeout_s, connect=endpoint.connect_timeout_s),
        follow_redirects=False,
        trust_env=True,
    )


def api_url(endpoint: EndpointConfig, path: str) -> str:
    """`base_url` + path (the base ends before `/chat/completions`, e.g. `https://openrouter.ai/api/v1`)."""
    return endpoint.base_url.rstrip("/") + path


def checked_json(reply: httpx.Response, endpoint: EndpointConfig, what: str) -> dict[str, Any]:
    """The reply's JSON object, or `BatchApiError` naming what failed (redacted, one line)."""
    if reply.status_code >= 300:
        text = clean_error_text(reply.text, endpoint.secrets)
        raise BatchApiError(f"{what}: HTTP {reply.status_code}: {text}")
    try:
        data = reply.json()
    except ValueError:
        raise BatchApiError(f"{what}: the reply is not JSON") from None
    if not isinstance(data, dict):
        raise BatchApiError(f"{what}: the reply is not a JSON object")
    return data


def created_at(item: dict[str, Any]) -> float:
    """A listed batch's `created_at` (Unix seconds); infinity when it has none."""
    value = item.get("created_at")
    return float(value) if isinstance(value, int | float) else float("inf")


def error_text(error: Any) -> str:
    """A result line's `error` object as one line."""
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        message = error.get("message")
        return f"{code}: {message}" if code else str(message)
    return str(error)


def line_outcome(item: dict[str, Any]) -> LineOutcome:
    """A result line of either API: `{custom_id, response: {status_code, body}, error}`."""
    custom_id = str(item.get("custom_id"))
    error = item.get("error")
    response = item.get("response")
    if error:
        return LineOutcome(custom_id, None, error_text(error))
    if not isinstance(response, dict):
        return LineOutcome(custom_id, None, "no response in the result line")
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        return LineOutcome(custom_id, None, f"HTTP {status}: {error_text(body)[:200]}")
    return LineOutcome(custom_id, body, None)


def to_chat_result(
    outcome: LineOutcome,
    qid: str,
    request_hash: str,
    attempts: int,
    latency_ms: int,
    secrets: Sequence[str],
) -> ChatResult:
    """The line as the chat path would have recorded its reply (`client.parse_completion`), all text
    redacted; `cost_usd` is the `usage.cost` the API reported for the line, when it is a usable number."""
    finished = datetime.now(UTC)
    if outcome.body is None:
        return _error_result(qid, request_hash, outcome.error or "no answer", attempts, latency_ms, secrets)
    try:
        parsed = parse_completion(json.dumps(outcome.body).encode("utf-8"))
    except (_MalformedBody, _InBodyTransientError) as exc:
        return _error_result(qid, request_hash, f"malformed batch line: {exc}", attempts, latency_ms, secrets)
    cost, note = trusted_cost(parsed.reported_cost, None)
    notes = [n for n in (note, *parsed.usage_notes) if n]

    def clean(value: str | None) -> str | None:
        return redact(value, secrets) if value else value

    return ChatResult(
        qid=qid,
        request_hash=request_hash,
        raw_response=clean(parsed.text if parsed.text is not None else ""),
        reasoning=clean(parsed.reasoning),
        latency_ms=latency_ms,
        prompt_tokens=parsed.prompt_tokens,
        completion_tokens=parsed.completion_tokens,
        reasoning_tokens=parsed.reasoning_tokens,
        cost_usd=cost,
        error=None,
        attempts=attempts,
        finished_at=finished,
        total_cost_usd=cost,
        provenance=Provenance(**{k: clean(v) for k, v in parsed.provenance.columns().items()}),
        cost_note=clean("; ".join(notes) or None),
    )


def _error_result(
    qid: str, request_hash: str, error: str, attempts: int, latency_ms: int, secrets: Sequence[str]
) -> ChatResult:
    return ChatResult(
        qid=qid,
        request_hash=request_hash,
        raw_response=None,
        reasoning=None,
        latency_ms=latency_ms,
        prompt_tokens=None,
        completion_tokens=None,
        reasoning_tokens=None,
        cost_usd=None,
        error=clean_error_text(error, secrets),
        attempts=attempts,
        finished_at=datetime.now(UTC),
    )
