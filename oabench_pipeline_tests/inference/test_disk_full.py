"""A disk that fills up mid-cell, for real: a size-limited tmpfs mounted under the warehouse.

Needs root (mount); skipped with the reason otherwise. The model is the loopback replay server, which
counts every request it answers, i.e. every answer paid for.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from dagster import DagsterInstance, EventLogEntry

from oabench_pipeline.engine.launch import PROGRESS_FOLDER
from oabench_pipeline.inference.assets import PROGRESS_LOG_EVERY_S
from oabench_pipeline.inference.response_log import RESERVE_BYTES, cell_log_path, read_log
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.inference.run_processes import exit_within, start_run, wait_until
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

# Slow: whole runs on a tmpfs that fills up, then reruns.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

EDITION = "45"  # 80 questions, none annulled
MODEL = "acme/disk-full"


@contextmanager
def small_tmpfs(folder: Path, size_bytes: int) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_leaving(folder: Path, free_bytes: int) -> Path:
    """A filler file taking all space on `folder`'s file system but `free_bytes`."""
    stat = os.statvfs(folder)
    available = stat.f_bavail * stat.f_frsize
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, available - free_bytes)
    finally:
        os.close(fd)
    return filler


def use_model(env: PipelineEnv, base_url: str) -> None:
    env.set(TEST_KEY_ENV, TEST_KEY)
    entry = {"id": MODEL, "base_url": base_url, "api_key_env": TEST_KEY_ENV, "concurrency": 4}
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", [entry]))


def test_disk_full_mid_cell_keeps_every_paid_answer_and_the_rerun_pays_nothing_twice(
    fresh_env: PipelineEnv,
) -> None:
    responses = fresh_env.settings.warehouse_path.parent / "responses"
    with (
        small_tmpfs(responses, RESERVE_BYTES + 1024 * 1024) as disk,
        ReplayServer(latency_s=0.01, api_key=TEST_KEY) as server,
    ):
        use_model(fresh_env, server.base_url)
        # Room for the reserve and about a dozen answers: the disk fills up a few answers into the cell.
        filler = fill_leaving(disk, RESERVE_BYTES + 24 * 1024)

        stopped = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)

        assert stopped.exit_code == 1, stopped.output
        assert "Traceback" not in stopped.output
        line = next(text for text in stopped.output.splitlines() if "disk full" in text)
        assert "writing the response log" in line and "Free space and rerun" in line
        assert "could not be written" not in line, "the reserve made room for the answers in flight"
        log = cell_log_path(responses, MODEL, EDITION)
        kept = {r.qid for r in read_log(log) if r.ok}
        paid = server.stats.total_requests
        assert 0 < len(kept) < 80
        assert paid == len(kept), "every answer paid for before the stop is on disk"
        assert not (fresh_env.warehouse.has_table("inferences")), "no partition from a stopped cell"

        filler.unlink()  # the user frees space
        rerun = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)

        assert rerun.exit_code == 0, rerun.output
        assert server.stats.total_requests == 80, "only the unanswered questions were asked"
        assert max(server.stats.requests_per_prompt.values()) == 1
        assert fresh_env.warehouse.read("inferences", f"{EDITION}|{MODEL}").height == 80
        assert not list(disk.glob("**/.*.reserve")), "the reserve is given back when the cell ends"


def test_disk_full_when_writing_the_partition_is_one_line_and_the_rerun_sends_nothing(
    fresh_env: PipelineEnv,
) -> None:
    tables = fresh_env.settings.warehouse_path.parent / "tables" / "inferences"
    with small_tmpfs(tables, 256 * 1024) as disk, ReplayServer(api_key=TEST_KEY) as server:
        use_model(fresh_env, server.base_url)
        filler = fill_leaving(disk, 4096)

        stopped = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)

        assert stopped.exit_code == 1, stopped.output
        assert "Traceback" not in stopped.output
        assert f"disk full writing {disk}" in stopped.output
        assert server.stats.total_requests == 80
        filler.unlink()
        rerun = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)
        assert rerun.exit_code == 0, rerun.output
        assert server.stats.total_requests == 80, "the answers come from the response log"
        assert fresh_env.warehouse.read("inferences", f"{EDITION}|{MODEL}").height == 80


def settled(server: ReplayServer, quiet_s: float = 3.0, at_least: int = 0) -> bool:
    """The server has `at_least` requests, or has received none for `quiet_s` (the client stopped)."""
    seen, since = server.stats.total_requests, time.monotonic()
    while seen < at_least and time.monotonic() - since < quiet_s:
        time.sleep(0.05)
        if (now := server.stats.total_requests) != seen:
            seen, since = now, time.monotonic()
    return seen >= at_least


def test_dagster_home_filling_up_mid_run_loses_no_paid_reply(
    fresh_env: PipelineEnv, stop_children: list[subprocess.Popen[bytes]]
) -> None:
    """Dagster's storage fails while replies arrive (its SQLite on a full disk): every reply the server
    answered is in the response log, and once space is freed the cell completes sending nothing twice."""
    home = Path(os.environ["DAGSTER_HOME"])
    concurrency = 4
    with (
        small_tmpfs(home, 64 * 1024 * 1024) as disk,
        ReplayServer(latency_s=0.01, api_key=TEST_KEY) as server,
    ):
        use_model(fresh_env, server.base_url)
        server.hold_replies(allow=20)
        run = start_run(fresh_env, "full", "--models", MODEL, "--editions", EDITION)
        stop_children.append(run)
        wait_until(lambda: server.stats.total_requests >= 20 + concurrency, run, "20 answered, 4 held")
        # Past the progress line's interval: the next reply's callback writes to Dagster's event log.
        time.sleep(PROGRESS_LOG_EVERY_S + 0.5)
        filler = fill_leaving(disk, 0)
        # One reply: its callback's progress line meets the full disk while 3 more requests are in flight.
        server.hold_replies(allow=1)
        settled(server)
        server.hold_replies(allow=20)  # the 3 held replies and 17 more arrive on a full DAGSTER_HOME
        settled(server, at_least=41 + concurrency)
        log = cell_log_path(fresh_env.settings.warehouse_path.parent / "responses", MODEL, EDITION)
        answered_while_full = sum(server.stats.answers_per_prompt.values())
        deadline = time.monotonic() + 10
        while len(read_log(log)) < answered_while_full and time.monotonic() < deadline:
            time.sleep(0.05)  # the last replies on their way to the log
        logged_while_full = len(read_log(log))
        filler.unlink()  # the user frees space
        server.release_replies()
        exit_within(run, fresh_env, "full", 180)
        answered = sum(server.stats.answers_per_prompt.values())
        logged = read_log(log)

        assert logged_while_full == answered_while_full, "every reply answered on a full disk is kept"
        assert answered_while_full == 41, "and the requests went on"
        assert len(logged) == answered, "every reply the server answered is in the response log"
        warnings = [
            event.message
            for event in _events_of_the_cell_runs()
            if "progress report(s) could not be written" in (event.message or "")
        ]
        assert warnings, "Dagster's storage really failed during the run (and the step said so once)"

        rerun = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)
        assert rerun.exit_code == 0, rerun.output
        assert server.stats.total_requests == 80 and max(server.stats.requests_per_prompt.values()) == 1
        assert fresh_env.warehouse.read("inferences", f"{EDITION}|{MODEL}").height == 80


def _events_of_the_cell_runs() -> list[EventLogEntry]:
    with DagsterInstance.get() as instance:
        return [
            event
            for record in instance.get_run_records()
            for event in instance.all_logs(record.dagster_run.run_id)
        ]


def test_a_full_disk_under_the_progress_files_fails_no_cell(fresh_env: PipelineEnv) -> None:
    """The progress relay (`oabench run`'s live counts) cannot be written: the cell still completes."""
    progress = fresh_env.settings.warehouse_path.parent / PROGRESS_FOLDER
    with (
        small_tmpfs(progress, 256 * 1024) as disk,
        ReplayServer(latency_s=0.01, api_key=TEST_KEY) as server,
    ):
        use_model(fresh_env, server.base_url)
        fill_leaving(disk, 0)

        result = fresh_env.cli("run", "--models", MODEL, "--editions", EDITION)

        assert result.exit_code == 0, result.output
        assert server.stats.total_requests == 80
        assert fresh_env.warehouse.read("inferences", f"{EDITION}|{MODEL}").height == 80
