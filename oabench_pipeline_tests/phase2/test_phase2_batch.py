"""`oabench run --phase 2 --batch` and `oabench judge --batch` end to end, against loopback batch APIs that
answer with OAB-Bench's recorded answers and o3 judgments (the answers OpenRouter-shaped, the judge
OpenAI-shaped): no chat completion, the sync run's tables, each line paid once at the batch price; a SIGKILL
after submission then a rerun submits no new line; a failed line is sent again in the next batch."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from oabench_pipeline.inference.batches.cells import journal_path
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.batch_helpers import killed_once_submitted
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.inference.test_run_batch import sensor_tick
from oabench_pipeline_tests.phase2.ingested import (
    PHASE2_EDITION,
    copy_phase2,
    phase2_39_template_fixture,
)
from oabench_pipeline_tests.phase2.test_phase2_replay import JUDGE, recorded_replies
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env, write_models_file
from oabench_pipeline_tests.saved_envs import SavedEnv, save_env
from oabench_pipeline_tests.servers.batch_api import BatchPlan, OpenAIBatchServer, OpenRouterBatchServer
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer, conversation_text
from oabench_pipeline_tests.servers.static_files import StaticFileServer

phase2_39_template = phase2_39_template_fixture()  # edition 39's 2nd phase, ingested once per session

MODEL = "sabia-3.1-2025-05-08"
SYNC, BATCH = "sabia-sync", "sabia-batch"
JUDGE_SYNC, JUDGE_BATCH = "o3-sync", "o3-batch"
# One area-exam of one edition: a piece and 4 questions, 9 sub-items (each question's B waits for its A).
CELL = ("--editions", PHASE2_EDITION, "--areas", "direito_civil")
SUB_ITEMS, FIRST_TURNS = 9, 5


@pytest.fixture(scope="module")
def phase2_ingested(
    tmp_path_factory: pytest.TempPathFactory, mirror_server: StaticFileServer, phase2_39_template: Path
) -> SavedEnv:
    """The 2nd phase of edition 39, the one every test answers (`CELL`): `oabench ingest --phase 2 --editions
    39` once per session (`phase2/ingested.py`, which other modules copy too), copied here once for the module's
    tests and put back for each."""
    root = tmp_path_factory.mktemp("phase2_batch") / "env"
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, mirror_server.base_url)
        copy_phase2(phase2_39_template, env)
        return save_env(env)


@pytest.fixture
def phase2_env(phase2_ingested: SavedEnv, monkeypatch: pytest.MonkeyPatch) -> PipelineEnv:
    return phase2_ingested.restore(monkeypatch)


def batch_reply(replies: dict[tuple[str, str], RecordedReply]) -> Any:
    """The recorded reply to a line's conversation, as the chat completion the provider puts in the line."""

    def reply(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        recorded = replies[(body["model"], conversation_text(body["messages"]))]
        usage = {
            "prompt_tokens": recorded.prompt_tokens,
            "completion_tokens": recorded.completion_tokens,
            "cost": recorded.cost,
        }
        return {
            "id": f"gen-{custom_id}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": recorded.raw_response},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }

    return reply


@contextmanager
def servers(
    env: PipelineEnv, shared_oab: Path, answer_plans: list[BatchPlan] | None = None, polls_to_finish: int = 1
) -> Iterator[tuple[ReplayServer, OpenRouterBatchServer, OpenAIBatchServer]]:
    """Chat completions for the sync keys; an OpenRouter-shaped batch API for the answering model's batch key
    and an OpenAI-shaped one for the judge's, all replaying OAB-Bench's recordings."""
    replies = recorded_replies(phase2_data.oab_bench_data(shared_oab))
    plan = BatchPlan(polls_to_finish=polls_to_finish)
    with (
        ReplayServer(replies=replies, api_key=TEST_KEY, conversation_keys=True) as chat,
        OpenRouterBatchServer(
            reply=batch_reply(replies), plans=answer_plans or [], default_plan=plan
        ) as answers,
        OpenAIBatchServer(reply=batch_reply(replies), default_plan=plan) as judge,
    ):
        env.set(TEST_KEY_ENV, TEST_KEY)
        env.set("OABENCH_BATCH_POLL_S", "0.1")
        common = {"api_key_env": TEST_KEY_ENV}
        entries = [
            {**common, "id": MODEL, "key": SYNC, "base_url": chat.base_url},
            {**common, "id": MODEL, "key": BATCH, "base_url": answers.base_url, "batch_api": "openrouter"},
            {**common, "id": JUDGE, "key": JUDGE_SYNC, "base_url": chat.base_url},
            {**common, "id": JUDGE, "key": JUDGE_BATCH, "base_url": judge.base_url, "batch_api": "openai"},
        ]
        env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))
        yield chat, answers, judge


def answers_of(env: PipelineEnv, key: str) -> pl.DataFrame:
    frame = env.warehouse.read("phase2_answers").filter(pl.col("model_key") == key)
    return frame.sort("item_id", "turn")


def judgments_of(env: PipelineEnv, judge: str, key: str) -> pl.DataFrame:
    frame = env.warehouse.read("phase2_judgments")
    return frame.filter((pl.col("judge_key") == judge) & (pl.col("model_key") == key)).sort("item_id", "turn")


def scores_of(env: PipelineEnv, judge: str, key: str) -> list[tuple]:
    frame = env.warehouse.read("phase2_scores")
    mine = frame.filter((pl.col("judge_key") == judge) & (pl.col("model_key") == key)).sort("edition", "area")
    return list(mine.select("edition", "area", "total", "complete", "passed").iter_rows())


def lines_sent(*servers: Any) -> int:
    return sum(len(b.lines) for server in servers for b in server.batches.values())


@pytest.mark.slow
def test_batch_answers_and_judgments_give_the_sync_tables_each_line_paid_once_at_half_price(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    env = phase2_env
    with servers(env, shared_oab) as (chat, answers, judge):
        refused = env.cli("run", "--phase", "2", "--batch", "--models", SYNC, *CELL)
        assert refused.exit_code == 2 and 'batch_api = "openrouter"' in refused.output
        synced = env.cli("run", "--phase", "2", "--models", SYNC, *CELL)
        assert synced.exit_code == 0, synced.output
        judged = env.cli("judge", "--judge", JUDGE_SYNC, "--models", SYNC)
        assert judged.exit_code == 0, judged.output
        chat_requests = chat.stats.total_requests
        assert chat_requests == 2 * SUB_ITEMS

        batched = env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL)
        assert batched.exit_code == 0, batched.output
        batch_judged = env.cli("judge", "--batch", "--judge", JUDGE_BATCH, "--models", BATCH)
        assert batch_judged.exit_code == 0, batch_judged.output

        assert chat.stats.total_requests == chat_requests  # no chat completion for the batch keys
        # The answers in two batches (the first turns, then the sub-items B), the judgments in one.
        assert answers.requests["create"] == 2 and judge.requests["create"] == 1
        assert [len(b.lines) for b in answers.batches.values()] == [FIRST_TURNS, SUB_ITEMS - FIRST_TURNS]
        assert lines_sent(judge) == SUB_ITEMS
        for server in (answers, judge):  # each line billed once
            assert set(server.billed_by_body.values()) == {1} and not server.billed_twice()

        sync_rows, batch_rows = answers_of(env, SYNC), answers_of(env, BATCH)
        assert batch_rows.height == sync_rows.height == SUB_ITEMS
        assert batch_rows["answer"].to_list() == sync_rows["answer"].to_list()
        assert batch_rows["batch_id"].null_count() == 0 and sync_rows["batch_id"].null_count() == SUB_ITEMS
        sync_cost, batch_cost = sync_rows["cost_usd"].sum(), batch_rows["cost_usd"].sum()
        assert sync_cost > 0 and batch_cost == pytest.approx(sync_cost / 2)

        sync_judged, batch_judged_rows = (
            judgments_of(env, JUDGE_SYNC, SYNC),
            judgments_of(env, JUDGE_BATCH, BATCH),
        )
        assert batch_judged_rows.height == sync_judged.height == SUB_ITEMS
        assert batch_judged_rows["score"].to_list() == sync_judged["score"].to_list()
        assert batch_judged_rows["batch_id"].null_count() == 0
        assert scores_of(env, JUDGE_BATCH, BATCH) == scores_of(env, JUDGE_SYNC, SYNC) != []
        print(
            f"answers: sync ${sync_cost:.4f}, batch ${batch_cost:.4f}; "
            f"scores {scores_of(env, JUDGE_BATCH, BATCH)}"
        )

        rerun = env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL)
        assert rerun.exit_code == 0, rerun.output
        rejudged = env.cli("judge", "--batch", "--judge", JUDGE_BATCH, "--models", BATCH)
        assert rejudged.exit_code == 0, rejudged.output
        assert answers.requests["create"] == 2 and judge.requests["create"] == 1  # nothing left to send


@pytest.mark.slow
def test_a_failed_line_is_sent_again_in_the_next_batch_and_the_cell_completes(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    failing = "direito_civil_questao_2#1"  # sub-item A of question 2: its B waits for it
    plans = [BatchPlan(failed_lines=lambda custom_id: custom_id.endswith(failing))]
    with servers(phase2_env, shared_oab, answer_plans=plans) as (chat, answers, _):
        result = phase2_env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL)
        assert result.exit_code == 0, result.output
        assert chat.stats.total_requests == 0
        sizes = [len(b.lines) for b in answers.batches.values()]
        resent = [
            cid for b in list(answers.batches.values())[1:] for cid, _ in b.lines if cid.endswith(failing)
        ]
        assert sizes[0] == FIRST_TURNS and len(resent) == 1 and sum(sizes) == SUB_ITEMS + 1
        rows = answers_of(phase2_env, BATCH)
        assert rows.height == SUB_ITEMS and rows["answer"].null_count() == 0
        assert rows["error"].null_count() == SUB_ITEMS
        assert set(answers.billed_by_body.values()) == {1}  # the failed line was billed only when answered
        print(f"batches of {sizes} lines; the failed line resent once")


@pytest.mark.slow
def test_sigkill_after_a_phase2_submission_then_a_rerun_submits_no_new_line(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    env = phase2_env
    with servers(env, shared_oab, polls_to_finish=3) as (_, answers, _judge):
        journal = journal_path(env.settings.warehouse_path.parent, BATCH, "39", "phase2")
        deadline = time.monotonic() + 300
        killed_once_submitted(["run", "--phase", "2", "--batch", "--models", BATCH, *CELL], journal)
        assert answers.requests["create"] == 1
        [batch_id] = answers.batches
        cell = _answer_cell_status(env)
        while cell["state"] == "running":  # the cell's run (its own process) ends its round, batch open
            assert time.monotonic() < deadline, cell
            time.sleep(0.2)
            cell = _answer_cell_status(env)
        assert cell["state"] == "batch pending" and batch_id in cell["reason"], cell
        assert cell["command"].endswith("--batch")
        listed = env.cli("batches")
        assert f"{BATCH} × 39 (2nd phase): open {batch_id}" in listed.output, listed.output
        # A chat run of the cell now would pay for the batch's sub-items twice: refused.
        chat_run = env.cli("run", "--phase", "2", "--models", BATCH, *CELL)
        assert chat_run.exit_code == 1 and "`--batch` collects it" in chat_run.output
        # The sensor launches the run that collects it once it finished (collect only: no spend).
        requests = []
        for _ in range(4):  # the loopback batch finishes on its 3rd status read
            if requests := sensor_tick(env).run_requests or []:
                break
        [request] = requests
        assert request.job_name == "phase2_answers_cell" and request.partition_key == "39|" + BATCH
        assert request.run_config["ops"]["phase2_answers"]["config"]["batch_collect_only"] is True

        rerun = env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL)
        assert rerun.exit_code == 0, rerun.output
        first = answers.batches[batch_id]
        assert answers.requests["create"] == 2  # the sub-items B only: no first turn twice
        assert lines_sent(answers) == SUB_ITEMS and len(first.lines) == FIRST_TURNS
        assert set(answers.billed_by_body.values()) == {1}
        assert answers_of(env, BATCH)["answer"].null_count() == 0
        print(
            f"lines submitted before the SIGKILL: {len(first.lines)}; after: {SUB_ITEMS - FIRST_TURNS} (the Bs)"
        )


def _answer_cell_status(env: PipelineEnv) -> dict[str, Any]:
    shown = env.cli("status", "--phase", "2", "--models", BATCH, "--editions", "39", "--format", "json")
    return next(c for c in json.loads(shown.output)["cells"] if c["kind"] == "answers")


@pytest.mark.slow
def test_max_cost_usd_holds_a_phase2_batchs_worst_case_before_it_is_sent(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    """The model's `max_cost_usd` below the first turns' prompts at the batch price: no batch is created and
    the command says why; nothing is paid. (The price: $1 a million prompt tokens, $4 completion.)"""
    import datetime as dt

    env = phase2_env
    with servers(env, shared_oab) as (chat, answers, _):
        env.warehouse.write_partition(
            "model_pricing",
            pl.DataFrame(
                {
                    "fetched_at": [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)],
                    "base_url": [answers.base_url],
                    "model": [MODEL],
                    "prompt_price_per_token": [1e-6],
                    "completion_price_per_token": [4e-6],
                }
            ),
        )
        entry = {"api_key_env": TEST_KEY_ENV, "id": MODEL, "key": BATCH, "base_url": answers.base_url}
        capped = {**entry, "batch_api": "openrouter", "max_cost_usd": 1e-6}
        env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", [capped]))
        dry = env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL, "--dry-run")
        assert dry.exit_code == 0 and "× 0.5" in dry.output, dry.output
        held = env.cli("run", "--phase", "2", "--batch", "--models", BATCH, *CELL)
        assert (
            held.exit_code == 1 and "exceeds max_cost_usd" in held.output and "no batch sent" in held.output
        )
        assert answers.requests["create"] == 0 and chat.stats.total_requests == 0
