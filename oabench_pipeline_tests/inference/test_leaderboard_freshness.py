"""`leaderboard_is_current`: when `oabench run` may leave the analysis tables and the report as they are.

A real warehouse of empty partitions (the check reads file times and versions, not rows), every analysis
table and the report written after their inputs; then one change each, which must call for a rebuild.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.core.tables import ANALYSIS_TABLES, empty_frame
from oabench_pipeline.core.versions import ANALYSIS_VERSION
from oabench_pipeline.inference.freshness import LEADERBOARD_INPUTS, leaderboard_is_current
from oabench_pipeline.warehouse import UNPARTITIONED, Warehouse, views_refreshed_once

CELL, EDITION = "45|acme/model", "45"
PARTITIONED = {"scores": CELL, "inferences": CELL, "questions": EDITION, "answer_keys": EDITION}
BUILT_S_AGO = 60  # the last rebuild, and its inputs before it: any write now is newer


def _age(paths: list[Path], seconds: float) -> None:
    for path in paths:
        stamp = path.stat().st_mtime - seconds
        os.utime(path, (stamp, stamp))


@pytest.fixture
def built(tmp_path: Path) -> Warehouse:
    """Every input table with a partition, then every analysis table and the report built after them."""
    store = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    with views_refreshed_once():
        for table in LEADERBOARD_INPUTS:
            store.write_partition(table, empty_frame(table), PARTITIONED.get(table, UNPARTITIONED))
        inputs = [store.table_dir(t) for t in LEADERBOARD_INPUTS]
        _age([*inputs, *(p for d in inputs for p in d.glob("*.parquet"))], 2 * BUILT_S_AGO)
        for table in ANALYSIS_TABLES:
            store.write_partition(
                table, pl.DataFrame({"model_key": ["acme/model"]}), version=ANALYSIS_VERSION
            )
    report = store.root / "reports" / "leaderboard.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html></html>", encoding="utf-8")
    _age([*(store.partition_path(t) for t in ANALYSIS_TABLES), report], BUILT_S_AGO)
    return store


def _rewrite(table: str, key: str = UNPARTITIONED) -> Callable[[Warehouse], object]:
    return lambda store: store.write_partition(table, store.read(table, key), key)


CHANGES: dict[str, Callable[[Warehouse], object]] = {
    "a scores partition rewritten with the same rows": _rewrite("scores", CELL),
    "a scores partition set aside as damaged": lambda s: s.set_aside(s.partition_path("scores", CELL)),
    "a cell's answers rewritten": _rewrite("inferences", CELL),
    "the models table rewritten": _rewrite("models"),
    "a new price snapshot": _rewrite("model_pricing"),
    "an analysis table set aside as damaged": lambda s: s.set_aside(s.partition_path("leaderboard")),
    "an analysis table missing": lambda s: s.partition_path("item_analysis").unlink(),
    "the report missing": lambda s: (s.root / "reports" / "leaderboard.html").unlink(),
    "an analysis table from an older analysis": lambda s: s.write_partition(
        "suites", s.read("suites"), version="analysis-1"
    ),
}


def test_built_after_every_input_is_current(built: Warehouse) -> None:
    assert leaderboard_is_current(built)


@pytest.mark.parametrize("change", CHANGES)
def test_any_change_to_what_the_tables_read_or_to_the_tables_calls_for_a_rebuild(
    built: Warehouse, change: str
) -> None:
    CHANGES[change](built)
    assert not leaderboard_is_current(built)


def test_an_editions_registry_edited_since_calls_for_a_rebuild(built: Warehouse, tmp_path: Path) -> None:
    registry = tmp_path / "editions.toml"
    registry.write_text("", encoding="utf-8")
    assert not leaderboard_is_current(built, [registry])
    _age([registry], 2 * BUILT_S_AGO)
    assert leaderboard_is_current(built, [registry])
