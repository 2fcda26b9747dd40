"""OpenRouter's Batch API (beta): `POST /batches` with `endpoint`, `model` and the requests inline
(`endpoint` and `model` before `requests`: the API parses the body as a stream); results read from
`GET /batches/{id}/results`, a page at a time by `next_cursor`.

OpenRouter's documented submit body has no `metadata` (docs/design/batch-apis.md), so the client token
travels in every custom id (`<token>:<qid>`). A batch whose id was lost is found in `GET /batches` (newest
first, paged with `after`) among the batches the journal does not know, of the same model and line
count, created since the intent: a finished one is the intent's when its results carry the token; a
running one cannot be told apart yet (list items omit results), so the protocol waits for it rather
than risk paying twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta

from oabench_pipeline.inference.batches.journal import Intent
from oabench_pipeline.inference.batches.transport import (
    BatchInfo,
    BatchLine,
    BatchRejected,
    FindOutcome,
    Found,
    LineOutcome,
    NotFound,
    StepHook,
    Unresolved,
    api_url,
    checked_json,
    clean_error_text,
    created_at,
    line_outcome,
    new_client,
)
from oabench_pipeline.inference.types import EndpointConfig

CHAT_ENDPOINT = "/v1/chat/completions"
MAX_LINES = 5_000  # documented: up to 5,000 requests in one call
LIST_PAGE = 100  # the list's largest page (1..100)
RESULTS_PAGE = 1_000  # the results' largest page (1..1000)
CLOCK_SLACK = timedelta(minutes=2)  # how far our clock and the API's may disagree


@dataclass
class OpenRouterBatches:
    """`BatchTransport` for OpenRouter-shaped batch APIs."""

    endpoint: EndpointConfig
    results_page: int = RESULTS_PAGE
    list_page: int = LIST_PAGE
    name: str = "openrouter"
    max_lines: int = MAX_LINES

    def __post_init__(self) -> None:
        self._client = new_client(self.endpoint)

    def close(self) -> None:
        self._client.close()

    def create(self, token: str, model: str, lines: Sequence[BatchLine], after_step: StepHook) -> str:
        body = {
            "endpoint": CHAT_ENDPOINT,
            "model": model,
            "requests": [{"custom_id": x.custom_id, "body": x.body} for x in lines],
        }
        reply = self._client.post(api_url(self.endpoint, "/batches"), json=body)
        if 400 <= reply.status_code < 500 and reply.status_code not in (401, 403, 404, 408, 409, 429):
            raise BatchRejected(clean_error_text(reply.text, self.endpoint.secrets))
        return str(checked_json(reply, self.endpoint, "creating the batch")["id"])

    def status(self, batch_id: str) -> BatchInfo:
        reply = self._client.get(api_url(self.endpoint, f"/batches/{batch_id}"))
        return _info(checked_json(reply, self.endpoint, "reading a batch"))

    def results(self, batch_id: str) -> Iterator[list[LineOutcome]]:
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": self.results_page}
            if cursor:
                params["cursor"] = cursor
            page = checked_json(
                self._client.get(api_url(self.endpoint, f"/batches/{batch_id}/results"), params=params),
                self.endpoint,
                "reading batch results",
            )
            yield [line_outcome(x) for x in page.get("data") or [] if isinstance(x, dict)]
            cursor = page.get("next_cursor")
            if not page.get("has_more") or not cursor:
                return

    def find(self, intent: Intent, known_batch_ids: set[str]) -> FindOutcome:
        # The create is sent right after the intent is recorded, or never: a batch created outside that
        # window (give or take the clocks' disagreement and one request's timeout) is another's.
        oldest = (intent.recorded_at - CLOCK_SLACK).timestamp()
        newest = (intent.recorded_at + CLOCK_SLACK).timestamp() + self.endpoint.timeout_s
        prefix = f"{intent.token}:"
        waiting: str | None = None
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
                if not _may_be(item, intent, known_batch_ids, oldest, newest):
                    continue
                info = _info(item)
                if not info.terminal:  # the list may lag: ask the batch itself
                    info = self.status(info.batch_id)
                if not info.terminal:
                    waiting = waiting or info.batch_id
                elif info.status != "failed" and self._carries(info.batch_id, prefix):
                    return Found(info.batch_id)
            too_old = any(created_at(x) < oldest for x in items)
            if not page.get("has_more") or not items or too_old:
                return Unresolved(waiting) if waiting else NotFound()
            after = str(page.get("last_id") or items[-1]["id"])

    def _carries(self, batch_id: str, prefix: str) -> bool:
        """Whether the batch's first result page holds a custom id with the token."""
        page = checked_json(
            self._client.get(
                api_url(self.endpoint, f"/batches/{batch_id}/results"), params={"limit": self.results_page}
            ),
            self.endpoint,
            "reading batch results",
        )
        return any(str(x.get("custom_id", "")).startswith(prefix) for x in page.get("data") or [])

    def cancel(self, batch_id: str) -> BatchInfo:
        reply = self._client.post(api_url(self.endpoint, f"/batches/{batch_id}/cancel"))
        return _info(checked_json(reply, self.endpoint, "cancelling a batch"))


def _may_be(item: dict[str, object], intent: Intent, known: set[str], oldest: float, newest: float) -> bool:
    """A batch the journal does not know, of the intent's model and line count, created when its create
    could have been."""
    counts = item.get("request_counts")
    total = counts.get("total") if isinstance(counts, dict) else None
    return (
        str(item.get("id")) not in known
        and item.get("model") == intent.model
        and total in (None, len(intent.lines))
        and oldest <= created_at(item) <= newest
    )


def _info(data: dict[str, object]) -> BatchInfo:
    counts = data.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    error = data.get("error")
    return BatchInfo(
        batch_id=str(data["id"]),
        status=str(data.get("status")),
        total=counts.get("total"),
        completed=counts.get("completed"),
        failed=counts.get("failed"),
        error=str(error.get("message")) if isinstance(error, dict) else None,
    )
