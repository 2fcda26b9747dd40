"""`oabench run` in real subprocesses against the loopback replay server: shared by the run-safety tests
(`test_run_safety.py`: locks, exit codes; `test_run_signals.py`: Ctrl-C and SIGTERM), which are two files so
that two workers run them at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.replay import TEST_KEY, published_replies, use_replay_models
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

MODEL = "deepseek/deepseek-v3.2"
RUN_TIMEOUT_S = 300.0
POLL_S = 0.01


def start_run(env: PipelineEnv, name: str, *args: str) -> subprocess.Popen[bytes]:
    """`oabench run ARGS` in its own process (and process group), output to `<root>/<name>.out`."""
    command = [sys.executable, "-m", "oabench_pipeline_tests.inference.crash_child", "--", "run", *args]
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        # Python's fault handler: a SIGABRT (`exit_within`) writes every thread's stack to the output.
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        stdout=(env.root / f"{name}.out").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def output(env: PipelineEnv, name: str) -> str:
    return (env.root / f"{name}.out").read_text(errors="replace")


def exit_within(proc: subprocess.Popen[bytes], env: PipelineEnv, name: str, seconds: float) -> int:
    """The run's exit code, if it exits within `seconds`; else it is aborted and the test fails with what
    every thread of it was doing (its fault handler's dump, at the end of its output)."""
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        proc.wait(timeout=30)
        pytest.fail(
            f"{name}: still running {seconds} s later; its threads then:\n{output(env, name)[-6000:]}"
        )


def wait_until(condition: object, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not condition():  # type: ignore[operator]
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}")
        time.sleep(POLL_S)


def replay(env: PipelineEnv, shared_oab: Path, latency_s: float, concurrency: int) -> ReplayServer:
    server = ReplayServer(
        replies=published_replies(shared_oab, env.warehouse), api_key=TEST_KEY, latency_s=latency_s
    )
    server.__enter__()
    use_replay_models(env, server.base_url, [MODEL], concurrency=concurrency)
    return server
