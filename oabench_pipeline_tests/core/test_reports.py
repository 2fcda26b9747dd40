"""Reports: every file written, PNGs with real content, Markdown/HTML naming every model key."""

from __future__ import annotations

import html
from pathlib import Path

import duckdb
import matplotlib.image as mpimg
import polars as pl
import pytest

from oabench_pipeline.core.leaderboard import build_leaderboard_tables
from oabench_pipeline.core.reports import leaderboard_markdown, write_reports
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, register

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    warehouse = make_synthetic_warehouse(n_models=8, n_editions=2, seed=5)  # last key: no cost data
    return build_leaderboard_tables(register(duckdb.connect(), warehouse))


def test_write_reports_files_and_content(tables: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    files = write_reports(tables, tmp_path / "out")
    for path in files.all_paths():
        assert path.is_file() and path.stat().st_size > 0, path
    assert set(files.csv) == set(tables) == set(files.parquet)
    assert not list((tmp_path / "out").glob(".*.tmp"))  # no temp file left behind
    for png in (files.cost_plot, files.area_plot):
        data = png.read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        assert len(data) > 20_000
        pixels = mpimg.imread(png)
        assert pixels.std() > 0.05  # not a blank, single-colour image
    keys = tables["leaderboard"]["model_key"].to_list()
    markdown = files.markdown.read_text(encoding="utf-8")
    page = files.html.read_text(encoding="utf-8")
    for key in keys:
        assert key in markdown
        assert html.escape(key) in page
    assert page.count("data:image/png;base64,") == 2 and "<style>" in page
    # Keys without cost data are named in the caption rather than breaking the plot.
    no_cost = tables["pareto_frontier"].filter(pl.col("cost_usd").is_null())["model_key"].to_list()
    assert no_cost and all(k in files.cost_plot_caption for k in no_cost)
    # Round trip: the Parquet equals the table, the nested column survives CSV as JSON.
    assert pl.read_parquet(files.parquet["leaderboard"]).equals(tables["leaderboard"])
    items_csv = pl.read_csv(files.csv["item_analysis"])
    assert items_csv["answer_distribution"][0].startswith("{")


def test_markdown_table_shape(tables: dict[str, pl.DataFrame]) -> None:
    markdown = leaderboard_markdown(tables)
    table_lines = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(table_lines) == 2 + tables["leaderboard"].height
    assert len({line.count(" | ") for line in table_lines[2:]}) == 1  # escaped cells keep the column count
    assert "(incomplete)" in markdown


def test_cost_plot_without_any_cost(tables: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    no_cost = dict(tables)
    no_cost["pareto_frontier"] = tables["pareto_frontier"].with_columns(
        cost_usd=pl.lit(None, pl.Float64), on_frontier=pl.lit(None, pl.Boolean)
    )
    files = write_reports(no_cost, tmp_path)
    assert files.cost_plot.read_bytes().startswith(PNG_SIGNATURE)
    assert "no cost data" in files.cost_plot_caption
