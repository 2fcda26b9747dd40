"""`oabench import`: published run folders into `inferences`, then scored."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from oabench_pipeline.cli.common import (
    REPORT_ASSETS,
    _dagster,
    _must,
    leaderboard_outputs,
    run_assets,
)
from oabench_pipeline.cli.group import main
from oabench_pipeline.core.phase2.oab_bench import is_oab_bench_folder
from oabench_pipeline.inference.response_log import cell_log_path
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse, partition_key_of

if TYPE_CHECKING:
    import polars as pl


@main.command(name="import")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
def import_runs(path: str) -> None:
    """Import published OABench run folders into `inferences` (source 'imported'), then score the imported
    cells whose scores are not current; or an OAB-Bench `data/oab_bench` folder (2nd phase: answers and
    judgments), then its scores."""
    settings = Settings.from_env()
    if is_oab_bench_folder(Path(path)):
        import_oab_bench(settings, Path(path))
        return
    warehouse = Warehouse(settings.warehouse_path)
    _set_aside_damaged_imports(warehouse)
    defs, instance = _dagster(settings)
    config = {"ops": {"published_runs": {"config": {"path": str(Path(path).resolve())}}}}
    imported = run_assets(defs, instance, ["published_runs"], run_config=config)
    _must(imported, f"import {path}")
    # The folder's cells: the rows it wrote carry the import's Dagster run id.
    brought = warehouse.query(
        "select count(*) from (select distinct model_key, edition from inferences "
        "where source = 'imported' and dagster_run_id = ?)",
        [imported.run_id],
        tables=["inferences"],
    ).item()
    # Every imported cell, this folder's and earlier ones': the notices below name each one still incomplete
    # (an earlier import's aborted run stays as unranked as this one's), and each whose scores are not
    # current is scored. `published_runs` rewrites every partition of the folder, changed or not; the scores
    # record their inputs' data versions, which leave out the import's bookkeeping (its run id, the file's
    # time), so an unchanged cell's scores stay current and a changed one's do not.
    pairs = list(
        warehouse.query(
            "select distinct model_key, edition from inferences where source = 'imported' order by all",
            tables=["inferences"],
        ).iter_rows()
    )
    questions = {edition: warehouse.read("questions", str(edition)) for edition in {e for _, e in pairs}}
    cells = [_imported_cell(warehouse, key, edition, questions[edition]) for key, edition in pairs]
    to_score = [cell for cell in cells if cell.ingested and not cell.scores_current]
    # Each cell a `score_cell` run in this process, one after another: scoring calls no model, and a
    # launched run's process would cost more than its work (as `oabench run` re-scores: launched-cells.md).
    outcomes = [run_assets(defs, instance, ["scores"], partition_key=cell.partition) for cell in to_score]
    for cell, outcome in zip(to_score, outcomes, strict=True):
        _must(outcome, f"scores {cell.partition}")
    for cell in cells:
        if not cell.ingested:
            click.echo(
                f"{cell.name}: edition not ingested, not scored (run `oabench ingest --editions {cell.edition}`)"
            )
    # Rebuilt even when no cell was scored: `published_runs` rewrote the folder's answers and run summaries,
    # which the analysis reads (`inference.freshness.LEADERBOARD_INPUTS`).
    _must(run_assets(defs, instance, ["models", *REPORT_ASSETS]), "leaderboard")
    click.echo(
        f"imported {brought} cell(s) from {path}; scored {len(to_score)}; leaderboard rebuilt: "
        f"{leaderboard_outputs(warehouse)}"
    )
    _echo_incomplete([cell for cell in cells if cell.incomplete])


@dataclass(frozen=True)
class ImportedCell:
    model_key: str
    edition: int
    ingested: bool
    incomplete: str | None
    """How much of the cell an incomplete run answered (None: the cell is complete)."""
    scores_current: bool

    @property
    def name(self) -> str:
        return f"{self.model_key} × {self.edition}"

    @property
    def partition(self) -> str:
        from oabench_pipeline.inference.cell import cell_name

        return cell_name(self.model_key, self.edition)


def _imported_cell(
    warehouse: Warehouse, model_key: str, edition: int, questions: pl.DataFrame
) -> ImportedCell:
    """`questions`: the edition's (empty when it is not ingested), read once for all its cells."""
    from oabench_pipeline.inference.cell import cell_name
    from oabench_pipeline.inference.freshness import scores_are_current
    from oabench_pipeline.inference.imports import unanswered_in

    if questions.is_empty():
        return ImportedCell(model_key, edition, False, None, False)
    unanswered = unanswered_in(questions, warehouse.read("inferences", cell_name(model_key, edition)))
    active = questions.filter(questions["status"] == "active").height
    incomplete = f"{active - len(unanswered)} of {active} answered" if unanswered else None
    return ImportedCell(
        model_key, edition, True, incomplete, scores_are_current(warehouse, model_key, str(edition))
    )


def _echo_incomplete(cells: list[ImportedCell]) -> None:
    if not cells:
        return
    keys = ",".join(sorted({cell.model_key for cell in cells}))
    editions = ",".join(str(e) for e in sorted({cell.edition for cell in cells}))
    click.echo(
        "incomplete run(s) (aborted, or ended with errors), kept and shown but not ranked (the cell stays "
        f"missing until a complete run): "
        f"{', '.join(f'{cell.name} ({cell.incomplete})' for cell in cells)}; "
        f"`oabench status --models {keys} --editions {editions}` says how to complete it"
    )


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


PHASE2_SCORE_ASSETS = [
    "phase2_scores",
    "phase2_leaderboard",
    "phase2_leaderboard_by_area",
    "phase2_judge_agreement",
]


def import_oab_bench(settings: Settings, folder: Path) -> None:
    """OAB-Bench's answers and judgments into `phase2_answers` and `phase2_judgments` (every file checked
    first: one bad file writes nothing), then the 2nd phase's scores and leaderboard rebuilt."""
    warehouse = Warehouse(settings.warehouse_path)
    if not warehouse.has_table("phase2_items"):
        raise click.ClickException(
            f"cannot import {folder}: no 2nd-phase items in the warehouse; run `oabench ingest --phase 2` first"
        )
    defs, instance = _dagster(settings)
    config = {"ops": {"phase2_import": {"config": {"path": str(folder.resolve())}}}}
    _must(run_assets(defs, instance, ["phase2_import"], run_config=config), f"import {folder}")
    _must(run_assets(defs, instance, PHASE2_SCORE_ASSETS), "phase 2 scores")
    answers = warehouse.query(
        "select count(distinct model_key) as models, count(*) as sub_items from phase2_answers "
        "where starts_with(source, 'oab-bench:')"
    ).row(0)
    click.echo(f"imported {answers[1]} answers of {answers[0]} model(s) from {folder}")
    if warehouse.has_table("phase2_judgments"):
        judged = warehouse.query(
            "select judge_key, count(distinct model_key), count(*), count(*) filter (not valid), "
            "count(*) filter (score_source = 'recorded'), "
            "count(*) filter (score_source = 'judgment' and abs(score - recorded_score) > 1e-9) "
            "from phase2_judgments where starts_with(source, 'oab-bench:') group by 1 order by 1"
        )
        for judge, models, count, invalid, recorded, disagreeing in judged.iter_rows():
            click.echo(
                f"imported {count} judgments by {judge} of {models} model(s): {invalid} invalid, {recorded} with no "
                f"[[score]] in the text (the file's recorded score kept), {disagreeing} whose [[score]] differs "
                "from the file's recorded score (the text's kept)"
            )
        judges = ", ".join(judged["judge_key"])
        click.echo(
            f"2nd-phase scores rebuilt: `oabench leaderboard --phase 2 --judge {judged['judge_key'][0]}` "
            f"prints them (judges: {judges})"
            if judged.height
            else "no judgments imported"
        )
