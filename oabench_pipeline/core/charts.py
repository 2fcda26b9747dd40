"""The charts of the report (PNG) and of the site (SVG): one drawing each, in the words of the page.

matplotlib without pyplot (no global state, no display). SVG output is made byte-for-byte reproducible
(no date, fixed element ids), so a site rebuild from unchanged data leaves every chart file untouched;
text is drawn as paths, so a chart needs no font on the reader's machine.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Bump when a drawing changes: the site draws a chart again only when its inputs or this version changed.
CHART_VERSION = "charts-1"


@dataclass(frozen=True)
class ChartWords:
    """The words a chart prints; English by default (the report), Portuguese on the site by default."""

    cost_title: str = "Cost vs accuracy"
    cost_axis: str = "Cost of the full run (USD, log scale; reported, else estimated from prices)"
    accuracy_axis: str = "Official accuracy"
    frontier: str = "Pareto frontier"
    dominated: str = "dominated / unranked"
    no_cost: str = "No model has cost data"
    area_title: str = "Accuracy by legal area (blank: not answered)"
    area_scale: str = "Technical accuracy"
    incomplete: str = "(incomplete)"
    latency_axis: str = "Latency per call (ms, log scale)"
    calls_axis: str = "Calls"
    decimal_comma: bool = False


PORTUGUESE = ChartWords(
    cost_title="Custo × acurácia",
    cost_axis="Custo da execução completa (US$, escala log; informado, senão estimado por preços)",
    accuracy_axis="Acurácia oficial",
    frontier="Fronteira de Pareto",
    dominated="dominado / sem posição",
    no_cost="Nenhum modelo tem custo",
    area_title="Acurácia por área do direito (em branco: sem resposta)",
    area_scale="Acurácia técnica",
    incomplete="(incompleto)",
    latency_axis="Latência por chamada (ms, escala log)",
    calls_axis="Chamadas",
    decimal_comma=True,
)


def cost_vs_accuracy(pareto: pl.DataFrame, words: ChartWords = ChartWords()) -> tuple[Figure, list[str]]:
    """Log-cost vs accuracy scatter, every model labelled, Pareto frontier as a step line.

    Keys without cost data cannot be placed on a cost axis: they are returned (to be named in the page's
    text, not in the image, so it is said once).
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, PercentFormatter

    usable = pareto.filter(_HAS_COST)
    skipped = keys_without_cost(pareto)
    fig = figure(figsize=(10, 6.5))
    ax = fig.subplots()
    if usable.height:
        cost = usable["cost_usd"].to_numpy()
        acc = usable["accuracy"].to_numpy()
        frontier = usable["on_frontier"].fill_null(False).to_numpy()
        if (~frontier).any():  # a legend entry only for a series that is drawn
            ax.scatter(
                cost[~frontier], acc[~frontier], s=50, color="#8a9bb0", label=words.dominated, zorder=3
            )
        if frontier.any():
            ax.scatter(cost[frontier], acc[frontier], s=70, color="#d1495b", label=words.frontier, zorder=4)
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
        ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _comma(fmt_dollars(value), words)))
        ax.margins(x=0.12, y=0.08)  # room for the labels of the outermost points
        ax.legend(loc="best")
    else:
        ax.text(0.5, 0.5, words.no_cost, ha="center", va="center", transform=ax.transAxes)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))  # accuracy is a 0–1 share
    ax.set_xlabel(words.cost_axis)
    ax.set_ylabel(words.accuracy_axis)
    ax.set_title(words.cost_title)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig, skipped


_HAS_COST = pl.col("cost_usd").is_not_null() & (pl.col("cost_usd") > 0)


def keys_without_cost(pareto: pl.DataFrame) -> list[str]:
    """The keys `cost_vs_accuracy` cannot place on its cost axis (named in the page's text instead)."""
    return pareto.filter(~_HAS_COST)["model_key"].to_list()


def fmt_dollars(value: float) -> str:
    if value >= 1:
        return f"${value:,.0f}"
    return f"${value:.{max(2, -int(np.floor(np.log10(value))))}f}".rstrip("0").rstrip(".")


def _comma(text: str, words: ChartWords) -> str:
    return text.translate(str.maketrans(",.", ".,")) if words.decimal_comma else text


def area_heatmap(
    by_area: pl.DataFrame, leaderboard: pl.DataFrame, words: ChartWords = ChartWords()
) -> Figure:
    """Legal area × model heatmap of technical accuracy, each cell annotated with its percentage.

    Areas run down (20 rows) and models across, so the figure stays narrow enough to be seen whole in
    the UI and the report; an incomplete key is labelled so.
    """
    from matplotlib.ticker import PercentFormatter

    labels = {
        r["model_key"]: str(r["label"]) + ("" if r["complete"] else f"\n{words.incomplete}")
        for r in leaderboard.iter_rows(named=True)
    }
    model_order = leaderboard["model_key"].to_list()  # leaderboard order: best first
    areas = by_area.group_by("area").agg(pl.col("area_order").min()).sort("area_order")["area"].to_list()
    wide = by_area.pivot(on="model_key", index="area", values="accuracy")
    wide = pl.DataFrame({"area": areas}, schema={"area": pl.String}).join(wide, on="area", how="left")
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
    fig = figure(figsize=(max(7.0, 0.85 * len(model_order) + 4.5), max(4.0, 0.36 * len(areas) + 2.8)))
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
    colorbar = fig.colorbar(image, ax=ax, label=words.area_scale, fraction=0.04, pad=0.02)
    colorbar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.set_title(words.area_title)
    fig.tight_layout()
    return fig


def latency_histogram(latencies_ms: Sequence[float], words: ChartWords = ChartWords()) -> Figure:
    """How long each call took: a histogram on log-spaced bins, with the median and p95 marked."""
    fig = figure(figsize=(7, 2.8))
    ax = fig.subplots()
    values = np.asarray([v for v in latencies_ms if v > 0], dtype=float)
    if values.size:
        low, high = values.min(), values.max()
        bins = np.geomspace(low, high * 1.0001, 30) if high > low else np.array([low * 0.9, high * 1.1])
        ax.hist(values, bins=bins.tolist(), color="#4c78a8")
        ax.set_xscale("log")
        for quantile, style in ((0.5, "-"), (0.95, "--")):
            ax.axvline(float(np.quantile(values, quantile)), color="#d1495b", ls=style, lw=1)
    ax.set_xlabel(words.latency_axis)
    ax.set_ylabel(words.calls_axis)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def figure(figsize: tuple[float, float]) -> Figure:
    """A standalone figure: no pyplot, so no global state and no display (the Agg canvas renders it).

    matplotlib is imported here, not at module level: it takes most of a second, and every Dagster
    step process imports the modules that use it whether or not they draw anything.
    """
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=110)


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def svg_bytes(fig: Figure) -> bytes:
    """The figure as SVG, the same bytes for the same drawing (no date; ids from a fixed salt)."""
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "oabench", "svg.fonttype": "path"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


# The last PNGs drawn in this process, by a digest of everything each was drawn from (`drawing_digest`):
# drawing is most of a report's time, and a process that writes the report again from the same inputs (a
# rebuild after cells that changed no chart, the test suite's many commands in one process) gets the same
# bytes without drawing. A handful is kept: a report has at most three charts.
_DRAWN_KEPT = 12
_drawn: OrderedDict[str, bytes] = OrderedDict()
_drawn_lock = threading.Lock()


def drawing_digest(chart: str, *inputs: object) -> str:
    """SHA-256 of a chart's name, `CHART_VERSION` and its inputs: a frame by its columns, types and rows in
    order (a drawing follows row order: the leaderboard's is the heatmap's columns), else by `repr`."""
    digest = hashlib.sha256(repr((CHART_VERSION, chart)).encode())
    for part in inputs:
        if isinstance(part, pl.DataFrame):
            digest.update(repr((part.schema, part.rows())).encode())
        else:
            digest.update(repr(part).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def drawn_once(digest: str, draw: Callable[[], bytes]) -> bytes:
    """`draw()`'s bytes, drawn only when no chart of the same `digest` was drawn lately in this process."""
    with _drawn_lock:
        if digest in _drawn:
            _drawn.move_to_end(digest)
            return _drawn[digest]
    data = draw()
    with _drawn_lock:
        _drawn[digest] = data
        while len(_drawn) > _DRAWN_KEPT:
            _drawn.popitem(last=False)
    return data
