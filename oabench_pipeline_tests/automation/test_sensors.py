"""The portal sensor, the models registry sensor and the weekly schedule, evaluated against real resources.

Each test builds the resources over a tmp warehouse, a tmp models registry (baselines plus one API model
whose key variable is unset) and the loopback portal, evaluates one tick with Dagster's test contexts on an
ephemeral instance, and checks the partition requests, the run requests and what was written.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    DagsterInstance,
    Definitions,
    MultiPartitionKey,
    RunRequest,
    SensorResult,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
    instance_for_test,
    materialize,
    partition_loading_context,
    validate_run_config,
)

from oabench_pipeline.automation.jobs import inference_cell_job
from oabench_pipeline.automation.resources import PortalResource
from oabench_pipeline.automation.schedules import weekly_portal_discovery
from oabench_pipeline.automation.sensors import (
    PortalCursor,
    RegistryCursor,
    models_registry_sensor,
    oab_portal_sensor,
)
from oabench_pipeline.core.editions import DEFAULT_EDITIONS_FILE, EditionsRegistryError, load_editions
from oabench_pipeline.exams.assets import answer_keys, editions, exam_pdfs, questions
from oabench_pipeline.exams.resources import ExamSourcesResource
from oabench_pipeline.inference.assets import inferences
from oabench_pipeline.inference.registry_assets import models
from oabench_pipeline.inference.resources import ModelClientResource, ModelsRegistryResource
from oabench_pipeline.shared.resources import WarehouseResource
from oabench_pipeline_tests.automation.portal_fixture import (
    BOOKLET_PATH,
    DEFINITIVE_KEY_PATH,
    PortalFixture,
    new_edition_pdfs,
    sha256_hex,
)
from oabench_pipeline_tests.pipeline_env import copy_ingested

BASELINES = ["baseline/longest-choice", "baseline/random"]
UNSET_KEY_ENV = "OABENCH_TEST_KEY_THAT_IS_NEVER_SET"

REGISTRY_TOML = f"""
[[models]]
id = "baseline/random"
kind = "baseline"

[[models]]
id = "baseline/longest-choice"
kind = "baseline"

[[models]]
id = "openai/gpt-5.2"
api_key_env = "{UNSET_KEY_ENV}"
"""
EXTRA_BASELINE_KEY = "baseline/random:second"
EXTRA_BASELINE = f"""
[[models]]
id = "baseline/random"
kind = "baseline"
key = "{EXTRA_BASELINE_KEY}"
"""


@dataclass
class Env:
    """Resources over tmp files, the loopback portal and an ephemeral instance."""

    tmp: Path
    portal: PortalFixture
    instance: DagsterInstance
    autorun_max_cost_usd: float | None = None  # OABENCH_AUTORUN_MAX_COST_USD: unset, as by default

    @property
    def models_file(self) -> Path:
        return self.tmp / "models.toml"

    @property
    def discovered_file(self) -> Path:
        return self.tmp / "warehouse" / "discovered_editions.toml"

    @property
    def raw_dir(self) -> Path:
        return self.tmp / "warehouse" / "raw"

    def resources(self) -> dict[str, object]:
        return {
            "warehouse": WarehouseResource(
                path=str(self.tmp / "warehouse" / "oabench.duckdb"), raw_dir=str(self.raw_dir)
            ),
            "exam_sources": ExamSourcesResource(
                editions_file=str(DEFAULT_EDITIONS_FILE),
                discovered_file=str(self.discovered_file),
                source_base_url=None,
            ),
            "models_registry": ModelsRegistryResource(
                path=str(self.models_file), autorun_max_cost_usd=self.autorun_max_cost_usd
            ),
            "model_client": ModelClientResource(),
            "portal": PortalResource(
                base_url=self.portal.base_url, connect_timeout_s=2.0, read_timeout_s=5.0
            ),
        }

    def definitions(self) -> Definitions:
        # The real assets: resolving these definitions validates each sensor's target selection.
        return Definitions(
            assets=[editions, exam_pdfs, answer_keys, questions, models, inferences],
            sensors=[oab_portal_sensor, models_registry_sensor],
            schedules=[weekly_portal_discovery],
            resources=self.resources(),
        )

    def tick(self, sensor, cursor: str | None = None) -> SensorResult:
        context = build_sensor_context(
            instance=self.instance, cursor=cursor, resources=self.resources(), definitions=self.definitions()
        )
        result = sensor(context)
        assert isinstance(result, SensorResult)
        return result

    def resolve(self, sensor, cursor: str | None = None) -> list[RunRequest]:
        """The tick as the daemon sees it: run requests resolved against their target job and partitions."""
        context = build_sensor_context(
            instance=self.instance,
            instance_ref=self.instance.get_ref(),  # the daemon's context has one: partitions load through it
            cursor=cursor,
            resources=self.resources(),
            definitions=self.definitions(),
        )
        with partition_loading_context(dynamic_partitions_store=self.instance):  # as the sensor daemon does
            return list(sensor.evaluate_tick(context).run_requests or [])

    def apply(self, result: SensorResult) -> None:
        """What the sensor daemon does with the partition requests."""
        for request in result.dynamic_partitions_requests or []:
            assert isinstance(request, AddDynamicPartitionsRequest)
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))

    def ingest_questions(self, *edition_keys: str) -> None:
        """Stand in for a finished ingest: the questions partition exists in the warehouse."""
        for key in edition_keys:
            path = self.tmp / "warehouse" / "tables" / "questions" / f"{key}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pl.DataFrame({"qid": [f"oab-{key}-1f-q1"]}).write_parquet(path)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    (tmp_path / "models.toml").write_text(REGISTRY_TOML, encoding="utf-8")
    with PortalFixture() as portal:
        yield Env(tmp_path, portal, DagsterInstance.ephemeral())


@pytest.fixture
def persistent_env(tmp_path: Path) -> Iterator[Env]:
    """Schedule contexts need a persistent instance (they reopen it from its reference)."""
    (tmp_path / "models.toml").write_text(REGISTRY_TOML, encoding="utf-8")
    (tmp_path / "dagster_home").mkdir()
    with PortalFixture() as portal, instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        yield Env(tmp_path, portal, instance)


def added(result: SensorResult) -> dict[str, list[str]]:
    return {
        r.partitions_def_name: sorted(r.partition_keys)
        for r in result.dynamic_partitions_requests or []
        if isinstance(r, AddDynamicPartitionsRequest)
    }


def cells(runs: list[RunRequest]) -> set[tuple[str, str]]:
    found = set()
    for run in runs:
        if run.job_name == "run_inference_cell":
            key = run.partition_key
            assert isinstance(key, MultiPartitionKey)
            found.add((key.keys_by_dimension["edition"], key.keys_by_dimension["model"]))
    return found


def jobs(result: SensorResult) -> list[str | None]:
    return [r.job_name for r in result.run_requests or []]


def skip_text(result: SensorResult) -> str:
    assert not result.run_requests, result.run_requests
    assert isinstance(result.skip_reason, SkipReason)
    return result.skip_reason.skip_message or ""


# --- models_registry_sensor --------------------------------------------------------------------------------


def test_first_tick_registers_registry_models_and_editions(env: Env) -> None:
    result = env.tick(models_registry_sensor)
    registry_editions = sorted(e.partition_key for e in load_editions())  # all 33, 1st to 45th
    assert added(result) == {"editions": registry_editions, "model_keys": [*BASELINES, "openai/gpt-5.2"]}
    # A fresh instance gets the models table, and no cell: there are no questions yet anyway.
    assert jobs(result) == ["refresh_models_table"]
    cursor = RegistryCursor.parse(result.cursor)
    assert cursor is not None and set(cursor.keys) == {*BASELINES, "openai/gpt-5.2"}


def test_a_new_model_gets_its_partition_and_cells_on_ingested_editions(persistent_env: Env) -> None:
    env = persistent_env
    first = env.tick(models_registry_sensor)
    env.apply(first)
    env.ingest_questions("43", "44")  # 45 is registered but not ingested: its cells would fail
    env.models_file.write_text(REGISTRY_TOML + EXTRA_BASELINE, encoding="utf-8")
    result = env.tick(models_registry_sensor, cursor=first.cursor)
    assert added(result) == {"model_keys": [EXTRA_BASELINE_KEY]}
    runs = result.run_requests or []
    assert cells(runs) == {("43", EXTRA_BASELINE_KEY), ("44", EXTRA_BASELINE_KEY)}
    assert "refresh_models_table" in jobs(result)
    # The daemon resolves the cells although their model key is only added by this very tick.
    resolved = env.resolve(models_registry_sensor, cursor=first.cursor)
    assert sorted(r.tags.get("dagster/partition/model", "") for r in resolved) == [
        "",
        *[EXTRA_BASELINE_KEY] * 2,
    ]


def test_a_new_api_model_without_credentials_gets_a_partition_but_no_run(env: Env) -> None:
    env.models_file.write_text(EXTRA_BASELINE, encoding="utf-8")
    first = env.tick(models_registry_sensor)
    env.apply(first)
    env.ingest_questions("43")
    env.models_file.write_text(EXTRA_BASELINE + REGISTRY_TOML, encoding="utf-8")
    result = env.tick(models_registry_sensor, cursor=first.cursor)
    assert added(result) == {"model_keys": [*BASELINES, "openai/gpt-5.2"]}
    assert cells(result.run_requests or []) == {("43", k) for k in BASELINES}  # not the keyless API model


def test_a_removed_model_deletes_nothing_and_refreshes_the_models_table(env: Env) -> None:
    env.models_file.write_text(REGISTRY_TOML + EXTRA_BASELINE, encoding="utf-8")
    first = env.tick(models_registry_sensor)
    env.apply(first)
    env.models_file.write_text(REGISTRY_TOML, encoding="utf-8")
    result = env.tick(models_registry_sensor, cursor=first.cursor)
    assert result.dynamic_partitions_requests == []  # no delete request: the key keeps its history
    assert jobs(result) == ["refresh_models_table"]
    assert env.instance.has_dynamic_partition("model_keys", EXTRA_BASELINE_KEY)


def test_a_key_added_back_runs_only_its_cells_that_are_not_complete(
    persistent_env: Env, ingested_template: Path
) -> None:
    """The sensor asks the same question as `oabench run` and `oabench status` (inference/freshness.py)."""
    env = persistent_env
    copy_ingested(ingested_template, env.tmp / "warehouse")  # real questions: cells can be answered
    env.models_file.write_text(REGISTRY_TOML + EXTRA_BASELINE, encoding="utf-8")
    first = env.tick(models_registry_sensor)
    env.apply(first)
    done = MultiPartitionKey({"edition": "43", "model": EXTRA_BASELINE_KEY})
    assert materialize(
        [inferences], partition_key=done, resources=env.resources(), instance=env.instance
    ).success
    env.models_file.write_text(REGISTRY_TOML, encoding="utf-8")
    removed = env.tick(models_registry_sensor, cursor=first.cursor)
    env.models_file.write_text(REGISTRY_TOML + EXTRA_BASELINE, encoding="utf-8")
    result = env.tick(models_registry_sensor, cursor=removed.cursor)
    assert cells(result.run_requests or []) == {("44", EXTRA_BASELINE_KEY), ("45", EXTRA_BASELINE_KEY)}


PAID_KEY = "acme/paid"
PAID_KEY_ENV = "OABENCH_TEST_PAID_KEY"
PAID_PROMPT_PRICE = 2e-06  # USD per prompt token
PAID_MODEL = f"""
[[models]]
id = "{PAID_KEY}"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "{PAID_KEY_ENV}"
"""


def before_paid_model(env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The first tick's cursor, on a warehouse with the study's three editions and the 1st (a copy of the
    45th: ingested, outside the default suite) ingested, and the paid model's key exported."""
    copy_ingested(ingested_template, env.tmp / "warehouse")
    questions = env.tmp / "warehouse" / "tables" / "questions"
    shutil.copy(questions / "45.parquet", questions / "1.parquet")
    monkeypatch.setenv(PAID_KEY_ENV, "sk-test")  # exported, as the README says to
    first = env.tick(models_registry_sensor)
    env.apply(first)
    return first.cursor


def add_paid_model(env: Env, cursor: str | None) -> SensorResult:
    """The tick that sees `PAID_MODEL` added to the registry."""
    env.models_file.write_text(REGISTRY_TOML + PAID_MODEL, encoding="utf-8")
    return env.tick(models_registry_sensor, cursor=cursor)


def price_paid_model(env: Env) -> None:
    """A `model_pricing` snapshot listing the paid model."""
    pricing = {"fetched_at": [dt.datetime(2026, 3, 1, tzinfo=dt.UTC)], "base_url": ["http://127.0.0.1:9/v1"]}
    pricing |= {"model": [PAID_KEY], "prompt_price_per_token": [PAID_PROMPT_PRICE]}
    pricing |= {"completion_price_per_token": [1e-05]}
    store = env.tmp / "warehouse" / "oabench.duckdb"
    warehouse = WarehouseResource(path=str(store), raw_dir=str(env.raw_dir)).warehouse()
    warehouse.write_partition("model_pricing", pl.DataFrame(pricing), "2026-03-01T000000")


def ceiling_of(run: RunRequest) -> float | None:
    return run.run_config.get("ops", {}).get("inferences", {}).get("config", {}).get("max_cost_usd")


def test_a_new_api_model_with_its_key_exported_runs_nothing_unless_opted_in(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the UI spends nothing: `OABENCH_AUTORUN_MAX_COST_USD` unset, a new priced model with its key
    exported gets its partition and the models table, and no cell run."""
    price_paid_model(env)
    result = add_paid_model(env, before_paid_model(env, ingested_template, monkeypatch))
    assert added(result) == {"model_keys": [PAID_KEY]}
    assert jobs(result) == ["refresh_models_table"]
    assert "OABENCH_AUTORUN_MAX_COST_USD" in (models_registry_sensor.description or "")  # in the UI


def test_opted_in_a_new_model_runs_the_default_suite_within_the_budget(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.autorun_max_cost_usd = 5.0
    price_paid_model(env)
    before = before_paid_model(env, ingested_template, monkeypatch)
    result = add_paid_model(env, before)
    runs = [r for r in result.run_requests or [] if r.job_name == "run_inference_cell"]
    # The default suite (43rd-45th), not the 1st that is ingested too.
    assert cells(runs) == {(e, PAID_KEY) for e in ("43", "44", "45")}
    # The budget split between the cells as ceilings on reported spend: never more than it in all.
    ceilings = [ceiling_of(r) for r in runs]
    assert all(c is not None and c > 0 for c in ceilings)
    assert sum(c for c in ceilings if c is not None) == pytest.approx(5.0)
    config = {"ops": {"inferences": {"config": {"max_cost_usd": ceilings[0]}}}}
    job = Definitions(assets=[inferences], jobs=[inference_cell_job], resources=env.resources())
    assert validate_run_config(job.resolve_job_def("run_inference_cell"), config)  # the step accepts it

    # A budget below the estimate (~$0.1 of prompt tokens on the suite): nothing at all.
    env.autorun_max_cost_usd = 0.01
    assert jobs(add_paid_model(env, before)) == ["refresh_models_table"]


def test_opted_in_an_entry_no_price_lists_waits_instead_of_failing_runs(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local server not listening, a misspelt id: no snapshot prices it, so it launches no cell run, only
    a pricing run (no model is asked); once a snapshot prices it, a later tick runs it within the budget."""
    env.autorun_max_cost_usd = 5.0
    result = add_paid_model(env, before_paid_model(env, ingested_template, monkeypatch))
    assert jobs(result) == ["refresh_models_table", "refresh_model_pricing"]
    cursor = RegistryCursor.parse(result.cursor)
    assert cursor is not None and cursor.waiting == (PAID_KEY,)
    env.apply(result)
    still = env.tick(models_registry_sensor, cursor=result.cursor)
    assert jobs(still) == ["refresh_model_pricing"]  # the same run key: the daemon launches it once

    price_paid_model(env)
    priced = env.tick(models_registry_sensor, cursor=result.cursor)
    assert cells(priced.run_requests or []) == {(e, PAID_KEY) for e in ("43", "44", "45")}
    cursor = RegistryCursor.parse(priced.cursor)
    assert cursor is not None and cursor.waiting == ()
    assert "unchanged" in skip_text(env.tick(models_registry_sensor, cursor=priced.cursor))


def test_an_unchanged_registry_skips(env: Env) -> None:
    first = env.tick(models_registry_sensor)
    env.apply(first)
    result = env.tick(models_registry_sensor, cursor=first.cursor)
    assert "unchanged (3 configurations)" in skip_text(result)
    assert result.dynamic_partitions_requests == []


def test_a_broken_registry_is_a_skip_reason_and_keeps_the_cursor(env: Env) -> None:
    first = env.tick(models_registry_sensor)
    env.models_file.write_text('[[models]]\nid = "x/y"\nconcurrency = "many"\n', encoding="utf-8")
    result = env.tick(models_registry_sensor, cursor=first.cursor)
    assert "models registry unusable" in skip_text(result) and "concurrency" in skip_text(result)
    assert result.cursor == first.cursor


# --- oab_portal_sensor ---------------------------------------------------------------------------------


def test_portal_with_known_editions_only_skips(env: Env) -> None:
    before = time.time()
    result = env.tick(oab_portal_sensor)
    assert "no new edition on the portal (newest listed: 45)" in skip_text(result)
    assert result.dynamic_partitions_requests == []
    state = PortalCursor.parse(result.cursor)
    assert state.last_check is not None and state.last_check >= before
    assert not env.discovered_file.exists()


def test_preliminary_key_only_waits_and_registers_nothing(env: Env) -> None:
    env.portal.state = "preliminary"
    result = env.tick(oab_portal_sensor)
    assert "edition 46 waiting: only a preliminary answer key" in skip_text(result)
    assert result.dynamic_partitions_requests == []
    assert not env.discovered_file.exists()


@pytest.mark.parametrize(("state", "expected"), [("down", "HTTP 500"), ("changed_layout", "cmb-edital")])
def test_portal_failure_is_a_skip_reason_and_writes_nothing(env: Env, state: str, expected: str) -> None:
    env.portal.state = state  # type: ignore[assignment]
    result = env.tick(oab_portal_sensor)
    text = skip_text(result)
    assert text.startswith("portal check failed") and expected in text
    assert not env.discovered_file.exists() and not env.raw_dir.exists()


def test_a_bad_pdf_skips_the_edition_and_registers_nothing(env: Env) -> None:
    env.portal.state = "definitive"
    env.portal.broken_paths = {BOOKLET_PATH}
    result = env.tick(oab_portal_sensor)
    assert "edition 46 skipped" in skip_text(result) and "HTML page" in skip_text(result)
    assert result.dynamic_partitions_requests == [] and not env.discovered_file.exists()


def test_new_edition_is_recorded_registered_ingested_then_its_cells_requested(persistent_env: Env) -> None:
    env = persistent_env  # resolving requests like the daemon needs an instance reference
    env.apply(env.tick(models_registry_sensor))  # model keys and registry editions registered
    env.portal.state = "definitive"

    # Tick 1: TOFU pin, record, register the partition, request the ingest; no cell before questions exist.
    first = env.tick(oab_portal_sensor)
    assert added(first) == {"editions": ["46"]}
    runs = first.run_requests or []
    assert [(r.job_name, r.partition_key) for r in runs] == [
        ("ingest_edition", "46"),
        ("refresh_editions_table", None),
    ]
    [recorded] = load_editions(env.discovered_file)
    served = new_edition_pdfs()
    assert recorded.edition == 46 and recorded.pinned_by == "first-download"
    assert recorded.booklet.sha256 == sha256_hex(served[BOOKLET_PATH])
    assert recorded.answer_key.sha256 == sha256_hex(served[DEFINITIVE_KEY_PATH])
    assert (env.raw_dir / recorded.booklet.sha256).read_bytes() == served[BOOKLET_PATH]
    # The daemon accepts the request: partition "46" resolves because the same tick adds it.
    assert {r.partition_key for r in env.resolve(oab_portal_sensor)} == {"46", None}
    env.apply(first)

    # Tick 2, ingest still running: the portal is not asked again (checked < 6 h ago), nothing to request.
    portal_requests = sum(env.portal.requests.values())
    second = env.tick(oab_portal_sensor, cursor=first.cursor)
    assert "edition 46: inference cells wait for its questions" in skip_text(second)
    assert sum(env.portal.requests.values()) == portal_requests

    # Tick 3, questions ingested: one cell per model that can run unattended (baselines, not the keyless API).
    env.ingest_questions("46")
    third = env.tick(oab_portal_sensor, cursor=second.cursor)
    assert cells(third.run_requests or []) == {("46", k) for k in BASELINES}
    assert jobs(third).count("run_inference_cell") == len(BASELINES)
    assert third.dynamic_partitions_requests == []
    assert PortalCursor.parse(third.cursor).cells_requested == ["46"]
    resolved = env.resolve(oab_portal_sensor, cursor=second.cursor)
    assert {
        r.tags.get("dagster/partition/edition") for r in resolved if r.job_name == "run_inference_cell"
    } == {"46"}

    # Tick 4: done; and the registry sensor does not re-add the discovered edition or re-request anything.
    assert "next portal check in" in skip_text(env.tick(oab_portal_sensor, cursor=third.cursor))


def found_and_ingested(env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """The cursor of the portal tick that found edition 46, now ingested (its questions: a copy of the
    45th's), with the paid model in the registry since before and its key exported."""
    copy_ingested(ingested_template, env.tmp / "warehouse")
    env.models_file.write_text(REGISTRY_TOML + PAID_MODEL, encoding="utf-8")
    monkeypatch.setenv(PAID_KEY_ENV, "sk-test")  # exported, as the README says to
    env.apply(env.tick(models_registry_sensor))
    env.portal.state = "definitive"
    found = env.tick(oab_portal_sensor)
    assert added(found) == {"editions": ["46"]}
    env.apply(found)
    questions = env.tmp / "warehouse" / "tables" / "questions"
    shutil.copy(questions / "45.parquet", questions / "46.parquet")
    return found.cursor


def test_a_new_edition_runs_no_paid_cell_unless_opted_in(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`OABENCH_AUTORUN_MAX_COST_USD` unset: a new edition's cells are the free baselines' only, even for a
    priced API model whose key is exported; the edition is handled (not run later when the opt-in is set)."""
    price_paid_model(env)
    result = env.tick(oab_portal_sensor, cursor=found_and_ingested(env, ingested_template, monkeypatch))
    assert cells(result.run_requests or []) == {("46", k) for k in BASELINES}
    assert PortalCursor.parse(result.cursor).cells_requested == ["46"]
    assert "OABENCH_AUTORUN_MAX_COST_USD" in (oab_portal_sensor.description or "")  # in the UI


def test_opted_in_a_new_edition_runs_a_priced_model_within_the_budget(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.autorun_max_cost_usd = 5.0
    price_paid_model(env)
    cursor = found_and_ingested(env, ingested_template, monkeypatch)
    runs = env.tick(oab_portal_sensor, cursor=cursor).run_requests or []
    assert cells(runs) == {("46", k) for k in [*BASELINES, PAID_KEY]}
    [paid] = [r for r in runs if cells([r]) == {("46", PAID_KEY)}]
    assert ceiling_of(paid) == pytest.approx(5.0)  # the one cell may spend the budget, no more
    assert all(ceiling_of(r) is None for r in runs if r is not paid and r.job_name == "run_inference_cell")

    # A budget below the estimate (~$0.03 of prompt tokens on one edition): the baselines only.
    env.autorun_max_cost_usd = 0.001
    assert cells(env.tick(oab_portal_sensor, cursor=cursor).run_requests or []) == {
        ("46", k) for k in BASELINES
    }


def test_opted_in_a_model_no_price_lists_gets_no_cell_of_a_new_edition(
    env: Env, ingested_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local server not listening, a misspelt id: no snapshot prices it, so its cost cannot be held to
    the budget and it gets no run (`oabench run --models KEY --editions 46` runs it by hand)."""
    env.autorun_max_cost_usd = 5.0
    result = env.tick(oab_portal_sensor, cursor=found_and_ingested(env, ingested_template, monkeypatch))
    assert cells(result.run_requests or []) == {("46", k) for k in BASELINES}


def test_a_broken_models_registry_keeps_an_ingested_edition_waiting(env: Env) -> None:
    env.apply(env.tick(models_registry_sensor))
    env.portal.state = "definitive"
    first = env.tick(oab_portal_sensor)
    env.apply(first)
    env.ingest_questions("46")
    env.models_file.write_text("[[models]]\n", encoding="utf-8")  # mid-edit: no id
    result = env.tick(oab_portal_sensor, cursor=first.cursor)
    assert "editions 46 wait: models registry unusable" in skip_text(result)
    assert PortalCursor.parse(result.cursor).cells_requested == []  # asked again on the next tick


def test_a_corrupt_discovered_file_fails_the_tick_and_nothing_to_do_stays_a_skip(env: Env) -> None:
    """A tick that cannot complete is a failed tick, as Dagster's sensor evaluation reports it (the daemon
    records FAILURE with the error and keeps the cursor), not a skip; a tick with nothing to do is a skip."""
    cursor = '{"last_check": 1e12}'  # no portal check due
    nothing_to_do = env.tick(oab_portal_sensor, cursor=cursor)
    assert nothing_to_do.skip_reason is not None and not nothing_to_do.run_requests
    env.discovered_file.parent.mkdir(parents=True)
    env.discovered_file.write_text("[[editions]]\nedition = 'forty-six'\n", encoding="utf-8")
    context = build_sensor_context(
        instance=env.instance, cursor=cursor, resources=env.resources(), definitions=env.definitions()
    )
    with pytest.raises(EditionsRegistryError, match="forty-six"):  # the tick's error says what is wrong
        oab_portal_sensor.evaluate_tick(context)


# --- weekly_portal_discovery ---------------------------------------------------------------------------


def test_weekly_schedule_discovers_registers_and_ingests(persistent_env: Env) -> None:
    env = persistent_env
    env.portal.state = "definitive"
    context = build_schedule_context(instance=env.instance, resources=env.resources())
    result = weekly_portal_discovery(context)
    assert isinstance(result, list)
    assert [(r.job_name, r.partition_key) for r in result] == [("ingest_edition", "46")]
    assert env.instance.has_dynamic_partition("editions", "46")
    assert [e.edition for e in load_editions(env.discovered_file)] == [46]
    # The sensor then sees the edition registered: it does not ingest it again.
    follow_up = env.tick(oab_portal_sensor, cursor=PortalCursor(last_check=time.time()).dump())
    assert "inference cells wait for its questions" in skip_text(follow_up)


def test_weekly_schedule_skips_with_the_reason_when_the_portal_is_down(persistent_env: Env) -> None:
    env = persistent_env
    env.portal.state = "down"
    result = weekly_portal_discovery(build_schedule_context(instance=env.instance, resources=env.resources()))
    assert isinstance(result, SkipReason) and "HTTP 500" in (result.skip_message or "")
