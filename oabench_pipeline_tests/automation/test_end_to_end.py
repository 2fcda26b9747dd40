"""The automation end to end, with no one at the keyboard: sensor ticks, the runs they request, the runs
the automation conditions request, all executed in-process against one persistent instance.

(a) The loopback portal starts listing a 46th edition: one portal tick registers it and requests its
    ingest, the next tick requests the baselines' cells, the conditions request their scores and then
    the leaderboard. Counting materializations in the event log proves only edition 46 was computed.
(b) A model configuration is added to the registry: the registry sensor requests only its cells.

The warehouse starts with the real editions 43-45 ingested and the baselines already run on 43.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
    DagsterInstance,
    Definitions,
    RunRequest,
    SensorResult,
    build_sensor_context,
    evaluate_automation_conditions,
)
from dagster._core.definitions.asset_daemon_cursor import AssetDaemonCursor

from oabench_pipeline.automation.sensors import models_registry_sensor, oab_portal_sensor
from oabench_pipeline.cli.common import REPORT_ASSETS
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.definitions import build_definitions, build_resources
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.automation.portal_fixture import PortalFixture
from oabench_pipeline_tests.automation.snapshot import EnvSnapshot
from oabench_pipeline_tests.automation.ticks import dynamic_partitions_read_once
from oabench_pipeline_tests.pipeline_env import PipelineEnv, copy_ingested, make_env, write_models_file
from oabench_pipeline_tests.servers.static_files import StaticFileServer

# Slow: a portal, a registry and the daemon's ticks through whole runs.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

BASELINES = ["baseline/longest-choice", "baseline/random"]
NEW_KEY = "baseline/random:second"
INGEST = ["exam_pdfs", "answer_keys", "questions"]
MODELS_FILE = "models.toml"


def materializations(instance: DagsterInstance, asset: str) -> Counter[str | None]:
    """How many times each partition of `asset` was materialized, from the instance's event log."""
    records = instance.fetch_materializations(AssetKey(asset), limit=10_000).records
    return Counter(r.partition_key for r in records)


def cell(model: str, edition: int) -> str:
    return str(cell_partition_key(model, edition))


@dataclass
class World:
    """The real Definitions over a tmp warehouse, the loopback portal and a persistent instance."""

    env: PipelineEnv
    settings: Settings
    defs: Definitions
    instance: DagsterInstance
    cursors: dict[str, str | None] = field(default_factory=dict)
    conditions_cursor: AssetDaemonCursor | None = None

    def tick(self, sensor) -> SensorResult:
        """One sensor tick, its partition requests applied the way the sensor daemon applies them."""
        context = build_sensor_context(
            instance=self.instance,
            cursor=self.cursors.get(sensor.name),
            resources=build_resources(self.settings),
            definitions=self.defs,
        )
        result = sensor(context)
        assert isinstance(result, SensorResult)
        self.cursors[sensor.name] = result.cursor
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return result

    def launch(self, requests: list[RunRequest]) -> None:
        """Run each request's job on its partition, in-process, as the run launcher would."""
        for request in requests:
            assert request.job_name is not None
            job = self.defs.resolve_job_def(request.job_name)
            partition = str(request.partition_key) if request.partition_key is not None else None
            assert job.execute_in_process(partition_key=partition, instance=self.instance).success

    def automation(self) -> dict[str, set[str | None]]:
        """One evaluation of the automation conditions (what `downstream_automation` would request)."""
        with dynamic_partitions_read_once(self.instance):
            result = evaluate_automation_conditions(
                defs=self.defs, instance=self.instance, cursor=self.conditions_cursor
            )
        self.conditions_cursor = result.cursor
        keys = ("scores", *REPORT_ASSETS)
        requested = {k: set(result.get_requested_partitions(AssetKey(k))) for k in keys}
        return {k: v for k, v in requested.items() if v}

    def launch_automation(self, requested: dict[str, set[str | None]]) -> None:
        """Materialize what the conditions requested: scores per cell, then the unpartitioned tables."""
        for partition in sorted(requested.get("scores", set()), key=str):
            assert run_assets(self.defs, self.instance, ["scores"], partition_key=partition).success
        tables = [k for k in REPORT_ASSETS if k in requested]
        if tables:
            assert run_assets(self.defs, self.instance, tables).success


@dataclass(frozen=True)
class WorldTemplate:
    """The world as its setup left it: the root folder saved, the portal, the cursors of that moment."""

    snapshot: EnvSnapshot
    portal: PortalFixture
    cursors: dict[str, str | None]
    conditions_cursor: AssetDaemonCursor | None


@pytest.fixture(scope="module")
def world_template(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server: StaticFileServer
) -> Iterator[WorldTemplate]:
    """Built once per module (an ingest run and three runs of cells and tables), then restored at the same
    path for each test. The portal stays up for the module (tests reset its state): the settings name it."""
    with PortalFixture() as portal:
        with pytest.MonkeyPatch.context() as monkeypatch:
            env = _world_env(tmp_path_factory.mktemp("world"), monkeypatch, mirror_server, portal)
            copy_ingested(ingested_template, env.settings.warehouse_path.parent)
            write_models_file(env.root / MODELS_FILE, [{"id": key, "kind": "baseline"} for key in BASELINES])
            settings = env.settings
            with instance_for(settings) as instance:
                w = World(env, settings, build_definitions(settings), instance)
                w.tick(models_registry_sensor)  # registers the registry's editions and model keys
                ensure_partitions(instance, "editions", ["43"])
                assert run_assets(w.defs, instance, INGEST, partition_key="43").success
                for model in BASELINES:
                    assert run_assets(
                        w.defs, instance, ["inferences", "scores"], partition_key=cell(model, 43)
                    ).success
                assert run_assets(w.defs, instance, REPORT_ASSETS).success
                assert w.automation() == {}  # the conditions' first evaluation: nothing left to do
        snapshot = EnvSnapshot.take(env.root, tmp_path_factory.mktemp("world_saved") / "root")
        yield WorldTemplate(snapshot, portal, dict(w.cursors), w.conditions_cursor)


@pytest.fixture
def world(
    world_template: WorldTemplate, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> Iterator[World]:
    """The world as its setup left it, private to this test: its files, cursors, portal state, instance."""
    world_template.snapshot.restore()
    portal = world_template.portal
    portal.state, portal.broken_paths, portal.requests = "known", set(), Counter()
    env = _world_env(world_template.snapshot.root, monkeypatch, mirror_server, portal)
    settings = env.settings
    with instance_for(settings) as instance:
        w = World(
            env,
            settings,
            build_definitions(settings),
            instance,
            cursors=dict(world_template.cursors),
            conditions_cursor=world_template.conditions_cursor,
        )
        w.portal = portal  # type: ignore[attr-defined]
        yield w


def _world_env(
    root: Path, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer, portal: PortalFixture
) -> PipelineEnv:
    env = make_env(root, monkeypatch, mirror_server.base_url)
    env.set("OABENCH_MODELS_FILE", root / MODELS_FILE)
    env.set("OABENCH_PORTAL_URL", portal.base_url)
    return env


def test_a_new_edition_on_the_portal_is_ingested_run_scored_and_ranked_alone(world: World) -> None:
    portal: PortalFixture = world.portal  # type: ignore[attr-defined]
    portal.state = "definitive"

    first = world.tick(oab_portal_sensor)
    assert [(r.job_name, r.partition_key) for r in first.run_requests or []] == [
        ("ingest_edition", "46"),
        ("refresh_editions_table", None),
    ]
    world.launch(first.run_requests or [])
    assert "46" in world.env.warehouse.partitions("questions")

    second = world.tick(oab_portal_sensor)
    requests = second.run_requests or []
    assert sorted(str(r.partition_key) for r in requests if r.job_name == "run_inference_cell") == sorted(
        cell(m, 46) for m in BASELINES
    )
    world.launch(requests)

    assert world.automation() == {"scores": {cell(m, 46) for m in BASELINES}}
    world.launch_automation({"scores": {cell(m, 46) for m in BASELINES}})
    requested = world.automation()
    assert requested == {name: {None} for name in REPORT_ASSETS}  # every analysis table and the report
    world.launch_automation(requested)
    assert world.automation() == {}
    assert world.tick(oab_portal_sensor).run_requests == []  # done: nothing more for edition 46

    # The event log: edition 46 computed once, edition 43's cells never again, no other edition touched.
    for asset in ("inferences", "scores"):
        assert materializations(world.instance, asset) == Counter(
            {cell(m, e): 1 for m in BASELINES for e in (43, 46)}
        ), asset
    for asset in INGEST:
        assert materializations(world.instance, asset) == Counter({"43": 1, "46": 1}), asset
    for table in ANALYSIS_TABLES:  # each analysis table is its own asset, rebuilt with the others
        assert materializations(world.instance, table) == Counter({None: 2}), table
    board = world.env.warehouse.read("leaderboard_by_edition")
    assert sorted(set(board["edition"].to_list())) == [43, 46]


def test_a_model_added_to_the_registry_runs_only_its_own_cells(world: World) -> None:
    entries = [{"id": key, "kind": "baseline"} for key in BASELINES]
    entries.append({"id": "baseline/random", "kind": "baseline", "key": NEW_KEY})
    write_models_file(world.settings.models_file, entries)

    result = world.tick(models_registry_sensor)
    cells = [r for r in result.run_requests or [] if r.job_name == "run_inference_cell"]
    # Every registered edition whose questions are in the warehouse (43-45), for the new key only.
    assert sorted(str(r.partition_key) for r in cells) == [cell(NEW_KEY, e) for e in (43, 44, 45)]
    world.launch(result.run_requests or [])

    counts = materializations(world.instance, "inferences")
    assert counts == Counter(
        {**{cell(m, 43): 1 for m in BASELINES}, **{cell(NEW_KEY, e): 1 for e in (43, 44, 45)}}
    )
    # Scores follow for the new cells whose exam partitions are materialized: edition 43 here.
    assert world.automation() == {"scores": {cell(NEW_KEY, 43)}}
    assert world.tick(models_registry_sensor).run_requests == []
