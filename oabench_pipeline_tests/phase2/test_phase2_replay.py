"""The held-out test: OAB-Bench's recorded answers and o3 judgments replayed through `oabench run --phase 2` and
`oabench judge` from a loopback server; every recorded `[[score]]` comes out, and reruns send nothing."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.phase2.protocol import answer_messages, judge_messages
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_all_template_fixture
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer, conversation_text
from oabench_pipeline_tests.servers.static_files import StaticFileServer

JUDGE = "o3-2025-04-16"
MODELS = list(phase2_data.ANSWERING_MODELS)


def recorded_replies(data: Path) -> dict[tuple[str, str], RecordedReply]:
    """(model id, conversation) → the recorded reply: each model's answers, turn by turn in one conversation,
    and o3's judgments, keyed by the judge prompt OAB-Bench sent (system prompt and its recorded user_prompt)."""
    items, templates = phase2_data.items(data), phase2_data.templates(data)
    replies: dict[tuple[str, str], RecordedReply] = {}
    for model in MODELS:
        for item_id, turns in phase2_data.answers(data, model).items():
            item = items[item_id]
            for turn in range(1, item.turns + 1):
                conversation = conversation_text(answer_messages(item, turn, turns[: turn - 1]))
                replies[(model, conversation)] = RecordedReply(
                    turns[turn - 1], prompt_tokens=1000, completion_tokens=500, cost=0.001
                )
    for judgment in phase2_data.judgments(data):
        messages = judge_messages(templates[judgment.prompt_name].system_prompt, judgment.user_prompt)
        replies[(JUDGE, conversation_text(messages))] = RecordedReply(
            judgment.judgment, prompt_tokens=3000, completion_tokens=800, cost=0.01
        )
    return replies


phase2_all_template = phase2_all_template_fixture()  # every 2nd-phase edition, ingested once per session


@pytest.fixture
def phase2_env(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mirror_server: StaticFileServer,
    shared_oab: Path,
    phase2_all_template: Path,
) -> PipelineEnv:
    """Every 2nd-phase edition, copied from the session's ingest (`phase2/ingested.py`)."""
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_all_template, env)
    return env


@pytest.mark.slow
def test_recorded_answers_and_judgments_replay_as_recorded_and_reruns_send_nothing(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    with ReplayServer(replies=recorded_replies(data), api_key=TEST_KEY, conversation_keys=True) as server:
        use_replay_models(phase2_env, server.base_url, MODELS)
        result = phase2_env.cli("run", "--phase", "2", "--models", ",".join(MODELS))
        assert result.exit_code == 0, result.output
        assert server.stats.unmatched == 0, "every conversation we built is one OAB-Bench recorded"
        assert server.stats.total_requests == 2 * (105 + 84)
        answers = phase2_env.warehouse.read("phase2_answers")
        assert answers.height == 2 * 189 and answers["answer"].null_count() == 0
        assert set(answers["finish_reason"]) == {"stop"} and not answers["truncated"].any()

        before = server.stats.total_requests
        rerun = phase2_env.cli("run", "--phase", "2", "--models", ",".join(MODELS))
        assert rerun.exit_code == 0, rerun.output
        assert server.stats.total_requests == before

        judged = phase2_env.cli("judge", "--judge", JUDGE)
        assert judged.exit_code == 0, judged.output
        assert server.stats.unmatched == 0, "every judge prompt we built is one OAB-Bench recorded"
        assert server.stats.total_requests == before + 378
        assert_recorded_scores(phase2_env, data)
        board = phase2_env.warehouse.read("phase2_leaderboard").filter(pl.col("judge_key") == JUDGE)
        print(board)
        assert set(board["model_key"]) == set(MODELS)

        before = server.stats.total_requests
        again = phase2_env.cli("judge", "--judge", JUDGE)
        assert again.exit_code == 0, again.output
        assert server.stats.total_requests == before

        # The 5 judgments without a [[score]] are asked again under a new hash: the replay gives the
        # same text, so they stay invalid, the earlier ones stay in the log, and nothing else is sent.
        retried = phase2_env.cli("judge", "--judge", JUDGE, "--retry-invalid")
        assert retried.exit_code == 0, retried.output
        assert server.stats.total_requests == before + 5
        assert_recorded_scores(phase2_env, data)
        log = phase2_env.warehouse.root / "responses" / "judgments" / JUDGE
        assert sum(path.read_bytes().count(b"\n") for path in log.glob("*.jsonl")) == 383


def assert_recorded_scores(env: PipelineEnv, data: Path) -> None:
    judgments = env.warehouse.read("phase2_judgments").filter(pl.col("judge_key") == JUDGE)
    assert judgments.height == 378
    ours = {(r["model_key"], r["item_id"], r["turn"]): r for r in judgments.iter_rows(named=True)}
    bracketed = 0
    for recorded in phase2_data.judgments(data):
        row = ours[(recorded.model, recorded.item_id, recorded.turn)]
        assert row["judgment"] == recorded.judgment
        if "[[" in recorded.judgment:
            bracketed += 1
            assert (row["score"], row["valid"]) == (recorded.score, True)
        else:
            assert (row["score"], row["valid"]) == (None, False), "no [[score]]: invalid, never 0"
    assert bracketed == 373
