"""The client's HTTP/1.1 connection against a loopback server that sends exactly the bytes a test scripts.

The replay server always answers well-formed, Content-Length-sized responses; real servers and proxies
also send chunked bodies, bodies ended by closing the connection, interim 1xx responses, `Connection:
close`, and sometimes garbage. Each of those is scripted here byte for byte.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from oabench_pipeline.inference.http_connection import HttpReply, KeepAliveConnection, PostTarget

BODY = b'{"choices": [{"message": {"content": "B"}}]}'
SIZED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)


@dataclass
class Reply:
    """What the scripted server does for one request: send `data`, then close the connection or not."""

    data: bytes
    close: bool = False
    hang: bool = False  # send nothing and keep the connection open
    then: bytes = b""  # sent 50 ms after `data`, so the client has surely read `data` on its own


@dataclass
class ScriptedServer:
    """Answers requests in arrival order from `script`; records each request's raw bytes."""

    script: deque[Reply]
    port: int = 0
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)


def _read_request(conn: socket.socket, buffer: bytearray) -> bytes | None:
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    head_end = buffer.index(b"\r\n\r\n") + 4
    length = 0
    for line in bytes(buffer[:head_end]).split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buffer) < head_end + length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buffer += chunk
    request = bytes(buffer[: head_end + length])
    del buffer[: head_end + length]
    return request


@contextmanager
def scripted_server(*replies: Reply) -> Iterator[ScriptedServer]:
    server = ScriptedServer(deque(replies))
    listener = socket.create_server(("127.0.0.1", 0))
    server.port = listener.getsockname()[1]
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        buffer = bytearray()
        with conn:
            while (request := _read_request(conn, buffer)) is not None:
                server.requests.append(request)
                reply = server.script.popleft()
                if reply.hang:
                    stop.wait()
                    return
                conn.sendall(reply.data)
                if reply.then:
                    time.sleep(0.05)
                    conn.sendall(reply.then)
                if reply.close:
                    return

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            server.connections += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()


def post_all(server: ScriptedServer, count: int, timeout_s: float = 5.0, max_bytes: int = 1 << 20) -> list:
    """`count` posts in a row on one connection; each item is an `HttpReply` or the exception raised."""
    target = PostTarget(f"http://127.0.0.1:{server.port}/v1/chat/completions", "sk-test", 2.0)

    async def go() -> list:
        connection = KeepAliveConnection(target)
        outcomes: list = []
        for i in range(count):
            try:
                outcomes.append(await connection.post(b'{"n": %d}' % i, max_bytes, timeout_s))
            except Exception as exc:
                outcomes.append(exc)
        connection.close()
        return outcomes

    return asyncio.run(go())


def test_request_bytes_and_keep_alive_reuse() -> None:
    with scripted_server(Reply(SIZED), Reply(SIZED), Reply(SIZED)) as server:
        outcomes = post_all(server, 3)
    assert [o.body for o in outcomes] == [BODY] * 3 and server.connections == 1
    head, _, body = server.requests[1].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1" and body == b'{"n": 1}'
    assert {
        b"Host: 127.0.0.1:%d" % server.port,
        b"Authorization: Bearer sk-test",
        b"Content-Length: 8",
    } <= set(lines)


def test_chunked_body_is_reassembled() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    with scripted_server(Reply(chunked), Reply(SIZED)) as server:
        first, second = post_all(server, 2)
    assert first.body == b"hello world" and second.body == BODY and server.connections == 1


def test_body_ended_by_closing_the_connection_is_complete_and_the_next_request_reconnects() -> None:
    unsized = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + BODY
    with scripted_server(Reply(unsized, close=True), Reply(SIZED)) as server:
        first, second = post_all(server, 2)
    assert first.body == BODY and second.body == BODY and server.connections == 2


def test_connection_close_header_is_honoured() -> None:
    closing = SIZED.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
    with scripted_server(Reply(closing), Reply(SIZED)) as server:
        outcomes = post_all(server, 2)
    assert all(isinstance(o, HttpReply) for o in outcomes) and server.connections == 2


def test_interim_100_continue_is_skipped() -> None:
    with scripted_server(Reply(b"HTTP/1.1 100 Continue\r\n\r\n", then=SIZED)) as server:
        (reply,) = post_all(server, 1)
    assert reply.status == 200 and reply.body == BODY


def test_status_and_headers_are_reported() -> None:
    limited = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 2\r\n\r\n{}"
    with scripted_server(Reply(limited)) as server:
        (reply,) = post_all(server, 1)
    assert reply.status == 429 and reply.header(b"retry-after") == "7" and reply.body == b"{}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "without sending a response"),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial', "without sending complete message body"),
        (b"<html>not http</html>\r\n\r\n", "malformed HTTP response"),
    ],
)
def test_broken_responses_raise_httpx_protocol_errors_and_the_connection_is_replaced(
    data: bytes, message: str
) -> None:
    with scripted_server(Reply(data, close=True), Reply(SIZED)) as server:
        broken, good = post_all(server, 2)
    assert isinstance(broken, httpx.RemoteProtocolError) and message in str(broken)
    assert good.body == BODY and server.connections == 2


def test_no_response_within_the_timeout_is_a_read_timeout() -> None:
    with scripted_server(Reply(b"", hang=True), Reply(SIZED)) as server:
        hung, good = post_all(server, 2, timeout_s=0.3)
    assert isinstance(hung, httpx.ReadTimeout) and good.body == BODY and server.connections == 2


def test_oversized_body_is_cut_at_the_cap_and_the_connection_not_reused() -> None:
    big = b"x" * 5000
    sized_big = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big)
    with scripted_server(Reply(sized_big), Reply(SIZED)) as server:
        cut, good = post_all(server, 2, max_bytes=1000)
    assert cut.truncated and len(cut.body) <= 1000
    assert not good.truncated and good.body == BODY and server.connections == 2


def test_refused_connection_is_an_httpx_connect_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        port = placeholder.getsockname()[1]
    server = ScriptedServer(deque(), port=port)  # nothing listens there any more
    (outcome,) = post_all(server, 1)
    assert isinstance(outcome, httpx.ConnectError)


def test_api_key_with_control_characters_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError, match="control characters") as caught:
        PostTarget("http://127.0.0.1:1/v1/chat/completions", "sk-secret\r\nX-Injected: 1", 1.0)
    assert "sk-secret" not in str(caught.value)
    target = PostTarget("https://api.example.com/v1/chat/completions", "sk-secret", 1.0)
    assert "sk-secret" not in repr(target) and target.port == 443
    assert target.request(b"{}").startswith(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.com\r\n"
    )
