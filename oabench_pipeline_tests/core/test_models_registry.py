"""The models registry: the shipped file, key derivation, and errors that name file, line and field."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from oabench_pipeline.core.baselines import BASELINE_IDS
from oabench_pipeline.core.models_registry import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_BASE_URL,
    EnvHeaderValue,
    ModelsRegistryError,
    derive_model_key,
    entry_for_key,
    known_models,
    load_models_registry,
    overridden_keys,
    parse_models_registry,
    safe_name_problem,
)
from oabench_pipeline.settings import DEFAULT_MODELS_FILE

STUDY_MODEL_IDS = [
    "google/gemini-3-flash-preview",
    "openai/gpt-5.2",
    "google/gemini-3.1-pro-preview",
    "anthropic/claude-opus-4.6",
    "google/gemini-3.1-flash-lite-preview",
    "anthropic/claude-sonnet-4.6",
    "x-ai/grok-4.1-fast",
    "openai/gpt-5-mini",
    "anthropic/claude-haiku-4.5",
    "google/gemini-2.5-flash-lite",
    "deepseek/deepseek-v3.2",
]


def test_shipped_registry_has_the_study_and_the_baselines() -> None:
    models = load_models_registry(DEFAULT_MODELS_FILE)
    api = [m for m in models if m.kind == "api"]
    assert [m.id for m in api] == STUDY_MODEL_IDS
    assert all(m.protocol == "direto" and not m.web_search for m in api)
    assert all(m.base_url == DEFAULT_BASE_URL and m.api_key_env == DEFAULT_API_KEY_ENV for m in api)
    assert [m.reasoning_effort for m in api if m.reasoning_effort] == ["medium"]
    assert {m.key for m in api} == {*STUDY_MODEL_IDS, "openai/gpt-5.2:reasoning-medium"} - {"openai/gpt-5.2"}
    baselines = [m for m in models if m.kind == "baseline"]
    assert sorted(m.id for m in baselines) == sorted(BASELINE_IDS)
    assert all(m.api_key_env is None and m.base_url is None for m in baselines)


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("m/x",), "m/x"),
        (("m/x", "medium"), "m/x:reasoning-medium"),
        (("m/x", None, True), "m/x:web"),
        (("m/x", None, False, "deliberativo"), "m/x:deliberativo"),
        (("m/x", "high", True, "deliberativo"), "m/x:reasoning-high:web:deliberativo"),
    ],
)
def test_key_suffixes_come_in_a_fixed_order(args: tuple, key: str) -> None:
    assert derive_model_key(*args) == key


def _registry(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_local_endpoint_without_key_and_optional_fields(tmp_path: Path) -> None:
    path = _registry(
        tmp_path,
        """
[[models]]
id = "qwen3:8b"
base_url = "http://localhost:11434/v1"
api_key_env = ""
concurrency = 2
max_cost_usd = 5
knowledge_cutoff = 2025-01-31
protocol = "deliberativo"

[[models]]
id = "qwen3:8b"
api_key_env = false
key = "ollama/qwen3-8b"
""",
    )
    first, second = load_models_registry(path)
    assert first.api_key_env is None and second.api_key_env is None
    assert first.key == "qwen3:8b:deliberativo" and second.key == "ollama/qwen3-8b"
    assert first.label == "qwen3:8b" and first.provider == "local"
    assert first.max_cost_usd == 5.0 and first.knowledge_cutoff == date(2025, 1, 31)
    assert second.concurrency == 20


BROKEN = [
    # (registry text, line, field, words the message must contain)
    ('[[models]]\nid = "a/b"\nlabel = "x\n', 3, "label", "syntax"),
    (
        '[[models]]\nid = "a/b"\n\n[[models]]\nid = "c/d"\ntemperature = 0.5\n',
        6,
        "temperature",
        "Extra inputs",
    ),
    ('[[models]]\nid = "a/b"\nconcurrency = "20"\n', 3, "concurrency", "integer"),
    ('[[models]]\nid = "a/b"\nconcurrency = 0\n', 3, "concurrency", "greater than or equal"),
    ('[[models]]\nid = "a/b"\nweb_search = "yes"\n', 3, "web_search", "boolean"),
    ('[[models]]\nid = "a/b"\nreasoning_effort = "max"\n', 3, "reasoning_effort", "low"),
    ('[[models]]\nid = "a/b"\nprotocol = "nativo"\n', 3, "protocol", "direto"),
    ('[[models]]\nlabel = "no id"\n', 1, "id", "required"),
    ('[[models]]\nid = "a/b"\n\n[[models]]\nid = "a/b"\n', 4, "key", "duplicate"),
    ('[[models]]\nid = "a/b"\nkey = "x"\n[[models]]\nid = "c/d"\nkey = "x"\n', 6, "key", "duplicate"),
    ('[[models]]\nid = "baseline/coin"\nkind = "baseline"\n', 3, "kind", "baseline"),
    ('[[models]]\nid = "a,b"\n', 2, "id", "','"),
    ('[[models]]\nid = "a/../../etc"\n', 2, "id", "'..' segment"),
    (f'[[models]]\nid = "a/{"b" * 199}"\n', 2, "id", "at most 200"),
    ('[[models]]\nid = "a/b"\nkey = "/abs/key"\n', 3, "key", "empty, '.' or '..' segment"),
    ('[[models]]\nid = "a/b"\nkey = "a b"\n', 3, "key", "' '"),
    ('title = "x"\n[[models]]\nid = "a/b"\n', 1, "title", "top-level"),
    ("# nothing yet\n", 1, "models", "at least one"),
    # Nested past what Python's TOML parser takes (it raised RecursionError: a traceback, no line).
    (f'[[models]]\nid = "a/b"\nlabel = {"[" * 5000}{"]" * 5000}\n', 3, "label", "TOML nested too deep"),
    (f'[[models]]\nid = "a/b"\nx = {"{y = " * 3000}1{"}" * 3000}\n', 3, "x", "more than 100 levels"),
]


@pytest.mark.parametrize(("text", "line", "field", "words"), BROKEN)
def test_broken_registry_names_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    path = _registry(tmp_path, text)
    with pytest.raises(ModelsRegistryError) as caught:
        load_models_registry(path)
    error = caught.value
    assert (error.line, error.field) == (line, field)
    assert f"{path}:{line}:" in str(error) and f"'{field}'" in str(error)
    assert words in str(error)


# As written in TOML: "\\t" is TOML's escape for a tab.
@pytest.mark.parametrize("bad", ["a|b", "a,b", "a[b", "a]b", "a...b", "tab\\tkey"])
def test_keys_that_break_dagster_partitions_are_refused(tmp_path: Path, bad: str) -> None:
    path = _registry(tmp_path, f'[[models]]\nid = "a/b"\nlabel = "L"\nkey = "{bad}"\n')
    with pytest.raises(ModelsRegistryError, match=r"Dagster|only letters, digits") as caught:
        load_models_registry(path)
    assert (caught.value.line, caught.value.field) == (4, "key")


@pytest.mark.parametrize(
    "name", ["openai/gpt-5.2:reasoning-medium", "meta-llama/Llama-3.1-8B-Instruct", "llama3.1:8b", "a" * 200]
)
def test_real_model_ids_are_safe_names(name: str) -> None:
    assert safe_name_problem(name) is None


def test_missing_file_is_a_registry_error(tmp_path: Path) -> None:
    with pytest.raises(ModelsRegistryError, match=r"nope\.toml"):
        load_models_registry(tmp_path / "nope.toml")


# ------------------------------------------------------------------ endpoint fields (base_url, headers)


def test_azure_url_api_key_header_and_extra_headers(tmp_path: Path) -> None:
    path = _registry(
        tmp_path,
        """
[[models]]
id = "gpt-4o"
base_url = "https://acme.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21"
api_key_env = "AZURE_OPENAI_API_KEY"
api_key_header = "api-key"
extra_headers = { "X-Title" = "OABench", "X-Gateway-Token" = { env = "GATEWAY_TOKEN" } }

[[models]]
id = "qwen3:8b"
base_url = "http://[::1]:11434/v1"
api_key_env = ""
""",
    )
    azure, ollama = load_models_registry(path)
    assert azure.base_url is not None and azure.base_url.endswith("?api-version=2024-10-21")
    assert azure.api_key_header == "api-key"
    assert azure.extra_headers["X-Title"] == "OABench"
    assert azure.extra_headers["X-Gateway-Token"] == EnvHeaderValue(env="GATEWAY_TOKEN")
    assert ollama.api_key_header == "Authorization" and ollama.extra_headers == {}
    assert ollama.base_url == "http://[::1]:11434/v1"


ENDPOINT_BROKEN = [
    # (the line after `id`, words the message must contain); the error is always on line 3
    ('base_url = "ftp://host/v1"', "base_url", "http:// or https://"),
    ('base_url = "https://host/v1 "', "base_url", "whitespace"),
    ('base_url = "https://ho st/v1"', "base_url", "whitespace"),
    ('base_url = "https://host/v1\\u0007"', "base_url", "control characters"),
    ('base_url = "http://[::1/v1"', "base_url", "not a valid URL"),
    ('base_url = "https:///v1"', "base_url", "no host"),
    ('base_url = "https://user:pw@host/v1"', "base_url", "credentials"),
    ('api_key_header = "api key"', "api_key_header", "not a valid HTTP header name"),
    ('api_key_header = "Content-Length"', "api_key_header", "set by the HTTP client"),
    ('extra_headers = { "Bad Name" = "x" }', "extra_headers", "not a valid HTTP header name"),
    ('extra_headers = { "X-A" = "a\\nb" }', "extra_headers", "control characters"),
    ('extra_headers = { "X-A" = 3 }', "extra_headers", '{ env = "VAR" }'),
    ('extra_headers = { "X-A" = { env = "" } }', "extra_headers", '{ env = "VAR" }'),
    ('extra_headers = { "Authorization" = "Bearer x" }', "extra_headers", "api_key_header"),
    ('batch_api = "anthropic"', "batch_api", "'openrouter' or 'openai'"),
    ("batch_api = true", "batch_api", "'openrouter' or 'openai'"),
]


def test_batch_api_is_inferred_from_known_hosts_only(tmp_path: Path) -> None:
    path = _registry(
        tmp_path,
        """
[[models]]
id = "a/openrouter"

[[models]]
id = "gpt-4o"
base_url = "https://api.openai.com/v1"

[[models]]
id = "a/proxy"
base_url = "https://proxy.example/v1"

[[models]]
id = "a/proxied"
base_url = "https://proxy.example/v1"
batch_api = "openrouter"
""",
    )
    assert [m.batch_api for m in load_models_registry(path)] == ["openrouter", "openai", None, "openrouter"]


@pytest.mark.parametrize(("line", "field", "words"), ENDPOINT_BROKEN)
def test_bad_endpoint_fields_name_file_line_and_field(
    tmp_path: Path, line: str, field: str, words: str
) -> None:
    path = _registry(tmp_path, f'[[models]]\nid = "a/b"\n{line}\n')
    with pytest.raises(ModelsRegistryError) as caught:
        load_models_registry(path)
    assert (caught.value.line, caught.value.field) == (3, field)
    assert f"{path}:3: field '{field}':" in str(caught.value) and words in str(caught.value)


LINK_LOCAL_URLS = [
    "http://169.254.169.254/latest",  # the cloud metadata service
    "http://169.254.170.2/v2/credentials",  # ECS task credentials
    "http://2852039166/latest",  # the same address as one number, which getaddrinfo accepts
    "http://0xa9fea9fe/latest",
    "http://169.254.169.254./latest",
    "http://[fe80::1%25eth0]:8080/v1",
    "http://[fd00:ec2::254]/latest",  # AWS's metadata over IPv6 (not link-local: named)
    "http://[::ffff:169.254.169.254]/latest",  # IPv4-mapped
    "http://[::ffff:a9fe:a9fe]/latest",
    "http://[64:ff9b::a9fe:a9fe]/latest",  # NAT64
    "http://metadata.google.internal/computeMetadata/v1",
]


@pytest.mark.parametrize("url", LINK_LOCAL_URLS)
def test_link_local_and_metadata_base_urls_are_refused_unless_allowed(tmp_path: Path, url: str) -> None:
    path = _registry(tmp_path, f'[[models]]\nid = "a/b"\nbase_url = "{url}"\napi_key_env = ""\n')
    with pytest.raises(ModelsRegistryError) as caught:
        load_models_registry(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: field 'base_url': {url!r} ")
    assert message.endswith("refused unless `allow_private_network = true` is set on this entry")
    allowed = _registry(
        tmp_path, f'[[models]]\nid = "a/b"\nallow_private_network = true\nbase_url = "{url}"\n'
    )
    assert load_models_registry(allowed)[0].base_url == url


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:11434/v1", "http://[::1]:8000/v1", "http://192.168.1.20:8000/v1", "http://10.0.0.5/v1",
     "http://localhost:1234/v1", "https://openrouter.ai/api/v1", "http://host.docker.internal:11434/v1"],
)  # fmt: skip
def test_loopback_and_lan_endpoints_stay_allowed(tmp_path: Path, url: str) -> None:
    path = _registry(tmp_path, f'[[models]]\nid = "a/b"\nbase_url = "{url}"\napi_key_env = ""\n')
    assert load_models_registry(path)[0].base_url == url


def test_a_user_file_adds_to_the_packaged_registry_and_its_entry_of_a_packaged_key_wins(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "models.toml"
    mine.write_text(
        '[[models]]\nid = "acme/new"\n\n'
        '[[models]]\nid = "deepseek/deepseek-v3.2"\nbase_url = "http://127.0.0.1:8000/v1"\napi_key_env = ""\n'
    )
    packaged = load_models_registry(DEFAULT_MODELS_FILE)
    models = known_models([DEFAULT_MODELS_FILE, mine])
    # The packaged order, the replaced entry in its place, then the user's new models.
    assert [m.key for m in models] == [m.key for m in packaged] + ["acme/new"]
    [deepseek] = [m for m in models if m.key == "deepseek/deepseek-v3.2"]
    assert deepseek.base_url == "http://127.0.0.1:8000/v1" and deepseek.api_key_env is None
    assert overridden_keys([DEFAULT_MODELS_FILE, mine]) == {"deepseek/deepseek-v3.2": mine}
    assert [m.key for m in known_models(mine)] == ["acme/new", "deepseek/deepseek-v3.2"]  # one file: itself


@pytest.mark.parametrize(
    "key", ["some/new-model", "qwen3:8b", "x/y:reasoning-high:web:deliberativo", "m:web", "a/b:reasoning-low"]
)
def test_the_block_an_unknown_key_suggests_is_an_entry_of_that_key(key: str, tmp_path: Path) -> None:
    block = entry_for_key(key)
    assert block is not None
    [model] = parse_models_registry(block, tmp_path / "models.toml")
    assert model.key == key


def test_no_block_for_a_key_that_cannot_be_one() -> None:
    assert entry_for_key("a b") is None
    assert entry_for_key("../etc") is None
