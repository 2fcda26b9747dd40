"""A loopback model catalogue: `GET /api/v1/models` as OpenRouter shapes it, and the ways it fails.

    with CatalogueServer(models=[catalogue_model("acme/fit", created=dt.datetime(2026, 3, 1))]) as server:
        server.url        # "http://127.0.0.1:PORT/api/v1/models" (OABENCH_CATALOGUE_URL)
        server.state = "down"        # HTTP 503 with an HTML page
        server.state = "slow"        # headers at once, then the body one byte every `drip_s` seconds
        server.state = "malformed"   # HTTP 200 with a body that is not JSON
        server.state = "nested"      # HTTP 200 with JSON nested 100,000 deep (`[[[[...`)
        server.state = "redirect"    # HTTP 302 to `server.redirect_to` (another host, a metadata address)
        server.models = [...]        # a later listing

Fetches are counted (`listings_requested`). A real server on 127.0.0.1 (the loopback file server's), so
the client's httpx and its deadline are what is tested.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from oabench_pipeline_tests.servers.static_files import Override, StaticFileServer

CATALOGUE_PATH = "/api/v1/models"
State = Literal["up", "down", "slow", "malformed", "nested", "redirect"]
NESTING = 100_000  # "nested": the `data` list nested this deep, past what Python's JSON decoder can take


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
class CatalogueServer(StaticFileServer):
    """Serves `{"data": models}` at `CATALOGUE_PATH` on 127.0.0.1:<ephemeral port>, or fails as `state` says.

    The loopback file server with one answer computed per request (so a test can change the listing or the
    state between two fetches); every other path is a 404.
    """

    root: Path = Path("/nonexistent/catalogue-server")  # no files: only the listing is served
    models: list[dict[str, Any]] = field(default_factory=list)
    state: State = "up"
    drip_s: float = 0.2
    redirect_to: str = "http://169.254.169.254/latest/meta-data/"

    @property
    def url(self) -> str:
        return self.base_url + CATALOGUE_PATH

    @property
    def listings_requested(self) -> int:
        return self.requests[CATALOGUE_PATH]

    def next_override(self, path: str) -> Override | None:
        if path != CATALOGUE_PATH:
            return None
        if self.state == "down":
            return Override(
                b"<html><body>503 Service Temporarily Unavailable</body></html>", 503, "text/html"
            )
        if self.state == "redirect":
            return Override(b"", 302, "text/plain", headers={"Location": self.redirect_to})
        if self.state == "malformed":
            return Override(
                b'{"data": [{"id": "acme/half-a-listing", "pricing": {"prompt": "0.0', 200, "application/json"
            )
        if self.state == "nested":
            return Override(b'{"data": ' + b"[" * NESTING + b"]" * NESTING + b"}", 200, "application/json")
        body = json.dumps({"data": self.models}).encode()
        return Override(
            body, 200, "application/json", drip_interval_s=self.drip_s if self.state == "slow" else None
        )
