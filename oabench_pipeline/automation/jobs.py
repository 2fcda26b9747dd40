"""The jobs the sensors and the schedule launch, and the run requests that target them.

One job per partitions definition: Dagster runs one partition of one partitions definition per run, so a
sensor targeting a mixed asset selection cannot even be loaded. Sensors pick the job per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dagster import (
    AssetSelection,
    MultiPartitionKey,
    RunRequest,
    define_asset_job,
)

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.inference.endpoints import endpoint_tags
from oabench_pipeline.shared.partitions import (
    editions_partitions,
    model_edition_partitions,
    phase2_editions_partitions,
)

ingest_edition_job = define_asset_job(
    "ingest_edition",
    selection=AssetSelection.assets("exam_pdfs", "answer_keys", "questions"),
    partitions_def=editions_partitions,
    description="Download, parse and validate one edition: official PDFs, answer key, questions.",
)
inference_cell_job = define_asset_job(
    "run_inference_cell",
    selection=AssetSelection.assets("inferences"),
    partitions_def=model_edition_partitions,
    description="One benchmark cell: a model configuration's answers to one edition.",
)
editions_table_job = define_asset_job(
    "refresh_editions_table",
    selection=AssetSelection.assets("editions", "candidate_pass_rates"),
    description="Rebuild the editions table and the candidates' pass rates, both read from the registry.",
)
catalogue_job = define_asset_job(
    "refresh_model_catalogue",
    selection=AssetSelection.assets("model_catalogue", "model_pricing"),
    description="Snapshot the model catalogue, then take the registry models' prices from it.",
)
pricing_job = define_asset_job(
    "refresh_model_pricing",
    selection=AssetSelection.assets("model_pricing"),
    description="Take the registry models' prices from the newest model catalogue snapshot (no new fetch of "
    "it; other endpoints' price lists are asked).",
)
models_table_job = define_asset_job(
    "refresh_models_table", selection=AssetSelection.assets("models"), description="Rebuild the models table."
)

# The jobs of `oabench`'s own runs (`engine/runs.run_assets` runs, and `engine/launch.py` launches, the job whose selection
# is the run's, or a part of the smallest one holding it), so the UI's Runs page names what each run is.
cell_job = define_asset_job(
    "oabench_cell",
    selection=AssetSelection.assets("inferences", "scores"),
    partitions_def=model_edition_partitions,
    description="One cell as `oabench run` runs it: the model's answers to one edition (only what is "
    "missing), then their scores (scores alone when the answers are up to date).",
)
score_cell_job = define_asset_job(
    "score_cell",
    selection=AssetSelection.assets("scores"),
    partitions_def=model_edition_partitions,
    description="One cell's scores, from answers that are up to date (`oabench run`, `oabench import`).",
)
leaderboard_job = define_asset_job(
    "rebuild_leaderboard",
    selection=AssetSelection.assets("models", *ANALYSIS_TABLES, "leaderboard_report"),
    description="The models table, the leaderboard and every analysis table, and the HTML report: what "
    "`oabench run` and `oabench import` rebuild after their cells (they run the part they need).",
)
import_job = define_asset_job(
    "import_published_runs",
    selection=AssetSelection.assets("published_runs"),
    description="`oabench import FOLDER`: a folder of published runs read into the warehouse.",
)
site_job = define_asset_job(
    "build_site",
    selection=AssetSelection.assets("leaderboard_site"),
    description="`oabench site`: the static site, written where its config says.",
)
phase2_sources_job = define_asset_job(
    "ingest_phase2_sources",
    selection=AssetSelection.assets("phase2_source_files", "phase2_judge_prompts"),
    description="`oabench ingest --phase 2`, first run: OAB-Bench's pinned files downloaded (or reused) and "
    "verified, and its judge prompts parsed.",
)
phase2_edition_job = define_asset_job(
    "ingest_phase2_edition",
    selection=AssetSelection.assets("phase2_items", "phase2_standards"),
    partitions_def=phase2_editions_partitions,
    description="`oabench ingest --phase 2`, one run per edition: its 2nd-phase items and answer standards.",
)
phase2_import_job = define_asset_job(
    "import_phase2_answers",
    selection=AssetSelection.assets("phase2_import"),
    description="`oabench import` of an OAB-Bench `data/oab_bench` folder: its answers and judgments.",
)
phase2_scoring_job = define_asset_job(
    "rebuild_phase2_scores",
    selection=AssetSelection.assets(
        "phase2_scores", "phase2_leaderboard", "phase2_leaderboard_by_area", "phase2_judge_agreement"
    ),
    description="The 2nd phase's area-exam scores, leaderboard, by-area table and judges' agreement, from "
    "every judgment.",
)

# Every asset job of the definitions: the sensors' and schedules' and `oabench`'s.
ASSET_JOBS = [
    ingest_edition_job,
    inference_cell_job,
    editions_table_job,
    catalogue_job,
    pricing_job,
    models_table_job,
    cell_job,
    score_cell_job,
    leaderboard_job,
    import_job,
    site_job,
    phase2_sources_job,
    phase2_edition_job,
    phase2_import_job,
    phase2_scoring_job,
]


def ingest_requests(edition_keys: Iterable[str]) -> list[RunRequest]:
    """One ingest run per new edition."""
    return [
        RunRequest(job_name=ingest_edition_job.name, partition_key=key, run_key=f"ingest-{key}")
        for key in sorted(edition_keys, key=int)
    ]


def editions_table_request(edition_keys: Sequence[str], stage: str) -> list[RunRequest]:
    """A refresh of the (unpartitioned) editions table once editions were added or ingested."""
    if not edition_keys:
        return []
    keys = "-".join(sorted(edition_keys, key=int))
    return [RunRequest(job_name=editions_table_job.name, run_key=f"editions-table-{stage}-{keys}")]


def cell_requests(
    edition_keys: Iterable[str],
    models: Iterable[ModelConfig],
    run_key_prefix: str,
    max_cost_usd: float | None = None,
) -> list[RunRequest]:
    """One `inferences` run per (edition, model) cell, tagged with its endpoint (per-provider run limits);
    run keys make a repeated request a no-op. `max_cost_usd`: a ceiling on each run's spend (run config)."""
    config = (
        {"ops": {"inferences": {"config": {"max_cost_usd": max_cost_usd}}}}
        if max_cost_usd is not None
        else None
    )
    return [
        RunRequest(
            job_name=inference_cell_job.name,
            partition_key=MultiPartitionKey({"edition": edition, "model": model.key}),
            run_key=f"{run_key_prefix}-{edition}-{model.key}",
            run_config=config,
            tags=endpoint_tags(model),
        )
        for edition in sorted(edition_keys, key=int)
        for model in sorted(models, key=lambda m: m.key)
    ]
