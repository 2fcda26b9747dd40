"""What the terminal shows: tables that fit, one rendering for table and markdown, full precision for scripts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from rich.console import Console

from oabench_pipeline.cli import main
from oabench_pipeline.cli.output import (
    ProgressBar,
    format_table,
    leaderboard_summary,
    render_cell,
    wrap_words,
)
from oabench_pipeline.core.tables import conform
from oabench_pipeline.engine.status import CellStatus, StatusReport
from oabench_pipeline.inference.progress import CellProgress, publish
from oabench_pipeline.warehouse import Warehouse

SAMPLE = pl.DataFrame(
    {
        "model_key": ["a/x", "b/y"],
        "complete": [True, False],
        "p50_latency_ms": [3223.749999999999, None],
        "cost_usd": [0.000123456, 12.5],
    }
)


def test_table_and_markdown_render_values_alike() -> None:
    assert [render_cell(v) for v in (True, False, None, 3223.749999999999, 0.000123456, 0.0, 7)] == [
        "yes", "no", "—", "3223.75", "0.000123", "0", "7",
    ]  # fmt: skip
    table = format_table(SAMPLE, "table").splitlines()
    markdown = format_table(SAMPLE, "markdown").splitlines()
    assert markdown[2] == "| a/x | yes | 3223.75 | 0.000123 |"
    assert markdown[3] == "| b/y | no | — | 12.5 |"
    for table_line, markdown_line in zip(table[2:], markdown[2:], strict=True):
        assert table_line.split() == markdown_line.strip("| ").split(" | ")


def test_csv_and_json_keep_every_significant_digit_but_not_float_noise() -> None:
    records = json.loads(format_table(SAMPLE, "json"))
    assert records[0]["p50_latency_ms"] == 3223.75 and records[1]["p50_latency_ms"] is None
    assert records[0]["cost_usd"] == 0.000123456 and records[0]["complete"] is True
    csv_text = format_table(SAMPLE, "csv")
    assert "3223.75," in csv_text and "3223.749999" not in csv_text and "0.000123456" in csv_text
    noisy = pl.DataFrame({"cost": [61481.54999999999, 1e-20 / 3, 0.1 + 0.2]})
    assert json.loads(format_table(noisy, "json")) == [
        {"cost": 61481.55},
        {"cost": 3.33333333333333e-21},
        {"cost": 0.3},
    ]


def test_csv_of_a_table_with_lists_and_structs() -> None:
    """`suites.editions`, `runs.editions`, `item_analysis.answer_distribution`: CSV has no nested types."""
    frame = pl.DataFrame({"suite": ["all"], "editions": [[1, 2, 43]], "counts": [{"A": 1, "B": 0}]})
    assert format_table(frame, "csv") == 'suite,editions,counts\nall,"1,2,43","{""A"":1,""B"":0}"\n'


def test_long_reasons_wrap_at_spaces_and_file_names_stay_whole() -> None:
    name = "warehouse/responses/openai/gpt-5.2:reasoning-medium/45.jsonl"
    lines = wrap_words(f"log {name} is newer than the partition written at 12:00", 30)
    assert name in lines and all(len(line) <= 30 for line in lines if line != name)
    frame = pl.DataFrame({"state": ["stale"], "reason": [f"log {name} is newer than the partition"]})
    rendered = format_table(frame, "table", wrap={"reason": 30})
    assert name in rendered and "..." not in rendered and len(rendered.splitlines()) > 3


def leaderboard_rows() -> pl.DataFrame:
    row = {
        "rank": 1,
        "tie_group": 1,
        "model_key": "openai/gpt-5.2:reasoning-medium-with-a-long-suffix",
        "official_score": 204,
        "official_total": 240,
        "official_accuracy": 0.85,
        "accuracy_ci_low": 0.8042,
        "accuracy_ci_high": 0.8917,
        "editions_passed": 3,
        "editions_total": 3,
        "cost_usd": 1234.5678,
        "effective_cost_usd": 1234.5678,
        "cost_source": "reported",
        "p50_latency_ms": 123456.5,
        "complete": True,
    }
    partial = {
        **row,
        "rank": None,
        "model_key": "openai/gpt-5-mini",
        "complete": False,
        "cost_usd": None,
        "effective_cost_usd": 0.0092,
        "cost_source": "estimated",
    }
    return conform("leaderboard", pl.DataFrame([row, partial]))


def test_default_leaderboard_fits_120_columns() -> None:
    covered = {"openai/gpt-5.2:reasoning-medium-with-a-long-suffix": [43, 44, 45], "openai/gpt-5-mini": [45]}
    frame, note = leaderboard_summary(leaderboard_rows(), covered)
    lines = format_table(frame, "table").splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[0].split() == ["rank", "model", "score", "accuracy", "[95%", "CI]", "passed", "cost", "$", "p50", "ms"]  # fmt: skip
    assert "0.850 [0.804–0.892]" in lines[2] and "204/240" in lines[2] and "3/3" in lines[2]
    assert lines[3].split()[:2] == ["—", "openai/gpt-5-mini"] and note and note.startswith("* incomplete")
    assert "3/1 of 3" in lines[3]  # passed of the editions it ran, of those required
    # The effective cost in every row: an estimate (no reported cost) is marked, not shown as `—`.
    assert "1234.5678 " in lines[2] and "0.0092~" in lines[3]
    assert note.splitlines()[1].startswith("~ after a cost: estimated")


def test_status_says_unknown_cost_instead_of_zero() -> None:
    cells = [
        CellStatus("45", "openai/gpt-5-mini", "missing", 0, 0, 80, 80, None, "never run"),
        CellStatus("45", "baseline/random", "missing", 0, 0, 80, 0, 0.0, "never run"),
    ]
    report = StatusReport(cells, unpriced=["openai/gpt-5-mini"])
    assert report.display_frame()["est_cost_usd"].to_list() == ["unknown (no price snapshot)", "$0.0000"]
    assert report.summary().endswith(
        "est. prompt cost to complete unknown (no price snapshot): `dg launch --assets "
        "model_catalogue,model_pricing` (from the repository root) takes one"
    )
    assert "$0.0000" not in report.summary()
    # JSON: a total with an unknown part is null, not the known parts ($0 here) read as the whole.
    assert (report.as_json()["est_cost_usd"], report.as_json()["est_cost_known_usd"]) == (None, 0.0)


@pytest.fixture
def small_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    warehouse = Warehouse(tmp_path / "warehouse" / "oabench.duckdb")
    warehouse.write_partition("leaderboard", leaderboard_rows())
    return warehouse


def test_sql_queries_the_warehouse(small_warehouse: Warehouse) -> None:
    query = "select model_key, complete, p50_latency_ms from leaderboard order by rank nulls last"
    result = CliRunner().invoke(main, ["sql", query, "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"model_key": "openai/gpt-5.2:reasoning-medium-with-a-long-suffix", "complete": True, "p50_latency_ms": 123456.5},
        {"model_key": "openai/gpt-5-mini", "complete": False, "p50_latency_ms": 123456.5},
    ]  # fmt: skip
    table = CliRunner().invoke(main, ["sql", "select count(*) as models from leaderboard"])
    assert table.output.splitlines() == ["models", "------", "     2"]


def test_sql_is_read_only_and_errors_are_one_line(small_warehouse: Warehouse, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    refused = CliRunner().invoke(main, ["sql", f"copy (select * from leaderboard) to '{target}'"])
    assert refused.exit_code == 1 and not target.exists()
    assert refused.output.strip() == (
        "Error: query failed: read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not COPY; "
        f"anything else: the duckdb command line, `duckdb {small_warehouse.db_path}` (docs/sql.md)"
    )
    missing = CliRunner().invoke(main, ["sql", "select * from no_such_table"])
    assert missing.exit_code == 1 and len(missing.output.strip().splitlines()) == 1
    assert "no_such_table does not exist" in missing.output


def test_sql_is_sandboxed_by_duckdb_and_refuses_every_statement_that_writes(
    small_warehouse: Warehouse, tmp_path: Path
) -> None:
    """DuckDB's own sandbox (files only under the warehouse folder, then locked) refuses reading or
    writing anything outside; DuckDB's parser classifies each statement, so a COPY inside the warehouse,
    an EXPLAIN ANALYZE of one (which executes it) and every other statement that is not a query are
    refused before they run. Every error is one line; queries over the views still work."""
    table_file = small_warehouse.partition_path("leaderboard")
    before = table_file.read_bytes()
    outside = tmp_path / "outside.csv"

    def sql(query: str) -> tuple[int, str]:
        result = CliRunner().invoke(main, ["sql", query])
        assert len(result.output.strip().splitlines()) == 1 or result.exit_code == 0, result.output
        return result.exit_code, result.output.strip()

    for query in (
        "select * from read_csv('/etc/passwd')",
        "select * from read_text('/etc/hostname')",
        "select * from glob('/root/*')",
        f"select * from read_parquet('{small_warehouse.root}/../outside.parquet')",
    ):
        code, output = sql(query)
        assert code == 1 and output.startswith("Error: query failed: Permission Error: Cannot access"), query
    writes = {
        f"copy (select 42) to '{outside}'": "COPY",
        f"copy (select 42) to '{small_warehouse.root}/inside.csv'": "COPY",
        "explain analyze copy (select 42) to '../outside.csv'": "EXPLAIN of COPY",
        f"/* a comment */ EXPLAIN  ANALYZE copy (select * replace (80 as official_score) from leaderboard) "
        f"to '{table_file}' (format parquet)": "EXPLAIN of COPY",
        "explain analyze insert into leaderboard select * from leaderboard": "EXPLAIN of INSERT",
        f"export database '{small_warehouse.root}/dump'": "EXPORT",
        f"attach '{small_warehouse.root}/x.db'": "ATTACH",
        "install httpfs": "LOAD",
        "load httpfs": "LOAD",
        "set enable_external_access = true": "SET",
        "set allowed_directories = ['/']": "SET",
        "set lock_configuration = false": "SET",
        "reset enable_external_access": "SET",
        "reset allowed_directories": "SET",
        "pragma version": "PRAGMA",
        "checkpoint": "CALL",
        "create table t as select 1": "CREATE",
    }
    for query, kind in writes.items():
        code, output = sql(query)
        assert code == 1, query
        assert output.startswith(
            f"Error: query failed: read-only: only SELECT/SHOW/DESCRIBE/EXPLAIN queries run here, not {kind}; "
            "anything else: the duckdb command line"
        ), (query, output)
    two = f"select 1; copy (select 42) to '{small_warehouse.root}/inside.csv'"
    assert sql(two) == (1, "Error: query failed: one statement at a time, got 2")
    assert table_file.read_bytes() == before and not outside.exists()
    assert sorted(p.name for p in small_warehouse.root.iterdir()) == [
        "oabench.duckdb",
        "oabench.duckdb.lock",
        "tables",
    ]

    assert sql("select count(*) as n from read_parquet('" + str(table_file) + "')")[1].endswith("2")
    assert sql("explain analyze select count(*) from leaderboard")[0] == 0
    assert sql("summarize leaderboard")[0] == 0
    assert sql("select current_setting('lock_configuration') as locked")[1].endswith("yes")


def _progress_console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=150, color_system=None), out


def test_progress_without_a_terminal_prints_plain_lines_per_cell_and_a_total() -> None:
    console, out = _progress_console(terminal=False)
    with ProgressBar(console) as bar:
        bar.start_cell("acme/a × 43")
        bar.start_cell("acme/b × 43")
        publish(
            CellProgress(cell="acme/a × 43", total=78, already_done=8, answered=68, errors=2, cost_usd=0.25)
        )
        publish(
            CellProgress(cell="acme/b × 43", total=78, already_done=0, answered=10, errors=0, cost_usd=0.5)
        )
        bar.finish_cell("acme/a × 43", success=True)
        bar.finish_cell("acme/b × 43", success=False)
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue(), "nothing is redrawn when the output is not a terminal"
    # An error is no answer (the next run asks it again): 8 kept + 68 received of 78, 2 errors; the cost
    # is this run's only, and the line says so, and how many answers earlier runs left.
    assert lines[0].startswith(
        "acme/a × 43: 76/78 answered (8 kept from earlier runs), 2 errors, $0.2500 this run ["
    )
    assert lines[1].startswith("acme/b × 43: 10/78 answered, 0 errors, $0.5000 this run FAILED [")
    assert lines[-1] == (
        "total: 86/156 answered (8 kept from earlier runs), 2 errors, $0.7500 this run; "
        "0 cell(s) in flight, 2 done"
    )


def test_progress_of_cells_with_no_model_call_says_what_they_did_not_0_of_0() -> None:
    baselines = ["baseline/random × 43", "baseline/random × 44", "baseline/longest-choice × 43"]
    console, out = _progress_console(terminal=False)
    with ProgressBar(console) as bar:
        for cell in baselines:
            bar.start_cell(cell)
            bar.finish_cell(cell, success=True, quiet_note="answered offline (baseline), scored")
        bar.start_cell("baseline/random × 45")
        bar.finish_cell("baseline/random × 45", success=True, quiet_note="answers up to date, re-scored")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("baseline/random × 43: answered offline (baseline), scored [")
    assert lines[-1] == (
        "total: 3 cell(s): answered offline (baseline), scored; 1 cell(s): answers up to date, re-scored; "
        "0 cell(s) in flight, 4 done"
    )

    console, out = _progress_console(terminal=False)  # a mix: the model cells' counts, then the others
    with ProgressBar(console) as bar:
        bar.start_cell("acme/a × 43")
        publish(CellProgress(cell="acme/a × 43", total=78, already_done=0, answered=78, cost_usd=0.5))
        bar.finish_cell("acme/a × 43", success=True)
        bar.start_cell(baselines[0])
        bar.finish_cell(baselines[0], success=True, quiet_note="answered offline (baseline), scored")
        bar.start_cell(baselines[1])
        bar.finish_cell(baselines[1], success=False)
    lines = out.getvalue().splitlines()
    assert lines[-2].startswith("baseline/random × 44: failed before any model call FAILED [")
    assert lines[-1] == (
        "total: 78/78 answered, 0 errors, $0.5000 this run; 1 cell(s): answered offline (baseline), scored; "
        "1 cell(s): failed before any model call; 0 cell(s) in flight, 3 done"
    )


def test_progress_on_a_terminal_draws_a_line_per_cell_in_flight_and_the_total() -> None:
    console, out = _progress_console(terminal=True)
    with ProgressBar(console) as bar:
        for cell in ("acme/a × 43", "acme/a × 44"):
            bar.start_cell(cell)
            publish(CellProgress(cell=cell, total=78, already_done=2, answered=37, errors=1, cost_usd=0.1))
        bar._progress.refresh()
        drawn = out.getvalue()
        bar.finish_cell("acme/a × 43", success=True)
        bar.finish_cell("acme/a × 44", success=True)
    assert "acme/a × 43" in drawn and "acme/a × 44" in drawn
    # The same words as the plain lines: answers held (kept ones said), errors, this run's cost.
    assert "39/78 answered (2 kept from earlier runs), 1 errors, $0.1000 this run" in drawn
    assert "total (2 in flight)" in drawn
    assert "78/156 answered (4 kept from earlier runs), 2 errors, $0.2000 this run" in drawn
