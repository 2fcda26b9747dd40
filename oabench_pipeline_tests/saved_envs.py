"""Pipeline environments built once per test module and put back, at the same path, for each test.

A test module whose tests all start from the same built state (editions ingested, a cell run, runs
imported) builds it once in a module-scoped fixture and snapshots the whole root (`EnvSnapshot`: the
warehouse, `DAGSTER_HOME` and the registry files, restored at the same path). What this module adds: the
environment variables a test gets back with its own `monkeypatch`, and the fixtures that build one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oabench_pipeline_tests.automation.snapshot import EnvSnapshot
from oabench_pipeline_tests.pipeline_env import PipelineEnv, copy_ingested, make_env
from oabench_pipeline_tests.servers.static_files import StaticFileServer


@dataclass
class SavedEnv:
    """A built environment's snapshot; `restore` puts it back for one test, variables included."""

    snapshot: EnvSnapshot
    source_base_url: str
    variables: dict[str, str] = field(default_factory=dict)  # set beyond `make_env`'s, e.g. a registry

    def restore(self, monkeypatch: pytest.MonkeyPatch) -> PipelineEnv:
        """The saved root back in place, and the environment variables set with the test's `monkeypatch`."""
        self.snapshot.restore()
        env = make_env(self.snapshot.root, monkeypatch, self.source_base_url)
        for name, value in self.variables.items():
            env.set(name, value)
        return env


@contextmanager
def building_env(
    tmp_path_factory: pytest.TempPathFactory, name: str, ingested_template: Path, source_base_url: str
) -> Iterator[PipelineEnv]:
    """An environment holding the ingested editions, to build on inside a module fixture.

    Its variables live only inside the `with`: record the ones a test needs in `SavedEnv.variables`.
    """
    root = tmp_path_factory.mktemp(name) / "env"
    with pytest.MonkeyPatch.context() as monkeypatch:
        env = make_env(root, monkeypatch, source_base_url)
        copy_ingested(ingested_template, env.settings.warehouse_path.parent)
        yield env


def save_env(env: PipelineEnv, *variables: str) -> SavedEnv:
    """Copy `env`'s root beside it; `variables` names the environment variables each test gets back."""
    snapshot = EnvSnapshot.take(env.root, env.root.parent / "saved")
    base_url = os.environ["OABENCH_SOURCE_BASE_URL"]
    return SavedEnv(snapshot, base_url, {name: os.environ[name] for name in variables})


def save_ingested_env(
    tmp_path_factory: pytest.TempPathFactory, name: str, ingested_template: Path, source_base_url: str
) -> SavedEnv:
    """The ingested editions with a Dagster instance already created in `DAGSTER_HOME`.

    What `fresh_env` gives, minus the instance's creation (its SQLite schema: ~0.25 s of CPU), which a
    test would otherwise pay on its first Dagster run.
    """
    from oabench_pipeline.engine.runs import instance_for

    with building_env(tmp_path_factory, name, ingested_template, source_base_url) as env:
        with instance_for(env.settings):
            pass
        return save_env(env)


def fresh_env_with_instance_per_module(
    name: str,
) -> tuple[Callable[..., SavedEnv], Callable[..., PipelineEnv]]:
    """Fixtures for a test module: `ingested_with_instance` (module scope) and a `fresh_env` that overrides
    the suite's with a restored copy of it: the same contract (the ingested editions, private to the test),
    the instance created once per module instead of once per test.

    Usage, at a test module's top level: `ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("x")`.
    """

    @pytest.fixture(scope="module", name="ingested_with_instance")
    def saved(
        tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server: StaticFileServer
    ) -> SavedEnv:
        return save_ingested_env(tmp_path_factory, name, ingested_template, mirror_server.base_url)

    @pytest.fixture(name="fresh_env")
    def restored(ingested_with_instance: SavedEnv, monkeypatch: pytest.MonkeyPatch) -> PipelineEnv:
        return ingested_with_instance.restore(monkeypatch)

    return saved, restored
