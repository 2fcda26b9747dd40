"""What the batch tests and their child process share: a cell's questions and a transport per API; and what
the tests of `oabench run --batch` share: a command SIGKILLed once it submitted, the sensor's tick."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def submitted(journal: Path) -> bool:
    """The cell's batch journal records a submitted batch (a half-written last line is not read)."""
    if not journal.exists():
        return False
    return any(
        line.strip() and json.loads(line).get("event") == "submitted"
        for line in journal.read_text().splitlines()
        if line.endswith("}")
    )


def killed_once_submitted(oabench_args: list[str], journal: Path) -> None:
    """`oabench ARGS` (a `run --batch`) in its own process group, SIGKILLed with the cell runs it launched as
    soon as `journal` records a submitted batch; its batches are polled too rarely to be collected first."""
    child = subprocess.Popen(
        [sys.executable, "-m", "oabench_pipeline.cli", *oabench_args],
        env={**os.environ, "OABENCH_BATCH_POLL_S": "600"},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not submitted(journal):
            assert child.poll() is None, "the run ended before it submitted"
            assert time.monotonic() < deadline, "no batch submitted"
            time.sleep(0.1)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the command and the cell runs it launched
        child.wait()
