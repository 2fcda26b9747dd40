"""The models registry: which model configurations to benchmark, read from a TOML file users edit.

Each `[[models]]` table is one configuration (model + protocol + reasoning effort + web search), and its
`key` is the model dimension of the Dagster partitions. A mistake in the file must point the user to the
exact line and field, so every error names the file, the line and the field.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import tomllib
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from oabench_pipeline.core.baselines import BASELINE_IDS
from oabench_pipeline.core.prompts import Protocol
from oabench_pipeline.core.text_safety import clean_label
from oabench_pipeline.core.toml_errors import (
    TomlFileError,
    field_line,
    nesting_error,
    syntax_error,
    table_spans,
    validation_error,
)

ReasoningEffort = Literal["low", "medium", "high"]
ModelKind = Literal["api", "baseline"]
BatchApi = Literal["openrouter", "openai"]
# Hosts whose batch API is known: a model on one of them gets `batch_api` without writing it. Any other host
# (a proxy, a local server) may speak either shape or none, so there it must be set by hand.
BATCH_API_BY_HOST: dict[str, BatchApi] = {"openrouter.ai": "openrouter", "api.openai.com": "openai"}

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_API_KEY_ENV = "OPENROUTER_API_KEY"
DEFAULT_CONCURRENCY = 20
DEFAULT_API_KEY_HEADER = "Authorization"  # `Authorization: Bearer <key>`; another name carries the raw key

# Dagster rejects these in multi-partition keys: "|" is its dimension delimiter, "," "[" "]" break
# partition lists, "..." means a range, control characters are refused outright.
FORBIDDEN_KEY_SUBSTRINGS: tuple[str, ...] = (
    "|",
    ",",
    "[",
    "]",
    "...",
    "\a",
    "\b",
    "\f",
    "\n",
    "\r",
    "\t",
    "\v",
    "\0",
)


class ModelsRegistryError(TomlFileError):
    """A registry file that cannot be used; the message names the file, the line and the field."""


def derive_model_key(
    model_id: str,
    reasoning_effort: str | None = None,
    web_search: bool = False,
    protocol: str = "direto",
) -> str:
    """The default key of a configuration: `id`, then `:reasoning-{effort}`, `:web`, `:deliberativo`.

    The suffix order is fixed (reasoning, web, protocol) so one configuration has exactly one key, e.g.
    `openai/gpt-5.2:reasoning-medium` or `x/y:reasoning-high:web:deliberativo`. The direct protocol, the
    study's default, adds no suffix, so plain keys stay plain model ids. Published runs use this too.
    """
    key = model_id
    if reasoning_effort:
        key += f":reasoning-{reasoning_effort}"
    if web_search:
        key += ":web"
    if protocol == "deliberativo":
        key += ":deliberativo"
    return key


def entry_for_key(key: str) -> str | None:
    """The `[[models]]` block whose derived key is `key`, to paste into a registry file (None: `key` cannot
    be a key). Trailing suffixes of `derive_model_key` become fields; anything else is the model id (an
    Ollama tag such as `qwen3:8b` stays in the id)."""
    model_id, effort, web, protocol = key, None, False, "direto"
    if model_id.endswith(":deliberativo"):
        model_id, protocol = model_id.removesuffix(":deliberativo"), "deliberativo"
    if model_id.endswith(":web"):
        model_id, web = model_id.removesuffix(":web"), True
    if match := re.fullmatch(r"(.+):reasoning-(low|medium|high)", model_id):
        model_id, effort = match.group(1), match.group(2)
    if (
        key_problem(key)
        or safe_name_problem(model_id)
        or derive_model_key(model_id, effort, web, protocol) != key
    ):
        return None
    lines = ["[[models]]", f'id = "{model_id}"']
    lines += [f'reasoning_effort = "{effort}"'] if effort else []
    lines += ["web_search = true"] if web else []
    lines += ['protocol = "deliberativo"'] if protocol == "deliberativo" else []
    lines += [
        "# OpenRouter by default (its key in OPENROUTER_API_KEY); another OpenAI-compatible endpoint:",
        '# base_url = "http://127.0.0.1:11434/v1"',
        '# api_key_env = ""  # the variable holding its key; "" sends none',
    ]
    return "\n".join(lines)


# Model ids and keys become file names (response logs, partition files) and partition keys, so they are
# limited to a safe alphabet: letters, digits and `/ : . _ -`, at most 200 characters, `/`-separated
# segments that are neither empty nor `.` / `..` (a key of `..` would put its response log outside
# `responses/`). Every public model id (OpenRouter, Hugging Face, Ollama tags) fits.
SAFE_NAME_MAX_LENGTH = 200
_SAFE_NAME = re.compile(r"[A-Za-z0-9/:._-]+")


def safe_name_problem(name: str) -> str | None:
    """Why `name` is not a safe model id or key (see `_SAFE_NAME`), or None when it is."""
    if not name:
        return "must not be empty"
    if len(name) > SAFE_NAME_MAX_LENGTH:
        return f"is {len(name)} characters long; at most {SAFE_NAME_MAX_LENGTH} are allowed"
    if not _SAFE_NAME.fullmatch(name):
        bad = sorted({c for c in name if not _SAFE_NAME.fullmatch(c)})
        shown = ", ".join(repr(c) for c in bad)
        return f"{name!r} contains {shown}: only letters, digits and / : . _ - are allowed"
    if any(segment in ("", ".", "..") for segment in name.split("/")):
        return f"{name!r} has an empty, '.' or '..' segment between slashes"
    return None


def key_problem(key: str) -> str | None:
    """Why `key` cannot be a model key (unsafe, or refused by Dagster partition keys), or None when it can."""
    if problem := safe_name_problem(key):
        return problem
    bad = [s for s in FORBIDDEN_KEY_SUBSTRINGS if s in key]
    if bad:
        return f"{key!r} contains {', '.join(repr(s) for s in bad)}, which Dagster partition keys forbid"
    return None


# ---------------------------------------------------------------------------------------------------------
# Endpoint fields: base_url, api_key_header, extra_headers (each check its own small function)
# ---------------------------------------------------------------------------------------------------------

_HTTP_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 field-name characters
# Headers the HTTP client owns: setting them by hand would break the framing of every request.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type"})


def base_url_problem(url: str) -> str | None:
    """Why `url` cannot be an endpoint's base URL, or None. Checked at load, before anything is sent."""
    if any(ch.isspace() for ch in url):
        return f"{url!r} contains whitespace"
    if not url.isprintable():
        return f"{url!r} contains control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # unbalanced IPv6 brackets, a port that is not a number
        return f"{url!r} is not a valid URL ({error})"
    if parts.scheme not in ("http", "https"):
        return f"{url!r} must start with http:// or https://"
    if not parts.hostname:
        return f"{url!r} has no host"
    if port == 0:
        return f"{url!r} has port 0"
    if parts.username is not None or parts.password is not None:
        return f"{url!r} carries credentials; put the key in the environment variable named by api_key_env"
    if parts.fragment:
        return f"{url!r} has a #fragment, which is never sent"
    return None


# Addresses a model endpoint has no business at, refused by default: link-local networks, where every cloud
# puts its instance metadata service (credentials for the taking: 169.254.169.254), and the metadata
# addresses outside them. Loopback and private LANs (Ollama on 127.0.0.1, vLLM on 192.168.x) stay allowed.
LINK_LOCAL_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
METADATA_ADDRESSES = {
    ipaddress.ip_address("fd00:ec2::254"): "the AWS instance metadata service over IPv6",
    ipaddress.ip_address("100.100.100.200"): "the Alibaba Cloud metadata service",
    ipaddress.ip_address("168.63.129.16"): "the Azure host platform (WireServer)",
}
METADATA_HOST_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
# IPv6 prefixes that carry an IPv4 address in their last 32 bits (NAT64's well-known and local-use ones).
_NAT64_PREFIXES = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a URL host names literally, as the resolver would read it: `2852039166`,
    `0xa9fea9fe`, `0251.0376.0251.0376` and `169.254.43518` are all 169.254.169.254 to getaddrinfo
    (inet_aton), and a trailing dot or an IPv6 zone (`%eth0`, `%25eth0`) changes nothing."""
    host = host.strip("[]").rstrip(".").split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
    (`::a.b.c.d`), 6to4 (`2002:AABB:CCDD::`) and NAT64 (`64:ff9b::a.b.c.d`) reach it."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if int(address) >> 32 == 0 and int(address) > 1:  # IPv4-compatible (::1 is loopback, :: is unspecified)
        return low32
    if any(address in prefix for prefix in _NAT64_PREFIXES):
        return low32
    return None


def link_local_problem(host: str) -> str | None:
    """Why `host` is a link-local or cloud metadata endpoint (refused by default), or None."""
    if host.rstrip(".").lower() in METADATA_HOST_NAMES:
        return "names a cloud instance metadata service"
    address = host_address(host)
    if address is None:
        return None
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [address]
    if isinstance(address, ipaddress.IPv6Address) and (embedded := embedded_ipv4(address)) is not None:
        candidates.append(embedded)
    for candidate in candidates:
        shown = f"{address} (that is {candidate})" if candidate != address else str(address)
        if candidate in METADATA_ADDRESSES:
            return f"is {shown}, {METADATA_ADDRESSES[candidate]}"
        network = next((n for n in LINK_LOCAL_NETWORKS if candidate in n), None)
        if network is not None:
            return (
                f"is {shown}, a link-local address ({network}, where cloud instance metadata services listen)"
            )
    return None


def header_name_problem(name: str) -> str | None:
    if not _HTTP_TOKEN.match(name):
        return f"{name!r} is not a valid HTTP header name"
    if name.lower() in _RESERVED_HEADERS:
        return f"{name!r} is set by the HTTP client and cannot be overridden"
    return None


def header_value_problem(name: str, value: str) -> str | None:
    if not value.isprintable():
        return f"the value of header {name!r} contains control characters"
    return None


def extra_header_shape_problem(name: str, value: Any) -> str | None:
    if isinstance(value, str):
        return None
    if (
        isinstance(value, Mapping)
        and set(value) == {"env"}
        and isinstance(value["env"], str)
        and value["env"]
    ):
        return None
    return f'the value of header {name!r} must be a string or {{ env = "VAR" }}, got {value!r}'


class EnvHeaderValue(BaseModel):
    """`{ env = "VAR" }`: a header value read from the environment at call time, treated as a secret."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    env: str = Field(min_length=1)


def _batch_api_of(base_url: str) -> BatchApi | None:
    """The batch API of a known host (`BATCH_API_BY_HOST`); None elsewhere, or for a URL `base_url`'s own
    validation will refuse."""
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return None
    return BATCH_API_BY_HOST.get(host.lower())


class ModelConfig(BaseModel):
    """One `[[models]]` table. Strict types: a quoted number or "yes" for a bool is an error, not a guess."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: str = Field(min_length=1, description="Model id sent to the endpoint (or a baseline id)")
    label: str = Field(min_length=1, description="Display name; defaults to the id")
    provider: str = Field(description="Who makes the model; defaults to the part of the id before '/'")
    protocol: Protocol = "direto"
    reasoning_effort: ReasoningEffort | None = None
    web_search: bool = False
    # Before `base_url`: its validator reads it.
    allow_private_network: bool = Field(
        False, description="Allow a link-local or cloud metadata base_url (169.254.0.0/16, fe80::/10, ...)"
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint; None for baselines")
    api_key_env: str | None = Field(None, description="Env var holding the API key; None: send no key")
    api_key_header: str = Field(
        DEFAULT_API_KEY_HEADER,
        description="Header carrying the key: Authorization (as `Bearer <key>`) or e.g. `api-key` (raw key)",
    )
    extra_headers: dict[str, str | EnvHeaderValue] = Field(
        default_factory=dict,
        description='Static headers sent with every request; a value `{ env = "VAR" }` is a secret',
    )
    concurrency: int = Field(DEFAULT_CONCURRENCY, ge=1)
    endpoint_concurrency: int | None = Field(
        None, ge=1, description="Requests in flight to the base_url's host, all models on it together"
    )
    max_cost_usd: float | None = Field(None, gt=0, allow_inf_nan=False)
    batch_api: BatchApi | None = Field(
        None,
        description="The batch API `oabench run --batch` uses (docs/batch.md); inferred for openrouter.ai "
        "and api.openai.com",
    )
    knowledge_cutoff: date | None = None
    kind: ModelKind = "api"
    key: str = Field(description="Partition key; derived from the other fields unless given")

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        """Defaults that depend on other fields (kind, id); wrong types are left for field validation."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        is_api = data.get("kind", "api") == "api"
        model_id = data.get("id")
        if is_api:
            data.setdefault("base_url", DEFAULT_BASE_URL)
            data.setdefault("api_key_env", DEFAULT_API_KEY_ENV)
            if "batch_api" not in data and isinstance(data["base_url"], str):
                data["batch_api"] = _batch_api_of(data["base_url"])
        # TOML has no null: `api_key_env = ""` or `= false` is how a local server says "no key".
        if data.get("api_key_env") in ("", False):
            data["api_key_env"] = None
        if isinstance(model_id, str):
            data.setdefault("label", model_id)
            if isinstance(data["label"], str):  # no control, bidi-override or zero-width character
                data["label"] = clean_label(data["label"]) or clean_label(model_id) or model_id
            data.setdefault("provider", model_id.split("/", 1)[0] if "/" in model_id else "local")
            effort, web, protocol = (
                data.get("reasoning_effort"),
                data.get("web_search", False),
                data.get("protocol"),
            )
            if isinstance(effort, str | None) and isinstance(web, bool) and isinstance(protocol, str | None):
                data.setdefault("key", derive_model_key(model_id, effort, web, protocol or "direto"))
        return data

    @field_validator("id")
    @classmethod
    def _id_is_safe(cls, model_id: str) -> str:
        if problem := safe_name_problem(model_id):
            raise ValueError(problem)
        return model_id

    @field_validator("key")
    @classmethod
    def _key_is_a_partition_key(cls, key: str) -> str:
        problem = key_problem(key)
        if problem:
            raise ValueError(f"{problem} (the key defaults to the id plus suffixes: set `key` explicitly)")
        return key

    @field_validator("base_url")
    @classmethod
    def _base_url_is_usable(cls, url: str | None, info: ValidationInfo) -> str | None:
        problem = None if url is None else base_url_problem(url)
        if problem is None and url is not None and not info.data.get("allow_private_network", False):
            host = urlsplit(url).hostname or ""
            if why := link_local_problem(host):
                problem = f"{url!r} {why}; refused unless `allow_private_network = true` is set on this entry"
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("api_key_header")
    @classmethod
    def _api_key_header_is_a_header(cls, name: str) -> str:
        problem = header_name_problem(name) if name.lower() != "authorization" else None
        if problem:
            raise ValueError(problem)
        return name

    @field_validator("extra_headers", mode="before")
    @classmethod
    def _extra_header_values_have_a_known_shape(cls, headers: Any) -> Any:
        """A clearer message than the union's: each value is a string or `{ env = "VAR" }`."""
        if not isinstance(headers, Mapping):
            return headers  # the type check says it needs a table
        for name, value in headers.items():
            problem = extra_header_shape_problem(str(name), value)
            if problem:
                raise ValueError(problem)
        return headers

    @field_validator("extra_headers")
    @classmethod
    def _extra_headers_are_headers(
        cls, headers: Mapping[str, str | EnvHeaderValue], info: ValidationInfo
    ) -> Mapping[str, str | EnvHeaderValue]:
        key_header = str(info.data.get("api_key_header", DEFAULT_API_KEY_HEADER)).lower()
        for name, value in headers.items():
            problem = header_name_problem(name)
            if problem is None and name.lower() == key_header:
                problem = (
                    f"{name!r} is the API key's header (api_key_header); it cannot also be an extra header"
                )
            if problem is None and isinstance(value, str):
                problem = header_value_problem(name, value)
            if problem:
                raise ValueError(problem)
        return headers

    @field_validator("kind")
    @classmethod
    def _baseline_is_known(cls, kind: ModelKind, info: ValidationInfo) -> ModelKind:
        # A field validator (not a model one) so the error carries a field name, hence a line.
        model_id = info.data.get("id")
        if kind == "baseline" and model_id is not None and model_id not in BASELINE_IDS:
            raise ValueError(f"kind = 'baseline' needs a known baseline id, one of {', '.join(BASELINE_IDS)}")
        return kind


# ---------------------------------------------------------------------------------------------------------
# Loading, with errors that point at a line
# ---------------------------------------------------------------------------------------------------------

_TABLE_HEADER = re.compile(r"^\s*\[\[\s*models\s*\]\]")


def _model_tables(path: Path, lines: list[str], data: dict[str, Any]) -> list[Any]:
    unknown = [k for k in data if k != "models"]
    if unknown:
        line = next(
            (i + 1 for i, text in enumerate(lines) if re.match(rf"^\s*\[*\s*{re.escape(unknown[0])}", text)),
            1,
        )
        raise ModelsRegistryError(
            path, line, unknown[0], "unknown top-level entry; only [[models]] tables belong here"
        )
    tables = data.get("models")
    if not isinstance(tables, list) or not tables:
        raise ModelsRegistryError(
            path, 1, "models", "no [[models]] table: the registry must list at least one model"
        )
    return tables


def parse_models_registry(text: str, path: Path) -> list[ModelConfig]:
    """Validate registry TOML `text` (read from `path`, named in errors)."""
    lines = text.splitlines()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise syntax_error(ModelsRegistryError, path, lines, error) from error
    except RecursionError:
        raise nesting_error(ModelsRegistryError, path, lines) from None
    tables = _model_tables(path, lines, data)
    spans = table_spans(lines, _TABLE_HEADER)
    configs: list[ModelConfig] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(tables):
        span = spans[index] if index < len(spans) else None
        try:
            config = ModelConfig.model_validate(table)
        except ValidationError as error:
            raise validation_error(ModelsRegistryError, path, lines, span, error) from error
        if config.key in seen:
            problem = f"duplicate key {config.key!r} (first used by [[models]] #{seen[config.key] + 1}); set a distinct `key`"
            raise ModelsRegistryError(path, field_line(lines, span, "key"), "key", problem)
        seen[config.key] = index
        configs.append(config)
    return configs


def load_models_registry(path: Path) -> list[ModelConfig]:
    """Read and validate a registry file; raises ModelsRegistryError naming file, line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ModelsRegistryError(path, None, None, f"cannot read the models registry: {error}") from error
    return parse_models_registry(text, path)


RegistryFiles = Path | Sequence[Path]
"""One registry file, or several read in order (the packaged one, then the user's `OABENCH_MODELS_FILE`)."""


def _as_files(files: RegistryFiles) -> list[Path]:
    return [files] if isinstance(files, Path) else list(files)


def load_registries(files: RegistryFiles) -> list[ModelConfig]:
    """The hand-written registries as one: every file's entries, where an entry replaces the entry of an
    earlier file with the same key, in its place (the user's file overrides a packaged model)."""
    merged: dict[str, ModelConfig] = {}
    for path in _as_files(files):
        for model in load_models_registry(path):
            merged[model.key] = model  # a dict keeps the first file's position of a replaced key
    return list(merged.values())


def overridden_keys(files: RegistryFiles) -> dict[str, Path]:
    """Key → the later file whose entry replaces an earlier file's entry of the same key."""
    seen: set[str] = set()
    overrides: dict[str, Path] = {}
    for path in _as_files(files):
        keys = {m.key for m in load_models_registry(path)}
        overrides.update((key, path) for key in keys & seen)
        seen |= keys
    return overrides


def known_models(models_files: RegistryFiles, catalogue_file: Path | None = None) -> list[ModelConfig]:
    """The models registry (`load_registries`), plus the entries the catalogue sensor registered (a
    hand-written key wins).

    Every file is validated: a mistake in any names its file, line and field.
    """
    models = load_registries(models_files)
    if catalogue_file is None or not catalogue_file.is_file():
        return models
    hand_written = {m.key for m in models}
    return models + [m for m in load_models_registry(catalogue_file) if m.key not in hand_written]


def automatic_models(models_files: RegistryFiles, catalogue_file: Path | None) -> list[ModelConfig]:
    """The catalogue sensor's entries whose key no hand-written entry takes: the runs the watch policy
    pays for (and holds to its budgets)."""
    if catalogue_file is None or not catalogue_file.is_file():
        return []
    hand_written = {m.key for m in load_registries(models_files)}
    return [m for m in load_models_registry(catalogue_file) if m.key not in hand_written]
