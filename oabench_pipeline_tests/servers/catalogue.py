"""A loopback model catalogue: `GET /api/v1/models` as OpenRouter shapes it, and the ways it fails.

    with CatalogueServer([catalogue_model("acme/fit", created=dt.datetime(2026, 3, 1))]) as server:
        server.url        # "http://127.0.0.1:PORT/api/v1/models" (OABENCH_CATALOGUE_URL)
        server.state = "down"        # HTTP 503 with an HTML page
        server.state = "slow"        # headers at once, then the body one byte every `drip_s` seconds
        server.state = "malformed"   # HTTP 200 with a body that is not JSON
        server.models = [...]        # a later listing

Requests are counted (`requests`). A real server on 127.0.0.1, so the client's httpx, proxies setting
(`NO_PROXY` covers loopback) and deadline are what is tested.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

CATALOGUE_PATH = "/api/v1/models"
State = Literal["up", "down", "slow", "malformed"]


def catalogue_model(
    model_id: str,
    created: dt.datetime,
    prompt: str = "0.000001",
    completion: str = "0.000002",
    inputs: tuple[str, ...] = ("text",),
    outputs: tuple[str, ...] = ("text",),
    expiration_date: str | None = None,
    name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One model as OpenRouter lists it (prices in USD per token, as decimal strings)."""
    modality = "+".join(inputs) + "->" + "+".join(outputs)
    return {
        "id": model_id,
        "canonical_slug": model_id,
        "name": name or model_id.split("/")[-1].replace("-", " ").title(),
        "created": int(created.replace(tzinfo=dt.UTC).timestamp()),
        "description": f"{model_id}, listed for the tests",
        "context_length": 128000,
        "architecture": {
            "modality": modality,
            "input_modalities": list(inputs),
            "output_modalities": list(outputs),
            "tokenizer": "Other",
            "instruct_type": None,
        },
        "pricing": {
            "prompt": prompt,
            "completion": completion,
            "request": "0",
            "image": "0",
            "web_search": "0",
            "internal_reasoning": "0",
        },
        "top_provider": {"context_length": 128000, "max_completion_tokens": 16384, "is_moderated": False},
        "per_request_limits": None,
        "supported_parameters": ["max_tokens", "temperature", "top_p"],
        "expiration_date": expiration_date,
        **extra,
    }


@dataclass
class CatalogueServer:
    """Serves `{"data": models}` at `CATALOGUE_PATH` on 127.0.0.1:<ephemeral port>, or fails as `state` says."""

    models: list[dict[str, Any]] = field(default_factory=list)
    state: State = "up"
    drip_s: float = 0.2
    requests: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{CATALOGUE_PATH}"

    def __enter__(self) -> CatalogueServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    owner.requests += 1
                if self.path.split("?", 1)[0] != CATALOGUE_PATH:
                    self._send(404, b'{"error": {"message": "not found"}}')
                elif owner.state == "down":
                    self._send(
                        503, b"<html><body>503 Service Temporarily Unavailable</body></html>", "text/html"
                    )
                elif owner.state == "malformed":
                    self._send(200, b'{"data": [{"id": "acme/half-a-listing", "pricing": {"prompt": "0.0')
                else:
                    body = json.dumps({"data": owner.models}).encode()
                    self._send(200, body, drip_s=owner.drip_s if owner.state == "slow" else None)

            def _send(
                self,
                status: int,
                body: bytes,
                content_type: str = "application/json",
                drip_s: float | None = None,
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if drip_s is None:
                    self.wfile.write(body)
                    return
                for index in range(len(body)):
                    try:
                        self.wfile.write(body[index : index + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up, as it should
                        return
                    time.sleep(drip_s)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
