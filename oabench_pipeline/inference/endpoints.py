"""Which endpoint a model configuration calls, as a run tag: Dagster can then limit runs per provider.

A Dagster pool is fixed per asset definition, so it cannot tell OpenRouter from a local vLLM; a run tag
can. Every inference run the CLI or a sensor launches carries `oabench/endpoint`, and the instance's
`tag_concurrency_limits` (README, "Scale past one machine") cap the runs in flight per endpoint.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from oabench_pipeline.core.models_registry import ModelConfig

ENDPOINT_TAG = "oabench/endpoint"


def endpoint_of(model: ModelConfig) -> str:
    """The endpoint's host (and port), or `offline` for baselines that call nothing."""
    if model.base_url is None:
        return "offline"
    return urlsplit(model.base_url).netloc or model.base_url


def endpoint_tags(model: ModelConfig) -> dict[str, str]:
    return {ENDPOINT_TAG: endpoint_of(model)}
