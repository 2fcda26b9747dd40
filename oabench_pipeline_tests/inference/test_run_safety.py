"""`oabench run` as a user runs it (real subprocesses, the loopback replay server): one writer per cell,
Ctrl-C that stops, exit codes that tell the truth.

- Two runs of one cell at once: the second waits for the cell's lock, says so in one line, then sends only
  what the first left (nothing: every question is paid once); a third, Ctrl-C'd while waiting, exits 130.
- A run frozen mid-cell is `running` in `oabench status`; SIGKILLed, it is not (`failed`); the next run
  takes the stale lock over (one line), marks the dead Dagster run failed, and completes the cell.
- SIGINT/SIGTERM mid-cell: nothing is sent two seconds after the signal, the replies in flight land in the
  response log, no partition is written, the next cell never starts, the output says how to resume, the
  exit code is 130/143; the resumed run pays for nothing twice. A second Ctrl-C exits at once.
- A cell whose every call failed exits 1 and is named with its error.
- `dagster asset materialize` (a step on its process's main thread, as in a run worker) stops the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterRunStatus

from oabench_pipeline.inference.cell_lock import cell_lock_path, read_holder
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.runner import ensure_partitions, instance_for
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.paid_calls import active_prompt_keys, cell_rows, log_line_count
from oabench_pipeline_tests.inference.replay import TEST_KEY, published_replies, use_replay_models
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import FaultProfile, ReplayServer

MODEL = "deepseek/deepseek-v3.2"
RUN_TIMEOUT_S = 300.0
POLL_S = 0.01


def start_run(env: PipelineEnv, name: str, *args: str) -> subprocess.Popen[bytes]:
    """`oabench run ARGS` in its own process (and process group), output to `<root>/<name>.out`."""
    command = [sys.executable, "-m", "oabench_pipeline_tests.inference.crash_child", "--", "run", *args]
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=dict(os.environ),
        stdout=(env.root / f"{name}.out").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def output(env: PipelineEnv, name: str) -> str:
    return (env.root / f"{name}.out").read_text(errors="replace")


def wait_until(condition: object, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not condition():  # type: ignore[operator]
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}")
        time.sleep(POLL_S)


@pytest.fixture
def stop_children() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def replay(env: PipelineEnv, shared_oab: Path, latency_s: float, concurrency: int) -> ReplayServer:
    server = ReplayServer(
        replies=published_replies(shared_oab, env.warehouse), api_key=TEST_KEY, latency_s=latency_s
    )
    server.__enter__()
    use_replay_models(env, server.base_url, [MODEL], concurrency=concurrency)
    return server


def test_two_runs_of_one_cell_send_each_question_once(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    server = replay(fresh_env, shared_oab, latency_s=0.5, concurrency=3)  # 80 questions: ~13 s of sending
    try:
        first = start_run(fresh_env, "first", "--models", MODEL, "--editions", "44")
        stop_children.append(first)
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "44")
        wait_until(lambda: log_line_count(log) >= 2, first, "the first run logged answers")
        second = start_run(fresh_env, "second", "--models", MODEL, "--editions", "44")
        third = start_run(fresh_env, "third", "--models", MODEL, "--editions", "44")
        stop_children.extend([second, third])
        # Ctrl-C while waiting for the lock: the third gives up at once, having sent nothing.
        wait_until(lambda: "being answered by" in output(fresh_env, "third"), third, "the third run waits")
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=10) == 130, output(fresh_env, "third")
        # Whether the signal came while its step waited for the lock or before the step began: nothing sent.
        assert "interrupted (SIGINT)" in output(fresh_env, "third")
        assert "nothing was sent" in output(fresh_env, "third")
        assert first.poll() is None, "the first run should still be answering (make the replies slower)"
        assert first.wait(timeout=RUN_TIMEOUT_S) == 0, output(fresh_env, "first")
        assert second.wait(timeout=RUN_TIMEOUT_S) == 0, output(fresh_env, "second")
        stats = server.stats
    finally:
        server.__exit__(None, None, None)

    keys = active_prompt_keys(fresh_env.warehouse, MODEL, ["44"])
    assert stats.total_requests == len(keys) == 80
    assert set(stats.answers_per_prompt) == set(keys.values())
    assert set(stats.answers_per_prompt.values()) == {1}, "a question was paid twice"
    said = output(fresh_env, "second")
    assert f"{MODEL} × 44: being answered by PID {first.pid} on " in said, said
    rows = cell_rows(fresh_env.warehouse, MODEL, "44")
    assert rows.height == 80 and rows["run_id"].n_unique() == 1


def test_a_killed_run_is_not_running_and_its_stale_lock_is_taken_over(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    server = replay(fresh_env, shared_oab, latency_s=0.05, concurrency=2)
    try:
        killed = start_run(fresh_env, "killed", "--models", MODEL, "--editions", "44")
        stop_children.append(killed)
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "44")
        wait_until(lambda: log_line_count(log) >= 3, killed, "answers logged")
        os.kill(killed.pid, signal.SIGSTOP)  # frozen mid-cell: still alive, still holding the lock
        status = fresh_env.cli("status", "--models", MODEL, "--editions", "44", "--format", "json")
        assert json.loads(status.output)["cells"][0]["state"] == "running", status.output
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
        holder = read_holder(cell_lock_path(fresh_env.warehouse.root, MODEL, "44"))
        assert holder is not None and holder.pid == killed.pid and holder.run_id

        status = fresh_env.cli("status", "--models", MODEL, "--editions", "44", "--format", "json")
        cell = json.loads(status.output)["cells"][0]
        assert cell["state"] == "failed" and "died" in cell["reason"], cell

        rerun = fresh_env.cli("run", "--models", MODEL, "--editions", "44")
        assert rerun.exit_code == 0, rerun.output
        assert f"taking over the lock of PID {killed.pid} on " in rerun.output
    finally:
        server.__exit__(None, None, None)
    with instance_for(fresh_env.settings) as instance:
        dead = instance.get_run_by_id(holder.run_id)
        assert dead is not None and dead.status == DagsterRunStatus.FAILURE
    status = fresh_env.cli("status", "--models", MODEL, "--editions", "44", "--format", "json")
    assert json.loads(status.output)["cells"][0]["state"] == "complete", status.output
    assert read_holder(cell_lock_path(fresh_env.warehouse.root, MODEL, "44")) is None


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_sending_keeps_what_arrived_and_says_how_to_resume(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list, signum: int, code: int
) -> None:
    server = replay(fresh_env, shared_oab, latency_s=0.2, concurrency=4)
    try:
        proc = start_run(fresh_env, "run", "--models", MODEL, "--editions", "43,44")
        stop_children.append(proc)
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "43")
        wait_until(lambda: log_line_count(log) >= 8, proc, "answers logged")
        proc.send_signal(signum)
        signalled = time.monotonic()
        returncode = proc.wait(timeout=10)  # the bar: stopped within 10 s
        time.sleep(max(0.0, signalled + 2.0 - time.monotonic()))
        sent_by_2s = server.stats.total_requests
        time.sleep(0.5)  # anything still to come would come now
        assert server.stats.total_requests == sent_by_2s, "a request was sent 2 s after the signal"
        said = output(fresh_env, "run")
        assert returncode == code, said
        assert f"interrupted ({signal.Signals(signum).name})" in said
        assert f"oabench run --models {MODEL} --editions 43,44" in said
        # Every reply that was in flight landed in a log (both cells run at once, sharing the key's 4
        # slots); nothing half-done was written.
        logs = [cell_log_path(fresh_env.warehouse.root / "responses", MODEL, e) for e in ("43", "44")]
        assert sum(log_line_count(path) for path in logs) == server.stats.total_requests
        assert cell_rows(fresh_env.warehouse, MODEL, "43").is_empty()
        assert cell_rows(fresh_env.warehouse, MODEL, "44").is_empty()

        resumed = fresh_env.cli("run", "--models", MODEL, "--editions", "43,44")
        assert resumed.exit_code == 0, resumed.output
        stats = server.stats
    finally:
        server.__exit__(None, None, None)
    keys = active_prompt_keys(fresh_env.warehouse, MODEL, ["43", "44"])
    assert set(stats.answers_per_prompt) == set(keys.values())
    assert set(stats.answers_per_prompt.values()) == {1}, "a question was paid twice"


def test_a_second_ctrl_c_exits_at_once(fresh_env: PipelineEnv, shared_oab: Path, stop_children: list) -> None:
    server = replay(fresh_env, shared_oab, latency_s=5.0, concurrency=4)  # replies far slower than the exit
    try:
        proc = start_run(fresh_env, "run", "--models", MODEL, "--editions", "43")
        stop_children.append(proc)
        wait_until(lambda: server.stats.total_requests >= 4, proc, "requests in flight")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130, output(fresh_env, "run")
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "43")
        assert log_line_count(log) == 0, "it waited for the replies in flight instead of exiting"
    finally:
        server.__exit__(None, None, None)


def test_a_cell_whose_every_call_failed_exits_1_and_is_named(fresh_env: PipelineEnv) -> None:
    refusal = FaultProfile(fixed_status=400, fixed_status_message="This model's maximum context length is 8")
    with ReplayServer(faults=refusal) as server:
        use_replay_models(fresh_env, server.base_url, ["acme/m"])
        result = fresh_env.cli("run", "--models", "acme/m", "--editions", "45")
    assert result.exit_code == 1, result.output
    assert "1 of 1 cell(s) not complete:" in result.output
    assert "acme/m × 45: 80 error row(s) (most often: HTTP 400: " in result.output
    assert "maximum context length" in result.output


def test_a_step_on_a_main_thread_stops_as_gracefully(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    """Outside `oabench run` (a run worker, `dagster asset materialize`) the step runs on its process's
    main thread, where Dagster's interrupt used to vanish in the event loop: Ctrl-C stops it the same way."""
    server = replay(fresh_env, shared_oab, latency_s=0.2, concurrency=4)
    try:
        with instance_for(fresh_env.settings) as instance:
            ensure_partitions(instance, "editions", ["43"])
            ensure_partitions(instance, "model_keys", [MODEL])
        in_process = json.dumps({"execution": {"config": {"in_process": {}}}})
        command = [
            str(REPO_ROOT / ".venv" / "bin" / "dagster"),
            *("asset", "materialize", "-m", "oabench_pipeline", "--select", "inferences"),
            *("--partition", f"43|{MODEL}", "--config-json", in_process),
        ]
        proc = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=dict(os.environ),
            stdout=(fresh_env.root / "materialize.out").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stop_children.append(proc)
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "43")
        wait_until(lambda: log_line_count(log) >= 8, proc, "answers logged")
        proc.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        returncode = proc.wait(timeout=30)
        time.sleep(max(0.0, signalled + 2.0 - time.monotonic()))
        sent_by_2s = server.stats.total_requests
        time.sleep(0.5)
        assert server.stats.total_requests == sent_by_2s, "a request was sent 2 s after the signal"
        said = output(fresh_env, "materialize")
        assert returncode != 0, said
        assert "stopped, interrupted (SIGINT)" in said, said
        assert log_line_count(log) == server.stats.total_requests < 78
        assert cell_rows(fresh_env.warehouse, MODEL, "43").is_empty()
    finally:
        server.__exit__(None, None, None)
