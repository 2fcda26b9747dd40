"""Reports: every file written, PNGs with real content, Markdown/HTML naming every model key."""

from __future__ import annotations

from pathlib import Path

import duckdb
import markupsafe
import matplotlib.image as mpimg
import polars as pl
import pytest

from oabench_pipeline.core import charts
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
    assert files.cutoff_plot is None  # no exam dates given: no training-cutoff chart
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
        assert str(markupsafe.escape(key)) in page  # escaped as the templates escape
    assert page.count("data:image/png;base64,") == 2 and "<style>" in page
    # Keys without cost data are named in the caption rather than breaking the plot.
    no_cost = tables["pareto_frontier"].filter(pl.col("cost_usd").is_null())["model_key"].to_list()
    assert no_cost and all(k in files.cost_plot_caption for k in no_cost)
    # Round trip: the Parquet equals the table, the nested column survives CSV as JSON.
    assert pl.read_parquet(files.parquet["leaderboard"]).equals(tables["leaderboard"])
    items_csv = pl.read_csv(files.csv["item_analysis"])
    assert items_csv["answer_distribution"][0].startswith("{")


def test_a_report_written_again_from_the_same_rows_draws_nothing_and_rewrites_no_export(
    tables: dict[str, pl.DataFrame], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Charts are drawn from their rows: a report written again from the same ones (in the same process)
    has the same PNG bytes without drawing them, a chart whose rows changed is drawn again, and an export
    whose bytes did not change is left as it is (the same file, not a rewritten copy)."""
    drawn: list[object] = []
    draw = charts.png_bytes
    monkeypatch.setattr(charts, "png_bytes", lambda figure: drawn.append(figure) or draw(figure))
    # Rows no other test draws, so nothing of this test is drawn before it.
    halved = pl.col("accuracy") * 0.5
    mine = {
        **tables,
        "pareto_frontier": tables["pareto_frontier"].with_columns(halved),
        "leaderboard_by_area_by_suite": tables["leaderboard_by_area_by_suite"].with_columns(halved),
    }
    first = write_reports(mine, tmp_path / "out")
    assert len(drawn) == 2  # the cost chart and the heatmap
    export = first.parquet["leaderboard"].stat().st_ino
    again = write_reports(mine, tmp_path / "out")
    assert len(drawn) == 2
    assert again.parquet["leaderboard"].stat().st_ino == export
    elsewhere = write_reports(mine, tmp_path / "elsewhere")
    assert len(drawn) == 2
    for path, copy in ((first.cost_plot, elsewhere.cost_plot), (first.area_plot, elsewhere.area_plot)):
        assert path.read_bytes() == copy.read_bytes()
    quartered = tables["leaderboard_by_area_by_suite"].with_columns(pl.col("accuracy") * 0.25)
    changed = {**mine, "leaderboard_by_area_by_suite": quartered}
    redrawn = write_reports(changed, tmp_path / "changed")
    assert len(drawn) == 3  # the heatmap only: the cost chart's rows are the same
    assert redrawn.area_plot.read_bytes() != first.area_plot.read_bytes()


def test_markdown_table_shape(tables: dict[str, pl.DataFrame]) -> None:
    markdown = leaderboard_markdown(tables)
    ranking = markdown.split("\n\n")[0]  # the ranking, then the notes and the per-edition table
    table_lines = [line for line in ranking.splitlines() if line.startswith("|")]
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


def test_report_says_when_and_explains_ranks(tables: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    import datetime as dt

    as_of = dt.datetime(2026, 3, 3, 18, 10, tzinfo=dt.UTC)
    generated = dt.datetime(2026, 11, 30, 23, 0, tzinfo=dt.UTC)
    files = write_reports(tables, tmp_path, data_as_of=as_of, generated_at=generated)
    markdown = files.markdown.read_text(encoding="utf-8")
    page = files.html.read_text(encoding="utf-8")
    when = "Generated 2026-11-30 23:00 UTC · Data as of 2026-03-03 18:10 UTC (newest answer)"
    assert markdown.startswith(when)
    assert page.index("Generated 2026-11-30 23:00 UTC") < page.index("<table>")
    assert "Rank (range)" in markdown and "McNemar" in markdown and "Rank (range)" in page
    # Said once: the caption of keys the cost chart cannot place is text, next to the chart in HTML.
    assert markdown.count("Not plotted") == 1 and page.count("Not plotted") == 1
    assert files.summary.startswith(when) and len(files.summary) < 1000  # shown inline in the UI
    # The notes' Markdown code spans are <code> in HTML, not literal backticks.
    assert "`0/1 run (45) of 3`" in markdown and "<code>0/1 run (45) of 3</code>" in page
    assert "`" not in page.split("<style>")[0] + page.split("</style>")[-1]


def test_per_edition_results_say_which_editions_a_run_covered(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    """A key that ran one edition of two reads `0/1 run (E) of 2` and `not run`, not `0/2 editions passed`."""
    board, by_edition = tables["leaderboard"], tables["leaderboard_by_edition"]
    key = board["model_key"][0]
    first, second = sorted(by_edition["edition"].unique().to_list())
    partial = dict(tables)
    partial["leaderboard_by_edition"] = by_edition.filter(
        ~((pl.col("model_key") == key) & (pl.col("edition") == second))
    )
    partial["leaderboard"] = board.with_columns(
        complete=pl.when(pl.col("model_key") == key).then(False).otherwise(pl.col("complete")),
        editions_passed=pl.when(pl.col("model_key") == key)
        .then(pl.lit(0, pl.UInt32))
        .otherwise(pl.col("editions_passed")),
    )
    markdown = write_reports(partial, tmp_path).markdown.read_text(encoding="utf-8")
    label = board["label"][0]
    row = next(line for line in markdown.splitlines() if f"| {key} |" in line)
    assert f"0/1 run ({first}) of 2" in row
    per_edition = next(line for line in markdown.splitlines() if line.startswith(f"| {label} |"))
    assert per_edition.endswith("| not run |")


def test_chart_ticks_read_as_money_and_percent() -> None:
    from oabench_pipeline.core.charts import fmt_dollars as _fmt_dollars

    assert [_fmt_dollars(v) for v in (0.11, 0.2, 0.05, 0.002, 1.0, 20.0, 1500.0)] == [
        "$0.11", "$0.2", "$0.05", "$0.002", "$1", "$20", "$1,500",
    ]  # fmt: skip


def test_cutoff_chart_is_drawn_for_keys_with_a_knowledge_cutoff(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    warehouse = make_synthetic_warehouse(n_models=8, n_editions=2, seed=5)
    editions = pl.from_arrow(warehouse.tables["editions"])
    assert isinstance(editions, pl.DataFrame)
    files = write_reports(tables, tmp_path, editions=editions)
    assert files.cutoff_plot is not None and files.cutoff_plot.read_bytes().startswith(PNG_SIGNATURE)
    assert files.cutoff_plot in files.all_paths()
    image = mpimg.imread(files.cutoff_plot)
    assert image.shape[0] > 300 and image[..., :3].std() > 0.05  # drawn, not blank
    assert "accuracy_by_exam_date.png" in files.html.read_text(encoding="utf-8")


def test_cutoff_chart_says_why_a_panel_has_no_effect() -> None:
    from oabench_pipeline.core.cutoff_chart import _effect_text

    none = dict.fromkeys(("effect_log_odds", "effect_ci_low", "effect_ci_high", "p_value"))
    assert _effect_text(none | {"questions_before": 0, "questions_after": 238}) == (
        "effect: cannot be estimated (all exams on one side)"
    )
    assert _effect_text(none | {"questions_before": 280, "questions_after": 300}) == (
        "effect: cannot be estimated (one side all right or all wrong)"
    )
    row = {"effect_log_odds": -0.5, "effect_ci_low": -0.8, "effect_ci_high": -0.2, "p_value": 0.001}
    assert _effect_text(row) == "effect -0.50 log-odds [-0.80, -0.20], p = 0.001"


def test_the_report_says_how_many_questions_each_suite_has_under_each_flag(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    files = write_reports(tables, tmp_path)
    markdown = files.markdown.read_text(encoding="utf-8")
    suite = tables["suites"].row(0, named=True)
    reforms = tables["legal_reforms"]["reform"].to_list()
    assert "**Questions by law-currency flag**" in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| suite | questions |"))
    assert header.split(" | ")[2:4] == ["current law", "possibly superseded"] and reforms[0] in header
    row = next(line for line in markdown.splitlines() if line.startswith(f"| {suite['suite']} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert [int(c.replace(",", "")) for c in cells[1:4]] == [
        suite["questions"],
        suite["questions_current_law"],
        suite["questions_possibly_superseded"],
    ]
    assert "not a legal judgment" in markdown
    html = files.html.read_text(encoding="utf-8")
    assert "Questions by law-currency flag" in html and "not a legal judgment" in html


def test_the_report_says_where_each_editions_answers_come_from(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    """Key document per edition, the answers changed after the preliminary key, the unresolved questions."""
    first, second = sorted(set(tables["leaderboard_by_edition"]["edition"].to_list()))[:2]
    answer_keys = pl.DataFrame(
        {
            "edition": [first, first, first, second],
            "number": [1, 2, 3, 1],
            "status": ["active", "active", "unresolved", "active"],
            "key_document": ["preliminary", "preliminary", "preliminary", "definitive"],
            "changed_after_preliminary": [False, True, None, None],
            "status_note": [None, "changed from A to B by a notice", "unresolved: disputed", None],
        }
    )
    files = write_reports(tables, tmp_path, answer_keys=answer_keys)
    markdown = files.markdown.read_text(encoding="utf-8")
    section = markdown[markdown.index("**Answer keys**") :]
    assert (
        f"| {first} | preliminary | 2 (changed from A to B by a notice) | 3 (unresolved: disputed) |"
        in section
    )
    assert f"| {second} | definitive | — | — |" in section
    assert "counts in neither score" in section
    html = files.html.read_text(encoding="utf-8")
    assert "<h2>Answer keys</h2>" in html and "3 (unresolved: disputed)" in html
    # Without answer keys (an older warehouse), no such section.
    assert "Answer keys" not in write_reports(tables, tmp_path / "bare").markdown.read_text(encoding="utf-8")
