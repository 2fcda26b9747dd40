"""`--max-cost-usd X` over several 2nd-phase cells (`cli/phase2.with_run_ceiling`): each cell's run gets what
its log already paid plus its share of X by estimated prompt cost (evenly when a model is unpriced), and an
estimate over X is refused before anything is sent."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
import polars as pl
import pytest

from oabench_pipeline.cli.phase2 import Cell, with_run_ceiling
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.types import ChatRequest
from oabench_pipeline.warehouse import Warehouse

PRICED, UNPRICED = "acme/priced", "acme/unpriced"


def _cell(model_id: str, prompt_chars: int, requests: int, spent: float) -> Cell:
    body = {"model": model_id, "messages": [{"role": "user", "content": "x" * prompt_chars}]}
    return Cell(
        label=f"{model_id} cell",
        sender=ModelConfig(id=model_id, base_url="http://127.0.0.1:9/v1", api_key_env="TEST_KEY"),
        job="phase2_answers_cell",
        asset="phase2_answers",
        partition_key="39|k",
        config={},
        pending=[ChatRequest(f"q{n}", body, f"h{n}") for n in range(requests)],
        total=requests,
        spent_usd=spent,
    )


@pytest.fixture
def store(tmp_path: Path) -> Warehouse:
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    warehouse.write_partition(
        "model_pricing",
        pl.DataFrame(
            {
                "fetched_at": [dt.datetime(2026, 12, 1, tzinfo=dt.UTC)],
                "base_url": ["http://127.0.0.1:9/v1"],
                "model": [PRICED],
                "prompt_price_per_token": [1e-6],
                "completion_price_per_token": [4e-6],
            }
        ),
    )
    return warehouse


def test_the_budget_is_split_by_estimate_on_top_of_what_each_log_paid(store: Warehouse) -> None:
    small, large = _cell(PRICED, 3_500, 1, 0.25), _cell(PRICED, 3_500, 3, 0.0)
    split = with_run_ceiling(store, [small, large], 1.0)
    assert [c.config["max_cost_usd"] for c in split] == pytest.approx([0.25 + 0.25, 0.75])
    assert with_run_ceiling(store, [small, large], None) == [small, large]


def test_an_unpriced_cell_splits_the_budget_evenly(store: Warehouse) -> None:
    split = with_run_ceiling(store, [_cell(PRICED, 3_500, 3, 0.0), _cell(UNPRICED, 3_500, 1, 0.1)], 1.0)
    assert [c.config["max_cost_usd"] for c in split] == pytest.approx([0.5, 0.6])


def test_an_estimate_over_the_budget_is_refused(store: Warehouse) -> None:
    with pytest.raises(click.UsageError, match=r"over --max-cost-usd \$0.001; nothing was sent"):
        with_run_ceiling(store, [_cell(PRICED, 35_000, 3, 0.0)], 0.001)
