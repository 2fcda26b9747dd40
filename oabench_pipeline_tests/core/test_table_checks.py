"""The analysis tables' own checks: silent on real tables, and each one names the rows that break it."""

from __future__ import annotations

import duckdb
import polars as pl

from oabench_pipeline.core.analysis.table_checks import TABLE_CHECKS, table_problems
from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, register


def test_tables_built_from_synthetic_results_pass_every_check() -> None:
    warehouse = make_synthetic_warehouse(n_models=8, n_editions=3, seed=5)
    tables = build_leaderboard_tables(register(duckdb.connect(), warehouse))
    assert set(tables) == set(ANALYSIS_TABLES)
    # The leaderboard's checks (and their per-suite run) live with the asset, in scoring/analysis.py.
    assert set(TABLE_CHECKS) == set(ANALYSIS_TABLES) - {"leaderboard", "leaderboard_by_suite"}
    for table in TABLE_CHECKS:
        assert not tables[table].is_empty(), table  # the checks really looked at rows
        problems = table_problems(table, tables[table])
        assert set(problems) == set(TABLE_CHECKS[table])
        assert {name: found for name, found in problems.items() if found} == {}, table


def test_a_duplicated_edition_row_and_a_score_over_its_total_are_named() -> None:
    warehouse = make_synthetic_warehouse(n_models=3, n_editions=2, seed=1)
    by_edition = build_leaderboard_tables(register(duckdb.connect(), warehouse))["leaderboard_by_edition"]
    first = by_edition.head(1)
    key, edition = first["model_key"].item(), first["edition"].item()
    broken = pl.concat([by_edition, first.with_columns(technical_score=pl.col("technical_total") + 1)])

    problems = table_problems("leaderboard_by_edition", broken)

    assert problems["one_row_per_key_and_edition"] == [f"{key} × {edition}: 2 rows"]
    assert problems["scores_within_totals"] == [
        f"{key} × {edition}: technical_score outside 0..technical_total",
        f"{key} × {edition}: official_score below technical_score",
    ]


def test_p_values_out_of_range_are_named_and_undefined_ones_are_not_judged() -> None:
    frame = pl.DataFrame(
        {
            "model_a": ["a", "a", "b"],
            "model_b": ["b", "c", "c"],
            "p_value": [0.2, 0.5, float("nan")],
            "p_holm": [0.1, 1.2, None],
        }
    )
    problems = table_problems("pairwise_comparison", frame)
    assert problems["one_row_per_pair"] == []
    assert problems["p_values_valid"] == ["a × c: p_holm 1.2", "a × b: p_holm below p_value"]

    swapped = pl.concat(
        [
            frame,
            frame.head(1).select(model_a="model_b", model_b="model_a", p_value="p_value", p_holm="p_holm"),
        ]
    )
    assert table_problems("pairwise_comparison", swapped)["one_row_per_pair"] == ["a × b: 2 rows"]


def test_a_frontier_key_without_a_cost_is_named() -> None:
    frame = pl.DataFrame(
        {
            "model_key": ["cheap", "free?", "partial"],
            "complete": [True, True, False],
            "cost_usd": [0.1, None, 0.05],
            "on_frontier": [True, True, None],
        }
    )
    assert table_problems("pareto_frontier", frame) == {
        "one_row_per_key": [],
        "frontier_keys_complete_and_priced": ["free?: on the frontier while incomplete or without a cost"],
    }


def test_an_ability_outside_its_interval_and_weights_over_one_are_named() -> None:
    warehouse = make_synthetic_warehouse(n_models=4, n_editions=2, seed=3)
    tables = build_leaderboard_tables(register(duckdb.connect(), warehouse))
    abilities = tables["item_abilities"]
    key = abilities["model_key"][0]
    broken = abilities.with_columns(
        ability_ci_low=pl.when(pl.col("model_key") == key)
        .then(pl.col("ability") + 1)
        .otherwise("ability_ci_low")
    )
    assert table_problems("item_abilities", broken) == {
        "one_row_per_key_with_a_valid_interval": [f"{key}: ability outside [ability_ci_low, ability_ci_high]"]
    }
    audit = tables["key_audit"]
    qid = audit["qid"][0]
    heavy = audit.with_columns(weight_a=pl.when(pl.col("qid") == qid).then(0.9).otherwise("weight_a"))
    problems = table_problems("key_audit", heavy)["one_row_per_qid_with_weights_as_shares"]
    assert f"{qid}: weights sum above 1" in problems
