"""`oabench run --batch`'s rounds, against loopback OpenRouter-shaped batch APIs that answer with the published
OABench replies: failed and expired lines are asked again until the cell is complete, each question paid once;
with `--batch-fallback sync` the questions out of batch attempts are sent as chat completions; a model's
`max_cost_usd` holds a batch's worst case at the batch price before it is sent. (The batch run as a whole,
against the sync run: `test_run_batch.py`.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.runs import instance_for, run_assets
from oabench_pipeline_tests.inference.replay import (
    TEST_KEY,
    TEST_KEY_ENV,
    published_replies,
)
from oabench_pipeline_tests.inference.test_run_batch import (
    BATCH_KEY,
    MODEL,
    active_rows,
    assert_official_score_is_published,
    batch_reply,
    servers,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.batch_api import BatchPlan, OpenRouterBatchServer
from oabench_pipeline_tests.servers.openai_replay import ReplayServer

FALLBACK_KEY = "ds-fallback"  # MODEL on a batch API that fails the same lines in every batch
PRICEY = "acme/pricey"
HELD_KEY, SENT_KEY = "pricey-10", "pricey-20"  # PRICEY under a $10 and a $20 max_cost_usd


def _number(custom_id: str) -> int:
    return int(custom_id.rsplit("q", 1)[1])


class BatchAndChatServer(OpenRouterBatchServer):
    """The batch API, and chat completions on the same base URL (as OpenRouter serves both)."""

    def route(
        self, method: str, path: str, query: dict[str, str], raw: bytes, headers: Any
    ) -> tuple[int, bytes, str]:
        if method == "GET" and path.endswith("/models"):  # the price list `model_pricing` reads
            pricing = {"prompt": "0.001", "completion": "0.002"}
            listing = {"data": [{"id": PRICEY, "name": PRICEY, "pricing": pricing, "context_length": 128000}]}
            return 200, json.dumps(listing).encode(), "application/json"
        if method == "POST" and path.endswith("/chat/completions"):
            self.count("chat")
            return 200, json.dumps(self.reply("chat", json.loads(raw))).encode(), "application/json"
        return super().route(method, path, query, raw, headers)


@pytest.mark.slow
def test_failed_expired_and_given_up_lines_each_asked_again_until_every_cell_is_complete(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    """One `oabench run --batch --batch-fallback sync` of edition 45 for two keys of MODEL, each on its own
    batch API (each used to pay for its own command): BATCH_KEY's failed and expired lines are asked again in
    new batches until its cell is complete, each question paid once, none given up; FALLBACK_KEY's lines that
    fail in every batch are given up after their batch attempts and sent as chat completions."""
    plans = [  # a first batch that expires half done, 20% of its run lines failed; then 20% failed again
        BatchPlan("expired", answered_fraction=0.5, failed_lines=lambda c: _number(c) % 5 == 0),
        BatchPlan(failed_lines=lambda c: _number(c) % 5 == 1),
    ]
    always_failing = BatchPlan(failed_lines=lambda c: _number(c) % 10 == 3)
    replies = batch_reply(published_replies(shared_oab, fresh_env.warehouse))
    with BatchAndChatServer(reply=replies, default_plan=always_failing) as fallback_server:
        fallback = {
            "id": MODEL,
            "key": FALLBACK_KEY,
            "api_key_env": TEST_KEY_ENV,
            "base_url": fallback_server.base_url,
            "batch_api": "openrouter",
        }
        with servers(fresh_env, shared_oab, more_models=[fallback], plans=plans) as (chat, batch):
            keys = f"{BATCH_KEY},{FALLBACK_KEY}"
            result = fresh_env.cli(
                "run", "--batch", "--batch-fallback", "sync", "--models", keys, "--editions", "45"
            )
            assert result.exit_code == 0, result.output
            assert_progress_counts_each_cells_batches(result.output)
            assert_failed_and_expired_lines_asked_again_until_complete_each_paid_once(
                fresh_env, shared_oab, chat, batch
            )
            assert_batch_fallback_sync_sends_the_given_up_questions_as_chat_completions(
                fresh_env, fallback_server
            )


def assert_progress_counts_each_cells_batches(output: str) -> None:
    """Both loopback servers number their first batch `batch_0001`: the first poll still counts two."""
    progress = [line for line in output.splitlines() if line.startswith("batches: ")]
    assert progress and progress[0].startswith("batches: 2 open in 2 cell(s)"), progress


def assert_failed_and_expired_lines_asked_again_until_complete_each_paid_once(
    env: PipelineEnv, shared_oab: Path, chat: ReplayServer, batch: OpenRouterBatchServer
) -> None:
    assert chat.stats.total_requests == 0
    rows = active_rows(env, BATCH_KEY)
    assert rows["raw_response"].null_count() == 0 and rows["error"].null_count() == rows.height
    assert batch.requests["create"] == 3 and len(rows["batch_id"].unique()) == 3
    assert rows["batch_id"].null_count() == 0  # every answer from a batch: none given up to the fallback
    assert len(batch.billed_by_body) == rows.height and set(batch.billed_by_body.values()) == {1}
    assert_official_score_is_published(env, BATCH_KEY, shared_oab)
    sizes = [len(b.lines) for b in batch.batches.values()]
    print(f"batches of {sizes} lines; {rows.height} questions, each billed once")


def assert_batch_fallback_sync_sends_the_given_up_questions_as_chat_completions(
    env: PipelineEnv, server: BatchAndChatServer
) -> None:
    rows = active_rows(env, FALLBACK_KEY)
    given_up = rows.filter(pl.col("batch_id").is_null())
    assert server.requests["create"] == 3 and server.requests["chat"] == given_up.height > 0
    assert sorted(int(q.rsplit("q", 1)[1]) % 10 for q in given_up["qid"]) == [3] * given_up.height
    assert rows["raw_response"].null_count() == 0 and rows["error"].null_count() == rows.height


@pytest.mark.slow
def test_max_cost_usd_holds_a_batchs_worst_case_at_the_batch_price_before_it_is_sent(
    fresh_env: PipelineEnv,
) -> None:
    """Edition 45's prompts cost about $32 at $0.001 a token: $16 at the batch price. In one command, HELD_KEY's
    $10 ceiling holds its batch back (nothing created, the cell failed in one line), while SENT_KEY's $20 lets
    its batch go, though the sync price would not fit (its cell complete)."""
    with BatchAndChatServer() as server:
        fresh_env.set(TEST_KEY_ENV, TEST_KEY)
        fresh_env.set("OABENCH_BATCH_POLL_S", "0.1")
        entry = {
            "id": PRICEY,
            "api_key_env": TEST_KEY_ENV,
            "base_url": server.base_url,
            "batch_api": "openrouter",
        }
        ceilings = {HELD_KEY: 10.0, SENT_KEY: 20.0}
        fresh_env.set(
            "OABENCH_MODELS_FILE",
            write_models_file(
                fresh_env.root / "models.toml",
                [{**entry, "key": key, "max_cost_usd": ceiling} for key, ceiling in ceilings.items()],
            ),
        )
        price_snapshot_and_models_table(fresh_env)
        keys = f"{HELD_KEY},{SENT_KEY}"
        dry = fresh_env.cli("run", "--models", keys, "--editions", "45", "--dry-run", "--batch")
        for key in ceilings:
            estimate = float(dry.output.split(f"{key} × 45: ")[1].split("est. prompt cost $")[1].split()[0])
            assert 10 < estimate < 20, dry.output
        assert "× 0.5" in dry.output, dry.output
        result = fresh_env.cli("run", "--batch", "--models", keys, "--editions", "45")
        assert server.requests["create"] == 1 and server.requests["chat"] == 0
        assert_the_batch_within_its_ceiling_is_sent_and_its_cell_completes(fresh_env, result.output)
        assert_the_batch_past_its_ceiling_is_held_back_in_one_line(result.exit_code, result.output)


def price_snapshot_and_models_table(env: PipelineEnv) -> None:
    """A price snapshot from every endpoint of the registry (`model_pricing`, as the UI would take it) and the
    `models` table, in one in-process run: the command then finds its `models` table current."""
    settings = env.settings
    with instance_for(settings) as instance:
        outcome = run_assets(build_definitions(settings), instance, ["model_pricing", "models"])
    assert outcome.success, outcome.errors


def assert_the_batch_within_its_ceiling_is_sent_and_its_cell_completes(env: PipelineEnv, output: str) -> None:
    rows = active_rows(env, SENT_KEY)
    assert rows.height > 0 and rows["raw_response"].null_count() == 0 and rows["batch_id"].null_count() == 0
    assert "leaderboard rebuilt" in output and f"  {SENT_KEY} × 45:" not in output, output


def assert_the_batch_past_its_ceiling_is_held_back_in_one_line(exit_code: int, output: str) -> None:
    assert exit_code == 1 and "1 of 2 cell(s) not complete" in output, output
    [held] = [line for line in output.splitlines() if line.startswith(f"  {HELD_KEY} × 45:")]
    assert "exceeds max_cost_usd $10.0; no batch sent" in held, output
