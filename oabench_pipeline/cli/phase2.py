"""The 2nd phase on the command line: `oabench run --phase 2` (answers) and `oabench judge` (judgments).

Each cell (model × edition for answers, judge × model for judgments) is a Dagster run launched as
`oabench run`'s cells are (`engine/launch.py`), all at once, followed by the progress bar; Ctrl-C stops
them and nothing received is lost. `--dry-run` prints the calls and their estimated cost and sends nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import click
import polars as pl

from oabench_pipeline.cli.common import _cell_pool, _dagster, ensure_partitions, run_assets
from oabench_pipeline.cli.output import ProgressBar
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.runs import live_run_id
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.batches.cells import BATCH_PRICE_FACTOR, JournalKind, is_batch_pending
from oabench_pipeline.inference.cost import PRICING_HINT, estimated_prompt_tokens, listed_price
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.inference.response_log import latest_by_hash, read_log
from oabench_pipeline.inference.types import ChatRequest
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

if TYPE_CHECKING:
    from oabench_pipeline.engine.launch import RunSpec


@dataclass(frozen=True)
class Cell:
    """One run to launch: its label (as its progress names it), job, partition and config."""

    label: str
    sender: ModelConfig
    job: str
    asset: str
    partition_key: str
    config: dict[str, Any]
    pending: list[ChatRequest]
    """What it would send now (for an answer cell, the first round only: B waits for A's reply)."""
    total: int
    later: tuple[ChatRequest, ...] = ()
    """Answer cells: the sub-items B that follow a pending A, built with an empty reply in place of A's
    (for the estimate only: the real request also carries A's reply)."""
    spent_usd: float = 0.0
    """What the cell's response log says it already paid (the base of its share of `--max-cost-usd`)."""
    of: str = ""
    """The cell's other dimension: the edition (answers), or the judged model's key (judgments)."""

    @property
    def journal_kind(self) -> JournalKind:
        """Its batch journal's kind (`inference/batches/cells.py`)."""
        return "phase2" if self.asset == "phase2_answers" else "judgments"


def phase2_editions(warehouse: Warehouse, wanted: list[str] | None) -> list[str]:
    """The editions whose 2nd phase is ingested (or those of them asked for); a usage error otherwise."""
    items = warehouse.read("phase2_items")
    ingested = sorted({str(e) for e in items["edition"]}, key=int) if not items.is_empty() else []
    if not ingested:
        raise click.UsageError("no 2nd-phase item is ingested yet: run `oabench ingest --phase 2` first")
    if wanted:
        missing = [e for e in wanted if e not in ingested]
        if missing:
            raise click.UsageError(
                f"edition(s) {', '.join(missing)} have no 2nd-phase items (ingested: {', '.join(ingested)})"
            )
        return wanted
    return ingested


def answer_cells(
    warehouse: Warehouse,
    models: list[ModelConfig],
    editions: list[str],
    areas: list[str] | None,
    max_completion_tokens: int | None,
    batch: bool = False,
) -> list[Cell]:
    """Every model × edition of the 2nd phase, with what it would send now."""
    from oabench_pipeline.phase2.plans import (
        ANSWER_REPLICATE,
        answer_round,
        answers_log_path,
        edition_items,
        items_from_frame,
        recorded_ceiling,
    )
    from oabench_pipeline.shared.partitions import phase2_cell_partition_key

    all_items = warehouse.read("phase2_items")
    cells = []
    for model in models:
        for edition in editions:
            frame = edition_items(all_items, edition)
            if areas:
                unknown = sorted(set(areas) - set(frame["area"]))
                if unknown:
                    raise click.UsageError(f"edition {edition} has no 2nd-phase area(s) {', '.join(unknown)}")
                frame = frame.filter(pl.col("area").is_in(areas))
            items = items_from_frame(frame)
            partition = str(phase2_cell_partition_key(model.key, edition))
            existing = warehouse.read("phase2_answers", partition)
            ceiling = max_completion_tokens or recorded_ceiling(
                existing, live_run_id(model.key, ANSWER_REPLICATE)
            )
            logged = latest_by_hash(read_log(answers_log_path(warehouse.root, model.key, edition)))
            config: dict[str, Any] = {"areas": areas} if areas else {}
            if max_completion_tokens:
                config["max_completion_tokens"] = max_completion_tokens
            if batch:
                config["batch"] = True
            cells.append(
                Cell(
                    label=f"{model.key} × {edition} (2nd phase)",
                    sender=model,
                    job="phase2_answers_cell",
                    asset="phase2_answers",
                    partition_key=partition,
                    config=config,
                    pending=(pending := answer_round(model, items, logged, ceiling).pending),
                    total=sum(item.turns for item in items),
                    later=tuple(_later_turns(model, items, pending, ceiling)),
                    spent_usd=logged_spend(logged),
                    of=edition,
                )
            )
    return cells


def _later_turns(
    model: ModelConfig, items: list[Any], pending: list[ChatRequest], ceiling: int | None
) -> list[ChatRequest]:
    from oabench_pipeline.phase2.plans import answer_request, request_id

    waiting = {r.qid for r in pending}
    later = []
    for item in items:
        if item.turns == 2 and request_id(item.item_id, 1) in waiting:
            later.append(answer_request(model, item, 2, [""], ceiling))
    return later


def is_current(warehouse: Warehouse, cell: Cell) -> bool:
    """Nothing to send and the partition written since the log's last reply: the run would do nothing."""
    if cell.pending:
        return False
    table = warehouse.read(cell.asset, cell.partition_key)
    if table.is_empty():
        return False
    live = table.filter(pl.col("source") == "live")
    if cell.asset == "phase2_judgments":
        live = live.filter(pl.col("structured").fill_null(False) == bool(cell.config.get("structured")))
        return live.height >= cell.total
    return live.filter(pl.col("answer").is_not_null()).height >= cell.total


def logged_spend(logged: dict[str, Any]) -> float:
    """The reported cost of a cell's logged replies (what its `max_cost_usd` counts as spent)."""
    from oabench_pipeline.phase2.sending import spent

    return spent(logged)


def with_run_ceiling(warehouse: Warehouse, cells: list[Cell], max_cost_usd: float | None) -> list[Cell]:
    """`--max-cost-usd X`: what this command may spend, over all its cells. Each cell's run carries, as
    its `max_cost_usd`, what its log already paid plus its share of X, split by estimated prompt cost (evenly
    when a cell's model has no price snapshot), as the automatic runs split their budget. A cell stops before
    a request whose cost could pass its share (`inference/assets.send_requests`' ceiling), so together they
    never pass X; what they were paid for is kept. A usage error when the estimate alone is over X."""
    if max_cost_usd is None or not cells:
        return cells
    estimates = [_estimated_cost(warehouse, cell) for cell in cells]
    known = [cost for cost in estimates if cost is not None]
    total = sum(known)
    if total > max_cost_usd:
        raise click.UsageError(
            f"estimated prompt cost ${total:.4f} is over --max-cost-usd ${max_cost_usd:g}; nothing was sent "
            "(--dry-run shows it per cell)"
        )
    even = len(known) < len(cells) or total <= 0
    shares = [
        max_cost_usd / len(cells) if even else max_cost_usd * (cost or 0.0) / total for cost in estimates
    ]
    return [
        replace(cell, config={**cell.config, "max_cost_usd": cell.spent_usd + share})
        for cell, share in zip(cells, shares, strict=True)
    ]


def _estimated_cost(warehouse: Warehouse, cell: Cell) -> float | None:
    """The cell's prompt tokens now (from the texts) at the price snapshot's prompt price (half of it for a
    `--batch` cell); None: unpriced."""
    price = listed_price(warehouse, cell.sender)
    if price is None or price.prompt is None:
        return None
    factor = BATCH_PRICE_FACTOR if cell.config.get("batch") else 1.0
    return estimated_prompt_tokens([r.body for r in [*cell.pending, *cell.later]]) * price.prompt * factor


def dry_run(
    warehouse: Warehouse, cells: list[Cell], ceiling_of: Callable[[Cell], int | None], batch: bool = False
) -> None:
    """One line per cell, then the total: calls, prompt tokens (from the texts), and the cost of those tokens
    at the price snapshot's prompt price plus, as a ceiling, each call's completion ceiling at its completion
    price; with `batch`, at the batch price (half). A cost no snapshot prices is "unknown", never $0."""
    factor = BATCH_PRICE_FACTOR if batch else 1.0
    total_calls = total_tokens = 0
    total_cost: float | None = 0.0
    unpriced: set[str] = set()
    for cell in cells:
        calls = [*cell.pending, *cell.later]
        tokens = estimated_prompt_tokens([r.body for r in calls])
        price = listed_price(warehouse, cell.sender)
        ceiling = ceiling_of(cell)
        cost: float | None = None
        bound = ""
        if price is not None and price.prompt is not None:
            cost = tokens * price.prompt * factor
            if ceiling is not None and price.completion is not None:
                worst = cost + len(calls) * ceiling * price.completion * factor
                bound = f", at most ${worst:.4f} with every reply at the {ceiling:,}-token completion ceiling"
        else:
            unpriced.add(cell.sender.key)
        total_calls += len(calls)
        total_tokens += tokens
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        shown = f"${cost:.4f}" if cost is not None else "unknown (no price snapshot)"
        click.echo(
            f"{cell.label}: {len(calls)} call(s) of {cell.total}, ~{tokens:,} prompt tokens, "
            f"est. prompt cost {shown}{bound}"
        )
        if cell.later:
            click.echo(
                f"  ({len(cell.later)} of them sub-items B: their prompts also carry sub-item A's reply)"
            )
    shown_total = f"${total_cost:.4f}" if total_cost is not None else "unknown (no price snapshot)"
    how = " (× 0.5: the batch APIs bill half the listed price)" if batch and total_cost is not None else ""
    click.echo(
        f"total: {total_calls} call(s), ~{total_tokens:,} prompt tokens, est. prompt cost {shown_total}{how}"
    )
    if unpriced:
        click.echo(f"no price snapshot for {', '.join(sorted(unpriced))}: {PRICING_HINT}")


def launch_cells(
    settings: Settings,
    warehouse: Warehouse,
    cells: list[Cell],
    partitions: dict[str, list[str]],
    concurrency: int | None,
    resume: str,
    rebuild: list[str] | None = None,
    max_cost_usd: float | None = None,
    batch: bool = False,
) -> None:
    """Launch every cell that is not current as a Dagster run, follow them (with `batch`, their batches
    too, relaunching a cell when one of its batches finished), rebuild the `rebuild` assets (the judges'
    scores) when any ran, and exit with `oabench run`'s code: 0 when every cell is complete, 1 when one is
    not, 130/143 after Ctrl-C."""
    todo = [cell for cell in cells if not is_current(warehouse, cell)]
    if not todo:
        click.echo(f"up to date: {len(cells)} cell(s), nothing to send")
        return
    todo = with_run_ceiling(warehouse, todo, max_cost_usd)
    defs, instance = _dagster(settings)
    interrupts.reset()

    def work() -> int:
        from oabench_pipeline.engine.launch import launcher
        from oabench_pipeline.engine.runs import one_line

        for name, keys in partitions.items():
            ensure_partitions(instance, name, keys)
        # One code server for every round: a cell relaunched when its batch finished (or a sub-item whose
        # first part failed) would otherwise pay a server's start-up (~3 CPU-s) each time.
        with launcher(instance, defs, warehouse.root) as engine:
            failures = _run(engine, todo, concurrency)
            if batch:
                from oabench_pipeline.cli.batches import follow_batches

                failures = follow_batches(
                    settings,
                    warehouse,
                    todo,
                    failures,
                    lambda ready: _run(engine, ready, concurrency),
                    lambda cell: (cell.label, cell.sender, cell.journal_kind, cell.of),
                    resume,
                )
        if interrupts.requested():
            click.echo(
                f"{interrupts.requested()}: nothing was sent after it; every reply received is kept in "
                f"{warehouse.root / 'responses'}. Resume (nothing kept is asked again): {resume}",
                err=True,
            )
            return interrupts.exit_code()
        rebuilt = run_assets(defs, instance, rebuild) if rebuild and len(failures) < len(todo) else None
        if rebuilt is not None:
            if rebuilt.success:
                click.echo(f"rebuilt {', '.join(rebuild or [])}: `oabench leaderboard --phase 2` prints them")
            else:
                click.echo(f"{', '.join(rebuild or [])} not rebuilt: {one_line(rebuilt.errors)}", err=True)
        if failures:
            click.echo(f"{len(failures)} of {len(cells)} cell(s) not complete (rerun `{resume}`):", err=True)
            for label, why in failures.items():
                click.echo(f"  {label}: {why}", err=True)
            return 1
        click.echo(f"done: {len(todo)} cell(s) run, {len(cells) - len(todo)} already up to date")
        return interrupts.exit_code() or (0 if rebuilt is None or rebuilt.success else 1)

    sys.exit(interrupts.run_stoppably(work, announce=interrupts.echo_err))


def _run(engine: Any, cells: list[Cell], concurrency: int | None) -> dict[str, str]:
    from oabench_pipeline.engine.launch import run_launched
    from oabench_pipeline.engine.runs import one_line

    failures: dict[str, str] = {}

    def one(engine: Any, cell: Cell) -> tuple[Cell, Any] | None:
        if interrupts.requested():
            return None
        bar.start_cell(cell.label)
        return cell, run_launched(engine, _spec(cell, concurrency))

    with ProgressBar() as bar, _cell_pool(len(cells)) as pool:
        for future in as_completed([pool.submit(one, engine, cell) for cell in cells]):
            result = future.result()
            if result is None:
                continue
            cell, outcome = result
            quiet = "nothing to send"
            if cell.config.get("batch") and not outcome.success and is_batch_pending(outcome.errors):
                # Not a failure: the cell's batch is open at the provider (`launch_cells` follows it).
                outcome, quiet = (
                    replace(outcome, success=True, errors=[]),
                    "batch pending (`oabench batches`)",
                )
            bar.finish_cell(cell.label, outcome.success, quiet, outcome.interrupted)
            for check in outcome.failed_checks:
                bar.console.print(f"[yellow]{cell.label}: check failed: {check}[/yellow]")
            if not outcome.success:
                failures[cell.label] = one_line(outcome.errors)
    return failures


def _spec(cell: Cell, concurrency: int | None) -> RunSpec:
    from oabench_pipeline.engine.launch import RunSpec

    config = {**cell.config, **({"concurrency": concurrency} if concurrency else {})}
    return RunSpec(
        job=cell.job,
        partition_key=cell.partition_key,
        run_config={"ops": {cell.asset: {"config": config}}} if config else {},
        tags=endpoint_tags(cell.sender),
    )
