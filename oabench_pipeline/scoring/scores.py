"""The `scoring` group: `scores`, one partition per benchmark cell."""

import polars as pl
from dagster import AssetExecutionContext, DataVersion, Failure, MaterializeResult, MetadataValue, asset

from oabench_pipeline.core.scoring import SCORING_VERSION, score_inferences
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.inference.assets import cell_keys
from oabench_pipeline.scoring.conditions import SCORES_CONDITION
from oabench_pipeline.shared.metadata import table_schema
from oabench_pipeline.shared.partitions import model_edition_partitions
from oabench_pipeline.shared.resources import WarehouseResource


@asset(
    group_name="scoring",
    partitions_def=model_edition_partitions,
    deps=["inferences", "answer_keys", "questions"],
    code_version=SCORING_VERSION,
    metadata={"dagster/column_schema": table_schema("scores").value},
    automation_condition=SCORES_CONDITION,  # re-score a cell when its inputs change (scoring/conditions.py)
)
def scores(context: AssetExecutionContext, warehouse: WarehouseResource) -> MaterializeResult:
    """One row per question and model key: the answer, the key's letter, official and technical credit.

    Annulled questions are credited to everyone (`is_correct_official` true) and left out of the
    technical score (`is_correct_technical` NULL); an answer counts only when one was extracted.
    """
    model_key, edition = cell_keys(context)
    store = warehouse.warehouse()
    if store.read("inferences", str(context.partition_key)).is_empty():
        raise Failure(
            description=f"no inferences for {model_key} × edition {edition}: materialize inferences first"
        )
    # The cell's own partitions only: another cell's unreadable file is that cell's to rebuild, and a view
    # over every file of a table would cost more with every cell the warehouse holds.
    cell_inputs = {"inferences": str(context.partition_key), "questions": edition, "answer_keys": edition}
    # Their data versions, recorded with the scores (`inference/freshness.py`), read before the rows themselves.
    inputs = store.input_versions(cell_inputs)
    with store.partitions_reader(cell_inputs) as con:
        frame = score_inferences(con, model_key=model_key, edition=int(edition))
    version = frame_version(frame)  # a re-score that changes no row changes nothing downstream
    store.write_partition(
        "scores",
        frame,
        str(context.partition_key),
        version=SCORING_VERSION,
        data_version=version,
        inputs=inputs,
    )
    # One line per run of the cell (a partition holds every run): summing across runs would mean nothing.
    per_run = (
        frame.group_by("run_id")
        .agg(
            official=pl.col("is_correct_official").sum(),
            technical=pl.col("is_correct_technical").sum(),
            active=(pl.col("status") == "active").sum(),
            invalid=((pl.col("status") == "active") & ~pl.col("is_valid")).sum(),
        )
        .sort("run_id")
    )
    return MaterializeResult(
        metadata={
            "rows": frame.height,
            "runs": per_run.height,
            "scores_by_run": MetadataValue.md(
                "\n".join(
                    f"- `{r['run_id']}`: official {r['official']}, technical {r['technical']}/{r['active']}, "
                    f"invalid {r['invalid']}"
                    for r in per_run.iter_rows(named=True)
                )
            ),
        },
        data_version=DataVersion(version),
    )
