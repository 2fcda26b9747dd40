"""The report's training-cutoff chart: each model's accuracy by exam date, its knowledge cutoff marked.

A function of its own (PNG bytes from two tables), so that any report layout can embed it.
"""

from __future__ import annotations

import io

import polars as pl

CUTOFF_PLOT = "accuracy_by_exam_date.png"


def plot_accuracy_by_exam_date(
    by_edition: pl.DataFrame, editions: pl.DataFrame, contamination: pl.DataFrame, labels: dict[str, str]
) -> bytes:
    """One panel per model key with a knowledge cutoff: technical accuracy per edition against the exam's
    date, a dashed line at the cutoff, and the effect net of difficulty (or why there is none) as the
    panel's subtitle. Keys without a cutoff are not drawn (the chart is about the cutoff)."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    points = by_edition.join(editions.select("edition", "exam_date"), on="edition", how="inner").filter(
        pl.col("exam_date").is_not_null()
    )
    if "pooled" in contamination.columns:  # the pooled row is every key at once: no panel of its own
        contamination = contamination.filter(~pl.col("pooled"))
    keys = contamination.sort("model_key")
    n = max(keys.height, 1)
    columns = min(n, 3)
    rows = (n + columns - 1) // columns
    fig = Figure(figsize=(4.2 * columns, 3.0 * rows + 0.6), dpi=110)
    axes = fig.subplots(rows, columns, squeeze=False)
    for ax in axes.flat[keys.height :]:
        ax.set_visible(False)
    if keys.is_empty():
        ax = axes[0][0]
        ax.set_visible(True)
        ax.text(0.5, 0.5, "No model has a knowledge cutoff", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    for ax, row in zip(axes.flat, keys.iter_rows(named=True), strict=False):
        mine = points.filter(pl.col("model_key") == row["model_key"]).sort("exam_date")
        dates, accuracy = mine["exam_date"].to_list(), mine["technical_accuracy"].to_list()
        after = [d > row["knowledge_cutoff"] for d in dates]
        ax.plot(dates, accuracy, color="#8a9bb0", lw=1, zorder=1)
        for flag, colour, name in ((False, "#2e86ab", "on/before cutoff"), (True, "#d1495b", "after cutoff")):
            chosen = [(d, a) for d, a, f in zip(dates, accuracy, after, strict=True) if f is flag]
            if chosen:
                ax.scatter(*zip(*chosen, strict=True), s=22, color=colour, label=name, zorder=3)
        ax.axvline(row["knowledge_cutoff"], color="#444", ls="--", lw=1)
        ax.set_title(labels.get(row["model_key"], row["model_key"]), fontsize=9)
        ax.text(
            0.02,
            0.04,
            _effect_text(row),
            transform=ax.transAxes,
            fontsize=7,
            color="#333",
            bbox={"facecolor": "white", "alpha": 0.8, "linewidth": 0},
        )
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    handles, names = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="upper right", fontsize=8)
    fig.suptitle("Technical accuracy by exam date; dashed: the model's knowledge cutoff", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _effect_text(row: dict) -> str:
    """The panel's one-line verdict: the effect net of difficulty with its interval, or why there is none."""
    if row["effect_log_odds"] is None:
        if not row.get("questions_before") or not row.get("questions_after"):
            return "effect: cannot be estimated (all exams on one side)"
        return "effect: cannot be estimated (one side all right or all wrong)"
    return (
        f"effect {row['effect_log_odds']:+.2f} log-odds "
        f"[{row['effect_ci_low']:+.2f}, {row['effect_ci_high']:+.2f}], p = {row['p_value']:.2g}"
    )
