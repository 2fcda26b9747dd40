"""Human-readable reports from the leaderboard tables: Markdown, self-contained HTML, CSV/Parquet, PNGs.

Every file is written atomically (temp file in the same directory, then os.replace), so a reader
never sees a half-written report. Plots use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from oabench_pipeline.core.cutoff_chart import CUTOFF_PLOT, plot_accuracy_by_exam_date
from oabench_pipeline.core.editions import format_editions
from oabench_pipeline.core.files import write_atomically
from oabench_pipeline.core.leaderboard import suite_view
from oabench_pipeline.core.markdown import markdown_table
from oabench_pipeline.tables import csv_ready

# `leaderboard_report`'s code version: bump it when the report's files change, to have it rebuilt.
REPORT_VERSION = "report-3"  # 2: the training-cutoff chart; 3: the suite it ranks heads the report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    return "–" if value is None else f"${value:,.4f}"


def _fmt_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


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
    text = f"Suite {suite['suite']}: editions {format_editions(suite['editions_ingested'])}, {suite['questions']} questions"
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


def leaderboard_markdown(tables: dict[str, pl.DataFrame], context: ReportContext | None = None) -> str:
    """The leaderboard as Markdown: when, the ranking, the notes, the per-edition results."""
    lines = []
    if context is not None:
        lines += [" · ".join(context.lines()), ""]
    lines += markdown_table(*_display_rows(tables))
    lines += ["", *(f"{note}\n" for note in NOTES), "**Per edition**", ""]
    lines += markdown_table(*_per_edition_rows(tables))
    return "\n".join(lines) + "\n"


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


def _plot_cost_vs_accuracy(pareto: pl.DataFrame) -> tuple[bytes, str]:
    """Log-cost vs accuracy scatter, every model labelled, Pareto frontier as a step line.

    Keys without cost data cannot be placed on a cost axis: the caption (in the report text, not in the
    image, so it is said once) names them.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

    has_cost = pl.col("cost_usd").is_not_null() & (pl.col("cost_usd") > 0)
    usable = pareto.filter(has_cost)
    skipped = pareto.filter(~has_cost)["model_key"]
    fig = _figure(figsize=(10, 6.5))
    ax = fig.subplots()
    if usable.height:
        cost = usable["cost_usd"].to_numpy()
        acc = usable["accuracy"].to_numpy()
        frontier = usable["on_frontier"].fill_null(False).to_numpy()
        if (~frontier).any():  # a legend entry only for a series that is drawn
            ax.scatter(
                cost[~frontier], acc[~frontier], s=50, color="#8a9bb0", label="dominated / unranked", zorder=3
            )
        if frontier.any():
            ax.scatter(
                cost[frontier], acc[frontier], s=70, color="#d1495b", label="Pareto frontier", zorder=4
            )
            order = np.argsort(cost[frontier])
            ax.step(
                cost[frontier][order], acc[frontier][order], where="post", color="#d1495b", lw=1.5, zorder=2
            )
        for x, y, label in zip(cost, acc, usable["label"].to_list(), strict=True):
            ax.annotate(str(label), (x, y), xytext=(5, 4), textcoords="offset points", fontsize=8)
        ax.set_xscale("log")
        # Plain dollar ticks (1-2-5 per decade) instead of 1.1×10⁻¹-style minor labels.
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _fmt_dollars(value)))
        ax.margins(x=0.12, y=0.08)  # room for the labels of the outermost points
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, "No model has cost data", ha="center", va="center", transform=ax.transAxes)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))  # accuracy is a 0–1 share
    ax.set_xlabel("Cost of the full run (USD, log scale; reported, else estimated from prices)")
    ax.set_ylabel("Official accuracy")
    ax.set_title("Cost vs accuracy")
    ax.grid(True, which="major", alpha=0.3)
    caption = ""
    if skipped.len():
        caption = f"Not plotted on the cost chart (no cost data): {', '.join(skipped.to_list())}."
    fig.tight_layout()
    return _png_bytes(fig), caption


def _fmt_dollars(value: float) -> str:
    if value >= 1:
        return f"${value:,.0f}"
    return f"${value:.{max(2, -int(np.floor(np.log10(value))))}f}".rstrip("0").rstrip(".")


def _plot_area_heatmap(by_area: pl.DataFrame, leaderboard: pl.DataFrame) -> bytes:
    """Legal area × model heatmap of technical accuracy, each cell annotated with its percentage.

    Areas run down (20 rows) and models across, so the figure stays narrow enough to be seen whole in
    the UI and the report; an incomplete key is labelled so.
    """
    labels = {
        r["model_key"]: str(r["label"]) + ("" if r["complete"] else "\n(incomplete)")
        for r in leaderboard.iter_rows(named=True)
    }
    model_order = leaderboard["model_key"].to_list()  # leaderboard order: best first
    areas = by_area.group_by("area").agg(pl.col("area_order").min()).sort("area_order")["area"].to_list()
    wide = by_area.pivot(on="model_key", index="area", values="accuracy")
    wide = pl.DataFrame({"area": areas}).join(wide, on="area", how="left")
    matrix = (
        wide.select(
            [
                pl.col(k).cast(pl.Float64) if k in wide.columns else pl.lit(None, pl.Float64).alias(k)
                for k in model_order
            ]
        )
        .to_numpy()
        .astype(float)
    )
    fig = _figure(figsize=(max(7.0, 0.85 * len(model_order) + 4.5), max(4.0, 0.36 * len(areas) + 2.8)))
    ax = fig.subplots()
    image = ax.imshow(matrix, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(
        range(len(model_order)), [labels.get(k, k) for k in model_order], rotation=35, ha="right", fontsize=8
    )
    ax.set_yticks(range(len(areas)), areas, fontsize=8)
    if matrix.size <= 2000:  # annotate while the numbers can still be read
        for (i, j), value in np.ndenumerate(matrix):
            if not np.isnan(value):
                # White on the darkest cells of either end of the colour map, black elsewhere.
                colour = "white" if value < 0.15 or value > 0.9 else "black"
                ax.text(j, i, f"{100 * value:.0f}", ha="center", va="center", fontsize=7, color=colour)
    from matplotlib.ticker import PercentFormatter

    colorbar = fig.colorbar(image, ax=ax, label="Technical accuracy", fraction=0.04, pad=0.02)
    colorbar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.set_title("Accuracy by legal area (blank: not answered)")
    fig.tight_layout()
    return _png_bytes(fig)


def _figure(figsize: tuple[float, float]) -> Figure:
    """A standalone figure: no pyplot, so no global state and no display (the Agg canvas renders PNG).

    matplotlib is imported here, not at module level: it takes most of a second, and every Dagster
    step process imports this module whether or not it draws anything.
    """
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=110)


def _png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f0f2f5; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; margin: 1rem 0; }
.caption { font-size: 0.85rem; color: #555; max-width: 60rem; }
.when { margin: 0.2rem 0; color: #444; }
figure { margin: 1rem 0; }
"""


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_page(
    tables: dict[str, pl.DataFrame], pngs: dict[str, bytes], caption: str, context: ReportContext
) -> str:
    images = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        + (
            f'<figcaption class="caption">{html.escape(caption)}</figcaption>'
            if name == COST_PLOT and caption
            else ""
        )
        + "</figure>"
        for name, data in pngs.items()
    )
    when = "".join(f"<p class='when'>{html.escape(line)}</p>" for line in context.lines())
    notes = "".join(f"<p class='caption'>{html.escape(note)}</p>" for note in NOTES)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>OABench leaderboard</title>"
        f"<style>{_CSS}</style></head><body><h1>OABench leaderboard</h1>{when}"
        f"{_html_table(*_display_rows(tables))}{notes}"
        f"<h2>Per edition</h2>{_html_table(*_per_edition_rows(tables))}"
        f"<h2>Charts</h2>{images}</body></html>"
    )


def _frame_bytes(frame: pl.DataFrame, kind: str) -> bytes:
    buffer = io.BytesIO()
    if kind == "csv":
        csv_ready(frame).write_csv(buffer)
    else:
        frame.write_parquet(buffer)
    return buffer.getvalue()


def write_reports(
    tables: dict[str, pl.DataFrame],
    out_dir: Path,
    data_as_of: dt.datetime | None = None,
    generated_at: dt.datetime | None = None,
    editions: pl.DataFrame | None = None,
    suite: str | None = None,
) -> ReportFiles:
    """Write leaderboard.md/.html, the PNG plots and CSV + Parquet of every table into `out_dir`.

    `data_as_of` is the newest answer behind the tables; both times head the Markdown and HTML.
    `editions` (edition, exam_date) places each edition in time for the training-cutoff chart, drawn
    when some key has a knowledge cutoff (over every edition, as `contamination_by_cutoff`). `suite`: the
    suite to rank (default: the `suites` table's default one), named under the times; the CSV and
    Parquet exports hold every table as given, every suite's rows included.
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
    cost_png, caption = _plot_cost_vs_accuracy(tables["pareto_frontier"])
    area_png = _plot_area_heatmap(tables["leaderboard_by_area"], tables["leaderboard"])
    csv = {
        name: write_atomically(out_dir / f"{name}.csv", _frame_bytes(f, "csv")) for name, f in exports.items()
    }
    parquet = {
        name: write_atomically(out_dir / f"{name}.parquet", _frame_bytes(f, "parquet"))
        for name, f in exports.items()
    }
    markdown = leaderboard_markdown(tables, context) + (f"\n{caption}\n" if caption else "")
    pngs = {COST_PLOT: cost_png, AREA_PLOT: area_png}
    contamination = exports.get("contamination_by_cutoff")
    if editions is not None and contamination is not None and not contamination.is_empty():
        every_key = exports.get("leaderboard_by_suite", exports["leaderboard"])  # `all` has every key
        labels = dict(every_key.select("model_key", "label").unique("model_key").iter_rows())
        pngs[CUTOFF_PLOT] = plot_accuracy_by_exam_date(
            exports["leaderboard_by_edition"], editions, contamination, labels
        )
    page = _html_page(tables, pngs, caption, context)
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
