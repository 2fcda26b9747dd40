"""`oabench run`: ask the models what they have not answered, score, rebuild the leaderboard."""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import as_completed
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click
import polars as pl

from oabench_pipeline.cli.common import (
    EDITIONS_HELP,
    REPORT_ASSETS,
    _cell_pool,
    _dagster,
    _must,
    _set_aside_damaged,
    _split,
    choose_suite,
    edition_keys,
    ensure_partitions,
    leaderboard_outputs,
    load_registry_suites,
    run_assets,
    suite_option,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import ProgressBar
from oabench_pipeline.core.editions import Suite, default_suite, format_editions
from oabench_pipeline.core.models_registry import (
    ModelConfig,
    automatic_models,
    entry_for_key,
    known_models,
    overridden_keys,
)
from oabench_pipeline.core.runs import with_logical_run_ids
from oabench_pipeline.core.watch_policy import load_watch_policy
from oabench_pipeline.inference import interrupts
from oabench_pipeline.inference.batches.cells import BATCH_PRICE_FACTOR, is_batch_pending
from oabench_pipeline.inference.catalogue_store import retired_models
from oabench_pipeline.inference.cell import REPLIED, cell_name
from oabench_pipeline.inference.cell_lock import cell_lock_path, is_held, read_holder
from oabench_pipeline.inference.cost import PRICING_HINT, UNKNOWN_PRICE, cell_estimate
from oabench_pipeline.inference.credentials import credentials_problem
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.inference.freshness import (
    inferences_are_current,
    leaderboard_is_current,
    models_table_is_current,
    scores_are_current,
)
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.settings import DEFAULT_MODELS_FILE, Settings
from oabench_pipeline.warehouse import UNPARTITIONED, DamagedPartitionError, Warehouse

if TYPE_CHECKING:
    from pathlib import Path

    from dagster import DagsterInstance, Definitions
    from rich.console import Console

    from oabench_pipeline.engine.launch import OnDemandLauncher, RunSpec
    from oabench_pipeline.engine.runs import RunOutcome


@main.command()
@click.option(
    "--models",
    "models_opt",
    help="Comma-separated model keys (default: every registry model with credentials).",
)
@click.option(
    "--editions",
    "editions_opt",
    help=f"The {EDITIONS_HELP} (default: the ingested editions of the default suite, the one `oabench "
    "leaderboard` ranks; --suite all asks every edition).",
)
@suite_option(
    "Every edition of this suite (e.g. all, oabench-2026), for every selected model; not with --editions. "
    "Default: the default suite's ingested editions."
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
@click.option(
    "--retry-invalid",
    is_flag=True,
    help="Ask again the questions whose recorded answer is invalid (empty after every attempt, or no "
    "letter in it); they are otherwise final and never paid for twice.",
)
@click.option(
    "--phase",
    type=click.Choice(["1", "2"]),
    default="1",
    show_default=True,
    help="1: the multiple-choice exam; 2: the prova prático-profissional (OAB-Bench's items, docs/phase2.md).",
)
@click.option(
    "--areas", "areas_opt", help="2nd phase: comma-separated areas (e.g. direito_civil); default all."
)
@click.option(
    "--max-completion-tokens",
    type=click.IntRange(min=1),
    help="2nd phase: the completion ceiling of each request, recorded with each answer (default: the one the "
    "cell was started with; none at first). A new ceiling asks every sub-item again.",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    help="2nd phase: what this command may spend, over all its cells; it stops before a request could pass it.",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Send the unanswered questions through the model's batch API (`batch_api`) at half price, and "
    "follow the batches to the end; Ctrl-C leaves them running (docs/batch.md).",
)
@click.option(
    "--batch-fallback",
    type=click.Choice(["sync"]),
    help="With --batch: send the questions the batches gave up on as chat completions.",
)
def run(
    models_opt: str | None,
    editions_opt: str | None,
    suite: str | None,
    concurrency: int | None,
    replicates: int,
    dry_run: bool,
    force: bool,
    retry_invalid: bool,
    phase: str,
    areas_opt: str | None,
    max_completion_tokens: int | None,
    max_cost_usd: float | None,
    batch: bool,
    batch_fallback: str | None,
) -> None:
    """Ask the models every question they have not answered yet, then score and rebuild the leaderboard.

    Resumes the current replicate of each cell; `--replicates K` makes sure K complete runs exist.
    `--phase 2` answers the 2nd phase instead (OAB-Bench's protocol; `oabench judge` grades the answers).
    """
    wanted_editions = edition_keys(editions_opt)
    settings = Settings.from_env()
    warehouse = Warehouse(settings.warehouse_path)
    if batch_fallback and not batch:
        raise click.UsageError("--batch-fallback goes with --batch")
    if batch_fallback and phase == "2":
        raise click.UsageError(
            "--batch-fallback is a 1st-phase option: a 2nd-phase batch's given-up lines stay errors"
        )
    if phase == "2":
        if suite is not None or replicates != 1 or force or retry_invalid:
            raise click.UsageError("--suite, --replicates, --force and --retry-invalid are 1st-phase options")
        _run_phase2(
            settings,
            warehouse,
            models_opt,
            wanted_editions,
            areas_opt,
            concurrency,
            max_completion_tokens,
            max_cost_usd,
            dry_run,
            batch,
        )
        return
    if areas_opt is not None or max_completion_tokens is not None or max_cost_usd is not None:
        raise click.UsageError(
            "--areas, --max-completion-tokens and --max-cost-usd are 2nd-phase options (--phase 2)"
        )
    if suite is not None and editions_opt is not None:
        raise click.UsageError(
            "--suite and --editions both choose the editions: give one (--suite runs every edition of the suite)"
        )
    suites = load_registry_suites(settings)  # a bad registry stops the run before any cell, not after
    chosen_suite = choose_suite(suites, suite) if suite is not None else None
    chosen = _choose_models(settings, warehouse, _split(models_opt))
    if batch:
        from oabench_pipeline.cli.batches import refuse_without_batch_api

        refuse_without_batch_api(chosen)
    if chosen_suite is None and editions_opt is None:
        # Neither option: the default suite (what `oabench leaderboard` ranks), not every ingested edition,
        # which costs a real model ~10× what the leaderboard shows.
        chosen_suite = default_suite(suites)
        editions = _default_suite_editions(warehouse, chosen_suite)
    else:
        wanted = [str(e) for e in chosen_suite.editions] if chosen_suite else wanted_editions
        editions = _choose_editions(warehouse, wanted, chosen_suite)
    cells = [(model, edition) for model in chosen for edition in editions]
    answer_cells(
        settings,
        warehouse,
        cells,
        concurrency,
        replicates,
        dry_run,
        force,
        chosen_suite,
        retry_invalid,
        batch=batch,
        batch_fallback=batch_fallback,
    )


def _run_phase2(
    settings: Settings,
    warehouse: Warehouse,
    models_opt: str | None,
    editions: list[str] | None,
    areas_opt: str | None,
    concurrency: int | None,
    max_completion_tokens: int | None,
    max_cost_usd: float | None,
    dry_run: bool,
    batch: bool = False,
) -> None:
    """`oabench run --phase 2`: each model × edition of the 2nd phase, a launched run (`cli/phase2.py`)."""
    from oabench_pipeline.cli import phase2

    if not models_opt:
        raise click.UsageError("--phase 2 needs --models: the 2nd phase answers only the models named")
    chosen = _choose_models(settings, warehouse, _split(models_opt))
    if batch:
        from oabench_pipeline.cli.batches import refuse_without_batch_api

        refuse_without_batch_api(chosen)
    chosen_editions = phase2.phase2_editions(warehouse, editions)
    areas = _split(areas_opt)
    cells = phase2.answer_cells(warehouse, chosen, chosen_editions, areas, max_completion_tokens, batch)
    if dry_run:
        phase2.dry_run(warehouse, cells, lambda cell: max_completion_tokens, batch)
        return
    resume = f"oabench run --phase 2 --models {','.join(m.key for m in chosen)} --editions {','.join(chosen_editions)}"
    resume += f" --areas {','.join(areas)}" if areas else ""
    resume += f" --max-completion-tokens {max_completion_tokens}" if batch and max_completion_tokens else ""
    resume += " --batch" if batch else ""
    partitions = {"phase2_editions": chosen_editions, "model_keys": [m.key for m in chosen]}
    phase2.launch_cells(
        settings, warehouse, cells, partitions, concurrency, resume, None, max_cost_usd, batch
    )


def answer_cells(
    settings: Settings,
    warehouse: Warehouse,
    cells: list[tuple[ModelConfig, str]],
    concurrency: int | None = None,
    replicates: int = 1,
    dry_run: bool = False,
    force: bool = False,
    suite: Suite | None = None,
    retry_invalid: bool = False,
    batch: bool = False,
    batch_fallback: str | None = None,
) -> None:
    """Answer `cells` (model, edition) as `oabench run` does, then exit with its exit code.

    Skips what is up to date, runs every cell at once with the progress bar, stops cleanly on Ctrl-C,
    rebuilds the leaderboard (unless nothing it reads was written), and exits 0 only when every cell is
    complete (`oabench catalogue sync --run` answers its cells through here too). `suite`: the suite that
    chose the editions, if one did.
    `retry_invalid`: cells with an invalid recorded answer are not up to date; those answers are asked again.
    """
    chosen = list({model.key: model for model, _ in cells}.values())
    editions = sorted({edition for _, edition in cells}, key=int)
    for table in ("questions", "answer_keys"):  # run cannot rebuild these: say so before any work
        for path in warehouse.damaged_partitions(table, editions):
            warehouse.raise_damaged(table, path)
    if dry_run:
        if suite is not None:
            click.echo(_suite_size(warehouse, settings, suite))
        _print_dry_run(warehouse, cells, replicates, retry_invalid, batch)
        return
    # Footers only, as for the tables below: a truncated file (the damage a crash or a full disk leaves) has
    # none; a full read of every cell's two files doubled the time of a no-op run over thousands of cells.
    cells = _set_aside_damaged_cells(warehouse, cells)
    _set_aside_damaged(
        warehouse, "scores", [cell_name(m.key, e) for m, e in cells], "re-scoring it", thorough=False
    )
    board_damaged = sum(
        _set_aside_damaged(warehouse, table, [UNPARTITIONED], "rebuilding the leaderboard", thorough=False)
        for table in warehouse.tables()
        if table != "editions"
    )
    todo = (
        cells
        if force
        else [
            (m, e) for m, e in cells if not _current_or_set_aside(warehouse, m, e, replicates, retry_invalid)
        ]
    )
    registry_files = [settings.editions_file, settings.discovered_editions_file]  # suites rebuild the tables
    if not todo and not board_damaged and leaderboard_is_current(warehouse, registry_files):
        click.echo(
            f"up to date: {len(cells)} cell(s) answered and scored, leaderboard current (--force to redo)"
        )
        return
    defs, instance = _dagster(settings)
    interrupts.reset()
    models_files = (*settings.models_files, settings.catalogue_models_file)

    def work() -> int:
        """The Dagster part, on a worker thread: Ctrl-C stays ours (`inference/interrupts.py`). The instance's
        storage failing (PostgreSQL down, a full DAGSTER_HOME) beyond what each read retries is one line."""
        from oabench_pipeline.engine.launch import RunStorageError, storage_errors
        from oabench_pipeline.engine.runs import one_line

        storage_failed: tuple[type[BaseException], ...] = (RunStorageError, *storage_errors())
        try:
            return answer(instance, defs)
        except storage_failed as error:
            reason = one_line([f"{type(error).__name__}: {error}"], limit=300)
            click.echo(
                f"Error: the Dagster instance failed ({reason}); every answer received is in the response "
                "logs: rerun once its storage is back (space freed, the database up)",
                err=True,
            )
            return interrupts.exit_code() or 1

    def answer(instance: DagsterInstance, defs: Definitions) -> int:
        from oabench_pipeline.engine.stale_runs import close_dead_runs, closed_line

        # Runs a killed command left in progress (no daemon runs run monitoring here): closed first, so the
        # cells are not counted running and the run queue's slots are free.
        closed = close_dead_runs(instance, warehouse.root)
        if closed:
            click.echo(closed_line(closed), err=True)
        ensure_partitions(instance, "editions", editions)
        ensure_partitions(instance, "model_keys", [m.key for m in chosen])
        if force or not models_table_is_current(warehouse, *models_files):
            _must(run_assets(defs, instance, ["models"]), "models registry")
        logged_before = _logged_replies(warehouse, todo)
        cell_options = CellOptions(concurrency, replicates, retry_invalid, batch, batch_fallback)
        if batch:
            from oabench_pipeline.cli.batches import follow_batches
            from oabench_pipeline.engine.launch import OnDemandLauncher

            # One code server for the first runs and every relaunch that collects a finished batch: each
            # launcher starts one (the definitions imported and snapshotted: ~3 s of CPU).
            with OnDemandLauncher(instance, defs, warehouse.root) as engine:
                failures = _run_cells(defs, instance, warehouse, todo, cell_options, engine)
                relaunch = lambda cells: _run_cells(defs, instance, warehouse, cells, cell_options, engine)  # noqa: E731
                failures = follow_batches(settings, warehouse, todo, failures, relaunch)
        else:
            failures = _run_cells(defs, instance, warehouse, todo, cell_options)
        if interrupts.requested():
            which = f"--suite {suite.name}" if suite is not None else f"--editions {','.join(editions)}"
            kept = _logged_replies(warehouse, todo) - logged_before
            return _report_interrupted(warehouse, chosen, which, concurrency, replicates, kept)
        board_rebuilt = _rebuild_leaderboard(
            defs, instance, warehouse, registry_files, chosen, editions, todo
        )
        incomplete = _report_incomplete(warehouse, cells, replicates, failures)
        # A signal during the leaderboard: it finished anyway.
        return interrupts.exit_code() or incomplete or (0 if board_rebuilt else 1)

    sys.exit(interrupts.run_stoppably(work, announce=interrupts.echo_err))


def _rebuild_leaderboard(
    defs: Definitions,
    instance: DagsterInstance,
    warehouse: Warehouse,
    registry_files: list[Path],
    chosen: list[ModelConfig],
    editions: list[str],
    todo: list[tuple[ModelConfig, str]],
) -> bool:
    """Rebuild the analysis tables and the report after the cells, unless no table they read was written
    since they were built (every cell stopped by a budget or an error, or a batch still pending: no scores,
    answers or models written): then they already show what a rebuild would (~270 Dagster events spared).
    False: the rebuild failed (its one line said), or could only fail (nothing is scored)."""
    if leaderboard_is_current(warehouse, registry_files):
        click.echo("leaderboard current: no cell changed its scores; `oabench leaderboard` prints it")
        return True
    if not warehouse.has_table("scores"):
        # What the `leaderboard` step would fail on ("nothing is scored yet"), writing nothing: not run. No cell of
        # this command completed (a complete cell is scored), and the report of the incomplete cells that
        # follows says why each did not: a line about the leaderboard would only repeat it.
        return False
    # Built from the healthy cells whatever failed (scoring/inputs.py); with none, it keeps its tables.
    board = run_assets(defs, instance, REPORT_ASSETS)
    if board.success:
        click.echo(
            f"leaderboard rebuilt: {len(chosen)} model key(s) × {len(editions)} edition(s), {len(todo)} "
            f"cell(s) run; {leaderboard_outputs(warehouse)}"
        )
    else:
        from oabench_pipeline.engine.runs import one_line

        click.echo(f"leaderboard not rebuilt: {one_line(board.errors)}", err=True)
    return board.success


def _report_interrupted(
    warehouse: Warehouse,
    chosen: list[ModelConfig],
    which_editions: str,
    concurrency: int | None,
    replicates: int,
    kept: int,
) -> int:
    """What an interrupted run kept and how to resume it; the exit code (130 for SIGINT, 143 for SIGTERM).
    `which_editions`: the option that chose them (`--editions 43,44` or `--suite all`); `kept`: the replies
    its runs added to the response logs (counted there: the progress relays may miss the last ones)."""
    resume = f"oabench run --models {','.join(m.key for m in chosen)} {which_editions}"
    resume += f" --concurrency {concurrency}" if concurrency else ""
    resume += f" --replicates {replicates}" if replicates != 1 else ""
    click.echo(
        f"{interrupts.requested()}: nothing was sent after it; {kept} reply(ies) received by this command are "
        f"kept in {warehouse.root / 'responses'}; no partition was written half-done and the leaderboard was not "
        f"rebuilt. Resume (nothing kept is asked again): {resume}",
        err=True,
    )
    return interrupts.exit_code()


def _logged_replies(warehouse: Warehouse, cells: list[tuple[ModelConfig, str]]) -> int:
    """Complete lines (one reply each) in the cells' response logs."""
    total = 0
    for model, edition in cells:
        try:
            total += cell_log_path(warehouse.root / "responses", model.key, edition).read_bytes().count(b"\n")
        except FileNotFoundError:
            continue
    return total


def _report_incomplete(
    warehouse: Warehouse,
    cells: list[tuple[ModelConfig, str]],
    replicates: int,
    failures: dict[str, str],
) -> int:
    """Exit code 0 only when every requested cell is complete; else the last lines name each cell that is
    not, and why (a failed run: its failure, in one line)."""
    incomplete: list[str] = []
    keys: dict[str, None] = {}  # in the registry's order, each once
    editions: set[str] = set()
    for model, edition in cells:
        name = cell_name(model.key, edition)
        if _cell_is_current(warehouse, model, edition, replicates):
            continue
        why = failures.get(name) or _why_incomplete(warehouse, model, edition)
        incomplete.append(f"  {model.key} × {edition}: {why}")
        keys[model.key] = None
        editions.add(edition)
    if not incomplete:
        return 0
    rerun = f"oabench run --models {','.join(keys)} --editions {','.join(sorted(editions, key=int))}"
    rerun += f" --replicates {replicates}" if replicates != 1 else ""
    click.echo(
        f"{len(incomplete)} of {len(cells)} cell(s) not complete (rerun `{rerun}` to ask again what "
        "failed; answers kept are not asked again):",
        err=True,
    )
    for line in incomplete:
        click.echo(line, err=True)
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
    unanswered = len(set(active) - set(run.filter(REPLIED)["qid"]) - set(errors["qid"]))
    parts = []
    if errors.height:
        common = errors["error"].mode().sort()[0]
        parts.append(f"{errors.height} error row(s) (most often: {common[:160]})")
    if unanswered:
        parts.append(f"{unanswered} unanswered question(s)")
    return ", ".join(parts) or (
        f"not up to date (`oabench status --models {model.key} --editions {edition}` says why)"
    )


def _set_aside_damaged_cells(
    warehouse: Warehouse, cells: list[tuple[ModelConfig, str]], thorough: bool = False
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
        if not warehouse.damaged_partitions("inferences", [name], thorough=thorough):
            kept.append((model, edition))
        elif model.kind == "baseline" or log_path.is_file():
            _set_aside_damaged(
                warehouse,
                "inferences",
                [name],
                "rebuilding it from the response log (no request)",
                thorough=thorough,
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


def _current_or_set_aside(
    warehouse: Warehouse, model: ModelConfig, edition: str, replicates: int, retry_invalid: bool
) -> bool:
    """`_cell_is_current`; a cell file whose footer reads but whose rows do not (damage inside the file) is
    then set aside as a truncated one is, and the cell is not current (this run rebuilds it)."""
    try:
        return _cell_is_current(warehouse, model, edition, replicates, retry_invalid)
    except DamagedPartitionError as error:
        if error.table != "inferences" or not _set_aside_damaged_cells(warehouse, [(model, edition)], True):
            raise
        return False


def _cell_is_current(
    warehouse: Warehouse, model: ModelConfig, edition: str, replicates: int = 1, retry_invalid: bool = False
) -> bool:
    answers = inferences_are_current(warehouse, model, edition, replicates, retry_invalid)
    return answers and scores_are_current(warehouse, model.key, edition)


def _choose_models(settings: Settings, warehouse: Warehouse, keys: list[str] | None) -> list[ModelConfig]:
    """The models asked for, each checked: credentials, not retired in the model catalogue, and for an
    entry the catalogue sensor registered, a watch policy to hold it to its budgets. By default every
    hand-written model that can run: the catalogue's entries run on the policy's suite, by
    `oabench catalogue sync --run` or the sensor, or here when named in --models."""
    try:
        registry = {m.key: m for m in known_models(settings.models_files, settings.catalogue_models_file)}
        automatic = {m.key for m in automatic_models(settings.models_files, settings.catalogue_models_file)}
        policy = load_watch_policy(settings.watch_file) if automatic else None
    except ValueError as error:  # ModelsRegistryError, WatchPolicyError
        # A user's typo, not a bug: the message (file:line: field) is the whole story, no traceback.
        raise click.ClickException(str(error)) from None
    retired = retired_models(warehouse)

    def refused(model: ModelConfig) -> str | None:
        if model.kind == "api" and model.id in retired:
            return f"retired (expiration_date {retired[model.id]} in the model catalogue)"
        if model.key in automatic and policy is None:
            return f"registered from the model catalogue, and no watch policy at {settings.watch_file} budgets it"
        return None

    if keys:
        unknown = [k for k in keys if k not in registry]
        if unknown:
            raise click.UsageError(_unknown_keys(unknown, list(registry), settings))
        chosen = [registry[k] for k in keys]
        _say_overrides(settings, chosen)
        missing = [f"{m.key} ({problem})" for m in chosen if (problem := credentials_problem(m))]
        if missing:
            raise click.UsageError(f"no credentials for {', '.join(missing)}")
        blocked = [f"{m.key} ({problem})" for m in chosen if (problem := refused(m))]
        if blocked:
            raise click.UsageError(f"not run: {', '.join(blocked)}")
        return chosen
    chosen = []
    for model in registry.values():
        if problem := credentials_problem(model) or refused(model):
            click.echo(f"skipping {model.key}: {problem}")
        elif model.key in automatic:
            click.echo(
                f"skipping {model.key}: registered from the model catalogue; its cells run on the watch "
                "policy's suite (`oabench catalogue sync --run`), or name it in --models"
            )
        else:
            chosen.append(model)
    _say_overrides(settings, chosen)
    return chosen


def _unknown_keys(unknown: list[str], known: list[str], settings: Settings) -> str:
    """Which keys are unknown, and how to add each: the block to paste, and where."""
    files = " + ".join(str(path) for path in settings.models_files)
    lines = [f"unknown model key(s) {', '.join(unknown)}: not in the models registry ({files})."]
    blocks = [block for key in unknown if (block := entry_for_key(key))]
    if blocks:
        if settings.models_file == DEFAULT_MODELS_FILE.resolve():
            where = (
                "a file of your own (e.g. models.toml) and `export OABENCH_MODELS_FILE=models.toml` (read from the "
                "working directory; its models are added to the packaged ones, and its entry of a packaged key "
                "replaces that one)"
            )
        else:
            where = f"{settings.models_file} (OABENCH_MODELS_FILE)"
        lines += [
            f"To add {'it' if len(blocks) == 1 else 'them'}, `oabench models add ID [--base-url URL "
            f"--api-key-env VAR]` writes the entry, or paste into {where}:",
            "",
        ]
        lines += ["\n\n".join(blocks), ""]
        lines.append(
            f"then `oabench run --models {','.join(k for k in unknown if entry_for_key(k))} --dry-run` shows "
            "the calls and their cost "
            "(docs/registry.md)."
        )
    bad = [key for key in unknown if entry_for_key(key) is None]
    if bad:
        lines.append(f"Not a usable key: {', '.join(bad)} (letters, digits and / : . _ - only).")
    lines.append(_known_keys_line(unknown, known))
    return "\n".join(lines)


KNOWN_KEYS_SHOWN = 10


def _known_keys_line(unknown: list[str], known: list[str]) -> str:
    """Every known key when there are few; else the closest to what was asked (a registry may hold
    100,000 keys: naming them all printed a 1.3 MB line)."""
    if len(known) <= KNOWN_KEYS_SHOWN:
        return f"Known: {', '.join(known)}"
    import difflib

    closest = list(
        dict.fromkeys(
            match
            for key in unknown
            for match in difflib.get_close_matches(key, known, n=KNOWN_KEYS_SHOWN, cutoff=0.5)
        )
    )[:KNOWN_KEYS_SHOWN]
    listing = '`oabench sql "select model_key from models"` lists them all'
    if not closest:
        return f"No known key is close ({len(known):,} known; {listing})."
    return f"Closest known: {', '.join(closest)} (of {len(known):,}; {listing})"


def _say_overrides(settings: Settings, chosen: list[ModelConfig]) -> None:
    """One line per chosen key whose entry in the user's file replaces the packaged one of that key."""
    if settings.packaged_models_file is None:
        return
    overrides = overridden_keys(settings.models_files)
    for model in chosen:
        if model.key in overrides:
            click.echo(
                f"{model.key}: the entry in {overrides[model.key]} replaces the packaged one", err=True
            )


def _choose_editions(warehouse: Warehouse, wanted: list[str] | None, suite: Suite | None = None) -> list[str]:
    ingested = warehouse.partitions("questions")
    if not ingested:
        raise click.UsageError("no edition is ingested yet: run `oabench ingest` first")
    if wanted:
        missing = [e for e in wanted if e not in ingested]
        if missing:
            where = f"suite {suite.name}: " if suite else ""
            raise click.UsageError(
                f"{where}edition(s) {', '.join(missing)} not ingested; run `oabench ingest --editions {','.join(missing)}`"
            )
        return wanted
    return sorted(ingested, key=int)


def _default_suite_editions(warehouse: Warehouse, suite: Suite) -> list[str]:
    """The ingested editions of the default suite; none ingested is a usage error saying what to do."""
    ingested = set(warehouse.partitions("questions"))
    if not ingested:
        raise click.UsageError("no edition is ingested yet: run `oabench ingest` first")
    editions = [str(e) for e in suite.editions if str(e) in ingested]
    if not editions:
        raise click.UsageError(
            f"no edition of the default suite {suite.name} ({format_editions(suite.editions)}) is ingested: "
            f"run `oabench ingest --editions {format_editions(suite.editions)}`, or choose the editions with "
            "--editions or --suite all"
        )
    return editions


def _suite_size(warehouse: Warehouse, settings: Settings, suite: Suite) -> str:
    """`suite all: 29 edition(s) (1-25,37,43-45), 2380 question(s), 9.9× oabench-2026's 240`: what a
    suite weighs against the default one, before the calls it means."""
    default = default_suite(load_registry_suites(settings))
    counts = {e: warehouse.read("questions", str(e)).height for e in {*suite.editions, *default.editions}}
    ingested = {e: n for e, n in counts.items() if n}
    size = sum(ingested.get(e, 0) for e in suite.editions)
    line = f"suite {suite.name}: {len(suite.editions)} edition(s) ({format_editions(suite.editions)}), {size} question(s)"
    base = sum(ingested.get(e, 0) for e in default.editions)
    if default.name != suite.name and base:
        line += f", {size / base:.1f}× {default.name}'s {base}"
    elif default.name == suite.name:
        line += " (the default suite: what `oabench leaderboard` ranks)"
    return line + "".join(f"\n{note}" for note in _suite_exclusions(warehouse, suite))


def _suite_exclusions(warehouse: Warehouse, suite: Suite) -> list[str]:
    """What a suite leaves out: ingested editions outside it, and editions of it not ingested."""
    ingested = {int(e) for e in warehouse.partitions("questions")}
    outside = sorted(ingested - set(suite.editions))
    absent = sorted(set(suite.editions) - ingested)
    notes = []
    if outside:
        notes.append(
            f"not asked: {len(outside)} ingested edition(s) outside suite {suite.name} "
            f"({format_editions(outside)}); `--editions {format_editions(ingested)}` asks every ingested edition"
        )
    if absent:
        notes.append(
            f"not ingested, not asked: {format_editions(absent)} (`oabench ingest --editions {format_editions(absent)}`)"
        )
    return notes


def _print_dry_run(
    warehouse: Warehouse,
    cells: list[tuple[ModelConfig, str]],
    replicates: int = 1,
    retry_invalid: bool = False,
    batch: bool = False,
) -> None:
    """One line per cell, then per model key (when it has several editions), then the total. A cost no
    price snapshot tells is "unknown", never $0, and never summed as zero into a total."""
    total_calls, total_cost, unpriced, priced_calls = 0, 0.0, [], 0
    per_model: dict[str, list[tuple[int, float | None]]] = {}
    for model, edition in cells:
        calls, estimate = cell_estimate(warehouse, model, edition, replicates, retry_invalid)
        if batch and estimate is not None:
            estimate *= BATCH_PRICE_FACTOR
        if estimate is None:
            unpriced.append(model.key)
        total_calls += calls
        total_cost += estimate or 0.0
        priced_calls += calls if estimate is not None else 0
        per_model.setdefault(model.key, []).append((calls, estimate))
        click.echo(f"{model.key} × {edition}: {calls} call(s), est. prompt cost {_usd_or_unknown(estimate)}")
    for key, rows in per_model.items():
        if len(rows) > 1:
            known = [c for _, c in rows if c is not None]
            cost = _usd_or_unknown(sum(known) if len(known) == len(rows) else None)
            click.echo(
                f"{key}: {len(rows)} edition(s), {sum(c for c, _ in rows)} call(s), est. prompt cost {cost}"
            )
    unknown = sorted(set(unpriced))
    if not unknown:
        total = f"${total_cost:.4f}"
    elif not priced_calls:  # nothing with a price is sent: "$0.0000 + unknown" would read as nearly free
        total = UNKNOWN_PRICE
    else:
        total = f"${total_cost:.4f} + unknown for {', '.join(unknown)}"
    how = "" if total == UNKNOWN_PRICE else " (prompt tokens × listed price)"
    if batch and total != UNKNOWN_PRICE:
        how = " (prompt tokens × listed price × 0.5: the batch APIs bill half the listed price)"
    click.echo(f"total: {total_calls} call(s), est. prompt cost {total}{how}")
    if unknown:
        click.echo(f"no price snapshot for {', '.join(unknown)}: {PRICING_HINT}")


def _usd_or_unknown(cost: float | None) -> str:
    return UNKNOWN_PRICE if cost is None else f"${cost:.4f}"


@dataclass(frozen=True)
class CellOptions:
    """The command's options a cell's run is launched with."""

    concurrency: int | None = None
    replicates: int = 1
    retry_invalid: bool = False
    batch: bool = False
    batch_fallback: str | None = None


def _run_cells(
    defs: Definitions,
    instance: DagsterInstance,
    warehouse: Warehouse,
    cells: list[tuple[ModelConfig, str]],
    options: CellOptions,
    engine: OnDemandLauncher | None = None,
) -> dict[str, str]:
    """Every cell at once, each a Dagster run. A cell that calls a model is launched by the instance's run
    launcher in a process of its own (`engine/launch.py`, up to `MAX_CELL_RUNS` in flight): the requests of
    a model key's cells share its `concurrency` (and its host's `endpoint_concurrency`) across those
    processes through `inference/capacity.py`, so the model's pool stays full across its editions. A cell
    that calls none (a baseline's, or re-scoring answers already complete) runs in this process, one at a
    time beside them (docs/design/launched-cells.md). Returns cell → why, in one line, for each cell whose
    run failed. `engine`: the launcher to use (else one opened for these cells if one is launched)."""
    from oabench_pipeline.engine.launch import OnDemandLauncher, run_launched
    from oabench_pipeline.engine.runs import cell_failure_line

    def one_cell(model: ModelConfig, edition: str) -> tuple[RunOutcome, str] | None:
        if interrupts.requested():
            return None  # a cell not started yet after a Ctrl-C is not started at all
        # Answers already complete (e.g. imported) need only re-scoring: no inference run at all.
        answers_current = inferences_are_current(
            warehouse, model, edition, options.replicates, options.retry_invalid
        )
        if not answers_current:
            _announce_cell_lock(bar.console, warehouse, model, edition)
        bar.start_cell(f"{model.key} × {edition}")
        spec = _cell_run(model, edition, answers_current, options)
        if answers_current or model.kind == "baseline":
            # The job `_cell_run` names (`score_cell`, `oabench_cell`) is the one `run_assets` runs for these.
            selection = ["scores"] if answers_current else ["inferences", "scores"]
            config, tags = dict(spec.run_config), dict(spec.tags)
            outcome = run_assets(
                defs, instance, selection, partition_key=spec.partition_key, run_config=config, tags=tags
            )
        else:
            outcome = run_launched(launched.get(), spec)
        if options.batch and not outcome.success and is_batch_pending(outcome.errors):
            # Not a failure: the cell's batch is open at the provider (`oabench run --batch` follows it).
            return dataclasses.replace(outcome, success=True, errors=[]), "batch pending (`oabench batches`)"
        # What a cell that sent no model call did (a cell that sent any has its counts instead).
        if answers_current:
            quiet = "answers up to date, re-scored"
        elif model.kind == "baseline":
            quiet = "answered offline (baseline), scored"
        else:
            quiet = "answered with no model call, scored"
        return outcome, quiet

    # Edition-major order: when there are more cells than runs in flight, every model starts at once.
    ordered = sorted(cells, key=lambda cell: (int(cell[1]), cells.index(cell)))
    here: list[tuple[ModelConfig, str]] = []
    elsewhere: list[tuple[ModelConfig, str]] = []
    for cell in ordered:
        (here if _calls_no_model(warehouse, *cell, options) else elsewhere).append(cell)
    failures: dict[str, str] = {}
    with ExitStack() as stack:
        bar = stack.enter_context(ProgressBar())
        launched = engine or stack.enter_context(OnDemandLauncher(instance, defs, warehouse.root))
        if elsewhere:
            # The code server starts here, before any cell runs: while it starts, this process's descriptors
            # 1 and 2 point at its log (`engine/child_output.py`), which an in-process run must not write to.
            launched.get()
        pool = stack.enter_context(_cell_pool(len(elsewhere)))
        # One in-process run at a time: Dagster's runs in one process are not made to run side by side.
        in_process = stack.enter_context(_cell_pool(1))
        running = {pool.submit(one_cell, *cell): cell for cell in elsewhere}
        running |= {in_process.submit(one_cell, *cell): cell for cell in here}
        try:
            for future in as_completed(running):
                model, edition = running[future]
                result = future.result()
                if result is None:
                    continue  # not started: a Ctrl-C came first
                outcome, quiet = result
                bar.finish_cell(f"{model.key} × {edition}", outcome.success, quiet, outcome.interrupted)
                for check in outcome.failed_checks:
                    bar.console.print(f"[yellow]{model.key} × {edition}: check failed: {check}[/yellow]")
                if not outcome.success:  # why: in the last lines (`_report_incomplete`), once
                    failures[cell_name(model.key, edition)] = cell_failure_line(
                        model.key, edition, outcome.errors
                    )
        except BaseException:
            # An error no cell handles ends the command: the cells not started yet are not started. (They
            # were, after the command had failed: the bar counted them in flight, never finished, and
            # printed "45 cell(s) in flight" against a cap of 16.)
            for executor in (pool, in_process):
                executor.shutdown(wait=False, cancel_futures=True)
            raise
    return failures


def _calls_no_model(warehouse: Warehouse, model: ModelConfig, edition: str, options: CellOptions) -> bool:
    """A baseline's cell (answered offline), or one whose answers are up to date (only re-scored): its run
    is under a second of work, where a launched run's process costs ~2.5 CPU-s to start."""
    if model.kind == "baseline":
        return True
    return inferences_are_current(warehouse, model, edition, options.replicates, options.retry_invalid)


def _cell_run(model: ModelConfig, edition: str, answers_current: bool, options: CellOptions) -> RunSpec:
    """The run of one cell: `oabench_cell` (answers, then scores), or `score_cell` when the answers are
    up to date; the run-config overrides of the command's options."""
    from oabench_pipeline.automation.jobs import cell_job, score_cell_job
    from oabench_pipeline.engine.launch import RunSpec
    from oabench_pipeline.shared.partitions import cell_partition_key

    settings: dict[str, int | bool | str] = (
        {"concurrency": options.concurrency} if options.concurrency else {}
    )
    if options.replicates != 1:
        settings["replicates"] = options.replicates
    if options.retry_invalid:
        settings["retry_invalid"] = True
    if options.batch:
        settings["batch"] = True
    if options.batch_fallback:
        settings["batch_fallback"] = options.batch_fallback
    run_config = {"ops": {"inferences": {"config": settings}}} if settings and not answers_current else {}
    return RunSpec(
        job=score_cell_job.name if answers_current else cell_job.name,
        partition_key=str(cell_partition_key(model.key, int(edition))),
        run_config=run_config,
        tags=endpoint_tags(model),
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
