"""`oabench audit-keys`: the questions whose published key strong models agree against (`key_audit`)."""

from __future__ import annotations

import click
import polars as pl

from oabench_pipeline.cli.common import (
    EDITIONS_HELP,
    choose_suite,
    edition_keys,
    load_registry_suites,
    read_warehouse,
    suite_option,
    table_format_option,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.cli.output import format_table
from oabench_pipeline.core.editions import format_editions
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse

# Where `oabench site` writes a question's page, relative to the warehouse folder (its default `warehouse/site/`
# and `core/site/paths.question_page` on the site branch: `questao/<qid>.html`, a qid being its own slug).
QUESTION_PAGE = "site/questao/{qid}.html"

_COLUMNS = {
    "qid": "qid",
    "edition": "edition",
    "number": "number",
    "correct": "key",
    "key_status": "key status",
    "key_document": "key document",
    "changed_after_preliminary": "changed after preliminary",
    "consensus": "consensus",
    "consensus_weight": "weight",
    "key_weight": "key weight",
    "agreeing_models": "agreeing",
    "n_models": "models",
}


@main.command(name="audit-keys")
@click.option("--editions", help=f"Only these {EDITIONS_HELP} (default: every edition).")
@suite_option("Only the editions of this suite (e.g. oabench-2026, all); not with --editions.")
@click.option("--all", "show_all", is_flag=True, help="Every question, not only the suspicious ones.")
@table_format_option
def audit_keys_cmd(editions: str | None, suite: str | None, show_all: bool, fmt: str) -> None:
    """Print the questions whose published answer key looks wrong: strong models agree on another letter.

    Each model's vote is weighted by its Rasch ability (a model at chance weighs nothing); a question is
    suspicious when the consensus letter is not the key and carries at least 80% of the weight (3 models
    or more), or 70% with at least 6 models, the stronger ones, behind it (docs/item_response.md). A flag asks for a person to check the
    question against the examiners' definitive key; beside it, the key document its answer comes from
    (preliminary or definitive) and whether it changed after the preliminary key. A suspicious key on a
    question whose area a later reform rewrote comes first, its reforms under `later law`
    (docs/law_currency.md). The questions left unresolved (their later key unknown and disputed, in neither
    score) follow, with why. The exit code is 0 either way.
    """
    listed = edition_keys(editions)
    if suite is not None and editions is not None:
        raise click.UsageError("--suite and --editions both choose the editions: give one")
    settings = Settings.from_env()
    chosen = choose_suite(load_registry_suites(settings), suite) if suite is not None else None
    warehouse = read_warehouse(settings)
    if not warehouse.has_table("key_audit"):
        raise click.ClickException(
            f"no key_audit table yet in {warehouse.root}: run `oabench run` or `oabench import` first"
        )
    keys = _key_provenance(warehouse)
    audit = warehouse.read("key_audit").join(keys.drop("edition", "number", "status"), on="qid", how="left")
    wanted = [str(e) for e in chosen.editions] if chosen else listed
    if wanted is not None:
        audit = audit.filter(pl.col("edition").is_in([int(e) for e in wanted]))
        keys = keys.filter(pl.col("edition").is_in([int(e) for e in wanted]))
    shown = audit if show_all else audit.filter(pl.col("suspicious"))
    site = settings.warehouse_path.parent
    pages = [site / QUESTION_PAGE.format(qid=qid) for qid in shown["qid"].to_list()]
    has_pages = any(page.exists() for page in pages)
    frame = shown.select(list(_COLUMNS)).rename(_COLUMNS)
    if "reforms_after" in shown.columns:  # the reforms of its area since its exam: they may explain a doubt
        frame = frame.with_columns(**{"later law": shown["reforms_after"].list.join(", ").replace("", None)})
    if show_all:
        frame = frame.with_columns(suspicious=shown["suspicious"])
    if has_pages:
        frame = frame.with_columns(
            page=pl.Series([str(p) if p.exists() else None for p in pages], dtype=pl.String)
        )
    if fmt != "table":
        click.echo(format_table(frame, fmt))
        return
    flagged = int(audit["suspicious"].sum())
    scope = f"editions {', '.join(wanted)}" if wanted is not None else "every edition"
    if chosen is not None:
        scope = f"suite {chosen.name}: editions {format_editions(chosen.editions)}"
    click.echo(f"{flagged} suspicious of {audit.height} questions ({scope})")
    if frame.height:
        click.echo(format_table(frame, fmt))
    if frame.height and not has_pages:
        click.echo(
            f"question pages: {site / QUESTION_PAGE.format(qid='<qid>')}, once `oabench site` has built them"
        )
    unresolved = keys.filter(pl.col("status") == "unresolved").sort("edition", "number")
    for row in unresolved.iter_rows(named=True):
        click.echo(f"{row['qid']}: unresolved, left out of both scores ({row['status_note']})")


def _key_provenance(warehouse: Warehouse) -> pl.DataFrame:
    """Where each question's answer comes from (`answer_keys`), for the audit's rows and the unresolved ones."""
    columns = [
        "qid",
        "edition",
        "number",
        "status",
        "key_document",
        "changed_after_preliminary",
        "status_note",
    ]
    keys = warehouse.read("answer_keys") if warehouse.has_table("answer_keys") else pl.DataFrame()
    if keys.is_empty() or not set(columns) <= set(keys.columns):  # not ingested, or before these columns
        schema = {name: pl.String for name in columns} | {
            "edition": pl.Int32,
            "number": pl.Int32,
            "changed_after_preliminary": pl.Boolean,
        }
        return pl.DataFrame(schema=schema)
    return keys.select(columns)
