"""What the batch tests and their child process share: a cell's questions and a transport per API."""

from __future__ import annotations

import hashlib
import json

from oabench_pipeline.inference.batches.openai import OpenAIBatches
from oabench_pipeline.inference.batches.openrouter import OpenRouterBatches
from oabench_pipeline.inference.batches.transport import BatchTransport
from oabench_pipeline.inference.types import ChatRequest, EndpointConfig

MODEL = "acme/batch-model"
API_KEY = "sk-batch-test-key"


def questions(n: int) -> list[ChatRequest]:
    """`n` questions, each with its own prompt (so each body is billed under its own hash)."""
    requests = []
    for index in range(n):
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"Question {index}: A, B, C or D?"}]}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        requests.append(ChatRequest(qid=f"q{index:03d}", body=body, request_hash=digest))
    return requests


def transport_for(api: str, base_url: str, list_page: int = 100) -> BatchTransport:
    endpoint = EndpointConfig(base_url=base_url, api_key=API_KEY, timeout_s=10.0)
    if api == "openai":
        return OpenAIBatches(endpoint, list_page=list_page)
    return OpenRouterBatches(endpoint, list_page=list_page)
