"""The model client's data types, with no HTTP import: the response log, freshness checks and `oabench
status` read and write these without loading the network stack (`client.py` holds that)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from oabench_pipeline.core.provenance import Provenance

REDACTED = "***"
DEFAULT_API_KEY_HEADER = (
    "Authorization"  # sent as `Authorization: Bearer <key>`; any other name gets the raw key
)


@dataclass(frozen=True)
class EndpointConfig:
    """Where to send requests, how, and how patient to be.

    `base_url` ends before `/chat/completions` and may carry a path prefix and a query string (Azure's
    `.../openai/deployments/NAME?api-version=...`): requests go to `{base path}/chat/completions?{query}`.
    `secret_headers` are headers whose values came from the environment (`{ env = "VAR" }` in the
    registry): like the API key, they are redacted from every error text and never shown in a repr.
    """

    base_url: str
    api_key: str | None = None
    api_key_header: str = DEFAULT_API_KEY_HEADER
    extra_headers: tuple[tuple[str, str], ...] = ()
    secret_headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    max_retries: int = 6
    max_malformed_retries: int = 2
    # 429s draw on their own budget, not on `max_retries`: a rate limit says the endpoint is busy, not that
    # the question fails, and the shared limit (`capacity.SharedLimit`) makes them rare once it has adapted.
    max_rate_limited_retries: int = 30
    # A refused connection is retried this many times (a server restarting), then it is fatal.
    max_refused_retries: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    # A Retry-After beyond this is clamped: a misconfigured proxy must not park a run for hours.
    max_retry_after_s: float = 300.0
    max_response_bytes: int = 8 * 1024 * 1024
    # Size of the shared connection pool: the sum of `concurrency` of the models on this endpoint.
    max_connections: int | None = None

    @property
    def secrets(self) -> list[str]:
        """Every value that must never appear in an error text, a log line or a stored row."""
        return [s for s in (self.api_key, *(value for _, value in self.secret_headers)) if s]

    def __repr__(self) -> str:
        # Keep the key and secret headers out of reprs, which end up in logs and tracebacks.
        key = REDACTED if self.api_key else None
        return (
            f"EndpointConfig(base_url={self.base_url!r}, api_key={key!r}, "
            f"api_key_header={self.api_key_header!r}, timeout_s={self.timeout_s})"
        )


@dataclass(frozen=True)
class ChatRequest:
    """One question to ask: `body` is the full JSON payload (model, messages, parameters)."""

    qid: str
    body: dict[str, Any]
    request_hash: str


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one `ChatRequest`, after all retries.

    `raw_response` is set for the model's final answer, otherwise `error` says why. A final answer may be
    empty (`""` or whitespace): the model answered nothing on every attempt the retry budget allows; it is
    recorded as the answer (`empty_answer`), scored invalid, and asked again only on request
    (`oabench run --retry-invalid`).
    Latency, tokens, `cost_usd` and `provenance` (`response_id` ... `system_fingerprint`)
    describe the final attempt (the one the answer came from); `total_cost_usd` adds up the cost
    reported by every attempt, including discarded empty or malformed answers, because those were paid
    for too and budgets must count them. `cost_note` says why a reported cost or token count was not
    trusted (negative, not finite, beyond int64). `latency_ms` is the wall time of the final attempt, a timed-out one included.
    """

    qid: str
    request_hash: str
    raw_response: str | None
    reasoning: str | None
    latency_ms: int | None  # None only when a damaged log line lost it (`log_records.py`)
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    error: str | None
    attempts: int | None  # None, like `finished_at`, only when a damaged log line lost it
    finished_at: datetime | None
    total_cost_usd: float | None = None
    provenance: Provenance = field(default_factory=Provenance)
    cost_note: str | None = None
    batch_id: str | None = None  # the provider's batch that answered it; None for a chat completion

    @property
    def ok(self) -> bool:
        """A final answer (an empty one included): nothing a rerun needs to ask again."""
        return self.error is None and self.raw_response is not None

    @property
    def empty_answer(self) -> bool:
        """A final answer with no text: the model answered nothing on every attempt."""
        return self.ok and not (self.raw_response or "").strip()


@dataclass(frozen=True)
class RunStats:
    """What a `run_chat_requests` call did. Times are wall clock (UTC); `elapsed_s` is monotonic."""

    requested: int
    started: int
    results: int
    answered: int
    errors: int
    sent_requests: int
    retries_by_cause: dict[str, int]
    first_request_at: datetime | None
    last_response_at: datetime | None
    elapsed_s: float
    stop_reason: str | None

    @property
    def retries(self) -> int:
        return sum(self.retries_by_cause.values())


class FatalEndpointError(RuntimeError):
    """No request to this endpoint can succeed (bad key, no credits, unknown model, certificate, DNS,
    redirect, refused connection): stop the run."""

    def __init__(self, message: str, status: int | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.model = model
