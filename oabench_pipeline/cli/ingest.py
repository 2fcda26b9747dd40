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
from oabench_pipeline.core.phase2.sources import PHASE2_FILE_KINDS, Phase2SourcesError, load_phase2_sources
from oabench_pipeline.core.versions import PHASE2_PARSER_VERSION
from oabench_pipeline.inference.freshness import edition_is_current
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.raw_store import RawStore
from oabench_pipeline.warehouse import UNPARTITIONED, Warehouse


@main.command()
@click.option(
    "--editions", "editions_opt", help=f"The {EDITIONS_HELP} (default: every edition in the registry)."
)
@click.option("--force", is_flag=True, help="Re-parse editions that are already up to date.")
@click.option(
    "--phase",
    type=click.Choice(["1", "2"]),
    default="1",
    show_default=True,
    help="1: the official PDFs of the 1st phase; 2: OAB-Bench's 2nd-phase items, answer standards and judge "
    "prompts (registry/phase2.toml, docs/phase2.md).",
)
def ingest(editions_opt: str | None, force: bool, phase: str) -> None:
    """Download, verify and parse the official PDFs into the warehouse (one progress line per edition);
    `--phase 2`: the 2nd phase's pinned files."""
    if phase == "2":
        ingest_phase2(edition_keys(editions_opt), force)
        return
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
        outcome = run_assets(defs, instance, ["editions", "candidate_pass_rates"])
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


PHASE2_EDITION_TABLES = ("phase2_items", "phase2_standards")


def ingest_phase2(wanted_editions: list[str] | None, force: bool) -> None:
    """`oabench ingest --phase 2`: OAB-Bench's pinned files into the raw store, then each edition's items and
    standards, and the judge prompts. Nothing to do (every table parsed by today's parser from today's pins,
    the files stored): one line per edition, no download, no Dagster run."""
    settings = Settings.from_env()
    try:
        sources = load_phase2_sources()
    except Phase2SourcesError as error:
        raise click.ClickException(str(error)) from None
    known = sources.edition_keys
    wanted = wanted_editions or known
    if unknown := [key for key in wanted if key not in known]:
        raise click.UsageError(
            f"no 2nd phase of edition(s) {format_editions(map(int, unknown))} in registry/phase2.toml; it has "
            f"{format_editions(map(int, known))}"
        )
    warehouse = Warehouse(settings.warehouse_path)
    for table in PHASE2_EDITION_TABLES:
        _set_aside_damaged(warehouse, table, wanted, "rebuilding it from the stored files")
    for table in ("phase2_source_files", "phase2_judge_prompts"):
        _set_aside_damaged(warehouse, table, [UNPARTITIONED], "rebuilding it from the stored files")
    store = RawStore(settings.raw_dir)
    pins = {sources.file(kind).sha256 for kind in PHASE2_FILE_KINDS}
    files_stored = all(store.verified_path(sha) is not None for sha in pins)
    sources_current = files_stored and _phase2_current(warehouse, "phase2_judge_prompts", UNPARTITIONED, pins)
    stale = [
        key
        for key in wanted
        if force
        or not files_stored
        or not all(_phase2_current(warehouse, t, key, pins) for t in PHASE2_EDITION_TABLES)
    ]
    for key in wanted:
        if key not in stale:
            click.echo(f"phase 2 edition {key}: {_phase2_summary(warehouse, key)} (up to date)")
    if not stale and sources_current and not force:
        click.echo(f"warehouse: {settings.warehouse_path}")
        return
    if not files_stored and (problem := settings.source_mirror_problem()):
        raise click.ClickException(f"{problem}; nothing was ingested")
    defs, instance = _dagster(settings)
    started = time.perf_counter()
    outcome = run_assets(defs, instance, ["phase2_source_files", "phase2_judge_prompts"])
    if not outcome.success:
        _fail("phase 2 sources", outcome.errors)
    click.echo(
        f"phase 2 sources: OAB-Bench {sources.source.commit[:12]}, files verified [{time.perf_counter() - started:.1f}s]"
    )
    from oabench_pipeline.shared.partitions import PHASE2_EDITIONS_PARTITIONS  # Dagster is loaded by now

    ensure_partitions(instance, PHASE2_EDITIONS_PARTITIONS, wanted)
    failed = False
    for key in stale:
        started = time.perf_counter()
        outcome = run_assets(defs, instance, list(PHASE2_EDITION_TABLES), partition_key=key)
        elapsed = time.perf_counter() - started
        if outcome.success:
            click.echo(f"phase 2 edition {key}: {_phase2_summary(warehouse, key)} [{elapsed:.1f}s]")
        else:
            failed = True
            click.echo(f"phase 2 edition {key}: FAILED [{elapsed:.1f}s]", err=True)
            for message in outcome.errors:
                click.echo(f"  {message}", err=True)
    click.echo(f"warehouse: {settings.warehouse_path}")
    sys.exit(1 if failed else 0)


def _phase2_current(warehouse: Warehouse, table: str, partition_key: str, pins: set[str]) -> bool:
    """The partition was written by today's parser from a pinned file (its `source_sha256` is a pin)."""
    if warehouse.written_version(table, partition_key) != PHASE2_PARSER_VERSION:
        return False
    shas = warehouse.read(table, partition_key)["source_sha256"].unique().to_list()
    return bool(shas) and all(sha in pins for sha in shas)


def _phase2_summary(warehouse: Warehouse, edition: str) -> str:
    """`35 items in 7 area-exams, 63 sub-item standards (171 criteria, 1 sub-item annulled)`."""
    items = warehouse.read("phase2_items", edition)
    standards = warehouse.read("phase2_standards", edition)
    criteria = int(standards["criteria"].list.len().sum())
    annulled = int(standards["annulled"].sum())
    return (
        f"{items.height} items in {items['area'].n_unique()} area-exams, {standards.height} sub-item standards "
        f"({criteria} criteria"
        + (f", {annulled} sub-item(s) annulled by the examiners" if annulled else "")
        + ")"
    )
