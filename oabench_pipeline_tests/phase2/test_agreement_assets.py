"""The `phase2_judge_agreement` and `candidate_pass_rates` assets on a real warehouse (Parquet + DuckDB)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from dagster import materialize

from oabench_pipeline.core.phase2.agreement import OVERALL
from oabench_pipeline.phase2.agreement import phase2_judge_agreement
from oabench_pipeline.phase2.pass_rates import candidate_pass_rates
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.warehouse import Warehouse
from oabench_pipeline_tests.core.judge_simulation import simulate


def _resources(tmp_path: Path) -> tuple[Warehouse, dict[str, object]]:
    db_path = tmp_path / "warehouse" / "oabench.duckdb"
    return Warehouse(db_path), {
        "warehouse": WarehouseResource(path=str(db_path), raw_dir=str(tmp_path / "raw"))
    }


def test_agreement_of_two_judges_from_phase2_judgments(tmp_path: Path) -> None:
    store, resources = _resources(tmp_path)
    sim = simulate(3)
    judgments = sim.judgments.with_columns(
        max_points=pl.lit(10.0), valid=pl.lit(True), judgment=pl.lit("[[x]]")
    )
    for (judge, model), rows in judgments.group_by("judge_key", "model_key"):
        store.write_partition("phase2_judgments", rows, f"{judge}|{model}")
    result = materialize([phase2_judge_agreement], resources=resources)
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    table = store.read("phase2_judge_agreement")
    overall = table.filter(pl.col("area") == OVERALL).row(0, named=True)
    assert overall["answers"] == 180
    assert overall["icc_ci_low"] <= sim.planted_icc <= overall["icc_ci_high"]
    assert store.query("select count(*) as n from phase2_judge_agreement")["n"].item() == 4


def test_agreement_without_two_judges_is_an_empty_table(tmp_path: Path) -> None:
    store, resources = _resources(tmp_path)
    assert materialize([phase2_judge_agreement], resources=resources).success
    assert store.read("phase2_judge_agreement").is_empty()


def test_candidate_pass_rates_from_the_registry(tmp_path: Path) -> None:
    store, resources = _resources(tmp_path)
    result = materialize([candidate_pass_rates], resources=resources)
    assert result.success
    table = store.read("candidate_pass_rates")
    assert 9 in table["edition"].to_list()
    assert table["source_url"].null_count() == 0
