"""One keep-alive HTTP/1.1 connection per client worker: an asyncio protocol whose responses llhttp parses.

Why not `httpx.AsyncClient` on the hot path: on the 2-core machine CI runs on, `AsyncClient.post` costs
~280 µs of CPU per request before any I/O, and h11 (the parser under httpcore) ~120 µs per exchange.
At 64 requests in flight with 50 ms answers, each round's responses arrive together and are handled
one after another, so the client's CPU per request is what stretches every round
(`benchmarks/inference_throughput.py`). llhttp, through `httptools` (the parser uvicorn uses), parses a
response in ~5 µs, straight from `data_received`, with no coroutine per read.

What stays httpx: URL parsing and the exception types raised here (`httpx.ConnectError`,
`httpx.ReadTimeout`, `httpx.RemoteProtocolError`, ...), so callers and error texts look the same as
with an httpx client. Only `POST` with a `Content-Length` body is sent; responses may be sized by
`Content-Length`, chunked, or delimited by the server closing the connection.
"""

from __future__ import annotations

import asyncio
import functools
import os
import ssl
import time
from dataclasses import dataclass

import certifi
import httptools
import httpx

KEEPALIVE_EXPIRY_S = 5.0  # httpx's default: an idle connection older than this is not reused


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    latency_s: float
    truncated: bool  # the body exceeded the cap: what is in `body` is incomplete

    def header(self, name: bytes) -> str | None:
        """First value of a header (`name` in lower case), decoded as latin-1; None if absent."""
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None


class PostTarget:
    """Where to POST, with every byte of the request head that never changes encoded once."""

    def __init__(self, url: str, api_key: str | None, connect_timeout_s: float) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(f"base_url must be http(s), got {url!r}")
        if api_key is not None and not api_key.isprintable():
            # A CR/LF would smuggle extra headers into every request. The key itself is not echoed.
            raise ValueError("the API key contains control characters")
        self.https = parsed.scheme == "https"
        self.host = parsed.host
        self.port = parsed.port or (443 if self.https else 80)
        self.connect_timeout_s = connect_timeout_s
        host_header = parsed.raw_host if parsed.port is None else parsed.raw_host + b":%d" % parsed.port
        lines = [
            b"POST " + parsed.raw_path + b" HTTP/1.1",
            b"Host: " + host_header,
            b"Accept: */*",
            b"Content-Type: application/json",
            b"User-Agent: oabench-pipeline",
        ]
        if api_key:
            lines.append(b"Authorization: Bearer " + api_key.encode())
        self._head = b"\r\n".join(lines) + b"\r\nContent-Length: "

    def request(self, content: bytes) -> bytes:
        return self._head + b"%d\r\n\r\n" % len(content) + content

    def __repr__(self) -> str:  # the head holds the key: never show it
        scheme = "https" if self.https else "http"
        return f"PostTarget({scheme}://{self.host}:{self.port})"


class _ResponseReader(asyncio.Protocol):
    """Feeds what the socket receives to llhttp; resolves the waiting exchange when its response is whole."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._max_bytes = 0
        self._reset()

    def _reset(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.truncated = False
        self._size = 0
        self._headers_done = False
        self._sized = False  # Content-Length or chunked: the server closing early is then an error

    def expect(self, max_bytes: int) -> asyncio.Future[None]:
        """Arm for the next response; the future resolves when it is complete (or truncated)."""
        self._reset()
        self._max_bytes = max_bytes
        self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter

    # -- asyncio protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's are not asyncio.Transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self._fail(httpx.RemoteProtocolError("the server sent bytes while no request was waiting"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
        if self.truncated:
            self._resolve()  # stop reading: the connection is closed, not reused

    def eof_received(self) -> bool:
        return False  # close our side too; `connection_lost` follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done and not self._sized:
            self.keep_alive = False
            self._resolve()  # a body delimited by the connection closing is complete now
        elif self._headers_done:
            self._fail(
                httpx.RemoteProtocolError("peer closed connection without sending complete message body")
            )
        else:
            self._fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))

    # -- llhttp callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lowered = name.lower()
        if lowered == b"content-length" or (lowered == b"transfer-encoding" and b"chunked" in value.lower()):
            self._sized = True

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        if self.truncated:
            return
        self._size += len(body)
        if self._size > self._max_bytes:
            self.truncated = True
        else:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self._parser.get_status_code() < 200:
            self._reset()  # an interim 1xx: the real response follows
            return
        self.keep_alive = self._parser.should_keep_alive()
        self._resolve()

    # -- outcome

    @property
    def status(self) -> int:
        return self._parser.get_status_code()

    def _resolve(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.keep_alive = False
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[None], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(httpx.ReadTimeout(f"no complete response within {timeout_s:g} s"))


class KeepAliveConnection:
    """One worker's connection, opened on first use and reopened whenever it cannot be reused.

    Each worker owns one, so there is no pool to search or wait on. Used by one task at a time.
    """

    def __init__(self, target: PostTarget) -> None:
        self._target = target
        self._reader: _ResponseReader | None = None
        self._idle_since = 0.0

    async def post(self, content: bytes, max_bytes: int, timeout_s: float) -> HttpReply:
        """Send one request and read its response, all within `timeout_s` (connecting included).

        Raises httpx's transport errors. On any exception, cancellation included, the connection is
        closed: one left in an unknown state is never reused.
        """
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        try:
            reader = await self._ready(min(timeout_s, self._target.connect_timeout_s))
            waiter = reader.expect(max_bytes)
            assert reader.transport is not None
            reader.transport.write(self._target.request(content))
            left = timeout_s - (time.perf_counter() - started)
            timer = loop.call_later(max(0.0, left), _expire, waiter, timeout_s)
            try:
                await waiter
            finally:
                timer.cancel()
        except BaseException:
            self.close()
            raise
        reply = HttpReply(
            status=reader.status,
            headers=reader.headers,
            body=b"".join(reader.chunks),
            latency_s=time.perf_counter() - started,
            truncated=reader.truncated,
        )
        if reader.truncated or not reader.keep_alive:
            self.close()
        else:
            self._idle_since = loop.time()
        return reply

    async def _ready(self, connect_timeout_s: float) -> _ResponseReader:
        reader = self._reader
        loop = asyncio.get_running_loop()
        if reader is not None and not reader.closed and loop.time() - self._idle_since < KEEPALIVE_EXPIRY_S:
            return reader
        self.close()
        self._reader = await _connect(self._target, connect_timeout_s)
        return self._reader

    def close(self) -> None:
        if self._reader is not None and self._reader.transport is not None:
            self._reader.transport.close()
        self._reader = None


async def _connect(target: PostTarget, timeout_s: float) -> _ResponseReader:
    loop = asyncio.get_running_loop()
    tls = _tls_context() if target.https else None
    try:
        async with asyncio.timeout(timeout_s):
            _transport, reader = await loop.create_connection(
                _ResponseReader,
                target.host,
                target.port,
                ssl=tls,
                server_hostname=target.host if tls else None,
            )
    except TimeoutError as exc:
        raise httpx.ConnectTimeout(f"connecting to {target.host}:{target.port} timed out") from exc
    except OSError as exc:  # refused, unreachable, DNS, and ssl.SSLError (certificate, handshake)
        raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
    # No TCP_NODELAY here: asyncio and uvloop set it on every TCP transport (a test checks).
    return reader


def _tls_context() -> ssl.SSLContext:
    """The CA bundle: `SSL_CERT_FILE` when set (as httpx honours it: corporate proxies, private CAs), else certifi's."""
    return _tls_context_for(os.environ.get("SSL_CERT_FILE") or certifi.where())


@functools.cache
def _tls_context_for(cafile: str) -> ssl.SSLContext:
    """Built once per bundle and process: loading a CA bundle costs ~50-100 ms."""
    context = ssl.create_default_context(cafile=cafile)
    context.set_alpn_protocols(["http/1.1"])
    return context
