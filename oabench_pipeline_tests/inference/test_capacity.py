"""Shared capacity: a model key's `concurrency` and a host's `endpoint_concurrency` hold across cells,
threads and processes, and a killed holder frees its slots."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from oabench_pipeline.inference.capacity import LIMIT_RESET_AFTER_S, Capacity, FileSlots, SharedLimit
from oabench_pipeline.inference.client import run_chat_requests
from oabench_pipeline.inference.types import ChatResult
from oabench_pipeline_tests.inference.replay import use_replay_models
from oabench_pipeline_tests.inference.test_client import fast_endpoint, replies, requests
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ReplayServer


def test_threads_with_their_own_event_loops_share_one_limit_first_come_first_served() -> None:
    capacity = Capacity("acme/m", 3, folder=None)
    in_flight, peak, served = 0, 0, []
    lock = threading.Lock()

    async def cell(name: str) -> None:
        async def one(i: int) -> None:
            nonlocal in_flight, peak
            async with capacity.slot():
                with lock:
                    in_flight += 1
                    peak = max(peak, in_flight)
                await asyncio.sleep(0.01)
                with lock:
                    in_flight -= 1
                    served.append((name, i))

        await asyncio.gather(*(one(i) for i in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(cell(f"cell{k}"),)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert peak == 3
    assert len(served) == 30


def test_a_cancelled_waiter_gives_its_turn_on() -> None:
    capacity = Capacity("acme/m", 1, folder=None)

    async def scenario() -> bool:
        async with capacity.slot():
            waiter = asyncio.create_task(_enter(capacity))
            await asyncio.sleep(0.01)
            waiter.cancel()
        return await asyncio.wait_for(_enter(capacity), timeout=5)

    assert asyncio.run(scenario())


async def _enter(capacity: Capacity) -> bool:
    async with capacity.slot():
        return True


HOLDER = """
import sys, time
from pathlib import Path
from oabench_pipeline.inference.capacity import FileSlots
slots = FileSlots(Path(sys.argv[1]), 2)
assert slots.try_take() is not None and slots.try_take() is not None
print("held", flush=True)
time.sleep(600)
"""


def test_slots_held_by_another_process_are_taken_back_when_it_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        slots = FileSlots(tmp_path, 2)
        assert slots.try_take() is None, "both slots are another process's"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert slots.try_take() is not None, "the kernel freed the dead holder's slot"


@pytest.mark.slow
def test_cells_of_two_models_run_at_once_within_key_and_host_limits(fresh_env: PipelineEnv) -> None:
    models = ["acme/one", "acme/two"]
    # One edition: the two keys' cells are what must share the host; more editions were more Dagster runs.
    # Each cell is a process of its own, and under load one starts up to a few seconds after the other:
    # 100 ms replies keep a cell sending for ~2.7 s alone (80 questions, 3 at a time), so the two overlap
    # (with 10 ms replies, CI once saw the first cell done before the second sent anything).
    with ReplayServer(latency_s=0.1) as server:
        use_replay_models(fresh_env, server.base_url, models, concurrency=3, endpoint_concurrency=4)
        result = fresh_env.cli("run", "--models", ",".join(models), "--editions", "45")
        assert result.exit_code == 0, result.output
        stats = server.stats
    # 2 keys at once: more than one key's 3, never more than the host's 4.
    assert stats.max_in_flight == 4
    assert stats.total_requests == 2 * 80
    assert not stats.duplicate_answers


# --------------------------------------------------------------------- an endpoint's rate limit (AIMD)


def test_a_shared_limit_halves_once_per_429_window_and_grows_by_one_per_limit_answers(tmp_path: Path) -> None:
    # Two objects on one folder share nothing but the file, as two processes do.
    first, second = SharedLimit(tmp_path, 20), SharedLimit(tmp_path, 20)
    assert first.current() == (20, 0), "no 429 yet: the ceiling"
    second.rate_limited(epoch=0)
    assert first.current() == (10, 1), "one process's 429 lowers every process's limit"
    first.rate_limited(epoch=0)  # a request sent before the decrease: already answered by it
    assert second.current() == (10, 1)
    first.rate_limited(epoch=1)
    assert second.current() == (5, 2)
    for _ in range(4):
        second.answered()
    assert first.current() == (5, 2)
    first.answered()
    assert second.current() == (6, 2), "one more in flight after `limit` answers"
    for _ in range(5):
        first.rate_limited(epoch=first.current()[1])
    assert second.current()[0] == 1, "never below one"


def test_a_shared_limit_left_alone_is_forgotten(tmp_path: Path) -> None:
    limit = SharedLimit(tmp_path, 8)
    limit.rate_limited(epoch=0)
    assert limit.current()[0] == 4
    stale = json.loads((tmp_path / "limit.json").read_text())
    stale["updated"] -= LIMIT_RESET_AFTER_S + 1
    (tmp_path / "limit.json").write_text(json.dumps(stale))
    assert SharedLimit(tmp_path, 8).current()[0] == 8


RATE_LIMITED_CELLS = 6  # of 78 questions each, at concurrency 20: the matrix of issue 41
QUESTIONS = 78


@pytest.mark.slow
@pytest.mark.parametrize("retry_after_s", [0.05, None], ids=["retry-after", "no-retry-after"])
def test_cells_in_separate_processes_share_a_429_and_none_gives_up(
    tmp_path: Path, retry_after_s: float | None
) -> None:
    """Cells of concurrency 20 against an endpoint allowing 4 in flight: each cell has its own capacity
    object over one slot folder (as its own process has), and every question ends answered, once."""
    faults = FaultProfile(max_in_flight_before_429=4, retry_after_s=retry_after_s)
    folder = tmp_path / "endpoint"
    with ReplayServer(
        replies=replies(QUESTIONS * RATE_LIMITED_CELLS), latency_s=0.02, faults=faults
    ) as server:
        endpoint = fast_endpoint(server.base_url)

        def cell(index: int, results: list[ChatResult]) -> None:
            throttle = Capacity("127.0.0.1", 20 * RATE_LIMITED_CELLS, folder, adaptive=True)
            cell_requests = requests(QUESTIONS, start=QUESTIONS * index)
            asyncio.run(run_chat_requests(endpoint, cell_requests, 20, results.append, capacity=[throttle]))

        results: list[list[ChatResult]] = [[] for _ in range(RATE_LIMITED_CELLS)]
        threads = [threading.Thread(target=cell, args=(i, results[i])) for i in range(RATE_LIMITED_CELLS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        stats = server.stats
    every = [r for cell_results in results for r in cell_results]
    assert [r.error for r in every if not r.ok] == []
    assert len(every) == QUESTIONS * RATE_LIMITED_CELLS
    assert not stats.duplicate_answers
    assert stats.faults.get("429_overload", 0) > 0, "the limit was really exceeded at first"
    # After the first few halvings only the additive probe meets a 429: one for several answers (each
    # cell on its own, 20 in flight against 4, met more 429s than it had questions).
    assert stats.faults["429_overload"] < len(every) / 2


def test_a_429_with_retry_after_uses_none_of_a_questions_attempts() -> None:
    # Every question meets five 429s before its answer; the question's own budget allows two retries.
    faults = FaultProfile(rate_429=1.0, retry_after_s=0.01, max_faults_per_prompt=5)
    with ReplayServer(replies=replies(6), faults=faults) as server:
        endpoint = fast_endpoint(server.base_url, max_retries=2)
        results: list[ChatResult] = []
        asyncio.run(run_chat_requests(endpoint, requests(6), 3, results.append))
    assert [r.error for r in results if not r.ok] == []
    assert sorted(r.attempts for r in results) == [6] * 6
