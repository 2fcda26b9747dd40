"""A fresh instance has working run limits: the `model_calls` pool and the run queue are bounded.

The instance `oabench` creates (in `<warehouse folder>/dagster_home`) and the repository's `dagster.yaml`
(read by `dagster dev` from the repo root) carry the same limits, and Dagster reads them as intended.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dagster import DagsterRunStatus, job, op
from dagster._core.instance.config import PoolGranularity
from dagster._core.run_coordinator import SubmitRunContext

from oabench_pipeline.automation.run_coordinator import EndpointTaggingRunCoordinator
from oabench_pipeline.engine.runs import INSTANCE_SETTINGS_YAML, instance_for
from oabench_pipeline.settings import Settings
from oabench_pipeline_tests.pipeline_env import write_models_file

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
        # Run monitoring: the daemon ends runs stuck starting or canceling (a killed process's).
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 180
        assert instance.run_monitoring_cancel_timeout_seconds == 60
        assert instance.run_monitoring_max_resume_run_attempts == 0


def test_the_repository_dagster_yaml_has_the_same_limits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with instance_for(Settings.from_env()):
        pass
    written_text = (tmp_path / "warehouse" / "dagster_home" / "dagster.yaml").read_text()
    repo_text = REPO_YAML.read_text()
    # One source: the settings are one text, which both files carry whole (the repository's after its
    # storage paths); a setting changed in one file only fails here.
    assert written_text.endswith(INSTANCE_SETTINGS_YAML)
    assert repo_text.endswith(INSTANCE_SETTINGS_YAML), "copy INSTANCE_SETTINGS_YAML into dagster.yaml"
    written, repo = yaml.safe_load(written_text), yaml.safe_load(repo_text)
    storage_paths = {"storage", "local_artifact_storage", "compute_logs"}
    assert {key: value for key, value in repo.items() if key not in storage_paths} == written


@op
def _noop() -> None:
    return None


@job
def _cell_like() -> None:
    _noop()


def test_a_run_queued_with_only_dagster_tags_gets_its_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a UI backfill queues: a run carrying Dagster's partition tags and nothing else. The instance's
    run coordinator adds `oabench/endpoint` before the daemon applies the tag limits; a tag already set
    (by `oabench run` or a sensor) is kept, and a run that is not a cell gets none."""
    models = write_models_file(
        tmp_path / "models.toml",
        [
            {"id": "acme/m", "base_url": "http://models.example:8080/v1", "api_key_env": ""},
            {"id": "baseline/random", "kind": "baseline"},
        ],
    )
    monkeypatch.setenv("OABENCH_MODELS_FILE", str(models))
    monkeypatch.setenv("OABENCH_WAREHOUSE", str(tmp_path / "warehouse" / "oabench.duckdb"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with instance_for(Settings.from_env()) as instance:
        assert isinstance(instance.run_coordinator, EndpointTaggingRunCoordinator)

        def queued_tags(tags: dict[str, str]) -> dict[str, str]:
            # Already past the queue: the coordinator tags it, then Dagster's enqueue (which needs a code location
            # origin this job has not) is the no-op it is for a run submitted twice.
            run = instance.create_run_for_job(_cell_like, tags=tags, status=DagsterRunStatus.STARTING)
            instance.run_coordinator.submit_run(SubmitRunContext(run, workspace=None))  # type: ignore[arg-type]
            stored = instance.get_run_by_id(run.run_id)
            assert stored is not None
            return dict(stored.tags)

        cell = {"dagster/partition/model": "acme/m", "dagster/partition/edition": "44"}
        assert queued_tags(cell)["oabench/endpoint"] == "models.example:8080"
        baseline = {"dagster/partition/model": "baseline/random"}
        assert queued_tags(baseline)["oabench/endpoint"] == "offline"
        assert (
            queued_tags({**cell, "oabench/endpoint": "set-by-the-cli"})["oabench/endpoint"]
            == "set-by-the-cli"
        )
        assert "oabench/endpoint" not in queued_tags({"dagster/partition": "44"})
        assert "oabench/endpoint" not in queued_tags({"dagster/partition/model": "gone/from-registry"})
