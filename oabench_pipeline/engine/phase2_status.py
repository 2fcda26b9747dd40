"""`oabench status --phase 2`: where every 2nd-phase cell stands, and what completing it costs.

Two kinds of cell, as `oabench run --phase 2` and `oabench judge` run them:
- answer cells, model key × edition (`phase2_answers`): the models that have 2nd-phase answers or a response
  log, or that `--models` names (the 2nd phase answers only the models named, so no other is listed);
- judgment cells, judge × judged model (`phase2_judgments`): each judge with judgments or a response log, for
  every model with answers (`oabench judge` judges them all by default).

Read-only. What a cell would send comes from the same plans the commands use (`phase2/plans.py`) over its
response log; the rows from the warehouse; the last run from the Dagster instance, when given. States:
`complete` (nothing to send, every sub-item in the partition); `running` (a process holds the cell's lock);
`queued` (a run waits in the run queue); `interrupted` (its newest run was stopped by a signal or
terminated: the log keeps what arrived); `failed` (its newest run failed, with the one-line reason);
`batch pending` (its batches, `--batch`, are open at the provider: their ids, ages and lines, from the
cell's batch journal); `missing` (anything else left to send). Each row carries the command that completes it and the estimated
prompt cost of what it would send (None: no price snapshot lists the model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote

import polars as pl
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from oabench_pipeline.core.models_registry import ModelConfig, known_models
from oabench_pipeline.core.phase2.protocol import default_judge_ceiling
from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.engine.runs import interruption, one_line, step_failure_messages
from oabench_pipeline.inference.batches.cells import JournalKind, open_batches, pending_line
from oabench_pipeline.inference.cell_lock import is_held
from oabench_pipeline.inference.cost import PRICING_HINT, UNKNOWN_PRICE, estimated_prompt_cost
from oabench_pipeline.inference.response_log import latest_by_hash, read_log
from oabench_pipeline.inference.types import ChatRequest
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared import dagster_internals
from oabench_pipeline.shared.partitions import judgment_partition_key, phase2_cell_partition_key
from oabench_pipeline.warehouse import Warehouse

PARTITION_TAG = "dagster/partition"
ANSWER_JOB, JUDGMENT_JOB = "phase2_answers_cell", "phase2_judgments_cell"
STATES = ("complete", "missing", "failed", "interrupted", "queued", "running", "batch pending")
WAITING = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED]


@dataclass(frozen=True)
class Phase2CellStatus:
    """One row of `oabench status --phase 2`: an answer cell (`kind` "answers", `sender` the model, `of`
    the edition) or a judgment cell ("judgments", `sender` the judge, `of` the judged model)."""

    kind: str
    sender: str
    of: str
    state: str
    done: int
    total: int
    to_send: int | None
    """Requests a run would send now (None: unknown, the key is not in the registry)."""
    est_cost_usd: float | None
    command: str
    reason: str


@dataclass(frozen=True)
class Phase2StatusReport:
    cells: list[Phase2CellStatus]
    unpriced: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return all(cell.state == "complete" for cell in self.cells)

    def display_frame(self) -> pl.DataFrame:
        rows = [
            {
                "cell": f"{c.sender} × {c.of}" if c.kind == "answers" else f"{c.sender} judging {c.of}",
                "kind": c.kind,
                "state": c.state,
                "done": f"{c.done}/{c.total}",
                "to_send": "?" if c.to_send is None else str(c.to_send),
                "est_cost": _cost_text(c),
                "command": "" if c.state == "complete" else c.command,
                "reason": c.reason,
            }
            for c in self.cells
        ]
        return pl.DataFrame(rows) if rows else pl.DataFrame()

    def summary(self) -> str:
        counts = ", ".join(f"{n} {s}" for s in STATES if (n := sum(c.state == s for c in self.cells)))
        cost = sum(c.est_cost_usd or 0.0 for c in self.cells if c.state != "complete")
        line = f"2nd phase: {len(self.cells)} cell(s): {counts or 'none'}; est. cost to complete ${cost:.4f}"
        if self.unpriced:
            line += f" + unknown for {', '.join(self.unpriced)} ({PRICING_HINT})"
        return line

    def as_json(self) -> dict:
        return {
            "cells": [asdict(c) for c in self.cells],
            "complete": self.complete,
            "unpriced": self.unpriced,
        }


def _cost_text(cell: Phase2CellStatus) -> str:
    if cell.to_send == 0:
        return "$0"
    return UNKNOWN_PRICE if cell.est_cost_usd is None else f"${cell.est_cost_usd:.4f}"


def collect_phase2_status(
    settings: Settings,
    instance: DagsterInstance | None = None,
    only_editions: Sequence[str] | None = None,
    only_models: Sequence[str] | None = None,
) -> Phase2StatusReport:
    """Every 2nd-phase answer cell, then every judgment cell; `instance` adds the newest run's outcome."""
    store = Warehouse(settings.warehouse_path)
    registry = {m.key: m for m in known_models(settings.models_files, settings.catalogue_models_file)}
    items = store.read("phase2_items")
    if items.is_empty():
        return Phase2StatusReport([])
    answers = store.read("phase2_answers")
    editions = sorted({str(e) for e in items["edition"]}, key=int)
    if only_editions:
        editions = [e for e in editions if e in set(only_editions)]
    answered = set(answers["model_key"]) if not answers.is_empty() else set()
    logged = _logged_keys(store.root / "responses" / "phase2")
    models = sorted(set(only_models) if only_models else answered | logged)
    cells = [
        _answer_cell(store, instance, registry.get(key), key, edition, items, answers)
        for key in models
        for edition in editions
    ]
    judges = (
        set(store.read("phase2_judgments")["judge_key"]) if store.has_table("phase2_judgments") else set()
    )
    judges |= _logged_keys(store.root / "responses" / "judgments")
    for judge in sorted(judges):
        for key in sorted(answered & set(models) if only_models else answered):
            cells.append(_judgment_cell(store, instance, registry.get(judge), judge, key, items, answers))
    unpriced = sorted(
        {c.sender for c in cells if c.to_send and c.est_cost_usd is None and c.sender in registry}
    )
    return Phase2StatusReport(cells, unpriced)


def _logged_keys(folder: Path) -> set[str]:
    """The model keys with a response-log folder under `folder` (one per sender, URL-quoted)."""
    return {unquote(p.name) for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else set()


def _answer_cell(
    store: Warehouse,
    instance: DagsterInstance | None,
    model: ModelConfig | None,
    model_key: str,
    edition: str,
    all_items: pl.DataFrame,
    answers: pl.DataFrame,
) -> Phase2CellStatus:
    from oabench_pipeline.phase2.plans import (
        ANSWER_REPLICATE,
        answer_request,
        answer_round,
        answers_lock_path,
        edition_items,
        items_from_frame,
        recorded_ceiling,
        request_id,
    )

    items = items_from_frame(edition_items(all_items, edition))
    total = sum(item.turns for item in items)
    partition = str(phase2_cell_partition_key(model_key, edition))
    rows = _rows(answers, model_key, edition)
    answered = rows.filter(pl.col("answer").is_not_null()) if not rows.is_empty() else rows
    done = answered.select("item_id", "turn").unique().height if not answered.is_empty() else 0
    command = f"oabench run --phase 2 --models {model_key} --editions {edition}"
    to_send: int | None = None
    cost: float | None = None
    if model is not None:
        ceiling = recorded_ceiling(rows, live_run_id(model.key, ANSWER_REPLICATE))
        logged = latest_by_hash(read_log(_answers_log(store.root, model_key, edition)))
        pending = answer_round(model, items, logged, ceiling).pending
        waiting = {r.qid for r in pending}
        # Sub-items B behind a pending A: asked once A has its reply (estimated with an empty one).
        later = [
            answer_request(model, item, 2, [""], ceiling)
            for item in items
            if item.turns == 2 and request_id(item.item_id, 1) in waiting
        ]
        to_send, cost = len(pending) + len(later), _cost(store, model, [*pending, *later])
    if done >= total:  # every sub-item answered (an imported run's answers count): nothing to complete
        to_send, cost = 0, 0.0
    lock = answers_lock_path(store.root, model_key, edition)
    state, reason = _state(instance, ANSWER_JOB, partition, is_held(lock), to_send, done, total)
    state, reason, command = _with_open_batches(store, "phase2", model_key, edition, state, reason, command)
    return Phase2CellStatus("answers", model_key, edition, state, done, total, to_send, cost, command, reason)


def _judgment_cell(
    store: Warehouse,
    instance: DagsterInstance | None,
    judge: ModelConfig | None,
    judge_key: str,
    model_key: str,
    all_items: pl.DataFrame,
    answers: pl.DataFrame,
) -> Phase2CellStatus:
    from oabench_pipeline.phase2.judgments import model_answers, standards_by_item
    from oabench_pipeline.phase2.plans import (
        JudgeSetup,
        items_from_frame,
        judgments_lock_path,
        plan_judgments,
    )

    items = {item.item_id: item for item in items_from_frame(all_items)}
    judged = model_answers(answers, model_key, None, items)
    total = sum(len(replies) for _, replies in judged.values())
    partition = str(judgment_partition_key(judge_key, model_key))
    rows = (
        store.read("phase2_judgments", partition) if store.has_table("phase2_judgments") else pl.DataFrame()
    )
    structured = _structured(rows)
    done = 0 if rows.is_empty() else rows.filter(pl.col("structured").fill_null(False) == structured).height
    command = f"oabench judge --judge {judge_key} --models {model_key}" + (
        " --structured" if structured else ""
    )
    to_send: int | None = None
    cost: float | None = None
    templates = _templates(store)
    if judge is not None and templates is not None:
        setup = JudgeSetup(judge, templates, default_judge_ceiling(judge.id), structured)
        logged = latest_by_hash(read_log(_judgments_log(store.root, judge_key, model_key)))
        standards = standards_by_item(store.read("phase2_standards"))
        pending = [j.pending for j in plan_judgments(setup, items, standards, judged, logged) if j.pending]
        to_send, cost = len(pending), _cost(store, judge, pending)
    if done >= total:  # every answer judged (an imported judgment counts): nothing to complete
        to_send, cost = 0, 0.0
    lock = judgments_lock_path(store.root, judge_key, model_key)
    state, reason = _state(instance, JUDGMENT_JOB, partition, is_held(lock), to_send, done, total)
    state, reason, command = _with_open_batches(
        store, "judgments", judge_key, model_key, state, reason, command
    )
    invalid = 0 if rows.is_empty() else rows.filter(~pl.col("valid").fill_null(False)).height
    if state == "complete" and invalid:
        reason = f"{invalid} invalid judgment(s) (no score): `{command} --retry-invalid` asks them again"
    return Phase2CellStatus(
        "judgments", judge_key, model_key, state, done, total, to_send, cost, command, reason
    )


def _with_open_batches(
    store: Warehouse, kind: JournalKind, sender: str, of: str, state: str, reason: str, command: str
) -> tuple[str, str, str]:
    """`batch pending` for a cell whose batches are open at the provider (a running cell stays `running`),
    with their ids, ages and lines; its command then carries `--batch` (a chat run would be refused)."""
    batches = open_batches(store.root, sender, of, kind)
    if not batches or state == "running":
        return state, reason, command
    reason = f"{pending_line(batches)}; `{command} --batch` (or batch_results_sensor) collects it"
    return "batch pending", reason, f"{command} --batch"


def _answers_log(root: Path, model_key: str, edition: str) -> Path:
    from oabench_pipeline.phase2.plans import answers_log_path

    return answers_log_path(root, model_key, edition)


def _judgments_log(root: Path, judge_key: str, model_key: str) -> Path:
    from oabench_pipeline.phase2.plans import judgments_log_path

    return judgments_log_path(root, judge_key, model_key)


def _templates(store: Warehouse) -> dict | None:
    from dagster import Failure

    from oabench_pipeline.phase2.judgments import judge_templates

    try:
        return judge_templates(store)
    except Failure:
        return None


def _structured(rows: pl.DataFrame) -> bool:
    """A cell judged only with `--structured` is completed by it; any other by the free-text prompts."""
    if rows.is_empty() or "structured" not in rows.columns:
        return False
    live = rows.filter(pl.col("source") == "live") if "source" in rows.columns else rows
    return not live.is_empty() and bool(live["structured"].fill_null(False).all())


def _rows(answers: pl.DataFrame, model_key: str, edition: str) -> pl.DataFrame:
    if answers.is_empty():
        return answers
    return answers.filter((pl.col("model_key") == model_key) & (pl.col("edition") == int(edition)))


def _cost(store: Warehouse, model: ModelConfig, requests: list[ChatRequest]) -> float | None:
    return estimated_prompt_cost(store, model, requests) if requests else 0.0


def _state(
    instance: DagsterInstance | None,
    job: str,
    partition: str,
    locked: bool,
    to_send: int | None,
    done: int,
    total: int,
) -> tuple[str, str]:
    """The cell's state and why: its lock, then what is left to send, then how its newest run ended."""
    if locked:
        return "running", "a process holds the cell's lock"
    if done >= total:
        return "complete", ""
    left = (
        f"{total - done} of {total} sub-item(s) left" if to_send is None else f"{to_send} request(s) to send"
    )
    if instance is None:
        return "missing", left
    runs = instance.get_runs(RunsFilter(job_name=job, tags={PARTITION_TAG: partition}), limit=1)
    if not runs:
        return "missing", left
    newest = runs[0]
    if newest.status in WAITING:
        return "queued", f"a run waits in the run queue; {left}"
    if newest.status not in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
        return "missing", left
    wanted = {DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_CANCELING}
    events = dagster_internals.run_events(instance, newest.run_id, wanted)
    failures = [e for e in events if e.is_step_failure]
    stopped = interruption(failures)
    if stopped or newest.status == DagsterRunStatus.CANCELED:
        return "interrupted", f"{stopped or 'terminated'}: the replies received are kept; {left}"
    return "failed", f"{one_line(step_failure_messages(failures))}; {left}"
