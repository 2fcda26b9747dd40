"""A loopback HTTP file server that counts requests and can be told to misbehave per path."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Override:
    """Serve these bytes (with this status and content type) instead of the file at a path."""

    body: bytes = b""
    status: int = 200
    content_type: str = "application/pdf"
    drop_connection: bool = False
    """Close the connection without sending any response (a flaky host or proxy)."""
    drip_interval_s: float | None = None
    """Send the body one byte at a time, this many seconds apart (a host that never quite stalls)."""
    headers: dict[str, str] = field(default_factory=dict)
    """More response headers (a redirect's `Location`)."""


@dataclass
class StaticFileServer:
    """Serves `root` on 127.0.0.1:<ephemeral port>; `requests` counts GETs per path."""

    root: Path
    requests: Counter[str] = field(default_factory=Counter)
    overrides: dict[str, Override] = field(default_factory=dict)
    queued: dict[str, list[Override]] = field(default_factory=dict)
    """One-shot responses per path, served in order before `overrides` and the files (e.g. 503, 503, then the file)."""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StaticFileServer:
        owner = self

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(owner.root), **kwargs)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                owner.requests[path] += 1
                override = owner.next_override(path)
                if override is None:
                    super().do_GET()
                    return
                if override.drop_connection:
                    self.close_connection = True
                    return
                self.send_response(override.status)
                self.send_header("Content-Type", override.content_type)
                self.send_header("Content-Length", str(len(override.body)))
                for name, value in override.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if override.drip_interval_s is None:
                    self.wfile.write(override.body)
                    return
                for index in range(len(override.body)):
                    try:
                        self.wfile.write(override.body[index : index + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up
                        return
                    time.sleep(override.drip_interval_s)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Polled every 50 ms, not the default 500: `shutdown()` waits for the next poll, which cost each
        # test using this server half a second of teardown.
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def next_override(self, path: str) -> Override | None:
        """The queued response for `path` if any is left (consumed), else its standing override."""
        with self._lock:
            pending = self.queued.get(path)
            if pending:
                return pending.pop(0)
        return self.overrides.get(path)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())
