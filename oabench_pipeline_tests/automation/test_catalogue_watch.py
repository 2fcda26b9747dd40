"""The catalogue watch end to end on loopback: a catalogue server, the replay server, the real sensor and CLI.

The catalogue lists three new models (one that fits the policy, one over its price ceiling, one that only
reads and writes images) and one older than `created_after`; the replay server answers the fitting one with
the answers and costs a real run recorded (Claude Haiku 4.5's, served under the id `acme/fit`). Every test
starts from the module's ingested warehouse and instance; the cheaper ones keep only edition 45 ingested,
so the suite (`oabench-2026`) has one edition to run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from dagster import (
    AddDynamicPartitionsRequest,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    SensorResult,
    build_sensor_context,
)

from oabench_pipeline.automation.catalogue_sensor import CATALOGUE_SENSOR_NAME, model_catalogue_sensor
from oabench_pipeline.core.models_registry import load_models_registry
from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.definitions import build_definitions, build_resources
from oabench_pipeline.engine.runs import instance_for, run_assets
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.automation.ticks import REPORT, TABLES, Ticks
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, question_texts
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import fresh_env_with_instance_per_module
from oabench_pipeline_tests.servers.catalogue import CatalogueServer, catalogue_model
from oabench_pipeline_tests.servers.openai_replay import RecordedReply, ReplayServer, load_published_replies

ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("catalogue-watch")

RECORDED_RUN = "2026-03-03T18-01-17-579Z_anthropic--claude-haiku-4.5_direto"  # prices $1 / $5 per Mtok
FIT, PRICEY, PAINTER, OLD, METERED = "acme/fit", "acme/pricey", "acme/painter", "acme/old", "acme/metered"
# Issue 32's probe, on two models: $1 a reply, whatever the catalogue lists. Two show both limits (one model
# stops at its $2 ceiling, the other on the $3 month) as the four did, with two launched cells, not four.
PROBES = [f"acme/probe-{i}" for i in range(2)]
D = dt.datetime


def listing(**fit: object) -> list[dict]:
    return [
        catalogue_model(
            FIT, D(2026, 3, 10), prompt="0.000001", completion="0.000005", name="Acme Fit", **fit
        ),  # type: ignore[arg-type]
        catalogue_model(PRICEY, D(2026, 3, 11), prompt="0.0001", completion="0.0005"),
        catalogue_model(PAINTER, D(2026, 3, 12), inputs=("text", "image"), outputs=("image",)),
        catalogue_model(OLD, D(2025, 11, 1)),
    ]


POLICY = """\
[watch]
include = ["acme/"]
created_after = 2026-01-01
suite = "oabench-2026"
max_run_cost_usd = {ceiling}
monthly_budget_usd = {monthly}
base_url = "{base_url}"
api_key_env = "{key_env}"
concurrency = 20
"""


@pytest.fixture(scope="module")
def replay(shared_oab: Path, ingested_with_instance) -> Iterator[ReplayServer]:
    """Haiku's recorded answers (and costs) as `acme/fit`'s; `acme/metered` costs $0.10 an answer."""
    from oabench_pipeline.warehouse import Warehouse

    warehouse = Warehouse(ingested_with_instance.snapshot.saved / "warehouse" / "oabench.duckdb")
    texts = question_texts(warehouse)
    recorded = load_published_replies(shared_oab / "published-runs", texts)
    replies = {
        (FIT, text): reply
        for (model, text), reply in recorded.items()
        if model == "anthropic/claude-haiku-4.5"
    }
    replies |= {
        (METERED, text): RecordedReply("B", prompt_tokens=900, completion_tokens=1, cost=0.1)
        for text in texts.values()
    }
    replies |= {
        (probe, text): RecordedReply("B", prompt_tokens=900, completion_tokens=1, cost=1.0, latency_s=0.05)
        for probe in PROBES
        for text in texts.values()
    }
    with ReplayServer(replies=replies, api_key=TEST_KEY, unknown_model_status=404) as server:
        yield server


@pytest.fixture(scope="module")
def catalogue() -> Iterator[CatalogueServer]:
    with CatalogueServer() as server:
        yield server


@pytest.fixture
def env(fresh_env: PipelineEnv, replay: ReplayServer, catalogue: CatalogueServer) -> PipelineEnv:
    """The ingested warehouse, a registry of one baseline, the policy above and both servers, reset."""
    replay.reset_stats()
    catalogue.models, catalogue.state = listing(), "up"
    catalogue.requests.clear()
    fresh_env.set(
        "OABENCH_MODELS_FILE",
        write_models_file(fresh_env.root / "models.toml", [{"id": "baseline/random", "kind": "baseline"}]),
    )
    fresh_env.set("OABENCH_CATALOGUE_URL", catalogue.url)
    fresh_env.set("OABENCH_CATALOGUE_TIMEOUT_S", "5")
    fresh_env.set(TEST_KEY_ENV, TEST_KEY)
    fresh_env.set("OABENCH_WATCH_FILE", fresh_env.root / "watch.toml")
    write_policy(fresh_env, replay)
    return fresh_env


def write_policy(env: PipelineEnv, replay: ReplayServer, ceiling: float = 1.0, monthly: float = 5.0) -> None:
    text = POLICY.format(ceiling=ceiling, monthly=monthly, base_url=replay.base_url, key_env=TEST_KEY_ENV)
    (env.root / "watch.toml").write_text(text, encoding="utf-8")


def only_edition_45(env: PipelineEnv) -> None:
    """Keep edition 45 alone ingested: the suite then has one edition to run (80 questions, not 238)."""
    for table in ("questions", "answer_keys"):
        for edition in ("43", "44"):
            env.warehouse.partition_path(table, edition).unlink()


def decisions(env: PipelineEnv) -> dict[str, tuple[str, str]]:
    rows = env.warehouse.read("catalogue_decisions").sort("decided_at")
    return {r["model"]: (r["outcome"], r["reason"]) for r in rows.iter_rows(named=True)}


def tables_state(env: PipelineEnv) -> dict[str, str]:
    """SHA-256 of every table file and of the generated registry: what "changes nothing" means."""
    root = env.settings.warehouse_path.parent
    files = [*sorted(root.glob("tables/*/*.parquet")), env.settings.catalogue_models_file]
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()
    }


def sensor_tick(env: PipelineEnv, instance, defs) -> SensorResult:
    context = build_sensor_context(
        instance=instance, resources=build_resources(env.settings), definitions=defs
    )
    result = model_catalogue_sensor(context)
    assert isinstance(result, SensorResult)
    return result


def skip_text(result: SensorResult) -> str:
    assert not result.run_requests and result.skip_reason is not None
    return result.skip_reason.skip_message or ""


EXPECTED_DECISIONS = {
    FIT: ("registered", "fits"),
    PRICEY: ("skipped", "price"),
    PAINTER: ("skipped", "modality"),
    OLD: ("skipped", "policy"),
}


@pytest.mark.slow
def test_one_sensor_tick_registers_and_runs_exactly_the_fitting_models_cells_then_a_second_does_nothing(
    env: PipelineEnv, replay: ReplayServer, catalogue: CatalogueServer
) -> None:
    only_edition_45(env)
    settings = env.settings
    models_before = (env.root / "models.toml").read_text()
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        sensor = defs.get_repository_def().get_sensor_def(CATALOGUE_SENSOR_NAME)
        assert sensor.default_status == DefaultSensorStatus.STOPPED  # starting it is the opt-in
        daily = defs.get_repository_def().get_schedule_def("daily_model_catalogue")
        assert (
            daily.default_status == DefaultScheduleStatus.RUNNING
            and daily.job_name == "refresh_model_catalogue"
        )

        result = sensor_tick(env, instance, defs)
        cells = {
            (r.partition_key.keys_by_dimension["edition"], r.partition_key.keys_by_dimension["model"]): r  # type: ignore[union-attr]
            for r in result.run_requests or []
            if r.job_name == "run_inference_cell"
        }
        assert set(cells) == {("45", FIT)}  # the suite's ingested editions, nothing else
        assert all(r.tags["oabench/endpoint"] == replay.base_url.split("/")[2] for r in cells.values())
        jobs = {r.job_name for r in result.run_requests or []}
        assert {"refresh_models_table", "refresh_model_pricing"} <= jobs  # its price, from this snapshot
        added = {
            r.partitions_def_name: list(r.partition_keys)
            for r in result.dynamic_partitions_requests or []
            if isinstance(r, AddDynamicPartitionsRequest)
        }
        assert added["model_keys"] == [FIT] and added.get("editions", ["45"]) == ["45"]
        assert {e.asset_key.to_user_string() for e in result.asset_events} == {
            "model_catalogue",
            "catalogue_decisions",
        }
        assert decisions(env) == EXPECTED_DECISIONS
        [entry] = load_models_registry(settings.catalogue_models_file)
        assert (entry.key, entry.label, entry.base_url, entry.api_key_env) == (
            FIT,
            "Acme Fit",
            replay.base_url,
            TEST_KEY_ENV,
        )
        assert (
            env.root / "models.toml"
        ).read_text() == models_before  # the hand-written registry is the owner's

        # What the daemon then does: add the partitions, run each requested cell; automation scores and ranks.
        for name, keys in added.items():
            instance.add_dynamic_partitions(name, keys)
        for event in result.asset_events:  # what the sensor daemon records
            instance.report_runless_asset_event(event)
        for request in cells.values():
            outcome = run_assets(
                defs,
                instance,
                ["inferences", "scores"],
                partition_key=request.partition_key,
                tags=request.tags,
            )
            assert outcome.success, outcome.errors
        assert run_assets(defs, instance, ["model_pricing"]).success  # the refresh_model_pricing run
        assert run_assets(defs, instance, ["models", *ANALYSIS_TABLES]).success
        assert replay.stats.total_requests == 80 and max(replay.stats.requests_per_prompt.values()) == 1
        assert {model for model, _ in replay.stats.requests_per_prompt} == {FIT}

        board = env.warehouse.read("leaderboard").filter(pl.col("model_key") == FIT)
        assert board["complete"].item() and board["rank"].item() == 1 and not board["retired"].item()
        estimated_before = board["estimated_cost_usd"].item()
        assert estimated_before > 0  # priced from the tick's snapshot, not left for the daily schedule
        ranked = env.cli("leaderboard", "--suite", "oabench-2026", "--format", "csv").output
        assert next(row for row in ranked.splitlines() if ",acme/fit," in row).startswith("1,")

        ticks = Ticks(defs, instance)
        assert ticks.tick() == {}  # everything was just built

        second = sensor_tick(env, instance, defs)
        assert "0 decision(s), registered: none" in skip_text(second)
        assert replay.stats.total_requests == 80 and decisions(env) == EXPECTED_DECISIONS
        assert len(env.warehouse.partitions("catalogue_decisions")) == 1
        for event in second.asset_events:
            instance.report_runless_asset_event(event)
        assert ticks.tick() == {}  # the same listing, the same data version: nothing to rebuild

        # A later listing doubles the price and retires the model: the sensor asks for the prices again, and
        # the automation rebuilds the tables, which mark it and cost it at the new price.
        catalogue.models = listing(expiration_date=dt.datetime.now(dt.UTC).date().isoformat())
        catalogue.models[0]["pricing"]["prompt"] = "0.000002"
        third = sensor_tick(env, instance, defs)
        assert [r.job_name for r in third.run_requests or []] == ["refresh_model_pricing"]  # no model request
        for event in third.asset_events:
            instance.report_runless_asset_event(event)
        assert ticks.tick() == {**{table: {None} for table in TABLES}, REPORT: {None}}
        assert run_assets(defs, instance, ["model_pricing", *ANALYSIS_TABLES]).success
        board = env.warehouse.read("leaderboard").filter(pl.col("model_key") == FIT)
        assert board["retired"].item() and board["estimated_cost_usd"].item() > estimated_before
        assert replay.stats.total_requests == 80


@pytest.mark.slow
def test_sync_run_answers_the_fitting_model_like_oabench_run_then_a_later_listing_retires_it(
    env: PipelineEnv, replay: ReplayServer, catalogue: CatalogueServer
) -> None:
    only_edition_45(env)
    result = env.cli("catalogue", "sync", "--run")
    assert result.exit_code == 0, result.output
    assert (
        "acme/fit: registered: estimated $" in result.output
        and "acme/fit × 45: 80/80 answered" in result.output
    )
    assert replay.stats.total_requests == 80 and decisions(env) == EXPECTED_DECISIONS
    assert "catalogue watch: $" in env.cli("status").output  # the month's spend in `oabench status`
    board = env.warehouse.read("leaderboard").filter(pl.col("model_key") == FIT)
    assert board["rank"].item() == 1 and board["cost_source"].item() == "reported"
    estimated_before = board["estimated_cost_usd"].item()

    again = env.cli("catalogue", "sync", "--run")
    assert again.exit_code == 0, again.output
    assert "0 decision(s)" in again.output and replay.stats.total_requests == 80

    # A later listing: the price doubles and the model's expiration date is today.
    today = dt.datetime.now(dt.UTC).date().isoformat()
    catalogue.models = listing(expiration_date=today)
    catalogue.models[0]["pricing"]["prompt"] = "0.000002"
    assert env.cli("catalogue", "sync").exit_code == 0
    history = env.warehouse.query(
        "select prompt_usd_per_mtok, expiration_date from model_catalogue where model = ? order by fetched_at",
        [FIT],
    )
    assert history["prompt_usd_per_mtok"].to_list() == [1.0, 1.0, 2.0]
    assert [str(d) if d else None for d in history["expiration_date"]] == [None, None, today]
    board = env.warehouse.read("leaderboard").filter(pl.col("model_key") == FIT)
    assert board["retired"].item() and board["rank"].item() == 1  # kept and ranked, marked
    assert board["estimated_cost_usd"].item() > estimated_before
    assert "acme/fit †" in env.cli("leaderboard", "--suite", "oabench-2026").output
    by_suite = env.warehouse.read("leaderboard_by_suite").filter(pl.col("model_key") == FIT)
    assert by_suite.filter(pl.col("suite") == "oabench-2026")["retired"].item()
    refused = env.cli("run", "--models", FIT)
    assert refused.exit_code == 2 and "retired" in refused.output
    assert replay.stats.total_requests == 80
    assert (
        catalogue.listings_requested == 3
    )  # one fetch per sync: model_pricing read the snapshot, never the catalogue


def test_nothing_is_sent_beyond_the_months_budget_or_without_a_policy(
    env: PipelineEnv, catalogue: CatalogueServer, replay: ReplayServer
) -> None:
    only_edition_45(env)
    write_policy(env, replay, monthly=0.01)
    result = env.cli("catalogue", "sync", "--run")
    assert result.exit_code == 0, result.output
    assert replay.stats.total_requests == 0 and "no automatic model has cells to answer" in result.output
    [row] = env.warehouse.read("catalogue_decisions").filter(pl.col("model") == FIT).to_dicts()
    assert (row["outcome"], row["reason"]) == ("skipped", "budget")
    assert (
        "over the $0.0100 left of this month's budget" in row["detail"] and row["estimated_cost_usd"] > 0.01
    )
    assert not env.settings.catalogue_models_file.exists()
    assert env.cli("catalogue", "sync").exit_code == 0  # still short: nothing new is recorded
    assert len(env.warehouse.partitions("catalogue_decisions")) == 1
    write_policy(env, replay, monthly=5.0)  # budget enough: decided again at the next tick
    synced = env.cli("catalogue", "sync").output
    assert "acme/fit: registered" in synced  # registered, not run: no --run
    assert f"registry entries written to {env.settings.catalogue_models_file}" in synced
    priced = env.warehouse.query("select prompt_price_per_token from model_pricing where model = ?", [FIT])
    assert priced["prompt_price_per_token"].to_list() == [1e-6]  # on the same listing: its price all the same

    # The policy removed: nothing fetched, registered or sent, by any path.
    (env.root / "watch.toml").unlink()
    result = env.cli("catalogue", "sync", "--run")
    assert result.exit_code == 1 and "no watch policy at" in result.output
    run = env.cli("run", "--dry-run")
    assert f"skipping {FIT}: registered from the model catalogue, and no watch policy" in run.output
    named = env.cli("run", "--models", FIT, "--dry-run")
    assert named.exit_code == 2 and "no watch policy" in named.output
    settings = env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        assert "no watch policy" in skip_text(sensor_tick(env, instance, defs))
        instance.add_dynamic_partitions("model_keys", [FIT])
        backfill = run_assets(
            defs, instance, ["inferences"], partition_key=cell_partition_key(FIT, 45)
        )  # the UI's way
    assert not backfill.success and "no watch policy" in " ".join(backfill.errors)
    assert catalogue.listings_requested == 3 and replay.stats.total_requests == 0


def test_a_catalogue_down_slow_malformed_or_redirecting_changes_nothing_and_says_so_in_one_line(
    env: PipelineEnv, catalogue: CatalogueServer, replay: ReplayServer
) -> None:
    only_edition_45(env)
    write_policy(env, replay, monthly=0.01)  # a first snapshot and its decisions, nothing registered or run
    assert env.cli("catalogue", "sync").exit_code == 0
    env.set("OABENCH_CATALOGUE_TIMEOUT_S", "0.5")
    before = tables_state(env)
    settings = env.settings
    with instance_for(settings) as instance:
        defs = build_definitions(settings)
        for state, expected in [
            ("down", "HTTP 503"),
            ("slow", "longer than 0.5 s"),
            ("malformed", "not JSON"),
            ("redirect", "redirected to http://169.254.169.254, which is 169.254.169.254, a link-local"),
        ]:
            catalogue.state = state  # type: ignore[assignment]
            result = env.cli("catalogue", "sync", "--run")
            assert result.exit_code == 1, result.output
            [line] = result.output.strip().splitlines()
            assert expected in line and "the last snapshot and every table are unchanged" in line, line
            tick = skip_text(sensor_tick(env, instance, defs))
            assert expected in tick and "\n" not in tick
            on_demand = run_assets(defs, instance, ["model_catalogue"])  # the UI's or the schedule's way
            assert not on_demand.success and [expected in e for e in on_demand.errors] == [True]
            assert tables_state(env) == before, state
    assert replay.stats.total_requests == 0


@pytest.mark.slow
def test_reported_spend_passing_the_ceiling_stops_the_automatic_run(
    env: PipelineEnv, catalogue: CatalogueServer, replay: ReplayServer
) -> None:
    """The estimate fits, but each answer reports $0.10: the run stops once the ceiling is reached."""
    only_edition_45(env)
    catalogue.models = [catalogue_model(METERED, D(2026, 3, 10), prompt="0.0000001")]
    write_policy(env, replay, ceiling=0.3)
    result = env.cli("catalogue", "sync", "--run", "--concurrency", "1")
    assert result.exit_code == 1, result.output
    assert "reaching the watch policy's max_run_cost_usd $0.3" in result.output
    assert replay.stats.total_requests == 3  # 3 × $0.10, one at a time: the third reaches the ceiling
    assert not env.warehouse.partition_path("inferences", f"45|{METERED}").exists()


def test_the_preview_and_adding_a_skipped_model_by_hand(env: PipelineEnv, catalogue: CatalogueServer) -> None:
    preview = env.cli("catalogue")
    assert preview.exit_code == 0, preview.output
    assert "would register 1:" in preview.output and "acme/fit" in preview.output
    assert "skip: price" in preview.output and "skip: modality" in preview.output
    assert "this month: $0.0000 spent by automatic runs" in preview.output
    as_json = json.loads(env.cli("catalogue", "--format", "json").output)
    assert {d["model"]: d["reason"] for d in as_json["decisions"]} == {
        m: r for m, (_, r) in EXPECTED_DECISIONS.items()
    }
    assert not env.warehouse.has_table("model_catalogue")  # the preview writes nothing

    assert env.cli("catalogue", "sync").exit_code == 0
    # The stored snapshot names the listing it was read from, not the URL set since.
    moved = "http://127.0.0.1:9/elsewhere/models"
    env.set("OABENCH_CATALOGUE_URL", moved)
    stored = env.cli("catalogue", "--stored")
    assert stored.exit_code == 0, stored.output
    assert stored.output.splitlines()[0].startswith(f"catalogue {catalogue.url}: ")
    assert stored.output.splitlines()[0].endswith(f"; OABENCH_CATALOGUE_URL is now {moved})")
    stored_json = json.loads(env.cli("catalogue", "--stored", "--format", "json").output)
    assert (stored_json["catalogue_url"], stored_json["snapshot"]["catalogue_url"]) == (moved, catalogue.url)
    env.set("OABENCH_CATALOGUE_URL", catalogue.url)
    [row] = env.warehouse.read("catalogue_decisions").filter(pl.col("model") == FIT).to_dicts()
    assert row["model_keys"] == [FIT] and row["editions"] == [43, 44, 45]  # its cells: the whole suite
    added = env.cli("catalogue", "add", PRICEY, "--protocol", "deliberativo")
    assert added.exit_code == 0, added.output
    assert f"added {PRICEY}:deliberativo to" in added.output
    keys = [m.key for m in load_models_registry(env.root / "models.toml")]
    assert keys == ["baseline/random", f"{PRICEY}:deliberativo"]
    painter = env.cli("catalogue", "add", PAINTER)
    assert painter.exit_code == 1 and "does not read text and write text" in painter.output
    twice = env.cli("catalogue", "add", PRICEY, "--protocol", "deliberativo")
    assert twice.exit_code == 1 and "already in the models registry" in twice.output


@pytest.mark.slow
def test_models_at_once_stay_within_the_budgets_their_requests_hold_before_sending(
    env: PipelineEnv, catalogue: CatalogueServer, replay: ReplayServer
) -> None:
    """Issue 32's probe on two models taken at once, concurrency 4, a server that reports $1 a reply (far
    above what the catalogue lists), `max_run_cost_usd = 2`, `monthly_budget_usd = 3`. Before, every cell
    sent its first 4 requests before any cost was known: $4 per model ($16 over the issue's four). Now each
    request holds its worst case first, and a model whose reply cost is unknown sends one request at a time,
    so the overshoot is at most what one reply costs beyond its hold (docs/catalogue.md, "Budgets"). Two
    models are enough for both limits: $3 in whole replies is one model's $2 ceiling and the other's $1."""
    only_edition_45(env)
    catalogue.models = [
        catalogue_model(probe, D(2026, 3, 10), prompt="0.000001", completion="0.000005") for probe in PROBES
    ]
    write_policy(env, replay, ceiling=2.0, monthly=3.0)
    result = env.cli("catalogue", "sync", "--run", "--concurrency", "4")
    assert result.exit_code == 1, result.output
    assert all(f"{probe}: registered" in result.output for probe in PROBES)
    per_model = {probe: 0 for probe in PROBES}
    for (model, _), count in replay.stats.requests_per_prompt.items():
        per_model[model] += count  # every request is answered, at $1
    hold = 16_384 * 5e-6  # a request's hold is at least the completion ceiling at the listed price: ~$0.08
    one_reply_beyond_its_hold = 1.0 - hold
    assert sum(per_model.values()) <= 3.0 + one_reply_beyond_its_hold, per_model
    assert all(spent <= 2.0 + one_reply_beyond_its_hold for spent in per_model.values()), per_model
    assert sum(per_model.values()) == 3  # in whole replies: exactly the month's budget
    # The cells that could not hold a request stopped on the policy: refused a hold ("past ..."), or, when
    # their process started after the others had spent it, on the spend itself ("reaching ...").
    assert "the watch policy's monthly_budget_usd $3" in result.output
    month = env.cli("status").output
    assert "catalogue watch: $3.0000 spent" in month, month
