"""`oabench run --batch` end to end, against a loopback OpenRouter-shaped batch API that answers with the
published OABench replies: no chat completion, every active question in a batch line, each paid once at half
the sync cost, the sync run's scores; a SIGKILL after submission then a rerun submits no new line; replicates
each in their own batch; OpenAI's lines costed from their tokens. A batch round's failed, expired and
given-up lines and a model's cost ceiling: `test_run_batch_rounds.py`."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from dagster import SensorResult, build_sensor_context

from oabench_pipeline.automation.batch_sensor import batch_results_sensor
from oabench_pipeline.definitions import build_definitions, build_resources
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
from oabench_pipeline.inference.batches.cells import journal_path
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.batch_helpers import killed_once_submitted
from oabench_pipeline_tests.inference.replay import (
    TEST_KEY,
    TEST_KEY_ENV,
    published_replies,
    published_summary,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.servers.batch_api import BatchPlan, OpenRouterBatchServer
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer

MODEL = "deepseek/deepseek-v3.2"
SYNC_KEY, BATCH_KEY = "ds-sync", "ds-batch"
BATCH_ROUTES = {"create", "status", "results", "list"}


def batch_reply(replies: dict[tuple[str, str], RecordedReply]) -> Any:
    """The published reply to a line's prompt, as the chat completion OpenRouter would put in the line."""

    def reply(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        recorded = replies[(body["model"], body["messages"][-1]["content"])]
        usage: dict[str, Any] = {
            "prompt_tokens": recorded.prompt_tokens or 0,
            "completion_tokens": recorded.completion_tokens or 0,
        }
        if recorded.cost is not None:
            usage["cost"] = recorded.cost
        message: dict[str, Any] = {"role": "assistant", "content": recorded.raw_response}
        if recorded.reasoning is not None:
            message["reasoning"] = recorded.reasoning
        return {
            "id": f"gen-{custom_id}",
            "object": "chat.completion",
            "model": body["model"],
            "provider": "replay",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage,
        }

    return reply


@contextmanager
def servers(
    env: PipelineEnv, shared_oab: Path, more_models: Sequence[dict[str, Any]] = (), **batch_options: Any
) -> Iterator[tuple[ReplayServer, Any]]:
    """The chat replay server (the sync key) and the batch server (the batch key), both replaying MODEL;
    `more_models`: registry entries to add (keys on servers of the test's own)."""
    # The published runs record no cost: each reply gets one (what OpenRouter reports for a chat reply).
    replies = {
        key: dataclasses.replace(reply, cost=0.0001 * (1 + len(key[1]) % 7))
        for key, reply in published_replies(shared_oab, env.warehouse).items()
    }
    with (
        ReplayServer(replies=replies, api_key=TEST_KEY) as chat,
        OpenRouterBatchServer(reply=batch_reply(replies), **batch_options) as batch,
    ):
        env.set(TEST_KEY_ENV, TEST_KEY)
        env.set("OABENCH_BATCH_POLL_S", "0.1")
        common = {"id": MODEL, "api_key_env": TEST_KEY_ENV}
        entries = [
            {**common, "key": SYNC_KEY, "base_url": chat.base_url},
            {**common, "key": BATCH_KEY, "base_url": batch.base_url, "batch_api": "openrouter"},
            *more_models,
        ]
        env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))
        yield chat, batch


def active_rows(env: PipelineEnv, key: str) -> pl.DataFrame:
    return env.warehouse.read("inferences").filter((pl.col("model_key") == key) & ~pl.col("skipped"))


def assert_official_score_is_published(env: PipelineEnv, key: str, shared_oab: Path) -> None:
    """`key`'s official score on edition 45 is the one the OABench study published for MODEL."""
    published = published_summary(shared_oab, MODEL)
    assert [s[1] for s in scores(env, key)] == [
        e["officialScore"] for e in published["editions"] if e["edition"] == 45
    ]


def scores(env: PipelineEnv, key: str) -> list[tuple]:
    board = env.warehouse.read("leaderboard_by_edition").filter(pl.col("model_key") == key).sort("edition")
    return list(board.select("edition", "official_score", "technical_score", "passed").iter_rows())


@pytest.mark.slow
def test_batch_run_sends_no_chat_pays_half_once_and_scores_as_the_sync_run(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    """Edition 45's cell by chat, then by batch (its 80 lines read back in pages of 30). One cell: two cells
    of one `--batch` command, each followed and relaunched on its own batches, are
    `test_run_batch_rounds.py`'s. The chat cell is the comparison's state, not under test (`oabench run` by
    chat is `test_run_replay.py`'s): its assets' in-process run; the `--batch` command's rebuild scores both."""
    with servers(fresh_env, shared_oab, default_plan=BatchPlan(polls_to_finish=2), max_page_size=30) as (
        chat,
        batch,
    ):
        refused = fresh_env.cli("run", "--batch", "--models", SYNC_KEY, "--editions", "45")
        assert refused.exit_code == 2 and 'batch_api = "openrouter"' in refused.output
        assert len(refused.output.strip().splitlines()[-1]) > 0 and chat.stats.total_requests == 0

        answer_by_chat_in_process(fresh_env, SYNC_KEY, "45")
        sync_requests = chat.stats.total_requests
        batched = fresh_env.cli("run", "--batch", "--models", BATCH_KEY, "--editions", "45")
        assert batched.exit_code == 0, batched.output

        assert chat.stats.total_requests == sync_requests  # no chat completion for the batch key
        assert set(batch.requests) <= BATCH_ROUTES and batch.requests["create"] == 1  # one per cell
        sync_rows, batch_rows = active_rows(fresh_env, SYNC_KEY), active_rows(fresh_env, BATCH_KEY)
        assert batch_rows.height == sync_rows.height == sync_requests
        # Every active question went into a batch line, and each was billed once.
        assert len(batch.billed_by_body) == batch_rows.height and set(batch.billed_by_body.values()) == {1}
        assert (
            batch_rows["batch_id"].null_count() == 0
            and sync_rows["batch_id"].null_count() == sync_rows.height
        )
        sync_cost, batch_cost = sync_rows["cost_usd"].sum(), batch_rows["cost_usd"].sum()
        assert sync_cost > 0 and batch_cost == pytest.approx(sync_cost / 2)
        assert scores(fresh_env, BATCH_KEY) == scores(fresh_env, SYNC_KEY)
        assert_official_score_is_published(fresh_env, BATCH_KEY, shared_oab)
        print(f"sync ${sync_cost:.6f} vs batch ${batch_cost:.6f}; scores {scores(fresh_env, BATCH_KEY)}")

        rerun = fresh_env.cli("run", "--batch", "--models", BATCH_KEY, "--editions", "45")
        assert rerun.exit_code == 0 and batch.requests["create"] == 1  # nothing left to send


@pytest.mark.slow
def test_sigkill_after_submission_then_a_rerun_submits_no_new_line(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    with servers(fresh_env, shared_oab, default_plan=BatchPlan(polls_to_finish=3)) as (_, batch):
        journal = journal_path(fresh_env.settings.warehouse_path.parent, BATCH_KEY, "45")
        deadline = time.monotonic() + 300
        killed_once_submitted(["run", "--batch", "--models", BATCH_KEY, "--editions", "45"], journal)
        assert batch.requests["create"] == 1
        lines = sum(len(b.lines) for b in batch.batches.values())
        [batch_id] = batch.batches
        cell = cell_status(fresh_env)
        while cell["state"] == "running":  # the cell's run (its own process) ends its round, batch open
            assert time.monotonic() < deadline, cell
            time.sleep(0.2)
            cell = cell_status(fresh_env)
        assert cell["state"] == "batch pending" and batch_id in cell["reason"], cell
        listed = fresh_env.cli("batches")
        assert f"{BATCH_KEY} × 45: open {batch_id}" in listed.output, listed.output
        # The sensor launches the run that collects the batch once it finished (collect only: no spend).
        requests = []
        for _ in range(4):  # the loopback batch finishes on its 3rd status read
            if requests := sensor_tick(fresh_env).run_requests or []:
                break
        [request] = requests
        assert request.partition_key == "45|" + BATCH_KEY and batch_id in (request.run_key or "")
        assert request.run_config["ops"]["inferences"]["config"]["batch_collect_only"] is True
        # A chat run of the cell now would pay for the batch's questions twice: refused.
        chat_run = fresh_env.cli("run", "--models", BATCH_KEY, "--editions", "45")
        assert chat_run.exit_code == 1 and "`oabench run --batch` collects it" in chat_run.output

        rerun = fresh_env.cli("run", "--batch", "--models", BATCH_KEY, "--editions", "45")
        assert rerun.exit_code == 0, rerun.output
        assert batch.requests["create"] == 1 and sum(len(b.lines) for b in batch.batches.values()) == lines
        rows = active_rows(fresh_env, BATCH_KEY)
        assert rows.height == lines and rows["raw_response"].null_count() == 0
        assert set(batch.billed_by_body.values()) == {1}
        print(f"lines submitted before the SIGKILL: {lines}; after the rerun: 0 new")


def answer_by_chat_in_process(env: PipelineEnv, key: str, edition: str) -> None:
    """The cell answered and scored by its assets' in-process run (what `oabench run` launches, without its
    code server, launched run and report rebuild); the `models` table first, as `oabench run` does."""
    settings = env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        ensure_partitions(instance, "editions", [edition])
        ensure_partitions(instance, "model_keys", [key])
        answered = run_assets(defs, instance, ["models"])
        assert answered.success, answered.errors
        cell = str(cell_partition_key(key, edition))
        answered = run_assets(defs, instance, ["inferences", "scores"], partition_key=cell)
        assert answered.success, answered.errors


def cell_status(env: PipelineEnv) -> dict[str, Any]:
    shown = env.cli("status", "--models", BATCH_KEY, "--editions", "45", "--format", "json")
    return json.loads(shown.output)["cells"][0]


def sensor_tick(env: PipelineEnv) -> SensorResult:
    result = batch_results_sensor(build_sensor_context(resources=build_resources(env.settings)))
    assert isinstance(result, SensorResult)
    return result


def test_an_openai_batch_line_is_costed_from_its_tokens_at_half_the_listed_price() -> None:
    """OpenAI's batch lines report no cost: it is computed from the tokens at the batch price, and said so."""
    from oabench_pipeline.core.models_registry import ModelConfig
    from oabench_pipeline.inference.batch_cell import OPENAI_COST_NOTE, _as_logged
    from oabench_pipeline.inference.batches.protocol import BatchLineResult
    from oabench_pipeline.inference.batches.transport import LineOutcome, to_chat_result
    from oabench_pipeline.inference.catalogue_store import Price
    from oabench_pipeline_tests.servers.batch_api import completion

    model = ModelConfig(id="gpt-4o", base_url="https://api.openai.com/v1")
    assert model.batch_api == "openai"
    body = completion("B", cost=None)  # 100 prompt tokens, 5 completion tokens
    result = to_chat_result(LineOutcome("t:q1", body, None), "q1", "h1", 1, 10, ())
    assert result.cost_usd is None
    logged = _as_logged(
        BatchLineResult(result, "batch_1", "t:q1"), model, Price(prompt=2e-6, completion=8e-6)
    )
    assert logged.batch_id == "batch_1" and logged.raw_response == "B"
    assert logged.cost_usd == pytest.approx((100 * 2e-6 + 5 * 8e-6) / 2) == logged.total_cost_usd
    assert logged.cost_note is not None and OPENAI_COST_NOTE in logged.cost_note
    unpriced = _as_logged(BatchLineResult(result, "batch_1", "t:q1"), model, None)
    assert unpriced.cost_usd is None  # no price snapshot: unknown, never $0


@pytest.mark.slow
def test_replicates_with_batch_put_each_replicate_in_its_own_batch_every_line_paid_once(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    """`--replicates 2 --batch`: both replicates' questions are submitted in the first round, one batch each
    (their requests are hashed apart: the second never passes for the first's answer), each line billed once."""
    with servers(fresh_env, shared_oab) as (chat, batch):
        result = fresh_env.cli(
            "run", "--batch", "--replicates", "2", "--models", BATCH_KEY, "--editions", "45"
        )
        assert result.exit_code == 0, result.output
        assert chat.stats.total_requests == 0
        rows = active_rows(fresh_env, BATCH_KEY)
        runs = rows.group_by("run_id").agg(pl.len(), pl.col("batch_id").n_unique().alias("batches"))
        assert sorted(runs["run_id"]) == [f"live:{BATCH_KEY}:r1", f"live:{BATCH_KEY}:r2"], runs
        questions = rows.height // 2
        assert set(runs["len"]) == {questions} and set(runs["batches"]) == {1}
        assert rows["raw_response"].null_count() == 0 and rows["batch_id"].null_count() == 0
        # Two batches, created before either was collected (the first round submits both).
        assert (
            batch.requests["create"] == 2
            and [len(b.lines) for b in batch.batches.values()] == [questions] * 2
        )
        assert set(batch.billed.values()) == {1}  # every line once (the two replicates' bodies are the same)
        rerun = fresh_env.cli(
            "run", "--batch", "--replicates", "2", "--models", BATCH_KEY, "--editions", "45"
        )
        assert rerun.exit_code == 0 and batch.requests["create"] == 2
