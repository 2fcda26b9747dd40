"""A cell answered through its provider's batch API (`oabench run --batch`): one round of the crash-safe
protocol (`batches/protocol.py`) per run of the cell, under the cell's lock.

The round re-attaches to the cell's batches, collects the finished ones into the response log (each line
exactly as a chat reply, with its `batch_id`; a request hash already answered is skipped) and submits the
questions no batch holds. While a batch is open the run ends without writing the partition
(`BatchPending`): `oabench status` shows the cell as `batch pending`, and the next run (`oabench run
--batch` again, or `batch_results_sensor` once the batch finished) collects it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from dagster import AssetExecutionContext, Failure

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.batches.cells import (
    BATCH_API_HINT,
    BATCH_PRICE_FACTOR,
    LINE_KEYS,
    JournalKind,
    journal_path,
    open_batches,
    open_transport,
    pending_line,
)
from oabench_pipeline.inference.batches.journal import BatchJournal, LineKey
from oabench_pipeline.inference.batches.protocol import BatchLineResult, BatchProtocol, StepReport
from oabench_pipeline.inference.batches.transport import BatchApiError
from oabench_pipeline.inference.catalogue_store import Price
from oabench_pipeline.inference.cost import estimated_prompt_cost, listed_price
from oabench_pipeline.inference.progress import notify
from oabench_pipeline.inference.resources import MissingApiKeyError, ModelClientResource
from oabench_pipeline.inference.response_log import ResponseLog, ResponseLogError, latest_by_hash, read_log
from oabench_pipeline.inference.spend import AutomaticBudget
from oabench_pipeline.inference.types import ChatRequest, ChatResult
from oabench_pipeline.warehouse import Warehouse

OPENAI_COST_NOTE = "cost computed from the tokens at half the listed price: OpenAI's batch lines report none"


class BatchPending(Exception):
    """The cell's batch is still open: the run ends here, the partition is not written. Its message starts
    with the cell and says `batch pending:` (`is_batch_pending` reads it back from a run's errors)."""


def answer_by_batch(
    context: AssetExecutionContext,
    model: ModelConfig,
    edition: str,
    pending: list[ChatRequest],
    logged: dict[str, ChatResult],
    log_path: Path,
    model_client: ModelClientResource,
    registry: dict[str, ModelConfig],
    store: Warehouse,
    ceiling: float | None,
    submit: bool = True,
    kind: JournalKind = "phase1",
    cell: str | None = None,
    reserved_usd: float = 0.0,
    budget: AutomaticBudget | None = None,
) -> StepReport:
    """One protocol round for the cell's `pending` questions; raises `BatchPending` while a batch is open.
    `submit=False` (`batch_results_sensor`'s runs, which spend nothing): collect only, and end as pending
    while questions are left to send. `kind` is the cell's (`batches/cells.py`): for a judgment cell,
    `model` is the judge and `edition` the judged model's key; `cell` names it in messages; `reserved_usd`
    is the worst case of the cell's other batches of this run (its other replicates), held under `ceiling`.
    `budget`: the watch policy's, for a key registered from the model catalogue: the new lines' worst case
    is reserved against it before anything is sent (`spend.py`), and settled when the round ends."""
    cell = cell or f"{model.key} × edition {edition}"
    if model.batch_api is None:
        raise Failure(description=f"{model.key}: no batch_api in its registry entry; {BATCH_API_HINT}")
    try:
        endpoint = model_client.endpoint(model, registry.values())
    except MissingApiKeyError as error:
        raise Failure(description=str(error)) from None
    journal = BatchJournal(journal_path(store.root, model.key, edition, kind))
    price = listed_price(store, model)
    line_key = LINE_KEYS[kind]
    to_send = (
        _within_budget(model, pending, journal, logged, store, ceiling, line_key, reserved_usd)
        if submit
        else []
    )
    transport = open_transport(model.batch_api, endpoint)
    protocol = BatchProtocol(
        journal, transport, model.id, secrets_to_redact=endpoint.secrets, line_key=line_key
    )

    def on_result(line: BatchLineResult) -> None:
        prior = logged.get(line.result.request_hash)
        if prior is not None and prior.ok:
            return  # handed over again after a crash before `collected`: the first answer stands
        log.append(_as_logged(line, model, price))

    log = ResponseLog(log_path)
    refused = None
    try:
        if budget is not None and to_send:  # held before anything is sent; settled below whatever happens
            refused = _reserve(budget, journal, to_send)
            to_send = [] if refused else to_send
        with log:
            report = protocol.step(to_send, on_result)
    except ResponseLogError as error:
        raise Failure(description=f"{cell}: {error}; the batch results stay at the provider") from None
    except BatchApiError as error:
        raise Failure(description=f"{cell}: {error}; the journal keeps every batch: rerun to go on") from None
    finally:
        transport.close()
        if budget is not None:
            budget.settle_batches()
    if log.failure is not None:
        raise Failure(
            description=f"{cell}: {log.stop_reason()}; rerun `oabench run --batch` to collect again"
        )
    _say(context, cell, report)
    if report.rejected:
        raise Failure(description=f"{cell}: the batch API refused the batch: {report.rejected[0]}")
    if not submit:
        left = still_unanswered(pending, latest_by_hash(read_log(log_path)))
        if report.open_batches or report.unresolved_intents or left:
            held = open_batches(store.root, model.key, edition, kind)
            what = pending_line(held) if report.open_batches else "batches collected"
            raise BatchPending(
                f"{cell}: {what}; {len(left)} question(s) left: `oabench run --batch` sends them"
            )
        return report
    held_back = len(to_send) < len(pending) and not report.open_batches and not report.unresolved_intents
    if held_back and still_unanswered(pending, latest_by_hash(read_log(log_path))):
        if refused is not None:
            raise Failure(description=f"{cell}: {refused}; no batch sent")
        raise Failure(description=_over_budget_line(model, cell, pending, store, logged, ceiling))
    if not report.done:
        raise BatchPending(f"{cell}: {pending_line(open_batches(store.root, model.key, edition, kind))}")
    return report


def _within_budget(
    model: ModelConfig,
    pending: list[ChatRequest],
    journal: BatchJournal,
    logged: dict[str, ChatResult],
    store: Warehouse,
    ceiling: float | None,
    line_key: LineKey = "qid",
    reserved_usd: float = 0.0,
) -> list[ChatRequest]:
    """`pending`, or none of it when its worst case (the prompts of the lines a new batch would hold, at the
    batch price) on top of what the cell paid and `reserved_usd` would pass `ceiling`: the round then only
    collects."""
    if ceiling is None:
        return pending
    held = journal.replay().held_qids(line_key)
    fresh = [r for r in pending if getattr(r, line_key) not in held]
    estimate = estimated_prompt_cost(store, model, fresh)
    if estimate is None:
        return pending
    spent = sum(_paid(r) for r in logged.values())
    return pending if spent + reserved_usd + estimate * BATCH_PRICE_FACTOR <= ceiling else []


def _reserve(budget: AutomaticBudget, journal: BatchJournal, to_send: list[ChatRequest]) -> str | None:
    """Reserve the worst case of every line of `to_send` at the batch price; None once held, else why not."""
    budget.start()
    lines: dict[str, float] = {}
    for request in to_send:
        worst = budget.batch_worst_case(request, BATCH_PRICE_FACTOR)
        if worst is None:
            return (
                f"{budget.model_id} has no listed price and no reply yet, so a batch's worst case is not "
                "known: run it once without --batch"
            )
        lines[request.request_hash] = worst
    return budget.reserve_batch(journal.path, lines)


def _over_budget_line(
    model: ModelConfig,
    cell: str,
    pending: list[ChatRequest],
    store: Warehouse,
    logged: dict[str, ChatResult],
    ceiling: float | None,
) -> str:
    estimate = (estimated_prompt_cost(store, model, pending) or 0.0) * BATCH_PRICE_FACTOR
    spent = sum(_paid(r) for r in logged.values())
    return (
        f"{cell}: estimated batch prompt cost ${estimate:.4f} (+ ${spent:.4f} already spent) exceeds "
        f"max_cost_usd ${ceiling}; no batch sent"
    )


def _as_logged(line: BatchLineResult, model: ModelConfig, price: Price | None) -> ChatResult:
    """The line as the response log records it: its batch id, and its cost (OpenAI's lines report none:
    computed from the tokens at the batch price, and said so)."""
    result = replace(line.result, batch_id=line.batch_id)
    if result.ok and result.cost_usd is None and model.batch_api == "openai" and price is not None:
        cost = _token_cost(result, price)
        if cost is not None:
            note = "; ".join(n for n in (result.cost_note, OPENAI_COST_NOTE) if n)
            result = replace(result, cost_usd=cost, total_cost_usd=cost, cost_note=note)
    return result


def _token_cost(result: ChatResult, price: Price) -> float | None:
    if price.prompt is None or price.completion is None or result.prompt_tokens is None:
        return None
    completion = result.completion_tokens or 0
    return (result.prompt_tokens * price.prompt + completion * price.completion) * BATCH_PRICE_FACTOR


def _say(context: AssetExecutionContext, cell: str, report: StepReport) -> None:
    parts = []
    if report.collected_batches:
        parts.append(f"collected {', '.join(report.collected_batches)} ({report.answered} answered)")
    if report.resubmittable:
        parts.append(f"{report.resubmittable} line(s) failed, expired or cancelled: asked again")
    if report.submitted_batches:
        parts.append(f"submitted {', '.join(report.submitted_batches)} ({report.submitted_lines} lines)")
    if report.gave_up:
        parts.append(f"{report.gave_up} question(s) out of batch attempts")
    if parts:
        line = f"{cell}: " + "; ".join(parts)
        context.log.info(line)
        notify(line)


def _paid(result: ChatResult) -> float:
    cost = result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd
    return cost or 0.0


def still_unanswered(pending: Sequence[ChatRequest], logged: dict[str, ChatResult]) -> list[ChatRequest]:
    """The questions the batches gave up on (`--batch-fallback sync` sends them as chat completions)."""
    return [r for r in pending if (found := logged.get(r.request_hash)) is None or not found.ok]
