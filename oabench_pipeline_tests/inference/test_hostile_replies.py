"""`oabench run` and `oabench status` against hostile replies on loopback: nothing aborts, nothing is lost.

A reply nested 100,000 deep made the cell fail with `inferences: RecursionError` (the replies in flight
lost); a reply counting `10**400` prompt tokens reached the Parquet write, which then failed on every rerun;
the same nesting in a response-log line crashed `oabench status` for every cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline_tests.inference.replay import (
    TEST_KEY,
    published_replies,
    question_texts,
    use_replay_models,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer

MODEL = "deepseek/deepseek-v3.2"
NESTED_QID, HUGE_QID = "oab-43-1f-q5", "oab-43-1f-q6"
NESTED_BODY = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HUGE_BODY = b'{"choices": [{"message": {"content": "B"}}], "usage": {"prompt_tokens": 1' + b"0" * 400 + b"}}"


@pytest.mark.slow  # two `oabench run`s of a cell (Dagster runs, a leaderboard) and a status
def test_hostile_replies_cost_their_question_only_and_status_reads_a_nested_log_line(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    texts = question_texts(fresh_env.warehouse)
    replies = {k: v for k, v in published_replies(shared_oab, fresh_env.warehouse).items() if k[0] == MODEL}
    replies[(MODEL, texts[NESTED_QID])] = RecordedReply("", raw_body=NESTED_BODY)
    replies[(MODEL, texts[HUGE_QID])] = RecordedReply("", raw_body=HUGE_BODY)
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        use_replay_models(fresh_env, server.base_url, [MODEL])
        result = fresh_env.cli("run", "--models", MODEL, "--editions", "43")
        assert result.exit_code == 1, result.output  # one error row: the cell is incomplete, not aborted
        assert "RecursionError" not in result.output
        assert (
            f"{MODEL} × 43: 1 error row(s) (most often: gave up after 3 attempts: body is JSON nested too "
            "deep to decode)"
        ) in result.output
        assert server.stats.total_requests == 77 + 3

    rows = fresh_env.warehouse.read("inferences").filter(~pl.col("skipped"))
    assert rows.height == 78  # the partition was written: every reply of the 80 questions kept
    assert rows.filter(pl.col("error").is_not_null())["qid"].to_list() == [NESTED_QID]
    huge = rows.filter(pl.col("qid") == HUGE_QID).select("raw_response", "prompt_tokens").row(0)
    assert huge == ("B", None)

    log = cell_log_path(fresh_env.settings.warehouse_path.parent / "responses", MODEL, "43")
    nested_line = len(log.read_text(encoding="utf-8").splitlines()) + 1
    with log.open("a", encoding="utf-8") as handle:
        handle.write("[" * 100_000 + "]" * 100_000 + "\n")
    status = fresh_env.cli("status", "--models", MODEL, "--editions", "43", "--format", "json")
    (cell,) = json.loads(status.output)["cells"]  # it crashed with RecursionError, for every cell
    assert (cell["state"], cell["answered"], cell["errors"]) == ("failed", 77, 1)
    assert f"{log}:{nested_line}: JSON nested too deep to decode" in cell["reason"]
