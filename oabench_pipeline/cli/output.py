"""What the CLI draws: a live progress bar over model calls, and tables in several formats."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections import Counter
from types import TracebackType
from typing import NamedTuple

import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from oabench_pipeline.core.markdown import markdown_table
from oabench_pipeline.core.numbers import short_decimal, without_float_noise
from oabench_pipeline.core.tables import csv_ready
from oabench_pipeline.core.text_safety import terminal_safe
from oabench_pipeline.inference.progress import CellProgress, answered_summary, listening

STORAGE_RETRY_PREFIX = "Retrying failed database"  # dagster-postgres' warning at each retry of a connection
STORAGE_RETRY_EVERY_S = 60.0


class _OneLinePerStorageOutage(logging.Filter):
    """dagster-postgres warns on the root logger at each retry of its connection (`Retrying failed database
    connection: ...`, then psycopg2's three-line error): with PostgreSQL down for 20 s mid-run, dozens of
    lines between the progress lines. This says it once a minute in one line; the command's own reads of
    the run storage are retried and end in one line of their own (`engine/launch.py`)."""

    def __init__(self) -> None:
        super().__init__()
        self._last_said = -STORAGE_RETRY_EVERY_S

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(STORAGE_RETRY_PREFIX):
            return True
        now = time.monotonic()
        if now - self._last_said < STORAGE_RETRY_EVERY_S:
            return False
        self._last_said = now
        record.msg, record.args = "Dagster's instance storage is unreachable; retrying", ()
        return True


def log_warnings_in_one_line() -> None:
    """The CLI process's root logger: warnings on stderr as one `warning: ...` line each (what `logging`
    would print with a `WARNING:root:` prefix on its first warning anyway), storage retries once a minute."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    handler.addFilter(_OneLinePerStorageOutage())
    root.addHandler(handler)


class ProgressBar:
    """Every cell in flight at once: one line each (a bar of questions done / total, then what the cell
    holds and what this run paid), and a total line with its ETA, fed by inference progress from any
    thread. A line counts the questions that hold an answer, the ones kept from earlier runs included (and
    said), and the cost of this run alone: `76/78 answered (8 kept from earlier runs), 2 errors, $0.2500
    this run`. An error is not an answer (the next run asks it again). A cell that sends no model call
    (an offline baseline, answers already up to date) is counted in the total by what it did instead.

    On a terminal the lines are redrawn in place and a finished cell leaves one line above them; when
    stderr is not a terminal (a log file, CI) nothing is redrawn: a line per finished cell and a total
    line every `PLAIN_EVERY_S`.
    """

    PLAIN_EVERY_S = 10.0

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._lock = threading.Lock()
        self._cells: dict[str, CellProgress] = {}
        self._tasks: dict[str, TaskID] = {}
        self._started: dict[str, float] = {}
        self._finished: dict[str, CellProgress] = {}
        self._quiet: Counter[str] = Counter()  # what the finished cells that sent no model call did
        self._last_plain = time.monotonic()
        self._first_answer: float | None = None
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[summary]}  {task.fields[eta]}", markup=False),
            console=self.console,
            transient=True,
            disable=not self.live,
        )
        self._total = self._progress.add_task("total", total=None, summary="", eta="")
        self._listening = listening(self._update, self.notice)

    def __enter__(self) -> ProgressBar:
        self._progress.__enter__()
        self._listening.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._listening.__exit__(exc_type, exc, tb)
        self._progress.__exit__(exc_type, exc, tb)
        if not self.live and (self._cells or self._finished or self._quiet):
            self.console.print(self.total_line(), highlight=False, markup=False, soft_wrap=True)

    def start_cell(self, name: str) -> None:
        with self._lock:
            self._started[name] = time.monotonic()
            self._tasks[name] = self._progress.add_task(name, total=None, summary="", eta="")

    def _update(self, progress: CellProgress) -> None:
        with self._lock:
            self._cells[progress.cell] = progress
            if self._first_answer is None and progress.answered + progress.errors:
                self._first_answer = time.monotonic()
            task = self._tasks.get(progress.cell)
            if task is not None:
                self._progress.update(
                    task, total=progress.total, completed=progress.done, summary=progress.summary()
                )
            self._refresh_total()

    def _refresh_total(self) -> None:
        now = self._totals()
        self._progress.update(
            self._total,
            total=now.total or None,
            completed=now.done,
            summary=self._summary(now),
            eta=f"ETA {now.eta_s:.0f}s" if now.eta_s is not None else "",
            description=f"total ({len(self._tasks)} in flight)",
        )
        if not self.live and time.monotonic() - self._last_plain >= self.PLAIN_EVERY_S:
            self._last_plain = time.monotonic()
            self.console.print(self.total_line(), highlight=False, markup=False, soft_wrap=True)

    def _summary(self, now: Totals, eta: str = "") -> str:
        """The cells that sent model calls summed (then `eta`), then the others by what they did (`4
        cell(s): answered offline (baseline), scored`); an empty string before any cell has anything to say."""
        parts = []
        if self._cells or len(self._finished) > sum(self._quiet.values()):
            parts.append(
                answered_summary(now.with_answer, now.total, now.kept, now.errors, now.cost_usd) + eta
            )
        parts += [f"{n} cell(s): {what}" for what, n in self._quiet.items()]
        return "; ".join(parts)

    def total_line(self) -> str:
        now = self._totals()
        eta = f", ETA {now.eta_s:.0f}s" if now.eta_s is not None else ""
        what = self._summary(now, eta) or "nothing answered yet"
        return f"total: {what}; {len(self._tasks)} cell(s) in flight, {len(self._finished)} done"

    def _totals(self) -> Totals:
        return totals(list(self._cells.values()), list(self._finished.values()), self._first_answer)

    def finish_cell(
        self, name: str, success: bool, quiet_note: str = "no model call", interrupted: bool = False
    ) -> None:
        """Print the cell's line; `quiet_note` says what it did when it sent no model call at all;
        `interrupted`: a signal stopped it (a cell to resume, not a failure)."""
        with self._lock:
            task = self._tasks.pop(name, None)
            if task is not None:
                self._progress.remove_task(task)
            progress = self._cells.pop(name, None)
            elapsed = time.monotonic() - self._started.pop(name, time.monotonic())
            if progress is not None:
                self._finished[name] = progress
                what = progress.summary()
            else:
                self._finished[name] = CellProgress(cell=name, total=0, already_done=0)
                what = (
                    quiet_note
                    if success
                    else "no model call sent"
                    if interrupted
                    else "failed before any model call"
                )
                self._quiet[what] += 1
            status = (
                "" if success else " [yellow]interrupted[/yellow]" if interrupted else " [red]FAILED[/red]"
            )
            self.console.print(
                f"{escape(name)}: {escape(what)}{status} [{elapsed:.1f}s]", highlight=False, soft_wrap=True
            )
            self._refresh_total()

    def notice(self, text: str) -> None:
        """A line a step wants the user to read (a damaged response-log line set aside), above the bar."""
        with self._lock:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)


class Totals(NamedTuple):
    """Every cell's `CellProgress` summed (`done`, `with_answer` and `kept` as there), and the ETA in seconds."""

    done: int
    with_answer: int
    kept: int
    total: int
    errors: int
    cost_usd: float
    eta_s: float | None


def totals(in_flight: list[CellProgress], finished: list[CellProgress], first_answer: float | None) -> Totals:
    """The totals over every cell; the ETA covers the cells still in flight, at this run's answer rate
    so far (none once nothing is in flight)."""
    cells = [*in_flight, *finished]
    finished_now = sum(c.answered + c.errors for c in cells)
    remaining = sum(c.total - c.done for c in in_flight)
    eta = None
    if first_answer is not None and finished_now and remaining > 0:
        rate = finished_now / max(time.monotonic() - first_answer, 1e-3)
        eta = remaining / rate
    return Totals(
        done=sum(c.done for c in cells),
        with_answer=sum(c.with_answer for c in cells),
        kept=sum(c.already_done for c in cells),
        total=sum(c.total for c in cells),
        errors=sum(c.errors for c in cells),
        cost_usd=sum(c.cost_usd for c in cells),
        eta_s=eta,
    )


NULL_TEXT = "—"


def render_cell(value: object) -> str:
    """How `table` and `markdown` show one value: the same text in both.

    Booleans `yes`/`no`, NULL as an em dash, floats to 4 decimals without trailing zeros (small values
    keep 3 significant digits, so a cost of $0.000123 does not read 0); `csv` and `json` keep full precision.
    """
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return short_decimal(value)  # the digits the report and the site print too
    return terminal_safe(" ".join(str(value).split()))  # an ESC in a label or reply stays text


def wrap_words(text: str, width: int) -> list[str]:
    """Wrap at spaces only: a long word (a file name, a model key) stays whole on its own line."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def format_table(frame: pl.DataFrame, fmt: str, wrap: dict[str, int] | None = None) -> str:
    """`table` (aligned text), `csv`, `json` (records) or `markdown`.

    `csv` and `json` carry every significant digit (scripts read them), without the binary noise of float
    sums; `table` and `markdown` render values through `render_cell`. `wrap` gives columns of `table` a
    width to wrap at (at spaces).
    """
    if fmt == "csv":
        return csv_ready(frame).write_csv()
    if fmt == "json":
        records = without_float_noise(frame).to_dicts()
        return json.dumps(records, ensure_ascii=False, default=str, indent=2)
    cells = [[render_cell(v) for v in row] for row in frame.iter_rows()]
    if fmt == "markdown":
        return "\n".join(markdown_table(frame.columns, cells))
    return _text_table(frame, cells, wrap or {})


def _text_table(frame: pl.DataFrame, cells: list[list[str]], wrap: dict[str, int]) -> str:
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    wrapped = [
        [
            wrap_words(cell, wrap[name]) if name in wrap else [cell]
            for name, cell in zip(frame.columns, row, strict=True)
        ]
        for row in cells
    ]
    widths = [
        max([len(name), *(len(line) for row in wrapped for line in row[i])])
        for i, name in enumerate(frame.columns)
    ]

    def line(values: list[str]) -> str:
        padded = [
            v.rjust(w) if right else v.ljust(w) for v, w, right in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(padded).rstrip()

    out = [line(list(frame.columns)), line(["-" * w for w in widths])]
    for row in wrapped:
        height = max(len(lines) for lines in row)
        for k in range(height):
            out.append(line([lines[k] if k < len(lines) else "" for lines in row]))
    return "\n".join(out)


def leaderboard_summary(
    board: pl.DataFrame,
    covered: dict[str, list[int]] | None = None,
    rank_by: str = "accuracy",
    suite: str | None = None,
) -> tuple[pl.DataFrame, str | None]:
    """The leaderboard as it fits a 120-column terminal, and a footnote when some runs are incomplete.

    Rank, model, official score, official accuracy with its 95% interval, editions passed (of those run,
    when a key did not run every required edition: `0/1 of 3`), the effective cost (reported, else
    estimated and marked `~`: the footnote says so) and the median latency; `--wide` (or csv/json)
    shows every column. `covered`: model key → editions it ran.
    `rank_by="ability"`: the rank is `ability_rank` and the Rasch ability with its interval replaces the
    median latency. `suite`: the suite asked for by name (the footnote then says an edition of it may not
    have been run).
    """

    from oabench_pipeline.core.reports import passed_text

    def passed(row: dict) -> str:
        ran = len((covered or {}).get(row["model_key"], [])) if covered is not None else row["editions_total"]
        return passed_text(row, ran)

    def interval(row: dict) -> str | None:
        return accuracy_text(row["official_accuracy"], row["accuracy_ci_low"], row["accuracy_ci_high"])

    def ability(row: dict) -> str | None:
        if row.get("ability") is None:
            return None
        if row["ability_ci_low"] is None or row["ability_ci_high"] is None:  # a degenerate fit: no interval
            return f"{row['ability']:.2f}"
        return f"{row['ability']:.2f} [{row['ability_ci_low']:.2f}, {row['ability_ci_high']:.2f}]"

    by_ability = rank_by == "ability"
    rows = []
    incomplete = retired = False
    for row in board.iter_rows(named=True):
        unranked = row["ability_rank"] is None if by_ability else not row["complete"]
        incomplete |= unranked
        retired |= bool(row.get("retired"))
        last = {"ability [95% CI]": ability(row)} if by_ability else {"p50 ms": row["p50_latency_ms"]}
        rows.append(
            {
                "rank": row["ability_rank"] if by_ability else row["rank"],
                "model": row["model_key"] + (" *" if unranked else "") + (" †" if row.get("retired") else ""),
                "score": f"{row['official_score']}/{row['official_total']}",
                "accuracy [95% CI]": interval(row),
                "passed": passed(row),
                "cost $": cost_text(row.get("effective_cost_usd"), row.get("cost_source")),
                **last,
            }
        )
    schema = {
        "rank": pl.Int64,
        "model": pl.String,
        "score": pl.String,
        "accuracy [95% CI]": pl.String,
        "passed": pl.String,
        "cost $": pl.String,
        **({"ability [95% CI]": pl.String} if by_ability else {"p50 ms": pl.Float64}),
    }
    frame = pl.DataFrame(rows, schema=schema)
    width = max((len(text) for text in frame["cost $"].to_list()), default=0)
    frame = frame.with_columns(pl.col("cost $").str.pad_start(width))  # right-aligned like a number
    status = "`oabench status`" if suite is None else f"`oabench status --suite {suite}`"
    notes = []
    if incomplete and by_ability:
        notes.append(f"* unranked: a run of one of its editions is incomplete ({status})")
    elif incomplete and suite is None:
        notes.append(
            "* incomplete: not every question of its editions answered, so unranked (`oabench status`)"
        )
    elif incomplete:
        notes.append(
            f"* incomplete in suite {suite}: an edition of it not run, or not every question answered, so "
            f"unranked ({status})"
        )
    if retired:
        notes.append(
            "† retired: its expiration_date in the model catalogue has passed; kept, never requested again"
        )
    if any(row.get("cost_source") == "estimated" for row in board.iter_rows(named=True)):
        notes.append(f"{ESTIMATED_MARK} after a cost: {ESTIMATED_NOTE}")
    return frame, "\n".join(notes) or None


def accuracy_text(accuracy: float | None, low: float | None, high: float | None) -> str | None:
    """An accuracy with its 95% interval as the terminal's tables show it: `0.850 [0.799–0.890]`."""
    if accuracy is None:
        return None
    if low is None or high is None:
        return f"{accuracy:.3f}"
    return f"{accuracy:.3f} [{low:.3f}–{high:.3f}]"


ESTIMATED_NOTE = "estimated: tokens x a price snapshot, as not every call reported its cost (cost_source)"
# After an estimated cost; `*` after a model key says it is unranked, so the two never share a sign.
ESTIMATED_MARK = "~"


def cost_text(cost: float | None, source: str | None) -> str:
    """`effective_cost_usd` as every view shows it: the reported cost, else the estimate marked `~`.

    A reported cost is followed by a space, so the digits of both kinds line up in a column.
    """
    if cost is None:
        return NULL_TEXT + " "
    return render_cell(cost) + (ESTIMATED_MARK if source == "estimated" else " ")
