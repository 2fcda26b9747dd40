"""A backfill of 3 editions × 2 model keys with concurrent writers: no lock error, every row present.

How it is driven, and why: one Dagster run materializes one partition of these assets (they have no
single-run backfill policy), so the backfill is 6 cell runs. Four of them are `dagster asset materialize`
processes — what a run launcher starts — all at once: four runs write partition files, the DuckDB
catalogue and the instance's SQLite storage together. The other two (baseline cells) run beforehand in
this process: they complete the leaderboard, and as processes they only repeated the same overlap at
~3 s of CPU each for the import. Each run uses the in-process executor: a cell's two steps
(`inferences`, then `scores`, which depends on it) never run at the same time, so the multiprocess
executor added no concurrency, only a forkserver re-importing the pipeline in every run. (Launching the
runs with `execute_job` from threads of one process deadlocked in the forkserver.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import polars as pl
import pytest

from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.conftest import REPO_ROOT
from oabench_pipeline_tests.inference.paid_calls import error_rows
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, published_replies
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

# Slow: four `dagster asset materialize` processes writing at once.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

EDITIONS = ["43", "44", "45"]
# A baseline and a replayed key: both kinds of cell. Four cell runs at once in their own processes (each
# one more is a `dagster` process more, ~3 s of CPU for its import alone), the rest beforehand in this one.
BASELINES = ["baseline/random"]
REPLAYED = ["deepseek/deepseek-v3.2"]
MODEL_KEYS = BASELINES + REPLAYED
IN_THIS_PROCESS = [str(cell_partition_key("baseline/random", e)) for e in ("43", "44")]
RUN_CONFIG = {"execution": {"config": {"in_process": {}}}}
RUN_TIMEOUT_S = 600
# What DuckDB and SQLite say when two writers collide.
LOCK_ERRORS = ("could not set lock", "conflicting lock", "database is locked")


def registry(env: PipelineEnv, base_url: str) -> None:
    entries: list[dict] = [{"id": key, "kind": "baseline"} for key in BASELINES]
    entries += [{"id": key, "base_url": base_url, "api_key_env": TEST_KEY_ENV} for key in REPLAYED]
    env.set(TEST_KEY_ENV, TEST_KEY)
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))


def materialize_cell(partition: str) -> subprocess.CompletedProcess[str]:
    """One cell run in its own process, as a run launcher would start it."""
    command = [
        # The running interpreter's own `dagster` script: the suite runs from any environment (a venv
        # elsewhere, `uv run`, tox, conda), not only from `<repo>/.venv`.
        str(Path(sys.executable).parent / "dagster"),
        "asset",
        "materialize",
        "-m",
        "oabench_pipeline",
        "--select",
        "inferences,scores",
        "--partition",
        partition,
        "--config-json",
        json.dumps(RUN_CONFIG),
    ]
    return subprocess.run(
        command, cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


@pytest.mark.timeout(900)
def test_backfill_of_six_cells_with_four_concurrent_writers(fresh_env: PipelineEnv, shared_oab: Path) -> None:
    replies = published_replies(shared_oab, fresh_env.warehouse)
    with ReplayServer(replies=replies, api_key=TEST_KEY, latency_s=0.01) as server:
        registry(fresh_env, server.base_url)
        with instance_for(fresh_env.settings) as instance:
            ensure_partitions(instance, "editions", EDITIONS)
            ensure_partitions(instance, "model_keys", MODEL_KEYS)
        cells = [str(cell_partition_key(m, e)) for e in EDITIONS for m in MODEL_KEYS]
        with instance_for(fresh_env.settings) as instance:
            defs = build_definitions(fresh_env.settings)
            for cell in IN_THIS_PROCESS:
                done = run_assets(defs, instance, ["inferences", "scores"], partition_key=cell)
                assert done.success, done.errors
        concurrent = [cell for cell in cells if cell not in IN_THIS_PROCESS]
        assert len(concurrent) == 4
        with ThreadPoolExecutor(max_workers=len(concurrent)) as pool:
            results = dict(zip(concurrent, pool.map(materialize_cell, concurrent), strict=True))
        stats = server.stats

    for cell, result in results.items():
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"{cell}:\n{output[-3000:]}"
        assert not [e for e in LOCK_ERRORS if e in output.lower()], f"{cell}:\n{output[-3000:]}"
    assert stats.duplicate_answers == {}
    assert stats.total_requests == len(REPLAYED) * 238

    store = fresh_env.warehouse
    inferences = store.read("inferences")
    assert inferences.height == len(cells) * 80
    assert inferences.group_by("model_key", "edition").len()["len"].to_list() == [80] * len(cells)
    assert error_rows(inferences) == 0
    assert store.read("scores").height == len(cells) * 80

    with instance_for(fresh_env.settings) as instance:
        outcome = run_assets(build_definitions(fresh_env.settings), instance, ["models", "leaderboard"])
    assert outcome.success, outcome.errors
    board = store.read("leaderboard")
    assert sorted(board["model_key"]) == sorted(MODEL_KEYS)
    assert board.filter(pl.col("complete")).height == len(MODEL_KEYS)
    with duckdb.connect(str(fresh_env.settings.warehouse_path), read_only=True) as con:
        assert con.execute("select count(*) from inferences").fetchall() == [(len(cells) * 80,)]
        assert con.execute("select count(*) from scores").fetchall() == [(len(cells) * 80,)]
