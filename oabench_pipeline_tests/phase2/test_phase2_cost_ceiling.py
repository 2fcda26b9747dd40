"""`oabench run --phase 2 --max-cost-usd X` and `oabench judge --max-cost-usd X` against the loopback replay
server: the command stops before a request could take its spend past X, keeps every reply it paid for, and a
rerun pays none of them again."""

from __future__ import annotations

from pathlib import Path

import pytest

from oabench_pipeline.inference.response_log import read_log
from oabench_pipeline.phase2.plans import answers_log_path, judgments_log_path
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.phase2.ingested import (
    PHASE2_EDITION,
    copy_phase2,
    phase2_39_template_fixture,
)
from oabench_pipeline_tests.phase2.test_phase2_replay import recorded_replies
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

phase2_39_template = phase2_39_template_fixture()  # edition 39's 2nd phase, ingested once per session

MODEL = "o3-2025-04-16"
AREA = "direito_civil"
EDITION = PHASE2_EDITION  # the one edition the test answers: ingested once per session (`phase2/ingested.py`)
SUB_ITEMS = 9  # the area-exam's piece and 4 questions of sub-items A and B
ANSWER_COST, JUDGMENT_COST = 0.001, 0.01  # each reply's reported cost (recorded_replies)


@pytest.fixture
def phase2_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer, phase2_39_template: Path
) -> PipelineEnv:
    """Edition 39's 2nd phase ingested (`oabench ingest --phase 2 --editions 39`, copied from the session's)."""
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_39_template, env)
    return env


def _paid(log: Path) -> float:
    return sum(result.cost_usd or 0.0 for result in read_log(log))


@pytest.mark.slow
def test_a_run_level_ceiling_stops_answering_and_judging_before_passing_it(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    answers = answers_log_path(phase2_env.warehouse.root, MODEL, EDITION)
    answer = f"run --phase 2 --models {MODEL} --editions {EDITION} --areas {AREA} --concurrency 1".split()
    with ReplayServer(replies=recorded_replies(data), api_key=TEST_KEY, conversation_keys=True) as server:
        use_replay_models(phase2_env, server.base_url, [MODEL])
        stopped = phase2_env.cli(*answer, "--max-cost-usd", "0.0035")
        assert stopped.exit_code == 1, stopped.output
        assert "max_cost_usd" in stopped.output
        assert 0 < _paid(answers) <= 0.0035 + 1e-9
        paid_replies = len(read_log(answers))
        assert server.stats.total_requests == paid_replies < SUB_ITEMS

        finished = phase2_env.cli(*answer)
        assert finished.exit_code == 0, finished.output
        assert server.stats.total_requests == SUB_ITEMS, "a reply paid for under the ceiling was asked again"

        judgments = judgments_log_path(phase2_env.warehouse.root, MODEL, MODEL)
        judge = ["judge", "--judge", MODEL, "--models", MODEL, "--concurrency", "1"]
        stopped = phase2_env.cli(*judge, "--max-cost-usd", "0.035")
        assert stopped.exit_code == 1, stopped.output
        assert 0 < _paid(judgments) <= 0.035 + 1e-9
        judged = len(read_log(judgments))
        assert judged < SUB_ITEMS and server.stats.total_requests == SUB_ITEMS + judged

        finished = phase2_env.cli(*judge)
        assert finished.exit_code == 0, finished.output
        assert server.stats.total_requests == 2 * SUB_ITEMS
