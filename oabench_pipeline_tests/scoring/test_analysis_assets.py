"""Each analysis table is an asset of its own: what the asset graph and each asset page show."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from dagster import AssetCheckKey, AssetKey
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.defs_state.base import set_defs_state_storage

from oabench_pipeline.cli.common import REPORT_ASSETS
from oabench_pipeline.core.editions import load_suites
from oabench_pipeline.core.tables import ANALYSIS_TABLES, table_columns
from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.saved_envs import SavedEnv, building_env, save_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer


def test_every_analysis_table_has_its_schema_description_checks_and_is_selectable_alone() -> None:
    # An instance closed by an earlier test can stay "the current definitions-state storage" (a context
    # variable, see engine/runs.py); loading definitions would then consult it. None: load with no state.
    with set_defs_state_storage(None):
        graph = build_definitions(Settings.from_env()).get_repository_def().asset_graph
    checks_by_asset: dict[str, set[str]] = {}
    for check in graph.asset_check_keys:
        checks_by_asset.setdefault(check.asset_key.to_user_string(), set()).add(check.name)
    for table in ANALYSIS_TABLES:
        node = graph.get(AssetKey(table))
        assert node.group_name == "analysis", table
        assert (node.description or "").startswith(table_description_head(table)), table
        schema = node.metadata["dagster/column_schema"]
        contract = table_columns(table)
        assert [c.name for c in schema.columns] == [c.name for c in contract], table
        assert [c.description for c in schema.columns] == [c.description for c in contract], table
        assert checks_by_asset.get(table), f"{table}: no asset check"
        assert graph.assets_def_for_key(AssetKey(table)).can_subset, table
        # Computed from the scored cells, not from each other: siblings in the lineage.
        assert {k.to_user_string() for k in node.parent_keys} == {
            "scores",
            "models",
            "model_pricing",
            "model_catalogue",
            "editions",
        }
    # The leaderboard keeps its checks; the report renders every table.
    assert {
        "edition_sums_equal_aggregate",
        "official_at_least_technical",
        "accuracies_within_0_1",
        "complete_keys_have_80_rows_per_edition",
        "pricing_snapshot_not_older_than_runs",
    } <= checks_by_asset["leaderboard"]
    report = graph.get(AssetKey("leaderboard_report"))
    assert {k.to_user_string() for k in report.parent_keys} == set(ANALYSIS_TABLES)
    # One step builds them all, under the op name `leaderboard` (its `as_of` run config is unchanged).
    assert {graph.assets_def_for_key(AssetKey(t)).node_def.name for t in ANALYSIS_TABLES} == {"leaderboard"}


def table_description_head(table: str) -> str:
    from oabench_pipeline.core.tables import ANALYSIS_DESCRIPTIONS

    return ANALYSIS_DESCRIPTIONS[table].split(":")[0]


BASELINES = ["baseline/random", "baseline/longest-choice"]
EDITIONS = ["43", "44", "45"]  # the default suite's (oabench-2026), every one ingested


@pytest.fixture(scope="module")
def two_baselines_run(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server: StaticFileServer
) -> SavedEnv:
    """Both baselines answered and scored on every edition of the default suite (six cells), the analysis
    tables and the report built: once per module, each test gets a copy.

    Built with the assets' own Dagster runs in this process (the cells' `inferences` and `scores`, then
    the tables and the report, as `oabench run` runs them), not through `oabench run`, whose code server and
    process per cell (tested by the inference tests) these tests of the analysis assets do not need."""
    with building_env(tmp_path_factory, "two-baselines", ingested_template, mirror_server.base_url) as env:
        env.monkeypatch.delenv("OABENCH_MODELS_FILE", raising=False)  # the packaged registry
        settings = env.settings
        with instance_for(settings) as instance:
            defs = build_definitions(settings)
            ensure_partitions(instance, "editions", EDITIONS)
            ensure_partitions(instance, "model_keys", BASELINES)
            for key in BASELINES:
                for edition in EDITIONS:
                    cell = cell_partition_key(key, int(edition))
                    outcome = run_assets(defs, instance, ["inferences", "scores"], partition_key=cell)
                    assert outcome.success, outcome.errors
            # The `models` table with the tables and the report, in one run (as `oabench import` builds
            # them): the cells' runs do not read it.
            built = run_assets(defs, instance, ["models", *REPORT_ASSETS])
            assert built.success, built.errors
        return save_env(env)


@pytest.fixture
def scored_env(two_baselines_run: SavedEnv, monkeypatch: pytest.MonkeyPatch) -> PipelineEnv:
    return two_baselines_run.restore(monkeypatch)


def test_a_failed_blocking_check_is_recorded_and_no_table_is_written(scored_env: PipelineEnv) -> None:
    """A cell whose answers and scores both hold a duplicated row (they agree, so the cell is not left out
    as unhealthy): the leaderboard's blocking check fails as an evaluation on its Checks tab, the step
    fails naming it, and every analysis table keeps its last good file."""
    store = scored_env.warehouse
    cell = str(cell_partition_key("baseline/random", 43))
    for table in ("inferences", "scores"):
        rows = store.read(table, cell)
        store.write_partition(table, pl.concat([rows, rows.head(1)]), cell)  # 81 rows for one run
    files = {table: store.partition_path(table) for table in ANALYSIS_TABLES}
    before = {table: path.stat().st_mtime_ns for table, path in files.items()}

    settings = scored_env.settings
    with instance_for(settings) as instance:
        outcome = run_assets(build_definitions(settings), instance, list(ANALYSIS_TABLES))
        check = AssetCheckKey(AssetKey("leaderboard"), "complete_keys_have_80_rows_per_edition")
        [latest] = instance.event_log_storage.get_asset_check_execution_history(check, limit=1)
        failed = instance.event_log_storage.get_asset_check_execution_history(
            AssetCheckKey(AssetKey("pairwise_comparison"), "p_values_valid"), limit=1
        )

    assert not outcome.success
    assert "complete_keys_have_80_rows_per_edition: baseline/random×43: 81" in "\n".join(outcome.errors)
    assert "nothing was written" in "\n".join(outcome.errors)
    assert latest.status == AssetCheckExecutionRecordStatus.FAILED
    assert failed[0].run_id == outcome.run_id  # every selected check's evaluation is recorded, too
    assert {table: path.stat().st_mtime_ns for table, path in files.items()} == before


def test_one_as_of_setting_serves_every_selected_table(scored_env: PipelineEnv) -> None:
    """`ops.leaderboard.config.as_of` (the op keeps its name) applies to whichever tables are selected."""
    store = scored_env.warehouse
    assert store.read("pairwise_comparison").height == 1 and store.read("runs").height == 2
    board_before = store.partition_path("leaderboard").stat().st_mtime_ns
    settings = scored_env.settings
    as_of = {"ops": {"leaderboard": {"config": {"as_of": "2000-01-01"}}}}  # before any run completed
    with instance_for(settings) as instance:
        outcome = run_assets(
            build_definitions(settings), instance, ["pairwise_comparison", "runs"], run_config=as_of
        )
        materialized = {
            key.to_user_string(): instance.get_latest_materialization_event(key)
            for key in (AssetKey("pairwise_comparison"), AssetKey("runs"))
        }
    assert outcome.success, outcome.errors
    assert store.read("pairwise_comparison").is_empty() and store.read("runs").is_empty()
    for name, event in materialized.items():
        assert event is not None and event.run_id == outcome.run_id, name
        assert event.asset_materialization.metadata["as_of"].value == "2000-01-01", name
    assert store.partition_path("leaderboard").stat().st_mtime_ns == board_before  # not selected


def test_the_report_of_another_suite_goes_beside_the_default_one(scored_env: PipelineEnv) -> None:
    """`leaderboard_report`'s `suite` setting: that suite's report under reports/suites/<name>/, headed by
    it; the default report (what `oabench run` keeps current) is left alone; an unknown suite fails, naming it."""
    reports = scored_env.settings.warehouse_path.parent / "reports"
    default = (reports / "leaderboard.md").read_text(encoding="utf-8")
    assert "· Suite oabench-2026: editions 43-45, 240 questions" in default.splitlines()[0]
    settings = scored_env.settings
    config = {"ops": {"leaderboard_report": {"config": {"suite": "all"}}}}
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        outcome = run_assets(defs, instance, ["leaderboard_report"], run_config=config)
        unknown = {"ops": {"leaderboard_report": {"config": {"suite": "nope"}}}}
        failed = run_assets(defs, instance, ["leaderboard_report"], run_config=unknown)
    assert outcome.success, outcome.errors
    other = (reports / "suites" / "all" / "leaderboard.md").read_text(encoding="utf-8")
    assert "· Suite all: editions 43-45, 240 questions" in other.splitlines()[0]
    assert (reports / "leaderboard.md").read_text(encoding="utf-8") == default
    assert not failed.success
    known = ", ".join(load_suites())  # the packaged registry's suites, then all
    assert f"suite 'nope' is not in the analysis tables (they have {known})" in "\n".join(failed.errors)


def test_cells_that_are_not_healthy_are_left_out_and_the_others_still_build_every_table(
    scored_env: PipelineEnv,
) -> None:
    """One cell whose scores no longer cover its answers (a row short) and one whose scores file is
    unreadable: the step leaves exactly those two cells out of every table, says why in the run's log,
    and builds from the four healthy ones; each key then misses an edition, so it is shown unranked."""
    store = scored_env.warehouse
    short = str(cell_partition_key("baseline/random", 43))
    store.write_partition("scores", store.read("scores", short).head(79), short)
    damaged = store.partition_path("scores", str(cell_partition_key("baseline/longest-choice", 45)))
    damaged.write_bytes(damaged.read_bytes()[:200])  # a truncated file: its footer is gone

    settings = scored_env.settings
    with instance_for(settings) as instance:
        outcome = run_assets(build_definitions(settings), instance, list(ANALYSIS_TABLES))
        warnings = [e.user_message for e in instance.all_logs(outcome.run_id) if e.level >= 30]

    assert outcome.success, outcome.errors
    by_edition = store.read("leaderboard_by_edition")
    assert sorted(by_edition.select("model_key", "edition").iter_rows()) == [
        ("baseline/longest-choice", 43), ("baseline/longest-choice", 44),
        ("baseline/random", 44), ("baseline/random", 45),
    ]  # fmt: skip
    board = store.read("leaderboard")
    assert board["complete"].to_list() == [False, False] and board["rank"].null_count() == 2
    assert any(
        "cell 43|baseline/random: left out of the analysis tables: its scores do not match its answers "
        "(run baseline:baseline/random: 80 answer rows, 0 with an error; 79 scored" in w
        for w in warnings
    ), warnings
    assert any("cell 45|baseline/longest-choice: left out" in w and str(damaged) in w for w in warnings)


def test_with_no_healthy_cell_the_step_fails_and_every_table_keeps_its_rows(scored_env: PipelineEnv) -> None:
    """Every `inferences` file unreadable: nothing is healthy, so nothing is written (not empty tables)."""
    store = scored_env.warehouse
    for path in store.table_dir("inferences").glob("*.parquet"):
        path.write_bytes(b"not parquet")
    files = {table: store.partition_path(table) for table in ANALYSIS_TABLES}
    before = {table: path.stat().st_mtime_ns for table, path in files.items()}
    settings = scored_env.settings
    with instance_for(settings) as instance:
        outcome = run_assets(build_definitions(settings), instance, list(ANALYSIS_TABLES))
    assert not outcome.success
    [message] = outcome.errors
    assert message.startswith(
        "no healthy scored cell to build the analysis tables from (6 cell(s) left out, the first: cell "
        "43|baseline/longest-choice: left out of the analysis tables: table inferences: "
    )
    assert message.endswith("); they keep their previous rows")
    assert {table: path.stat().st_mtime_ns for table, path in files.items()} == before
