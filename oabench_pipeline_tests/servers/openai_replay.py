"""A real loopback OpenAI-compatible server that replays recorded answers and injects faults on demand.

It runs an asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked bodies) on its own event loop
(uvloop when installed) in a background thread, bound to 127.0.0.1 on an ephemeral port. asyncio rather
than a thread per connection because `asyncio.sleep` keeps the simulated latency exact with 64+
concurrent connections. Connections are `asyncio.Protocol`s whose requests llhttp (httptools) parses
straight from the received bytes: the server must cost far less CPU per request than any client it
measures.

Answers are looked up by (model id, text of the last user message): the request only carries the
prompt, exactly as with a real provider, so the server never sees (or needs) question ids.

    with ReplayServer(replies={("m", "prompt"): RecordedReply("B")}, latency_s=0.05) as srv:
        srv.base_url          # "http://127.0.0.1:PORT/v1"
        srv.stats.max_in_flight

Faults are decided per attempt from `FaultProfile.seed` and the server's request counter, so a given
arrival order always sees the same faults. `hold_replies(allow=N)` lets N more chat replies out and holds
the rest until `release_replies()`: a test catches its client mid-cell by an event, not by a latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import functools
import gzip
import hashlib
import json
import math
import random
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httptools

FAULT_KINDS: tuple[str, ...] = (
    "5xx",
    "429",
    "hang",
    "malformed_json",
    "empty_choices",
    "empty_answer",
    "drop",
    "html",
    "non_utf8",
)
FALLBACK_ANSWER = "A"
# Out-of-band stats, for when the server runs in another process (see `main`).
STATS_PATH = "/_replay/stats"
MAX_HEADER_LINES = 100
MAX_BODY_BYTES = 16 * 1024 * 1024
_UNUSED_RNG = random.Random(0)  # returned with "no fault", whose details never need a draw


# ---------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class RecordedReply:
    """What a model answered once, with the usage OpenRouter reported for it."""

    raw_response: str
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost: float | None = None
    latency_s: float | None = None  # overrides the server's latency for this reply (slow outliers)
    # Sent verbatim as the 200 body instead of a chat completion (non-UTF-8 bytes, an HTML page, ...).
    raw_body: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class ModelPricing:
    """OpenRouter-style prices: USD per token, as decimal strings."""

    prompt: str
    completion: str


@dataclass(frozen=True)
class FaultProfile:
    """How often (0..1, per attempt) each fault happens. Rates are exclusive slices of one draw.

    `max_faults_per_prompt` caps random faults per (model, prompt) so retry tests always end answered.
    `fixed_status` answers EVERY chat request with that status and an OpenRouter-like error body
    (for 400/401/402/403/404 tests). `echo_authorization` puts the Authorization header in error
    bodies, like a careless proxy, to test that clients redact it; `echo_as` (a function of the header)
    adds what else such a proxy writes of it (its base64, percent-encoding, ...). `echo_in_answers` puts
    the same echo in every 200: in the answer text, the provenance fields and `usage.cost`.
    """

    seed: int = 0
    rate_5xx: float = 0.0
    rate_429: float = 0.0
    retry_after_s: float | None = 1.0
    """The Retry-After of every 429 (None: no header, as some providers)."""
    retry_after_as_http_date: bool = False
    max_in_flight_before_429: int | None = None
    rate_hang: float = 0.0
    hang_s: float = 2.0
    rate_malformed_json: float = 0.0
    rate_empty_choices: float = 0.0
    rate_empty_answer: float = 0.0
    rate_drop: float = 0.0
    rate_html: float = 0.0
    rate_non_utf8: float = 0.0
    max_faults_per_prompt: int | None = None
    fixed_status: int | None = None
    fixed_status_message: str | None = None
    echo_authorization: bool = False
    echo_as: Callable[[str], str] | None = None
    echo_in_answers: bool = False

    def echo(self, auth: str) -> str:
        """What an error body says of the request's Authorization header ("" when it does not echo)."""
        if not self.echo_authorization:
            return ""
        also = f"; {self.echo_as(auth)}" if self.echo_as is not None else ""
        return f" (got Authorization: {auth}{also})"

    def __post_init__(self) -> None:
        total = self.total_rate
        if total > 1.0 + 1e-9:
            raise ValueError(f"fault rates add up to {total} > 1")

    def rate(self, kind: str) -> float:
        return float(getattr(self, f"rate_{kind}"))

    @functools.cached_property
    def total_rate(self) -> float:
        return sum(self.rate(kind) for kind in FAULT_KINDS)

    def pick(self, counter: int) -> tuple[str | None, random.Random]:
        """The fault for request number `counter` (None = behave), and the RNG for its details."""
        if self.total_rate == 0.0:
            return None, _UNUSED_RNG  # no draw can land on a fault; seeding an RNG costs ~20 us
        rng = random.Random(f"{self.seed}:{counter}")  # str seeds are hashed with SHA-512: stable
        draw = rng.random()
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += self.rate(kind)
            if draw < edge:
                return kind, rng
        return None, rng


def prompt_key(model: str, user_text: str) -> tuple[str, str]:
    """How stats identify one paid question: model id and a short hash of the user message."""
    return model, hashlib.sha256(user_text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class ServerStats:
    """A consistent snapshot of what the server saw. Times are `time.perf_counter()` values."""

    total_requests: int
    model_list_requests: int
    requests_per_prompt: dict[tuple[str, str], int]
    answers_per_prompt: dict[tuple[str, str], int]
    unmatched: int
    max_in_flight: int
    first_request_at: float | None
    last_response_at: float | None
    faults: dict[str, int]
    authorization_headers: frozenset[str]
    connections_opened: int = 0
    host_headers: frozenset[str] = frozenset()
    request_targets: frozenset[str] = frozenset()  # "POST /path?query" as received
    header_values: dict[str, frozenset[str]] = field(default_factory=dict)  # name (lower) -> values
    arrival_order: tuple[tuple[str, str], ...] = ()  # prompt keys of chat requests, as they arrived

    def to_json(self) -> dict[str, Any]:
        """The counters a benchmark needs, JSON-friendly (per-prompt maps summarised)."""
        return {
            "total_requests": self.total_requests,
            "distinct_prompts": len(self.requests_per_prompt),
            "duplicate_answers": len(self.duplicate_answers),
            "unmatched": self.unmatched,
            "max_in_flight": self.max_in_flight,
            "connections_opened": self.connections_opened,
            "faults": self.faults,
        }

    @property
    def duplicate_answers(self) -> dict[tuple[str, str], int]:
        """Prompts that were successfully answered more than once: paid twice for the same thing."""
        return {key: n for key, n in self.answers_per_prompt.items() if n > 1}


@dataclass
class _MutableStats:
    total_requests: int = 0
    model_list_requests: int = 0
    requests_per_prompt: Counter[tuple[str, str]] = field(default_factory=Counter)
    answers_per_prompt: Counter[tuple[str, str]] = field(default_factory=Counter)
    faults_per_prompt: Counter[tuple[str, str]] = field(default_factory=Counter)
    unmatched: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    first_request_at: float | None = None
    last_response_at: float | None = None
    faults: Counter[str] = field(default_factory=Counter)
    authorization_headers: set[str] = field(default_factory=set)
    connections_opened: int = 0
    host_headers: set[str] = field(default_factory=set)
    request_targets: set[str] = field(default_factory=set)
    header_values: dict[str, set[str]] = field(default_factory=dict)
    arrival_order: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _HttpRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # names in lower case
    body: bytes
    keep_alive: bool


@dataclass(frozen=True)
class _HttpResponse:
    status: int
    body: bytes
    content_type: str = "application/json"
    extra_headers: tuple[tuple[str, str], ...] = ()


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _json_response(
    status: int, payload: Any, extra_headers: tuple[tuple[str, str], ...] = ()
) -> _HttpResponse:
    return _HttpResponse(status, json.dumps(payload).encode("utf-8"), extra_headers=extra_headers)


def _error_response(
    status: int, message: str, extra: tuple[tuple[str, str], ...] = (), metadata: dict[str, Any] | None = None
) -> _HttpResponse:
    error: dict[str, Any] = {"message": message, "code": status}
    if metadata:
        error["metadata"] = metadata
    return _json_response(status, {"error": error}, extra)


async def _sleep_at_least(seconds: float) -> None:
    """`asyncio.sleep`, but never shorter: uvloop's timers run off a cached, millisecond clock and can
    fire ~1 ms early, which would flatter every client measured against this server."""
    deadline = time.perf_counter() + seconds
    await asyncio.sleep(seconds)
    while (left := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(left)


def conversation_text(messages: Any) -> str:
    """A conversation as one key: each message's role and text, as JSON (`conversation_keys`)."""
    if not isinstance(messages, list):
        return ""
    return json.dumps(
        [[m.get("role"), m.get("content")] for m in messages if isinstance(m, dict)], ensure_ascii=False
    )


def _user_text(payload: dict[str, Any]) -> str:
    """Text of the last user message (string content or text parts)."""
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


# ---------------------------------------------------------------------------------------- HTTP/1.1


class _ReplayProtocol(asyncio.Protocol):
    """One client connection: llhttp parses requests as bytes arrive; they are answered one at a time, in order.

    Callbacks on the received bytes rather than a coroutine per header line: at 64 connections x 20
    requests/s the server's per-request CPU must stay far below the client's it measures.
    """

    def __init__(self, server: ReplayServer) -> None:
        self._server = server
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.WriteTransport | None = None
        self._writer: _ResponseWriter | None = None
        self._pending: deque[_HttpRequest] = deque()  # pipelined requests wait their turn
        self._busy = False
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._body_size = 0
        self._idle_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio classes
        self._writer = _ResponseWriter(self._transport)  # type: ignore[arg-type]
        self._server._transports.add(transport)
        with self._server._lock:
            self._server._stats.connections_opened += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._transports.discard(self._transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade):
            self._transport.close()  # not HTTP/1.1 we can serve (or a callback refused it)
            return
        if not self._busy and self._pending:
            self._start(self._pending.popleft())

    # -- llhttp callbacks (an exception raised here makes `feed_data` fail, which closes the connection)

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = {}
        self._body = []
        self._body_size = 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self._headers) >= MAX_HEADER_LINES:
            raise ValueError("too many request headers")
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > MAX_BODY_BYTES:
            raise ValueError("request body too large")
        self._body.append(body)

    def on_message_complete(self) -> None:
        path, _, query = self._url.partition(b"?")
        request = _HttpRequest(
            method=self._parser.get_method().decode("latin-1").upper(),
            path=path.decode("latin-1"),
            query=query.decode("latin-1"),
            headers=self._headers,
            body=b"".join(self._body),
            keep_alive=self._parser.should_keep_alive(),
        )
        self._pending.append(request)

    # -- answering

    def _start(self, request: _HttpRequest) -> None:
        self._busy = True
        task = asyncio.get_running_loop().create_task(self._serve(request))
        self._server._connections.add(task)
        task.add_done_callback(self._server._connections.discard)

    async def _serve(self, request: _HttpRequest) -> None:
        assert self._transport is not None and self._writer is not None
        try:
            keep_alive = await self._server._dispatch(request, self._writer)
        except (ConnectionError, ValueError):
            keep_alive = False
        except asyncio.CancelledError:
            # Shutdown: finish quietly.
            self._transport.close()
            return
        self._busy = False
        if not keep_alive or self._transport.is_closing():
            self._transport.close()
        elif self._pending:
            self._start(self._pending.popleft())
        elif self._server.idle_close_s is not None:
            # Like nginx's keepalive_timeout: an idle keep-alive connection is closed by the server.
            loop = asyncio.get_running_loop()
            self._idle_timer = loop.call_later(self._server.idle_close_s, self._transport.close)


class _ResponseWriter:
    """What `_write_response` needs of a connection: `write` and `drain`, straight on the transport."""

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport

    def write(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)

    async def drain(self) -> None:
        return None  # the transport buffers whatever the socket did not take yet


async def _write_response(
    writer: _ResponseWriter, response: _HttpResponse, keep_alive: bool, gzip_body: bool = False
) -> None:
    body = response.body
    if gzip_body:  # whatever the request's Accept-Encoding said, as some gateways do (RFC 9110 allows it)
        body = gzip.compress(body, compresslevel=1)
        response = _HttpResponse(
            response.status,
            body,
            response.content_type,
            (*response.extra_headers, ("Content-Encoding", "gzip")),
        )
    head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: %s\r\n" % (
        response.status,
        _REASONS.get(response.status, "Status").encode(),
        response.content_type.encode(),
        len(body),
        b"keep-alive" if keep_alive else b"close",
    )
    extra = b"".join(
        b"%s: %s\r\n" % (name.encode(), value.encode("latin-1")) for name, value in response.extra_headers
    )
    writer.write(head + extra + b"\r\n" + body)
    await writer.drain()


# ------------------------------------------------------------------------------------------- server


class ReplayServer:
    """OpenAI/OpenRouter-compatible replay server on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        replies: Mapping[tuple[str, str], RecordedReply] | None = None,
        latency_s: float = 0.0,
        faults: FaultProfile | None = None,
        models: Mapping[str, ModelPricing] | None = None,
        api_key: str | None = None,
        reasoning_field: Literal["reasoning", "reasoning_content"] = "reasoning",
        unknown_model_status: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        base_path: str = "/v1",
        required_query: str | None = None,
        api_key_header: str = "authorization",
        gzip_always: bool = False,
        idle_close_s: float | None = None,
        cost_header: str | None = None,
        conversation_keys: bool = False,
    ) -> None:
        """`api_key` set → requests without `Authorization: Bearer <api_key>` get 401.

        Endpoint shapes: `host="::1"` serves IPv6 (`http://[::1]:PORT/v1`); `base_path` and
        `required_query` give Azure's `/openai/deployments/NAME/chat/completions?api-version=...` (a
        request without the query gets 404); `api_key_header="api-key"` expects the raw key there.
        `gzip_always` gzips every reply unasked; `idle_close_s` closes keep-alive connections idle that
        long; `cost_header` (e.g. `x-litellm-response-cost`) moves `usage.cost` into that header.

        `conversation_keys`: replies are keyed by the whole conversation (`conversation_text`: every
        message's role and text), not the last user message: a 2nd-phase sub-item B is answered only when
        its request carries sub-item A's reply.

        `unknown_model_status` set (e.g. 404, as OpenRouter) → a model in neither `models` nor `replies`
        gets that status; otherwise it gets the fallback answer.
        """
        self.replies: dict[tuple[str, str], RecordedReply] = dict(replies or {})
        self.latency_s = latency_s
        self.faults = faults or FaultProfile()
        self.models: dict[str, ModelPricing] = dict(models or {})
        self.api_key = api_key
        self.reasoning_field = reasoning_field
        self.unknown_model_status = unknown_model_status
        self._known_models = set(self.models) | {model for model, _ in self.replies}
        self._stats = _MutableStats()
        self._lock = threading.Lock()
        self._counter = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()  # requests being answered
        self._transports: set[asyncio.BaseTransport] = set()
        self._encoded_completions: dict[tuple[str, RecordedReply, str], bytes] = {}
        self._port: int | None = None
        # Chat replies the server may still send (None: no limit); see `hold_replies`. Read and changed
        # on the server's loop only; `_allowance_changed` wakes the replies waiting for more.
        self._allowance: int | None = None
        self._allowance_changed: asyncio.Condition | None = None
        self.ssl_context = ssl_context  # set: serve HTTPS (base_url names `localhost`)
        self.host = host
        self.base_path = base_path.rstrip("/")
        self.required_query = required_query
        self.api_key_header = api_key_header.lower()
        self.gzip_always = gzip_always
        self.idle_close_s = idle_close_s
        self.cost_header = cost_header
        self.conversation_keys = conversation_keys

    # -- lifecycle

    @property
    def base_url(self) -> str:
        assert self._port is not None, "server not started"
        query = f"?{self.required_query}" if self.required_query else ""
        if self.ssl_context is not None:  # certificates name hosts, not addresses
            return f"https://localhost:{self._port}{self.base_path}{query}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}{self.base_path}{query}"

    def __enter__(self) -> ReplayServer:
        self._loop = _new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="openai-replay", daemon=True)
        self._thread.start()
        if not started.wait(timeout=10) or self._port is None:
            raise RuntimeError("replay server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        loop.close()
        self._loop = None

    def wait_idle(self, timeout_s: float = 60.0) -> None:
        """Block until no connection is open and no request is being answered.

        After its client was killed the server still answers what was in flight; this returns once those
        answers are counted and the dead client's connections are closed (the kernel closed them when the
        process died), rather than after a guessed sleep.
        """
        loop = self._loop
        assert loop is not None, "server not started"

        async def idle() -> None:
            while self._transports or self._connections:
                await asyncio.sleep(0.001)

        asyncio.run_coroutine_threadsafe(asyncio.wait_for(idle(), timeout_s), loop).result()

    def hold_replies(self, allow: int = 0) -> None:
        """From now on send only `allow` more chat replies; the others wait (requests still arrive, are
        counted, and hold their connection) until `release_replies`.

        For tests that need a client caught mid-cell: "the run is still answering" is then guaranteed by
        the test, not by a reply latency long enough on an idle machine.
        """
        self._on_loop(self._set_allowance(allow))

    def release_replies(self) -> None:
        """Send every held reply now, and every later one without waiting (undoes `hold_replies`)."""
        self._on_loop(self._set_allowance(None))

    def _on_loop(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` on the server's event loop and wait for it."""
        loop = self._loop
        assert loop is not None, "server not started"
        asyncio.run_coroutine_threadsafe(work, loop).result(timeout=10)

    async def _set_allowance(self, allow: int | None) -> None:
        assert self._allowance_changed is not None
        async with self._allowance_changed:
            self._allowance = allow
            self._allowance_changed.notify_all()

    async def _wait_for_allowance(self) -> None:
        """Return once this reply may be sent (at once unless `hold_replies` is in force), spending one."""
        if self._allowance is None:
            return
        assert self._allowance_changed is not None
        async with self._allowance_changed:
            await self._allowance_changed.wait_for(lambda: self._allowance != 0)
            if self._allowance is not None:
                self._allowance -= 1

    def _run(self, started: threading.Event) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        self._allowance_changed = asyncio.Condition()
        self._server = loop.run_until_complete(
            loop.create_server(
                lambda: _ReplayProtocol(self), self.host, 0, backlog=1024, ssl=self.ssl_context
            )
        )
        self._port = self._server.sockets[0].getsockname()[1]
        started.set()
        loop.run_forever()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for transport in list(self._transports):
            transport.close()

    # -- stats

    @property
    def stats(self) -> ServerStats:
        with self._lock:
            s = self._stats
            return ServerStats(
                total_requests=s.total_requests,
                model_list_requests=s.model_list_requests,
                requests_per_prompt=dict(s.requests_per_prompt),
                answers_per_prompt=dict(s.answers_per_prompt),
                unmatched=s.unmatched,
                max_in_flight=s.max_in_flight,
                first_request_at=s.first_request_at,
                last_response_at=s.last_response_at,
                faults=dict(s.faults),
                authorization_headers=frozenset(s.authorization_headers),
                connections_opened=s.connections_opened,
                host_headers=frozenset(s.host_headers),
                request_targets=frozenset(s.request_targets),
                header_values={name: frozenset(values) for name, values in s.header_values.items()},
                arrival_order=tuple(s.arrival_order),
            )

    def reset_stats(self) -> None:
        """Forget everything counted so far (the fault counter keeps going)."""
        with self._lock:
            self._stats = _MutableStats()

    # -- connections

    async def _dispatch(self, request: _HttpRequest, writer: _ResponseWriter) -> bool:
        """Answer one request; False when the connection must be closed."""
        with self._lock:
            self._stats.host_headers.add(request.headers.get("host", ""))
            self._stats.request_targets.add(
                f"{request.method} {request.path}" + (f"?{request.query}" if request.query else "")
            )
            for name, value in request.headers.items():
                self._stats.header_values.setdefault(name, set()).add(value)
        if request.method == "GET" and request.path.rstrip("/") == f"{self.base_path}/models":
            with self._lock:
                self._stats.model_list_requests += 1
            await self._write(writer, self._models_response(), request.keep_alive)
            return request.keep_alive
        if request.method == "POST" and request.path.rstrip("/") == f"{self.base_path}/chat/completions":
            if self.required_query is not None and request.query != self.required_query:
                missing = _error_response(
                    404, f"expected query {self.required_query!r}, got {request.query!r}"
                )
                await self._write(writer, missing, request.keep_alive)
                return request.keep_alive
            return await self._chat(request, writer)
        if request.method == "GET" and request.path == STATS_PATH:
            await self._write(writer, _json_response(200, self.stats.to_json()), request.keep_alive)
            return request.keep_alive
        await self._write(writer, _error_response(404, f"no route {request.path}"), request.keep_alive)
        return request.keep_alive

    async def _write(self, writer: _ResponseWriter, response: _HttpResponse, keep_alive: bool) -> None:
        await _write_response(writer, response, keep_alive, gzip_body=self.gzip_always)

    def _models_response(self) -> _HttpResponse:
        names = dict.fromkeys([*self.models, *(model for model, _ in self.replies)])
        free = ModelPricing("0", "0")
        data = [
            {
                "id": name,
                "name": name,
                "pricing": {
                    "prompt": self.models.get(name, free).prompt,
                    "completion": self.models.get(name, free).completion,
                },
                "context_length": 128000,
            }
            for name in names
        ]
        return _json_response(200, {"data": data})

    async def _chat(self, request: _HttpRequest, writer: _ResponseWriter) -> bool:
        with self._lock:
            s = self._stats
            s.in_flight += 1
            s.max_in_flight = max(s.max_in_flight, s.in_flight)
            if s.first_request_at is None:
                s.first_request_at = time.perf_counter()
            in_flight = s.in_flight
        try:
            return await self._chat_in_flight(request, writer, in_flight)
        finally:
            with self._lock:
                self._stats.in_flight -= 1
                self._stats.last_response_at = time.perf_counter()

    async def _chat_in_flight(self, request: _HttpRequest, writer: _ResponseWriter, in_flight: int) -> bool:
        try:
            payload = json.loads(request.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            await self._write(writer, _error_response(400, "request body is not JSON"), request.keep_alive)
            return request.keep_alive
        model = str(payload.get("model", ""))
        text = conversation_text(payload.get("messages")) if self.conversation_keys else _user_text(payload)
        key = prompt_key(model, text)
        auth = request.headers.get(self.api_key_header, "")
        with self._lock:
            counter = self._counter
            self._counter += 1
            self._stats.total_requests += 1
            self._stats.requests_per_prompt[key] += 1
            self._stats.arrival_order.append(key)
            if auth:
                self._stats.authorization_headers.add(auth)
        await self._wait_for_allowance()
        early = self._refusal(model, auth, in_flight)
        if early is not None:
            await self._write(writer, early, request.keep_alive)
            return request.keep_alive
        fault, rng = self._fault_for(counter, key)
        if fault == "drop":
            return False  # close without a byte of response
        if fault == "hang":
            await asyncio.sleep(self.faults.hang_s)
            return False
        if fault in ("5xx", "429"):
            await self._write(writer, self._status_fault(fault, rng, auth), request.keep_alive)
            return request.keep_alive
        reply = self.replies.get((model, text))
        latency = reply.latency_s if reply is not None and reply.latency_s is not None else self.latency_s
        await _sleep_at_least(latency)
        if fault is None and self.faults.echo_in_answers:
            response = self._echoing_answer(model, key, self.faults.echo(auth))
        elif fault is None:
            response = self._answer(model, text, key, reply)
        else:
            response = self._bad_200(fault, model)
        await self._write(writer, response, request.keep_alive)
        return request.keep_alive

    def _refusal(self, model: str, auth: str, in_flight: int) -> _HttpResponse | None:
        """Errors that don't depend on the fault draw: fixed status, bad key, overload."""
        faults = self.faults
        echo = faults.echo(auth)
        if faults.fixed_status is not None:
            self._count_fault(f"fixed_{faults.fixed_status}")
            message = faults.fixed_status_message or f"{model} is not a valid model ID"
            moved: tuple[tuple[str, str], ...] = ()
            if faults.fixed_status in (
                301,
                302,
                303,
                307,
                308,
            ):  # a moved endpoint, as behind a wrong base_url
                moved = (("Location", f"https://moved.example{self.base_path}/chat/completions"),)
            return _error_response(faults.fixed_status, message + echo, moved, metadata={"model": model})
        expected = f"Bearer {self.api_key}" if self.api_key_header == "authorization" else self.api_key
        if self.api_key is not None and auth != expected:
            self._count_fault("401")
            return _error_response(401, "No auth credentials found or invalid key" + echo)
        if self.unknown_model_status is not None and model not in self._known_models:
            self._count_fault(f"unknown_model_{self.unknown_model_status}")
            message = f"No endpoints found for {model}." + echo
            return _error_response(self.unknown_model_status, message, metadata={"model": model})
        limit = faults.max_in_flight_before_429
        if limit is not None and in_flight > limit:
            self._count_fault("429_overload")
            retry_after = (
                () if faults.retry_after_s is None else (("Retry-After", f"{faults.retry_after_s:g}"),)
            )
            return _error_response(
                429, "Rate limit exceeded: too many requests in flight" + echo, retry_after
            )
        return None

    def _fault_for(self, counter: int, key: tuple[str, str]) -> tuple[str | None, random.Random]:
        fault, rng = self.faults.pick(counter)
        if fault is None:
            return None, rng
        with self._lock:
            cap = self.faults.max_faults_per_prompt
            if cap is not None and self._stats.faults_per_prompt[key] >= cap:
                return None, rng
            self._stats.faults_per_prompt[key] += 1
            self._stats.faults[fault] += 1
        return fault, rng

    def _count_fault(self, kind: str) -> None:
        with self._lock:
            self._stats.faults[kind] += 1

    def _status_fault(self, fault: str, rng: random.Random, auth: str) -> _HttpResponse:
        echo = self.faults.echo(auth)
        if fault == "429":
            wait = self.faults.retry_after_s
            if wait is None:
                return _error_response(429, "Rate limit exceeded" + echo)
            if self.faults.retry_after_as_http_date:
                # HTTP-dates have 1 s resolution: round up so the client must still wait >= retry_after_s.
                value = email.utils.formatdate(math.ceil(time.time() + wait), usegmt=True)
            else:
                value = f"{wait:g}"
            return _error_response(429, "Rate limit exceeded" + echo, (("Retry-After", value),))
        status = rng.choice((500, 502, 503))
        return _error_response(status, f"Upstream error {status}" + echo)

    def _bad_200(self, fault: str, model: str) -> _HttpResponse:
        if fault == "malformed_json":
            return _HttpResponse(200, b'{"id": "gen-broken", "choices": [{"message": {"content": "A"')
        if fault == "empty_choices":
            return _json_response(200, {"id": "gen-empty", "model": model, "choices": []})
        if fault == "empty_answer":
            return _json_response(200, self._completion(model, RecordedReply("", completion_tokens=0)))
        if fault == "html":
            page = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1>cloudflare</body></html>"
            return _HttpResponse(200, page, content_type="text/html")
        # non_utf8: a JSON-looking body with bytes that are not UTF-8.
        return _HttpResponse(200, b'{"choices": [{"message": {"content": "\xff\xfe\xfa"}}]}')

    def _echoing_answer(self, model: str, key: tuple[str, str], echo: str) -> _HttpResponse:
        """A 200 whose every text field echoes the Authorization header (a gateway debugging itself)."""
        with self._lock:
            self._stats.answers_per_prompt[key] += 1
        body = self._completion(model, RecordedReply(f"{FALLBACK_ANSWER}{echo}", reasoning=echo.strip()))
        body |= {"id": f"gen{echo}", "provider": echo.strip(), "system_fingerprint": echo.strip()}
        body["usage"]["cost"] = echo.strip()  # not a number: refused, with a note naming it
        return _json_response(200, body)

    def _answer(
        self, model: str, text: str, key: tuple[str, str], reply: RecordedReply | None
    ) -> _HttpResponse:
        with self._lock:
            if reply is None:
                self._stats.unmatched += 1
            self._stats.answers_per_prompt[key] += 1
        if reply is None:
            reply = RecordedReply(FALLBACK_ANSWER, prompt_tokens=max(1, len(text) // 4), completion_tokens=1)
        if reply.raw_body is not None:
            return _HttpResponse(200, reply.raw_body, content_type=reply.content_type)
        if self.cost_header is not None and reply.cost is not None:  # a gateway reporting cost out of band
            body_reply = dataclasses.replace(reply, cost=None)
            headers = ((self.cost_header, repr(reply.cost)),)
            return _HttpResponse(200, self._completion_body(model, body_reply), extra_headers=headers)
        return _HttpResponse(200, self._completion_body(model, reply))

    def _completion_body(self, model: str, reply: RecordedReply) -> bytes:
        """`_completion(model, reply)` as JSON; all but `id` and `created` is encoded once per reply."""
        cache_key = (model, reply, self.reasoning_field)
        tail = self._encoded_completions.get(cache_key)
        if tail is None:
            completion = self._completion(model, reply)
            del completion["id"], completion["created"]
            tail = json.dumps(completion).encode("utf-8")[1:]  # from after the opening brace
            self._encoded_completions[cache_key] = tail
        with self._lock:
            number = self._counter
        return b'{"id": "gen-replay-%d", "created": %d, ' % (number, int(time.time())) + tail

    def _completion(self, model: str, reply: RecordedReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.raw_response}
        if reply.reasoning is not None:
            message[self.reasoning_field] = reply.reasoning
        usage: dict[str, Any] = {
            "prompt_tokens": reply.prompt_tokens or 0,
            "completion_tokens": reply.completion_tokens or 0,
            "total_tokens": (reply.prompt_tokens or 0) + (reply.completion_tokens or 0),
            "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens or 0},
        }
        if reply.cost is not None:
            usage["cost"] = reply.cost
        with self._lock:
            number = self._counter
        return {
            "id": f"gen-replay-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "provider": "replay",
            "system_fingerprint": "fp_replay",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": usage,
        }


def _new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when available (less per-request overhead at 64 connections), else the stdlib loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


# --------------------------------------------------------------------------------- published replies


def load_published_replies(
    published_runs_dir: Path, question_texts: dict[str, str]
) -> dict[tuple[str, str], RecordedReply]:
    """Replies from every `*/inferences.jsonl` under `published_runs_dir`, keyed by (model, user text).

    `question_texts` maps qid -> the exact user message the pipeline sends. Within a run the last line
    per qid wins (resumed runs append); run folders are read in name (= timestamp) order, so a later
    run of the same model overrides an earlier one. Skipped (annulled) and errored lines are left out,
    as are qids missing from `question_texts`. Empty recorded answers are kept: they really happened.
    """
    replies: dict[tuple[str, str], RecordedReply] = {}
    for path in sorted(published_runs_dir.glob("*/inferences.jsonl")):
        latest: dict[str, dict[str, Any]] = {}
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    row = json.loads(line)
                    latest[row["qid"]] = row
        for qid, row in latest.items():
            if row.get("skipped") or row.get("error") or qid not in question_texts:
                continue
            replies[(row["model"], question_texts[qid])] = _recorded(row)
    return replies


def _recorded(row: dict[str, Any]) -> RecordedReply:
    usage = row.get("tokenUsage") or {}
    return RecordedReply(
        raw_response=row.get("rawResponse") or "",
        reasoning=row.get("reasoning") or None,
        prompt_tokens=usage.get("promptTokens"),
        completion_tokens=usage.get("completionTokens"),
        reasoning_tokens=usage.get("reasoningTokens"),
        cost=row.get("cost"),
    )


def main(argv: list[str] | None = None) -> None:
    """Run a replay server in its own process (own GIL): prints the base URL, serves until stdin closes.

    Benchmarks use this so the server's CPU work does not compete with the client under test.
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    with ReplayServer(latency_s=args.latency_s) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
