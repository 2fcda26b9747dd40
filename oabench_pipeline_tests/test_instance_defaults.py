"""A fresh instance has working run limits: the `model_calls` pool and the run queue are bounded.

The instance `oabench` creates (in `<warehouse folder>/dagster_home`) and the repository's `dagster.yaml`
(read by `dagster dev` from the repo root) carry the same limits, and Dagster reads them as intended.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dagster._core.instance.config import PoolGranularity

from oabench_pipeline.runner import instance_for
from oabench_pipeline.settings import Settings

REPO_YAML = Path(__file__).resolve().parent.parent / "dagster.yaml"


def test_a_new_instance_bounds_model_calls_and_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = Settings.from_env()
    with instance_for(settings) as instance:
        config = instance.get_concurrency_config()
        assert config.pool_config.default_pool_limit == 12
        assert config.pool_config.pool_granularity == PoolGranularity.RUN
        assert config.run_queue_config is not None
        assert config.run_queue_config.max_concurrent_runs == 16
        # The limit applies to the pool the inference step declares, on this instance's storage.
        assert instance.event_log_storage.supports_global_concurrency_limits
        storage = instance.event_log_storage
        assert storage.initialize_concurrency_limit_to_default("model_calls")
        assert storage.get_concurrency_info("model_calls").slot_count == 12


def test_the_repository_dagster_yaml_has_the_same_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with instance_for(Settings.from_env()):
        pass
    written = yaml.safe_load((tmp_path / "warehouse" / "dagster_home" / "dagster.yaml").read_text())
    repo = yaml.safe_load(REPO_YAML.read_text())
    assert repo["concurrency"] == written["concurrency"]
