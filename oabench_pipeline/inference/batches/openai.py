"""OpenAI's Batch API (and servers shaped like it): the requests as a JSONL file uploaded to `/files`
(purpose `batch`), `POST /batches` with `input_file_id`, `endpoint`, `completion_window` and `metadata`;
results in the output file (answered lines) and the error file (failed, expired, cancelled lines), read
from `/files/{id}/content` one line at a time. The client token travels in `metadata`, so a batch whose id
was lost is found again in `GET /batches` (paged with `after`/`limit`, newest first).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

from oabench_pipeline.inference.batches.journal import Intent
from oabench_pipeline.inference.batches.transport import (
    BatchApiError,
    BatchInfo,
    BatchLine,
    BatchRejected,
    FindOutcome,
    Found,
    LineOutcome,
    NotFound,
    StepHook,
    api_url,
    checked_json,
    clean_error_text,
    created_at,
    line_outcome,
    new_client,
)
from oabench_pipeline.inference.types import EndpointConfig

CHAT_ENDPOINT = "/v1/chat/completions"
TOKEN_KEY = "oabench_token"  # the metadata key that carries the client token
MAX_LINES = 50_000  # documented limit of one batch (and 200 MB)
LIST_PAGE = 100  # the list's largest page
# A batch created this long before its intent was recorded cannot be it (clocks disagree a little).
CLOCK_SLACK = timedelta(minutes=2)
RESULTS_CHUNK = 500  # result lines handed over at a time


@dataclass
class OpenAIBatches:
    """`BatchTransport` for OpenAI-shaped batch APIs."""

    endpoint: EndpointConfig
    list_page: int = LIST_PAGE
    name: str = "openai"
    max_lines: int = MAX_LINES

    def __post_init__(self) -> None:
        self._client = new_client(self.endpoint)

    def close(self) -> None:
        self._client.close()

    def create(self, token: str, model: str, lines: Sequence[BatchLine], after_step: StepHook) -> str:
        jsonl = "".join(
            json.dumps({"custom_id": x.custom_id, "method": "POST", "url": CHAT_ENDPOINT, "body": x.body})
            + "\n"
            for x in lines
        )
        uploaded = self._client.post(
            api_url(self.endpoint, "/files"),
            data={"purpose": "batch"},
            files={"file": (f"{token}.jsonl", jsonl.encode("utf-8"), "application/jsonl")},
        )
        file_id = str(checked_json(uploaded, self.endpoint, "uploading the batch file")["id"])
        after_step("file_uploaded")
        reply = self._client.post(
            api_url(self.endpoint, "/batches"),
            json={
                "input_file_id": file_id,
                "endpoint": CHAT_ENDPOINT,
                "completion_window": "24h",
                "metadata": {TOKEN_KEY: token},
            },
        )
        if 400 <= reply.status_code < 500 and reply.status_code not in (401, 403, 404, 408, 409, 429):
            raise BatchRejected(clean_error_text(reply.text, self.endpoint.secrets))
        return str(checked_json(reply, self.endpoint, "creating the batch")["id"])

    def status(self, batch_id: str) -> BatchInfo:
        data = checked_json(
            self._client.get(api_url(self.endpoint, f"/batches/{batch_id}")), self.endpoint, "reading a batch"
        )
        return _info(data)

    def results(self, batch_id: str) -> Iterator[list[LineOutcome]]:
        data = checked_json(
            self._client.get(api_url(self.endpoint, f"/batches/{batch_id}")), self.endpoint, "reading a batch"
        )
        for key in ("output_file_id", "error_file_id"):
            file_id = data.get(key)
            if file_id:
                yield from self._file_lines(str(file_id))

    def _file_lines(self, file_id: str) -> Iterator[list[LineOutcome]]:
        url = api_url(self.endpoint, f"/files/{file_id}/content")
        with self._client.stream("GET", url) as reply:
            if reply.status_code >= 300:
                reply.read()
                raise BatchApiError(f"reading file {file_id}: HTTP {reply.status_code}")
            chunk: list[LineOutcome] = []
            for raw in reply.iter_lines():
                if not raw.strip():
                    continue
                try:
                    item = json.loads(raw)
                except ValueError:
                    continue  # a line that is not JSON answers nothing: its request is asked again
                if isinstance(item, dict):
                    chunk.append(line_outcome(item))
                if len(chunk) >= RESULTS_CHUNK:
                    yield chunk
                    chunk = []
            if chunk:
                yield chunk

    def find(self, intent: Intent, known_batch_ids: set[str]) -> FindOutcome:
        """The batch whose metadata carries the intent's token: the list is read newest first, until
        batches older than the intent."""
        oldest = (intent.recorded_at - CLOCK_SLACK).timestamp()
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": self.list_page}
            if after:
                params["after"] = after
            page = checked_json(
                self._client.get(api_url(self.endpoint, "/batches"), params=params),
                self.endpoint,
                "listing batches",
            )
            items = [x for x in page.get("data") or [] if isinstance(x, dict)]
            for item in items:
                metadata = item.get("metadata") or {}
                if isinstance(metadata, dict) and metadata.get(TOKEN_KEY) == intent.token:
                    return Found(str(item["id"]))
            too_old = any(created_at(x) < oldest for x in items)
            if not page.get("has_more") or not items or too_old:
                return NotFound()
            after = str(page.get("last_id") or items[-1]["id"])

    def cancel(self, batch_id: str) -> BatchInfo:
        reply = self._client.post(api_url(self.endpoint, f"/batches/{batch_id}/cancel"))
        return _info(checked_json(reply, self.endpoint, "cancelling a batch"))


def _info(data: dict[str, object]) -> BatchInfo:
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    errors = data.get("errors")
    error = None
    if isinstance(errors, dict) and isinstance(errors.get("data"), list) and errors["data"]:
        first = errors["data"][0]
        error = str(first.get("message")) if isinstance(first, dict) else str(first)
    return BatchInfo(
        batch_id=str(data["id"]),
        status=str(data.get("status")),
        total=counts.get("total"),
        completed=counts.get("completed"),
        failed=counts.get("failed"),
        error=error,
    )
