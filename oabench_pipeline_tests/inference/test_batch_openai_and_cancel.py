"""`oabench run --batch` end to end on an OpenAI-shaped batch API (an input file, output and error files), and
`oabench batches cancel ID` against a loopback batch API."""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.inference.batches.cells import journal_path
from oabench_pipeline.inference.batches.journal import BatchJournal
from oabench_pipeline.inference.batches.protocol import BatchProtocol
from oabench_pipeline_tests.inference.batch_helpers import API_KEY, questions, transport_for
from oabench_pipeline_tests.inference.batch_helpers import MODEL as BATCH_MODEL
from oabench_pipeline_tests.inference.replay import TEST_KEY_ENV, published_replies
from oabench_pipeline_tests.inference.test_run_batch import (
    BATCH_KEY,
    MODEL,
    active_rows,
    assert_official_score_is_published,
    batch_reply,
)
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env, write_models_file
from oabench_pipeline_tests.servers.batch_api import BatchPlan, OpenAIBatchServer, OpenRouterBatchServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

OPENAI_ROUTES = {"upload", "create", "status", "file_content", "list"}


@pytest.mark.slow
def test_an_openai_shaped_batch_answers_a_cell_as_the_published_run_each_line_paid_once(
    fresh_env: PipelineEnv, shared_oab: Path
) -> None:
    replies = published_replies(shared_oab, fresh_env.warehouse)
    # The second batch's lines fail one in ten: they are read from the error file and sent again.
    plans = [BatchPlan(polls_to_finish=2, failed_lines=lambda c: c.endswith("0")), BatchPlan()]
    with OpenAIBatchServer(reply=batch_reply(replies), plans=plans) as server:
        fresh_env.set(TEST_KEY_ENV, API_KEY)
        fresh_env.set("OABENCH_BATCH_POLL_S", "0.1")
        entry = {"id": MODEL, "key": BATCH_KEY, "api_key_env": TEST_KEY_ENV, "base_url": server.base_url}
        fresh_env.set(
            "OABENCH_MODELS_FILE",
            write_models_file(fresh_env.root / "models.toml", [{**entry, "batch_api": "openai"}]),
        )
        result = fresh_env.cli("run", "--batch", "--models", BATCH_KEY, "--editions", "45")
        assert result.exit_code == 0, result.output

        assert set(server.requests) <= OPENAI_ROUTES and server.requests["create"] == 2
        assert server.requests["upload"] == 2  # one input file a batch
        rows = active_rows(fresh_env, BATCH_KEY)
        assert rows["raw_response"].null_count() == 0 and rows["batch_id"].null_count() == 0
        assert len(server.billed_by_body) == rows.height and set(server.billed_by_body.values()) == {1}
        assert_official_score_is_published(fresh_env, BATCH_KEY, shared_oab)
        sizes = [len(b.lines) for b in server.batches.values()]
        print(f"OpenAI-shaped: batches of {sizes} lines, {rows.height} questions each billed once")


def test_batches_cancel_cancels_an_open_batch_at_the_provider_and_names_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> None:
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    running = BatchPlan("cancelled", answered_fraction=0.5, polls_to_finish=1000)  # half ran when cancelled
    with OpenRouterBatchServer(default_plan=running) as server:
        env.set(TEST_KEY_ENV, API_KEY)
        entry = {"id": BATCH_MODEL, "key": "acme", "api_key_env": TEST_KEY_ENV, "base_url": server.base_url}
        env.set(
            "OABENCH_MODELS_FILE",
            write_models_file(env.root / "models.toml", [{**entry, "batch_api": "openrouter"}]),
        )
        # A cell's round submits a batch that stays open (as `oabench run --batch` leaves one).
        journal = BatchJournal(journal_path(env.settings.warehouse_path.parent, "acme", "45"))
        protocol = BatchProtocol(journal, transport_for("openrouter", server.base_url), BATCH_MODEL)
        report = protocol.step(questions(4), lambda line: None)
        [batch_id] = report.submitted_batches
        assert "open" in env.cli("batches").output

        unknown = env.cli("batches", "cancel", "batch_none")
        assert unknown.exit_code == 2 and "no batch batch_none in the journals" in unknown.output
        assert server.requests["cancel"] == 0

        cancelled = env.cli("batches", "cancel", batch_id)
        assert cancelled.exit_code == 0, cancelled.output
        assert f"{batch_id}: cancelled" in cancelled.output
        assert server.requests["cancel"] == 1 and server.batches[batch_id].status == "cancelled"
        # The next round collects what it answered and sends the rest again, in a new batch.
        again = protocol.step(questions(4), lambda line: None)
        assert again.collected_batches == [batch_id] and again.answered == 2 and again.submitted_lines == 2
        assert not server.billed_twice()
