"""Human-readable reports from the leaderboard tables: Markdown, self-contained HTML, CSV/Parquet, PNGs.

Every file is written atomically (temp file in the same directory, then os.replace), so a reader
never sees a half-written report. Plots use matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

import base64
import html
import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

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

    def all_paths(self) -> list[Path]:
        return [
            self.markdown,
            self.html,
            self.cost_plot,
            self.area_plot,
            *self.csv.values(),
            *self.parquet.values(),
        ]


def _atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write `data` to `path` via a temp file in the same directory and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; reports are meant to be read by others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _fmt_ci(low: float | None, high: float | None) -> str:
    return "" if low is None or high is None else f" [{100 * low:.1f}–{100 * high:.1f}]"


def _fmt_cost(value: float | None) -> str:
    return "–" if value is None else f"${value:,.4f}"


def _fmt_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} ms"


def _display_rows(tables: dict[str, pl.DataFrame]) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells of the person-facing leaderboard (shared by Markdown and HTML)."""
    header = [
        "Rank",
        "Model",
        "Key",
        "Official (95% CI)",
        "Technical (95% CI)",
        "Editions passed",
        "P(pass all)",
        "Cost",
        "p50 latency",
    ]
    rows = []
    for r in tables["leaderboard"].iter_rows(named=True):  # one row per key, for people to read
        rank = "–" if r["rank"] is None else str(r["rank"])
        cost = r["effective_cost_usd"]
        cost_text = _fmt_cost(cost) + (" (est.)" if r["cost_source"] == "estimated" else "")
        rows.append(
            [
                rank + ("" if r["complete"] else " (incomplete)"),
                str(r["label"]),
                str(r["model_key"]),
                _fmt_pct(r["official_accuracy"]) + _fmt_ci(r["accuracy_ci_low"], r["accuracy_ci_high"]),
                _fmt_pct(r["technical_accuracy"]) + _fmt_ci(r["technical_ci_low"], r["technical_ci_high"]),
                f"{r['editions_passed']}/{r['editions_total']}",
                _fmt_pct(r["p_pass"]),
                cost_text,
                _fmt_ms(r["p50_latency_ms"]),
            ]
        )
    return header, rows


def _md_cell(text: str) -> str:
    """Escape what would break a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def leaderboard_markdown(tables: dict[str, pl.DataFrame]) -> str:
    """The leaderboard as a Markdown table (also used as Dagster metadata)."""
    header, rows = _display_rows(tables)
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows),
    ]
    note = (
        "Official accuracy credits annulled questions to every model (as the OAB does); technical "
        "accuracy counts active questions only. Intervals: 95% Wilson (annulled questions credited with "
        "certainty). Rank: dense by official score among keys whose counted run of every edition is "
        "complete (the newest complete run). Cost marked (est.): tokens x a price snapshot."
    )
    return "\n".join(lines) + "\n\n" + note + "\n"


def _plot_cost_vs_accuracy(pareto: pl.DataFrame) -> tuple[bytes, str]:
    """Log-cost vs accuracy scatter, every model labelled, Pareto frontier as a step line."""
    usable = pareto.filter(pl.col("cost_usd").is_not_null() & (pl.col("cost_usd") > 0))
    skipped = pareto.filter(~(pl.col("cost_usd").is_not_null() & (pl.col("cost_usd") > 0)))["model_key"]
    fig = _figure(figsize=(10, 6.5))
    ax = fig.subplots()
    if usable.height:
        cost = usable["cost_usd"].to_numpy()
        acc = 100 * usable["accuracy"].to_numpy()
        frontier = usable["on_frontier"].fill_null(False).to_numpy()
        ax.scatter(
            cost[~frontier], acc[~frontier], s=50, color="#8a9bb0", label="dominated / unranked", zorder=3
        )
        ax.scatter(cost[frontier], acc[frontier], s=70, color="#d1495b", label="Pareto frontier", zorder=4)
        order = np.argsort(cost[frontier])
        if frontier.any():
            ax.step(
                cost[frontier][order], acc[frontier][order], where="post", color="#d1495b", lw=1.5, zorder=2
            )
        for x, y, label in zip(cost, acc, usable["label"].to_list(), strict=True):
            ax.annotate(str(label), (x, y), xytext=(5, 4), textcoords="offset points", fontsize=8)
        ax.set_xscale("log")
        ax.margins(x=0.12, y=0.08)  # room for the labels of the outermost points
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, "No model has cost data", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("Cost of the full run (USD, log scale; reported, else estimated from prices)")
    ax.set_ylabel("Official accuracy (%)")
    ax.set_title("Cost vs accuracy")
    ax.grid(True, which="both", alpha=0.3)
    caption = ""
    if skipped.len():
        caption = f"Not plotted (no cost data): {', '.join(skipped.to_list())}."
        fig.text(0.01, 0.01, caption, fontsize=8, wrap=True)
    fig.tight_layout(rect=(0, 0.04 if caption else 0, 1, 1))
    return _png_bytes(fig), caption


def _plot_area_heatmap(by_area: pl.DataFrame, leaderboard: pl.DataFrame) -> bytes:
    """Model x area heatmap of technical accuracy, each cell annotated with its percentage."""
    labels = dict(zip(leaderboard["model_key"].to_list(), leaderboard["label"].to_list(), strict=True))
    model_order = leaderboard["model_key"].to_list()  # leaderboard order: best first
    areas = by_area.group_by("area").agg(pl.col("area_order").min()).sort("area_order")["area"].to_list()
    wide = by_area.pivot(on="area", index="model_key", values="accuracy")
    wide = pl.DataFrame({"model_key": model_order}).join(wide, on="model_key", how="left")
    matrix = (
        wide.select(
            [
                pl.col(a).cast(pl.Float64) if a in wide.columns else pl.lit(None, pl.Float64).alias(a)
                for a in areas
            ]
        )
        .to_numpy()
        .astype(float)
    )
    height = max(3.0, 0.45 * len(model_order) + 2.5)
    fig = _figure(figsize=(max(10.0, 0.6 * len(areas) + 4), height))
    ax = fig.subplots()
    image = ax.imshow(100 * matrix, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(areas)), areas, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(model_order)), [str(labels.get(k, k)) for k in model_order], fontsize=8)
    if matrix.size <= 2000:  # annotate while the numbers can still be read
        for (i, j), value in np.ndenumerate(matrix):
            if not np.isnan(value):
                # White on the darkest cells of either end of the colour map, black elsewhere.
                colour = "white" if value < 0.15 or value > 0.9 else "black"
                ax.text(j, i, f"{100 * value:.0f}", ha="center", va="center", fontsize=7, color=colour)
    fig.colorbar(image, ax=ax, label="Technical accuracy (%)")
    ax.set_title("Accuracy by legal area")
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
.caption { font-size: 0.85rem; color: #555; }
"""


def _html_page(tables: dict[str, pl.DataFrame], pngs: dict[str, bytes], caption: str) -> str:
    header, rows = _display_rows(tables)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    images = "".join(
        f'<img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'
        for name, data in pngs.items()
    )
    cap = f'<p class="caption">{html.escape(caption)}</p>' if caption else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>OABench leaderboard</title>"
        f"<style>{_CSS}</style></head><body><h1>OABench leaderboard</h1>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        "<p class='caption'>Official accuracy credits annulled questions to everyone; technical accuracy "
        "counts active questions only; 95% Wilson intervals.</p>"
        f"{images}{cap}</body></html>"
    )


def _csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV has no nested types: encode struct columns as JSON text, lists as comma-separated values."""
    nested = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.Struct)]
    lists = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.List)]
    return frame.with_columns(
        *(pl.col(name).struct.json_encode() for name in nested),
        *(pl.col(name).cast(pl.List(pl.String)).list.join(",") for name in lists),
    )


def _frame_bytes(frame: pl.DataFrame, kind: str) -> bytes:
    buffer = io.BytesIO()
    if kind == "csv":
        _csv_ready(frame).write_csv(buffer)
    else:
        frame.write_parquet(buffer)
    return buffer.getvalue()


def write_reports(tables: dict[str, pl.DataFrame], out_dir: Path) -> ReportFiles:
    """Write leaderboard.md/.html, both PNG plots and CSV + Parquet of every table into `out_dir`."""
    out_dir = Path(out_dir)
    cost_png, caption = _plot_cost_vs_accuracy(tables["pareto_frontier"])
    area_png = _plot_area_heatmap(tables["leaderboard_by_area"], tables["leaderboard"])
    csv = {
        name: _atomic_write_bytes(out_dir / f"{name}.csv", _frame_bytes(f, "csv"))
        for name, f in tables.items()
    }
    parquet = {
        name: _atomic_write_bytes(out_dir / f"{name}.parquet", _frame_bytes(f, "parquet"))
        for name, f in tables.items()
    }
    markdown = leaderboard_markdown(tables) + (f"\n{caption}\n" if caption else "")
    page = _html_page(tables, {COST_PLOT: cost_png, AREA_PLOT: area_png}, caption)
    return ReportFiles(
        markdown=_atomic_write_bytes(out_dir / "leaderboard.md", markdown.encode("utf-8")),
        html=_atomic_write_bytes(out_dir / "leaderboard.html", page.encode("utf-8")),
        cost_plot=_atomic_write_bytes(out_dir / COST_PLOT, cost_png),
        area_plot=_atomic_write_bytes(out_dir / AREA_PLOT, area_png),
        csv=csv,
        parquet=parquet,
        cost_plot_caption=caption,
    )
