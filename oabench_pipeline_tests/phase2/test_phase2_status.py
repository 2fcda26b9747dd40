"""`oabench status --phase 2` through a 2nd phase answered and judged from the loopback replay server: each
answer cell (model × edition) and judgment cell (judge × model) is missing, failed, running or complete, with
what completing it costs and the command that completes it; running that command completes it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.inference.cell_lock import CellLock
from oabench_pipeline.phase2.plans import answers_lock_path
from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_39_template_fixture
from oabench_pipeline_tests.phase2.test_phase2_replay import recorded_replies
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

MODEL = "o3-2025-04-16"  # answers, then judges its own answers (OAB-Bench recorded both)
SUB_ITEMS = 63  # the 39th edition: 7 pieces and 28 questions of sub-items A and B
AREA_SUB_ITEMS = 9  # one area-exam: the piece and 4 questions


phase2_39_template = phase2_39_template_fixture()  # edition 39's 2nd phase, ingested once per session


@pytest.fixture
def phase2_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer, phase2_39_template: Path
) -> PipelineEnv:
    """Edition 39's 2nd phase, copied from the session's ingest (`phase2/ingested.py`)."""
    env = make_env(tmp_path, monkeypatch, mirror_server.base_url)
    copy_phase2(phase2_39_template, env)
    return env


def _status(env: PipelineEnv, code: int) -> dict[tuple[str, str, str], dict]:
    result = env.cli("status", "--phase", "2", "--models", MODEL, "--format", "json")
    assert result.exit_code == code, result.output
    return {(c["kind"], c["sender"], c["of"]): c for c in json.loads(result.output)["cells"]}


def _run(env: PipelineEnv, command: str, *extra: str) -> str:
    assert command.startswith("oabench ")
    result = env.cli(*command.split()[1:], *extra)
    return f"{result.exit_code}\n{result.output}"


def _priced(env: PipelineEnv, base_url: str) -> None:
    """A price snapshot that lists the model (a tiny price: the run ceilings below count reported costs)."""
    env.warehouse.write_partition(
        "model_pricing",
        pl.DataFrame(
            {
                "fetched_at": [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)],
                "base_url": [base_url],
                "model": [MODEL],
                "prompt_price_per_token": [1e-9],
                "completion_price_per_token": [1e-9],
            }
        ),
    )


def test_before_any_run_a_cell_is_missing_with_its_cost_and_command_and_running_while_locked(
    phase2_env: PipelineEnv,
) -> None:
    answers = ("answers", MODEL, "39")
    with ReplayServer(api_key=TEST_KEY) as server:
        use_replay_models(phase2_env, server.base_url, [MODEL])
        _priced(phase2_env, server.base_url)
        cells = _status(phase2_env, 1)
        assert list(cells) == [answers]  # no judge yet: no judgment cell
        cell = cells[answers]
        assert (cell["state"], cell["done"], cell["total"], cell["to_send"]) == (
            "missing",
            0,
            SUB_ITEMS,
            SUB_ITEMS,
        )
        assert cell["est_cost_usd"] > 0
        assert cell["command"] == f"oabench run --phase 2 --models {MODEL} --editions 39"
        with CellLock(answers_lock_path(phase2_env.warehouse.root, MODEL, "39")):
            assert _status(phase2_env, 1)[answers]["state"] == "running"
        table = phase2_env.cli("status", "--phase", "2", "--models", MODEL)
        assert table.exit_code == 1 and "2nd phase: 1 cell(s): 1 missing" in table.output, table.output
        assert f"oabench run --phase 2 --models {MODEL}" in table.output
        # Unnamed, a model with no 2nd-phase answer or log is not listed: the 2nd phase answers named models.
        assert "2nd phase: 0 cell(s)" in phase2_env.cli("status", "--phase", "2").output
        assert server.stats.total_requests == 0


@pytest.mark.slow  # six launched runs
def test_status_follows_answer_and_judgment_cells_through_failed_and_complete_runs(
    phase2_env: PipelineEnv, shared_oab: Path
) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    answers, judgments = ("answers", MODEL, "39"), ("judgments", MODEL, MODEL)
    with ReplayServer(replies=recorded_replies(data), api_key=TEST_KEY, conversation_keys=True) as server:
        use_replay_models(phase2_env, server.base_url, [MODEL])
        _priced(phase2_env, server.base_url)
        cell = _status(phase2_env, 1)[answers]
        stopped = _run(phase2_env, cell["command"], "--max-cost-usd", "0.0035", "--concurrency", "1")
        assert stopped.startswith("1\n"), stopped
        cell = _status(phase2_env, 1)[answers]
        assert cell["state"] == "failed" and "max_cost_usd" in cell["reason"]
        assert 0 < cell["to_send"] < SUB_ITEMS
        paid = SUB_ITEMS - cell["to_send"]  # kept in the log: never asked again (none of direito_civil's)

        # One area-exam answered (its 3 paid replies kept), then judged: stopped by the judge's ceiling
        # after 3 judgments, then completed.
        assert _run(phase2_env, cell["command"], "--areas", "direito_civil").startswith("0\n")
        cells = _status(phase2_env, 1)
        assert (cells[answers]["state"], cells[answers]["done"]) == ("missing", AREA_SUB_ITEMS)
        assert cells[answers]["to_send"] == SUB_ITEMS - AREA_SUB_ITEMS - paid
        judge = f"oabench judge --judge {MODEL} --models {MODEL}"
        assert _run(phase2_env, judge, "--max-cost-usd", "0.035", "--concurrency", "1").startswith("1\n")
        cell = _status(phase2_env, 1)[judgments]
        assert cell["state"] == "failed" and "max_cost_usd" in cell["reason"]
        assert (cell["done"], cell["total"]) == (0, AREA_SUB_ITEMS) and 0 < cell["to_send"] < AREA_SUB_ITEMS
        assert cell["est_cost_usd"] > 0 and cell["command"] == judge
        assert _run(phase2_env, cell["command"]).startswith("0\n")
        assert _status(phase2_env, 1)[judgments]["state"] == "complete"

        # Every answer in: the table says so, and the judge has the new answers to grade.
        assert _run(phase2_env, cells[answers]["command"]).startswith("0\n")
        table = phase2_env.cli("status", "--phase", "2")
        assert table.exit_code == 1, table.output
        assert "2nd phase: 2 cell(s): 1 complete, 1 missing" in table.output
        cells = _status(phase2_env, 1)
        assert (cells[answers]["state"], cells[answers]["done"], cells[answers]["to_send"]) == (
            "complete",
            SUB_ITEMS,
            0,
        )
        cell = cells[judgments]
        assert (cell["state"], cell["done"], cell["total"]) == ("missing", AREA_SUB_ITEMS, SUB_ITEMS)
        assert cell["to_send"] == SUB_ITEMS - AREA_SUB_ITEMS and cell["command"] == judge
