"""`oabench leaderboard`: the leaderboard tables, sized for a terminal."""

from __future__ import annotations

import datetime as dt
from datetime import datetime

import click
import polars as pl

from oabench_pipeline.cli.common import (
    choose_suite,
    load_registry_suites,
    read_warehouse,
    suite_option,
    table_format_option,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import accuracy_text, format_table, leaderboard_summary
from oabench_pipeline.core.public_endpoints import public_frame
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse


@main.command(name="leaderboard")
@click.option("--by", type=click.Choice(["model", "edition", "area"]), default="model", show_default=True)
@table_format_option
@click.option(
    "--wide", is_flag=True, help="Every column in the table or Markdown (csv and json always have them)."
)
@click.option(
    "--rank-by",
    "rank_by",
    type=click.Choice(["accuracy", "ability"]),
    default="accuracy",
    show_default=True,
    help="accuracy: official score among keys that ran every edition; ability: Rasch ability (one scale "
    "for keys that ran different editions), among keys whose every edition run is complete.",
)
@click.option(
    "--as-of",
    "as_of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Count only runs completed before the end of this day (UTC), e.g. 2026-03-03.",
)
@suite_option(
    "Rank this suite of editions (default: oabench-2026, the study's 43rd-45th; `all`: every edition)."
)
@click.option(
    "--current-law",
    "current_law",
    is_flag=True,
    help="Rank on the questions not flagged possibly_superseded (a reform of their area came into force "
    "after their exam: docs/law_currency.md), and print how many questions each flag leaves in the suite.",
)
@click.option(
    "--phase",
    type=click.Choice(["1", "2"]),
    default="1",
    show_default=True,
    help="2: the 2nd phase's leaderboard of one judge (docs/phase2.md); --by edition gives its area-exams.",
)
@click.option("--judge", "judge", metavar="KEY", help="--phase 2: whose judgments rank the models.")
def leaderboard_cmd(
    by: str,
    fmt: str,
    wide: bool,
    rank_by: str,
    as_of: datetime | None,
    suite: str | None,
    current_law: bool,
    phase: str,
    judge: str | None,
) -> None:
    """Print the leaderboard (or its per-edition / per-area breakdown) from the warehouse.

    The default table (and Markdown) fits 120 columns; csv and json keep every column, every significant
    digit. With --as-of the tables are computed for that day from the scored runs (nothing is written).
    --suite ranks another suite of editions (default: oabench-2026, the study's 43rd-45th); the last line
    names the suite ranked.
    """
    settings = Settings.from_env()
    if phase == "2":
        if rank_by != "accuracy" or as_of or suite or current_law:
            raise click.UsageError("--phase 2 takes --judge, --by and --format only")
        _phase2_leaderboard(Warehouse(settings.warehouse_path), judge, by, fmt, wide)
        return
    if judge is not None:
        raise click.UsageError("--judge ranks the 2nd phase: add --phase 2")
    if current_law:
        if by != "model" or rank_by != "accuracy":
            raise click.UsageError("--current-law ranks models by accuracy: leave out --by and --rank-by")
        _current_law(settings, suite, as_of.date() if as_of else None, fmt, wide)
        return
    table = {"model": "leaderboard", "edition": "leaderboard_by_edition", "area": "leaderboard_by_area"}[by]
    warehouse = read_warehouse(settings)
    if as_of is not None and not warehouse.has_table("scores"):
        raise click.ClickException("nothing is scored yet: run `oabench run` or `oabench import` first")
    heading = None
    if suite is None and as_of is None:  # the plain tables: the default suite's, as stored
        tables, suite, heading = _default_suite_tables(warehouse, table)
        frame, by_edition = tables[table], tables["leaderboard_by_edition"]
    else:
        tables, heading = _suite_tables(settings, warehouse, suite, as_of.date() if as_of else None)
        frame, by_edition = tables[table], tables["leaderboard_by_edition"]
        if as_of is not None and frame.is_empty():
            raise click.ClickException(f"no run had started by the end of {as_of.date()} (UTC)")
    if frame.is_empty():
        raise click.ClickException(
            f"no {table} table yet in {warehouse.root}: run `oabench run` or `oabench import` first"
        )
    note = None
    if by == "edition":  # each edition's candidates' pass rate beside the models' scores
        from oabench_pipeline.core.pass_rates import load_pass_rates, with_candidates_rate

        frame = with_candidates_rate(frame, load_pass_rates())
    if by == "model" and rank_by == "ability" and "ability_rank" not in frame.columns:
        raise click.ClickException(
            "the leaderboard has no abilities yet: rebuild it with `oabench run` (nothing is asked again)"
        )
    if by == "model":
        rank = "ability_rank" if rank_by == "ability" else "rank"
        second = "ability" if rank_by == "ability" else "official_score"
        frame = frame.sort(rank, second, nulls_last=True, descending=[False, True])
    if fmt in ("table", "markdown") and not wide:
        if by == "model":
            from oabench_pipeline.core.reports import editions_covered

            frame, note = leaderboard_summary(frame, editions_covered(by_edition), rank_by, suite)
        else:
            if "effective_cost_usd" in frame.columns:  # the per-edition cost, marked when estimated
                from oabench_pipeline.cli.output import ESTIMATED_MARK, ESTIMATED_NOTE, cost_text

                estimated = (frame["cost_source"] == "estimated").any()
                note = f"{ESTIMATED_MARK} after a cost: {ESTIMATED_NOTE}" if estimated else None
                frame = frame.with_columns(
                    pl.Series(
                        "cost_usd",
                        [
                            cost_text(c, s)
                            for c, s in frame.select("effective_cost_usd", "cost_source").iter_rows()
                        ],
                    )
                )
            columns = {c: h for c, h in TERMINAL_COLUMNS[by].items() if c in frame.columns}
            frame = frame.select(list(columns)).rename(columns)
    click.echo(format_table(public_frame(frame), fmt))  # an endpoint column, if one is ever added
    if note:
        click.echo(note)
    if by == "edition" and fmt in ("table", "markdown"):
        from oabench_pipeline.core.pass_rates import PASS_RATE_CAVEAT

        click.echo(
            f"candidates: the 1st-phase pass rate of the edition's candidates (registry/pass_rates.toml). {PASS_RATE_CAVEAT}"
        )
    if heading and fmt in ("table", "markdown"):  # which suite is ranked, and what it covers
        click.echo(heading)


# What fits a terminal for the breakdowns (`--by model` has its own summary); `--wide` shows every column.
TERMINAL_COLUMNS = {
    "edition": {
        "model_key": "model",
        "edition": "edition",
        "official_score": "score",
        "official_total": "of",
        "official_accuracy": "accuracy",
        "technical_accuracy": "technical",
        "passed": "passed",
        "p_pass": "p_pass",
        "invalid_count": "invalid",
        "avg_latency_ms": "avg ms",
        "cost_usd": "cost $",
        "candidates_pass_rate": "candidates",
    },
    "area": {
        "model_key": "model",
        "area": "area",
        "correct": "correct",
        "total": "of",
        "accuracy": "accuracy",
    },
}


def _default_suite_tables(
    warehouse: Warehouse, table: str
) -> tuple[dict[str, pl.DataFrame], str | None, str | None]:
    """`table` and the per-edition rows as the default suite sees them (`leaderboard` is its own; the
    editions and areas are its editions'), from the stored tables; a warehouse built before suites: as is.
    Also the suite's name and the line that names it and what it covers (None before suites)."""
    from oabench_pipeline.core.leaderboard import suite_view

    tables = {name: warehouse.read(name) for name in {table, "leaderboard_by_edition", "suites"}}
    suites = tables["suites"]
    default = suites.filter(pl.col("is_default")) if "is_default" in suites.columns else suites.clear()
    if default.is_empty():
        return tables, None, None
    if table == "leaderboard_by_area":
        tables["leaderboard_by_area_by_suite"] = warehouse.read("leaderboard_by_area_by_suite")
    row = default.row(0, named=True)
    view = suite_view(tables, row["suite"], row["editions"], plain=True)
    return view, row["suite"], _suite_line(row)


def _suite_tables(
    settings: Settings, warehouse: Warehouse, name: str | None, as_of: dt.date | None
) -> tuple[dict[str, pl.DataFrame], str]:
    """The tables as suite `name` (None: the default) sees them: the stored `_by_suite` rows, or with
    `as_of` every suite computed for that day; and a line naming the suite and what it covers."""
    from oabench_pipeline.core.leaderboard import build_leaderboard_tables, suite_view

    registry = load_registry_suites(settings)
    suite = choose_suite(registry, name)
    if as_of is not None:
        from oabench_pipeline.scoring.inputs import healthy_reader

        with healthy_reader(warehouse) as (con, _):  # the cells the stored tables are built from
            tables = build_leaderboard_tables(con, as_of=as_of, suites=list(registry.values()))
    else:
        tables = {t: warehouse.read(t) for t in ("suites", "leaderboard_by_edition", *SUITE_SOURCES)}
    stored = (
        tables["suites"].filter(pl.col("suite") == suite.name)
        if "suite" in tables["suites"].columns
        else None
    )
    if stored is None or stored.is_empty():
        raise click.ClickException(
            f"suite {suite.name} is not in the leaderboard tables yet (they were built before it was added, "
            "or nothing is scored): `oabench run` rebuilds them"
        )
    row = stored.row(0, named=True)
    return suite_view(tables, suite.name, row["editions"]), _suite_line(row)


def _suite_line(row: dict) -> str:
    """`Suite oabench-2026: editions 43-45, 240 questions; 4 of 5 model key(s) ranked`."""
    from oabench_pipeline.core.reports import suite_heading

    return suite_heading(row) + f"; {row['ranked_keys']} of {row['model_keys']} model key(s) ranked"


def _current_law(settings: Settings, name: str | None, as_of: dt.date | None, fmt: str, wide: bool) -> None:
    """The suite's ranking on its current-law questions (`leaderboard_current_law`), and the questions each
    flag leaves in it (`core/law_currency.flag_counts`)."""
    from oabench_pipeline.core.editions import format_editions
    from oabench_pipeline.core.law_currency import DISCLAIMER, flag_counts

    warehouse = read_warehouse(settings)
    suite = choose_suite(load_registry_suites(settings), name)
    names = ("leaderboard_current_law", "question_law_currency", "legal_reforms", "suites")
    if as_of is not None:
        if not warehouse.has_table("scores"):
            raise click.ClickException("nothing is scored yet: run `oabench run` or `oabench import` first")
        from oabench_pipeline.core.leaderboard import build_leaderboard_tables
        from oabench_pipeline.scoring.inputs import healthy_reader

        suites = load_registry_suites(settings)
        with healthy_reader(warehouse) as (con, _):
            built = build_leaderboard_tables(con, as_of=as_of, suites=list(suites.values()))
        tables = {t: built[t] for t in names}
    else:
        tables = {t: warehouse.read(t) for t in names}
    board = tables["leaderboard_current_law"]
    if "suite" in board.columns:
        board = board.filter(pl.col("suite") == suite.name)
    stored = tables["suites"]
    if (
        board.is_empty()
        or "suite" not in stored.columns
        or stored.filter(pl.col("suite") == suite.name).is_empty()
    ):
        raise click.ClickException(
            f"no current-law ranking of suite {suite.name} yet: `oabench run` (or `oabench import`) builds it"
        )
    editions = stored.filter(pl.col("suite") == suite.name)["editions_ingested"][0].to_list()
    counts = flag_counts(tables["question_law_currency"], tables["legal_reforms"], editions)
    if fmt != "table" or wide:
        click.echo(format_table(board, fmt))
    else:
        click.echo(format_table(_current_law_summary(board), fmt))
    if fmt == "table":
        total = int(counts["questions"][0] + counts["questions"][1])
        click.echo(
            f"suite {suite.name} (editions {format_editions(editions)} ingested): {total} questions, ranked "
            f"here on the {counts['questions'][0]} of current law"
        )
        click.echo(format_table(counts, fmt))
        click.echo(DISCLAIMER)


def _current_law_summary(board: pl.DataFrame) -> pl.DataFrame:
    """The current-law ranking as it fits a terminal: the score on the current-law questions with its
    interval, beside the rank and accuracy on every question of the suite."""

    def interval(row: dict) -> str | None:
        return accuracy_text(row["official_accuracy"], row["official_ci_low"], row["official_ci_high"])

    rows = board.to_dicts()
    return pl.DataFrame(
        {
            "rank": [r["rank"] for r in rows],
            "model": [r["model_key"] for r in rows],
            "score": [r["official_score"] for r in rows],
            "of": [r["official_total"] for r in rows],
            "accuracy [95%]": [interval(r) for r in rows],
            "rank, all questions": [r["rank_all_questions"] for r in rows],
            "accuracy, all questions": [r["official_accuracy_all_questions"] for r in rows],
        },
        schema_overrides={"rank": pl.Int64, "rank, all questions": pl.Int64, "accuracy [95%]": pl.String},
    )


# What `--suite` reads besides `suites` and `leaderboard_by_edition`: the twins the three views show.
SUITE_SOURCES = ("leaderboard_by_suite", "leaderboard_by_area_by_suite")


PHASE2_TABLES = {
    "model": "phase2_leaderboard",
    "edition": "phase2_scores",
    "area": "phase2_leaderboard_by_area",
}
# What fits a terminal for `--phase 2` (`--wide`, csv and json: every column).
PHASE2_TERMINAL_COLUMNS = {
    "model": {
        "rank": "rank",
        "rank_range": "range",
        "model_key": "model",
        "mean_text": "mean score (95% CI)",
        "passed_text": "exams passed",
        "exams_incomplete": "incomplete",
        "invalid": "invalid",
        "answer_cost_usd": "answer $",
        "judging_cost_usd": "judging $",
    },
    "edition": {
        "model_key": "model",
        "edition": "edition",
        "area": "area",
        "total": "total",
        "piece_points": "piece",
        "questions_points": "questions",
        "passed": "passed",
        "missing": "missing",
        "invalid": "invalid",
    },
    "area": {
        "model_key": "model",
        "area": "area",
        "mean_score": "mean score",
        "exams_passed": "passed",
        "exams_complete": "complete",
        "exams_total": "exams",
    },
}


def _phase2_leaderboard(warehouse: Warehouse, judge: str | None, by: str, fmt: str, wide: bool) -> None:
    """The 2nd phase's table of one judge: with several judges and no --judge, a one-line refusal naming them."""
    table = PHASE2_TABLES[by]
    if not warehouse.has_table(table):
        raise click.ClickException(
            "no 2nd-phase scores yet: run `oabench ingest --phase 2`, then `oabench import` an OAB-Bench folder "
            "or `oabench judge`"
        )
    frame = warehouse.read(table)
    judges = sorted(frame["judge_key"].unique())
    if judge is None:
        if len(judges) > 1:
            raise click.UsageError(
                f"several judges graded the 2nd phase; choose one with --judge: {', '.join(judges)}"
            )
        judge = judges[0]
    elif judge not in judges:
        raise click.UsageError(f"no judgments by {judge!r}; judges: {', '.join(judges) or 'none'}")
    frame = frame.filter(pl.col("judge_key") == judge)
    if by == "model":
        frame = frame.sort("rank", "mean_score", descending=[False, True], nulls_last=True)
    if fmt in ("table", "markdown") and not wide:
        if by == "model":
            rows = frame.select("rank_low", "rank_high", "mean_score", "mean_ci_low", "mean_ci_high").rows()
            frame = frame.with_columns(
                pl.Series("rank_range", [_range_text(r[0], r[1]) for r in rows], dtype=pl.String),
                pl.Series("mean_text", [_mean_text(*r[2:]) for r in rows], dtype=pl.String),
                pl.format("{}/{}", "exams_passed", "exams_total").alias("passed_text"),
            )
        columns = PHASE2_TERMINAL_COLUMNS[by]
        frame = frame.select(list(columns)).rename(columns)
    click.echo(format_table(frame, fmt))
    if fmt in ("table", "markdown"):
        click.echo(
            f"2nd phase, judged by {judge}: an area-exam is 10 points and passes at 6.00; an incomplete one (a "
            "missing or invalid judgment) is neither passed nor failed (docs/phase2.md)"
        )


def _range_text(low: int | None, high: int | None) -> str | None:
    return None if low is None or high is None else f"{low}–{high}"


def _mean_text(mean: float | None, low: float | None, high: float | None) -> str | None:
    if mean is None:
        return None
    return f"{mean:.2f}" + (f" ({low:.2f}–{high:.2f})" if low is not None and high is not None else "")
