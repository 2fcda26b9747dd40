"""Where things live, read from the environment in exactly one place.

| variable                 | default                                   | meaning                               |
|--------------------------|-------------------------------------------|---------------------------------------|
| OABENCH_WAREHOUSE        | warehouse/oabench.duckdb (from the cwd)   | the DuckDB catalogue; tables beside it |
| OABENCH_RAW_DIR          | <warehouse folder>/raw                    | content-addressed store of PDFs        |
| OABENCH_SOURCE_BASE_URL  | (unset: the official hosts)               | mirror replacing scheme+host of URLs   |
| OABENCH_EDITIONS_FILE    | the packaged registry/editions.toml       | editions registry                      |
| OABENCH_MODELS_FILE      | the packaged registry/models.toml         | models registry                        |
| OABENCH_AUTOMATION       | on                                        | `off`: downstream_automation starts STOPPED |
| OABENCH_MODEL_TIMEOUT_S  | 120                                       | overall deadline of one model request  |
| OABENCH_DOWNLOAD_TIMEOUT_S | 300                                     | overall deadline of one PDF download   |
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from oabench_pipeline.automation.discovery import portal_base_url
from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, REGISTRY_DIR

DEFAULT_WAREHOUSE = Path("warehouse") / "oabench.duckdb"
DEFAULT_MODELS_FILE = REGISTRY_DIR / "models.toml"
OFF_VALUES = frozenset({"off", "0", "false", "no"})


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
    # False (`OABENCH_AUTOMATION=off`): the downstream_automation sensor starts STOPPED (automation/downstream.py).
    automation: bool = True

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
        warehouse = Path(os.environ.get("OABENCH_WAREHOUSE") or DEFAULT_WAREHOUSE).resolve()
        raw_dir = Path(os.environ.get("OABENCH_RAW_DIR") or warehouse.parent / "raw").resolve()
        return cls(
            warehouse_path=warehouse,
            raw_dir=raw_dir,
            source_base_url=os.environ.get("OABENCH_SOURCE_BASE_URL") or None,
            editions_file=Path(os.environ.get("OABENCH_EDITIONS_FILE") or DEFAULT_EDITIONS_FILE).resolve(),
            models_file=Path(os.environ.get("OABENCH_MODELS_FILE") or DEFAULT_MODELS_FILE).resolve(),
            portal_url=portal_base_url(os.environ),
            model_timeout_s=float(os.environ.get("OABENCH_MODEL_TIMEOUT_S") or 120.0),
            download_timeout_s=float(os.environ.get("OABENCH_DOWNLOAD_TIMEOUT_S") or 300.0),
            automation=(os.environ.get("OABENCH_AUTOMATION") or "on").strip().lower() not in OFF_VALUES,
        )
