"""The model catalogue's resource: where the catalogue is listed, and how long a fetch may take."""

from __future__ import annotations

from dagster import ConfigurableResource

from oabench_pipeline.settings import DEFAULT_CATALOGUE_URL


class ModelCatalogueResource(ConfigurableResource):
    """The model catalogue snapshotted by `model_catalogue` (`OABENCH_CATALOGUE_URL`, OpenRouter's by default)."""

    url: str = DEFAULT_CATALOGUE_URL
    timeout_s: float = 30.0

    def models_url_of(self, base_url: str) -> bool:
        """Whether `{base_url}/models` is this catalogue: its prices are then the catalogue's."""
        return base_url.rstrip("/") + "/models" == self.url.rstrip("/")
