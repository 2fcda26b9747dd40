"""`oabench ingest`: the official PDFs into the warehouse."""

from __future__ import annotations

import sys
import time

import click
import polars as pl

from oabench_pipeline.cli.common import (
    EDITIONS_HELP,
    _dagster,
    _fail,
    _set_aside_damaged,
    edition_keys,
    ensure_partitions,
    run_assets,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.core.editions import format_editions, known_editions
from oabench_pipeline.engine.freshness import edition_is_current
from oabench_pipeline.exams.raw_store import RawStore
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import UNPARTITIONED, Warehouse


@main.command()
@click.option(
    "--editions", "editions_opt", help=f"The {EDITIONS_HELP} (default: every edition in the registry)."
)
@click.option("--force", is_flag=True, help="Re-parse editions that are already up to date.")
def ingest(editions_opt: str | None, force: bool) -> None:
    """Download, verify and parse the official PDFs into the warehouse (one progress line per edition)."""
    settings = Settings.from_env()
    known = known_editions(settings.editions_file, settings.discovered_editions_file)
    wanted = edition_keys(editions_opt) or sorted(known, key=int)
    unknown = [key for key in wanted if key not in known]
    if unknown:
        raise click.UsageError(
            f"unknown edition(s) {format_editions(map(int, unknown))}; the registry has "
            f"{format_editions(map(int, known))}"
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
    """`80 questions, 77 active, 3 annulled (3, 26, 27); preliminary answer key`, and the unresolved ones.

    The numbers the key itself annuls come first; those only the registry records (annulled after a
    preliminary key) follow `per the registry`: the organizers annulled them, the registry says so.
    """
    questions = warehouse.read("questions", edition)
    annulled = questions.filter(pl.col("status") == "annulled").sort("number")
    rows = annulled.select("number", "status_source").rows()
    by_key = ", ".join(str(n) for n, source in rows if source == "key")
    by_registry = ", ".join(str(n) for n, source in rows if source != "key")
    listed = "; ".join(part for part in (by_key, by_registry and f"{by_registry} per the registry") if part)
    preliminary = (questions["key_status"] == "preliminary").any()
    unresolved = questions.filter(pl.col("status") == "unresolved").sort("number")["number"].to_list()
    active = questions.filter(pl.col("status") == "active").height
    return (
        f"{questions.height} questions, {active} active, {annulled.height} annulled"
        + (f" ({listed})" if listed else "")
        + (
            f", {len(unresolved)} unresolved ({', '.join(map(str, unresolved))}: scored in neither score)"
            if unresolved
            else ""
        )
        + ("; preliminary answer key" if preliminary else "")
    )
