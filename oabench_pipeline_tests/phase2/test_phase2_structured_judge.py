"""`oabench judge --structured` end to end through Dagster, against a loopback judge that answers each
structured prompt with JSON points per criterion: the stored `score` is their sum and `criteria_points` keeps
them; a reply with a value the criterion does not allow, or with the wrong count, is invalid (NULL, never 0)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.phase2.protocol import first_user_message
from oabench_pipeline.core.phase2.structured import STRUCTURED_PROMPT, structured_user_prompt
from oabench_pipeline.phase2.judgments import standards_by_item
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_39_template_fixture
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

JUDGE = "o3-2025-04-16"
MODEL = "gpt-4o-2024-08-06"
EXAM = "39_direito_civil"  # one area-exam: the piece and 4 questions, 9 sub-items
NOT_ALLOWED = (f"{EXAM}_peca_praticoprofissional", 1)  # its first criterion gets a value it does not allow
WRONG_COUNT = (f"{EXAM}_questao_1", 1)  # one value short


phase2_39_template = phase2_39_template_fixture()  # edition 39's 2nd phase, ingested once per session


@pytest.fixture
def phase2_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer, phase2_39_template: Path
) -> PipelineEnv:
    """Edition 39's 2nd phase, copied from the session's ingest (`phase2/ingested.py`)."""
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_39_template, env)
    return env


def _answers(env: PipelineEnv, data: Path) -> dict[tuple[str, int], str]:
    """The model's recorded answers of the area-exam in `phase2_answers`, as an import stores them."""
    items = phase2_data.items(data)
    answers = {
        (item_id, turn): text
        for item_id, turns in phase2_data.answers(data, MODEL).items()
        if item_id.startswith(EXAM)
        for turn, text in enumerate(turns, start=1)
    }
    rows = [
        {
            "model_key": MODEL,
            "edition": 39,
            "item_id": item_id,
            "area": items[item_id].area,
            "turn": turn,
            "run_id": "oab-bench:test",
            "answer": text,
            "source": "oab-bench",
        }
        for (item_id, turn), text in sorted(answers.items())
    ]
    env.warehouse.write_partition("phase2_answers", pl.DataFrame(rows), f"39|{MODEL}")
    return answers


def _judge_replies(
    env: PipelineEnv, data: Path, answers: dict[tuple[str, int], str]
) -> tuple[dict[tuple[str, str], RecordedReply], dict[tuple[str, int], list[float]]]:
    """The loopback judge's reply to each structured prompt, and the points each valid one gives: the
    largest allowed value for the first criterion, the smallest for the others."""
    items = phase2_data.items(data)
    standards = standards_by_item(env.warehouse.read("phase2_standards"))
    replies, valid = {}, {}
    for (item_id, turn), answer in answers.items():
        item, standard = items[item_id], standards[item_id][turn - 1]
        criteria = list(standard.criteria)
        assert criteria, f"{item_id} turn {turn}: no parsed criteria"
        points = [criteria[0].allowed[-1], *(c.allowed[0] for c in criteria[1:])]
        if (item_id, turn) == NOT_ALLOWED:
            points[0] = criteria[0].allowed[-1] + 0.03
        elif (item_id, turn) == WRONG_COUNT:
            points = points[:-1]
        else:
            valid[(item_id, turn)] = points
        question = first_user_message(item) if turn == 1 else item.turn_prompts[turn - 1]
        user = structured_user_prompt(question, standard.text, criteria, answer, item.turn_points[turn - 1])
        replies[(JUDGE, user)] = RecordedReply(
            f"Avaliação por critério:\n{json.dumps({'points': points})}", prompt_tokens=3000, cost=0.01
        )
    return replies, valid


@pytest.mark.slow
def test_structured_judgments_store_the_sum_and_the_points_and_invalid_ones_score_null(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    answers = _answers(phase2_env, data)
    replies, valid = _judge_replies(phase2_env, data, answers)
    with ReplayServer(replies=replies, api_key=TEST_KEY) as server:
        use_replay_models(phase2_env, server.base_url, [JUDGE])
        judged = phase2_env.cli("judge", "--judge", JUDGE, "--models", MODEL, "--structured")
        assert judged.exit_code == 0, judged.output
        assert server.stats.unmatched == 0, "every structured prompt is one the loopback judge knows"
        assert server.stats.total_requests == len(answers) == 9 and len(valid) == 7

        rows = phase2_env.warehouse.read("phase2_judgments").filter(pl.col("judge_key") == JUDGE)
        assert rows.height == 9
        assert rows["structured"].all() and set(rows["prompt_name"]) == {STRUCTURED_PROMPT}
        stored = {(r["item_id"], r["turn"]): r for r in rows.iter_rows(named=True)}
        for key, points in valid.items():
            row = stored[key]
            assert row["valid"] and row["score"] == pytest.approx(round(sum(points), 2)), key
            assert row["criteria_points"] == pytest.approx(points), key
        for key, why in ((NOT_ALLOWED, "not one of its allowed values"), (WRONG_COUNT, "criteria")):
            row = stored[key]
            assert (row["score"], row["valid"]) == (None, False), f"{key}: invalid, never 0"
            assert why in row["invalid_reason"] and row["criteria_points"] is None

        scores = phase2_env.warehouse.read("phase2_scores").filter(pl.col("judge_key") == JUDGE)
        exam = scores.filter(pl.col("area") == "direito_civil").row(0, named=True)
        assert (
            exam["invalid"] == 2 and not exam["complete"] and exam["passed"] is None
        )  # incomplete, not failed

        again = phase2_env.cli("judge", "--judge", JUDGE, "--models", MODEL, "--structured")
        assert again.exit_code == 0, again.output
        assert server.stats.total_requests == 9, "a rerun pays for no judgment twice"
