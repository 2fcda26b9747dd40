"""Inference runs carry their endpoint as a tag, so the instance can limit runs per provider."""

from __future__ import annotations

from oabench_pipeline.automation.sensors import cell_requests
from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.inference.endpoints import ENDPOINT_TAG, endpoint_of


def model(model_id: str, **fields: object) -> ModelConfig:
    return ModelConfig.model_validate({"id": model_id, **fields})


def test_endpoint_is_the_host_and_port_or_offline() -> None:
    assert endpoint_of(model("deepseek/deepseek-v3.2")) == "openrouter.ai"
    assert endpoint_of(model("qwen", base_url="http://127.0.0.1:8000/v1", api_key_env="")) == "127.0.0.1:8000"
    assert endpoint_of(model("baseline/random", kind="baseline")) == "offline"


def test_sensor_cell_requests_are_tagged_with_their_endpoint() -> None:
    models = [
        model("deepseek/deepseek-v3.2"),
        model("qwen", base_url="http://127.0.0.1:8000/v1", api_key_env=""),
    ]
    requests = cell_requests(["44", "43"], models, run_key_prefix="t")
    tags = {(r.partition_key, r.tags[ENDPOINT_TAG]) for r in requests}
    assert tags == {
        ("43|deepseek/deepseek-v3.2", "openrouter.ai"),
        ("44|deepseek/deepseek-v3.2", "openrouter.ai"),
        ("43|qwen", "127.0.0.1:8000"),
        ("44|qwen", "127.0.0.1:8000"),
    }
