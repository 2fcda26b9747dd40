"""`oabench leaderboard --by edition`: each edition's candidates' pass rate beside the models' scores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from oabench_pipeline.cli import main
from oabench_pipeline.core.pass_rates import load_pass_rates
from oabench_pipeline_tests.core.synthetic_results import make_synthetic_warehouse, write_scored_warehouse


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Editions 8 and 9 (the registry has both candidates' rates) and 11 (it has none)."""
    synthetic = make_synthetic_warehouse(n_models=2, n_editions=4, first_edition=8, seed=2)
    db_path = tmp_path_factory.mktemp("candidates") / "warehouse" / "oabench.duckdb"
    write_scored_warehouse(synthetic.tables, db_path)
    return db_path


def test_by_edition_puts_the_candidates_rate_beside_the_models(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(warehouse))
    result = CliRunner().invoke(
        main, ["leaderboard", "--by", "edition", "--suite", "all", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    rates = dict(load_pass_rates().select("edition", "pass_rate").iter_rows())
    assert {row["edition"] for row in rows} == {8, 9, 10, 11}
    for row in rows:
        assert row["candidates_pass_rate"] == rates.get(row["edition"])
    assert {row["candidates_pass_rate"] for row in rows if row["edition"] == 9} == {0.1667}
    assert {row["candidates_rate_of"] for row in rows if row["edition"] == 11} == {None}

    table = CliRunner().invoke(main, ["leaderboard", "--by", "edition", "--suite", "all"])
    assert table.exit_code == 0, table.output
    assert "candidates" in table.stdout.splitlines()[0]
    assert "not a distribution of scores" in table.stdout


def test_the_report_shows_each_editions_candidates_rate(warehouse: Path) -> None:
    from oabench_pipeline.core.reports import leaderboard_markdown
    from oabench_pipeline.warehouse import Warehouse

    store = Warehouse(warehouse)
    tables = {name: store.read(name) for name in ("leaderboard", "leaderboard_by_edition")}
    text = leaderboard_markdown(tables)
    candidates = next(line for line in text.splitlines() if line.startswith("| Candidates"))
    assert "44.8% of present" in candidates and "16.7% of present" in candidates  # 8th and 9th
    assert "not a distribution of scores" in text
