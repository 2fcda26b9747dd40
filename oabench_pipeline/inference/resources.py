"""Resources of the inference domain: the models registry and the model client's settings."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dagster import ConfigurableResource, EnvVar

from oabench_pipeline.core.models_registry import (
    ModelConfig,
    automatic_models,
    known_models,
    load_registries,
)
from oabench_pipeline.core.watch_policy import WatchPolicy, load_watch_policy
from oabench_pipeline.inference.types import EndpointConfig


class UnknownModelError(KeyError):
    pass


class MissingApiKeyError(RuntimeError):
    pass


class ModelsRegistryResource(ConfigurableResource):
    """The models registry users edit (`registry/models.toml`, plus `OABENCH_MODELS_FILE`), plus the entries
    the catalogue sensor generated (`catalogue_file`; a hand-written key wins) and the watch policy their
    runs are held to (`watch_file`, absent: none). `autorun_max_cost_usd` (`OABENCH_AUTORUN_MAX_COST_USD`)
    is the opt-in to automatic runs of hand-written API models (new ones, and all on a new portal edition):
    None, the default, runs none."""

    path: str
    catalogue_file: str | None = None
    watch_file: str | None = None
    autorun_max_cost_usd: float | None = None
    packaged_path: str | None = None
    """The packaged registry `path` adds its entries to (None: `path` is the whole registry)."""

    def files(self) -> list[Path]:
        """The hand-written registry files, in the order they are read (a later entry wins)."""
        return [Path(p) for p in (self.packaged_path, self.path) if p]

    def models(self) -> dict[str, ModelConfig]:
        return {m.key: m for m in known_models(self.files(), self._catalogue_path())}

    def hand_written(self) -> dict[str, ModelConfig]:
        """The registry files alone: what a person wrote (the registry sensor runs these)."""
        return {m.key: m for m in load_registries(self.files())}

    def automatic(self) -> dict[str, ModelConfig]:
        """The generated entries no hand-written entry overrides: runs the watch policy pays for."""
        return {m.key: m for m in automatic_models(self.files(), self._catalogue_path())}

    def watch_policy(self) -> WatchPolicy | None:
        """The watch policy (None: no file); raises `WatchPolicyError` (file:line) when it is bad."""
        return load_watch_policy(Path(self.watch_file)) if self.watch_file else None

    def _catalogue_path(self) -> Path | None:
        return Path(self.catalogue_file) if self.catalogue_file else None

    def model(self, key: str) -> ModelConfig:
        models = self.models()
        if key not in models:
            raise UnknownModelError(
                f"model key {key!r} is not in the models registry {self.path}; known keys: {', '.join(models)}"
            )
        return models[key]


class ModelClientResource(ConfigurableResource):
    """How patient the client is with endpoints. API keys are read from the environment at call time.

    Defaults are the client's own (`EndpointConfig`), so there is one place that sets them.
    """

    timeout_s: float = EndpointConfig.timeout_s
    connect_timeout_s: float = EndpointConfig.connect_timeout_s
    max_retries: int = EndpointConfig.max_retries
    max_malformed_retries: int = EndpointConfig.max_malformed_retries
    backoff_base_s: float = EndpointConfig.backoff_base_s
    backoff_max_s: float = EndpointConfig.backoff_max_s

    def endpoint(self, model: ModelConfig, registry: Iterable[ModelConfig] = ()) -> EndpointConfig:
        """The model's endpoint; `registry` (all models) sizes the connection pool shared on its base_url."""
        if model.base_url is None:
            raise ValueError(f"model {model.key!r} has no base_url")
        static, secret = extra_headers_for(model)
        return EndpointConfig(
            base_url=model.base_url,
            api_key=api_key_for(model),
            api_key_header=model.api_key_header,
            extra_headers=static,
            secret_headers=secret,
            max_connections=connections_for(model, registry),
            timeout_s=self.timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            max_retries=self.max_retries,
            max_malformed_retries=self.max_malformed_retries,
            backoff_base_s=self.backoff_base_s,
            backoff_max_s=self.backoff_max_s,
        )


def api_key_for(model: ModelConfig) -> str | None:
    """The model's API key from its environment variable (None for keyless local servers)."""
    if model.api_key_env is None:
        return None
    value = EnvVar(model.api_key_env).get_value()
    if not value:
        raise MissingApiKeyError(
            f"model {model.key!r} needs an API key in the environment variable {model.api_key_env}, which is not set"
        )
    return value


def extra_headers_for(model: ModelConfig) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(static headers, secret headers): `{ env = "VAR" }` values are read now and kept apart as secrets."""
    static: list[tuple[str, str]] = []
    secret: list[tuple[str, str]] = []
    for name, value in model.extra_headers.items():
        if isinstance(value, str):
            static.append((name, value))
            continue
        read = EnvVar(value.env).get_value()
        if not read:
            raise MissingApiKeyError(
                f"model {model.key!r} sends header {name!r} from the environment variable {value.env}, "
                "which is not set"
            )
        secret.append((name, read))
    return tuple(static), tuple(secret)


def connections_for(model: ModelConfig, registry: Iterable[ModelConfig]) -> int:
    """Pool size of the model's endpoint: the sum of `concurrency` of the models sharing its base_url."""
    sharing = sum(m.concurrency for m in registry if m.base_url == model.base_url and m.key != model.key)
    return model.concurrency + sharing
