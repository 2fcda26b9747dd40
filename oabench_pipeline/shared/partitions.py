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
