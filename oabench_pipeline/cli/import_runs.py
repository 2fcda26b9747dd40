"""`oabench import`: published run folders into `inferences`, then scored."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from oabench_pipeline.cli.common import (
    REPORT_ASSETS,
    _cell_pool,
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
    from oabench_pipeline.engine.runs import RunOutcome


@main.command(name="import")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
def import_runs(path: str) -> None:
    """Import published OABench run folders into `inferences` (source 'imported'), then score them; or an
    OAB-Bench `data/oab_bench` folder (2nd phase: answers and judgments), then its scores."""
    settings = Settings.from_env()
    if is_oab_bench_folder(Path(path)):
        import_oab_bench(settings, Path(path))
        return
    _set_aside_damaged_imports(Warehouse(settings.warehouse_path))
    defs, instance = _dagster(settings)
    config = {"ops": {"published_runs": {"config": {"path": str(Path(path).resolve())}}}}
    from oabench_pipeline.automation.jobs import score_cell_job
    from oabench_pipeline.engine.launch import RunLauncher, RunSpec, launcher, run_launched
    from oabench_pipeline.inference.imports import unanswered_questions
    from oabench_pipeline.shared.partitions import cell_partition_key

    _must(run_assets(defs, instance, ["published_runs"], run_config=config), f"import {path}")
    warehouse = Warehouse(settings.warehouse_path)
    cells = warehouse.query("select distinct model_key, edition from inferences where source = 'imported'")

    def score_cell(
        engine: RunLauncher, model_key: str, edition: int
    ) -> tuple[str, str | None, RunOutcome | None]:
        """(cell, how much of it an incomplete run answered or None, the scores run or None when the edition
        is not ingested)."""
        partition = cell_partition_key(model_key, edition)
        questions = warehouse.read("questions", str(edition))
        if questions.is_empty():
            return f"{model_key} × {edition}", None, None
        unanswered = unanswered_questions(
            warehouse, str(edition), warehouse.read("inferences", str(partition))
        )
        active = questions.filter(questions["status"] == "active").height
        incomplete = f"{active - len(unanswered)} of {active} answered" if unanswered else None
        spec = RunSpec(score_cell_job.name, partition_key=str(partition))
        outcome = run_launched(engine, spec)
        return f"{model_key} × {edition}", incomplete, outcome

    scored, incomplete_cells, keys, editions = 0, [], set(), set()
    # Every cell at once, each a launched run of its own (as `oabench run`'s).
    with launcher(instance, defs, warehouse.root) as engine, _cell_pool(cells.height) as pool:
        results = list(pool.map(lambda row: score_cell(engine, *row), cells.iter_rows()))
    for (model_key, edition), (name, incomplete, outcome) in zip(cells.iter_rows(), results, strict=True):
        if outcome is None:
            click.echo(
                f"{name}: edition not ingested, not scored (run `oabench ingest --editions {edition}`)"
            )
            continue
        if incomplete:
            incomplete_cells.append(f"{name} ({incomplete})")
            keys.add(model_key)
            editions.add(str(edition))
        _must(outcome, f"scores {cell_partition_key(model_key, edition)}")
        scored += 1
    _must(run_assets(defs, instance, ["models", *REPORT_ASSETS]), "leaderboard")
    click.echo(
        f"imported {cells.height} cell(s) from {path}; scored {scored}; leaderboard rebuilt: "
        f"{leaderboard_outputs(warehouse)}"
    )
    if incomplete_cells:
        status = f"oabench status --models {','.join(sorted(keys))} --editions {','.join(sorted(editions, key=int))}"
        click.echo(
            "incomplete run(s) (aborted, or ended with errors), kept and shown but not ranked (the cell stays "
            f"missing until a complete run): "
            f"{', '.join(incomplete_cells)}; `{status}` says how to complete it"
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


PHASE2_SCORE_ASSETS = ["phase2_scores", "phase2_leaderboard", "phase2_leaderboard_by_area"]


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
