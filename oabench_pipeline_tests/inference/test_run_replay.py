"""`oabench run` against a loopback server replaying the real published OABench responses.

One replayed model, Grok 4.1 Fast (the one no other test replays), over the three editions: every
question's prompt is matched against the recorded texts and its published scores are reproduced. The
other published runs' answers are reproduced by the parser (`core/test_answer_parsing.py`) and their
summaries by `oabench import` (`scoring/test_import_published.py`); DeepSeek's are replayed through
`oabench run` by the batch tests.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from oabench_pipeline_tests.inference.replay import (
    TEST_KEY,
    published_replies,
    published_summary,
    use_replay_models,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

MODELS = ["x-ai/grok-4.1-fast"]


def test_replay_reproduces_published_scores_asks_once_and_stores_no_key(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    """One replayed run (three cells), then every check on it (each used to pay for its own run)."""
    with ReplayServer(replies=published_replies(shared_oab, fresh_env.warehouse), api_key=TEST_KEY) as server:
        use_replay_models(fresh_env, server.base_url, MODELS)
        result = fresh_env.cli("run", "--models", ",".join(MODELS))
        assert result.exit_code == 0, result.output
        assert_published_scores_reproduced(fresh_env, server, shared_oab)
        assert_each_active_question_asked_once_and_annulled_skipped(fresh_env, server)
        assert_api_key_never_stored(fresh_env)
        assert_rerun_sends_nothing(fresh_env, server)


def assert_published_scores_reproduced(env: PipelineEnv, server: ReplayServer, shared_oab: Path) -> None:
    assert server.stats.unmatched == 0, "every prompt we built matched a recorded question text"
    by_edition = env.warehouse.read("leaderboard_by_edition")
    for model in MODELS:
        published = published_summary(shared_oab, model)
        ours = by_edition.filter(pl.col("model_key") == model).sort("edition")
        assert [
            (e["edition"], e["officialScore"], e["technicalScore"], e["technicalTotal"], e["passed"])
            for e in published["editions"]
        ] == list(
            ours.select(
                "edition", "official_score", "technical_score", "technical_total", "passed"
            ).iter_rows()
        )


def assert_each_active_question_asked_once_and_annulled_skipped(
    env: PipelineEnv, server: ReplayServer
) -> None:
    assert server.stats.total_requests == len(MODELS) * 238
    assert max(server.stats.requests_per_prompt.values()) == 1
    inferences = env.warehouse.read("inferences")
    assert inferences.height == len(MODELS) * 240
    skipped = inferences.filter(pl.col("skipped"))
    assert sorted(set(skipped["qid"])) == ["oab-43-1f-q1", "oab-43-1f-q74"]
    assert skipped.height == len(MODELS) * 2
    assert skipped["raw_response"].null_count() == skipped.height


def assert_rerun_sends_nothing(env: PipelineEnv, server: ReplayServer) -> None:
    before = server.stats.total_requests
    result = env.cli("run", "--models", ",".join(MODELS))
    assert result.exit_code == 0, result.output
    assert server.stats.total_requests == before


def assert_api_key_never_stored(env: PipelineEnv) -> None:
    needle = TEST_KEY.encode()
    for root in (env.settings.warehouse_path.parent, env.root / "dagster_home"):
        for path in root.rglob("*"):
            if path.is_file():
                assert needle not in path.read_bytes(), path
