"""Where things live, read from the environment in exactly one place (pydantic-settings).

| variable                 | default                                   | meaning                               |
|--------------------------|-------------------------------------------|---------------------------------------|
| OABENCH_WAREHOUSE        | warehouse/oabench.duckdb (from the cwd)   | the DuckDB catalogue; tables beside it |
| OABENCH_RAW_DIR          | <warehouse folder>/raw                    | content-addressed store of PDFs        |
| OABENCH_SOURCE_BASE_URL  | (unset: the official hosts)               | mirror replacing scheme+host of URLs   |
| OABENCH_EDITIONS_FILE    | the packaged registry/editions.toml       | editions registry                      |
| OABENCH_MODELS_FILE      | (unset: the packaged models alone)        | your models, added to the packaged ones |
| OABENCH_PACKAGED_MODELS  | on                                        | `off`: OABENCH_MODELS_FILE alone is the registry |
| OABENCH_PORTAL_URL       | https://examedeordem.oab.org.br           | the OAB portal the edition sensor reads |
| OABENCH_CATALOGUE_URL    | https://openrouter.ai/api/v1/models       | the model catalogue (`model_catalogue`) |
| OABENCH_CATALOGUE_TIMEOUT_S | 30                                     | overall deadline of one catalogue fetch |
| OABENCH_WATCH_FILE       | watch.toml (from the cwd; absent: no policy) | the catalogue watch policy          |
| OABENCH_AUTOMATION       | on                                        | `off`: downstream_automation starts STOPPED |
| OABENCH_AUTORUN_MAX_COST_USD | (unset: off)                          | opt-in: API models run by themselves (a new registry model on the default suite, a model on a new portal edition), each within this USD |
| OABENCH_MODEL_TIMEOUT_S  | 120                                       | overall deadline of one model request  |
| OABENCH_DOWNLOAD_TIMEOUT_S | 300                                     | overall deadline of one PDF download   |
| OABENCH_MODEL_BACKOFF_S  | 0.5                                       | first retry's backoff ceiling (doubles) |
| OABENCH_LOG_LEVEL        | CRITICAL (step logs in the instance only) | Dagster console log level of the CLI   |
| DAGSTER_HOME             | <warehouse folder>/dagster_home           | the Dagster instance (engine/runs.py)       |
| DAGSTER_GRPC_TIMEOUT_SECONDS | 300 (Dagster's own default: 60)       | Dagster's calls to its code server (`apply_dagster_defaults`) |

An empty variable counts as unset. A value that cannot be used (`OABENCH_MODEL_TIMEOUT_S=abc`) raises
`SettingsError`, whose message names the variable. API keys and `{ env = "VAR" }` header values are named
by the models registry, not here: `environment_value` reads them, and nothing stores them.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, REGISTRY_DIR

DEFAULT_WAREHOUSE = Path("warehouse") / "oabench.duckdb"
DEFAULT_MODELS_FILE = REGISTRY_DIR / "models.toml"
DEFAULT_PORTAL_URL = "https://examedeordem.oab.org.br"
PORTAL_URL_ENV = "OABENCH_PORTAL_URL"
DEFAULT_CATALOGUE_URL = "https://openrouter.ai/api/v1/models"
DEFAULT_WATCH_FILE = Path("watch.toml")
OFF_VALUES = frozenset({"off", "0", "false", "no"})


class SettingsError(ValueError):
    """An environment variable holds a value that cannot be used; the message names the variable."""


GRPC_TIMEOUT_ENV = "DAGSTER_GRPC_TIMEOUT_SECONDS"
# Dagster's 60 s is too short for a 2-core machine under load: a run's start (a process that imports
# Dagster and the pipeline) took over a minute there, and the command died on the timeout.
DEFAULT_GRPC_TIMEOUT_S = 300


def apply_dagster_defaults(environ: MutableMapping[str, str] = os.environ) -> None:
    """Give Dagster's own `DAGSTER_GRPC_TIMEOUT_SECONDS` (how long a call to a code server may take: a run's
    launch, an execution plan) `oabench`'s default when the user set none; Dagster's code server and the
    processes `oabench` starts inherit it. Dagster reads it once, when it is imported: `cli/__init__.py`
    calls this first. Raises `SettingsError` for a value that is not a whole number of seconds above 0."""
    value = environ.get(GRPC_TIMEOUT_ENV, "").strip()
    if not value:
        environ[GRPC_TIMEOUT_ENV] = str(DEFAULT_GRPC_TIMEOUT_S)
        return
    if not value.isdigit() or int(value) == 0:
        raise SettingsError(f"{GRPC_TIMEOUT_ENV}={value!r}: expected a whole number of seconds above 0")


class _Environment(BaseSettings):
    """The variables as they are set (each field's alias is its variable's name)."""

    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore", frozen=True)

    warehouse: Path = Field(DEFAULT_WAREHOUSE, validation_alias="OABENCH_WAREHOUSE")
    raw_dir: Path | None = Field(None, validation_alias="OABENCH_RAW_DIR")
    source_base_url: str | None = Field(None, validation_alias="OABENCH_SOURCE_BASE_URL")
    editions_file: Path = Field(DEFAULT_EDITIONS_FILE, validation_alias="OABENCH_EDITIONS_FILE")
    models_file: Path = Field(DEFAULT_MODELS_FILE, validation_alias="OABENCH_MODELS_FILE")
    packaged_models: str = Field("on", validation_alias="OABENCH_PACKAGED_MODELS")
    portal_url: str = Field(DEFAULT_PORTAL_URL, validation_alias=PORTAL_URL_ENV)
    catalogue_url: str = Field(DEFAULT_CATALOGUE_URL, validation_alias="OABENCH_CATALOGUE_URL")
    catalogue_timeout_s: float = Field(
        30.0, gt=0, allow_inf_nan=False, validation_alias="OABENCH_CATALOGUE_TIMEOUT_S"
    )
    watch_file: Path = Field(DEFAULT_WATCH_FILE, validation_alias="OABENCH_WATCH_FILE")
    model_timeout_s: float = Field(
        120.0, gt=0, allow_inf_nan=False, validation_alias="OABENCH_MODEL_TIMEOUT_S"
    )
    download_timeout_s: float = Field(
        300.0, gt=0, allow_inf_nan=False, validation_alias="OABENCH_DOWNLOAD_TIMEOUT_S"
    )
    model_backoff_s: float = Field(0.5, ge=0, allow_inf_nan=False, validation_alias="OABENCH_MODEL_BACKOFF_S")
    automation: str = Field("on", validation_alias="OABENCH_AUTOMATION")
    autorun_max_cost_usd: float | None = Field(
        None, gt=0, allow_inf_nan=False, validation_alias="OABENCH_AUTORUN_MAX_COST_USD"
    )
    # Dagster's step logs (stack traces included) stay in the instance: the CLI prints its own one-line
    # messages. DEBUG, INFO or WARNING also print them on stderr.
    log_level: str = Field("CRITICAL", validation_alias="OABENCH_LOG_LEVEL")
    dagster_home: str | None = Field(None, validation_alias="DAGSTER_HOME")


@dataclass(frozen=True)
class Settings:
    warehouse_path: Path
    raw_dir: Path
    source_base_url: str | None
    editions_file: Path
    models_file: Path
    portal_url: str
    # Seconds one model request may take before it is abandoned and retried (ModelClientResource.timeout_s).
    model_timeout_s: float = 120.0
    # Seconds one official PDF may take to download, retries included (ExamSourcesResource).
    download_timeout_s: float = 300.0
    # Ceiling (s) of the model client's first retry backoff, doubling per retry (full jitter; a server's
    # Retry-After still wins). The test suite sets it to milliseconds.
    model_backoff_s: float = 0.5
    # False (`OABENCH_AUTOMATION=off`): the downstream_automation sensor starts STOPPED (automation/downstream.py).
    automation: bool = True
    # Dagster's console log level in `oabench` runs (engine/runs.py, engine/launch.py).
    log_level: str = "CRITICAL"
    # `$DAGSTER_HOME` as set (None: `<warehouse folder>/dagster_home`, engine/runs.instance_for decides).
    dagster_home: str | None = None
    # The model catalogue the `model_catalogue` asset snapshots and its sensor watches (OpenRouter's).
    catalogue_url: str = DEFAULT_CATALOGUE_URL
    # Seconds one catalogue fetch may take in all (connect, headers, body): a tick must not hang.
    catalogue_timeout_s: float = 30.0
    # The owner's watch policy (absent: no policy, the catalogue sensor registers nothing).
    watch_file: Path = DEFAULT_WATCH_FILE
    # The opt-in to automatic runs of registry API models (None: off): each new API model's ceiling in USD
    # on the default suite (`models_registry_sensor`), and each model's on a new edition (`oab_portal_sensor`).
    autorun_max_cost_usd: float | None = None
    # False (`OABENCH_PACKAGED_MODELS=off`): `models_file` alone is the registry, the packaged one left out.
    packaged_models: bool = True

    @property
    def packaged_models_file(self) -> Path | None:
        """The packaged registry that `models_file` (OABENCH_MODELS_FILE) adds its entries to; None when
        `models_file` is that registry itself, or `OABENCH_PACKAGED_MODELS=off` leaves it out."""
        packaged = DEFAULT_MODELS_FILE.resolve()
        return packaged if self.packaged_models and self.models_file != packaged else None

    @property
    def models_files(self) -> tuple[Path, ...]:
        """The hand-written registry files, in the order they are read: an entry of a later one replaces
        an entry of an earlier one with the same key (`known_models`)."""
        return (*filter(None, [self.packaged_models_file]), self.models_file)

    @property
    def catalogue_models_file(self) -> Path:
        """Models the catalogue sensor registered, in the registry's format (beside the warehouse)."""
        return self.warehouse_path.parent / "catalogue_models.toml"

    @property
    def discovered_editions_file(self) -> Path:
        """Editions found on the OAB portal by the sensor, pinned on first download (beside the warehouse)."""
        return self.warehouse_path.parent / "discovered_editions.toml"

    def source_mirror_problem(self) -> str | None:
        """Why OABENCH_SOURCE_BASE_URL, when it names a local folder, cannot serve the PDFs (None: it can).

        A relative folder is read from the working directory: `../shared/oab/mirror` works from a
        repository beside `shared/`, not from a clone elsewhere, and would otherwise fail file by file.
        """
        base = self.source_base_url
        if not base or ("://" in base and not base.startswith("file://")):
            return None  # the official host, or an http(s) mirror: its own errors name the URL
        folder = Path(base.removeprefix("file://"))
        if folder.is_dir():
            return None
        return (
            f"OABENCH_SOURCE_BASE_URL={base}: no such folder ({folder.resolve()}, read from {Path.cwd()}); "
            "point it at the mirror folder (e.g. ../shared/oab/mirror from a repository beside shared/), an "
            "http(s) URL, or unset it to download from the official host"
        )

    @classmethod
    def from_env(cls) -> Settings:
        try:
            env = _Environment()
        except ValidationError as error:
            raise SettingsError(_explain(error)) from None
        warehouse = env.warehouse.resolve()
        return cls(
            warehouse_path=warehouse,
            raw_dir=(env.raw_dir or warehouse.parent / "raw").resolve(),
            source_base_url=env.source_base_url,
            editions_file=env.editions_file.resolve(),
            models_file=env.models_file.expanduser().resolve(),  # relative: from the working directory
            packaged_models=env.packaged_models.strip().lower() not in OFF_VALUES,
            portal_url=env.portal_url.strip() or DEFAULT_PORTAL_URL,
            model_timeout_s=env.model_timeout_s,
            download_timeout_s=env.download_timeout_s,
            model_backoff_s=env.model_backoff_s,
            automation=env.automation.strip().lower() not in OFF_VALUES,
            log_level=env.log_level.strip().upper(),
            dagster_home=env.dagster_home,
            catalogue_url=_catalogue_url(env.catalogue_url),
            catalogue_timeout_s=env.catalogue_timeout_s,
            watch_file=env.watch_file.resolve(),
            autorun_max_cost_usd=env.autorun_max_cost_usd,
        )


def _catalogue_url(url: str) -> str:
    """The catalogue URL as given, refused (naming the variable) unless it is an http(s) URL."""
    url = url.strip() or DEFAULT_CATALOGUE_URL
    if not url.startswith(("http://", "https://")) or any(ch.isspace() for ch in url):
        raise SettingsError(
            f"environment variable OABENCH_CATALOGUE_URL={url!r}: must be an http:// or https:// URL "
            f"(default {DEFAULT_CATALOGUE_URL})"
        )
    return url


def environment_value(name: str) -> str | None:
    """The value of a variable the models registry names (an API key, a header's `{ env = ... }`), or None.

    Read at the moment it is needed and never kept: these are secrets.
    """
    return os.environ.get(name) or None


def _explain(error: ValidationError) -> str:
    problems = []
    for problem in error.errors():
        name = ".".join(str(part) for part in problem["loc"])
        problems.append(f"environment variable {name}={problem.get('input')!r}: {problem['msg']}")
    return "; ".join(problems)
