"""The crash-safe batch protocol against loopback OpenAI- and OpenRouter-shaped batch APIs: batches
submitted and collected, failed, expired and cancelled lines asked again and each paid once, results and
listings read page by page, a batch whose id was lost found again, and (`slow`) a SIGKILL right after
every step of the protocol, then a restart: no second batch for the same lines, no line paid twice."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from oabench_pipeline.inference.batches.journal import BatchJournal
from oabench_pipeline.inference.batches.protocol import STEPS, BatchLineResult, BatchProtocol
from oabench_pipeline.inference.batches.transport import BatchTransport
from oabench_pipeline_tests.inference.batch_helpers import API_KEY, MODEL, questions, transport_for
from oabench_pipeline_tests.servers.batch_api import (
    BatchPlan,
    OpenAIBatchServer,
    OpenRouterBatchServer,
    _BatchServer,
    completion,
)

APIS = ("openai", "openrouter")


@contextmanager
def batch_api(api: str, **options: Any) -> Iterator[_BatchServer]:
    server: _BatchServer = (
        OpenAIBatchServer(**options) if api == "openai" else OpenRouterBatchServer(**options)
    )
    with server:
        yield server


class Sink:
    """Keeps the first answer of each request hash, as the response log does; counts every hand-over."""

    def __init__(self) -> None:
        self.first: dict[str, BatchLineResult] = {}
        self.handed_over = 0

    def __call__(self, line: BatchLineResult) -> None:
        self.handed_over += 1
        self.first.setdefault(line.result.request_hash, line)


def protocol(tmp_path: Path, transport: BatchTransport, **options: Any) -> BatchProtocol:
    return BatchProtocol(BatchJournal(tmp_path / "45.batches.jsonl"), transport, MODEL, **options)


class Crash(Exception):
    """Raised by a step hook: the process "dies" there (in-process; the SIGKILL matrix is `slow`)."""


def crash_after(name: str) -> Any:
    def hook(step: str) -> None:
        if step == name:
            raise Crash(step)

    return hook


@pytest.mark.parametrize("api", APIS)
def test_a_batch_is_submitted_then_collected_as_chat_results(tmp_path: Path, api: str) -> None:
    requests = questions(12)

    def reply(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:  # a recorded answer per prompt
        prompt = body["messages"][-1]["content"]
        return completion("BCDA"[int(prompt.split()[1].rstrip(":")) % 4], cost=0.0004, reasoning="thought")

    with batch_api(api, reply=reply, default_plan=BatchPlan(polls_to_finish=2)) as server:
        runner = protocol(tmp_path, transport_for(api, server.base_url), secrets_to_redact=[API_KEY])
        sink = Sink()
        first = runner.step(requests, sink)
        assert len(first.submitted_batches) == 1 and first.submitted_lines == 12 and not first.done
        assert runner.step(requests, sink).open_batches == first.submitted_batches  # still running
        last = runner.step(requests, sink)

        assert last.done and last.answered == 12 and not last.submitted_batches
        assert server.requests["create"] == 1
        assert sorted(line.result.qid for line in sink.first.values()) == [r.qid for r in requests]
        for index, request in enumerate(requests):
            line = sink.first[request.request_hash]
            assert line.result.ok and line.result.raw_response == "BCDA"[index % 4]
            assert line.result.reasoning == "thought" and line.result.prompt_tokens == 100
            assert line.result.cost_usd == pytest.approx(0.0002)  # half the sync cost, as the batch billed
            assert line.batch_id == first.submitted_batches[0]
            assert line.result.provenance.response_provider == "Acme"
        assert set(server.billed_by_body.values()) == {1} and len(server.billed_by_body) == 12
        assert runner.step(requests, sink).done and server.requests["create"] == 1  # nothing more to send
        assert server.authorizations == {f"Bearer {API_KEY}"}
        assert API_KEY not in (tmp_path / "45.batches.jsonl").read_text()


@pytest.mark.parametrize("api", APIS)
def test_failed_lines_and_a_batch_expired_half_done_are_asked_again_and_each_paid_once(
    tmp_path: Path, api: str
) -> None:
    requests = questions(20)
    every_fifth = BatchPlan(failed_lines=lambda custom_id: int(custom_id[-3:]) % 5 == 0)
    plans = [BatchPlan("expired", answered_fraction=0.5), every_fifth]
    with batch_api(api, plans=plans) as server:
        runner = protocol(tmp_path, transport_for(api, server.base_url))
        sink = Sink()
        report = runner.run(requests, sink, poll_interval_s=0)

        assert report.done
        assert len(sink.first) == 20 and all(line.result.ok for line in sink.first.values())
        assert server.billed_twice() == {} and len(server.billed_by_body) == 20
        # 20 lines, then the 10 the expiry left, then the 2 of those that failed
        assert server.requests["create"] == 3
        sizes = sorted(len(b.lines) for b in server.batches.values())
        assert sizes == [2, 10, 20]
        retried = [line for line in sink.first.values() if line.result.attempts == 3]
        assert len(retried) == 2


@pytest.mark.parametrize("api", APIS)
def test_a_cancelled_batch_and_a_rejected_create(tmp_path: Path, api: str) -> None:
    requests = questions(8)
    plans = [BatchPlan("cancelled", answered_fraction=0.25)]
    with batch_api(api, plans=plans, reject_creates=1) as server:
        runner = protocol(tmp_path, transport_for(api, server.base_url))
        sink = Sink()
        rejected = runner.step(requests, sink)
        assert rejected.rejected and "rejected" in rejected.rejected[0] and not server.batches
        assert not server.billed

        runner.run(requests, sink, poll_interval_s=0)
        assert len(sink.first) == 8 and server.billed_twice() == {}
        assert sorted(len(b.lines) for b in server.batches.values()) == [6, 8]


def test_a_batch_that_fails_validation_after_it_was_accepted_is_reported_and_sent_again(
    tmp_path: Path,
) -> None:
    requests = questions(5)
    with OpenRouterBatchServer(plans=[BatchPlan("failed")]) as server:
        runner = protocol(tmp_path, transport_for("openrouter", server.base_url))
        sink = Sink()
        report = runner.run(requests, sink, poll_interval_s=0)
        assert report.rejected and "validation failed" in report.rejected[0]
        assert not sink.first and not server.billed and server.requests["results"] == 0
        assert server.requests["create"] == 1  # nothing more sent in the round that saw the failure

        runner.run(requests, sink, poll_interval_s=0)
        assert len(sink.first) == 5 and server.requests["create"] == 2 and server.billed_twice() == {}


@pytest.mark.parametrize("api", APIS)
def test_a_line_that_fails_in_every_batch_is_given_up_after_its_attempts(tmp_path: Path, api: str) -> None:
    requests = questions(4)
    always_q001 = BatchPlan(failed_lines=lambda custom_id: custom_id.endswith(":q001"))
    with batch_api(api, default_plan=always_q001) as server:
        runner = protocol(tmp_path, transport_for(api, server.base_url), max_attempts=2)
        sink = Sink()
        report = runner.run(requests, sink, poll_interval_s=0)

        assert report.done and report.gave_up == 1
        given_up = [line for line in sink.first.values() if not line.result.ok]
        assert [line.result.qid for line in given_up] == ["q001"]
        assert given_up[0].result.error is not None and "failed" in given_up[0].result.error
        assert server.requests["create"] == 2 and sink.handed_over == 4


def test_results_are_read_page_by_page(tmp_path: Path) -> None:
    requests = questions(10)
    with OpenRouterBatchServer(max_page_size=3) as server:
        runner = protocol(tmp_path, transport_for("openrouter", server.base_url))
        sink = Sink()
        runner.run(requests, sink, poll_interval_s=0)
        assert len(sink.first) == 10
        assert server.requests["results"] == 4  # 3 + 3 + 3 + 1


@pytest.mark.parametrize("api", APIS)
def test_a_batch_whose_id_was_lost_is_found_in_the_paged_listing(tmp_path: Path, api: str) -> None:
    with batch_api(api) as server:
        for other in range(5):  # other cells' batches, newer and older, on a listing paged by 2
            other_runner = protocol(tmp_path / f"other{other}", transport_for(api, server.base_url))
            other_runner.step(questions(3 + other), Sink())
        requests = questions(6)
        crashing = protocol(
            tmp_path, transport_for(api, server.base_url), after_step=crash_after("batch_created")
        )
        with pytest.raises(Crash):
            crashing.step(requests, Sink())
        for later in range(2):
            protocol(tmp_path / f"later{later}", transport_for(api, server.base_url)).step(
                questions(2), Sink()
            )
        assert server.requests["create"] == 8

        restarted = protocol(tmp_path, transport_for(api, server.base_url, list_page=2))
        sink = Sink()
        report = restarted.run(requests, sink, poll_interval_s=0)
        assert report.done and len(sink.first) == 6
        assert server.requests["create"] == 8  # found, not sent again
        assert server.requests["list"] >= 2  # read page by page
        journal = BatchJournal(tmp_path / "45.batches.jsonl").replay()
        (intent,) = journal.intents.values()
        assert intent.batch_id is not None and intent.closed == "collected"


@pytest.mark.parametrize("api", APIS)
def test_an_intent_whose_create_never_left_is_abandoned_and_sent_once(tmp_path: Path, api: str) -> None:
    with batch_api(api) as server:
        crashing = protocol(
            tmp_path, transport_for(api, server.base_url), after_step=crash_after("intent_recorded")
        )
        with pytest.raises(Crash):
            crashing.step(questions(5), Sink())
        sink = Sink()
        protocol(tmp_path, transport_for(api, server.base_url)).run(questions(5), sink, poll_interval_s=0)
        assert len(sink.first) == 5 and server.requests["create"] == 1
        journal = BatchJournal(tmp_path / "45.batches.jsonl").replay()
        assert sorted(str(i.closed) for i in journal.intents.values()) == ["abandoned", "collected"]


def test_a_torn_last_journal_line_is_ignored_and_closed(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path / "j.jsonl")
    intent = {"event": "intent", "token": "t1", "model": "m", "at": "2026-01-01T00:00:00+00:00", "lines": []}
    journal.path.write_text(json.dumps(intent) + '\n{"event":"subm')  # a crash mid-write
    journal.record_abandoned("t1", "test")
    state = journal.replay()
    assert state.ignored_lines == 1 and state.intents["t1"].closed == "abandoned"


# --------------------------------------------------------------------------------- SIGKILL matrix


def _steps(api: str) -> list[str]:
    return [s for s in STEPS if api == "openai" or s != "file_uploaded"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("api", "step"), [(api, step) for api in APIS for step in _steps(api)], ids=lambda value: str(value)
)
def test_sigkill_after_each_step_then_a_restart_pays_each_line_once(
    tmp_path: Path, api: str, step: str
) -> None:
    journal, sink = tmp_path / "45.batches.jsonl", tmp_path / "sink.jsonl"
    plan = BatchPlan(failed_lines=lambda custom_id: custom_id.endswith(("q003", "q007")))
    with batch_api(api, plans=[plan]) as server:

        def child(*extra: str) -> subprocess.CompletedProcess[str]:
            command = [
                sys.executable,
                "-m",
                "oabench_pipeline_tests.inference.batch_child",
                api,
                server.base_url,
                str(journal),
                str(sink),
                "12",
                *extra,
            ]
            return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

        killed = child("--kill-after", step)
        assert killed.returncode == -9, killed.stderr
        finished = child()
        assert finished.returncode == 0, finished.stderr
        assert json.loads(finished.stdout) == {"done": True}

        records = [json.loads(line) for line in sink.read_text().splitlines()]
        answered = {r["request_hash"] for r in records if r["ok"]}
        assert answered == {q.request_hash for q in questions(12)}
        assert server.billed_twice() == {}
        # one batch of 12, and one of the 2 lines that failed in it: never a second batch for the same lines
        assert sorted(len(b.lines) for b in server.batches.values()) == [2, 12]
