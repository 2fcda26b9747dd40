"""`oabench run --phase 2 --dry-run` and `oabench judge --dry-run`: the calls and their cost, nothing sent."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from oabench_pipeline_tests import phase2_data
from oabench_pipeline_tests.inference.replay import TEST_KEY, use_replay_models
from oabench_pipeline_tests.phase2.ingested import copy_phase2, phase2_all_template_fixture
from oabench_pipeline_tests.pipeline_env import PipelineEnv, make_env
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

JUDGE = "o3-2025-04-16"
NEW_MODEL = "gpt-4o-2024-08-06"  # answered in OAB-Bench's snapshot, never judged by o3 there
# o3's list price per token (OpenAI, since June 2025): $2 per million prompt tokens, $8 per million completion.
O3_PRICE = (2e-6, 8e-6)


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


def imported_answers(env: PipelineEnv, data: Path, model: str) -> None:
    """The model's recorded answers in `phase2_answers`, as an import of OAB-Bench's folder stores them."""
    items = phase2_data.items(data)
    rows = [
        {
            "model_key": model,
            "edition": items[item_id].edition,
            "item_id": item_id,
            "area": items[item_id].area,
            "turn": turn,
            "run_id": "oab-bench:test",
            "answer": text,
            "source": "oab-bench",
        }
        for item_id, turns in phase2_data.answers(data, model).items()
        for turn, text in enumerate(turns, start=1)
    ]
    frame = pl.DataFrame(rows)
    for edition in sorted(set(frame["edition"])):
        env.warehouse.write_partition(
            "phase2_answers", frame.filter(pl.col("edition") == edition), f"{edition}|{model}"
        )


def test_dry_runs_print_calls_and_cost_and_send_nothing(phase2_env: PipelineEnv, shared_oab: Path) -> None:
    data = phase2_data.oab_bench_data(shared_oab)
    with ReplayServer(api_key=TEST_KEY) as server:
        use_replay_models(phase2_env, server.base_url, [JUDGE, NEW_MODEL])
        phase2_env.warehouse.write_partition(
            "model_pricing",
            pl.DataFrame(
                {
                    "fetched_at": [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)],
                    "base_url": [server.base_url],
                    "model": [JUDGE],
                    "prompt_price_per_token": [O3_PRICE[0]],
                    "completion_price_per_token": [O3_PRICE[1]],
                }
            ),
        )
        answering = phase2_env.cli(
            "run", "--phase", "2", "--models", JUDGE, "--max-completion-tokens", "16000", "--dry-run"
        )
        assert answering.exit_code == 0, answering.output
        assert "total: 189 call(s)" in answering.output  # 105 items, 84 of them with a sub-item B
        assert "at most $" in answering.output

        imported_answers(phase2_env, data, NEW_MODEL)
        judging = phase2_env.cli("judge", "--judge", JUDGE, "--models", NEW_MODEL, "--dry-run")
        assert judging.exit_code == 0, judging.output
        print(judging.output)
        line = next(line for line in judging.output.splitlines() if line.startswith(f"{JUDGE} judging"))
        assert line.startswith(f"{JUDGE} judging {NEW_MODEL}: 189 call(s) of 189")
        assert "20,000-token completion ceiling" in line
        cost = float(re.search(r"est\. prompt cost \$([0-9.]+)", line).group(1))  # type: ignore[union-attr]
        assert 0.5 < cost < 5.0
        assert server.stats.total_requests == 0


def test_phase2_needs_models_and_its_own_options(phase2_env: PipelineEnv) -> None:
    no_models = phase2_env.cli("run", "--phase", "2")
    assert no_models.exit_code == 2 and "--phase 2 needs --models" in no_models.output
    wrong_phase = phase2_env.cli("run", "--areas", "direito_civil", "--models", "x")
    assert wrong_phase.exit_code == 2 and "2nd-phase options" in wrong_phase.output


def test_nothing_answers_or_judges_the_2nd_phase_by_itself() -> None:
    """No automation condition on the assets that spend, and no sensor or schedule targets their jobs but
    the one that collects paid batches: a model added to the registry is answered and judged only when the
    user asks (`oabench run --phase 2`)."""
    from oabench_pipeline.definitions import build_definitions

    defs = build_definitions()
    graph = defs.resolve_asset_graph()
    for name in ("phase2_answers", "phase2_judgments"):
        assert graph.get(dg.AssetKey(name)).automation_condition is None
    # batch_results_sensor launches them only to collect the batches a user's `--batch` sent: its runs
    # carry `batch_collect_only` and submit nothing (test_phase2_batch.py checks its run request).
    targeted = {
        job.name
        for sensor in defs.sensors or []
        if sensor.has_jobs and sensor.name != "batch_results_sensor"
        for job in sensor.jobs
    }
    targeted |= {schedule.job_name for schedule in defs.schedules or []}
    assert not targeted & {"phase2_answers_cell", "phase2_judgments_cell"}
