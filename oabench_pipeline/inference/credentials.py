"""Which models can be called right now: is their API key variable set? (No Dagster, no secret read.)"""

from __future__ import annotations

from oabench_pipeline.core.models_registry import ModelConfig
from oabench_pipeline.settings import environment_value


def credentials_problem(model: ModelConfig) -> str | None:
    """Why this model cannot be called right now (for `oabench run` to skip it), or None."""
    if model.kind != "api":
        return None
    if model.api_key_env is not None and not environment_value(model.api_key_env):
        return f"{model.api_key_env} is not set"
    for name, value in model.extra_headers.items():
        if not isinstance(value, str) and not environment_value(value.env):
            return f"{value.env} (header {name}) is not set"
    return None
