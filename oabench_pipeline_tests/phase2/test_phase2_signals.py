"""`oabench run --phase 2` stopped by Ctrl-C mid-cell (a real subprocess, the loopback replay server): nothing is
sent after the signal, the replies in flight land in the response log, no partition is written, the output
says how to resume, and the resumed run pays for no conversation twice."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from oabench_pipeline.phase2.plans import answers_log_path
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.paid_calls import log_line_count
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.inference.run_processes import exit_within, output, start_run, wait_until
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_all_template_fixture
from oabench_pipeline_tests.phase2.test_phase2_replay import recorded_replies
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

pytestmark = pytest.mark.slow

MODEL = "o3-2025-04-16"
ANSWERED = 6
CONCURRENCY = 2
STOPPED_WITHIN_S = 8.0


@pytest.fixture
def launched() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Subprocesses the test started; any still alive at its end is SIGKILLed with its process group."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


phase2_all_template = phase2_all_template_fixture()  # every 2nd-phase edition, ingested once per session


@pytest.fixture
def phase2_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mirror_server: StaticFileServer,
    phase2_all_template: Path,
) -> PipelineEnv:
    """Every 2nd-phase edition, copied from the session's ingest (`phase2/ingested.py`)."""
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_all_template, env)
    return env


def test_ctrl_c_mid_cell_keeps_what_arrived_and_the_resume_pays_nothing_twice(
    phase2_env: PipelineEnv, shared_oab: Path, launched: list
) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    log = answers_log_path(phase2_env.warehouse.root, MODEL, "39")
    with ReplayServer(replies=recorded_replies(data), api_key=TEST_KEY, conversation_keys=True) as server:
        use_replay_models(phase2_env, server.base_url, [MODEL], concurrency=CONCURRENCY)
        server.hold_replies(allow=ANSWERED)
        proc = start_run(phase2_env, "SIGINT", "--phase", "2", "--models", MODEL, "--editions", "39")
        launched.append(proc)
        wait_until(
            lambda: log_line_count(log) == ANSWERED and server.stats.total_requests == ANSWERED + CONCURRENCY,
            proc,
            "answers logged and the slots taken again",
        )
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: "SIGINT: stopping" in output(phase2_env, "SIGINT"), proc, "the stop is announced")
        server.release_replies()
        returncode = exit_within(proc, phase2_env, "SIGINT", STOPPED_WITHIN_S)
        said = output(phase2_env, "SIGINT")
        assert returncode == 130, said
        assert server.stats.total_requests == ANSWERED + CONCURRENCY, "a request was sent after the signal"
        assert log_line_count(log) == ANSWERED + CONCURRENCY  # the replies in flight were kept
        assert f"oabench run --phase 2 --models {MODEL} --editions 39" in said
        assert phase2_env.warehouse.read("phase2_answers").is_empty()  # nothing half-written

        resumed = phase2_env.cli("run", "--phase", "2", "--models", MODEL, "--editions", "39")
        assert resumed.exit_code == 0, resumed.output
        stats = server.stats
    assert stats.unmatched == 0
    assert stats.total_requests == 35 + 28  # the edition's 35 items, 28 of them with a sub-item B
    assert set(stats.answers_per_prompt.values()) == {1}, "a conversation was paid twice"
    assert phase2_env.warehouse.read("phase2_answers").height == 63
