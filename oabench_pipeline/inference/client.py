"""Async client for any OpenAI-compatible `/chat/completions` endpoint, with all retries and concurrency.

Design choices worth knowing:

- A pool of `concurrency` workers pulling from one queue, each owning one keep-alive connection: a
  request starts the moment a worker frees up (no batches, so one slow answer never holds back the
  others). The connection is `http_connection.KeepAliveConnection`, an asyncio protocol whose
  responses llhttp parses: `httpx.AsyncClient` cost more CPU per request than everything else here
  together, which at 64 in flight and 50 ms latency was most of the run (that module says more).
- `on_result` is called synchronously as soon as each result is known, so the caller can persist it
  before anything else happens: a paid answer is never lost because a later request failed.
- Transient failures (429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
  full jitter, waiting at least `Retry-After` when the server sends one. Malformed bodies and empty
  answers get a separate, smaller retry budget. Whatever still fails becomes a `ChatResult` with
  `error` set and `raw_response=None`: it is reported, never dropped and never taken for an answer.
- Authentication, billing and unknown-model errors are not per-question problems: they raise
  `FatalEndpointError`, which cancels the whole pool at once.
- Response size is capped (`EndpointConfig.max_response_bytes`, 8 MiB by default). A bigger body is
  not read any further and becomes an error result WITHOUT retry: the call was already paid for, and
  asking again would most likely pay for the same runaway answer. A truncated JSON body cannot be
  parsed, so nothing of it is stored.
- The API key only ever travels in the Authorization header; every error text goes through `redact`
  before it reaches an exception, a result or a log line.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

import httpx

from oabench_pipeline.inference.http_connection import HttpReply, KeepAliveConnection, PostTarget

logger = logging.getLogger(__name__)

T = TypeVar("T")


REDACTED = "***"
ERROR_TEXT_LIMIT = 500
CHAT_PATH = "/chat/completions"

# Statuses that mean "the same request may well succeed later".
TRANSIENT_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
# Statuses that mean "no request to this endpoint/model/key can succeed": stop everything.
FATAL_STATUSES: dict[int, str] = {
    401: "authentication rejected (check the API key)",
    402: "insufficient credits",
    403: "access forbidden (check the API key and its permissions)",
    404: "unknown model or endpoint",
}
# Phrases by which a 400 says the model id itself is wrong (OpenRouter, OpenAI, vLLM, Ollama).
MODEL_NOT_FOUND_HINTS = (
    "not a valid model",
    "model not found",
    "model_not_found",
    "no endpoints found",
    "does not exist",
    "unknown model",
    "invalid model",
)

RetryCause = Literal["429", "5xx", "timeout", "connection", "malformed", "empty"]


# ---------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class EndpointConfig:
    """Where to send requests and how patient to be. `base_url` ends before `/chat/completions`."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    max_retries: int = 6
    max_malformed_retries: int = 2
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    # A Retry-After beyond this is clamped: a misconfigured proxy must not park a run for hours.
    max_retry_after_s: float = 300.0
    max_response_bytes: int = 8 * 1024 * 1024

    def __repr__(self) -> str:
        # Keep the key out of reprs, which end up in logs and tracebacks.
        key = REDACTED if self.api_key else None
        return f"EndpointConfig(base_url={self.base_url!r}, api_key={key!r}, timeout_s={self.timeout_s})"


@dataclass(frozen=True)
class ChatRequest:
    """One question to ask: `body` is the full JSON payload (model, messages, parameters)."""

    qid: str
    body: dict[str, Any]
    request_hash: str


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one `ChatRequest`, after all retries.

    `raw_response` is set only for a real, non-empty answer; otherwise `error` says why.
    Latency, tokens and `cost_usd` describe the final attempt (the one the answer came from);
    `total_cost_usd` adds up the cost reported by every attempt, including discarded empty or
    malformed answers, because those were paid for too and budgets must count them.
    """

    qid: str
    request_hash: str
    raw_response: str | None
    reasoning: str | None
    latency_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None
    error: str | None
    attempts: int
    finished_at: datetime
    total_cost_usd: float | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.raw_response is not None


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
    """The endpoint refuses every request (bad key, no credits, unknown model): stop the run."""

    def __init__(self, message: str, status: int | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.model = model


# ------------------------------------------------------------------------------------------ helpers


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every secret (and `Bearer <secret>`) in `text` with `***`.

    Longest secrets first, so a secret that contains another is removed whole.
    """
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(f"Bearer {secret}", REDACTED).replace(secret, REDACTED)
    return text


def clean_error_text(text: str, secrets: Iterable[str | None], limit: int = ERROR_TEXT_LIMIT) -> str:
    """Redact, then truncate. In that order: cutting first could leave a key prefix behind."""
    redacted = redact(text, secrets)
    if len(redacted) <= limit:
        return redacted
    return redacted[:limit] + f"... [{len(redacted) - limit} more chars]"


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if absent/garbled."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def backoff_delay(endpoint: EndpointConfig, retry_number: int, retry_after_s: float | None) -> float:
    """Full-jitter exponential backoff, but never shorter than what the server asked for."""
    ceiling = min(endpoint.backoff_max_s, endpoint.backoff_base_s * (2**retry_number))
    delay = random.uniform(0.0, ceiling)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, endpoint.max_retry_after_s))
    return delay


def _message_text(content: Any) -> str | None:
    """Answer text from `message.content`, which may be a string or a list of content parts."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts)
    return None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class _Parsed:
    """The useful parts of a 200 body that had `choices`."""

    text: str | None
    reasoning: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    cost_usd: float | None


class _MalformedBody(Exception):
    """A 200 whose body is not a usable chat completion."""


class _InBodyTransientError(Exception):
    """A 200 carrying `{"error": {"code": 429|5xx}}` instead of choices (some gateways do this)."""


def parse_completion(payload: bytes) -> _Parsed:
    """Parse a chat completion body. Raises `_MalformedBody` for anything that is not one."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _MalformedBody(f"body is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise _MalformedBody(f"body is not JSON: {text[:200]!r}") from None
    if not isinstance(data, dict):
        raise _MalformedBody(f"body is JSON but not an object: {text[:200]!r}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        if isinstance(error, dict):
            code = _int_or_none(error.get("code"))
            if code is not None and code in TRANSIENT_STATUSES:
                raise _InBodyTransientError(f"in-body error {code}: {error.get('message')}")
        raise _MalformedBody(f"no choices in body: {text[:200]!r}")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise _MalformedBody("choices[0].message missing")
    # OpenRouter says `reasoning`; vLLM and DeepSeek say `reasoning_content`.
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    return _Parsed(
        text=_message_text(message.get("content")),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
        completion_tokens=_int_or_none(usage.get("completion_tokens")),
        reasoning_tokens=_int_or_none(details.get("reasoning_tokens")),
        cost_usd=_float_or_none(usage.get("cost")),
    )


def _model_from_error_body(text: str) -> str | None:
    """The model id the server complains about, if its error body names one."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            meta = error.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("model"), str):
                return meta["model"]
            if isinstance(error.get("model"), str):
                return error["model"]
    return None


def _is_model_not_found(status: int, body_text: str) -> bool:
    lowered = body_text.lower()
    return status == 400 and any(hint in lowered for hint in MODEL_NOT_FOUND_HINTS)


# ------------------------------------------------------------------------------------------ attempts


def _encode_body(body: dict[str, Any]) -> bytes:
    """The JSON payload exactly as httpx's `json=` would send it."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass
class _Tally:
    """Mutable counters shared by the workers of one run (single event loop: no locks needed)."""

    started: int = 0
    results: int = 0
    answered: int = 0
    errors: int = 0
    sent: int = 0
    retries: Counter[str] = field(default_factory=Counter)
    first_request_at: datetime | None = None
    first_request_mono: float | None = None
    last_response_at: datetime | None = None
    last_response_mono: float | None = None

    def mark_sent(self) -> None:
        self.sent += 1
        if self.first_request_mono is None:
            self.first_request_mono = time.perf_counter()
            self.first_request_at = datetime.now(UTC)

    def mark_response(self) -> None:
        self.last_response_mono = time.perf_counter()
        self.last_response_at = datetime.now(UTC)


class _Retry(Exception):
    """Internal signal: this attempt failed in a retryable way."""

    def __init__(self, cause: RetryCause, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.cause = cause
        self.detail = detail
        self.retry_after_s = retry_after_s


@dataclass
class _Attempts:
    """Per-request retry bookkeeping."""

    total: int = 0
    transient: int = 0
    malformed: int = 0
    paid_cost: float | None = None
    last_parsed: _Parsed | None = None
    last_latency_s: float = 0.0

    def add_cost(self, cost: float | None) -> None:
        if cost is not None:
            self.paid_cost = (self.paid_cost or 0.0) + cost


def _result(
    request: ChatRequest, attempts: _Attempts, *, text: str | None = None, error: str | None = None
) -> ChatResult:
    parsed = attempts.last_parsed
    return ChatResult(
        qid=request.qid,
        request_hash=request.request_hash,
        raw_response=text,
        reasoning=parsed.reasoning if parsed else None,
        latency_ms=round(attempts.last_latency_s * 1000),
        prompt_tokens=parsed.prompt_tokens if parsed else None,
        completion_tokens=parsed.completion_tokens if parsed else None,
        reasoning_tokens=parsed.reasoning_tokens if parsed else None,
        cost_usd=parsed.cost_usd if parsed else None,
        error=error,
        attempts=attempts.total,
        finished_at=datetime.now(UTC),
        total_cost_usd=attempts.paid_cost,
    )


def _fatal(endpoint: EndpointConfig, reply: HttpReply, request: ChatRequest, body_text: str) -> None:
    """Raise `FatalEndpointError` if this reply means no request can succeed."""
    status = reply.status
    if status not in FATAL_STATUSES and not _is_model_not_found(status, body_text):
        return
    model = str(request.body.get("model", "?"))
    what = FATAL_STATUSES.get(status, "unknown model")
    path = httpx.URL(endpoint.base_url.rstrip("/") + CHAT_PATH).path
    named = _model_from_error_body(body_text)
    detail = clean_error_text(body_text, [endpoint.api_key], limit=300)
    message = f"HTTP {status} {what}: model {model!r}"
    if named and named != model:
        message += f" (server names {named!r})"
    message += f", POST {path}: {detail}"
    raise FatalEndpointError(redact(message, [endpoint.api_key]), status=status, model=model)


def _interpret(
    endpoint: EndpointConfig, request: ChatRequest, reply: HttpReply, attempts: _Attempts
) -> ChatResult:
    """Turn one HTTP reply into a final result, or raise `_Retry` / `FatalEndpointError`."""
    secrets = [endpoint.api_key]
    if reply.truncated:
        # Paid for but unreadable: don't retry into the same runaway answer (see module docstring).
        return _result(
            request,
            attempts,
            error=f"response body exceeded {endpoint.max_response_bytes} bytes (HTTP {reply.status}); "
            "not stored",
        )
    body_text = reply.body.decode("utf-8", errors="replace")
    if reply.status != 200:
        _fatal(endpoint, reply, request, body_text)
        detail = f"HTTP {reply.status}: {clean_error_text(body_text, secrets)}"
        if reply.status in TRANSIENT_STATUSES:
            cause: RetryCause = "429" if reply.status == 429 else "5xx"
            raise _Retry(cause, detail, parse_retry_after(reply.header(b"retry-after")))
        # Another 4xx (e.g. context too long): a problem with this prompt only, asking again won't help.
        return _result(request, attempts, error=detail)
    try:
        parsed = parse_completion(reply.body)
    except _InBodyTransientError as exc:
        raise _Retry("5xx", clean_error_text(str(exc), secrets)) from None
    except _MalformedBody as exc:
        raise _Retry("malformed", clean_error_text(str(exc), secrets)) from None
    attempts.last_parsed = parsed
    attempts.add_cost(parsed.cost_usd)
    if parsed.text is None or not parsed.text.strip():
        raise _Retry("empty", "empty answer text")
    return _result(request, attempts, text=parsed.text)


def _classify_transport_error(exc: Exception) -> RetryCause | None:
    """Which retry bucket a transport exception falls into; None for bugs that must propagate."""
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timeout"
    # ConnectError, ReadError, WriteError, RemoteProtocolError, ...
    if isinstance(exc, httpx.TransportError):
        return "connection"
    return None


async def _ask(
    connection: KeepAliveConnection, endpoint: EndpointConfig, request: ChatRequest, tally: _Tally
) -> ChatResult:
    """Send one request until it yields a result, retrying within the configured budgets."""
    attempts = _Attempts()
    secrets = [endpoint.api_key]
    content = _encode_body(request.body)
    while True:
        attempts.total += 1
        tally.mark_sent()
        try:
            reply = await connection.post(content, endpoint.max_response_bytes, endpoint.timeout_s)
            tally.mark_response()
            attempts.last_latency_s = reply.latency_s
            return _interpret(endpoint, request, reply, attempts)
        except _Retry as retry:
            failure = retry
        except Exception as exc:
            cause = _classify_transport_error(exc)
            if cause is None:
                raise
            tally.mark_response()
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            failure = _Retry(cause, clean_error_text(detail, secrets))
        malformed = failure.cause in ("malformed", "empty")
        used = attempts.malformed if malformed else attempts.transient
        budget = endpoint.max_malformed_retries if malformed else endpoint.max_retries
        if used >= budget:
            return _result(
                request, attempts, error=f"gave up after {attempts.total} attempts: {failure.detail}"
            )
        if malformed:
            attempts.malformed += 1
        else:
            attempts.transient += 1
        tally.retries[failure.cause] += 1
        delay = backoff_delay(endpoint, used, failure.retry_after_s)
        logger.info("retrying %s in %.2fs (%s): %s", request.qid, delay, failure.cause, failure.detail)
        await asyncio.sleep(delay)


# -------------------------------------------------------------------------------------------- the pool


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on a fresh event loop: uvloop's when installed, else asyncio's.

    Against a loopback server at 64 in flight, uvloop's cheaper loop turns and socket writes are worth
    several points of throughput; with real providers (seconds per answer) either loop is fine.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


async def run_chat_requests(
    endpoint: EndpointConfig,
    requests: Sequence[ChatRequest],
    concurrency: int,
    on_result: Callable[[ChatResult], None],
    should_stop: Callable[[], str | None] | None = None,
) -> RunStats:
    """Send `requests` with exactly `concurrency` in flight, reporting each result as it arrives.

    `should_stop` is polled before each new request starts; once it returns a reason no new request
    is launched, in-flight ones finish and are reported. A `FatalEndpointError` (or an exception from
    `on_result`) cancels every in-flight request and propagates; results already delivered stay so.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    tally = _Tally()
    queue: asyncio.Queue[ChatRequest] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    stop_reason: list[str] = []

    target = PostTarget(
        endpoint.base_url.rstrip("/") + CHAT_PATH, endpoint.api_key, endpoint.connect_timeout_s
    )

    async def worker() -> None:
        connection = KeepAliveConnection(target)
        try:
            await work(connection)
        finally:
            connection.close()

    async def work(connection: KeepAliveConnection) -> None:
        while not stop_reason:
            if should_stop is not None and (reason := should_stop()):
                stop_reason.append(reason)
                return
            try:
                request = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            tally.started += 1
            result = await _ask(connection, endpoint, request, tally)
            tally.results += 1
            if result.ok:
                tally.answered += 1
            else:
                tally.errors += 1
            on_result(result)

    workers = min(concurrency, max(1, len(requests)))
    tasks: list[asyncio.Task[None]] = []
    try:
        for _ in range(workers):
            tasks.append(asyncio.create_task(worker()))
            # One loop turn per worker start: the first workers' requests go out while later
            # connections are still being opened, instead of every request waiting behind all C
            # connection setups (~10 ms at C=64 on loopback). Against a remote endpoint a loop turn
            # costs microseconds.
            await asyncio.sleep(0)
    except BaseException:
        await _cancel_all(tasks)  # cancelled while starting: take the started workers down too
        raise
    await _wait_all_or_first_error(tasks)

    elapsed = 0.0
    if tally.first_request_mono is not None and tally.last_response_mono is not None:
        elapsed = tally.last_response_mono - tally.first_request_mono
    return RunStats(
        requested=len(requests),
        started=tally.started,
        results=tally.results,
        answered=tally.answered,
        errors=tally.errors,
        sent_requests=tally.sent,
        retries_by_cause=dict(tally.retries),
        first_request_at=tally.first_request_at,
        last_response_at=tally.last_response_at,
        elapsed_s=elapsed,
        stop_reason=stop_reason[0] if stop_reason else None,
    )


async def _wait_all_or_first_error(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for every task; on the first exception cancel the others and re-raise that exception."""
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        await _cancel_all(tasks)  # we were cancelled ourselves: take the workers down with us
        raise
    await _cancel_all(pending)
    # Several workers may hit the same fatal error at once: retrieve every exception (so asyncio does
    # not log "never retrieved"), raise the first.
    errors = [exc for task in done if not task.cancelled() and (exc := task.exception()) is not None]
    if errors:
        raise errors[0]


async def _cancel_all(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel `tasks` and wait until each has finished unwinding."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
