"""Which endpoint a model configuration calls, as a run tag: Dagster can then limit runs per provider.

A Dagster pool is fixed per asset definition, so it cannot tell OpenRouter from a local vLLM; a run tag
can. Every inference run the CLI or a sensor launches carries `oabench/endpoint`, and the instance's
`tag_concurrency_limits` (docs/scaling.md) cap the runs in flight per endpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.capacity import Capacity, shared_capacity

ENDPOINT_TAG = "oabench/endpoint"


def endpoint_of(model: ModelConfig) -> str:
    """The endpoint's host (and port), or `offline` for baselines that call nothing."""
    if model.base_url is None:
        return "offline"
    return urlsplit(model.base_url).netloc or model.base_url


def endpoint_tags(model: ModelConfig) -> dict[str, str]:
    return {ENDPOINT_TAG: endpoint_of(model)}


def endpoint_cap(model: ModelConfig, registry: Iterable[ModelConfig]) -> int | None:
    """Requests in flight allowed to the model's host: the smallest `endpoint_concurrency` any registry
    model on that host sets (a cap is a promise to the provider: the strictest one holds); None: no cap."""
    host = endpoint_of(model)
    caps = [
        m.endpoint_concurrency
        for m in (model, *registry)
        if m.endpoint_concurrency is not None and endpoint_of(m) == host
    ]
    return min(caps) if caps else None


def cell_capacity(
    warehouse_root: Path, model: ModelConfig, concurrency: int, registry: Iterable[ModelConfig]
) -> list[Capacity]:
    """The slots a cell's requests hold: its model key's (`concurrency`, shared by all the key's cells
    in every process on this warehouse), then its host's, whose limit adapts to the host's 429s
    (`capacity.SharedLimit`) under a ceiling: `endpoint_concurrency` when set, else the `concurrency` of
    every registry model on the host added up (no fewer than this cell's)."""
    root = warehouse_root / "capacity"
    slots = [shared_capacity(root, "model", model.key, concurrency)]
    if model.base_url is None:
        return slots
    registry = list(registry)
    ceiling = endpoint_cap(model, registry) or max(concurrency, _host_concurrency(model, registry))
    slots.append(shared_capacity(root, "endpoint", endpoint_of(model), ceiling, adaptive=True))
    return slots


def _host_concurrency(model: ModelConfig, registry: Iterable[ModelConfig]) -> int:
    """The `concurrency` of every model on the model's host, added up (the model's own included once)."""
    host = endpoint_of(model)
    others = sum(m.concurrency for m in registry if m.key != model.key and endpoint_of(m) == host)
    return model.concurrency + others


PARTITION_MODEL_TAG = "dagster/partition/model"  # Dagster's own tag of a cell run's model dimension


def endpoint_tags_for_run(run_tags: Mapping[str, str], registry: Iterable[ModelConfig]) -> dict[str, str]:
    """The `oabench/endpoint` tag a run lacks, derived from its cell's model key, or {}.

    Every cell run carries Dagster's partition tags, whoever launched it (a UI backfill sends no other
    tag); a run that already names its endpoint, or is not a cell of a registry model, gets nothing.
    """
    if ENDPOINT_TAG in run_tags or PARTITION_MODEL_TAG not in run_tags:
        return {}
    key = run_tags[PARTITION_MODEL_TAG]
    model = next((m for m in registry if m.key == key), None)
    return endpoint_tags(model) if model is not None else {}
