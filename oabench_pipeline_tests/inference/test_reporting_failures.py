"""A paid reply never waits on, nor is lost to, what the step reports besides it: a raising `on_result`
cancels no request of the client's pool, a raising Dagster log inside the cell's reply callback cancels
nothing, and a progress file that cannot be written fails no cell."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.assets import InferenceConfig, _call_model
from oabench_pipeline.inference.cell import CellPlan
from oabench_pipeline.inference.client import run_chat_requests
from oabench_pipeline.inference.progress import CellProgress, publish, relaying
from oabench_pipeline.inference.resources import ModelClientResource
from oabench_pipeline.inference.response_log import ResponseLog, read_log
from oabench_pipeline.inference.types import ChatResult
from oabench_pipeline_tests.inference.test_client import fast_endpoint, replies, requests
from oabench_pipeline_tests.inference.test_response_log import result
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer

MODEL = "test/model-x"


def test_a_raising_on_result_stops_sending_and_every_reply_in_flight_is_still_delivered() -> None:
    delivered: list[ChatResult] = []

    def on_result(result: ChatResult) -> None:
        delivered.append(result)
        if len(delivered) == 1:
            raise RuntimeError("the event log is gone")

    with ReplayServer(replies=replies(40), latency_s=0.05) as server:
        with pytest.raises(RuntimeError, match="event log is gone"):
            asyncio.run(run_chat_requests(fast_endpoint(server.base_url), requests(40), 6, on_result))
        server.wait_idle()
        answered = server.stats.total_requests
    assert len(delivered) == answered, "a reply the server answered was cancelled, not delivered"
    assert answered < 40, "nothing new is sent once handling a reply failed"
    assert all(r.ok for r in delivered)


class RaisingLog:
    """Dagster's `context.log` with its storage gone: every line raises, as a full DAGSTER_HOME's SQLite."""

    def __init__(self) -> None:
        self.calls = 0

    def _raise(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        raise OSError(28, "database or disk is full")

    info = warning = _raise


def test_a_raising_dagster_log_inside_the_reply_callback_cancels_nothing(tmp_path: Path) -> None:
    # A negative reported cost makes every reply carry a cost note: the callback logs a warning for each.
    recorded = {
        key: RecordedReply(reply.raw_response, prompt_tokens=10, completion_tokens=1, cost=-1.0)
        for key, reply in replies(30).items()
    }
    log_path = tmp_path / "responses" / "cell.jsonl"
    dagster_log = RaisingLog()
    with ReplayServer(replies=recorded, latency_s=0.02) as server:
        model = ModelConfig.model_validate(
            {"id": MODEL, "base_url": server.base_url, "api_key_env": None, "concurrency": 4}
        )
        pending = requests(30)
        _call_model(
            SimpleNamespace(log=dagster_log),  # type: ignore[arg-type]
            model,
            "45",
            CellPlan(requests=pending, pending=pending, kept={}),
            {},
            log_path,
            ModelClientResource(backoff_base_s=0.01, backoff_max_s=0.05),
            InferenceConfig(),
            {model.key: model},
            tmp_path,
        )
        server.wait_idle()
        answered = server.stats.total_requests
    logged = read_log(log_path)
    assert dagster_log.calls >= 30, "the callback did try to log"
    assert answered == len(logged) == 30, "every question answered once and every reply in the response log"
    assert all(r.ok for r in logged)


def test_a_progress_file_that_cannot_be_written_fails_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the relay's folder should be")
    progress = CellProgress(cell="acme/m × 45", total=78, already_done=0)
    results = [result(f"h{i}") for i in range(3)]

    def on_durable(_: ChatResult) -> None:
        progress.answered += 1
        publish(progress)

    with relaying(blocker / "progress.json"):
        with ResponseLog(tmp_path / "cell.jsonl", on_durable) as log:
            for each in results:
                log.append(each)
        publish(progress)
    assert progress.answered == 3
    assert len(read_log(tmp_path / "cell.jsonl")) == 3
