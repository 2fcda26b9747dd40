"""Downstream follows upstream: the automation conditions on scores, leaderboard and leaderboard_report.

The real `Definitions`, a persistent instance and a warehouse holding the real editions: the pipeline is
run with the CLI and in-process materializations, and the conditions are evaluated tick by tick with
`dagster.evaluate_automation_conditions`, exactly what the `downstream_automation` sensor evaluates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    AssetRecordsFilter,
    AssetsDefinition,
    DagsterInstance,
    DefaultSensorStatus,
    Definitions,
)
from dagster._core.definitions.data_version import (
    DATA_VERSION_TAG,
    CachingStaleStatusResolver,
    StaleStatus,
    extract_data_version_from_entry,
)
from dagster._core.loader import LoadingContextForTest

from oabench_pipeline.automation.downstream import DOWNSTREAM_SENSOR_NAME
from oabench_pipeline.cli.common import REPORT_ASSETS
from oabench_pipeline.core.versions import frame_version
from oabench_pipeline.definitions import ASSETS, build_definitions, build_resources
from oabench_pipeline.engine.runs import ensure_partitions, instance_for, run_assets
from oabench_pipeline.inference.freshness import scores_are_current
from oabench_pipeline.settings import Settings
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.automation.snapshot import EnvSnapshot
from oabench_pipeline_tests.automation.ticks import REPORT, SCORES, SITE, TABLES, Ticks
from oabench_pipeline_tests.pipeline_env import PipelineEnv, copy_ingested, make_env, write_models_file
from oabench_pipeline_tests.servers.openai_replay import ReplayServer
from oabench_pipeline_tests.servers.static_files import StaticFileServer

# Slow: automation ticks over a scored warehouse, each after a Dagster run.
# Left out of the default run; `.ci/run` runs it after (`pytest -m slow`).
pytestmark = pytest.mark.slow

BASELINES = ["baseline/longest-choice", "baseline/random"]
API_MODEL = "test/model"
MODELS = [*BASELINES, API_MODEL]
MODELS_FILE = "models.toml"
REPLICATES_2 = {"ops": {"inferences": {"config": {"replicates": 2}}}}
INGEST = ["exam_pdfs", "answer_keys", "questions"]


@pytest.fixture(scope="module")
def scored_snapshot(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server: StaticFileServer
) -> Iterator[EnvSnapshot]:
    """Editions 43 and 44 ingested, then both baselines and a model on a loopback endpoint run, scored and
    ranked by `oabench run`: built once per module (three Dagster/CLI runs over six cells), then restored
    at the same path for each test. The endpoint stays up for the module: the models file names it."""
    with ReplayServer() as server:
        with pytest.MonkeyPatch.context() as monkeypatch:
            env = make_env(tmp_path_factory.mktemp("scored"), monkeypatch, mirror_server.base_url)
            copy_ingested(ingested_template, env.settings.warehouse_path.parent)
            entries: list[dict] = [{"id": key, "kind": "baseline"} for key in BASELINES]
            entries.append({"id": API_MODEL, "base_url": server.base_url, "api_key_env": ""})
            env.set("OABENCH_MODELS_FILE", write_models_file(env.root / MODELS_FILE, entries))
            settings = env.settings
            with instance_for(settings) as instance:
                defs = build_definitions(settings)
                ensure_partitions(instance, "editions", ["43", "44"])
                for edition in ("43", "44"):  # the instance must know the exam partitions as materialized
                    assert run_assets(defs, instance, INGEST, partition_key=edition).success
                result = env.cli("run", "--editions", "43,44")
                assert result.exit_code == 0, result.output
        snapshot = EnvSnapshot.take(env.root, tmp_path_factory.mktemp("scored_saved") / "root")
        yield snapshot


@pytest.fixture
def scored_env(
    scored_snapshot: EnvSnapshot, monkeypatch: pytest.MonkeyPatch, mirror_server: StaticFileServer
) -> Iterator[tuple[PipelineEnv, Definitions, DagsterInstance]]:
    """The scored environment as `oabench run` left it, private to this test, with its own instance."""
    scored_snapshot.restore()
    env = make_env(scored_snapshot.root, monkeypatch, mirror_server.base_url)
    env.set("OABENCH_MODELS_FILE", scored_snapshot.root / MODELS_FILE)
    settings = env.settings
    with instance_for(settings) as instance:
        yield env, build_definitions(settings), instance


def test_changed_inputs_rescore_only_their_cells_then_rebuild_the_leaderboard(scored_env) -> None:
    _, defs, instance = scored_env
    ticks = Ticks(defs, instance)
    assert ticks.tick() == {}  # first evaluation: everything was just built by `oabench run`; no site yet
    assert run_assets(defs, instance, ["leaderboard_site"]).success  # the site once built, it follows
    assert ticks.tick() == {}

    # A second replicate of one cell (new answers, from the loopback endpoint) changes that cell's rows.
    cell = str(cell_partition_key(API_MODEL, 44))
    assert run_assets(defs, instance, ["inferences"], partition_key=cell, run_config=REPLICATES_2).success
    assert ticks.tick() == {SCORES: {cell}}  # that cell only: not the other model, not edition 43
    assert ticks.tick() == {}  # requested once (the sensor would have launched the run by now)

    assert run_assets(defs, instance, ["scores"], partition_key=cell).success
    # One rebuild of every analysis table (one step), the report and the site with it.
    assert ticks.tick() == {**{table: {None} for table in TABLES}, REPORT: {None}, SITE: {None}}
    assert run_assets(defs, instance, [*REPORT_ASSETS, "leaderboard_site"]).success
    assert ticks.tick() == {}


def test_rebuilds_with_identical_data_rerun_nothing_downstream(scored_env) -> None:
    env, defs, instance = scored_env
    ticks = Ticks(defs, instance)
    assert ticks.tick() == {}

    # A forced re-ingest parses the same PDFs into the same rows: same data versions, nothing to re-score.
    for edition in ("43", "44"):
        assert run_assets(defs, instance, INGEST, partition_key=edition).success
    # A rerun of a complete cell sends nothing and rebuilds the same answers (a baseline's with new times).
    cell = str(cell_partition_key("baseline/random", 44))
    for rerun in (cell, str(cell_partition_key(API_MODEL, 43))):
        assert run_assets(defs, instance, ["inferences"], partition_key=rerun).success
    assert ticks.tick() == {}
    # A forced re-score that changes no row leaves the tables as they are.
    assert run_assets(defs, instance, ["scores"], partition_key=cell).success
    assert ticks.tick() == {}
    assert ticks.tick() == {}
    # The UI's staleness reads the same versions: the cell's scores are up to date.
    assert _staleness(defs, instance, SCORES, cell) == StaleStatus.FRESH

    versions = _data_versions(instance, SCORES, cell)
    assert len(versions) == 2 and len(set(versions)) == 1  # `oabench run`'s, then the forced re-score's
    versions = _data_versions(instance, AssetKey("inferences"), cell)
    assert len(versions) == 2 and len(set(versions)) == 1 and None not in versions
    # `oabench status` asks the same question of the same versions: the re-ingest staled nothing.
    status = env.cli("status", "--editions", "43,44", "--format", "json")
    assert status.exit_code == 0, status.output


def test_a_changed_question_stales_and_rescores_exactly_its_edition(scored_env) -> None:
    """A re-parse that changes a row of edition 44's questions: the automation re-scores 44's cells, and
    `oabench status` calls the same cells stale (their answers were to the old question), 43's complete."""
    env, defs, instance = scored_env
    ticks = Ticks(defs, instance)
    assert ticks.tick() == {}
    store = env.warehouse
    questions = store.read("questions", "44")
    changed = questions.with_columns(
        stem=pl.when(pl.col("number") == 1).then(pl.col("stem") + " (revisto)").otherwise(pl.col("stem"))
    )
    version = frame_version(changed)
    # As the `questions` step writes and reports a re-parse (exams/assets.py), from outside a run.
    store.write_partition(
        "questions", changed, "44", data_version=version, inputs=store.recorded_inputs("questions", "44")
    )
    instance.report_runless_asset_event(
        AssetMaterialization("questions", partition="44", tags={DATA_VERSION_TAG: version})
    )
    cells = {str(cell_partition_key(model, 44)) for model in MODELS}
    assert ticks.tick() == {SCORES: cells}

    status = env.cli("status", "--editions", "43,44", "--format", "json")
    assert status.exit_code == 1
    states = {(c["edition"], c["model_key"]): c for c in json.loads(status.output)["cells"]}
    assert {key: c["state"] for key, c in states.items()} == {
        **{("43", model): "complete" for model in MODELS},
        **{("44", model): "stale" for model in MODELS},
    }
    assert "questions changed since the cell was built" in states[("44", API_MODEL)]["reason"]
    assert "1 request hash(es) differ" in states[("44", API_MODEL)]["reason"]

    for cell in cells:  # what the sensor's run does: the scores then record the new questions
        assert run_assets(defs, instance, ["scores"], partition_key=cell).success
    assert all(scores_are_current(store, model, "44") for model in MODELS)


def test_a_code_version_bump_reruns_the_asset_once(scored_env) -> None:
    env, defs, instance = scored_env
    ticks = Ticks(defs, instance)
    assert ticks.tick() == {}

    # New scoring rules: every scored cell is re-scored once, then nothing more.
    ticks.defs = _with_code_versions(env, scores="scoring-test-bump")
    cells = {str(cell_partition_key(model, edition)) for model in MODELS for edition in (43, 44)}
    assert {_staleness(ticks.defs, instance, SCORES, cell) for cell in cells} == {StaleStatus.STALE}  # the UI
    assert _staleness(defs, instance, SCORES, min(cells)) == StaleStatus.FRESH
    assert ticks.tick() == {SCORES: cells}
    assert ticks.tick() == {}

    # New analysis code: the tables are rebuilt once (one step), the report with them.
    ticks.defs = _with_code_versions(env, scores="scoring-test-bump", leaderboard="analysis-test-bump")
    assert ticks.tick() == {**{table: {None} for table in TABLES}, REPORT: {None}}
    assert ticks.tick() == {}


def _staleness(defs: Definitions, instance: DagsterInstance, key: AssetKey, partition: str) -> StaleStatus:
    """What the UI shows for one partition (the webserver resolves staleness with this same class)."""
    resolver = CachingStaleStatusResolver(
        instance, defs.resolve_asset_graph(), LoadingContextForTest(instance)
    )
    return resolver.get_status(key, partition)


def _data_versions(instance: DagsterInstance, key: AssetKey, partition: str) -> list[str | None]:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=100
    ).records
    return [extract_data_version_from_entry(r.event_log_entry).value for r in records]  # type: ignore[union-attr]


def _with_code_versions(env: PipelineEnv, **versions: str) -> Definitions:
    """The real definitions, with the assets of the steps named (e.g. the twelve tables of `leaderboard`) at
    the code versions given."""
    settings = env.settings
    bumped = [
        a.map_asset_specs(lambda spec, a=a: spec.replace_attributes(code_version=versions[a.node_def.name]))
        if isinstance(a, AssetsDefinition) and a.is_executable and a.node_def.name in versions
        else a
        for a in ASSETS
    ]
    return Definitions(assets=bumped, resources=build_resources(settings))


def test_oabench_automation_off_only_changes_the_default_status(monkeypatch: pytest.MonkeyPatch) -> None:
    def status(value: str | None) -> DefaultSensorStatus:
        if value is None:
            monkeypatch.delenv("OABENCH_AUTOMATION", raising=False)
        else:
            monkeypatch.setenv("OABENCH_AUTOMATION", value)
        sensors = build_definitions(Settings.from_env()).get_repository_def().sensor_defs
        [sensor] = [s for s in sensors if s.name == DOWNSTREAM_SENSOR_NAME]
        return sensor.default_status

    assert status(None) == DefaultSensorStatus.RUNNING
    assert status("off") == DefaultSensorStatus.STOPPED
    # Dagster adds no `default_automation_condition_sensor`: ours covers every asset with a condition.
    repo = build_definitions(Settings.from_env()).get_repository_def()
    assert "default_automation_condition_sensor" not in {s.name for s in repo.sensor_defs}


def test_nothing_is_requested_before_any_cell_is_scored(fresh_env: PipelineEnv) -> None:
    """A fresh `dagster dev`: the sensors ingest editions and build the models table, no cell is scored.
    The analysis tables would fail ("nothing is scored yet"): automation must not launch them."""
    models_file = write_models_file(
        fresh_env.root / "models.toml", [{"id": key, "kind": "baseline"} for key in BASELINES]
    )
    fresh_env.set("OABENCH_MODELS_FILE", models_file)
    settings = fresh_env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        ticks = Ticks(defs, instance)
        assert ticks.tick() == {}  # the sensor's first tick, before anything ran
        ensure_partitions(instance, "editions", ["43"])
        assert run_assets(defs, instance, INGEST, partition_key="43").success
        assert run_assets(defs, instance, ["editions", "models", "model_pricing"]).success
        assert ticks.tick() == {}  # upstream updated, but no scores cell exists: nothing to build
        assert ticks.tick() == {}

        # The first scored cell makes the tables buildable: they are requested then, once.
        ensure_partitions(instance, "model_keys", ["baseline/random"])
        cell = str(cell_partition_key("baseline/random", 43))
        assert run_assets(defs, instance, ["inferences", "scores"], partition_key=cell).success
        assert ticks.tick() == {**{table: {None} for table in TABLES}, REPORT: {None}}
