"""The jobs `oabench run --phase 2` and `oabench judge` launch: one partition of one asset per run."""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job

from oabench_pipeline.shared.partitions import judgment_cells_partitions, phase2_cells_partitions

phase2_answers_job = define_asset_job(
    "phase2_answers_cell",
    selection=AssetSelection.assets("phase2_answers"),
    partitions_def=phase2_cells_partitions,
    description="One model's answers to one edition's 2nd phase (only what the response log lacks).",
)
phase2_judgments_job = define_asset_job(
    "phase2_judgments_cell",
    selection=AssetSelection.assets("phase2_judgments"),
    partitions_def=judgment_cells_partitions,
    description="One judge's judgments of one model's 2nd-phase answers (only what the log lacks).",
)
PHASE2_JOBS = [phase2_answers_job, phase2_judgments_job]
