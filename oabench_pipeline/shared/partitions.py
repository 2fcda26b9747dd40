"""Partitions shared across domains. Both are dynamic: a new edition or model needs no code change."""

from dagster import DynamicPartitionsDefinition, MultiPartitionKey, MultiPartitionsDefinition

EDITIONS_PARTITIONS = "editions"
MODEL_KEYS_PARTITIONS = "model_keys"

editions_partitions = DynamicPartitionsDefinition(name=EDITIONS_PARTITIONS)
"""One partition per exam edition, keyed by its number ("43")."""

model_keys_partitions = DynamicPartitionsDefinition(name=MODEL_KEYS_PARTITIONS)
"""One partition per model configuration key (e.g. `openai/gpt-5.2:reasoning-medium`)."""

model_edition_partitions = MultiPartitionsDefinition(
    {"edition": editions_partitions, "model": model_keys_partitions}
)
"""Cells of the benchmark: model key × edition, so a new model or a new edition runs only the new cells."""


def cell_partition_key(model_key: str, edition: int | str) -> MultiPartitionKey:
    """The partition key of one benchmark cell; its string form (`43|model-key`) names its files."""
    return MultiPartitionKey({"edition": str(edition), "model": model_key})


PHASE2_EDITIONS_PARTITIONS = "phase2_editions"

phase2_editions_partitions = DynamicPartitionsDefinition(name=PHASE2_EDITIONS_PARTITIONS)
"""One partition per edition whose 2nd phase is ingested ("39"): not every edition has both phases here."""

phase2_cells_partitions = MultiPartitionsDefinition(
    {"edition": phase2_editions_partitions, "model": model_keys_partitions}
)
"""2nd-phase answers: model key × edition (its 7 area-exams, 35 items)."""

judgment_cells_partitions = MultiPartitionsDefinition(
    {"judge": model_keys_partitions, "model": model_keys_partitions}
)
"""2nd-phase judgments: judge key × judged model key; both are model keys of the registry."""


def phase2_cell_partition_key(model_key: str, edition: int | str) -> MultiPartitionKey:
    """The partition key of one model's answers to one edition's 2nd phase (`39|model-key`)."""
    return MultiPartitionKey({"edition": str(edition), "model": model_key})


def judgment_partition_key(judge_key: str, model_key: str) -> MultiPartitionKey:
    """The partition key of one judge's judgments of one model's answers (`judge-key|model-key`)."""
    return MultiPartitionKey({"judge": judge_key, "model": model_key})
