"""`oabench`: a thin command line over the same Dagster assets the UI shows."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import polars as pl

from oabench_pipeline import interrupts
from oabench_pipeline.cli_output import ProgressBar, format_table, leaderboard_summary
from oabench_pipeline.core.editions import known_editions
from oabench_pipeline.core.models_registry import ModelConfig, ModelsRegistryError, load_models_registry
from oabench_pipeline.core.runs import with_logical_run_ids
from oabench_pipeline.exams.raw_store import RawStore
from oabench_pipeline.freshness import (
    edition_is_current,
    inferences_are_current,
    leaderboard_is_current,
    models_table_is_current,
    scores_are_current,
    summary_editions,
)
from oabench_pipeline.inference.cell import ANSWERED, cell_name, complete_imported_runs, replicate_plans
from oabench_pipeline.inference.cell_lock import cell_lock_path, is_held, read_holder
from oabench_pipeline.inference.cost import estimated_prompt_tokens, listed_prompt_price
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.inference.response_log import cell_log_path, latest_by_hash, read_log
from oabench_pipeline.settings import Settings, SettingsError
from oabench_pipeline.tables import ANALYSIS_TABLES
from oabench_pipeline.warehouse import UNPARTITIONED, Warehouse, WarehouseError, partition_key_of

if TYPE_CHECKING:
    from dagster import DagsterInstance, Definitions
    from rich.console import Console

    from oabench_pipeline.runner import RunOutcome


def _split(value: str | None) -> list[str] | None:
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


def _dagster(settings: Settings) -> tuple[Definitions, DagsterInstance]:
    """The project's definitions and the persistent instance, entered for the rest of the command.

    Imported here, not at the top: Dagster and the asset modules take seconds to import, and a
    command with nothing to do (everything up to date) should not pay for them.
    """
    from oabench_pipeline.definitions import build_definitions

    instance = _instance(settings)
    return build_definitions(settings), instance


def _instance(settings: Settings) -> DagsterInstance:
    """The persistent Dagster instance, entered (made current) until the command ends."""
    from oabench_pipeline.runner import InstanceHomeError, instance_for

    try:
        instance = instance_for(settings)
    except InstanceHomeError as error:
        raise click.ClickException(str(error)) from None
    return click.get_current_context().with_resource(instance)


def ensure_partitions(instance: DagsterInstance, partitions_name: str, keys: list[str]) -> list[str]:
    from oabench_pipeline.runner import ensure_partitions as ensure

    return ensure(instance, partitions_name, keys)


def run_assets(
    defs: Definitions, instance: DagsterInstance, selection: list[str], **kwargs: Any
) -> RunOutcome:
    from oabench_pipeline.runner import run_assets as run

    return run(defs, instance, selection, **kwargs)


class _OabenchGroup(click.Group):
    """Warehouse problems (a damaged partition, a held lock, a full disk) end in their one-line message."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (WarehouseError, SettingsError) as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_OabenchGroup)
def main() -> None:
    """OABench Pipeline: LLMs on the Brazilian Bar Exam (OAB, 1st phase)."""
    _heal_catalogue(Settings.from_env())


def _heal_catalogue(settings: Settings) -> None:
    """Every command first makes sure the DuckDB catalogue holds today's views (warehouse.ensure_views).

    Quietly: a rebuild is routine (the first command of a new warehouse makes the file). When the
    warehouse folder is not a folder at all, the command itself says so in one line: no warning first.
    """
    folder = settings.warehouse_path.parent
    if folder.exists() and not folder.is_dir():
        return
    try:
        Warehouse(settings.warehouse_path).ensure_views()
    except OSError as error:  # a read-only warehouse can still be read
        click.echo(f"warning: catalogue {settings.warehouse_path} not checked: {error}", err=True)


def _set_aside_damaged(
    warehouse: Warehouse, table: str, partition_keys: list[str], rebuilt_by: str, thorough: bool = True
) -> int:
    """Move unreadable partition files out of the way, so this command rebuilds them like missing ones."""
    damaged = warehouse.damaged_partitions(table, partition_keys, thorough)
    for path in damaged:
        aside = warehouse.set_aside(path)
        click.echo(
            f"table {table}, file {path}: unreadable, set aside as {aside.name}; {rebuilt_by}", err=True
        )
    return len(damaged)


@main.command()
@click.option(
    "--editions", "editions_opt", help="Comma-separated edition numbers (default: all in the registry)."
)
@click.option("--force", is_flag=True, help="Re-parse editions that are already up to date.")
def ingest(editions_opt: str | None, force: bool) -> None:
    """Download, verify and parse the official PDFs into the warehouse (one progress line per edition)."""
    settings = Settings.from_env()
    known = known_editions(settings.editions_file, settings.discovered_editions_file)
    wanted = _split(editions_opt) or list(known)
    unknown = [key for key in wanted if key not in known]
    if unknown:
        raise click.UsageError(
            f"unknown edition(s) {', '.join(unknown)}; the registry has {', '.join(known)}"
        )
    warehouse = Warehouse(settings.warehouse_path)
    for table in ("source_files", "answer_keys", "questions"):
        _set_aside_damaged(warehouse, table, wanted, "rebuilding it from the stored PDFs")
    _set_aside_damaged(warehouse, "editions", [UNPARTITIONED], "rebuilding it from the registry")
    store = RawStore(settings.raw_dir)
    stale = [key for key in wanted if force or not edition_is_current(warehouse, store, known[key])]
    to_fetch = [
        key
        for key in stale
        if any(store.verified_path(f.sha256) is None for f in (known[key].booklet, known[key].answer_key))
    ]
    if to_fetch and (problem := settings.source_mirror_problem()):
        raise click.ClickException(f"{problem}; nothing was ingested")
    for key in wanted:
        if key not in stale:
            click.echo(f"edition {key}: {_summary(warehouse, key)} (up to date)")
    if stale or not warehouse.has_table("editions"):
        defs, instance = _dagster(settings)
        ensure_partitions(instance, "editions", wanted)
        outcome = run_assets(defs, instance, ["editions"])
        if not outcome.success:
            _fail("editions registry", outcome.errors)
    failed = False
    for key in stale:
        started = time.perf_counter()
        outcome = run_assets(defs, instance, ["exam_pdfs", "answer_keys", "questions"], partition_key=key)
        elapsed = time.perf_counter() - started
        if outcome.success:
            click.echo(f"edition {key}: {_summary(warehouse, key)} [{elapsed:.1f}s]")
        else:
            failed = True
            click.echo(f"edition {key}: FAILED [{elapsed:.1f}s]", err=True)
            for message in outcome.errors:
                click.echo(f"  {message}", err=True)
    click.echo(f"warehouse: {settings.warehouse_path}")
    sys.exit(1 if failed else 0)


def _summary(warehouse: Warehouse, edition: str) -> str:
    questions = warehouse.read("questions", edition)
    annulled = questions.filter(pl.col("status") == "annulled")["number"].to_list()
    return (
        f"{questions.height} questions, {questions.height - len(annulled)} active, {len(annulled)} annulled"
        + (f" ({', '.join(map(str, annulled))})" if annulled else "")
    )


def _fail(what: str, errors: list[str]) -> None:
    click.echo(f"{what}: FAILED", err=True)
    for message in errors:
        click.echo(f"  {message}", err=True)
    sys.exit(1)


@main.command()
@click.option(
    "--models",
    "models_opt",
    help="Comma-separated model keys (default: every registry model with credentials).",
)
@click.option(
    "--editions", "editions_opt", help="Comma-separated editions (default: every ingested edition)."
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), help="Requests in flight per model (overrides the registry)."
)
@click.option(
    "--replicates",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Complete runs each cell must have (imported ones count); from the 2nd on the same requests are "
    "asked again as a new replicate.",
)
@click.option("--dry-run", is_flag=True, help="Print the calls and the estimated cost; call nothing.")
@click.option(
    "--force", is_flag=True, help="Rerun cells that are up to date (answers still come from the log)."
)
def run(
    models_opt: str | None,
    editions_opt: str | None,
    concurrency: int | None,
    replicates: int,
    dry_run: bool,
    force: bool,
) -> None:
    """Ask the models every question they have not answered yet, then score and rebuild the leaderboard.

    Resumes the current replicate of each cell; `--replicates K` makes sure K complete runs exist.
    """
    settings = Settings.from_env()
    warehouse = Warehouse(settings.warehouse_path)
    chosen = _choose_models(settings, _split(models_opt))
    editions = _choose_editions(warehouse, _split(editions_opt))
    cells = [(model, edition) for model in chosen for edition in editions]
    for table in ("questions", "answer_keys"):  # run cannot rebuild these: say so before any work
        for path in warehouse.damaged_partitions(table, editions):
            warehouse.raise_damaged(table, path)
    if dry_run:
        _print_dry_run(warehouse, cells, replicates)
        return
    cells = _set_aside_damaged_cells(warehouse, cells)
    _set_aside_damaged(warehouse, "scores", [cell_name(m.key, e) for m, e in cells], "re-scoring it")
    board_damaged = sum(
        _set_aside_damaged(warehouse, table, [UNPARTITIONED], "rebuilding the leaderboard", thorough=False)
        for table in warehouse.tables()
        if table != "editions"
    )
    todo = cells if force else [(m, e) for m, e in cells if not _cell_is_current(warehouse, m, e, replicates)]
    if not todo and not board_damaged and leaderboard_is_current(warehouse):
        click.echo(
            f"up to date: {len(cells)} cell(s) answered and scored, leaderboard current (--force to redo)"
        )
        return
    defs, instance = _dagster(settings)
    interrupts.reset()

    def work() -> int:
        """The Dagster part, on a worker thread: Ctrl-C stays ours (`interrupts.py`)."""
        ensure_partitions(instance, "editions", editions)
        ensure_partitions(instance, "model_keys", [m.key for m in chosen])
        if force or not models_table_is_current(warehouse, settings.models_file):
            _must(run_assets(defs, instance, ["models"]), "models registry")
        failures = _run_cells(defs, instance, warehouse, todo, concurrency, replicates)
        if interrupts.requested():
            return _report_interrupted(warehouse, chosen, editions, concurrency, replicates)
        _must(run_assets(defs, instance, REPORT_ASSETS), "leaderboard")
        click.echo(
            f"leaderboard rebuilt: {len(chosen)} model key(s) × {len(editions)} edition(s), {len(todo)} cell(s) run; "
            "`oabench leaderboard` prints it"
        )
        incomplete = _report_incomplete(warehouse, cells, replicates, failures)
        return interrupts.exit_code() or incomplete  # a signal during the leaderboard: it finished anyway

    sys.exit(interrupts.run_stoppably(work, announce=interrupts.echo_err))


def _report_interrupted(
    warehouse: Warehouse,
    chosen: list[ModelConfig],
    editions: list[str],
    concurrency: int | None,
    replicates: int,
) -> int:
    """What an interrupted run kept and how to resume it; the exit code (130 for SIGINT, 143 for SIGTERM)."""
    resume = f"oabench run --models {','.join(m.key for m in chosen)} --editions {','.join(editions)}"
    resume += f" --concurrency {concurrency}" if concurrency else ""
    resume += f" --replicates {replicates}" if replicates != 1 else ""
    click.echo(
        f"{interrupts.requested()}: nothing was sent after it; every answer received is kept in "
        f"{warehouse.root / 'responses'}; no partition was written half-done and the leaderboard was not "
        f"rebuilt. Resume (nothing kept is asked again): {resume}",
        err=True,
    )
    return interrupts.exit_code()


def _report_incomplete(
    warehouse: Warehouse, cells: list[tuple[ModelConfig, str]], replicates: int, failures: list[str]
) -> int:
    """Exit code 0 only when every requested cell is complete; else name each cell that is not, and why."""
    incomplete = []
    for model, edition in cells:
        name = cell_name(model.key, edition)
        if _cell_is_current(warehouse, model, edition, replicates):
            continue
        why = "its run failed (see above)" if name in failures else _why_incomplete(warehouse, model, edition)
        incomplete.append(f"  {model.key} × {edition}: {why}")
    if not incomplete:
        return 0
    click.echo(f"{len(incomplete)} of {len(cells)} cell(s) not complete:", err=True)
    for line in incomplete:
        click.echo(line, err=True)
    click.echo("rerun `oabench run` to ask again what failed (answers kept are not asked again)", err=True)
    return 1


def _why_incomplete(warehouse: Warehouse, model: ModelConfig, edition: str) -> str:
    """Error rows (with the most frequent error) and unanswered questions of the cell's newest run."""
    rows = with_logical_run_ids(warehouse.read("inferences", cell_name(model.key, edition)), model.key)
    if rows.is_empty():
        return "no row written"
    newest = rows.sort("created_at", nulls_last=True)["run_id"][-1]
    run = rows.filter((pl.col("run_id") == newest) & ~pl.col("skipped").fill_null(False))
    errors = run.filter(pl.col("error").is_not_null())
    active = warehouse.read("questions", edition).filter(pl.col("status") == "active")["qid"]
    unanswered = len(set(active) - set(run.filter(ANSWERED)["qid"]) - set(errors["qid"]))
    parts = []
    if errors.height:
        common = errors["error"].mode().sort()[0]
        parts.append(f"{errors.height} error row(s) (most often: {common[:160]})")
    if unanswered:
        parts.append(f"{unanswered} unanswered question(s)")
    return ", ".join(parts) or "not up to date (`oabench status` says why)"


def _set_aside_damaged_cells(
    warehouse: Warehouse, cells: list[tuple[ModelConfig, str]]
) -> list[tuple[ModelConfig, str]]:
    """Set unreadable `inferences` partitions aside; the cells that can be rebuilt without paying again.

    A live cell is rebuilt from its response log, a baseline recomputed. A cell with no log at all (an
    imported run) would be asked anew, so it is skipped, its file left as is, with a line saying how to
    restore it.
    """
    kept = []
    for model, edition in cells:
        name = cell_name(model.key, edition)
        log_path = cell_log_path(warehouse.root / "responses", model.key, edition)
        if not warehouse.damaged_partitions("inferences", [name]):
            kept.append((model, edition))
        elif model.kind == "baseline" or log_path.is_file():
            _set_aside_damaged(
                warehouse, "inferences", [name], "rebuilding it from the response log (no request)"
            )
            kept.append((model, edition))
        else:  # left in place: set aside, the next run would find the cell missing and pay for it
            click.echo(
                f"table inferences, file {warehouse.partition_path('inferences', name)}: unreadable and no "
                f"response log {log_path} (an imported run?): skipped, nothing asked; `oabench import` "
                "of its run folder restores it",
                err=True,
            )
    return kept


def _set_aside_damaged_imports(warehouse: Warehouse) -> None:
    """Set aside unreadable `inferences` partitions with no response log (imported cells): the import
    merges into a cell's partition, so it needs a readable one or none (footers only: cheap)."""
    for path in warehouse.damaged_partitions("inferences", thorough=False):
        edition, _, model_key = partition_key_of(path).partition("|")
        if not cell_log_path(warehouse.root / "responses", model_key, edition).is_file():
            aside = warehouse.set_aside(path)
            click.echo(
                f"table inferences, file {path}: unreadable, set aside as {aside.name}; this import rebuilds "
                "it if the folder holds its run",
                err=True,
            )


def _cell_is_current(warehouse: Warehouse, model: ModelConfig, edition: str, replicates: int = 1) -> bool:
    return inferences_are_current(warehouse, model, edition, replicates) and scores_are_current(
        warehouse, model.key, edition
    )


# Every analysis table (one asset each, built by one step) and the report that renders them.
REPORT_ASSETS = [*ANALYSIS_TABLES, "leaderboard_report"]


def _choose_models(settings: Settings, keys: list[str] | None) -> list[ModelConfig]:
    try:
        registry = {m.key: m for m in load_models_registry(settings.models_file)}
    except ModelsRegistryError as error:
        # A user's typo, not a bug: the message (file:line: field) is the whole story, no traceback.
        raise click.ClickException(str(error)) from None
    if keys:
        unknown = [k for k in keys if k not in registry]
        if unknown:
            raise click.UsageError(
                f"unknown model key(s) {', '.join(unknown)} (registry {settings.models_file}); known: {', '.join(registry)}"
            )
        chosen = [registry[k] for k in keys]
        missing = [f"{m.key} ({problem})" for m in chosen if (problem := credentials_problem(m))]
        if missing:
            raise click.UsageError(f"no credentials for {', '.join(missing)}")
        return chosen
    chosen = []
    for model in registry.values():
        problem = credentials_problem(model)
        if problem:
            click.echo(f"skipping {model.key}: {problem}")
        else:
            chosen.append(model)
    return chosen


def _choose_editions(warehouse: Warehouse, wanted: list[str] | None) -> list[str]:
    ingested = warehouse.partitions("questions")
    if not ingested:
        raise click.UsageError("no edition is ingested yet: run `oabench ingest` first")
    if wanted:
        missing = [e for e in wanted if e not in ingested]
        if missing:
            raise click.UsageError(
                f"edition(s) {', '.join(missing)} not ingested; run `oabench ingest --editions {','.join(missing)}`"
            )
        return wanted
    return sorted(ingested, key=int)


def _print_dry_run(warehouse: Warehouse, cells: list[tuple[ModelConfig, str]], replicates: int = 1) -> None:
    total_calls, total_cost, unpriced = 0, 0.0, []
    for model, edition in cells:
        questions = warehouse.read("questions", edition)
        logged = latest_by_hash(read_log(cell_log_path(warehouse.root / "responses", model.key, edition)))
        existing = with_logical_run_ids(
            warehouse.read("inferences", cell_name(model.key, edition)), model.key
        )
        if model.kind == "baseline":
            calls, cost = 0, 0.0
        else:
            elsewhere = complete_imported_runs(existing, int(edition), summary_editions(warehouse, existing))
            plans = replicate_plans(model, questions, logged, existing, replicates, elsewhere)
            pending = [request for plan in plans for request in plan.pending]
            calls = len(pending)
            tokens = estimated_prompt_tokens([r.body for r in pending])
            price = listed_prompt_price(warehouse, model)
            cost = tokens * price if price is not None else 0.0
            if price is None and calls:
                unpriced.append(model.key)
        total_calls += calls
        total_cost += cost
        click.echo(f"{model.key} × {edition}: {calls} call(s), est. prompt cost ${cost:.4f}")
    click.echo(
        f"total: {total_calls} call(s), est. prompt cost ${total_cost:.4f} (prompt tokens × listed price)"
    )
    if unpriced:
        click.echo(
            f"no price snapshot for {', '.join(sorted(set(unpriced)))}: materialize model_pricing first"
        )


def _run_cells(
    defs: Definitions,
    instance: DagsterInstance,
    warehouse: Warehouse,
    cells: list[tuple[ModelConfig, str]],
    concurrency: int | None,
    replicates: int = 1,
) -> list[str]:
    """Every cell at once, each its own in-process Dagster run (own checks, own state in the UI), in a
    thread of this process: the requests of a model key's cells share its `concurrency` (and its host's
    `endpoint_concurrency`) through `inference/capacity.py`, so the model's pool stays full across its
    editions, and each run's Dagster bookkeeping overlaps other cells' model calls."""
    from oabench_pipeline.partitions import cell_partition_key

    def one_cell(model: ModelConfig, edition: str) -> tuple[RunOutcome, str] | None:
        if interrupts.requested():
            return None  # a cell not started yet after a Ctrl-C is not started at all
        # Answers already complete (e.g. imported) need only re-scoring: no inference run at all.
        assets = (
            ["scores"]
            if inferences_are_current(warehouse, model, edition, replicates)
            else ["inferences", "scores"]
        )
        settings = {"concurrency": concurrency} if concurrency else {}
        if replicates != 1:
            settings["replicates"] = replicates
        run_config = (
            {"ops": {"inferences": {"config": settings}}} if settings and "inferences" in assets else None
        )
        if "inferences" in assets:
            _announce_cell_lock(bar.console, warehouse, model, edition)
        bar.start_cell(f"{model.key} × {edition}")
        outcome = run_assets(
            defs,
            instance,
            assets,
            partition_key=cell_partition_key(model.key, int(edition)),
            run_config=run_config,
            tags=endpoint_tags(model),
        )
        # What a cell that sent no model call did (a cell that sent any has its counts instead).
        quiet = (
            "answers up to date, re-scored" if assets == ["scores"] else "answered with no model call, scored"
        )
        return outcome, quiet

    failures = []
    with ProgressBar() as bar, _cell_pool(len(cells)) as pool:
        # Edition-major order: when there are more cells than threads, every model starts at once.
        ordered = sorted(cells, key=lambda cell: (int(cell[1]), cells.index(cell)))
        running = {pool.submit(one_cell, model, edition): (model, edition) for model, edition in ordered}
        for future in as_completed(running):
            model, edition = running[future]
            result = future.result()
            if result is None:
                continue  # not started: a Ctrl-C came first
            outcome, quiet = result
            bar.finish_cell(f"{model.key} × {edition}", outcome.success, quiet)
            for check in outcome.failed_checks:
                bar.console.print(f"[yellow]{model.key} × {edition}: check failed: {check}[/yellow]")
            if not outcome.success:
                failures.append(str(cell_partition_key(model.key, int(edition))))
                for message in outcome.errors:
                    bar.console.print(f"[red]{model.key} × {edition}: {message}[/red]")
    return failures


# Cell runs in flight in one `oabench` process. Requests are bounded by the models' capacities, not by
# this; it only bounds the threads (and Dagster bookkeeping) at once.
MAX_CELL_RUNS = 32


def _cell_pool(cells: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=max(1, min(cells, MAX_CELL_RUNS)), thread_name_prefix="oabench-cell"
    )


def _announce_cell_lock(console: Console, warehouse: Warehouse, model: ModelConfig, edition: str) -> None:
    """One line when another process is answering the cell (this run waits for it), or died holding it."""
    path = cell_lock_path(warehouse.root, model.key, edition)
    held = is_held(path)
    holder = read_holder(path)
    # Held before or after reading the record: busy. A record with the lock free before and after, and
    # still the same record (a clean release deletes it first), is a holder that died.
    if held or is_held(path):
        who = holder.describe() if holder else "another process"
        message = f"{model.key} × {edition}: being answered by {who}; waiting for it, then sending only what it left"
    elif holder is not None and read_holder(path) == holder:
        message = (
            f"{model.key} × {edition}: taking over the lock of {holder.describe()}, which died holding it"
        )
    else:
        return
    console.print(message, markup=False, soft_wrap=True)


def _must(outcome: RunOutcome, what: str) -> None:
    if not outcome.success:
        _fail(what, outcome.errors)


@main.command(name="import")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
def import_runs(path: str) -> None:
    """Import published OABench run folders into `inferences` (source 'imported'), then score them."""
    settings = Settings.from_env()
    _set_aside_damaged_imports(Warehouse(settings.warehouse_path))
    defs, instance = _dagster(settings)
    config = {"ops": {"published_runs": {"config": {"path": str(Path(path).resolve())}}}}
    from oabench_pipeline.inference.imports import unanswered_questions
    from oabench_pipeline.partitions import cell_partition_key

    _must(run_assets(defs, instance, ["published_runs"], run_config=config), f"import {path}")
    warehouse = Warehouse(settings.warehouse_path)
    cells = warehouse.query("select distinct model_key, edition from inferences where source = 'imported'")

    def score_cell(model_key: str, edition: int) -> tuple[str, bool, RunOutcome | None]:
        """(cell, incomplete?, the scores run or None when the edition is not ingested)."""
        partition = cell_partition_key(model_key, edition)
        if warehouse.read("questions", str(edition)).is_empty():
            return f"{model_key} × {edition}", False, None
        incomplete = bool(
            unanswered_questions(warehouse, str(edition), warehouse.read("inferences", str(partition)))
        )
        if incomplete:
            # Recorded as the failed cell it is (failed check, failed partition), as `oabench status` says.
            offline = {
                "ops": {"inferences": {"config": {"offline": True}}},
                "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},  # an expected failure
            }
            run_assets(defs, instance, ["inferences"], partition_key=partition, run_config=offline)
        outcome = run_assets(defs, instance, ["scores"], partition_key=partition)
        return f"{model_key} × {edition}", incomplete, outcome

    scored, incomplete = 0, []
    # Every cell at once, each its own runs (as `oabench run`): Dagster's per-run bookkeeping overlaps.
    with _cell_pool(cells.height) as pool:
        results = list(pool.map(lambda row: score_cell(*row), cells.iter_rows()))
    for (model_key, edition), (name, was_incomplete, outcome) in zip(cells.iter_rows(), results, strict=True):
        if outcome is None:
            click.echo(
                f"{name}: edition not ingested, not scored (run `oabench ingest --editions {edition}`)"
            )
            continue
        if was_incomplete:
            incomplete.append(name)
        _must(outcome, f"scores {cell_partition_key(model_key, edition)}")
        scored += 1
    _must(run_assets(defs, instance, ["models", *REPORT_ASSETS]), "leaderboard")
    click.echo(f"imported {cells.height} cell(s) from {path}; scored {scored}")
    if incomplete:
        click.echo(
            f"incomplete (not every question answered, shown as failed): {', '.join(incomplete)}; "
            "`oabench status` has the counts"
        )


@main.command(name="status")
@click.option("--models", "models_opt", help="Comma-separated model keys (default: all).")
@click.option("--editions", "editions_opt", help="Comma-separated editions (default: all).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def status_cmd(models_opt: str | None, editions_opt: str | None, fmt: str) -> None:
    """Each cell (edition × model key): complete, missing, failed, stale or running, and what completing costs.

    Exit code 0 only when every listed cell is complete.
    """
    settings = Settings.from_env()
    from oabench_pipeline.status import collect_status

    report = collect_status(settings, _instance(settings), _split(editions_opt), _split(models_opt))
    if fmt == "json":
        click.echo(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        table = format_table(report.display_frame(), "table", wrap={"reason": 60})
        click.echo(table if report.cells else "no cells to show")
        click.echo(report.summary())
    sys.exit(0 if report.complete else 1)


@main.command(name="sql")
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
)
def sql_cmd(query: str, fmt: str) -> None:
    """Run one read-only SQL query (DuckDB dialect) over the warehouse tables and print the result.

    Example: oabench sql "select model_key, official_score from leaderboard order by rank"
    """
    from oabench_pipeline.query import QueryError, run_read_only

    settings = Settings.from_env()
    try:
        frame = run_read_only(Warehouse(settings.warehouse_path), query)
    except QueryError as error:
        raise click.ClickException(f"query failed: {error}") from None
    click.echo(format_table(frame, fmt))


@main.command(name="leaderboard")
@click.option("--by", type=click.Choice(["model", "edition", "area"]), default="model", show_default=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "markdown"]),
    default="table",
    show_default=True,
)
@click.option(
    "--wide", is_flag=True, help="Every column in the table (csv, json and markdown always have them)."
)
@click.option(
    "--as-of",
    "as_of",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="Count only runs completed before the end of this day (UTC), e.g. 2026-03-03.",
)
def leaderboard_cmd(by: str, fmt: str, wide: bool, as_of: datetime | None) -> None:
    """Print the leaderboard (or its per-edition / per-area breakdown) from the warehouse.

    The default table fits 120 columns; csv and json keep every column at full precision. With --as-of
    the tables are computed for that day from the scored runs (nothing is written).
    """
    settings = Settings.from_env()
    table = {"model": "leaderboard", "edition": "leaderboard_by_edition", "area": "leaderboard_by_area"}[by]
    warehouse = Warehouse(settings.warehouse_path)
    if as_of is None:
        frame = warehouse.read(table)
        by_edition = warehouse.read("leaderboard_by_edition")
    elif not warehouse.has_table("scores"):
        raise click.ClickException("nothing is scored yet: run `oabench run` or `oabench import` first")
    else:
        from oabench_pipeline.core.leaderboard import build_leaderboard_tables

        with warehouse.reader() as con:
            tables = build_leaderboard_tables(con, as_of=as_of.date())
        frame, by_edition = tables[table], tables["leaderboard_by_edition"]
        if frame.is_empty():
            raise click.ClickException(f"no run had started by the end of {as_of.date()} (UTC)")
    if frame.is_empty():
        raise click.ClickException(f"no {table} table yet: run `oabench run` or `oabench import` first")
    note = None
    if fmt == "table" and not wide:
        if by == "model":
            from oabench_pipeline.core.reports import editions_covered

            frame, note = leaderboard_summary(
                frame.sort("rank", "official_score", nulls_last=True, descending=[False, True]),
                editions_covered(by_edition),
            )
        else:
            columns = {c: h for c, h in TERMINAL_COLUMNS[by].items() if c in frame.columns}
            frame = frame.select(list(columns)).rename(columns)
    click.echo(format_table(frame, fmt))
    if note:
        click.echo(note)


# What fits a terminal for the breakdowns (`--by model` has its own summary); `--wide` shows every column.
TERMINAL_COLUMNS = {
    "edition": {
        "model_key": "model",
        "edition": "edition",
        "official_score": "score",
        "official_total": "of",
        "official_accuracy": "accuracy",
        "technical_accuracy": "technical",
        "passed": "passed",
        "p_pass": "p_pass",
        "invalid_count": "invalid",
        "avg_latency_ms": "avg ms",
        "cost_usd": "cost $",
    },
    "area": {
        "model_key": "model",
        "area": "area",
        "correct": "correct",
        "total": "of",
        "accuracy": "accuracy",
    },
}
