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


def test_connection_pool_is_sized_to_the_models_sharing_the_base_url(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from oabench_pipeline.inference.resources import ModelClientResource

    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-test")
    monkeypatch.setenv("GW_TOKEN", "tok-secret")
    registry = [
        model("a/one", concurrency=20, extra_headers={"X-Title": "OABench", "X-Token": {"env": "GW_TOKEN"}}),
        model("b/two", concurrency=8),
        model("local", base_url="http://127.0.0.1:8000/v1", api_key_env="", concurrency=4),
    ]
    endpoint = ModelClientResource().endpoint(registry[0], registry)
    assert endpoint.max_connections == 28  # both OpenRouter models; the local server has its own pool
    assert ModelClientResource().endpoint(registry[2], registry).max_connections == 4
    assert endpoint.extra_headers == (("X-Title", "OABench"),)
    assert endpoint.secret_headers == (("X-Token", "tok-secret"),)
    assert "tok-secret" not in repr(endpoint) and "sk-test" not in repr(endpoint)
    assert set(endpoint.secrets) == {"sk-test", "tok-secret"}


def test_price_list_keeps_the_base_url_query_and_the_key_header() -> None:
    from oabench_pipeline.inference.pricing import fetch_model_prices
    from oabench_pipeline_tests.servers.openai_replay import ModelPricing, ReplayServer

    with ReplayServer(
        models={"gpt-4o": ModelPricing("0.000005", "0.00002")},
        base_path="/openai/deployments/gpt-4o",
        required_query="api-version=2024-10-21",
    ) as server:
        rows = fetch_model_prices(server.base_url, "azure-key", api_key_header="api-key")
        stats = server.stats
    assert [(r["model"], r["prompt_price_per_token"]) for r in rows] == [("gpt-4o", 0.000005)]
    assert stats.request_targets == {"GET /openai/deployments/gpt-4o/models?api-version=2024-10-21"}
    assert stats.header_values["api-key"] == {"azure-key"}
