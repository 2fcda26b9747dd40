"""Runs as replicates, through the real `oabench import` and `oabench leaderboard`: reruns stay beside the
study's run, aborted and errored runs are kept but never ranked, and `--as-of` picks the runs of a day."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.run_folders import (
    ERRORED_RUN,
    FLIPPED,
    GROK_ABORTED,
    GROK_RERUN,
    GROK_STUDY,
    SPLIT_FIRST,
    SPLIT_SECOND,
    build_run_folders,
)

# Slow: an import of every published run folder as replicates.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

GROK = "x-ai/grok-4.1-fast"
GROK_STUDY_SCORES = {43: 70, 44: 66, 45: 68}  # the study's Table 2 row, and its summary.json


@pytest.fixture(scope="module")
def replicated(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server, shared_oab: Path
):
    from oabench_pipeline_tests.pipeline_env import copy_ingested, make_env

    root = tmp_path_factory.mktemp("replicates")
    folders = build_run_folders(shared_oab / "published-runs", root / "runs")
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, mirror_server.base_url)
        copy_ingested(ingested_template, env.settings.warehouse_path.parent)
        result = env.cli("import", str(folders))
        assert result.exit_code == 0, result.output
        yield env


def _leaderboard_json(env: PipelineEnv, *args: str) -> list[dict]:
    result = env.cli("leaderboard", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _row(rows: list[dict], **where: object) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in where.items())]
    assert len(found) == 1, where
    return found[0]


def test_every_folder_is_a_run_and_none_is_merged(replicated: PipelineEnv) -> None:
    runs = replicated.warehouse.read("runs")
    grok = runs.filter(pl.col("model_key") == GROK).sort("started_at")
    assert grok["run_id"].to_list() == [GROK_STUDY, GROK_RERUN, GROK_ABORTED]
    assert grok["complete"].to_list() == [True, True, False]
    assert grok["replicate"].to_list() == [1, 2, None]
    assert grok["editions"].to_list() == [[43, 44, 45], [43, 44, 45], []]
    rows = replicated.warehouse.query(
        "select run_id, count(*) as n from inferences where model_key = ? group by run_id order by run_id",
        [GROK],
    )
    assert dict(rows.iter_rows()) == {GROK_STUDY: 240, GROK_RERUN: 240, GROK_ABORTED: 30}


def test_default_shows_the_newest_complete_run(replicated: PipelineEnv) -> None:
    by_edition = _leaderboard_json(replicated, "--by", "edition")
    for edition, score in GROK_STUDY_SCORES.items():
        row = _row(by_edition, model_key=GROK, edition=edition)
        assert row["run_id"] == GROK_RERUN  # the aborted later run is never canonical
        assert row["official_score"] == score - (FLIPPED if edition == 43 else 0)
    board = _leaderboard_json(replicated)
    grok = _row(board, model_key=GROK)
    assert (grok["official_score"], grok["replicates"], grok["replicate_spread"]) == (201, 2, "201–204")


def test_as_of_reproduces_the_study_day(replicated: PipelineEnv) -> None:
    by_edition = _leaderboard_json(replicated, "--by", "edition", "--as-of", "2026-03-03")
    for edition, score in GROK_STUDY_SCORES.items():
        row = _row(by_edition, model_key=GROK, edition=edition)
        assert (row["run_id"], row["official_score"]) == (GROK_STUDY, score)
    board = _leaderboard_json(replicated, "--as-of", "2026-03-03")
    grok = _row(board, model_key=GROK)
    assert (grok["official_score"], grok["replicates"], grok["replicate_spread"]) == (204, 1, None)
    # Before the study day no run had even started.
    before = replicated.cli("leaderboard", "--as-of", "2026-03-02")
    assert before.exit_code == 1 and "no run had started by the end of 2026-03-02" in before.output


def test_run_variance_shows_the_rerun_beside_the_study(replicated: PipelineEnv) -> None:
    variance = (
        replicated.warehouse.read("run_variance").filter(pl.col("model_key") == GROK).row(0, named=True)
    )
    assert (variance["runs"], variance["score_min"], variance["score_max"]) == (2, 201, 204)
    assert variance["score_mean"] == pytest.approx(202.5)
    assert variance["score_sd"] == pytest.approx((2 * 1.5**2) ** 0.5)
    assert variance["flip_rate"] == pytest.approx(FLIPPED / 238)
    single = replicated.warehouse.read("run_variance").filter(pl.col("model_key") == "deepseek/deepseek-v3.2")
    assert single.select("runs", "score_sd", "flip_rate").row(0) == (1, None, None)


def test_a_run_with_unretried_errors_and_no_summary_is_kept_unranked(replicated: PipelineEnv) -> None:
    board = _leaderboard_json(replicated)
    glm = _row(board, model_key="z-ai/glm-5")
    assert (glm["complete"], glm["rank"], glm["tie_group"], glm["rank_low"]) == (False, None, None, None)
    assert glm["missing_count"] == 0 and glm["invalid_count"] == 2
    pairs = replicated.warehouse.read("pairwise_comparison")
    assert "z-ai/glm-5" not in set(pairs["model_a"]) | set(pairs["model_b"])
    runs = replicated.warehouse.read("runs").filter(pl.col("run_id") == ERRORED_RUN)
    assert runs.select("source", "complete", "replicate").row(0) == ("imported", False, None)


def test_a_key_completed_by_two_folders_is_complete(replicated: PipelineEnv) -> None:
    by_edition = _leaderboard_json(replicated, "--by", "edition")
    assert [_row(by_edition, model_key="acme/split-model", edition=e)["run_id"] for e in (43, 44, 45)] == [
        SPLIT_SECOND,
        SPLIT_SECOND,
        SPLIT_FIRST,
    ]
    split = _row(_leaderboard_json(replicated), model_key="acme/split-model")
    haiku = _row(_leaderboard_json(replicated), model_key="anthropic/claude-haiku-4.5")
    assert split["complete"] is True and split["rank"] is not None
    assert split["official_score"] == haiku["official_score"]


def test_imported_cost_falls_back_to_the_summary_estimate(replicated: PipelineEnv) -> None:
    board = _leaderboard_json(replicated, "--as-of", "2026-03-03")
    deepseek = _row(board, model_key="deepseek/deepseek-v3.2")  # its records carry no reported cost
    assert deepseek["cost_usd"] is None
    assert (deepseek["cost_source"], deepseek["effective_cost_usd"]) == (
        "estimated",
        pytest.approx(0.0500808),
    )
    assert deepseek["pricing_fetched_at"].startswith("2026-03-03 17:17:05")
    grok = _row(board, model_key=GROK)
    assert (grok["cost_source"], grok["effective_cost_usd"]) == ("reported", pytest.approx(0.181221579))
    pareto = replicated.warehouse.read("pareto_frontier")
    assert pareto.filter(pl.col("model_key") == "deepseek/deepseek-v3.2")["cost_source"].item() == "estimated"


def test_status_judges_the_run_that_counts(replicated: PipelineEnv) -> None:
    # Grok's newest folder is an aborted run: the cells stay complete through the rerun before it.
    result = replicated.cli("status", "--models", f"{GROK},z-ai/glm-5", "--format", "json")
    cells = {(c["model_key"], c["edition"]): c for c in json.loads(result.output)["cells"]}
    for edition in ("43", "44", "45"):
        grok = cells[(GROK, edition)]
        assert (grok["state"], grok["errors"], grok["missing"], grok["to_send"]) == ("complete", 0, 0, 0)
    glm = cells[("z-ai/glm-5", "43")]  # not in the registry: history; its only run kept an error
    # An incomplete published run is missing, not failed: nothing of this pipeline failed (docs/ui.md).
    assert glm["state"] == "missing" and glm["errors"] == 1
    assert (
        glm["reason"]
        == "an incomplete imported run only (76 of 78 answered: kept, shown, not ranked); key not in the models registry (history)"
    )
