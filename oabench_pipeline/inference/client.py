"""Async client for any OpenAI-compatible `/chat/completions` endpoint, with all retries and concurrency.

Design choices worth knowing:

- HTTP is httpx: one `httpx.AsyncClient` per endpoint, shared by every worker, whose pool (`httpx.Limits`)
  is sized to the sum of `concurrency` of the models on that endpoint. httpx gives what real endpoints
  need and a hand-written client kept getting wrong: proxies, `NO_PROXY`, `SSL_CERT_FILE`/`SSL_CERT_DIR`
  from the environment (`trust_env=True`, and no `transport=`, which would turn env proxies off), gzip
  and deflate replies (brotli and zstd too when their packages are installed), bracketed IPv6 `Host`
  headers, keep-alive connections that a server closed while idle dropped before reuse.
- A pool of `concurrency` workers pulling from one queue: a request starts the moment a worker frees up
  (no batches, so one slow answer never holds back the others).
- `on_result` is called synchronously as soon as each result is known, so the caller can persist it
  before anything else happens: a paid answer is never lost because a later request failed.
- Transient failures (429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
  full jitter, waiting at least `Retry-After` when the server sends one. A 429 draws on a budget of its
  own (`max_rate_limited_retries`), never on the question's attempts, and lowers the limit shared by
  every cell on the endpoint's host (`capacity.SharedLimit`, held per attempt). Malformed bodies (anything the
  client cannot decode: not JSON, not UTF-8, nested too deep, ...) and empty answers get a separate,
  smaller retry budget. Whatever still fails becomes a `ChatResult` with `error` set and
  `raw_response=None`: it is reported, never dropped and never taken for an answer. An answer still
  empty after that budget is the model's final answer: `raw_response=""` (or its whitespace), no
  `error`, so it is recorded, scored invalid, and not paid for again by a rerun.
- Errors no retry can fix raise `FatalEndpointError`, which cancels the whole pool at once: a rejected
  key, no credits, an unknown model, a TLS certificate that fails verification, a host name that does
  not resolve, a redirect (usually a wrong `base_url`), a connection still refused after a few tries,
  and a server error (5xx) that every request of the first round kept getting until it gave up, with
  no answer in between (`_FirstRound`): the rest of the cell would only wait out the same retries.
  429s, and 5xx among answers, are retried patiently as before.
- Cost: `usage.cost` when it is a finite number >= 0, else a gateway's cost header (LiteLLM's
  `x-litellm-response-cost`), else NULL. A negative or non-finite cost is never summed: it is stored as
  NULL with a `cost_note`. Every reply received counts towards the paid cost, even one that fails to parse.
  A token count no Int64 column holds (negative, beyond 2^63 - 1) is NULL, with a `cost_note` too.
- Response size is capped (`EndpointConfig.max_response_bytes`, 8 MiB by default, after decoding). A
  bigger body is not read any further and becomes an error result WITHOUT retry: the call was already
  paid for, and asking again would most likely pay for the same runaway answer.
- The API key travels only in its header (`Authorization: Bearer` or the registry's `api_key_header`);
  it and the secret extra headers are redacted from every error text before it reaches an exception,
  a result or a log line.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import socket
import ssl
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from oabench_pipeline.core.http_status import TRANSIENT_STATUSES
from oabench_pipeline.core.provenance import Provenance
from oabench_pipeline.inference.capacity import Capacity, all_slots
from oabench_pipeline.inference.redaction import redact
from oabench_pipeline.inference.types import (
    ChatRequest,
    ChatResult,
    EndpointConfig,
    FatalEndpointError,
    RunStats,
)

__all__ = [
    "ChatRequest",
    "ChatResult",
    "EndpointConfig",
    "FatalEndpointError",
    "RunStats",
    "chat_url",
    "clean_error_text",
    "new_http_client",
    "parse_retry_after",
    "redact",
    "run_blocking",
    "run_chat_requests",
]

# httpx (~0.1 s to import, with its command line's rich and pygments) is imported inside the functions that
# build a client or sort its errors: every run's process loads this module with the Dagster definitions, and
# only a cell that sends requests uses them.
if TYPE_CHECKING:
    import httpx

    # the gate's module reads prices and the warehouse: not loaded with the client
    from oabench_pipeline.inference.reservations import SpendGate

logger = logging.getLogger(__name__)

T = TypeVar("T")

MAX_TOKEN_COUNT = 2**63 - 1  # the `inferences` table's Int64 columns hold no more
ERROR_TEXT_LIMIT = 300  # an error body is kept as a short excerpt, never whole
BODY_EXCERPT_LIMIT = 200  # what a malformed 200 body shows of itself
CHAT_PATH = "/chat/completions"
KEEPALIVE_EXPIRY_S = 5.0  # httpx's default: an idle connection older than this is not reused
USER_AGENT = "oabench-pipeline"
STOP_POLL_S = 0.25  # how often a retry's backoff checks `should_stop`

# Statuses that mean "no request to this endpoint/model/key can succeed": stop everything.
FATAL_STATUSES: dict[int, str] = {
    401: "authentication rejected (check the API key)",
    402: "insufficient credits",
    403: "access forbidden (check the API key and its permissions)",
    404: "unknown model or endpoint",
}
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
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
# Headers by which gateways report what a reply cost, read when the body has no usable `usage.cost`.
COST_HEADERS = ("x-litellm-response-cost",)

RetryCause = Literal["429", "5xx", "timeout", "connection", "refused", "malformed", "empty"]


# ------------------------------------------------------------------------------------------ helpers


def clean_error_text(text: str, secrets: Iterable[str | None], limit: int = ERROR_TEXT_LIMIT) -> str:
    """A short, one-line, redacted excerpt: redact, collapse whitespace, then truncate. In that order:
    cutting first could leave part of a key (or of its base64) behind, unrecognisable to `redact`."""
    redacted = " ".join(redact(text, secrets).split())
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


def _token_count(usage: dict[str, Any], name: str, notes: list[str]) -> int | None:
    """A reported token count, or None; a count no table column can hold (negative, or beyond int64, as
    `10**400`) is refused with a note: stored, it would fail the cell's Parquet write on every rerun."""
    value = _int_or_none(usage.get(name))
    if value is None or 0 <= value <= MAX_TOKEN_COUNT:
        return value
    shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:12]}... ({len(str(value))} digits)"
    why = "is negative" if value < 0 else "is beyond a 64-bit integer"
    notes.append(f"usage.{name} {shown} {why}: stored as NULL")
    return None


def _number_or_none(value: Any) -> float | None:
    """A JSON number, or a header's decimal text, as a float; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def trusted_cost(body_cost: Any, headers: httpx.Headers | None) -> tuple[float | None, str | None]:
    """(cost, note): `usage.cost` if finite and >= 0, else a known cost header, else None.

    The note says which reported value was refused and why; a refused value is never summed, so a
    negative or NaN cost cannot defeat `max_cost_usd` or reach the warehouse.
    """
    candidates: list[tuple[str, Any]] = [("usage.cost", body_cost)]
    if headers is not None:
        candidates += [(f"header {name}", headers.get(name)) for name in COST_HEADERS]
    refused: list[str] = []
    for source, raw in candidates:
        if raw is None:
            continue
        value = _number_or_none(raw)
        if value is None:
            refused.append(f"{source} {raw!r} is not a number")
        elif not math.isfinite(value):
            refused.append(f"{source} {raw!r} is not finite")
        elif value < 0:
            refused.append(f"{source} {raw!r} is negative")
        else:
            return value, ("; ".join(refused) + f"; used {source}") if refused else None
    return None, ("; ".join(refused) + ": cost stored as NULL") if refused else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class _Parsed:
    """The useful parts of a 200 body that had `choices`; `reported_cost` is `usage.cost` as sent."""

    text: str | None
    reasoning: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    reported_cost: Any
    provenance: Provenance = field(default_factory=Provenance)
    usage_notes: tuple[str, ...] = ()
    """Reported token counts refused (negative, beyond int64), each stored as NULL."""


class _MalformedBody(Exception):
    """A 200 whose body is not a usable chat completion. `show_body`: the message is worth an excerpt of
    the body (added, redacted, by the caller: the parser does not know the secrets)."""

    def __init__(self, message: str, show_body: bool = False) -> None:
        super().__init__(message)
        self.show_body = show_body


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
        raise _MalformedBody("body is not JSON", show_body=True) from None
    except RecursionError:  # `[[[[...` thousands deep: Python's decoder gives up, as it must
        raise _MalformedBody("body is JSON nested too deep to decode") from None
    if not isinstance(data, dict):
        raise _MalformedBody("body is JSON but not an object", show_body=True)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        error = data.get("error")
        if isinstance(error, dict):
            code = _int_or_none(error.get("code"))
            if code is not None and code in TRANSIENT_STATUSES:
                raise _InBodyTransientError(f"in-body error {code}: {error.get('message')}")
        raise _MalformedBody("no choices in body", show_body=True)
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise _MalformedBody("choices[0].message missing")
    # OpenRouter says `reasoning`; vLLM and DeepSeek say `reasoning_content`.
    reasoning = message.get("reasoning") or message.get("reasoning_content")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    notes: list[str] = []
    return _Parsed(
        text=_message_text(message.get("content")),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        prompt_tokens=_token_count(usage, "prompt_tokens", notes),
        completion_tokens=_token_count(usage, "completion_tokens", notes),
        reasoning_tokens=_token_count(details, "reasoning_tokens", notes),
        reported_cost=usage.get("cost"),
        usage_notes=tuple(notes),
        provenance=Provenance(
            response_id=_str_or_none(data.get("id")),
            response_model=_str_or_none(data.get("model")),
            finish_reason=_str_or_none(first.get("finish_reason")),
            # OpenRouter names the upstream provider that served the request.
            response_provider=_str_or_none(data.get("provider")),
            system_fingerprint=_str_or_none(data.get("system_fingerprint")),
        ),
    )


def _usage_cost_of(payload: bytes) -> Any:
    """`usage.cost` of a JSON body that is not a usable completion (e.g. empty `choices`), if it has one."""
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    usage = data.get("usage") if isinstance(data, dict) else None
    return usage.get("cost") if isinstance(usage, dict) else None


def _model_from_error_body(text: str) -> str | None:
    """The model id the server complains about, if its error body names one."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
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
# --------------------------------------------------------------------------------------------- HTTP


def chat_url(base_url: str) -> httpx.URL:
    """`{base path}/chat/completions?{query}`: a path prefix and a query string (Azure) are kept."""
    import httpx

    base = httpx.URL(base_url)
    return base.copy_with(path=base.path.rstrip("/") + CHAT_PATH)


def request_headers(endpoint: EndpointConfig) -> dict[str, str]:
    """Static headers of every request: extra headers, then the key in its header (which wins)."""
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    headers.update(dict(endpoint.extra_headers))
    headers.update(dict(endpoint.secret_headers))
    for value in (endpoint.api_key, *(v for _, v in endpoint.secret_headers)):
        if value is not None and not value.isprintable():
            # A CR/LF would smuggle extra headers into every request. The value itself is not echoed.
            raise ValueError("the API key or a secret header value contains control characters")
    if endpoint.api_key:
        if endpoint.api_key_header.lower() == "authorization":
            headers[endpoint.api_key_header] = f"Bearer {endpoint.api_key}"
        else:  # Azure's `api-key`, and gateways alike, take the raw key
            headers[endpoint.api_key_header] = endpoint.api_key
    return headers


def new_http_client(endpoint: EndpointConfig, concurrency: int) -> httpx.AsyncClient:
    """The endpoint's client: a keep-alive pool big enough that no worker ever waits for a connection.

    `trust_env=True` and no `transport=`: httpx then reads HTTP(S)_PROXY/ALL_PROXY/NO_PROXY and
    SSL_CERT_FILE/SSL_CERT_DIR. Redirects are not followed: a POST redirected is a wrong `base_url`.
    """
    import httpx

    size = max(concurrency, endpoint.max_connections or 0)
    return httpx.AsyncClient(
        headers=request_headers(endpoint),
        timeout=httpx.Timeout(endpoint.timeout_s, connect=endpoint.connect_timeout_s),
        limits=httpx.Limits(
            max_connections=size, max_keepalive_connections=size, keepalive_expiry=KEEPALIVE_EXPIRY_S
        ),
        trust_env=True,
        follow_redirects=False,
    )


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes  # decoded (gzip, deflate, ...)
    latency_s: float
    truncated: bool  # the body exceeded the cap: what is in `body` is incomplete


async def _post(
    client: httpx.AsyncClient, url: httpx.URL, content: bytes, endpoint: EndpointConfig
) -> _Reply:
    """One POST, read up to the size cap, all within `timeout_s` (connecting included)."""
    started = time.perf_counter()
    chunks: list[bytes] = []
    size = 0
    truncated = False
    async with asyncio.timeout(endpoint.timeout_s):
        async with client.stream("POST", url, content=content) as response:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > endpoint.max_response_bytes:
                    truncated = True  # leaving the block closes the connection, unread
                    break
                chunks.append(chunk)
    return _Reply(
        status=response.status_code,
        headers=response.headers,
        body=b"".join(chunks),
        latency_s=time.perf_counter() - started,
        truncated=truncated,
    )


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
    """Internal signal: this attempt failed in a retryable way (`status`: the HTTP status that said so)."""

    def __init__(
        self,
        cause: RetryCause,
        detail: str,
        retry_after_s: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(detail)
        self.cause = cause
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.status = status


class _StoppedWaiting(Exception):
    """Internal signal: `should_stop` said stop while an attempt waited for the endpoint's limit; nothing
    was sent."""


class _Refused(Exception):
    """Internal signal: the spend gate would not hold budget for the next attempt (or a stop came while it
    waited); nothing was sent, and the cell stops for `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _FirstRound:
    """The first `size` requests of a pool: when each gave up on an HTTP 5xx and no request was answered
    meanwhile, the endpoint answers nothing but that error, and the cell stops (like a refused connection)
    instead of waiting out every other request's retries. Any answer, or a request ending otherwise,
    disarms it: 5xx among answers are retried patiently."""

    size: int
    failed: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    gave_up_on: set[str] = field(default_factory=set)
    """The request hashes that gave up on a 5xx."""
    disarmed: bool = False
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once disarmed: a worker whose first-round request gave up waits for it before sending more."""

    def disarm(self) -> None:
        self.disarmed = True
        self.decided.set()

    def gave_up(
        self, url: httpx.URL, request: ChatRequest, status: int, attempts: int, secrets: Sequence[str]
    ) -> None:
        """One first-round request gave up on `status`; raise `FatalEndpointError` when it was the last."""
        self.gave_up_on.add(request.request_hash)
        if self.disarmed:
            return
        self.failed += 1
        self.statuses[status] += 1
        if self.failed < self.size:
            return
        self.disarm()  # raised once, by the last of them
        common = self.statuses.most_common(1)[0][0]
        raise FatalEndpointError(
            clean_error_text(
                f"POST {url}: {url.host}:{url.port or 'default port'} keeps answering HTTP {common}: every "
                f"request of the first round ({self.size}) got it on all {attempts} attempts and none was "
                "answered; is the server healthy (its logs or status page)? Rerun once it answers",
                secrets,
            ),
            status=common,
        )


@dataclass
class _Attempts:
    """Per-request retry bookkeeping."""

    total: int = 0
    transient: int = 0
    malformed: int = 0
    refused: int = 0
    rate_limited: int = 0
    paid_cost: float | None = None
    last_parsed: _Parsed | None = None
    last_cost: float | None = None
    cost_notes: list[str] = field(default_factory=list)
    last_latency_s: float = 0.0
    attempt_cost: float | None = None
    """What the current attempt's reply reported it cost (None: no reply yet, or none reported)."""

    def add_cost(self, cost: float | None, note: str | None) -> None:
        """Count what one reply cost (every reply received, parsed or not)."""
        self.last_cost = cost
        self.attempt_cost = cost
        if note:
            self.cost_notes.append(note)
        if cost is not None:
            self.paid_cost = (self.paid_cost or 0.0) + cost


def _result(
    request: ChatRequest,
    attempts: _Attempts,
    secrets: Sequence[str],
    *,
    text: str | None = None,
    error: str | None = None,
) -> ChatResult:
    """The final result of a request; every text in it redacted (an answer, a reasoning, a provider name
    or a reported cost can echo the key as well as an error body can)."""
    parsed = attempts.last_parsed

    def clean(value: str | None) -> str | None:
        return redact(value, secrets) if value else value

    provenance = parsed.provenance if parsed else Provenance()
    notes = [*attempts.cost_notes, *(parsed.usage_notes if parsed else ())]
    return ChatResult(
        qid=request.qid,
        request_hash=request.request_hash,
        raw_response=clean(text),
        reasoning=clean(parsed.reasoning) if parsed else None,
        latency_ms=round(attempts.last_latency_s * 1000),
        prompt_tokens=parsed.prompt_tokens if parsed else None,
        completion_tokens=parsed.completion_tokens if parsed else None,
        reasoning_tokens=parsed.reasoning_tokens if parsed else None,
        cost_usd=attempts.last_cost,
        error=clean(error),
        attempts=attempts.total,
        finished_at=datetime.now(UTC),
        total_cost_usd=attempts.paid_cost,
        provenance=Provenance(**{k: clean(v) for k, v in provenance.columns().items()}),
        # What was refused of the reported usage goes with the cost's notes (tokens price a reply too).
        cost_note=clean("; ".join(dict.fromkeys(notes)) or None),
    )


def _fatal_status(
    endpoint: EndpointConfig, url: httpx.URL, reply: _Reply, request: ChatRequest, body_text: str
) -> None:
    """Raise `FatalEndpointError` if this reply means no request can succeed."""
    status = reply.status
    secrets = endpoint.secrets
    if status in REDIRECT_STATUSES:
        location = reply.headers.get("location", "(no Location header)")
        message = (
            f"HTTP {status} redirect of POST {url.path} to {location}: the base_url is probably wrong "
            f"(a POST is not followed); set base_url to where it points"
        )
        raise FatalEndpointError(clean_error_text(message, secrets), status=status)
    if status not in FATAL_STATUSES and not _is_model_not_found(status, body_text):
        return
    model = str(request.body.get("model", "?"))
    what = FATAL_STATUSES.get(status, "unknown model")
    named = _model_from_error_body(body_text)
    detail = clean_error_text(body_text, secrets, limit=300)
    message = f"HTTP {status} {what}: model {model!r}"
    if named and named != model:
        message += f" (server names {named!r})"
    message += f", POST {url.path}: {detail}"
    raise FatalEndpointError(redact(message, secrets), status=status, model=model)


def _interpret(
    endpoint: EndpointConfig, url: httpx.URL, request: ChatRequest, reply: _Reply, attempts: _Attempts
) -> ChatResult:
    """Turn one HTTP reply into a final result, or raise `_Retry` / `FatalEndpointError`."""
    secrets = endpoint.secrets
    if reply.truncated:
        # Paid for but unreadable: don't retry into the same runaway answer (see module docstring).
        attempts.add_cost(*trusted_cost(None, reply.headers))
        return _result(
            request,
            attempts,
            secrets,
            error=f"response body exceeded {endpoint.max_response_bytes} bytes (HTTP {reply.status}); "
            "not stored",
        )
    body_text = reply.body.decode("utf-8", errors="replace")
    if reply.status != 200:
        attempts.add_cost(*trusted_cost(None, reply.headers))
        _fatal_status(endpoint, url, reply, request, body_text)
        detail = f"HTTP {reply.status}: {clean_error_text(body_text, secrets)}"
        if reply.status in TRANSIENT_STATUSES:
            cause: RetryCause = "429" if reply.status == 429 else "5xx"
            retry_after = parse_retry_after(reply.headers.get("retry-after"))
            raise _Retry(cause, detail, retry_after, status=reply.status)
        # Another 4xx (e.g. context too long): a problem with this prompt only, asking again won't help.
        return _result(request, attempts, secrets, error=detail)
    try:
        parsed = parse_completion(reply.body)
    except _InBodyTransientError as exc:
        attempts.add_cost(*trusted_cost(None, reply.headers))
        raise _Retry("5xx", clean_error_text(str(exc), secrets)) from None
    except _MalformedBody as exc:
        # Unusable, but maybe billed: whatever cost the body or a gateway header reports still counts.
        attempts.add_cost(*trusted_cost(_usage_cost_of(reply.body), reply.headers))
        detail = str(exc)
        if exc.show_body:
            detail += f": {clean_error_text(body_text, secrets, limit=BODY_EXCERPT_LIMIT)!r}"
        raise _Retry("malformed", clean_error_text(detail, secrets)) from None
    attempts.last_parsed = parsed
    attempts.add_cost(*trusted_cost(parsed.reported_cost, reply.headers))
    if parsed.text is None or not parsed.text.strip():
        raise _Retry("empty", "empty answer text")
    return _result(request, attempts, secrets, text=parsed.text)


def _interpret_or_malformed(
    endpoint: EndpointConfig, url: httpx.URL, request: ChatRequest, reply: _Reply, attempts: _Attempts
) -> ChatResult:
    """`_interpret`, where a reply it fails to decode for a reason not foreseen there is a malformed reply
    (retried within the attempts, then an error row), never an exception: raised, it would cancel the
    whole pool, and every paid reply still in flight would be lost."""
    try:
        return _interpret(endpoint, url, request, reply, attempts)
    except (_Retry, FatalEndpointError):
        raise
    except Exception as exc:
        logger.warning("reply to %s could not be decoded: %s", request.qid, type(exc).__name__, exc_info=True)
        detail = f"reply could not be decoded ({type(exc).__name__}: {exc})"
        raise _Retry("malformed", clean_error_text(detail, endpoint.secrets)) from None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, what caused it, and the members of exception groups, depth first."""
    seen: set[int] = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                stack.append(linked)


def _fatal_transport_problem(exc: BaseException, url: httpx.URL) -> str | None:
    """A one-line reason when a transport error cannot be fixed by retrying: certificate or DNS."""
    causes = list(_causes(exc))
    texts = " ".join(str(c) for c in causes)
    host = url.host
    if (
        any(isinstance(c, ssl.SSLCertVerificationError) for c in causes)
        or "CERTIFICATE_VERIFY_FAILED" in texts
    ):
        reason = next((c for c in causes if isinstance(c, ssl.SSLCertVerificationError)), None)
        why = getattr(reason, "verify_message", None) or "verification failed"
        return (
            f"the TLS certificate of {host} failed verification ({why}); if a private CA or a "
            f"TLS-inspecting proxy signs it, point SSL_CERT_FILE or SSL_CERT_DIR at its CA certificate"
        )
    if any(isinstance(c, socket.gaierror) for c in causes):
        return f"the host name {host!r} does not resolve (DNS lookup failed): check the model's base_url"
    return None


def _transport_detail(exc: Exception, cause: RetryCause, endpoint: EndpointConfig) -> str:
    """What went wrong with one attempt, in words: a timeout names the deadline and where it is set."""
    import httpx

    if cause == "timeout":
        if isinstance(exc, httpx.ConnectTimeout):
            return f"no connection within the connect timeout of {endpoint.connect_timeout_s:g} s"
        return (
            f"deadline OABENCH_MODEL_TIMEOUT_S={endpoint.timeout_s:g} s passed before the reply was complete"
        )
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _is_refused(exc: BaseException) -> bool:
    return any(
        isinstance(c, ConnectionRefusedError) or "connection refused" in str(c).lower() for c in _causes(exc)
    )


def _classify_transport_error(exc: Exception) -> RetryCause | None:
    """Which retry bucket a transport exception falls into; None for bugs that must propagate."""
    import httpx

    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.DecodingError):  # e.g. a body labelled gzip that is not
        return "malformed"
    if isinstance(exc, httpx.ConnectError) and _is_refused(exc):
        return "refused"
    # ConnectError, ReadError, WriteError, RemoteProtocolError, ProxyError, ...
    if isinstance(exc, httpx.TransportError):
        return "connection"
    return None


def _budget(endpoint: EndpointConfig, attempts: _Attempts, cause: RetryCause) -> tuple[int, int]:
    """(retries used, retries allowed) of the bucket `cause` draws on."""
    if cause in ("malformed", "empty"):
        return attempts.malformed, endpoint.max_malformed_retries
    if cause == "refused":
        return attempts.refused, endpoint.max_refused_retries
    if cause == "429":
        return attempts.rate_limited, endpoint.max_rate_limited_retries
    return attempts.transient, endpoint.max_retries


def _spend(attempts: _Attempts, cause: RetryCause) -> None:
    if cause in ("malformed", "empty"):
        attempts.malformed += 1
    elif cause == "refused":
        attempts.refused += 1
    elif cause == "429":
        attempts.rate_limited += 1
    else:
        attempts.transient += 1


@asynccontextmanager
async def _throttled(throttles: Sequence[Capacity]) -> AsyncIterator[list[int]]:
    """Hold a slot of each adaptive capacity for one attempt; yields the limits' epochs when taken."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(throttle.slot()) for throttle in throttles]


async def _ask(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    request: ChatRequest,
    tally: _Tally,
    should_stop: Callable[[], str | None] | None = None,
    first_round: _FirstRound | None = None,
    gate: SpendGate | None = None,
    throttles: Sequence[Capacity] = (),
) -> ChatResult | None:
    """Send one request until it yields a result, retrying within the configured budgets.

    None: a retry was due when `should_stop` said stop; the request is dropped unanswered (not sent again).
    `first_round`: this request is one of the pool's first round (see `_FirstRound`). `gate`: budget is
    held before each attempt and settled after it (`reservations.py`); raises `_Refused` when it is not.
    `throttles`: adaptive capacities (an endpoint's rate limit) each attempt holds a slot of, and tells
    what the endpoint answered.
    """
    attempts = _Attempts()
    secrets = endpoint.secrets
    url = chat_url(endpoint.base_url)
    content = _encode_body(request.body)
    while True:
        hold = await gate.hold(request, should_stop) if gate is not None else None
        if isinstance(hold, str):
            raise _Refused(hold)
        attempts.total += 1
        attempts.attempt_cost = None
        parsed_before = attempts.last_parsed
        started = time.perf_counter()
        try:
            async with _throttled(throttles) as epochs:
                if throttles and should_stop is not None and should_stop():
                    raise _StoppedWaiting  # the wait for the endpoint may have been long
                tally.mark_sent()
                started = time.perf_counter()
                reply = await _post(client, url, content, endpoint)
            for throttle, epoch in zip(throttles, epochs, strict=True):
                throttle.observe(reply.status, epoch)
            tally.mark_response()
            attempts.last_latency_s = reply.latency_s
            return _interpret_or_malformed(endpoint, url, request, reply, attempts)
        except _StoppedWaiting:
            return None
        except _Retry as retry:
            failure = retry
        except Exception as exc:
            cause = _classify_transport_error(exc)
            if cause is None:
                raise
            tally.mark_response()
            attempts.last_latency_s = time.perf_counter() - started  # a timed-out attempt took this long
            problem = _fatal_transport_problem(exc, url)
            if problem is not None:
                raise FatalEndpointError(clean_error_text(f"POST {url}: {problem}", secrets)) from None
            failure = _Retry(cause, clean_error_text(_transport_detail(exc, cause, endpoint), secrets))
        finally:
            if gate is not None and hold is not None:
                parsed = attempts.last_parsed if attempts.last_parsed is not parsed_before else None
                tokens = (parsed.prompt_tokens, parsed.completion_tokens) if parsed is not None else None
                gate.settle(request, hold, attempts.attempt_cost, tokens)
        used, allowed = _budget(endpoint, attempts, failure.cause)
        if used >= allowed:
            if failure.cause == "refused":
                raise FatalEndpointError(
                    clean_error_text(
                        f"POST {url}: connection refused by {url.host}:{url.port or 'default port'} "
                        f"{attempts.total} times; is the server running and base_url right?",
                        secrets,
                    )
                )
            if failure.cause == "empty":
                # The model's answer, given every time: final, recorded (invalid, scored wrong), not an
                # error a rerun would pay for again. `oabench run --retry-invalid` asks it again.
                parsed = attempts.last_parsed
                return _result(request, attempts, secrets, text=(parsed.text if parsed else None) or "")
            if first_round is not None and failure.cause == "5xx" and failure.status is not None:
                first_round.gave_up(url, request, failure.status, attempts.total, secrets)
            return _result(
                request, attempts, secrets, error=f"gave up after {attempts.total} attempts: {failure.detail}"
            )
        _spend(attempts, failure.cause)
        tally.retries[failure.cause] += 1
        delay = backoff_delay(endpoint, used, failure.retry_after_s)
        logger.info("retrying %s in %.2fs (%s): %s", request.qid, delay, failure.cause, failure.detail)
        if not await _sleep_unless_stopped(delay, should_stop):
            return None


async def _sleep_unless_stopped(delay: float, should_stop: Callable[[], str | None] | None) -> bool:
    """Wait `delay` seconds; False as soon as `should_stop` gives a reason (checked every 0.25 s)."""
    deadline = time.monotonic() + delay
    while True:
        if should_stop is not None and should_stop():
            return False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return True
        await asyncio.sleep(min(remaining, STOP_POLL_S))


# -------------------------------------------------------------------------------------------- the pool


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on a fresh asyncio event loop (the Dagster step is synchronous)."""
    return asyncio.run(coro)


async def run_chat_requests(
    endpoint: EndpointConfig,
    requests: Sequence[ChatRequest],
    concurrency: int,
    on_result: Callable[[ChatResult], None],
    should_stop: Callable[[], str | None] | None = None,
    client: httpx.AsyncClient | None = None,
    capacity: Sequence[Capacity] = (),
    gate: SpendGate | None = None,
) -> RunStats:
    """Send `requests` with exactly `concurrency` in flight, reporting each result as it arrives.

    `should_stop` is polled before each new request starts and during each retry's backoff; once it
    returns a reason nothing more is sent (a request waiting to be retried is dropped, unreported),
    in-flight ones finish and are reported. A `FatalEndpointError` cancels every in-flight request and
    propagates; results already delivered stay so. An exception from `on_result` stops sending as
    `should_stop` does, never cancels: the requests in flight are paid for, so they finish and are handed
    to `on_result` too, and the first such exception propagates once the pool has drained.
    `client`: the endpoint's shared `httpx.AsyncClient` when the caller runs several cells on one
    loop; by default one is opened for this call (`new_http_client`) and closed at its end.
    `capacity`: slots shared with the other cells of the model key and endpoint host (`capacity.py`);
    each request holds one of each while in flight (an adaptive one, a host's rate limit, per attempt), so
    `concurrency` here only bounds this cell.
    `gate`: the budget each attempt holds before it is sent (`reservations.py`); when it cannot be held,
    nothing more is sent and `RunStats.stop_reason` says why, as for `should_stop`.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if client is None:
        async with new_http_client(endpoint, concurrency) as own_client:
            return await _run_pool(
                own_client, endpoint, requests, concurrency, on_result, should_stop, capacity, gate
            )
    return await _run_pool(client, endpoint, requests, concurrency, on_result, should_stop, capacity, gate)


async def _run_pool(
    client: httpx.AsyncClient,
    endpoint: EndpointConfig,
    requests: Sequence[ChatRequest],
    concurrency: int,
    on_result: Callable[[ChatResult], None],
    should_stop: Callable[[], str | None] | None,
    capacity: Sequence[Capacity] = (),
    gate: SpendGate | None = None,
) -> RunStats:
    tally = _Tally()
    queue: asyncio.Queue[ChatRequest] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    stop_reason: list[str] = []
    callback_errors: list[Exception] = []

    def stopping() -> str | None:
        """`should_stop`, or the failure of `on_result`: either way nothing more is sent."""
        if callback_errors:
            error = callback_errors[0]
            return f"handling a reply failed ({type(error).__name__}: {error})"
        return should_stop() if should_stop is not None else None

    def deliver(result: ChatResult) -> None:
        try:
            on_result(result)
        except Exception as error:  # a paid reply's handler failed: stop sending, cancel nothing
            callback_errors.append(error)

    workers = min(concurrency, max(1, len(requests)))
    first_round = _FirstRound(size=min(workers, len(requests)))
    # A request holds its model key's slots from its first attempt until its reply is saved; an endpoint's
    # adaptive limit only while an attempt is in flight (a backoff leaves it to a request that can go).
    held = [c for c in capacity if c.shared_limit is None]
    throttles = [c for c in capacity if c.shared_limit is not None]

    async def worker() -> None:
        while not stop_reason:
            if reason := stopping():
                stop_reason.append(reason)
                return
            if queue.empty():
                return
            async with all_slots(held):
                # Asked again once the shared slots are ours: the wait may have been long.
                if reason := stopping():
                    stop_reason.append(reason)
                    return
                try:
                    request = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                tally.started += 1
                in_first_round = tally.started <= first_round.size
                try:
                    result = await _ask(
                        client,
                        endpoint,
                        request,
                        tally,
                        stopping,
                        first_round if in_first_round else None,
                        gate,
                        throttles,
                    )
                except _Refused as refused:
                    stop_reason.append(refused.reason)
                    first_round.disarm()
                    return
                gave_up = in_first_round and request.request_hash in first_round.gave_up_on
                if result is None or result.ok or (in_first_round and not gave_up):
                    first_round.disarm()  # an answer, a stop, or a first-round request ending otherwise
                if result is None:
                    continue  # stopped before a retry: the loop's check records why
                if gate is not None:
                    gate.finish(result)
                tally.results += 1
                if result.ok:
                    tally.answered += 1
                else:
                    tally.errors += 1
                # Saved before the slots are let go: a request another cell sends meanwhile would otherwise
                # make one more answer than `concurrency` received but not yet saved, lost to a crash then.
                deliver(result)
            if gave_up:
                await first_round.decided.wait()  # nothing more is sent until the endpoint answers something

    tasks: list[asyncio.Task[None]] = []
    try:
        for _ in range(workers):
            tasks.append(asyncio.create_task(worker()))
            # One loop turn per worker start: the first requests go out while later connections are
            # still being opened, instead of every request waiting behind all connection setups.
            await asyncio.sleep(0)
    except BaseException:
        await _cancel_all(tasks)  # cancelled while starting: take the started workers down too
        raise
    await _wait_all_or_first_error(tasks)
    if callback_errors:
        raise callback_errors[0]

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
