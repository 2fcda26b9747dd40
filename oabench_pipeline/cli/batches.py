"""`oabench run --batch`'s follow loop, and `oabench batches` (list; `cancel ID`): the cells' batches as their
journals record them (`inference/batches/cells.py`, docs/batch.md)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import click

from oabench_pipeline.cli.group import main
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.batches.cells import (
    BATCH_API_HINT,
    CellBatch,
    JournalKind,
    all_batches,
    open_batches,
    open_transport,
    pending_line,
    ready_to_collect,
)
from oabench_pipeline.inference.batches.transport import BatchApiError, BatchInfo, BatchTransport
from oabench_pipeline.inference.cell import cell_name
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

POLL_ENV = "OABENCH_BATCH_POLL_S"
DEFAULT_POLL_S = 30.0

Cell = tuple[ModelConfig, str]
C = TypeVar("C")
Followed = tuple[str, ModelConfig, JournalKind, str]
"""A followed cell's name (its failures' key), sender, journal kind and other dimension (`cells.py`)."""


def phase1_cell(cell: Cell) -> Followed:
    model, edition = cell
    return cell_name(model.key, edition), model, "phase1", edition


def refuse_without_batch_api(models: list[ModelConfig]) -> None:
    """`--batch` for a model with no batch API: one line saying how to set it."""
    missing = [m.key for m in models if m.kind == "api" and m.batch_api is None]
    if missing:
        raise click.UsageError(f"--batch: {', '.join(missing)} has no batch_api: {BATCH_API_HINT}")


def _transport(model: ModelConfig) -> BatchTransport:
    from oabench_pipeline.inference.resources import ModelClientResource

    assert model.batch_api is not None
    settings = Settings.from_env()
    client = ModelClientResource(timeout_s=settings.model_timeout_s, backoff_base_s=settings.model_backoff_s)
    return open_transport(model.batch_api, client.endpoint(model))


def follow_batches(
    settings: Settings,
    warehouse: Warehouse,
    cells: list[C],
    failures: dict[str, str],
    relaunch: Callable[[list[C]], dict[str, str]],
    describe: Callable[[C], Followed] = phase1_cell,  # type: ignore[assignment]
    command: str = "oabench run --batch",
) -> dict[str, str]:
    """Poll the cells' open batches until none is left, relaunching a cell's run (which collects, and
    submits what failed) as soon as one of its batches finished; a progress line per poll. Ctrl-C leaves
    the batches running at the provider and says how to collect them (`command`). Returns the failures,
    updated. `describe` says where a cell's journal is (1st-phase cells by default)."""
    poll_s = float(os.environ.get(POLL_ENV, DEFAULT_POLL_S))
    transports: dict[str, BatchTransport] = {}

    def open_of(cell: C) -> list[CellBatch]:
        _, model, kind, other = describe(cell)
        return open_batches(warehouse.root, model.key, other, kind)

    try:
        while not interrupts.requested():
            waiting = {describe(c)[0]: (c, batches) for c in cells if (batches := open_of(c))}
            if not waiting:
                return failures
            ready: list[C] = []
            # Keyed by cell and id: two providers may each number a batch `batch_0001`.
            infos: dict[tuple[str, str], BatchInfo] = {}
            for name, (cell, batches) in waiting.items():
                model = describe(cell)[1]
                transport = transports.get(model.key) or transports.setdefault(model.key, _transport(model))
                statuses = {
                    b.batch_id: transport.status(b.batch_id) for b in batches if b.batch_id is not None
                }
                infos.update({(name, batch_id): info for batch_id, info in statuses.items()})
                if ready_to_collect(batches, statuses.__getitem__):  # each batch read once a poll
                    ready.append(cell)
            click.echo(_progress(waiting, infos), err=True)
            if ready:
                outcome = relaunch(ready)
                for cell in ready:
                    name = describe(cell)[0]
                    failures.pop(name, None)
                    if name in outcome:
                        failures[name] = outcome[name]
                continue
            _sleep(poll_s)
        left = [b for c in cells for b in open_of(c)]
        if left:
            click.echo(
                f"{len(left)} batch(es) left running at the provider ({', '.join(str(b.batch_id) for b in left)}):"
                f" nothing is lost; `{command}` with the same options collects them (or "
                "`oabench batches` to see them)",
                err=True,
            )
        return failures
    finally:
        for transport in transports.values():
            transport.close()


def _progress(waiting: dict[str, tuple[C, list[CellBatch]]], infos: dict[tuple[str, str], BatchInfo]) -> str:
    lines = sum(b.lines for _, batches in waiting.values() for b in batches)
    done = sum(i.completed or 0 for i in infos.values())
    failed = sum(i.failed or 0 for i in infos.values())
    finished = sum(1 for i in infos.values() if i.terminal)
    return (
        f"batches: {len(infos)} open in {len(waiting)} cell(s), {finished} finished; "
        f"{done}/{lines} lines done, {failed} failed"
    )


def _sleep(seconds: float) -> None:
    """Sleep, waking at once on Ctrl-C."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not interrupts.requested():
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


# ------------------------------------------------------------------------------------------ oabench batches


@main.group(invoke_without_command=True)
@click.pass_context
def batches(ctx: click.Context) -> None:
    """The cells' batches (`oabench run --batch`): open ones first, then the recent ones."""
    if ctx.invoked_subcommand is not None:
        return
    warehouse = Warehouse(Settings.from_env().warehouse_path)
    found = all_batches(warehouse.root)
    if not found:
        click.echo("no batches: `oabench run --batch` sends some")
        return
    found.sort(key=lambda b: (not b.is_open, -b.recorded_at.timestamp()))
    for batch in found[:50]:
        click.echo(_batch_line(batch))


def _batch_line(batch: CellBatch) -> str:
    state = (
        pending_line([batch]).removeprefix("batch pending: ")
        if batch.is_open
        else f"{batch.batch_id or '-'} ({batch.closed}"
        + (
            f" {batch.final_status}, {batch.answered} answered, {batch.failed} not"
            if batch.final_status
            else ""
        )
        + f", {batch.lines} lines, age {batch.age()})"
    )
    return f"{batch.label}: {'open' if batch.is_open else 'closed'} {state}"


@batches.command()
@click.argument("batch_id")
def cancel(batch_id: str) -> None:
    """Cancel an open batch at the provider; its unanswered lines are asked again by the next run."""
    from oabench_pipeline.core.models_registry import known_models

    settings = Settings.from_env()
    warehouse = Warehouse(settings.warehouse_path)
    mine = [b for b in all_batches(warehouse.root) if b.batch_id == batch_id]
    if not mine:
        raise click.UsageError(f"no batch {batch_id} in the journals (`oabench batches` lists them)")
    registry = {m.key: m for m in known_models(settings.models_files, settings.catalogue_models_file)}
    model = registry.get(mine[0].model_key)
    if model is None or model.batch_api is None:
        raise click.UsageError(f"{mine[0].model_key} is not in the registry with a batch_api")
    transport = _transport(model)
    try:
        info = transport.cancel(batch_id)
    except BatchApiError as error:
        raise click.ClickException(str(error)) from None
    finally:
        transport.close()
    click.echo(f"{batch_id}: {info.status}; the next `oabench run --batch` collects what it answered")
