"""Loopback batch APIs, one per shape: OpenAI's (files + batches, JSONL output and error files) and
OpenRouter's (inline requests, cursor-paged results), on 127.0.0.1:<ephemeral port> in a thread.

    with OpenRouterBatchServer(reply=recorded_answers, plans=[BatchPlan("expired", answered_fraction=0.5)],
                               max_page_size=7) as server:
        server.base_url               # "http://127.0.0.1:PORT/api/v1" (OpenAI's: ".../v1")
        server.billed                 # Counter: custom id -> times its line was billed
        server.billed_by_body         # Counter: SHA-256 of the request body -> times billed

A batch is `validating` when created and finishes on its `polls_to_finish`-th status read
(`GET /batches/{id}`), as its `BatchPlan` says: `completed` (with `failed_lines` failing inside it),
`expired` or `cancelled` with the first `answered_fraction` of its lines answered, or `failed` (nothing
answered: OpenRouter's asynchronous validation failure). Plans are taken one per batch created, in order;
then `default_plan`. `reject_creates=N` answers the next N creates with HTTP 400 (a validation failure at
create). Only answered lines are billed, at `price_factor` (0.5) times the cost `reply` reports.
`reply(custom_id, body)` returns the chat completion a line gets (`default_reply`: "A" with usage), so a
test can replay recorded answers. The OpenAI listing echoes each batch's `metadata` (filter it
client-side: OpenAI documents no server-side filter); OpenRouter's, as documented, has none.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

Outcome = Literal["completed", "expired", "cancelled", "failed"]
Reply = Callable[[str, dict[str, Any]], dict[str, Any]]


def default_reply(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion answering "A", with OpenRouter-style usage (a sync cost of $0.0002)."""
    return completion("A", cost=0.0002)


def completion(text: str, cost: float | None = 0.0002, reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning"] = reasoning
    usage: dict[str, Any] = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
    if cost is not None:
        usage["cost"] = cost
    return {
        "id": f"gen-{hashlib.sha256(text.encode()).hexdigest()[:12]}",
        "object": "chat.completion",
        "model": "acme/batch-model",
        "provider": "Acme",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    }


def body_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class BatchPlan:
    outcome: Outcome = "completed"
    answered_fraction: float = 1.0
    failed_lines: Callable[[str], bool] | None = None
    polls_to_finish: int = 1


@dataclass
class _Batch:
    batch_id: str
    model: str | None
    lines: list[tuple[str, dict[str, Any]]]
    metadata: dict[str, Any]
    plan: BatchPlan
    created_at: int
    status: str = "validating"
    polls: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    input_file_id: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "expired", "cancelled", "failed")

    def counts(self) -> dict[str, int]:
        done = sum(1 for r in self.results if r.get("error") is None)
        return {"total": len(self.lines), "completed": done, "failed": len(self.results) - done}


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _BatchServer:
    reply: Reply = default_reply
    plans: list[BatchPlan] = field(default_factory=list)
    default_plan: BatchPlan = field(default_factory=BatchPlan)
    reject_creates: int = 0
    price_factor: float = 0.5
    max_lines: int = 50_000
    billed: Counter[str] = field(default_factory=Counter)
    billed_by_body: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    batches: dict[str, _Batch] = field(default_factory=dict)
    authorizations: set[str] = field(default_factory=set)
    prefix: str = "/v1"
    _server: ThreadingHTTPServer | None = None
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    # ------------------------------------------------------------------------------ life cycle

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.prefix}"

    def __enter__(self) -> _BatchServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self, method: str) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                query = {k: v[-1] for k, v in parse_qs(url.query).items()}
                owner.authorizations.add(self.headers.get("Authorization", ""))
                try:
                    status, payload, ctype = owner.route(method, url.path, query, raw, self.headers)
                except _HttpError as exc:
                    status, ctype = exc.status, "application/json"
                    payload = json.dumps({"error": {"message": str(exc), "code": exc.status}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ----------------------------------------------------------------------------- shared logic

    def route(
        self, method: str, path: str, query: dict[str, str], raw: bytes, headers: Any
    ) -> tuple[int, bytes, str]:
        raise NotImplementedError

    def count(self, name: str) -> None:
        with self._lock:
            self.requests[name] += 1

    def _new_batch(
        self, model: str | None, lines: list[tuple[str, dict[str, Any]]], metadata: dict[str, Any]
    ) -> _Batch:
        with self._lock:
            if self.reject_creates > 0:
                self.reject_creates -= 1
                raise _HttpError(400, "invalid batch: rejected by the test server's reject_creates")
            ids = [custom_id for custom_id, _ in lines]
            if not lines or len(set(ids)) != len(ids) or len(lines) > self.max_lines:
                raise _HttpError(400, "invalid batch: no lines, duplicate custom_id or too many lines")
            plan = self.plans.pop(0) if self.plans else self.default_plan
            batch = _Batch(f"batch_{next(self._ids):04d}", model, lines, metadata, plan, int(time.time()))
            self.batches[batch.batch_id] = batch
            return batch

    def poll(self, batch_id: str) -> _Batch:
        """A status read: the batch moves on, and finishes on its plan's `polls_to_finish`-th read."""
        with self._lock:
            batch = self.get(batch_id)
            if not batch.terminal:
                batch.polls += 1
                batch.status = "in_progress"
                if batch.polls >= batch.plan.polls_to_finish:
                    self.finish(batch, batch.plan.outcome)
            return batch

    def get(self, batch_id: str) -> _Batch:
        batch = self.batches.get(batch_id)
        if batch is None:
            raise _HttpError(404, f"no batch {batch_id}")
        return batch

    def finish(self, batch: _Batch, outcome: Outcome) -> None:
        with self._lock:
            if batch.terminal:
                return
            if outcome == "failed":
                batch.status, batch.error = "failed", "validation failed: the test server's plan"
                return
            answered_up_to = len(batch.lines)
            if outcome in ("expired", "cancelled"):
                answered_up_to = int(len(batch.lines) * batch.plan.answered_fraction)
            for index, (custom_id, body) in enumerate(batch.lines):
                if index >= answered_up_to:
                    code = "batch_expired" if outcome == "expired" else "batch_cancelled"
                    batch.results.append(_error_line(custom_id, code, f"request not run: {outcome}"))
                elif batch.plan.failed_lines is not None and batch.plan.failed_lines(custom_id):
                    batch.results.append(_error_line(custom_id, "server_error", "the provider failed"))
                else:
                    batch.results.append(self._answer(custom_id, body))
            batch.status = outcome
            self.on_finished(batch)

    def _answer(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = json.loads(json.dumps(self.reply(custom_id, body)))
        usage = reply.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("cost"), int | float):
            usage["cost"] = usage["cost"] * self.price_factor
        self.billed[custom_id] += 1
        self.billed_by_body[body_key(body)] += 1
        request_id = f"req_{len(self.billed_by_body)}_{self.billed[custom_id]}"
        return {
            "id": f"res_{custom_id}",
            "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": request_id, "body": reply},
            "error": None,
        }

    def on_finished(self, batch: _Batch) -> None:
        """Shape-specific work once a batch has its results (OpenAI writes its files)."""

    def cancel(self, batch_id: str) -> _Batch:
        with self._lock:
            batch = self.get(batch_id)
            self.finish(batch, "cancelled")
            return batch

    def finish_all(self) -> None:
        """Every open batch finishes now, as planned."""
        with self._lock:
            for batch in list(self.batches.values()):
                self.finish(batch, batch.plan.outcome)

    def billed_twice(self) -> dict[str, int]:
        """Request bodies billed more than once: must stay empty."""
        return {k: v for k, v in self.billed_by_body.items() if v > 1}

    def listing(self, query: dict[str, str], item: Callable[[_Batch], dict[str, Any]]) -> dict[str, Any]:
        """Newest first; `after` is the previous page's `last_id`; `limit` 1..100 (default 20)."""
        limit = max(1, min(100, int(query.get("limit", "20"))))
        with self._lock:
            ordered = sorted(self.batches.values(), key=lambda b: b.batch_id, reverse=True)
            if "after" in query:
                ids = [b.batch_id for b in ordered]
                ordered = ordered[ids.index(query["after"]) + 1 :] if query["after"] in ids else []
            page = ordered[:limit]
            data = [item(b) for b in page]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": len(ordered) > limit,
        }


def _error_line(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {
        "id": f"res_{custom_id}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


def _json(status: int, payload: dict[str, Any]) -> tuple[int, bytes, str]:
    return status, json.dumps(payload).encode(), "application/json"


# ------------------------------------------------------------------------------------------- OpenAI


@dataclass
class OpenAIBatchServer(_BatchServer):
    """`/v1/files` (multipart, purpose `batch`), `/v1/files/{id}/content`, `/v1/batches` (create, list,
    read, cancel). Output and error files are JSONL, one result line each."""

    files: dict[str, bytes] = field(default_factory=dict)
    prefix: str = "/v1"

    def route(
        self, method: str, path: str, query: dict[str, str], raw: bytes, headers: Any
    ) -> tuple[int, bytes, str]:
        rest = path.removeprefix(self.prefix)
        parts = [p for p in rest.split("/") if p]
        if method == "POST" and parts == ["files"]:
            self.count("upload")
            return _json(200, self._upload(raw, headers.get("Content-Type", "")))
        if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            self.count("file_content")
            with self._lock:
                content = self.files.get(parts[1])
            if content is None:
                raise _HttpError(404, f"no file {parts[1]}")
            return 200, content, "application/jsonl"
        if method == "POST" and parts == ["batches"]:
            self.count("create")
            return _json(200, self._item(self._create(json.loads(raw))))
        if method == "GET" and parts == ["batches"]:
            self.count("list")
            return _json(200, self.listing(query, self._item))
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            self.count("status")
            return _json(200, self._item(self.poll(parts[1])))
        if method == "POST" and len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel":
            self.count("cancel")
            return _json(200, self._item(self.cancel(parts[1])))
        raise _HttpError(404, f"no route {method} {path}")

    def _upload(self, raw: bytes, content_type: str) -> dict[str, Any]:
        message = BytesParser(policy=default_policy).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        fields: dict[str, bytes] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if isinstance(name, str) and isinstance(payload, bytes):
                fields[name] = payload
        if fields.get("purpose") != b"batch" or "file" not in fields:
            raise _HttpError(400, "a batch input file needs purpose=batch and a file")
        with self._lock:
            file_id = f"file-{len(self.files) + 1:04d}"
            self.files[file_id] = fields["file"]
        return {"id": file_id, "object": "file", "bytes": len(fields["file"]), "purpose": "batch"}

    def _create(self, request: dict[str, Any]) -> _Batch:
        if request.get("completion_window") != "24h" or request.get("endpoint") != "/v1/chat/completions":
            raise _HttpError(400, "completion_window must be 24h and endpoint /v1/chat/completions")
        with self._lock:
            content = self.files.get(str(request.get("input_file_id")))
        if content is None:
            raise _HttpError(400, "no such input file")
        lines = []
        for raw in content.splitlines():
            item = json.loads(raw)
            lines.append((str(item["custom_id"]), item["body"]))
        batch = self._new_batch(None, lines, dict(request.get("metadata") or {}))
        batch.input_file_id = str(request["input_file_id"])
        return batch

    def on_finished(self, batch: _Batch) -> None:
        answered = [r for r in batch.results if r.get("error") is None]
        failed = [r for r in batch.results if r.get("error") is not None]
        for rows, attr in ((answered, "output_file_id"), (failed, "error_file_id")):
            if rows:
                file_id = f"file-{len(self.files) + 1:04d}"
                self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                setattr(batch, attr, file_id)

    def _item(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            errors = {"object": "list", "data": [{"code": "invalid", "message": batch.error}]}
            return {
                "id": batch.batch_id,
                "object": "batch",
                "endpoint": "/v1/chat/completions",
                "errors": errors if batch.error else None,
                "input_file_id": batch.input_file_id,
                "completion_window": "24h",
                "status": batch.status,
                "output_file_id": batch.output_file_id,
                "error_file_id": batch.error_file_id,
                "created_at": batch.created_at,
                "request_counts": batch.counts(),
                "metadata": batch.metadata,
            }


# --------------------------------------------------------------------------------------- OpenRouter


@dataclass
class OpenRouterBatchServer(_BatchServer):
    """`/api/v1/batches` (create with inline requests: 202 `validating`; list; read, with `results`
    inline once finished; cancel) and `/api/v1/batches/{id}/results` (pages of at most `max_page_size`
    lines, `next_cursor`). A create body whose `requests` come before `endpoint` or `model` is a 400, as
    OpenRouter documents."""

    prefix: str = "/api/v1"
    max_lines: int = 5_000
    max_page_size: int = 1_000

    def route(
        self, method: str, path: str, query: dict[str, str], raw: bytes, headers: Any
    ) -> tuple[int, bytes, str]:
        rest = path.removeprefix(self.prefix)
        parts = [p for p in rest.split("/") if p]
        if method == "POST" and parts == ["batches"]:
            self.count("create")
            return _json(202, self._item(self._create(raw), with_results=False))
        if method == "GET" and parts == ["batches"]:
            self.count("list")
            return _json(200, self.listing(query, lambda b: self._item(b, with_results=False)))
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            self.count("status")
            return _json(200, self._item(self.poll(parts[1]), with_results=True))
        if method == "GET" and len(parts) == 3 and parts[0] == "batches" and parts[2] == "results":
            self.count("results")
            return _json(200, self._results_page(parts[1], query))
        if method == "POST" and len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel":
            self.count("cancel")
            return _json(200, self._item(self.cancel(parts[1]), with_results=False))
        raise _HttpError(404, f"no route {method} {path}")

    def _create(self, raw: bytes) -> _Batch:
        keys = list(json.loads(raw, object_pairs_hook=lambda pairs: pairs))
        order = [k for k, _ in keys]
        if "requests" not in order or any(
            k in order[order.index("requests") :] for k in ("endpoint", "model")
        ):
            raise _HttpError(400, "endpoint and model must come before requests")
        request = json.loads(raw)
        if request.get("endpoint") != "/v1/chat/completions" or not request.get("model"):
            raise _HttpError(400, "endpoint must be /v1/chat/completions, with a model")
        lines = [(str(x["custom_id"]), x["body"]) for x in request["requests"]]
        return self._new_batch(str(request["model"]), lines, {})

    def _results_page(self, batch_id: str, query: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            batch = self.get(batch_id)
            if not batch.terminal:
                raise _HttpError(409, "the batch has not finished")
            limit = max(1, min(self.max_page_size, int(query.get("limit", "1000"))))
            offset = int(base64.urlsafe_b64decode(query["cursor"]).decode()) if "cursor" in query else 0
            data = batch.results[offset : offset + limit]
            more = offset + limit < len(batch.results)
        cursor = base64.urlsafe_b64encode(str(offset + limit).encode()).decode() if more else None
        return {"object": "list", "data": data, "has_more": more, "next_cursor": cursor}

    def _item(self, batch: _Batch, with_results: bool) -> dict[str, Any]:
        with self._lock:
            item: dict[str, Any] = {
                "id": batch.batch_id,
                "object": "batch",
                "endpoint": "/v1/chat/completions",
                "model": batch.model,
                "completion_window": "24h",
                "status": batch.status,
                "created_at": batch.created_at,
                "finalized_at": batch.created_at if batch.terminal else None,
                "request_counts": batch.counts(),
                "error": {"message": batch.error} if batch.error else None,
                "usage": None,
            }
            if with_results:
                item["results"] = list(batch.results) if batch.terminal else []
            return item
