"""`oabench run` stopped by a signal (real subprocesses, the loopback replay server): Ctrl-C that stops.
(Locks and exit codes: `test_run_safety.py`; two files so that two workers run them at once.)

- SIGINT/SIGTERM mid-cell: nothing is sent after the signal (the replies in flight are held by the server
  until the run has announced the stop, then released: each frees a slot that must stay unused), those
  replies land in the response log, no partition is written, the next cell never starts, the output says
  how to resume, the exit code is 130/143 within 5 s, every launched cell run has ended (terminated through
  Dagster, or failed as interrupted); the resumed run pays for nothing twice. A second Ctrl-C exits at once.
- `dagster asset materialize` (a step on its process's main thread, as in a run worker) stops the same way.
- A terminal's Ctrl-C (SIGINT to the whole process group: the command, the code server, the runs' processes
  and their compute-log helpers), mid-cell or while the runs start: no traceback on the terminal, and every
  run ends CANCELED.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterRunStatus, RunsFilter

from oabench_pipeline.engine.runs import ensure_partitions, instance_for
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.paid_calls import active_prompt_keys, cell_rows, log_line_count
from oabench_pipeline_tests.inference.run_processes import (
    MODEL,
    exit_within,
    output,
    replay,
    start_run,
    wait_until,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

# Slow: `oabench run` and `dagster` processes stopped by signals.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

# Replies the server sends before holding the rest: the run is then mid-cell with its key's 4 slots taken
# by requests whose replies wait for the test.
ANSWERED = 8
CONCURRENCY = 4
STOPPED_WITHIN_S = 8.0  # from the signal to the command's exit, and to its runs' end


def caught_mid_cell(
    server: ReplayServer, logs: list[Path], proc: subprocess.Popen[bytes], earlier: int = 0
) -> None:
    """Wait until `proc` logged `ANSWERED` answers and has `CONCURRENCY` more requests in flight, held
    (`earlier`: requests sent and logged before it started)."""
    wait_until(
        lambda: (
            sum(log_line_count(path) for path in logs) == earlier + ANSWERED
            and server.stats.total_requests == earlier + ANSWERED + CONCURRENCY
        ),
        proc,
        "answers logged and the slots taken again",
    )


def assert_status_says_interrupted(env: PipelineEnv, said: str, name: str, logs: list[Path]) -> None:
    """The live lines and `oabench status` call a stopped cell interrupted (not failed), count the answers
    its response log keeps, and give the command that resumes it."""
    assert "FAILED" not in said, said
    # The cell's live line (wrapped at 80 columns when not a terminal); a cell whose run had not reached its
    # first request (its process still starting) says it sent nothing.
    for edition in ("43", "44"):
        line = rf"{re.escape(MODEL)} × {edition}: (\d+/\d+ answered\b.*|no model call sent) interrupted\s"
        assert re.search(line, said), said
    report = env.cli("status", "--format", "json", "--models", MODEL, "--editions", "43,44")
    cells = {c["edition"]: c for c in json.loads(report.output)["cells"]}
    for edition, log in zip(("43", "44"), logs, strict=True):
        cell = cells[edition]
        assert cell["state"] == "interrupted", cell
        assert cell["answered"] == log_line_count(log), cell  # every reply held is an answer
        kept = f"{cell['answered']} answer(s) kept in its response log; " if cell["answered"] else ""
        resume = (
            f"`oabench run --models {MODEL} --editions {edition}` resumes it (nothing kept is asked again)"
        )
        # A run terminated by Dagster before its step began cannot tell which signal stopped the command.
        assert cell["reason"] in (
            f"last run interrupted ({name}); {kept}{resume}",
            f"last run terminated; {kept}{resume}",
        ), cell


def assert_runs_end(env: PipelineEnv, by: float) -> None:
    """By the monotonic time `by`, every cell run the command launched has ended in the instance, and an
    interrupt is recorded one way: CANCELED, whether its step saw the stop first or Dagster's terminate."""
    ended = {DagsterRunStatus.CANCELED}
    with instance_for(env.settings) as instance:
        while True:
            runs = instance.get_runs(RunsFilter(job_name="oabench_cell"))
            if runs and {run.status for run in runs} <= ended:
                return
            assert time.monotonic() < by, [(r.run_id, r.status) for r in runs]
            time.sleep(0.1)


def test_sigint_then_sigterm_stop_sending_keep_what_arrived_and_say_how_to_resume(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    """A run stopped by SIGINT, its resume stopped by SIGTERM, then a resume to the end."""
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=CONCURRENCY)
    # Both cells run at once, sharing the key's 4 slots.
    logs = [cell_log_path(fresh_env.warehouse.root / "responses", MODEL, e) for e in ("43", "44")]
    try:
        for name, signum, code in (("SIGINT", signal.SIGINT, 130), ("SIGTERM", signal.SIGTERM, 143)):
            earlier = server.stats.total_requests
            server.hold_replies(allow=ANSWERED)
            proc = start_run(fresh_env, name, "--models", MODEL, "--editions", "43,44")
            stop_children.append(proc)
            caught_mid_cell(server, logs, proc, earlier)
            proc.send_signal(signum)
            signalled = time.monotonic()
            announced = f"{name}: stopping"
            wait_until(
                lambda name=name, announced=announced: announced in output(fresh_env, name),
                proc,
                "the stop is announced",
            )
            # Only now do the replies in flight come back, each freeing a slot: none may be used again.
            server.release_replies()
            # The bar is 5 s: ~1.2 s on an idle machine, most of it the interpreter's own exit; up to ~5 s
            # with the rest of the slow suite on the two cores, hence the margin.
            returncode = exit_within(proc, fresh_env, name, STOPPED_WITHIN_S)
            said = output(fresh_env, name)
            assert returncode == code, said
            assert_runs_end(fresh_env, by=signalled + STOPPED_WITHIN_S)
            sent = earlier + ANSWERED + CONCURRENCY
            assert server.stats.total_requests == sent, f"{name}: a request was sent after the signal"
            assert f"interrupted ({name})" in said
            # Counted from the response logs, not the progress relays: every reply in flight that landed.
            assert f"{ANSWERED + CONCURRENCY} reply(ies) received by this command are kept" in said, said
            assert f"oabench run --models {MODEL} --editions 43,44" in said
            # Every reply that was in flight landed in a log; nothing half-done was written.
            assert sum(log_line_count(path) for path in logs) == sent
            assert cell_rows(fresh_env.warehouse, MODEL, "43").is_empty()
            assert cell_rows(fresh_env.warehouse, MODEL, "44").is_empty()
            assert_status_says_interrupted(fresh_env, said, name, logs)

        resumed = fresh_env.cli("run", "--models", MODEL, "--editions", "43,44")
        assert resumed.exit_code == 0, resumed.output
        stats = server.stats
    finally:
        server.__exit__(None, None, None)
    keys = active_prompt_keys(fresh_env.warehouse, MODEL, ["43", "44"])
    assert set(stats.answers_per_prompt) == set(keys.values())
    assert set(stats.answers_per_prompt.values()) == {1}, "a question was paid twice"


def test_a_second_ctrl_c_exits_at_once(fresh_env: PipelineEnv, shared_oab: Path, stop_children: list) -> None:
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=CONCURRENCY)
    server.hold_replies()  # no reply comes before the exit
    try:
        proc = start_run(fresh_env, "run", "--models", MODEL, "--editions", "43")
        stop_children.append(proc)
        wait_until(lambda: server.stats.total_requests >= CONCURRENCY, proc, "requests in flight")
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: "SIGINT: stopping" in output(fresh_env, "run"), proc, "the stop is announced")
        proc.send_signal(signal.SIGINT)
        assert exit_within(proc, fresh_env, "run", 10) == 130, output(fresh_env, "run")
        log = cell_log_path(fresh_env.warehouse.root / "responses", MODEL, "43")
        assert log_line_count(log) == 0, "it waited for the replies in flight instead of exiting"
    finally:
        server.__exit__(None, None, None)


def test_a_step_on_a_main_thread_stops_as_gracefully(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    """Outside `oabench run` (a run worker, `dagster asset materialize`) the step runs on its process's
    main thread, where Dagster's interrupt used to vanish in the event loop: Ctrl-C stops it the same way."""
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=CONCURRENCY)
    server.hold_replies(allow=ANSWERED)
    try:
        with instance_for(fresh_env.settings) as instance:
            ensure_partitions(instance, "editions", ["43"])
            ensure_partitions(instance, "model_keys", [MODEL])
        in_process = json.dumps({"execution": {"config": {"in_process": {}}}})
        command = [
            # The running interpreter's own `dagster` script, not `<repo>/.venv`'s.
            str(Path(sys.executable).parent / "dagster"),
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
        caught_mid_cell(server, [log], proc)
        proc.send_signal(signal.SIGINT)
        # The step announces nothing to wait for: the replies in flight come back right after the signal
        # (the interpreter runs its handler before its event loop reads them).
        server.release_replies()
        returncode = proc.wait(timeout=30)
        said = output(fresh_env, "materialize")
        assert returncode != 0, said
        assert "stopped, interrupted (SIGINT)" in said, said
        assert log_line_count(log) == server.stats.total_requests < 78
        assert cell_rows(fresh_env.warehouse, MODEL, "43").is_empty()
    finally:
        server.__exit__(None, None, None)


def assert_no_traceback(said: str) -> None:
    """What a terminal shows after its Ctrl-C: no traceback of any process the command started (Dagster's
    code server, the runs' workers, their compute-log helpers share the terminal's process group)."""
    for marker in ("Traceback", "KeyboardInterrupt"):
        assert marker not in said, said


def test_a_terminal_ctrl_c_mid_cell_prints_no_traceback_and_ends_canceled(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    """A terminal's Ctrl-C reaches the whole foreground process group, not the command alone."""
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=CONCURRENCY)
    logs = [cell_log_path(fresh_env.warehouse.root / "responses", MODEL, e) for e in ("43", "44")]
    server.hold_replies(allow=ANSWERED)
    try:
        proc = start_run(fresh_env, "terminal", "--models", MODEL, "--editions", "43,44")
        stop_children.append(proc)
        caught_mid_cell(server, logs, proc)
        os.killpg(proc.pid, signal.SIGINT)
        signalled = time.monotonic()
        wait_until(lambda: "SIGINT: stopping" in output(fresh_env, "terminal"), proc, "the stop is announced")
        server.release_replies()
        assert exit_within(proc, fresh_env, "terminal", STOPPED_WITHIN_S) == 130, output(
            fresh_env, "terminal"
        )
        assert_runs_end(fresh_env, by=signalled + STOPPED_WITHIN_S)
        assert server.stats.total_requests == ANSWERED + CONCURRENCY, "a request was sent after the signal"
    finally:
        server.__exit__(None, None, None)
    assert sum(log_line_count(path) for path in logs) == ANSWERED + CONCURRENCY
    time.sleep(2.0)  # the helpers' tracebacks, when they print any, come within their 1 s poll
    assert_no_traceback(output(fresh_env, "terminal"))


def test_a_terminal_ctrl_c_while_the_cell_runs_start_ends_them_canceled(
    fresh_env: PipelineEnv, shared_oab: Path, stop_children: list
) -> None:
    """Ctrl-C as soon as the command has launched its runs, before their steps have sent anything: the runs
    (whatever they were doing: starting their process, loading the definitions) end CANCELED, not FAILURE."""
    server = replay(fresh_env, shared_oab, latency_s=0.0, concurrency=CONCURRENCY)
    server.hold_replies()
    try:
        proc = start_run(fresh_env, "starting", "--models", MODEL, "--editions", "43,44")
        stop_children.append(proc)

        def launched() -> bool:
            with instance_for(fresh_env.settings) as instance:
                return len(instance.get_runs(RunsFilter(job_name="oabench_cell"))) == 2

        wait_until(launched, proc, "both cell runs are launched")
        os.killpg(proc.pid, signal.SIGINT)
        signalled = time.monotonic()
        assert exit_within(proc, fresh_env, "starting", STOPPED_WITHIN_S) == 130, output(
            fresh_env, "starting"
        )
        assert_runs_end(fresh_env, by=signalled + STOPPED_WITHIN_S)
        assert server.stats.total_requests == 0, "a request was sent after the signal"
    finally:
        server.__exit__(None, None, None)
    time.sleep(2.0)
    assert_no_traceback(output(fresh_env, "starting"))
