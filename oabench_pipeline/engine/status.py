"""`oabench status`: where every benchmark cell (edition × model key) stands, and what completing it costs.

Read-only, but for one write: runs the instance says are in progress that no live process holds are
closed first (`engine/stale_runs.py`), so that `running` means a live process. The state of a cell comes
from three places:
- the warehouse: the cell's `inferences` partition (answered / error / missing questions), and the data
  versions its files recorded of the partitions they were built from, against those partitions' versions
  today (`inference/freshness.py`: a re-parse into the same rows stales nothing);
- the response log and the registry: `replicate_plans` says which requests a run would still send (the
  same plan `oabench run` uses; counts are over the run it would resume, else the newest clean run), and a live row whose request hash differs from today's request means the
  model configuration or the prompts changed since it was asked;
- the Dagster instance, when given: whether the cell's last `inferences` run failed or is in progress
  (a failed run leaves the partition's last good rows in place, so the rows alone cannot tell).

States: `complete`; `missing` (no rows yet, only an incomplete imported run, or the edition is not ingested);
`failed` (last run failed, with its one-line reason from the instance's event log, or error or unanswered
rows); `interrupted` (a signal stopped its last run, or Dagster terminated it: the answers its response log keeps,
and the command that resumes it); `stale` (complete, but built before its inputs changed, or its response log has damaged lines,
each named `file:line: why`); `queued` (a run waits in the instance's run queue, no process holds the cell:
the daemon of `oabench ui` starts it); `running` (a live process holds the cell); `batch pending` (its batches
are open at the provider: their ids, ages and lines, from the cell's batch journal).
Cells are the registry's models × the editions of the registry (plus discovered ones), and the existing
cells of keys no longer in the registry (their history; they cannot be run again, so only cells that
exist are listed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import polars as pl
from dagster import (
    AssetKey,
    AssetPartitionStatus,
    DagsterEvent,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    RunsFilter,
    partition_loading_context,
)

from oabench_pipeline.catalogue.watch import MonthBudget, month_budget
from oabench_pipeline.core.editions import Suite, format_editions, known_editions
from oabench_pipeline.core.models_registry import ModelConfig, automatic_models, known_models
from oabench_pipeline.core.runs import live_run_id, with_logical_run_ids
from oabench_pipeline.core.watch_policy import WatchPolicyError, load_watch_policy
from oabench_pipeline.engine.runs import (
    cell_failure_line,
    interruption,
    run_failure_reason,
    step_failure_messages,
)
from oabench_pipeline.engine.stale_runs import IN_PROGRESS, close_dead_runs, why_dead
from oabench_pipeline.inference.cell import ANSWERED, CellPlan
from oabench_pipeline.inference.cell_lock import cell_lock_path, is_held
from oabench_pipeline.inference.cost import PRICING_HINT, UNKNOWN_PRICE, estimated_prompt_cost
from oabench_pipeline.inference.freshness import (
    damaged_log_lines,
    planned_replicates,
    scores_are_current,
    stale_reasons,
    summary_editions,
)
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared import dagster_internals
from oabench_pipeline.shared.partitions import cell_partition_key, model_edition_partitions
from oabench_pipeline.warehouse import DamagedPartitionError, Warehouse

PARTITION_TAG = "dagster/partition"
CellState = Literal[
    "complete", "missing", "failed", "interrupted", "stale", "queued", "running", "batch pending"
]
STATES: tuple[CellState, ...] = (
    "complete",
    "missing",
    "failed",
    "interrupted",
    "stale",
    "queued",
    "running",
    "batch pending",
)
# Runs the instance counts as in progress that no process executes yet: the run queue's.
WAITING_RUN_STATUSES = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED]
UNKNOWN_COST = UNKNOWN_PRICE


@dataclass(frozen=True)
class CellStatus:
    """One row of `oabench status`. Counts are over the edition's active questions (None: not ingested)."""

    edition: str
    model_key: str
    state: CellState
    answered: int | None
    errors: int | None
    missing: int | None
    to_send: int | None
    """Requests a run would send now (None: unknown, the key is not in the registry)."""
    est_cost_usd: float | None
    """Prompt tokens × the latest listed price (None: no price snapshot lists the model, or unknown)."""
    reason: str


@dataclass(frozen=True)
class StatusReport:
    cells: list[CellStatus]
    unpriced: list[str] = field(default_factory=list)
    """API model keys with requests to send and no price snapshot: their cost is not in the total."""
    catalogue_month: MonthBudget | str | None = None
    """This month's spend of the runs the watch policy pays for (None: no policy and no such model; text:
    why it cannot be told, e.g. a mistake in the policy file)."""
    uningested: list[str] = field(default_factory=list)
    """Editions listed and not ingested: what completing their cells costs is unknown until they are."""

    @property
    def complete(self) -> bool:
        return all(cell.state == "complete" for cell in self.cells)

    def counts(self) -> dict[str, int]:
        return {state: sum(c.state == state for c in self.cells) for state in STATES}

    def est_cost_usd(self) -> float:
        """The estimates that are known, summed (the cells of `unpriced` keys are not in it)."""
        return sum(c.est_cost_usd or 0.0 for c in self.cells)

    def frame(self) -> pl.DataFrame:
        schema = {
            "edition": pl.String,
            "model_key": pl.String,
            "state": pl.String,
            "answered": pl.Int64,
            "errors": pl.Int64,
            "missing": pl.Int64,
            "to_send": pl.Int64,
            "est_cost_usd": pl.Float64,
            "reason": pl.String,
        }
        return pl.DataFrame([asdict(c) for c in self.cells], schema=schema)

    def display_frame(self) -> pl.DataFrame:
        """The table a person reads: an unknown cost says so instead of showing nothing (or $0)."""
        costs = [
            UNKNOWN_COST
            if c.est_cost_usd is None and (c.to_send is None or c.to_send > 0)
            else f"${c.est_cost_usd or 0:.4f}"
            for c in self.cells
        ]
        return self.frame().with_columns(pl.Series("est_cost_usd", costs, dtype=pl.String))

    def summary(self) -> str:
        counts = ", ".join(f"{n} {state}" for state, n in self.counts().items() if n)
        priced = [c for c in self.cells if c.est_cost_usd is not None and (c.to_send or 0) > 0]
        not_ingested = format_editions(int(e) for e in self.uningested)
        uningested = f"edition(s) {not_ingested} not ingested: `oabench ingest --editions {not_ingested}`"
        if (self.unpriced or self.uningested) and not priced:
            cost = f"{UNKNOWN_COST}: {PRICING_HINT}" if self.unpriced else f"unknown ({uningested})"
        else:
            cost = f"${self.est_cost_usd():.4f}"
            if self.unpriced:
                cost += f" + unknown for {', '.join(self.unpriced)} (no price snapshot: {PRICING_HINT})"
            if self.uningested:
                cost += f" + unknown for {uningested}"
        line = f"{len(self.cells)} cell(s): {counts or 'none'}; est. prompt cost to complete {cost}"
        month = self.catalogue_month
        return line + (
            f"\ncatalogue watch: {month if isinstance(month, str) else month.line()}" if month else ""
        )

    def complete_keys(self, suite: Suite) -> tuple[list[str], list[str]]:
        """(keys complete on every edition of `suite`, every key listed): the first are ranked in the
        suite once the leaderboard is rebuilt (what `oabench run` does after its cells)."""
        editions: dict[str, set[str]] = {}
        for cell in self.cells:
            editions.setdefault(cell.model_key, set())
            if cell.state == "complete":
                editions[cell.model_key].add(cell.edition)
        wanted = {str(e) for e in suite.editions}
        return sorted(k for k, done in editions.items() if wanted <= done), sorted(editions)

    def suite_summary(self, suite: Suite) -> str:
        complete, keys = self.complete_keys(suite)
        text = f"suite {suite.label}: {len(complete)} of {len(keys)} model key(s) complete on every edition"
        return text + (f" ({', '.join(complete)})" if complete else "")

    def suite_json(self, suite: Suite) -> dict:
        complete, keys = self.complete_keys(suite)
        return {
            "name": suite.name,
            "editions": list(suite.editions),
            "complete_keys": complete,
            "model_keys": keys,
        }

    def as_json(self) -> dict:
        return {
            "complete": self.complete,
            "counts": self.counts(),
            # A total with an unknown part is unknown (null), never its known parts read as the whole.
            "est_cost_usd": None if self.unpriced or self.uningested else self.est_cost_usd(),
            "est_cost_known_usd": self.est_cost_usd(),
            "unpriced": self.unpriced,
            "catalogue_month": self.catalogue_month.as_json()
            if isinstance(self.catalogue_month, MonthBudget)
            else self.catalogue_month,
            "cells": [asdict(c) for c in self.cells],
        }


# ---------------------------------------------------------------------------------------------------------
# Which cells
# ---------------------------------------------------------------------------------------------------------


def known_edition_keys(settings: Settings) -> list[str]:
    """The registry's editions plus those the portal sensor discovered, as sorted partition keys."""
    return sorted(known_editions(settings.editions_file, settings.discovered_editions_file), key=int)


def history_cells(store: Warehouse) -> list[tuple[str, str]]:
    """(edition, model key) of every cell with an `inferences` partition; its file name is `43|model-key`."""
    cells = []
    for key in store.partitions("inferences"):
        edition, sep, model_key = key.partition("|")
        if sep:
            cells.append((edition, model_key))
    return cells


def select_cells(
    editions: Sequence[str],
    registry: Iterable[str],
    history: Iterable[tuple[str, str]],
    only_editions: Sequence[str] | None = None,
    only_models: Sequence[str] | None = None,
) -> list[tuple[str, str]]:
    """Registry keys × editions, plus the existing cells of keys that left the registry; then filters."""
    registry = list(registry)
    cells = {(e, m) for e in editions for m in registry}
    cells |= {(e, m) for e, m in history if m not in registry}
    if only_editions:
        cells = {c for c in cells if c[0] in only_editions}
    if only_models:
        cells = {c for c in cells if c[1] in only_models}
    return sorted(cells, key=lambda c: (int(c[0]), c[1]))


# ---------------------------------------------------------------------------------------------------------
# One cell
# ---------------------------------------------------------------------------------------------------------


def run_states(instance: DagsterInstance | None, cells: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Cell key → "failed" / "running" from the instance's view of `inferences` (partitions it knows)."""
    if instance is None or not cells:
        return {}
    keys = [str(cell_partition_key(m, e)) for e, m in cells]
    with partition_loading_context(dynamic_partitions_store=instance):
        known = set(model_edition_partitions.get_partition_keys())
        statuses = instance.get_status_by_partition(
            AssetKey("inferences"), [k for k in keys if k in known], model_edition_partitions
        )
    wanted = {AssetPartitionStatus.FAILED: "failed", AssetPartitionStatus.IN_PROGRESS: "running"}
    return {k: wanted[s] for k, s in (statuses or {}).items() if s in wanted}


def live_run_state(
    instance: DagsterInstance | None, store: Warehouse, model_key: str, edition: str, runs: dict[str, str]
) -> str | None:
    """The run state corrected by the cell's lock: "running" only while a live process answers the cell.

    A process holding the cell's lock is running it, whatever the instance says. The instance's "in
    progress" without a lock holder is "queued" when no run of the cell has started (its runs wait in the
    run queue, e.g. left there by an `oabench ui` that stopped), and "dead" when no live process can finish
    any of its runs in progress (`engine/stale_runs.py`: a lock holder that died, a PID that is gone or a
    zombie, a launched run whose worker never started and whose command died).
    """
    key = str(cell_partition_key(model_key, edition))
    lock = cell_lock_path(store.root, model_key, edition)
    if is_held(lock):
        return "running"
    state = runs.get(key)
    if state != "running" or instance is None:
        return state
    in_progress = instance.get_runs(RunsFilter(statuses=IN_PROGRESS, tags={PARTITION_TAG: key}), limit=10)
    if not in_progress:
        waiting = instance.get_runs(
            RunsFilter(statuses=WAITING_RUN_STATUSES, tags={PARTITION_TAG: key}), limit=1
        )
        return "queued" if waiting else state
    alive = [run for run in in_progress if why_dead(instance, run, store.root) is None]
    return state if alive else "dead"


def last_failure(
    instance: DagsterInstance | None, model_key: str, edition: str
) -> tuple[str, str | None] | None:
    """(why the cell's newest failed run failed, in one line, as `oabench run` printed it; "interrupted
    (SIGINT)" when a signal stopped it, else None), read from the instance's event log. None: no failed
    run is recorded."""
    if instance is None:
        return None
    key = str(cell_partition_key(model_key, edition))
    runs = instance.get_runs(
        RunsFilter(statuses=[DagsterRunStatus.FAILURE], tags={PARTITION_TAG: key}), limit=1
    )
    if not runs:
        return None
    failures, stopped = _how_it_stopped(instance, runs[0].run_id)
    messages = step_failure_messages(failures)
    if not messages:  # no step said why: how its process ended, or why it was marked failed
        wanted = {DagsterEventType.RUN_FAILURE, DagsterEventType.ENGINE_EVENT}
        reason = run_failure_reason(dagster_internals.run_events(instance, runs[0].run_id, wanted))
        messages = [reason] if reason else []
    return cell_failure_line(model_key, edition, messages), stopped


def _how_it_stopped(instance: DagsterInstance, run_id: str) -> tuple[list[DagsterEvent], str | None]:
    """(the run's step failures, "interrupted (SIGINT)" when a signal stopped its step, "terminated" when it
    was asked to terminate, else None). A run asked to terminate that then failed (its process stopped while
    starting) was stopped, too."""
    wanted = {DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_CANCELING}
    events = dagster_internals.run_events(instance, run_id, wanted)
    asked_to_stop = any(event.event_type == DagsterEventType.RUN_CANCELING for event in events)
    failures = [event for event in events if event.is_step_failure]
    return failures, interruption(failures) or ("terminated" if asked_to_stop else None)


def terminated_cells(instance: DagsterInstance | None, keys: Iterable[str]) -> dict[str, str]:
    """Cell key → how its newest run stopped, for cells whose newest run was terminated (CANCELED: a Ctrl-C
    of `oabench run`, a UI terminate): "interrupted (SIGINT)" when its step said so, else "terminated".
    Dagster counts such a partition neither failed nor in progress, yet the cell was stopped mid-way and its
    response log keeps what arrived."""
    if instance is None:
        return {}
    wanted = set(keys)
    canceled = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.CANCELED]), limit=1000)
    candidates = {run.tags[PARTITION_TAG] for run in canceled if run.tags.get(PARTITION_TAG) in wanted}
    stopped = {}
    for key in candidates:
        (newest,) = instance.get_runs(RunsFilter(tags={PARTITION_TAG: key}), limit=1)
        if newest.status != DagsterRunStatus.CANCELED:
            continue
        stopped[key] = _how_it_stopped(instance, newest.run_id)[1] or "terminated"
    return stopped


def _counts(questions: pl.DataFrame, rows: pl.DataFrame) -> tuple[int, int, int]:
    """(answered, errors, missing) over the active questions."""
    # Python over the columns' values, not Series masks: asked of every cell, thousands of them, and each
    # Series operation costs more than the loop over a cell's few rows.
    active = {
        q
        for q, s in zip(questions["qid"].to_list(), questions["status"].to_list(), strict=True)
        if s == "active"
    }
    if rows.is_empty():
        return 0, 0, len(active)
    replied, errored = set(), set()
    columns = (rows[name].to_list() for name in ("qid", "error", "raw_response"))
    for qid, error, raw_response in zip(*columns, strict=True):
        if error is not None:
            errored.add(qid)
        elif raw_response is not None:  # REPLIED
            replied.add(qid)
    answered = replied & active  # an empty final reply too: recorded, invalid
    errors = (errored & active) - answered
    return len(answered), len(errors), len(active - answered - errors)


def _plans(
    store: Warehouse, model: ModelConfig, edition: str, questions: pl.DataFrame, rows: pl.DataFrame
) -> list[CellPlan]:
    """The live replicates `oabench run` would resume or start now (one complete run wanted)."""
    return planned_replicates(store, model, edition, questions, rows, 1)


def _current_run_rows(
    store: Warehouse,
    edition: str,
    questions: pl.DataFrame,
    rows: pl.DataFrame,
    model: ModelConfig | None,
    plans: list[CellPlan],
) -> pl.DataFrame:
    """The rows of the run the cell's state is about: the live replicate a run would resume, else the
    newest complete run (what the leaderboard counts), else the newest run."""
    if rows.is_empty():
        return rows
    if model is not None and plans:
        return rows.filter(pl.col("run_id") == live_run_id(model.key, plans[0].replicate))
    if rows["run_id"].null_count() == 0 and rows["run_id"].n_unique() == 1:
        return rows  # one run (the common case): it is the one, whichever rule below chose
    active = set(questions.filter(pl.col("status") == "active")["qid"])
    by_summary = summary_editions(store, rows)
    runs = rows.group_by("run_id").agg(
        newest=pl.col("created_at").max(),
        source=pl.col("source").first(),
        errors=pl.col("error").is_not_null().sum(),
        replied=pl.col("qid").filter(pl.col("error").is_null() & ~pl.col("skipped").fill_null(False)),
    )

    def is_complete(run: dict) -> bool:  # the rules of core/runs.py, for one cell's few runs
        if run["source"] == "imported":
            return int(edition) in by_summary.get(run["run_id"], [])
        return not run["errors"] and active <= set(run["replied"])

    complete = [r["run_id"] for r in runs.iter_rows(named=True) if is_complete(r)]
    candidates = runs.filter(pl.col("run_id").is_in(complete)) if complete else runs
    chosen = candidates.sort("newest", "run_id", nulls_last=True)["run_id"][-1]
    return rows.filter(pl.col("run_id") == chosen)


def _to_complete(
    store: Warehouse, model: ModelConfig | None, plans: list[CellPlan]
) -> tuple[int | None, float | None, bool]:
    """(requests to send, estimated prompt cost, unpriced) for the cell as a run would plan it now."""
    if model is None:
        return None, None, False
    if model.kind == "baseline":
        return 0, 0.0, False  # answered offline: no call, no cost
    pending = [request for plan in plans for request in plan.pending]
    if not pending:
        return 0, 0.0, False
    cost = estimated_prompt_cost(store, model, pending)
    return len(pending), cost, cost is None


def cell_status(
    store: Warehouse,
    edition: str,
    model_key: str,
    model: ModelConfig | None,
    questions: pl.DataFrame,
    run_state: str | None,
    failure: str | None = None,
    read: pl.DataFrame | None = None,
) -> tuple[CellStatus, bool]:
    """The status of one cell of an ingested edition, and whether its cost is unknown for want of a price.

    `failure`: why its last run failed, in one line ("interrupted (SIGINT)" when a signal stopped it).
    `read`: the cell's `inferences` rows when already read (`read_cells`; None: read here)."""
    cell_key = str(cell_partition_key(model_key, edition))
    # While a run appends to the log, its last line may be half-written for an instant: not damage.
    damaged_log = None if run_state == "running" else _damaged_log_note(store, model_key, edition)
    try:
        rows = with_logical_run_ids(store.read("inferences", cell_key) if read is None else read, model_key)
    except DamagedPartitionError as error:
        # Status reports, it does not repair: `oabench run` sets the file aside and rebuilds it.
        reason = "; ".join(filter(None, [str(error), damaged_log]))
        return CellStatus(edition, model_key, "failed", None, None, None, None, None, reason), False
    plans = (
        _plans(store, model, edition, questions, rows)
        if model is not None and model.kind != "baseline"
        else []
    )
    current = _current_run_rows(store, edition, questions, rows, model, plans)
    answered, errors, missing = _counts(questions, current)
    kept = 0
    if run_state in ("failed", "interrupted") and plans:
        # A stopped run wrote no partition: the answers it received are in the response log only.
        kept = len(plans[0].requests) - len(plans[0].pending)
        if kept > answered:
            answered, errors = kept, min(errors, len(plans[0].requests) - kept)
            missing = len(plans[0].requests) - answered - errors
    to_send, cost, unpriced = _to_complete(store, model, plans)
    state, reason = _state(
        store, edition, cell_key, rows, model, questions, run_state, errors, missing, failure, kept
    )
    if damaged_log:
        state = "stale" if state == "complete" else state
        reason = "; ".join(filter(None, [reason, damaged_log]))
    if model is None:
        reason = "; ".join(filter(None, [reason, "key not in the models registry (history)"]))
    status = CellStatus(edition, model_key, state, answered, errors, missing, to_send, cost, reason)
    return status, unpriced


def _incomplete_import(questions: pl.DataFrame, rows: pl.DataFrame) -> str | None:
    """What the cell holds when its only rows are imported runs that left active questions unanswered (a
    published run its authors aborted, or that ended with error rows), else None. Such a cell is missing, not failed: it has no run to
    count, and nothing of this pipeline failed (`published_runs` records it as an observation, so the UI
    shows the partition as missing too)."""
    if rows.is_empty() or any(s is not None and s != "imported" for s in rows["source"].to_list()):
        return None
    active = set(questions.filter(pl.col("status") == "active")["qid"])
    answered = set(rows.filter(ANSWERED)["qid"]) & active
    if answered == active:
        return None
    return f"an incomplete imported run only ({len(answered)} of {len(active)} answered: kept, shown, not ranked)"


def run_command(model_key: str, edition: str) -> str:
    """The command that completes one cell (resuming what it kept: nothing answered is asked again)."""
    return f"oabench run --models {model_key} --editions {edition}"


def _damaged_log_note(store: Warehouse, model_key: str, edition: str) -> str | None:
    """What the status says of a response log with damaged lines: the first, and how many more."""
    damaged = damaged_log_lines(store, model_key, edition)
    if not damaged:
        return None
    more = f" (and {len(damaged) - 1} more damaged line(s))" if len(damaged) > 1 else ""
    return f"damaged response log: {damaged[0]}{more}; `{run_command(model_key, edition)}` sets them aside"


def _state(
    store: Warehouse,
    edition: str,
    cell_key: str,
    rows: pl.DataFrame,
    model: ModelConfig | None,
    questions: pl.DataFrame,
    run_state: str | None,
    errors: int,
    missing: int,
    failure: str | None = None,
    kept: int = 0,
) -> tuple[CellState, str]:
    model_key = cell_key.partition("|")[2]
    logged = f"; {kept} answer(s) kept in its response log" if kept else ""

    def then(action: str) -> str:
        """The command that acts on the cell; none for a key that left the registry (it cannot run)."""
        return f"; `{run_command(model_key, edition)}` {action}" if model is not None else ""

    if run_state == "running":
        return "running", "a run is materializing it"
    if run_state == "queued":
        return "queued", (
            "a run of it waits in the Dagster run queue and no process answers it yet: the daemon of "
            "`oabench ui` starts it" + then("answers it now instead")
        )
    if run_state == "interrupted":
        return "interrupted", f"last run {failure or 'interrupted'}{logged}" + then(
            "resumes it (nothing kept is asked again)"
        )
    if run_state == "dead":
        return "failed", "its last run died without finishing (process killed?)" + then("resumes it")
    if rows.is_empty():
        if run_state == "failed":
            why = f": {failure}" if failure else ""
            return "failed", f"last run failed before writing any row{why}{logged}" + then("runs it again")
        return "missing", "never run"
    if run_state is None and (incomplete := _incomplete_import(questions, rows)):
        return "missing", incomplete + then("answers it")
    if run_state == "failed":
        why = f": {failure}" if failure else ""
        return "failed", f"last run failed (the partition keeps its previous rows){why}{logged}" + then(
            "runs it again"
        )
    if errors or missing:
        return "failed", f"{errors} error row(s), {missing} unanswered question(s)" + then("asks them again")
    reasons = stale_reasons(store, edition, cell_key, rows, model, questions)
    if not scores_are_current(store, model_key, edition):
        reasons.append("scores older than the answers, or unreadable")
    if reasons:
        return "stale", "; ".join(reasons) + then("brings it up to date")
    return "complete", ""


# ---------------------------------------------------------------------------------------------------------
# Everything
# ---------------------------------------------------------------------------------------------------------


def collect_status(
    settings: Settings,
    instance: DagsterInstance | None = None,
    only_editions: Sequence[str] | None = None,
    only_models: Sequence[str] | None = None,
) -> StatusReport:
    """The status of every cell; `instance` adds the last run's outcome (failed / running)."""
    store = Warehouse(settings.warehouse_path)
    registry = {m.key: m for m in known_models(settings.models_files, settings.catalogue_models_file)}
    ingested = set(store.partitions("questions"))
    editions = sorted(set(known_edition_keys(settings)) | ingested, key=int)
    cells = select_cells(editions, registry, history_cells(store), only_editions, only_models)
    if instance is not None:
        # Runs no live process can finish (a killed `oabench run`'s) are closed first: a run left in
        # progress would be counted running, and hold a slot of the run queue, forever.
        close_dead_runs(instance, store.root)
    runs = run_states(instance, [c for c in cells if c[0] in ingested])
    terminated = terminated_cells(
        instance, (str(cell_partition_key(m, e)) for e, m in cells if e in ingested)
    )
    statuses, unpriced = [], set()
    questions_by_edition = {e: store.read("questions", e) for e in {c[0] for c in cells} & ingested}
    keys_by_edition: dict[str, list[str]] = {}
    for edition, model_key in cells:
        keys_by_edition.setdefault(edition, []).append(str(cell_partition_key(model_key, edition)))
    read_edition, edition_rows = None, {}
    for edition, model_key in cells:
        if edition not in ingested:
            reason = f"edition not ingested: `oabench ingest --editions {edition}`"
            statuses.append(CellStatus(edition, model_key, "missing", None, None, None, None, None, reason))
            continue
        if edition != read_edition:  # the cells come edition by edition: one read of each edition's cells
            read_edition, edition_rows = edition, read_cells(store, keys_by_edition[edition])
        run_state = live_run_state(instance, store, model_key, edition, runs)
        key = str(cell_partition_key(model_key, edition))
        failure: tuple[str, str | None] | None
        # The newest run terminated says how the cell stopped, before any older failed run does.
        if run_state in (None, "failed") and key in terminated:
            run_state, failure = "interrupted", (terminated[key], terminated[key])
        else:
            failure = last_failure(instance, model_key, edition) if run_state == "failed" else None
            if failure is not None and failure[1] is not None:
                run_state = "interrupted"
        status, no_price = cell_status(
            store,
            edition,
            model_key,
            registry.get(model_key),
            questions_by_edition[edition],
            run_state,
            failure[1] or failure[0] if failure is not None else None,
            edition_rows.get(key),
        )
        statuses.append(with_open_batches(store, status, run_state))
        if no_price:
            unpriced.add(model_key)
    uningested = sorted({e for e, m in cells if e not in ingested and m in registry}, key=int)
    return StatusReport(statuses, sorted(unpriced), catalogue_month(settings, store), uningested)


def read_cells(store: Warehouse, keys: Sequence[str]) -> dict[str, pl.DataFrame]:
    """Cell key → its `inferences` rows, for the cells of `keys` with a partition, in one read of their files
    (one read per cell cost more than the rest of its status, for the thousands of cells `status` lists).
    Without the reasoning, which status does not read (for some models a megabyte a reply). Empty when
    the files cannot be read together (a damaged one, an older file's columns): each cell is then read
    alone, and a damaged file reported as such."""
    paths = {str(path): key for key in keys if (path := store.partition_path("inferences", key)).is_file()}
    if not paths:
        return {}
    try:
        frame = (
            pl.scan_parquet(list(paths), include_file_paths=_FILE_COLUMN, glob=False)
            .drop("reasoning", strict=False)
            .collect()
        )
    except (pl.exceptions.PolarsError, OSError):
        return {}
    by_file = frame.partition_by(_FILE_COLUMN, as_dict=True, maintain_order=True, include_key=False)
    empty = frame.clear().drop(_FILE_COLUMN)  # a partition written with no row
    return {key: by_file.get((path,), empty) for path, key in paths.items()}


_FILE_COLUMN = "__oabench_file"


def with_open_batches(store: Warehouse, status: CellStatus, run_state: str | None) -> CellStatus:
    """`batch pending` for a cell whose batches (`oabench run --batch`) are still open at the provider, with
    their ids, ages and line counts from the cell's batch journal; a running cell stays `running`."""
    from oabench_pipeline.inference.batches.cells import open_batches, pending_line

    batches = open_batches(store.root, status.model_key, status.edition)
    if not batches or run_state == "running":
        return status
    reason = f"{pending_line(batches)}; `oabench run --batch` (or batch_results_sensor) collects it"
    return dataclasses.replace(status, state="batch pending", reason=reason)


def catalogue_month(settings: Settings, store: Warehouse) -> MonthBudget | str | None:
    """This month's automatic spend against the watch policy's budget, when either exists."""
    automatic = automatic_models(settings.models_files, settings.catalogue_models_file)
    try:
        policy = load_watch_policy(settings.watch_file)
    except WatchPolicyError as error:  # status still reports every cell; the policy's mistake in one line
        return f"watch policy unusable: {error}"
    if policy is None and not automatic:
        return None
    return month_budget(store, automatic, policy)
