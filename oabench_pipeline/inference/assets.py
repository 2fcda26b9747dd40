"""The `inferences` asset: one partition per benchmark cell (model key × edition).

A partition holds one row per question per run of the cell: live replicates (`live:<key>:r<k>`),
imported folders, the baseline run (`core/runs.py`). A step resumes (or starts) only the live
replicates the cell still needs (`InferenceConfig.replicates` complete runs) and keeps every other
run's rows as they are.

Every response is appended to the cell's response log the moment it arrives (`response_log.py`); the
partition is then rebuilt from the log, so a crash loses nothing paid for and a rerun sends only what has
no answer yet. The partition file is written only when the cell completes: on a fatal endpoint error or an
exhausted budget the step fails and the table keeps its last good rows (the log keeps the new answers).
"""

import dataclasses
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    Config,
    DagsterRunStatus,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    asset,
)

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.runs import baseline_run_id, live_run_id, with_logical_run_ids
from oabench_pipeline.core.tables import conform
from oabench_pipeline.core.versions import INFERENCE_BOOKKEEPING_COLUMNS, frame_version
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.batch_cell import BatchPending, answer_by_batch, still_unanswered
from oabench_pipeline.inference.batches.cells import BATCH_PRICE_FACTOR, open_batches, pending_line
from oabench_pipeline.inference.catalogue_store import catalogue_prices, retirement_problem
from oabench_pipeline.inference.cell import (
    CellPlan,
    api_cell_rows,
    baseline_cell_rows,
    complete_imported_runs,
    replicate_plans,
)
from oabench_pipeline.inference.cell_lock import CellLock, LockHolder, LockWaitStopped, cell_lock_path
from oabench_pipeline.inference.client import run_blocking, run_chat_requests
from oabench_pipeline.inference.cost import estimated_prompt_cost, listed_price
from oabench_pipeline.inference.endpoints import cell_capacity
from oabench_pipeline.inference.freshness import summary_editions
from oabench_pipeline.inference.progress import (
    PROGRESS_FILE_TAG,
    BestEffort,
    CellProgress,
    notify,
    publish,
    relaying,
)
from oabench_pipeline.inference.reservations import Learned, SpendGate
from oabench_pipeline.inference.resources import (
    MissingApiKeyError,
    ModelClientResource,
    ModelsRegistryResource,
    UnknownModelError,
)
from oabench_pipeline.inference.response_log import (
    ResponseLog,
    ResponseLogError,
    cell_log_path,
    latest_by_hash,
    read_log,
    repair,
)
from oabench_pipeline.inference.spend import AutomaticBudget, CellCeiling
from oabench_pipeline.inference.types import ChatRequest, ChatResult, FatalEndpointError
from oabench_pipeline.shared import dagster_internals
from oabench_pipeline.shared.checks import check_specs, problems_result, stop_on_blocking_failures
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import model_edition_partitions
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline.shared.run_tags import HOST_TAG, PID_TAG
from oabench_pipeline.warehouse import Warehouse

MAX_ERROR_RATE = 0.02
BATCH_PENDING_METADATA = "batch_pending"
EMPTY_ANSWER_NOTE = (
    "answered nothing on all {attempts} attempts: recorded as its final answer (invalid, scored wrong), not "
    "asked again; `oabench run --retry-invalid` asks it again"
)
PROGRESS_LOG_EVERY_S = 5.0

INFERENCE_CHECKS = {
    "every_active_question_has_a_row": "Each active question of the edition has an answer or an error row; "
    "blocking: nothing is written. (An aborted imported run is not a materialization, so not checked: "
    "`published_runs` records it as an observation.)",
    "one_row_per_question": "No question appears twice in the cell; blocking.",
    "error_rate_at_most_2_percent": "At most 2% of the active questions ended in an error (failed after "
    "retries); not blocking: the answers are kept and a rerun asks only the failed ones.",
}
BLOCKING_INFERENCE_CHECKS = ["every_active_question_has_a_row", "one_row_per_question"]


class InferenceConfig(Config):
    """Per-run settings; the CLI's `--concurrency` and `--replicates` land here."""

    concurrency: int | None = None
    replicates: int = 1
    """Complete runs the cell must end with (any source); live replicates are resumed or started."""
    retry_invalid: bool = False
    """Ask again the questions whose final reply is invalid (empty, no letter): `--retry-invalid`."""
    max_cost_usd: float | None = None
    """A ceiling on this cell's spend besides the model's own `max_cost_usd` (the lower one holds): the
    registry sensor's share of `OABENCH_AUTORUN_MAX_COST_USD`."""
    batch: bool = False
    """Send the unanswered questions through the model's batch API (`oabench run --batch`, docs/batch.md)."""
    batch_fallback: str | None = None
    """"sync": the questions the batches gave up on are sent as chat completions (`--batch-fallback sync`)."""
    batch_collect_only: bool = False
    """Collect finished batches, submit nothing (`batch_results_sensor`'s runs spend nothing)."""


def cell_keys(context: AssetExecutionContext) -> tuple[str, str]:
    key = context.partition_key
    assert isinstance(key, MultiPartitionKey)
    return key.keys_by_dimension["model"], key.keys_by_dimension["edition"]


@asset(
    group_name="inference",
    partitions_def=model_edition_partitions,
    # Each cell depends on its edition's questions (Dagster infers the multi → single-dimension mapping).
    deps=["questions"],
    metadata={"dagster/column_schema": table_schema("inferences").value},
    check_specs=check_specs("inferences", INFERENCE_CHECKS, blocking=BLOCKING_INFERENCE_CHECKS),
    pool="model_calls",
)
def inferences(
    context: AssetExecutionContext,
    config: InferenceConfig,
    models_registry: ModelsRegistryResource,
    model_client: ModelClientResource,
    warehouse: WarehouseResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The model's answer to every question of the edition, with the OABench prompts (temperature 0).

    Annulled questions get a `skipped` row and no call. Live calls go through the model client
    (concurrency, retries with backoff honouring Retry-After); offline baselines write the same rows.
    """
    model_key, edition = cell_keys(context)
    try:
        model = models_registry.model(model_key)
    except UnknownModelError as error:
        raise Failure(description=str(error.args[0])) from None
    store = warehouse.warehouse()
    if model.kind == "api" and (retired := retirement_problem(store, model.id)):
        raise Failure(description=f"{model.key}: {retired}; it is never requested again")
    # What the cell is built from, recorded with it (`inference/freshness.py`), read before the rows themselves.
    inputs = store.input_versions({"questions": edition})
    questions = store.read("questions", edition)
    if questions.is_empty():
        raise Failure(
            description=f"edition {edition} has no questions yet: run `oabench ingest --editions {edition}`"
        )
    # Which process answers the cell: `oabench status` tells a run whose process died from one in progress.
    dagster_internals.add_run_tags(
        context.instance, context.run_id, {PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}
    )
    # `oabench run` follows its launched runs' progress through a file it names (progress.py), and tells
    # them of its Ctrl-C through another (inference/interrupts.py).
    relay = context.run.tags.get(PROGRESS_FILE_TAG)
    stop = context.run.tags.get(interrupts.STOP_FILE_TAG)
    with (
        relaying(Path(relay)) if relay else nullcontext(),
        interrupts.watching(Path(stop)) if stop else nullcontext(),
        _cell_lock(context, store, model.key, edition),
    ):
        # Read under the lock: a run that held it before may have answered and written the cell.
        existing = with_logical_run_ids(store.read("inferences", context.partition_key), model.key)
        yield from _answer_cell(
            context, config, model, edition, questions, store, existing, model_client, models_registry, inputs
        )


def _answer_cell(
    context: AssetExecutionContext,
    config: InferenceConfig,
    model: ModelConfig,
    edition: str,
    questions: pl.DataFrame,
    store: Warehouse,
    existing: pl.DataFrame,
    model_client: ModelClientResource,
    models_registry: ModelsRegistryResource,
    inputs: dict[str, str],
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Answer what the cell still needs (live calls or the baseline), check it and write the partition
    (with `inputs`, the data versions of the partitions it was built from)."""
    if model.kind == "baseline":
        rows = baseline_cell_rows(model, questions, run_id=baseline_run_id(model.key))
        built, sent = [baseline_run_id(model.key)], 0
    else:
        try:
            rows, built, sent = _run_api_cell(
                context, model, edition, questions, store, existing, model_client, config, models_registry
            )
        except BatchPending as pending:
            # The step ends here without writing the partition (its last good rows stay) and without its
            # checks, which Dagster requires of a step that ends well: so it ends as a failure that says it
            # is not one. `oabench run --batch` shows it as pending, `oabench status` as `batch pending`.
            notify(str(pending))
            raise Failure(description=str(pending), metadata={BATCH_PENDING_METADATA: True}) from None
    for row in rows:
        row.setdefault("dagster_run_id", context.run_id)
    new = conform("inferences", _columns_frame(rows)) if rows else None
    del rows  # the replies' texts are in `new` now: not held twice while the partition is written
    others = existing.filter(~pl.col("run_id").is_in(built)) if not existing.is_empty() else existing
    parts = [conform("inferences", f) for f in (others, new) if f is not None and not f.is_empty()]
    frame = pl.concat(parts) if parts else conform("inferences", pl.DataFrame())
    yield from _finish(context, store, questions, frame, built, sent, inputs)


def _columns_frame(rows: list[dict]) -> pl.DataFrame:
    """The rows as a frame, built column by column: from a list of dicts polars holds every text twice
    while it builds (a cell of replies with a megabyte of reasoning each: twice the cell's bytes)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    return pl.DataFrame({name: [row.get(name) for row in rows] for name in names})


@contextmanager
def _cell_lock(
    context: AssetExecutionContext, store: Warehouse, model_key: str, edition: str
) -> Iterator[None]:
    """Hold the cell's lock (`cell_lock.py`) while answering it: a second run of the cell waits here, then
    sends only what the first left. A lock whose holder died is taken over, and that holder's Dagster run,
    if still marked in progress, is marked failed."""
    with holding_lock(
        context, cell_lock_path(store.root, model_key, edition), f"{model_key} × edition {edition}"
    ):
        yield


@contextmanager
def holding_lock(context: AssetExecutionContext, path: Path, cell: str) -> Iterator[None]:
    """Hold the lock at `path` (`cell_lock.py`) for `cell` (how messages name it): `_cell_lock`'s, for any
    file that one writer at a time may send for (the 2nd phase's answers and judgments too)."""

    def on_wait(holder: LockHolder | None) -> None:
        who = holder.describe() if holder else "another process"
        context.log.info(f"{cell}: being answered by {who}; waiting for it")

    if reason := interrupts.requested():  # cells started after a Ctrl-C (e.g. queued in a pool) send nothing
        raise _interrupted(context, f"{cell}: {reason} before it started; nothing was sent", reason)
    lock = CellLock(path, run_id=context.run_id)
    try:
        stale = lock.acquire(on_wait, interrupts.requested)
    except LockWaitStopped as stopped:
        raise _interrupted(
            context, f"{cell}: {stopped} while waiting for its lock; nothing was sent", str(stopped)
        ) from None
    try:
        if stale is not None:
            context.log.warning(f"{cell}: took over the lock of {stale.describe()}, which died holding it")
            _mark_dead_run_failed(context, stale)
        yield
    finally:
        lock.release()


def _mark_dead_run_failed(context: AssetExecutionContext, holder: LockHolder) -> None:
    """The run of a process that died holding a cell's lock can never finish: say so in the instance."""
    if not holder.run_id or holder.run_id == context.run_id:
        return
    run = context.instance.get_run_by_id(holder.run_id)
    if run is not None and run.status in (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED):
        dagster_internals.mark_run_failed(
            context.instance,
            run,
            f"its process ({holder.describe()}) died; run {context.run_id} took the cell over",
        )


def _run_api_cell(
    context: AssetExecutionContext,
    model: ModelConfig,
    edition: str,
    questions: pl.DataFrame,
    store: Warehouse,
    existing: pl.DataFrame,
    model_client: ModelClientResource,
    config: InferenceConfig,
    models_registry: ModelsRegistryResource,
) -> tuple[list[dict], list[str], int]:
    """Resume (or start) the live replicates the cell needs; returns their rows, run ids and requests sent."""
    log_path = cell_log_path(store.root / "responses", model.key, edition)
    for line in repair(log_path):  # under the cell lock: the only writer of the log (log_records.py)
        context.log.warning(line)
        notify(line)
    logged = latest_by_hash(read_log(log_path))
    summaries = summary_editions(store, existing)
    elsewhere = complete_imported_runs(existing, int(edition), summaries)
    plans = replicate_plans(
        model, questions, logged, existing, config.replicates, elsewhere, config.retry_invalid
    )
    if not config.batch and (held := open_batches(store.root, model.key, edition)):
        raise Failure(
            description=f"{model.key} × edition {edition}: {pending_line(held)}; `oabench run --batch` collects "
            "it (chat completions now would pay for its questions twice)"
        )
    budget = _automatic_budget(models_registry, store, model, log_path)
    rows: list[dict] = []
    sent = 0
    waiting: list[BatchPending] = []  # replicates whose batch is open: each replicate has its own batch
    for plan in plans:
        run_id = live_run_id(model.key, plan.replicate)
        context.log.info(
            f"{model.key} × edition {edition}, replicate {plan.replicate}: {len(plan.requests)} active "
            f"questions, {len(plan.requests) - len(plan.pending)} already answered, {len(plan.pending)} to send"
        )
        if plan.pending and config.batch:
            others = [r for other in plans if other is not plan for r in other.pending]
            try:
                _answer_by_batch(
                    context,
                    model,
                    edition,
                    plan,
                    log_path,
                    model_client,
                    config,
                    models_registry,
                    store,
                    others,
                    budget,
                )
            except BatchPending as pending:
                waiting.append(pending)
                continue
            logged = latest_by_hash(read_log(log_path))
        elif plan.pending:
            ceiling = _cost_ceiling(model, config)
            _check_budget_before(model, plan.pending, store, logged, budget, ceiling)
            gate = budget.gate() if budget is not None else _ceiling_gate(store, model, logged, ceiling)
            _call_model(
                context,
                model,
                edition,
                plan,
                logged,
                log_path,
                model_client,
                config,
                models_registry.models(),
                store.root,
                budget,
                gate,
            )
            logged = latest_by_hash(read_log(log_path))
        rows += api_cell_rows(model, questions, plan, logged, run_id=run_id)
        sent += len(plan.pending)
    if waiting:
        raise BatchPending("; ".join(dict.fromkeys(str(w) for w in waiting)))
    return rows, [live_run_id(model.key, p.replicate) for p in plans], sent


def _answer_by_batch(
    context: AssetExecutionContext,
    model: ModelConfig,
    edition: str,
    plan: CellPlan,
    log_path: Path,
    model_client: ModelClientResource,
    config: InferenceConfig,
    models_registry: ModelsRegistryResource,
    store: Warehouse,
    other_replicates: list[ChatRequest] | None = None,
    budget: AutomaticBudget | None = None,
) -> None:
    """One batch round for the plan (`batch_cell.py`); with `--batch-fallback sync`, the questions the
    batches gave up on are then sent as chat completions. `other_replicates`: the cell's other replicates'
    unanswered requests, whose batches' worst case `max_cost_usd` holds too. `budget`: the watch policy's
    (a key registered from the model catalogue), which holds the batches' worst case and the fallback's."""
    logged = latest_by_hash(read_log(log_path))
    registry = models_registry.models()
    ceiling = _cost_ceiling(model, config)
    submit = not config.batch_collect_only
    reserved = 0.0
    if ceiling is not None and other_replicates:
        reserved = (estimated_prompt_cost(store, model, other_replicates) or 0.0) * BATCH_PRICE_FACTOR
    answer_by_batch(
        context,
        model,
        edition,
        plan.pending,
        logged,
        log_path,
        model_client,
        registry,
        store,
        ceiling,
        submit,
        reserved_usd=reserved,
        budget=budget,
    )
    if config.batch_fallback != "sync":
        return
    logged = latest_by_hash(read_log(log_path))
    if retry := still_unanswered(plan.pending, logged):
        context.log.info(
            f"{model.key} × edition {edition}: {len(retry)} given up by the batches, sent as chat"
        )
        fallback = dataclasses.replace(plan, pending=retry)
        if budget is not None:
            _check_budget_before(model, retry, store, logged, budget)
        gate = budget.gate() if budget is not None else None
        _call_model(
            context,
            model,
            edition,
            fallback,
            logged,
            log_path,
            model_client,
            config,
            registry,
            store.root,
            budget,
            gate,
        )


def _automatic_budget(
    models_registry: ModelsRegistryResource, store: Warehouse, model: ModelConfig, log_path: Path
) -> AutomaticBudget | None:
    """The watch policy's limits when the catalogue sensor registered this key (None: a hand-written key).

    Such a key is paid for by the policy, so it runs only under one: with no policy file, nothing is sent.
    """
    automatic = models_registry.automatic()
    if model.key not in automatic:
        return None
    try:
        policy = models_registry.watch_policy()
    except ValueError as error:
        raise Failure(description=f"{model.key}: registered from the model catalogue; {error}") from None
    if policy is None:
        raise Failure(
            description=f"{model.key}: registered from the model catalogue, and there is no watch policy "
            f"({models_registry.watch_file}, OABENCH_WATCH_FILE) whose budget would hold it: nothing was "
            f"sent. Restore the policy, or `oabench catalogue add {model.id}` to make it a hand-written entry"
        )
    return AutomaticBudget(
        responses_root=store.root / "responses",
        own_log=log_path,
        model_id=model.id,
        model_keys={k: m.id for k, m in automatic.items() if m.id == model.id},
        automatic_keys={k: m.id for k, m in automatic.items()},
        prices=catalogue_prices(store),
        ceiling_usd=policy.max_run_cost_usd,
        monthly_budget_usd=policy.monthly_budget_usd,
        completion_tokens=policy.reserved_completion_tokens,
    )


def _ceiling_gate(
    store: Warehouse, model: ModelConfig, logged: dict[str, ChatResult], ceiling: float | None
) -> SpendGate | None:
    """The cell's ceiling (`_cost_ceiling`: a hand-written model's `max_cost_usd`, or the run's share of the
    automatic-run budget) held before each request as the watch policy's budgets are: its prompt plus the
    completion ceiling at the price snapshot's prices, at least the most one of the cell's replies has cost
    (reported cost, as the running stop counts)."""
    if ceiling is None:
        return None
    learned = Learned()
    for result in logged.values():
        if (cost := _paid(result)) > 0:
            learned.learn(model.id, cost)
    spent = sum(_paid(r) for r in logged.values())
    return SpendGate(
        limits=CellCeiling(model.key, ceiling, spent),
        model_id=model.id,
        price=listed_price(store, model),
        learned=learned,
        result_cost=_paid,
    )


def _call_model(
    context: AssetExecutionContext,
    model: ModelConfig,
    edition: str,
    plan: CellPlan,
    logged: dict[str, ChatResult],
    log_path: Path,
    model_client: ModelClientResource,
    config: InferenceConfig,
    registry: dict[str, ModelConfig],
    warehouse_root: Path,
    budget: AutomaticBudget | None = None,
    gate: SpendGate | None = None,
) -> None:
    send_requests(
        context,
        model,
        CellLabels(progress=f"{model.key} × {edition}", failure=f"{model.key} × edition {edition}"),
        plan.pending,
        len(plan.requests),
        logged,
        log_path,
        model_client,
        config.concurrency,
        _cost_ceiling(model, config),
        registry,
        warehouse_root,
        budget,
        gate,
    )


@dataclass(frozen=True)
class CellLabels:
    """How a cell names itself: in progress lines (`key × 43`) and in failures (`key × edition 43`)."""

    progress: str
    failure: str


def send_requests(
    context: AssetExecutionContext,
    model: ModelConfig,
    labels: CellLabels,
    pending: list[ChatRequest],
    total: int,
    logged: dict[str, ChatResult],
    log_path: Path,
    model_client: ModelClientResource,
    concurrency_override: int | None,
    ceiling: float | None,
    registry: dict[str, ModelConfig],
    warehouse_root: Path,
    budget: AutomaticBudget | None = None,
    gate: SpendGate | None = None,
) -> None:
    """Send `pending` (of the cell's `total` requests) through the model client, each reply appended to
    `log_path` as it arrives; stops on Ctrl-C, a full disk, a fatal endpoint error or `ceiling` (USD, with
    what the log already paid). The 1st phase's cells and the 2nd phase's answers and judgments send this way."""
    try:
        endpoint = model_client.endpoint(model, registry.values())
    except MissingApiKeyError as error:
        raise Failure(description=str(error)) from None
    spent_before = sum(_paid(r) for r in logged.values())
    if budget is not None:
        budget.start()  # this cell's log as it stands now, and the other cells' of the policy's models
    progress = CellProgress(cell=labels.progress, total=total, already_done=total - len(pending))
    last_log = [time.monotonic()]
    # Dagster's event log, the progress relay: a paid reply never waits on them, and their failure (a full
    # DAGSTER_HOME, PostgreSQL gone) cancels nothing; it is said once, at the end.
    reports = BestEffort()

    def on_result(result: ChatResult) -> None:
        """On the event loop, as each reply arrives: into the response log first, then count its cost;
        everything else is best effort."""
        log.append(result)
        progress.cost_usd += _paid(result)  # paid whether or not it is on disk yet: the budget counts it
        reports.attempt(lambda: _report_reply(context, labels.progress, result, progress, last_log))

    def on_durable(result: ChatResult) -> None:
        """On the log's writer thread, once the reply is fsynced: only now is it counted as received."""
        progress.answered += result.ok
        progress.errors += not result.ok
        reports.attempt(lambda: publish(progress))

    def should_stop() -> str | None:
        return interrupts.requested() or log.stop_reason() or over_budget()

    def over_budget() -> str | None:
        if ceiling is not None and spent_before + progress.cost_usd >= ceiling:
            return f"reported cost ${spent_before + progress.cost_usd:.4f} reached max_cost_usd ${ceiling}"
        return budget.reached() if budget is not None else None  # its gate counts what this run paid

    concurrency = concurrency_override or model.concurrency
    capacity = cell_capacity(warehouse_root, model, concurrency, registry.values())
    reports.attempt(lambda: publish(progress))
    log = ResponseLog(log_path, on_durable)
    try:
        # The budget outermost: the log is flushed before the others stop counting this cell as sending.
        with budget.sending() if budget is not None else nullcontext(), log, interrupts.stop_on_signals():
            stats = run_blocking(
                run_chat_requests(
                    endpoint, pending, concurrency, on_result, should_stop, capacity=capacity, gate=gate
                )
            )
    except ResponseLogError as error:
        raise Failure(description=f"{labels.failure}: {error}; nothing was sent") from None
    except FatalEndpointError as error:
        raise Failure(
            description=f"{labels.failure}: {error}; {progress.answered} answers received "
            f"before the stop are kept in {log_path}"
        ) from None
    if log.failure is not None:
        raise Failure(description=_log_failure_line(labels.failure, log))
    reports.attempt(
        lambda: context.log.info(
            _progress_line(progress)
            + f" — {stats.sent_requests} HTTP requests, retries {dict(stats.retries_by_cause) or 0}"
        )
    )
    if unreported := reports.summary():
        kept = f"{log.written} answer(s) received this run are kept in {log_path}"
        reports.attempt(lambda: context.log.warning(f"{labels.failure}: {unreported}; {kept}"))
    if stats.stop_reason:
        line = (
            f"{labels.failure}: stopped, {stats.stop_reason}; {progress.answered} answers kept in {log_path}"
        )
        if stats.stop_reason == interrupts.requested():
            raise _interrupted(context, line, stats.stop_reason)
        raise Failure(description=line)


def _report_reply(
    context: AssetExecutionContext,
    cell: str,
    result: ChatResult,
    progress: CellProgress,
    last_log: list[float],
) -> None:
    """What Dagster's log says of one reply: its cost note, an empty final answer, progress every 5 s."""
    if result.cost_note:
        context.log.warning(f"{cell} {result.qid}: {result.cost_note}")
    if result.empty_answer:
        context.log.warning(f"{cell} {result.qid}: {EMPTY_ANSWER_NOTE.format(attempts=result.attempts)}")
    if time.monotonic() - last_log[0] >= PROGRESS_LOG_EVERY_S:
        last_log[0] = time.monotonic()
        context.log.info(_progress_line(progress))


def _interrupted(context: AssetExecutionContext, line: str, reason: str) -> Failure:
    """The failure of a step a signal stopped, marked so that it reads "interrupted", not "failed". The run
    is marked canceling first, so that Dagster ends it CANCELED whichever came first, the stop file or
    signal the step heard or the command's terminate through the run launcher: an interrupt is recorded
    one way."""
    try:
        run = context.instance.get_run_by_id(context.run_id)
        if run is not None and run.status == DagsterRunStatus.STARTED:
            dagster_internals.mark_run_canceling(context.instance, run, f"oabench: {reason}")
    except Exception:  # a failing instance storage (full DAGSTER_HOME): the interrupt still fails the step
        pass
    return Failure(description=line, metadata={interrupts.INTERRUPTED_METADATA: reason})


def _log_failure_line(cell: str, log: ResponseLog) -> str:
    """One line for a run stopped because its response log could not be written (a full disk, mostly)."""
    lost = (
        f"; {len(log.unwritten)} answer(s) received could not be written and will be asked again"
        if log.unwritten
        else ""
    )
    return (
        f"{cell}: stopped, {log.stop_reason()}; {log.written} answer(s) received "
        f"this run are kept{lost}. Free space and rerun `oabench run`: nothing kept is asked again"
    )


def _paid(result: ChatResult) -> float:
    cost = result.total_cost_usd if result.total_cost_usd is not None else result.cost_usd
    return cost or 0.0


def _progress_line(progress: CellProgress) -> str:
    eta = progress.eta_s()
    return f"{progress.cell}: {progress.summary()}" + (f", ETA {eta:.0f}s" if eta is not None else "")


def _check_budget_before(
    model: ModelConfig,
    pending: list[ChatRequest],
    store: Warehouse,
    logged: dict[str, ChatResult],
    budget: AutomaticBudget | None = None,
    ceiling: float | None = None,
) -> None:
    if budget is not None:
        budget.start()
        if problem := budget.would_pass(budget.estimate(pending)):
            raise Failure(description=f"{model.key}: {problem}; not starting")
    if ceiling is None:
        return
    estimate = estimated_prompt_cost(store, model, pending)
    if estimate is None:
        return
    spent = sum(_paid(r) for r in logged.values())
    if spent + estimate > ceiling:
        raise Failure(
            description=f"{model.key}: estimated prompt cost ${estimate:.4f} (+ ${spent:.4f} already spent) exceeds "
            f"max_cost_usd ${ceiling}; not starting"
        )


def _cost_ceiling(model: ModelConfig, config: InferenceConfig) -> float | None:
    """What the cell may spend: the lower of the model's `max_cost_usd` and the run's (None: no limit)."""
    limits = [limit for limit in (model.max_cost_usd, config.max_cost_usd) if limit is not None]
    return min(limits) if limits else None


def _finish(
    context: AssetExecutionContext,
    store: Warehouse,
    questions: pl.DataFrame,
    frame: pl.DataFrame,
    built: list[str],
    sent: int,
    inputs: dict[str, str],
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Check the partition (one row per question per run) and the runs this step built (no active
    question unaccounted), then write every run's rows."""
    partition = frame
    # One row per question per run: several runs of a cell live in its partition.
    duplicated = sorted(
        f"{run_id}: {qid}"
        for run_id, qid in partition.filter(pl.struct("run_id", "qid").is_duplicated())
        .select("run_id", "qid")
        .unique()
        .iter_rows()
    )
    # The checks read a few columns: filtering the whole partition would copy every reply's text (and
    # reasoning: a megabyte each, for some models) once per filter.
    frame = partition.select(
        "run_id",
        "qid",
        "skipped",
        "answer_strict",
        "cost_usd",
        pl.col("raw_response").is_not_null().alias("has_reply"),
        pl.col("error").is_not_null().alias("has_error"),
    ).filter(pl.col("run_id").is_in(built))
    active = frame.filter(~pl.col("skipped"))
    expected = set(questions.filter(pl.col("status") == "active")["qid"])
    replied = active.filter(pl.col("has_reply") | pl.col("has_error"))
    unaccounted = sorted(
        f"{run_id}: {qid}" if len(built) > 1 else qid
        for run_id in built
        for qid in expected - set(replied.filter(pl.col("run_id") == run_id)["qid"])
    )
    errors = active.filter(pl.col("has_error")).height
    error_rate = errors / active.height if active.height else 0.0
    strict = (
        active.filter(pl.col("answer_strict").is_not_null()).height / active.height if active.height else 0.0
    )
    checks = [
        problems_result(
            "every_active_question_has_a_row",
            unaccounted,
            summary=f"{len(unaccounted)} of {len(expected) * len(built)} active questions without an answer",
        ),
        problems_result("one_row_per_question", [f"{key} twice or more" for key in duplicated]),
        AssetCheckResult(
            check_name="error_rate_at_most_2_percent",
            passed=error_rate <= MAX_ERROR_RATE,
            severity=AssetCheckSeverity.ERROR,
            metadata={"error_rate": error_rate, "errors": errors, "strict_compliance": strict},
        ),
    ]
    yield from stop_on_blocking_failures(checks, BLOCKING_INFERENCE_CHECKS, f"cell {context.partition_key}")
    # What the cell answers (request hashes, replies, errors), not when it was written: a rebuild that
    # changes no answer keeps the version, so nothing downstream re-runs (scoring/conditions.py).
    version = frame_version(partition, INFERENCE_BOOKKEEPING_COLUMNS)
    store.write_partition(
        "inferences", partition, str(context.partition_key), data_version=version, inputs=inputs
    )
    yield MaterializeResult(
        metadata={
            "rows": partition.height,
            "runs": MetadataValue.text(", ".join(sorted(partition["run_id"].drop_nulls().unique()))),
            "runs_built": MetadataValue.text(", ".join(built) or "none"),
            "requests_sent": sent,
            "errors": errors,
            "error_rate": MetadataValue.float(error_rate),
            "strict_compliance": MetadataValue.float(strict),
            "cost_usd": MetadataValue.float(float(frame["cost_usd"].fill_null(0).sum())),
        },
        check_results=checks,
        data_version=DataVersion(version),
    )
