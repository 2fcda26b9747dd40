"""A failing cell never takes other results down, and a failed `oabench run` ends with why, cell by cell.

Real warehouse (the ingested editions), the real CLI, loopback endpoints: one that answers, one whose
replies to two questions come after the request deadline (`OABENCH_MODEL_TIMEOUT_S`), one nobody listens
on. The leaderboard is rebuilt from the healthy cells; when none is left, every analysis table and the
report keep their previous files. No stack trace reaches the terminal (Dagster's step logs go to the
instance) and nothing is printed twice.
"""

from __future__ import annotations

import socket
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result

from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import question_texts
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer

# Slow: a run whose failing cells end it, then the leaderboard of the rest.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

EDITION = "45"
GOOD, SLOW, DOWN = "acme/good", "acme/slow", "acme/down"
TIMEOUT_S = "0.25"
SLOW_QIDS = ("oab-45-1f-q3", "oab-45-1f-q40")

ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("failing-cells")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def use_registry(env: PipelineEnv, urls: dict[str, str]) -> None:
    entries = [{"id": key, "base_url": url, "api_key_env": "", "concurrency": 8} for key, url in urls.items()]
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))


def run(env: PipelineEnv) -> Result:
    return env.cli("run", "--editions", EDITION)


def assert_clean_terminal(result: Result) -> list[str]:
    """No traceback, no Dagster event block, no line twice; the lines, for the caller's assertions."""
    lines = [line for line in result.output.splitlines() if line.strip()]
    for marker in ("Traceback", "STEP_FAILURE", "RUN_FAILURE", "dagster._core", "Stack Trace"):
        assert marker not in result.output, result.output
    repeated = {line for line in lines if lines.count(line) > 1}
    assert not repeated, result.output
    return lines


def test_failed_cells_end_the_output_and_the_leaderboard_is_built_from_the_healthy_ones(
    fresh_env: PipelineEnv,
) -> None:
    fresh_env.set("OABENCH_MODEL_TIMEOUT_S", TIMEOUT_S)
    texts = question_texts(fresh_env.warehouse)
    late = {(SLOW, texts[qid]): RecordedReply("B", latency_s=1.0) for qid in SLOW_QIDS}
    with ReplayServer() as good, ReplayServer(replies=late) as slow:
        down = f"http://127.0.0.1:{closed_port()}/v1"
        use_registry(fresh_env, {GOOD: good.base_url, SLOW: slow.base_url, DOWN: down})
        first = run(fresh_env)

        assert first.exit_code == 1
        lines = assert_clean_terminal(first)
        assert "leaderboard rebuilt: 3 model key(s) × 1 edition(s), 3 cell(s) run" in first.output
        deadline = f"deadline OABENCH_MODEL_TIMEOUT_S={TIMEOUT_S} s passed before the reply was complete"
        assert lines[-3:] == [
            f"2 of 3 cell(s) not complete (rerun `oabench run --models {SLOW},{DOWN} --editions {EDITION}` to "
            "ask again what failed; answers kept are not asked again):",
            f"  {SLOW} × {EDITION}: 2 error row(s) (most often: gave up after 7 attempts: {deadline})",
            f"  {DOWN} × {EDITION}: POST {down}/chat/completions: connection refused by 127.0.0.1:"
            f"{down.split(':')[2].split('/')[0]} 4 times; is the server running and base_url right?; 0 answers "
            f"received before the stop are kept in "
            f"{cell_log_path(fresh_env.warehouse.root / 'responses', DOWN, EDITION)}",
        ]  # in the registry's order
        store = fresh_env.warehouse
        slow_rows = store.read("inferences", str(cell_partition_key(SLOW, EDITION)))
        timed_out = slow_rows.filter(pl.col("error").is_not_null())
        assert sorted(timed_out["qid"]) == sorted(SLOW_QIDS)
        assert timed_out["latency_ms"].min() >= 250  # the last attempt's elapsed time (it was 0)
        assert sorted(store.read("leaderboard")["model_key"]) == [GOOD, SLOW]  # DOWN has no answer
        by_edition = store.read("leaderboard_by_edition")
        assert sorted(by_edition.select("model_key", "edition").iter_rows()) == [(GOOD, 45), (SLOW, 45)]

        # Every cell fails now: the answers are gone and no endpoint answers. Nothing is healthy, so
        # the tables and the report stay as they were instead of being emptied.
        for key in (GOOD, SLOW):
            store.partition_path("inferences", str(cell_partition_key(key, EDITION))).unlink()
            cell_log_path(store.root / "responses", key, EDITION).unlink()
        use_registry(fresh_env, {GOOD: down, SLOW: down, DOWN: down})
        kept = [store.partition_path(t) for t in ANALYSIS_TABLES] + [
            store.root / "reports" / "leaderboard.html"
        ]
        before = {path: path.stat().st_mtime_ns for path in kept}
        second = run(fresh_env)

    assert second.exit_code == 1
    lines = assert_clean_terminal(second)
    failed = [line for line in lines if line.startswith("  acme/")]
    assert [line.split(":")[0] for line in failed] == [f"  {k} × {EDITION}" for k in (GOOD, SLOW, DOWN)]
    assert lines[-4].startswith("3 of 3 cell(s) not complete") and lines[-3:] == failed
    assert lines[-5] == (
        "leaderboard not rebuilt: no healthy scored cell to build the analysis tables from (no cell has "
        "answers); they keep their previous rows"
    )
    assert {path: path.stat().st_mtime_ns for path in kept} == before
    assert sorted(store.read("leaderboard")["model_key"]) == [GOOD, SLOW]
    assert Path(store.root / "reports" / "leaderboard.html").is_file()
