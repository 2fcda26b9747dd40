"""SIGKILL `oabench run` (a real subprocess) at seven points, then rerun: no paid answer lost or bought twice.

One warehouse goes through a chain of killed runs, each one resuming what the previous left, then one clean
run (in the test's own process: nothing kills it). Kill points are hit deterministically in one of two ways:

- from outside, by polling the cells' response logs: SIGKILL the run's process group (the command and the
  cell runs it launched) once this run added k complete lines to them (answers are then in flight: the
  server may have answered a request whose reply the client never got; those, and only those, may be
  paid twice — as with a real provider);
- from inside, by `crash_child`'s audit hook, in whichever of the group's processes gets there: SIGKILL at
  the N-th `open`/`os.replace` of a matching path, e.g. a partition file written and fsynced but not yet
  renamed into place (the other edition's cell, running at the same time, may have requests in flight).

After every kill the answers already in the response log must never be asked again; at the end every
active question has exactly one answer row, the DuckDB catalogue opens read-only and the final run
(whose blocking checks must pass) exits 0.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.paid_calls import (
    PromptKey,
    active_prompt_keys,
    error_rows,
    log_line_count,
    logged_answered_qids,
)
from oabench_pipeline_tests.inference.replay import TEST_KEY, published_replies, use_replay_models
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

# Slow: `oabench` processes SIGKILLed at seven points, then resumed.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

MODEL = "deepseek/deepseek-v3.2"
EDITIONS = ["43", "44"]
ACTIVE = 78 + 80
CONCURRENCY = 8
LATENCY_S = 0.03
RUN_TIMEOUT_S = 300.0
POLL_S = 0.01  # a kill a few answers after the mark is as good; a tighter poll takes CPU from the run


@dataclass(frozen=True)
class KillPoint:
    """Where to kill one run: once it added `lines` complete lines to the cells' logs, or at an audit event."""

    name: str
    lines: int = 0
    die_on: str | None = None


# The two cells run at once, each in its run's process, sharing the key's slots; which one answers first
# depends on which process starts first, so the outside kills count the lines of both logs. They come
# first, while both cells have questions left.
KILL_POINTS = [
    KillPoint("first answer logged", lines=1),
    KillPoint("10 more answers logged", lines=10),
    KillPoint("40 more answers logged", lines=40),
    KillPoint("43 fully answered, partition not yet renamed", die_on=r"os.rename:tables/inferences/"),
    KillPoint("scores of 43 written, not yet fsynced", die_on=r"open:tables/scores/\.[0-9a-f]+\.tmp$"),
    KillPoint("leaderboard half replaced", die_on=r"os.rename:tables/leaderboard_by_area/"),
    KillPoint("taking the catalogue lock for new tables", die_on=r"open:oabench\.duckdb\.lock$"),
]


@dataclass(frozen=True)
class AfterKill:
    point: KillPoint
    returncode: int
    logged: set[str]
    answers: dict[PromptKey, int]


RUN = ["run", "--models", MODEL, "--editions", ",".join(EDITIONS), "--concurrency", str(CONCURRENCY)]


def child_command(point: KillPoint) -> list[str]:
    own = ["--die-on", point.die_on] if point.die_on else []
    return [sys.executable, "-m", "oabench_pipeline_tests.inference.crash_child", *own, "--", *RUN]


@pytest.fixture
def server(fresh_env: PipelineEnv, shared_oab: Path) -> Iterator[ReplayServer]:
    replies = published_replies(shared_oab, fresh_env.warehouse)
    with ReplayServer(replies=replies, api_key=TEST_KEY, latency_s=LATENCY_S) as replay:
        use_replay_models(fresh_env, replay.base_url, [MODEL])
        yield replay


def start(point: KillPoint, log_dir: Path, index: int) -> subprocess.Popen[bytes]:
    """The CLI in its own process group (env: the test's private warehouse, instance and registry)."""
    return subprocess.Popen(
        child_command(point),
        cwd=REPO_ROOT,
        env=dict(os.environ),
        stdout=(log_dir / f"run{index}.out").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def logged_lines(env: PipelineEnv) -> int:
    """Complete lines in the cells' response logs."""
    return sum(log_line_count(cell_log_path(env.warehouse.root / "responses", MODEL, e)) for e in EDITIONS)


def kill_when_logged(proc: subprocess.Popen[bytes], env: PipelineEnv, lines: int) -> None:
    """SIGKILL `proc`'s group as soon as the logs hold `lines` complete lines (fails if the run ends first)."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while logged_lines(env) < lines:
        if proc.poll() is not None:
            pytest.fail(f"the run ended (exit {proc.returncode}) before the logs had {lines} lines")
        if time.monotonic() > deadline:
            pytest.fail(f"the logs never reached {lines} lines")
        time.sleep(POLL_S)
    os.killpg(proc.pid, signal.SIGKILL)


def run_to(point: KillPoint, env: PipelineEnv, server: ReplayServer, index: int) -> AfterKill:
    logged_before = logged_lines(env)
    proc = start(point, env.root, index)
    try:
        if point.die_on is None:
            kill_when_logged(proc, env, logged_before + point.lines)
        proc.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # After a kill the server still finishes what was in flight: count those answers too.
    server.wait_idle()
    return AfterKill(
        point=point,
        returncode=proc.returncode,
        logged=logged_answered_qids(env.warehouse, MODEL, EDITIONS),
        answers=server.stats.answers_per_prompt,
    )


def test_sigkill_at_seven_points_loses_and_repeats_nothing(
    fresh_env: PipelineEnv, server: ReplayServer
) -> None:
    keys = active_prompt_keys(fresh_env.warehouse, MODEL, EDITIONS)
    assert len(keys) == ACTIVE
    kills = [run_to(point, fresh_env, server, i) for i, point in enumerate(KILL_POINTS)]
    for kill in kills:
        output = (fresh_env.root / f"run{kills.index(kill)}.out").read_text(errors="replace")
        assert kill.returncode == -signal.SIGKILL, f"{kill.point.name}: not killed\n{output}"

    # The clean run is killed nowhere: it runs in this process (a process more only paid for the import).
    final = fresh_env.cli(*RUN)
    assert final.exit_code == 0, final.output
    answers = server.stats.answers_per_prompt

    # Nothing the client had logged before a kill was ever asked again.
    for kill in kills:
        for qid in kill.logged:
            assert answers[keys[qid]] == kill.answers[keys[qid]], f"{qid} re-asked after: {kill.point.name}"
    # A prompt answered twice was one in flight at a kill: answered by the server, never received. The
    # cells run at once, so a kill at a file write of one cell may catch the other's requests in flight;
    # the key's cells share its `concurrency`, so no kill catches more than that many. A re-asked prompt
    # can be in flight at the next kill too (a loaded machine answers slowly): then it is paid a third
    # time, but never twice by one run.
    twice = {key for key, n in answers.items() if n > 1}
    counts: list[dict[PromptKey, int]] = [{}, *(kill.answers for kill in kills), answers]
    for run, (earlier, later) in enumerate(itertools.pairwise(counts)):
        asked_twice = [key for key, n in later.items() if n - earlier.get(key, 0) > 1]
        assert not asked_twice, f"run {run} asked {asked_twice} more than once"
    # Each extra payment is a reply in flight at an earlier kill, at most `CONCURRENCY` per kill. Not
    # necessarily re-asked by the very next run: each cell answers in its own process, and the one that
    # starts first may fill the key's slots with its own questions until that run is killed too.
    for earlier_kills, kill in enumerate(kills):
        paid_again = sum(kill.answers.values()) - len(kill.answers)
        assert paid_again <= CONCURRENCY * earlier_kills, (
            f"{kill.point.name}: paid twice beyond the in-flight"
        )
    assert len(twice) <= CONCURRENCY * len(kills)
    assert set(answers) == set(keys.values())

    assert_warehouse_complete(fresh_env)


def assert_warehouse_complete(env: PipelineEnv) -> None:
    """One row per question in every table, no error rows, and a DuckDB catalogue that opens read-only."""
    inferences = env.warehouse.read("inferences")
    assert inferences.height == 80 * len(EDITIONS)
    assert inferences["qid"].n_unique() == inferences.height
    assert error_rows(inferences) == 0
    assert inferences.filter(~pl.col("skipped") & pl.col("raw_response").is_not_null()).height == ACTIVE
    assert env.warehouse.read("scores").height == 80 * len(EDITIONS)
    with duckdb.connect(str(env.settings.warehouse_path), read_only=True) as con:
        assert con.execute("select count(*) from inferences").fetchall() == [(80 * len(EDITIONS),)]
        assert con.execute("select count(*) from scores").fetchall() == [(80 * len(EDITIONS),)]
        assert con.execute(
            "select model_key, complete from leaderboard where model_key = ?", [MODEL]
        ).fetchall() == [(MODEL, False)]
        assert con.execute("select count(*) from leaderboard_by_area").fetchall()[0][0] > 0
