"""Human-readable reports from the leaderboard tables: Markdown, self-contained HTML, CSV/Parquet, PNGs.

Every file is written atomically (temp file in the same directory, then os.replace), so a reader
never sees a half-written report. Plots use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import base64
import datetime as dt
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from oabench_pipeline.core import charts
from oabench_pipeline.core.cutoff_chart import CUTOFF_PLOT, plot_accuracy_by_exam_date
from oabench_pipeline.core.editions import format_editions
from oabench_pipeline.core.files import write_atomically
from oabench_pipeline.core.leaderboard import suite_view
from oabench_pipeline.core.markdown import markdown_table
from oabench_pipeline.core.numbers import grouped, short_decimal
from oabench_pipeline.core.pass_rates import PASS_RATE_CAVEAT, load_pass_rates
from oabench_pipeline.core.public_endpoints import public_frame
from oabench_pipeline.core.rendering import render
from oabench_pipeline.core.tables import csv_ready

COST_PLOT = "cost_vs_accuracy.png"
AREA_PLOT = "accuracy_by_area.png"


@dataclass(frozen=True)
class ReportFiles:
    """Paths of everything `write_reports` wrote."""

    markdown: Path
    html: Path
    cost_plot: Path
    area_plot: Path
    csv: dict[str, Path] = field(default_factory=dict)
    parquet: dict[str, Path] = field(default_factory=dict)
    cost_plot_caption: str = ""
    summary: str = ""
    """A few lines of Markdown (under the UI's 1,000-character limit for showing a value inline)."""
    cutoff_plot: Path | None = None
    """Accuracy by exam date with each knowledge cutoff marked; None when no key has a cutoff."""

    def all_paths(self) -> list[Path]:
        return [
            self.markdown,
            self.html,
            self.cost_plot,
            self.area_plot,
            *([self.cutoff_plot] if self.cutoff_plot else []),
            *self.csv.values(),
            *self.parquet.values(),
        ]


def _fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _fmt_ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{100 * low:.1f}–{100 * high:.1f}]"


def _fmt_cost(value: float | None) -> str:
    """The terminal's and the site's digits: `$0.1812`, `$0.00919` (`core/numbers.py`)."""
    return "–" if value is None else f"${short_decimal(value)}"


def _fmt_ms(value: float | None) -> str:
    """The terminal's digits, thousands grouped: `10,036.5 ms` (`core/numbers.py`)."""
    return "–" if value is None else f"{grouped(value)} ms"


@dataclass(frozen=True)
class ReportContext:
    """When the report was made and how fresh its data is: printed at the top of every report."""

    generated_at: dt.datetime
    data_as_of: dt.datetime | None
    """The newest answer (inference row) the tables were built from."""
    suite: str | None = None
    """Which suite the ranking is over (`suite_heading`)."""

    def lines(self) -> list[str]:
        as_of = (
            "no answers yet" if self.data_as_of is None else _fmt_time(self.data_as_of) + " (newest answer)"
        )
        lines = [f"Generated {_fmt_time(self.generated_at)}", f"Data as of {as_of}"]
        return [*lines, self.suite] if self.suite else lines


def suite_heading(suite: Mapping[str, Any]) -> str:
    """`Suite oabench-2026: editions 43-45, 240 questions` from the suite's row of the `suites` table,
    saying which of its editions are not ingested (a key is ranked over the others)."""
    ingested = format_editions(suite["editions_ingested"])
    text = f"Suite {suite['suite']}: editions {ingested}, {suite['questions']} questions"
    missing = sorted(set(suite["editions"]) - set(suite["editions_ingested"]))
    return text + (f" (not ingested: {format_editions(missing)})" if missing else "")


def _fmt_time(moment: dt.datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def editions_covered(by_edition: pl.DataFrame) -> dict[str, list[int]]:
    """Model key → the editions it has scored rows for, in order."""
    if by_edition.is_empty():
        return {}
    grouped = by_edition.group_by("model_key").agg(pl.col("edition").sort())
    return {key: [int(e) for e in editions] for key, editions in grouped.iter_rows()}


def passed_text(row: dict, ran: int, of: str = "of") -> str:
    """Editions passed of those run, and of those required when the key did not run them all: `0/1 of 3`.

    The terminal's and the site's `passed` column (the report says which editions: `_editions_text`).
    """
    required = row["editions_total"]
    return f"{row['editions_passed']}/{ran}" + (f" {of} {required}" if ran != required else "")


def _editions_text(row: dict, covered: list[int]) -> str:
    """`3/3`, or for a run that did not cover every required edition: `0/1 run (45) of 3`."""
    passed, required = row["editions_passed"], row["editions_total"]
    if len(covered) == required and row["complete"]:
        return f"{passed}/{required}"
    run = ", ".join(map(str, covered)) or "none"
    return f"{passed}/{len(covered)} run ({run}) of {required}"


def _display_rows(tables: dict[str, pl.DataFrame]) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells of the person-facing leaderboard (shared by Markdown and HTML)."""
    header = [
        "Rank (range)",
        "Model",
        "Key",
        "Official (95% CI)",
        "Technical (95% CI)",
        "Editions passed",
        "P(pass all)",
        "Cost",
        "p50 latency",
    ]
    covered = editions_covered(tables["leaderboard_by_edition"])
    rows = []
    for r in tables["leaderboard"].iter_rows(named=True):  # one row per key, for people to read
        rank = "–" if r["rank"] is None else str(r["rank"])
        if r["rank"] is not None and r["rank_low"] is not None and r["rank_high"] is not None:
            rank += f" ({r['rank_low']}–{r['rank_high']})" if r["rank_low"] != r["rank_high"] else ""
        cost = r["effective_cost_usd"]
        cost_text = _fmt_cost(cost) + (" (est.)" if r["cost_source"] == "estimated" else "")
        rows.append(
            [
                rank + ("" if r["complete"] else " (incomplete)"),
                str(r["label"]),
                str(r["model_key"]),
                _fmt_pct(r["official_accuracy"]) + _fmt_ci(r["accuracy_ci_low"], r["accuracy_ci_high"]),
                _fmt_pct(r["technical_accuracy"]) + _fmt_ci(r["technical_ci_low"], r["technical_ci_high"]),
                _editions_text(r, covered.get(r["model_key"], [])),
                _fmt_pct(r["p_pass"]),
                cost_text,
                _fmt_ms(r["p50_latency_ms"]),
            ]
        )
    return header, rows


def _per_edition_rows(tables: dict[str, pl.DataFrame]) -> tuple[list[str], list[list[str]]]:
    """Model × edition: the official score and pass/fail where the key ran, `not run` where it did not."""
    by_edition = tables["leaderboard_by_edition"]
    editions = sorted({int(e) for e in by_edition["edition"].to_list()}) if not by_edition.is_empty() else []
    cells = {(r["model_key"], int(r["edition"])): r for r in by_edition.iter_rows(named=True)}
    header = ["Model", *(f"Edition {e}" for e in editions)]
    rows = []
    for r in tables["leaderboard"].iter_rows(named=True):
        row = [str(r["label"])]
        for edition in editions:
            cell = cells.get((r["model_key"], edition))
            if cell is None:
                row.append("not run")
                continue
            text = f"{cell['official_score']}/{cell['official_total']} " + (
                "pass" if cell["passed"] else "fail"
            )
            row.append(text + ("" if cell["complete"] else " (incomplete)"))
        rows.append(row)
    rates = tables.get("candidate_pass_rates")
    rows.append(["Candidates (1st-phase pass rate)", *_candidates_cells(rates, editions)])
    return header, rows


def _candidates_cells(rates: pl.DataFrame | None, editions: list[int]) -> list[str]:
    """Each edition's candidates' pass rate and what it is taken over (`registry/pass_rates.toml`), `—`
    where none was verified."""
    rates = load_pass_rates() if rates is None else rates
    by_edition = {int(r["edition"]): r for r in rates.iter_rows(named=True)} if not rates.is_empty() else {}
    cells = []
    for edition in editions:
        r = by_edition.get(edition)
        if r is None or r["pass_rate"] is None:
            cells.append("—")
        else:
            cells.append(f"{_fmt_pct(r['pass_rate'])} of {str(r['denominator_kind']).replace('_', ' ')}")
    return cells


CANDIDATES_NOTE = (
    "Candidates: the share of an edition's candidates who passed its 1st phase, as its source gives it "
    "(registry/pass_rates.toml). " + PASS_RATE_CAVEAT
)


LAW_FLAG_NOTE = (
    "A question is possibly superseded when a reform of its area came into force after its exam "
    "(registry/legal_reforms.toml); a per-question note overrides that. The area-level flag marks "
    "questions to read with care; it is not a legal judgment. `oabench leaderboard --current-law` ranks "
    "on the current-law questions."
)

KEY_NOTE = (
    "Key document: the answer key each edition's answers come from (a preliminary key shows no later "
    "annulment; those known are added). An unresolved question, whose later key is unknown and disputed, "
    "counts in neither score."
)
_KEY_COLUMNS = {"key_document", "changed_after_preliminary", "status_note"}


def key_provenance_rows(
    answer_keys: pl.DataFrame | None, editions: list[int]
) -> tuple[list[str], list[list[str]]]:
    """Per edition of the report: the key document its answers come from, the questions whose answer
    changed after the preliminary key, and those left unresolved (in neither score), with why."""
    header = ["Edition", "Key document", "Changed after the preliminary key", "Unresolved (in neither score)"]
    if answer_keys is None or answer_keys.is_empty() or not set(answer_keys.columns) >= _KEY_COLUMNS:
        return header, []
    rows = []
    for edition in editions:
        keys = answer_keys.filter(pl.col("edition") == edition).sort("number")
        if keys.is_empty():
            continue
        documents = ", ".join(sorted(set(keys["key_document"].drop_nulls())))
        changed = keys.filter(pl.col("changed_after_preliminary").fill_null(False))
        unresolved = keys.filter(pl.col("status") == "unresolved")
        rows.append(
            [
                str(edition),
                documents or "—",
                "; ".join(f"{r['number']} ({r['status_note']})" for r in changed.iter_rows(named=True))
                or "—",
                "; ".join(f"{r['number']} ({r['status_note']})" for r in unresolved.iter_rows(named=True))
                or "—",
            ]
        )
    return header, rows


NOTES = (
    "Official accuracy credits annulled questions to every model (as the OAB does); technical accuracy "
    "counts active questions only. Intervals: 95% Wilson (annulled questions credited with certainty).",
    "Rank: dense by official score among keys whose counted run of every edition is complete (the newest "
    "complete run); incomplete keys are listed but not ranked. Range: the best and worst rank the exact "
    "McNemar tests (Holm-adjusted, 5%) allow, 1 + the keys significantly better to the keys minus those "
    "significantly worse; keys whose ranges overlap are not shown to differ. Cost marked (est.): tokens "
    "x a price snapshot.",
    "Editions passed: official score of at least 40/80; a key that ran only some editions shows which "
    "(`0/1 run (45) of 3`).",
)


def law_currency_rows(tables: Mapping[str, pl.DataFrame]) -> tuple[list[str], list[list[str]]] | None:
    """Each suite's questions under each law-currency flag (`suites`, `question_law_currency`,
    `legal_reforms`): questions, current law, possibly superseded, then one column per reform (the
    questions its area-level flag reaches). None for tables built before law currency."""
    suites, currency, reforms = (tables.get(t) for t in ("suites", "question_law_currency", "legal_reforms"))
    if suites is None or currency is None or reforms is None or "questions_current_law" not in suites.columns:
        return None
    from oabench_pipeline.core.law_currency import flag_counts

    header = ["suite", "questions", "current law", "possibly superseded", *reforms["reform"].to_list()]
    rows = []
    for suite in suites.iter_rows(named=True):
        counts = flag_counts(currency, reforms, suite["editions_ingested"])["questions"].to_list()
        rows.append(
            [suite["suite"], grouped(suite["questions"]), *(grouped(n) for n in counts[: 2 + reforms.height])]
        )
    return header, rows


def leaderboard_markdown(
    tables: dict[str, pl.DataFrame],
    context: ReportContext | None = None,
    answer_keys: pl.DataFrame | None = None,
) -> str:
    """The leaderboard as Markdown: when, the ranking, the notes, the per-edition results, where the
    answers of the report's editions come from (`answer_keys`, when given), and each suite's questions
    under each law-currency flag."""
    lines = []
    if context is not None:
        lines += [" · ".join(context.lines()), ""]
    lines += markdown_table(*_display_rows(tables))
    lines += ["", *(f"{note}\n" for note in NOTES), "**Per edition**", ""]
    lines += markdown_table(*_per_edition_rows(tables))
    lines += ["", CANDIDATES_NOTE]
    key_header, key_rows = key_provenance_rows(answer_keys, _report_editions(tables))
    if key_rows:
        lines += ["", "**Answer keys**", "", *markdown_table(key_header, key_rows), "", KEY_NOTE]
    currency = law_currency_rows(tables)
    if currency is not None:
        lines += ["", "**Questions by law-currency flag** (docs/law_currency.md)", ""]
        lines += [*markdown_table(*currency), "", LAW_FLAG_NOTE]
    return "\n".join(lines) + "\n"


def _report_editions(tables: dict[str, pl.DataFrame]) -> list[int]:
    by_edition = tables["leaderboard_by_edition"]
    return sorted({int(e) for e in by_edition["edition"].to_list()}) if not by_edition.is_empty() else []


def summary_markdown(tables: dict[str, pl.DataFrame], context: ReportContext, top: int = 5) -> str:
    """The head of the ranking in a few short lines, short enough for the UI to show inline."""
    board = tables["leaderboard"].filter(pl.col("rank").is_not_null()).sort("rank", "official_score")
    lines = [f"{' · '.join(context.lines())}", ""]
    for r in board.head(top).iter_rows(named=True):
        lines.append(
            f"{r['rank']}. {r['label']}: {_fmt_pct(r['official_accuracy'])}"
            f"{_fmt_ci(r['accuracy_ci_low'], r['accuracy_ci_high'])}"
        )
    unranked = tables["leaderboard"].height - board.height
    more = [
        f"{board.height - top} more ranked" if board.height > top else "",
        f"{unranked} incomplete, unranked" if unranked else "",
    ]
    if any(more):
        lines += ["", "… " + ", ".join(filter(None, more)) + " (see `leaderboard`)"]
    text = "\n".join(lines)
    return text if len(text) < 1000 else text[:990] + "…"


def _html_page(
    tables: dict[str, pl.DataFrame],
    pngs: dict[str, bytes],
    caption: str,
    context: ReportContext,
    answer_keys: pl.DataFrame | None = None,
) -> str:
    ranking_header, ranking_rows = _display_rows(tables)
    edition_header, edition_rows = _per_edition_rows(tables)
    key_header, key_rows = key_provenance_rows(answer_keys, _report_editions(tables))
    charts = [
        {
            "name": name,
            "base64": base64.b64encode(data).decode(),
            "caption": caption if name == COST_PLOT else "",
        }
        for name, data in pngs.items()
    ]
    currency = law_currency_rows(tables)
    return render(
        "report.html",
        currency_header=currency[0] if currency else None,
        currency_rows=currency[1] if currency else None,
        law_flag_note=LAW_FLAG_NOTE,
        when=context.lines(),
        ranking_header=ranking_header,
        ranking_rows=ranking_rows,
        notes=NOTES,
        edition_header=edition_header,
        edition_rows=edition_rows,
        candidates_note=CANDIDATES_NOTE,
        key_header=key_header,
        key_rows=key_rows,
        key_note=KEY_NOTE,
        charts=charts,
    )


def frame_bytes(frame: pl.DataFrame, kind: str) -> bytes:
    """A published file's bytes (the report's exports, the site's downloads): endpoints public only."""
    frame = public_frame(frame)
    buffer = io.BytesIO()
    if kind == "csv":
        csv_ready(frame).write_csv(buffer)
    else:
        frame.write_parquet(buffer)
    return buffer.getvalue()


def _export(path: Path, data: bytes) -> Path:
    """Write an export unless the file holds these bytes already: most tables do not change from one
    rebuild to the next, and each write is an fsync."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return path
    except FileNotFoundError:
        pass
    return write_atomically(path, data)


def _cost_png(pareto: pl.DataFrame) -> tuple[bytes, list[str]]:
    """The cost chart's PNG (drawn unless the same one was lately) and the keys it leaves out (no cost)."""
    digest = charts.drawing_digest(COST_PLOT, pareto)
    return charts.drawn_once(digest, lambda: charts.png_bytes(charts.cost_vs_accuracy(pareto)[0])), (
        charts.keys_without_cost(pareto)
    )


def _area_png(by_area: pl.DataFrame, leaderboard: pl.DataFrame) -> bytes:
    digest = charts.drawing_digest(AREA_PLOT, by_area, leaderboard)
    return charts.drawn_once(digest, lambda: charts.png_bytes(charts.area_heatmap(by_area, leaderboard)))


def write_reports(
    tables: dict[str, pl.DataFrame],
    out_dir: Path,
    data_as_of: dt.datetime | None = None,
    generated_at: dt.datetime | None = None,
    editions: pl.DataFrame | None = None,
    suite: str | None = None,
    answer_keys: pl.DataFrame | None = None,
) -> ReportFiles:
    """Write leaderboard.md/.html, the PNG plots and CSV + Parquet of every table into `out_dir`.

    `data_as_of` is the newest answer behind the tables; both times head the Markdown and HTML.
    `editions` (edition, exam_date) places each edition in time for the training-cutoff chart, drawn
    when some key has a knowledge cutoff (over every edition, as `contamination_by_cutoff`). `suite`: the
    suite to rank (default: the `suites` table's default one), named under the times; the CSV and
    Parquet exports hold every table as given, every suite's rows included. `answer_keys`: where each
    answer of the report's editions comes from (key document, changes after the preliminary key,
    unresolved questions), a section of its own.
    """
    out_dir = Path(out_dir)
    exports = tables
    heading = None
    if "suites" in tables and not tables["suites"].is_empty():
        rows = tables["suites"].filter(pl.col("suite") == suite if suite else pl.col("is_default"))
        if rows.is_empty():
            raise ValueError(f"suite {suite!r} is not in the suites table")
        row = rows.row(0, named=True)
        heading = suite_heading(row)
        # The default suite's tables are the plain ones; another suite's are its rows of the `_by_suite` twins.
        tables = suite_view(tables, row["suite"], row["editions"], plain=row["is_default"])
    context = ReportContext(generated_at or dt.datetime.now(dt.UTC), data_as_of, heading)
    cost_png, no_cost = _cost_png(tables["pareto_frontier"])
    caption = f"Not plotted on the cost chart (no cost data): {', '.join(no_cost)}." if no_cost else ""
    area_png = _area_png(tables["leaderboard_by_area"], tables["leaderboard"])
    csv = {name: _export(out_dir / f"{name}.csv", frame_bytes(f, "csv")) for name, f in exports.items()}
    parquet = {
        name: _export(out_dir / f"{name}.parquet", frame_bytes(f, "parquet")) for name, f in exports.items()
    }
    markdown = leaderboard_markdown(tables, context, answer_keys) + (f"\n{caption}\n" if caption else "")
    pngs = {COST_PLOT: cost_png, AREA_PLOT: area_png}
    contamination = exports.get("contamination_by_cutoff")
    if contamination is not None and "pooled" in contamination.columns:
        contamination = contamination.filter(~pl.col("pooled"))  # a panel per key, not for them all
    if editions is not None and contamination is not None and not contamination.is_empty():
        every_key = exports.get("leaderboard_by_suite", exports["leaderboard"])  # `all` has every key
        labels = dict(every_key.select("model_key", "label").unique("model_key").iter_rows())
        by_edition = exports["leaderboard_by_edition"]
        pngs[CUTOFF_PLOT] = charts.drawn_once(
            charts.drawing_digest(CUTOFF_PLOT, by_edition, editions, contamination, sorted(labels.items())),
            lambda: plot_accuracy_by_exam_date(by_edition, editions, contamination, labels),
        )
    page = _html_page(tables, pngs, caption, context, answer_keys)
    return ReportFiles(
        markdown=write_atomically(out_dir / "leaderboard.md", markdown.encode("utf-8")),
        html=write_atomically(out_dir / "leaderboard.html", page.encode("utf-8")),
        cost_plot=write_atomically(out_dir / COST_PLOT, cost_png),
        area_plot=write_atomically(out_dir / AREA_PLOT, area_png),
        csv=csv,
        parquet=parquet,
        cost_plot_caption=caption,
        summary=summary_markdown(tables, context),
        cutoff_plot=write_atomically(out_dir / CUTOFF_PLOT, pngs[CUTOFF_PLOT])
        if CUTOFF_PLOT in pngs
        else None,
    )
