"""A question the model always answers empty: a final, recorded, invalid answer, asked again only on request.

GLM-5 answered edition 43's question 28 with nothing, every time, and every rerun paid three more attempts
for it while the key stayed unranked. Replayed here on loopback: the real recorded empty answer (gpt-5-mini's
in the published runs: 357 prompt tokens, 64 completion tokens, no text) for that question, DeepSeek's real
recorded answers for the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline_tests.inference.replay import (
    REPLAYED,
    TEST_KEY,
    published_replies,
    question_texts,
    use_replay_models,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer, prompt_key

GLM = "z-ai/glm-5"
DEEPSEEK = "deepseek/deepseek-v3.2"
GPT5_MINI_RUN = "2026-03-03T13-41-07-320Z_openai--gpt-5-mini_direto"
EMPTY_QID = "oab-43-1f-q28"
ATTEMPTS = 3  # the default `max_malformed_retries` (2) + the first try


def recorded_empty_answer(shared_oab: Path) -> RecordedReply:
    """gpt-5-mini's real reply to 45/Q1: all 64 tokens spent, no text (its run holds 23 such replies)."""
    lines = (shared_oab / "published-runs" / GPT5_MINI_RUN / "inferences.jsonl").read_text(encoding="utf-8")
    line = next(json.loads(t) for t in lines.splitlines() if json.loads(t)["qid"] == "oab-45-1f-q1")
    assert line["rawResponse"] == "" and line["error"] is None
    usage = line["tokenUsage"]
    return RecordedReply("", prompt_tokens=usage["promptTokens"], completion_tokens=usage["completionTokens"])


@pytest.mark.slow  # three `oabench run`s of a cell, each a Dagster run and a leaderboard rebuild
def test_an_always_empty_answer_is_final_after_the_attempts_and_asked_again_only_on_request(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    texts = question_texts(fresh_env.warehouse)
    replies = {
        (GLM, text): reply
        for (model, text), reply in published_replies(shared_oab, fresh_env.warehouse).items()
        if model == DEEPSEEK
    }
    replies[(GLM, texts[EMPTY_QID])] = recorded_empty_answer(shared_oab)
    assert REPLAYED[DEEPSEEK]  # the answers the others replay
    empty_prompt = prompt_key(GLM, texts[EMPTY_QID])
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        use_replay_models(fresh_env, server.base_url, [GLM])

        first = fresh_env.cli("run", "--models", GLM, "--editions", "43")
        assert first.exit_code == 0, first.output  # complete: the empty answer is an answer
        assert server.stats.requests_per_prompt[empty_prompt] == ATTEMPTS
        assert server.stats.total_requests == 78 - 1 + ATTEMPTS
        row = (
            fresh_env.warehouse.read("inferences")
            .filter(pl.col("qid") == EMPTY_QID)
            .select("raw_response", "error", "answer_lenient", "attempts", "completion_tokens")
            .row(0)
        )
        assert row == ("", None, None, ATTEMPTS, 64)
        board = fresh_env.warehouse.read("leaderboard_by_edition").filter(pl.col("model_key") == GLM)
        assert board.select("edition", "complete", "invalid_count", "missing_count").row(0) == (
            43,
            True,
            1,
            0,
        )
        log = read_log(cell_log_path(fresh_env.settings.warehouse_path.parent / "responses", GLM, "43"))
        assert [r.qid for r in log if r.empty_answer] == [EMPTY_QID]

        status = json.loads(fresh_env.cli("status", "--models", GLM, "--format", "json").output)
        (cell,) = [c for c in status["cells"] if c["edition"] == "43"]
        assert (cell["state"], cell["answered"], cell["errors"], cell["to_send"]) == ("complete", 78, 0, 0)

        before = server.stats.total_requests
        rerun = fresh_env.cli("run", "--models", GLM, "--editions", "43")
        assert rerun.exit_code == 0, rerun.output
        assert "up to date" in rerun.output
        assert server.stats.total_requests == before  # paid for once, never again

        dry = fresh_env.cli("run", "--models", GLM, "--editions", "43", "--retry-invalid", "--dry-run")
        assert f"{GLM} × 43: 1 call(s)" in dry.output, dry.output
        retried = fresh_env.cli("run", "--models", GLM, "--editions", "43", "--retry-invalid")
        assert retried.exit_code == 0, retried.output
        assert server.stats.total_requests == before + ATTEMPTS  # that question only, asked again
        assert server.stats.requests_per_prompt[empty_prompt] == 2 * ATTEMPTS
