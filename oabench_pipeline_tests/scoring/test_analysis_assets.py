"""Each analysis table is an asset of its own: what the asset graph and each asset page show."""

from __future__ import annotations

from dagster import AssetKey

from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.settings import Settings
from oabench_pipeline.tables import ANALYSIS_TABLES, table_columns


def test_every_analysis_table_has_its_schema_description_checks_and_is_selectable_alone() -> None:
    graph = build_definitions(Settings.from_env()).get_repository_def().asset_graph
    checks_by_asset: dict[str, set[str]] = {}
    for check in graph.asset_check_keys:
        checks_by_asset.setdefault(check.asset_key.to_user_string(), set()).add(check.name)
    for table in ANALYSIS_TABLES:
        node = graph.get(AssetKey(table))
        assert node.group_name == "scoring", table
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
    from oabench_pipeline.tables import ANALYSIS_DESCRIPTIONS

    return ANALYSIS_DESCRIPTIONS[table].split(":")[0]
