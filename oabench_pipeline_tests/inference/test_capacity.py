"""Shared capacity: a model key's `concurrency` and a host's `endpoint_concurrency` hold across cells,
threads and processes, and a killed holder frees its slots."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from oabench_pipeline.inference.capacity import Capacity, FileSlots
from oabench_pipeline_tests.inference.replay import use_replay_models
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import ReplayServer


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
