"""`oabench run` end to end against endpoints as they exist: a third-party server (LLMock), a real
forward proxy (proxy.py), and our loopback server in the shapes users meet — gzip-always, IPv6,
Azure's URL and `api-key` header, costs that are negative or NaN, cost in LiteLLM's header. Edition 43 has
80 questions, 2 annulled: every live cell must end 78/78 answered. (The endpoints that cannot work — a
certificate nobody trusts, a host that does not resolve, a redirect — are cells of the one run of stopped
cells in `test_budget_and_fatal.py`.)
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from oabench_pipeline.engine.runs import instance_for
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV
from oabench_pipeline_tests.pipeline_env import PipelineEnv
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer
from oabench_pipeline_tests.servers.third_party import ForwardProxy, LLMock

EDITION = "43"
ACTIVE = 78
MODEL = "acme/oab-model"
PROVENANCE = ("response_id", "response_model", "finish_reason", "response_provider", "system_fingerprint")


ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("real-endpoints")


def toml_value(value: object) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value, ensure_ascii=False)


def use_models(env: PipelineEnv, base_url: str, **extra: object) -> None:
    """A private registry with MODEL on `base_url`, the test key in the environment."""
    env.set(TEST_KEY_ENV, TEST_KEY)
    entry = {"id": MODEL, "base_url": base_url, "api_key_env": TEST_KEY_ENV, **extra}
    text = "[[models]]\n" + "".join(f"{name} = {toml_value(value)}\n" for name, value in entry.items())
    path = env.root / "models.toml"
    path.write_text(text, encoding="utf-8")
    env.set("OABENCH_MODELS_FILE", path)


def run_cell(env: PipelineEnv):  # type: ignore[no-untyped-def]
    return env.cli("run", "--models", MODEL, "--editions", EDITION)


def use_registry(env: PipelineEnv, entries: dict[str, dict[str, object]]) -> None:
    """A private registry with one entry per model key (all using the test key), as `use_models`."""
    env.set(TEST_KEY_ENV, TEST_KEY)
    text = "".join(
        "[[models]]\n"
        + "".join(
            f"{name} = {toml_value(value)}\n"
            for name, value in {"id": key, "api_key_env": TEST_KEY_ENV, **entry}.items()
        )
        + "\n"
        for key, entry in entries.items()
    )
    path = env.root / "models.toml"
    path.write_text(text, encoding="utf-8")
    env.set("OABENCH_MODELS_FILE", path)


def run_cells(env: PipelineEnv, *models: str):  # type: ignore[no-untyped-def]
    return env.cli("run", "--models", ",".join(models), "--editions", EDITION)


def cell_rows(env: PipelineEnv, model: str = MODEL) -> pl.DataFrame:
    return env.warehouse.read("inferences", str(cell_partition_key(model, EDITION)))


def assert_all_answered(env: PipelineEnv, model: str = MODEL) -> pl.DataFrame:
    rows = cell_rows(env, model).filter(~pl.col("skipped"))
    answered = rows.filter(pl.col("error").is_null() & pl.col("raw_response").is_not_null())
    assert (answered.height, rows.height) == (ACTIVE, ACTIVE), rows.filter(pl.col("error").is_not_null())
    return answered


def no_proxy_env(env: PipelineEnv) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        env.monkeypatch.delenv(name, raising=False)
        env.monkeypatch.delenv(name.lower(), raising=False)


# ------------------------------------------------------------------------------- third-party servers


GATEWAY = "acme/azure-gateway"
NEGATIVE_NAN, HEADER_COST = "acme/negative-nan-cost", "acme/litellm-header-cost"


@pytest.mark.slow
def test_llmock_an_azure_shaped_ipv6_gzip_gateway_and_odd_costs_answer_every_question(
    fresh_env: PipelineEnv, tmp_path: Path
) -> None:
    """Four endpoints, one cell each, one `oabench run` (were four tests and six runs before that); every
    cell must end 78/78 answered, and each endpoint's own checks follow.

    - LLMock (PyPI) with three 429s (Retry-After 0.2 s) and two 503s queued: all answered, once each.
    - Our gateway in three shapes users meet: it gzips every reply unasked, listens on the IPv6 literal
      `[::1]`, and wants Azure's URL (path prefix and `api-version` query kept) with the key in an
      `api-key` header plus a secret extra header.
    - -5 and NaN in `usage.cost`: stored as NULL with a warning; nothing negative or NaN anywhere.
    - The cost in LiteLLM's response header: stored.
    """
    no_proxy_env(fresh_env)
    token = "gw-token-5f1e9a7c3b"
    fresh_env.set("OABENCH_TEST_GATEWAY_TOKEN", token)
    from oabench_pipeline_tests.inference.replay import question_texts

    texts = sorted(
        t for q, t in question_texts(fresh_env.warehouse).items() if q.startswith(f"oab-{EDITION}-")
    )
    costs = [-5.0, float("nan"), 0.002]
    odd = {(NEGATIVE_NAN, text): RecordedReply("B", cost=costs[i % 3]) for i, text in enumerate(texts)}
    in_header = {(HEADER_COST, text): RecordedReply("C", cost=0.0005) for text in texts}
    with (
        ReplayServer(replies=odd, api_key=TEST_KEY) as odd_server,
        ReplayServer(replies=in_header, api_key=TEST_KEY, cost_header="x-litellm-response-cost") as litellm,
        LLMock(tmp_path) as llmock,
        ReplayServer(
            api_key=TEST_KEY,
            gzip_always=True,
            host="::1",
            api_key_header="api-key",
            base_path="/openai/deployments/oab-gpt",
            required_query="api-version=2024-10-21",
        ) as gateway,
    ):
        llmock.admin(
            "scenario",
            {
                "behaviors": [
                    {"type": "fail", "status": 429, "retry_after": 0.2, "times": 3},
                    {"type": "fail", "status": 503, "times": 2},
                ]
            },
        )
        assert gateway.base_url.startswith("http://[::1]:")
        use_registry(
            fresh_env,
            {
                MODEL: {"base_url": llmock.base_url, "concurrency": 4},
                GATEWAY: {
                    "base_url": gateway.base_url,
                    "api_key_header": "api-key",
                    "extra_headers": {
                        "X-Title": "OABench",
                        "X-Gateway-Token": {"env": "OABENCH_TEST_GATEWAY_TOKEN"},
                    },
                },
                NEGATIVE_NAN: {"base_url": odd_server.base_url, "max_cost_usd": 1.0},
                HEADER_COST: {"base_url": litellm.base_url},
            },
        )
        result = run_cells(fresh_env, MODEL, GATEWAY, NEGATIVE_NAN, HEADER_COST)
        assert result.exit_code == 0, result.output
        verdict = llmock.admin("verdict")
        seen = llmock.admin("requests")
        stats = gateway.stats

    # LLMock
    answered = assert_all_answered(fresh_env)
    assert set(answered["response_model"]) == {MODEL} and set(answered["finish_reason"]) == {"stop"}
    assert answered["response_id"].null_count() == 0 and answered["response_id"].n_unique() == ACTIVE
    # LLMock's own grading of our client: Retry-After honoured, no retry storm, nothing non-retryable retried.
    assert "findings" in verdict, verdict
    assert [f for f in verdict["findings"] if f["severity"] == "error"] == [], verdict
    requests = seen if isinstance(seen, list) else seen.get("requests", [])
    assert len(requests) == ACTIVE + 5  # 78 answers + the 5 queued faults, each retried once

    # The gateway
    assert stats.total_requests == ACTIVE  # each question asked once: nothing paid twice
    answered = assert_all_answered(fresh_env, GATEWAY)
    # gzip: every reply decoded, provenance read from it
    for column in PROVENANCE:
        assert answered[column].null_count() == 0, column
    assert set(answered["response_provider"]) == {"replay"}
    assert set(answered["system_fingerprint"]) == {"fp_replay"}
    # IPv6: "[::1]:PORT", brackets kept in the Host header
    assert stats.host_headers == {gateway.base_url.split("/")[2].split("?")[0]}
    # Azure: path prefix and query kept, the key in `api-key`, the extra headers sent and never stored
    assert stats.request_targets == {
        "POST /openai/deployments/oab-gpt/chat/completions?api-version=2024-10-21"
    }
    assert stats.header_values["api-key"] == {TEST_KEY} and "authorization" not in stats.header_values
    assert stats.header_values["x-title"] == {"OABench"} and stats.header_values["x-gateway-token"] == {token}
    for root in (fresh_env.settings.warehouse_path.parent, fresh_env.root / "dagster_home"):
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                assert token.encode() not in data and TEST_KEY.encode() not in data, path

    # -5 and NaN costs
    answered = assert_all_answered(fresh_env, NEGATIVE_NAN)
    trusted = answered["cost_usd"].drop_nulls()
    assert 0 < trusted.len() < ACTIVE and trusted.min() >= 0 and not trusted.is_nan().any()
    # The warning reached the run's log, in the instance (the terminal shows no Dagster log by default).
    with instance_for(fresh_env.settings) as instance:
        logged = [e.user_message for run in instance.get_runs() for e in instance.all_logs(run.run_id)]
    assert any("usage.cost" in message and "cost stored as NULL" in message for message in logged)
    everywhere = fresh_env.warehouse.query(
        "select count(*) from inferences where cost_usd < 0 or isnan(cost_usd)"
    ).item()
    assert everywhere == 0
    leaderboard = fresh_env.warehouse.read("leaderboard").filter(pl.col("model_key") == NEGATIVE_NAN)
    assert leaderboard["cost_usd"].min() >= 0

    # LiteLLM's cost header
    from_header = assert_all_answered(fresh_env, HEADER_COST)
    assert from_header["cost_usd"].null_count() == 0
    assert from_header["cost_usd"].sum() == pytest.approx(ACTIVE * 0.0005)


@pytest.mark.slow
def test_http_proxy_is_honoured(fresh_env: PipelineEnv, tmp_path: Path) -> None:
    """Behind a corporate proxy: every model call goes through HTTP_PROXY (proxy.py from PyPI)."""
    no_proxy_env(fresh_env)
    with ReplayServer(api_key=TEST_KEY) as server, ForwardProxy(tmp_path) as proxy:
        fresh_env.set("HTTP_PROXY", proxy.url)
        use_models(fresh_env, server.base_url, concurrency=8)
        result = run_cell(fresh_env)
        assert result.exit_code == 0, result.output
        assert server.stats.total_requests == ACTIVE
        connections = server.stats.connections_opened
    assert_all_answered(fresh_env)
    # proxy.py logs one access line per relayed keep-alive connection: every connection the server
    # accepted came from the proxy.
    port = server.base_url.split(":")[2].split("/")[0]
    relayed = proxy.relayed(f"POST 127.0.0.1:{port}/v1/chat/completions")
    assert 0 < relayed == connections, proxy.log_text()[-2000:]
