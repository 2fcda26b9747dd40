"""`oabench judge`: a judge model grades the models' 2nd-phase answers against the answer standards."""

from __future__ import annotations

from typing import Any

import click
import polars as pl

from oabench_pipeline.cli.common import _split
from oabench_pipeline.cli.group import main
from oabench_pipeline.settings import Settings
from oabench_pipeline.warehouse import Warehouse


@main.command()
@click.option("--judge", "judge_key", required=True, help="The judge's model key (any key of the registry).")
@click.option(
    "--models",
    "models_opt",
    help="Comma-separated keys of the models judged (default: every model with answers).",
)
@click.option(
    "--retry-invalid",
    is_flag=True,
    help="Ask the judge again for each invalid judgment (no [[score]], or above the points); the earlier "
    "one stays in the response log.",
)
@click.option(
    "--structured",
    is_flag=True,
    help="Points per criterion of the standard, as JSON; the score is their sum.",
)
@click.option(
    "--concurrency", type=click.IntRange(min=1), help="Requests in flight (overrides the registry)."
)
@click.option(
    "--max-completion-tokens",
    type=click.IntRange(min=1),
    help="The judge's completion ceiling (default: OAB-Bench's, 20,000 for an o1/o3 judge, else 2,048).",
)
@click.option(
    "--max-cost-usd",
    type=click.FloatRange(min=0, min_open=True),
    help="What this command may spend, over all its cells: it stops before a judgment could pass it.",
)
@click.option(
    "--batch",
    is_flag=True,
    help="Send the judgments through the judge's batch API (`batch_api`) at half price, and follow the "
    "batches to the end; Ctrl-C leaves them running (docs/batch.md).",
)
@click.option("--dry-run", is_flag=True, help="Print the calls and the estimated cost; call nothing.")
def judge(
    judge_key: str,
    models_opt: str | None,
    retry_invalid: bool,
    structured: bool,
    concurrency: int | None,
    max_completion_tokens: int | None,
    max_cost_usd: float | None,
    batch: bool,
    dry_run: bool,
) -> None:
    """Grade the models' 2nd-phase answers with JUDGE, OAB-Bench's judge prompts by default (docs/phase2.md)."""
    from oabench_pipeline.cli import phase2
    from oabench_pipeline.cli.import_runs import PHASE2_SCORE_ASSETS
    from oabench_pipeline.cli.run import _choose_models

    settings = Settings.from_env()
    warehouse = Warehouse(settings.warehouse_path)
    (judge_model,) = _choose_models(settings, warehouse, [judge_key])
    if batch:
        from oabench_pipeline.cli.batches import refuse_without_batch_api

        refuse_without_batch_api([judge_model])
    answers = warehouse.read("phase2_answers")
    answered = sorted(set(answers["model_key"])) if not answers.is_empty() else []
    wanted = _split(models_opt) or answered
    missing = [key for key in wanted if key not in answered]
    if missing or not wanted:
        raise click.UsageError(
            f"no 2nd-phase answers of {', '.join(missing) or 'any model'}: `oabench run --phase 2 --models KEY` "
            "or `oabench import` first"
        )
    cells = [
        _judgment_cell(
            warehouse, judge_model, key, answers, structured, retry_invalid, max_completion_tokens, batch
        )
        for key in wanted
    ]
    if dry_run:
        phase2.dry_run(warehouse, cells, lambda cell: cell.config["max_completion_tokens"], batch)
        return
    resume = f"oabench judge --judge {judge_model.key} --models {','.join(wanted)}"
    resume += " --structured" if structured else ""
    resume += f" --max-completion-tokens {max_completion_tokens}" if batch and max_completion_tokens else ""
    resume += " --batch" if batch else ""
    partitions = {"model_keys": sorted({judge_model.key, *wanted})}
    phase2.launch_cells(
        settings, warehouse, cells, partitions, concurrency, resume, PHASE2_SCORE_ASSETS, max_cost_usd, batch
    )


def _judgment_cell(
    warehouse: Warehouse,
    judge_model: Any,
    model_key: str,
    answers: pl.DataFrame,
    structured: bool,
    retry_invalid: bool,
    max_completion_tokens: int | None,
    batch: bool = False,
) -> Any:
    """The judge × model cell, with what it would send now (as the asset plans it)."""
    from oabench_pipeline.cli import phase2
    from oabench_pipeline.cli.phase2 import Cell
    from oabench_pipeline.core.phase2.protocol import default_judge_ceiling
    from oabench_pipeline.inference.response_log import latest_by_hash, read_log
    from oabench_pipeline.phase2.judgments import judge_templates, model_answers, standards_by_item
    from oabench_pipeline.phase2.plans import JudgeSetup, items_from_frame, judgments_log_path, plan_judgments
    from oabench_pipeline.shared.partitions import judgment_partition_key

    ceiling = max_completion_tokens or default_judge_ceiling(judge_model.id)
    items = {item.item_id: item for item in items_from_frame(warehouse.read("phase2_items"))}
    from dagster import Failure

    try:
        templates = judge_templates(warehouse)
    except Failure as error:  # the asset's one line, before any run
        raise click.UsageError(error.description or str(error)) from None
    setup = JudgeSetup(judge_model, templates, ceiling, structured)
    logged = latest_by_hash(read_log(judgments_log_path(warehouse.root, judge_model.key, model_key)))
    planned = plan_judgments(
        setup,
        items,
        standards_by_item(warehouse.read("phase2_standards")),
        model_answers(answers, model_key, None, items),
        logged,
        retry_invalid,
    )
    config: dict[str, Any] = {"max_completion_tokens": ceiling}
    if structured:
        config["structured"] = True
    if retry_invalid:
        config["retry_invalid"] = True
    if batch:
        config["batch"] = True
    return Cell(
        label=f"{judge_model.key} judging {model_key}",
        sender=judge_model,
        job="phase2_judgments_cell",
        asset="phase2_judgments",
        partition_key=str(judgment_partition_key(judge_model.key, model_key)),
        config=config,
        pending=[j.pending for j in planned if j.pending is not None],
        total=len(planned),
        spent_usd=phase2.logged_spend(logged),
        of=model_key,
    )
