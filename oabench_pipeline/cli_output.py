"""What the CLI draws: a live progress bar over model calls, and tables in several formats."""

from __future__ import annotations

import json

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from oabench_pipeline.inference.progress import CellProgress, listening


class ProgressBar:
    """One bar per benchmark cell: answered / total, errors, $ so far, ETA (fed by inference progress)."""

    def __init__(self) -> None:
        self.console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("errors {task.fields[errors]}  ${task.fields[cost]:.4f}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self._task: TaskID | None = None
        self._listening = listening(self._update)

    def __enter__(self) -> ProgressBar:
        self._progress.__enter__()
        self._listening.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listening.__exit__(*exc)
        self._progress.__exit__(*exc)

    def start_cell(self, name: str) -> None:
        self._task = self._progress.add_task(name, total=None, errors=0, cost=0.0)

    def _update(self, progress: CellProgress) -> None:
        if self._task is not None:
            self._progress.update(
                self._task,
                total=progress.total,
                completed=progress.done,
                errors=progress.errors,
                cost=progress.cost_usd,
            )

    def finish_cell(self, success: bool) -> None:
        if self._task is None:
            return
        task = self._progress.tasks[self._task]
        total = task.total or 1
        self._progress.update(
            self._task,
            total=total,
            completed=total if success and task.completed == 0 else task.completed,
            description=task.description + ("" if success else " [red]FAILED[/red]"),
        )
        self._task = None


def format_table(frame: pl.DataFrame, fmt: str) -> str:
    """`table` (aligned text), `csv`, `json` (records) or `markdown`."""
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return json.dumps(frame.to_dicts(), ensure_ascii=False, default=str, indent=2)
    rounded = frame.with_columns(pl.col(pl.Float64).round(4))
    if fmt == "markdown":
        header = "| " + " | ".join(rounded.columns) + " |"
        rows = [
            "| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rounded.iter_rows()
        ]
        return "\n".join([header, "|" + "---|" * len(rounded.columns), *rows])
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=10_000,
        fmt_str_lengths=60,
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_formatting="ASCII_MARKDOWN",
    ):
        return str(rounded)
