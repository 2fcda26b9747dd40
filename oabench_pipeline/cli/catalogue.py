"""`oabench catalogue`: the model catalogue, what the watch policy makes of it, and this month's spend.

`oabench catalogue` fetches the listing and writes nothing: what is new since the newest stored snapshot,
what the policy would register and what each would cost on its suite, and what automatic runs spent this
month. `oabench catalogue sync` is one tick of `model_catalogue_sensor` by hand (`catalogue/watch.py`:
snapshot, decisions, registry entries), recorded in the Dagster instance as the sensor's are; `--run`
then answers the automatic models' cells exactly as `oabench run` does (`cli/run.py: answer_cells`: the
same progress, exit codes and Ctrl-C). `oabench catalogue add ID` writes a hand-written registry entry for
a catalogue model (one the policy skipped, say), which `oabench run` and the registry sensor then run as
any other.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any, cast

import click
import polars as pl

from oabench_pipeline.catalogue.decisions import Decision
from oabench_pipeline.catalogue.listing import takes_and_gives_text
from oabench_pipeline.catalogue.snapshots import snapshot_changes, stored_snapshots
from oabench_pipeline.catalogue.watch import (
    TickOutcome,
    WatchSetup,
    append_registry_entries,
    entries_for,
    entry_table,
    pending_automatic_cells,
    preview_tick,
    run_tick,
    suite_estimator,
)
from oabench_pipeline.cli.common import (
    REPORT_ASSETS,
    _dagster,
    _must,
    ensure_partitions,
    leaderboard_outputs,
    run_assets,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.cli.run import answer_cells
from oabench_pipeline.core.editions import format_editions, load_suites, resolve_suite
from oabench_pipeline.core.models_registry import load_registries
from oabench_pipeline.core.prompts import PROTOCOLS, Protocol
from oabench_pipeline.core.watch_policy import load_watch_policy
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

# Skips listed one by one without --all: the ones a person acts on (the policy's own skips are counted).
NOTABLE_SKIPS = ("price", "budget", "modality", "retired", "registry", "suite")


@main.group(name="catalogue", invoke_without_command=True)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--all", "show_all", is_flag=True, help="List every change and decision, the policy's skips too."
)
@click.option(
    "--stored", is_flag=True, help="Read the newest stored snapshot instead of fetching the listing."
)
@click.pass_context
def catalogue(ctx: click.Context, fmt: str, show_all: bool, stored: bool) -> None:
    """What is new in the model catalogue, what the watch policy would run and at what cost, and what
    automatic runs spent this month. Fetches the listing; writes nothing.

    Exit code 1 when the listing could not be fetched (the newest stored snapshot is shown instead).
    """
    if ctx.invoked_subcommand is not None:
        return
    setup = WatchSetup.from_settings(Settings.from_env())
    outcome = preview_tick(setup, stored=stored)
    failed = None
    if outcome.problem and outcome.fetch_failed:
        failed = outcome.problem
        click.echo(f"warning: {failed}; showing the newest stored snapshot instead", err=True)
        outcome = preview_tick(setup, stored=True)
    if outcome.problem:
        raise click.ClickException(outcome.problem)
    if fmt == "json":
        click.echo(json.dumps(_as_json(setup, outcome, failed), ensure_ascii=False, default=str, indent=2))
    else:
        _print_preview(setup, outcome, show_all, fetched=not stored and failed is None)
    sys.exit(1 if failed else 0)


def _print_preview(setup: WatchSetup, outcome: TickOutcome, show_all: bool, fetched: bool) -> None:
    assert outcome.snapshot is not None
    snapshot, previous = outcome.snapshot, outcome.previous
    source = "fetched now" if fetched else f"stored snapshot of {snapshot.fetched_at:%Y-%m-%d %H:%M:%S} UTC"
    url = snapshot.catalogue_url or setup.catalogue_url
    if url != setup.catalogue_url:  # a snapshot of the listing set before: say which one is set now
        source += f"; OABENCH_CATALOGUE_URL is now {setup.catalogue_url}"
    click.echo(f"catalogue {url}: {snapshot.frame.height} models ({source})")
    changes = snapshot_changes(previous.frame if previous else None, snapshot.frame)
    if previous is None and not show_all:
        click.echo("no earlier snapshot: every listed model is new (--all lists them)")
    elif changes.is_empty():
        click.echo(
            f"nothing new since the snapshot of {previous.fetched_at:%Y-%m-%d %H:%M:%S} UTC"
            if previous
            else ""
        )
    else:
        since = f"the snapshot of {previous.fetched_at:%Y-%m-%d %H:%M:%S} UTC" if previous else "ever"
        counts = ", ".join(f"{n} {change}" for change, n in Counter(changes["change"]).most_common())
        click.echo(f"since {since}: {counts}")
        click.echo(format_table(changes, "table", wrap={"name": 30}))
    _print_policy(setup, outcome, show_all)
    if outcome.budget is not None:
        click.echo(f"this month: {outcome.budget.line()}")


def _print_policy(setup: WatchSetup, outcome: TickOutcome, show_all: bool) -> None:
    policy = outcome.policy
    if policy is None:
        click.echo(
            f"no watch policy at {setup.watch_file} (OABENCH_WATCH_FILE): nothing would be registered or sent "
            "(watch.example.toml is one to start from)"
        )
        return
    editions = format_editions(int(e) for e in outcome.editions) or "none"
    click.echo(
        f"watch policy {setup.watch_file}: suite {outcome.suite} (ingested editions: {editions}), protocols "
        f"{', '.join(policy.protocols)}, max_run_cost_usd ${policy.max_run_cost_usd:g}, monthly_budget_usd "
        f"${policy.monthly_budget_usd:g}"
    )
    taken = [d for d in outcome.decisions if d.outcome == "registered"]
    skipped = [d for d in outcome.decisions if d.outcome == "skipped"]
    if not outcome.decisions:
        click.echo("no model needs a decision: everything listed was decided before")
        return
    click.echo(f"would register {len(taken)}:" if taken else "would register none")
    if taken:
        click.echo(format_table(decisions_frame(taken), "table", wrap={"detail": 60}))
    if skipped:
        counts = ", ".join(f"{n} {reason}" for reason, n in Counter(d.reason for d in skipped).most_common())
        click.echo(f"would skip {len(skipped)} ({counts})")
        shown = skipped if show_all else [d for d in skipped if d.reason in NOTABLE_SKIPS]
        if shown:
            click.echo(format_table(decisions_frame(shown), "table", wrap={"detail": 60}))
        if len(shown) < len(skipped):
            click.echo(
                f"({len(skipped) - len(shown)} skipped by the policy's include/exclude/created_after: --all lists them)"
            )


def decisions_frame(decisions: list[Decision]) -> pl.DataFrame:
    """Decisions as a table a person reads (`catalogue_decisions` has every column)."""
    return pl.DataFrame(
        {
            "model": [d.model for d in decisions],
            "outcome": [d.outcome if d.outcome == "registered" else f"skip: {d.reason}" for d in decisions],
            "est. cost $": [d.estimated_cost_usd for d in decisions],
            "detail": [d.detail for d in decisions],
        },
        schema={"model": pl.String, "outcome": pl.String, "est. cost $": pl.Float64, "detail": pl.String},
    )


def _as_json(setup: WatchSetup, outcome: TickOutcome, failed: str | None) -> dict[str, Any]:
    assert outcome.snapshot is not None
    previous = outcome.previous
    changes = snapshot_changes(previous.frame if previous else None, outcome.snapshot.frame)
    return {
        "catalogue_url": setup.catalogue_url,
        "fetch_error": failed,
        "snapshot": {
            "fetched_at": outcome.snapshot.fetched_at,
            "models": outcome.snapshot.frame.height,
            "catalogue_url": outcome.snapshot.catalogue_url or setup.catalogue_url,
        },
        "previous_snapshot": previous.fetched_at if previous else None,
        "changes": changes.to_dicts(),
        "policy": outcome.policy.model_dump(mode="json") if outcome.policy else None,
        "suite": outcome.suite,
        "editions": [int(e) for e in outcome.editions],
        "decisions": [
            {
                "model": d.model,
                "outcome": d.outcome,
                "reason": d.reason,
                "detail": d.detail,
                "model_keys": list(d.model_keys),
                "estimated_cost_usd": d.estimated_cost_usd,
            }
            for d in outcome.decisions
        ],
        "month": outcome.budget.as_json() if outcome.budget else None,
    }


@catalogue.command(name="sync")
@click.option(
    "--run", "answer", is_flag=True, help="Then answer the automatic models' cells, as `oabench run`."
)
@click.option("--concurrency", type=click.IntRange(min=1), help="Requests in flight per model (with --run).")
def sync(answer: bool, concurrency: int | None) -> None:
    """One tick of model_catalogue_sensor by hand: fetch a snapshot, decide, register.

    With --run, answer the cells of the models the watch policy registered (this tick's, and earlier ones
    not complete) exactly as `oabench run` would: same progress, exit codes and Ctrl-C. Nothing is sent
    without a watch policy, and never beyond its budgets.
    """
    settings = Settings.from_env()
    setup = WatchSetup.from_settings(settings)
    outcome = run_tick(setup)
    if outcome.problem:
        raise click.ClickException(outcome.problem)
    defs, instance = _dagster(settings)
    from oabench_pipeline.catalogue.assets import tick_materializations

    for event in tick_materializations(outcome):  # the UI shows a tick by hand as it shows the sensor's
        instance.report_runless_asset_event(event)
    if outcome.registered:
        ensure_partitions(instance, "editions", outcome.editions)
        ensure_partitions(instance, "model_keys", [m.key for m in outcome.registered])
    _print_tick(outcome)
    if outcome.registered:
        click.echo(f"registry entries written to {setup.catalogue_file}")
    cells = pending_automatic_cells(setup) if answer else []
    assert outcome.snapshot is not None and outcome.budget is not None
    if outcome.prices_changed:  # new prices, retirements or models: the leaderboard shows them (or `--run`)
        _must(run_assets(defs, instance, ["model_pricing"]), "model_pricing")
        if setup.store.has_table("scores") and not cells:
            _must(run_assets(defs, instance, REPORT_ASSETS), "leaderboard")
            click.echo(
                f"prices and leaderboard rebuilt from the new snapshot; {leaderboard_outputs(setup.store)}"
            )
    if not answer:
        if outcome.registered:
            keys = ",".join(m.key for m in outcome.registered)
            click.echo(
                f"not run yet: `oabench catalogue sync --run` answers their cells (or `oabench run --models {keys} "
                f"--editions {','.join(outcome.editions)}`; the model_catalogue_sensor requests them when it runs)"
            )
        return
    if not cells:
        click.echo("no automatic model has cells to answer")
        return
    answer_cells(settings, setup.store, cells, concurrency)


def _print_tick(outcome: TickOutcome) -> None:
    for decision in outcome.decisions:
        if decision.outcome == "registered" or decision.reason in NOTABLE_SKIPS:
            click.echo(decision.line())
    policy_skips = sum(d.reason == "policy" for d in outcome.decisions)
    if policy_skips:
        click.echo(
            f"{policy_skips} model(s) skipped by the policy (catalogue_decisions has each, with its reason)"
        )
    assert outcome.budget is not None
    click.echo(f"this month: {outcome.budget.line()}")
    click.echo(outcome.summary())


@catalogue.command(name="add")
@click.argument("model_id")
@click.option(
    "--protocol", "protocol_name", type=click.Choice(PROTOCOLS), default="direto", show_default=True
)
def add(model_id: str, protocol_name: str) -> None:
    """Write a hand-written models-registry entry for catalogue model MODEL_ID (one the policy skipped).

    The entry takes its label and knowledge cutoff from the newest catalogue snapshot and the endpoint
    fields (base_url, api_key_env, concurrency) from the watch policy when there is one. It is an entry
    like any other: `oabench run --models KEY` runs it, not held to the policy's budgets.
    """
    settings = Settings.from_env()
    store = Warehouse(settings.warehouse_path)
    snapshots = stored_snapshots(store, 1)
    if not snapshots:
        raise click.ClickException("no model_catalogue snapshot yet: run `oabench catalogue sync` first")
    listed = snapshots[0].frame.filter(pl.col("model") == model_id).to_dicts()
    if not listed:
        raise click.ClickException(
            f"{model_id!r} is not in the newest catalogue snapshot ({snapshots[0].fetched_at:%Y-%m-%d %H:%M} UTC)"
        )
    row = listed[0]
    protocol = cast("Protocol", protocol_name)
    if not takes_and_gives_text(row["input_modalities"], row["output_modalities"]):
        raise click.ClickException(
            f"{model_id} does not read text and write text (input {row['input_modalities']}, output "
            f"{row['output_modalities']}): it cannot answer the exam"
        )
    try:
        suites = load_suites(settings.editions_file, settings.discovered_editions_file)
        policy = load_watch_policy(settings.watch_file, suites)
        [entry] = entries_for(row, [protocol], policy)
        registry = {m.key for m in load_registries(settings.models_files)}
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    if entry.key in registry:
        raise click.ClickException(f"{entry.key} is already in the models registry {settings.models_file}")
    append_registry_entries(settings.models_file, [entry_table(row, protocol, policy)])
    suite = resolve_suite(policy.suite if policy else None, suites)
    editions = [str(e) for e in suite.editions if str(e) in store.partitions("questions")]
    estimate = suite_estimator(store, editions)(row, [entry]) if editions else None
    cost = f"estimated ${estimate:.4f} on suite {suite.name}" if estimate is not None else "no estimate"
    click.echo(
        f"added {entry.key} to {settings.models_file} ({cost}); `oabench run --models {entry.key}` runs it"
    )
