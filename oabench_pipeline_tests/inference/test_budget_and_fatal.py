"""Budgets (`max_cost_usd`), fatal endpoint errors (HTTP 500 to everything, a certificate nobody trusts, a host
that does not resolve, a redirect) and missing keys, through the real `oabench run`. The cells that stop are
one `oabench run` for the module (`stopped_cells`), which each test reads."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from click.testing import Result
from dagster import RunsFilter

from oabench_pipeline.core.tables import ANALYSIS_TABLES
from oabench_pipeline.definitions import build_definitions
from oabench_pipeline.engine.runs import instance_for, run_assets
from oabench_pipeline.inference.response_log import cell_log_path, read_log
from oabench_pipeline.shared.partitions import cell_partition_key
from oabench_pipeline_tests.inference.replay import TEST_KEY, TEST_KEY_ENV, question_texts, use_replay_models
from oabench_pipeline_tests.inference.test_client import _self_signed_localhost
from oabench_pipeline_tests.inference.test_real_endpoints import no_proxy_env
from oabench_pipeline_tests.pipeline_env import PipelineEnv, write_models_file
from oabench_pipeline_tests.saved_envs import (
    SavedEnv,
    building_env,
    fresh_env_with_instance_per_module,
    save_env,
)
from oabench_pipeline_tests.servers.openai_replay import (
    FaultProfile,
    ModelPricing,
    RecordedReply,
    ReplayServer,
)
from oabench_pipeline_tests.servers.static_files import StaticFileServer

EDITION = "45"


ingested_with_instance, fresh_env = fresh_env_with_instance_per_module("budget-and-fatal")


def materialize_pricing(env: PipelineEnv) -> None:
    """Take a price snapshot (`model_pricing`) from every endpoint of the registry, as the UI would."""
    settings = env.settings
    with instance_for(settings) as instance:
        outcome = run_assets(build_definitions(settings), instance, ["model_pricing"])
    assert outcome.success, outcome.errors


def cell_written(env: PipelineEnv, model_key: str) -> bool:
    return env.warehouse.partition_path("inferences", str(cell_partition_key(model_key, EDITION))).exists()


def log_of(env: PipelineEnv, model_key: str) -> list:
    return read_log(cell_log_path(env.settings.warehouse_path.parent / "responses", model_key, EDITION))


PRICEY, DOWN_500, DOLLAR = "acme/pricey", "acme/down500", "acme/dollar"
UNTRUSTED, UNRESOLVABLE, REDIRECTED = "acme/untrusted-cert", "acme/no-such-host", "acme/moved"


@dataclass
class StoppedCells:
    """The module's one `oabench run` of six cells of 45, each stopped by its budget or its endpoint (were
    four runs, one per test): what it left, what it printed, and what each cell's server was sent."""

    saved: SavedEnv
    run: Result
    sent: dict[str, int]  # chat requests each cell's server received, by model key
    host_500: str  # DOWN_500's server, as `host:port`


@pytest.fixture(scope="module")
def stopped_cells(
    tmp_path_factory: pytest.TempPathFactory, ingested_template: Path, mirror_server: StaticFileServer
) -> StoppedCells:
    """A price snapshot, then one `oabench run --editions 45` of six cells, each on an endpoint of its own:

    - PRICEY: listed at $0.001 a prompt token, `max_cost_usd = 1`: the estimate alone is above it;
    - DOWN_500: every request answered HTTP 500, `concurrency = 4`;
    - DOLLAR: `max_cost_usd = 2`, `concurrency = 4`, replies that report $1 each while the price snapshot
      says far less;
    - UNTRUSTED: HTTPS with a certificate nobody trusts (no SSL_CERT_FILE or SSL_CERT_DIR), `concurrency = 4`;
    - UNRESOLVABLE: a host that does not resolve;
    - REDIRECTED: every request answered HTTP 301.
    """
    with building_env(tmp_path_factory, "budget-stops", ingested_template, mirror_server.base_url) as env:
        no_proxy_env(env)
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
            env.monkeypatch.delenv(name, raising=False)
        texts = question_texts(env.warehouse).values()
        dollar_replies = {
            (DOLLAR, text): RecordedReply(
                "B", prompt_tokens=900, completion_tokens=1, cost=1.0, latency_s=0.05
            )
            for text in texts
        }
        cert, key = _self_signed_localhost(env.root.parent)  # beside the environment, not in its snapshot
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
        return _run_stopped_cells(env, dollar_replies, context)


def _run_stopped_cells(env: PipelineEnv, dollar_replies: dict, untrusted_tls: ssl.SSLContext) -> StoppedCells:
    with (
        ReplayServer(models={PRICEY: ModelPricing("0.001", "0.002")}, api_key=TEST_KEY) as pricey,
        ReplayServer(api_key=TEST_KEY, faults=FaultProfile(fixed_status=500)) as down,
        ReplayServer(
            replies=dollar_replies, models={DOLLAR: ModelPricing("0.000001", "0.000005")}, api_key=TEST_KEY
        ) as dollar,
        ReplayServer(api_key=TEST_KEY, ssl_context=untrusted_tls) as untrusted,
        ReplayServer(api_key=TEST_KEY, faults=FaultProfile(fixed_status=301)) as moved,
    ):
        env.set(TEST_KEY_ENV, TEST_KEY)
        registry = [
            {"id": PRICEY, "base_url": pricey.base_url, "max_cost_usd": 1.0},
            {"id": DOLLAR, "base_url": dollar.base_url, "max_cost_usd": 2.0, "concurrency": 4},
        ]
        write_registry(env, registry)
        materialize_pricing(env)  # of the two priced endpoints: the others' model lists would only fail
        registry += [
            {"id": DOWN_500, "base_url": down.base_url, "concurrency": 4},
            {"id": UNTRUSTED, "base_url": untrusted.base_url, "concurrency": 4},
            {"id": UNRESOLVABLE, "base_url": "http://no-such-host.invalid/v1"},
            {"id": REDIRECTED, "base_url": moved.base_url},
        ]
        write_registry(env, registry)
        result = env.cli(
            "run", "--models", ",".join(entry["id"] for entry in registry), "--editions", EDITION
        )
        servers = {PRICEY: pricey, DOWN_500: down, DOLLAR: dollar, UNTRUSTED: untrusted, REDIRECTED: moved}
        sent = {model: server.stats.total_requests for model, server in servers.items()}
        saved = save_env(env, "OABENCH_MODELS_FILE", TEST_KEY_ENV)
    return StoppedCells(saved, result, sent, down.base_url.split("/")[2])


def write_registry(env: PipelineEnv, entries: list[dict]) -> None:
    """The registry of `entries`, each using the test key."""
    path = write_models_file(env.root / "models.toml", [e | {"api_key_env": TEST_KEY_ENV} for e in entries])
    env.set("OABENCH_MODELS_FILE", path)


@pytest.mark.slow
def test_estimate_above_budget_refuses_to_start(
    stopped_cells: StoppedCells, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = stopped_cells.saved.restore(monkeypatch)
    assert env.warehouse.query(
        "select prompt_price_per_token from model_pricing where model = ?", [PRICEY]
    ).rows() == [(0.001,)]
    result = stopped_cells.run
    assert result.exit_code == 1, result.output
    assert stopped_cells.sent[PRICEY] == 0
    assert "estimated prompt cost" in result.output and "exceeds max_cost_usd $1.0" in result.output
    assert "not starting" in result.output
    assert not cell_written(env, PRICEY) and log_of(env, PRICEY) == []
    # No cell of the module's run was scored, nor any before: a leaderboard rebuild could only fail, so the
    # command does not run it, and says nothing of it beside the stopped cells' report.
    assert "leaderboard rebuilt" not in result.output and "leaderboard not rebuilt" not in result.output
    assert "not complete" in result.output
    with instance_for(env.settings) as instance:
        assert not instance.get_runs(RunsFilter(job_name="rebuild_leaderboard"))


def test_a_cell_runs_own_ceiling_refuses_to_start_like_max_cost_usd(fresh_env: PipelineEnv) -> None:
    """The ceiling `models_registry_sensor` gives each cell run (its share of OABENCH_AUTORUN_MAX_COST_USD,
    as run config) holds like the registry's `max_cost_usd`, which this model does not set."""
    model = "acme/pricey"
    with ReplayServer(models={model: ModelPricing("0.001", "0.002")}, api_key=TEST_KEY) as server:
        use_replay_models(fresh_env, server.base_url, [model])
        materialize_pricing(fresh_env)
        settings = fresh_env.settings
        with instance_for(settings) as instance:
            instance.add_dynamic_partitions("editions", [EDITION])
            instance.add_dynamic_partitions("model_keys", [model])
            outcome = run_assets(
                build_definitions(settings),
                instance,
                ["inferences"],
                partition_key=cell_partition_key(model, EDITION),
                run_config={"ops": {"inferences": {"config": {"max_cost_usd": 1.0}}}},
            )
        assert server.stats.total_requests == 0
    assert not outcome.success and "exceeds max_cost_usd $1.0; not starting" in " ".join(outcome.errors)
    assert not cell_written(fresh_env, model) and log_of(fresh_env, model) == []


@pytest.mark.slow
def test_budget_bad_key_and_unknown_model_each_stop_their_cell_and_a_bigger_budget_resumes_without_reasking(
    fresh_env: PipelineEnv,
) -> None:
    """One `oabench run` of four cells (were two runs): a reported cost reaching the budget, a rejected key
    and an unknown model each stop their own cell; the baseline still runs and the leaderboard is rebuilt.
    The two cells stopped again change nothing the leaderboard reads: it is not rebuilt. A bigger budget then
    resumes the metered cell without asking again what was answered."""
    metered = "acme/metered"
    texts = [text for qid, text in question_texts(fresh_env.warehouse).items() if qid.startswith("oab-45-")]
    # 0.25 is exact in binary: four answers reach $1.00 exactly, with no rounding to argue about.
    replies = {
        (metered, text): RecordedReply("B", prompt_tokens=900, completion_tokens=1, cost=0.25)
        for text in texts
    }
    with (
        ReplayServer(replies=replies, api_key=TEST_KEY) as server,
        ReplayServer(api_key="sk-the-real-key-is-another-one") as rejecting,
        ReplayServer(api_key=TEST_KEY, unknown_model_status=404) as unknowing,
    ):
        fresh_env.set(TEST_KEY_ENV, TEST_KEY)
        path = write_models_file(
            fresh_env.root / "models.toml",
            [
                {
                    "id": metered,
                    "base_url": server.base_url,
                    "api_key_env": TEST_KEY_ENV,
                    "max_cost_usd": 1.0,
                },
                {"id": "acme/bad-key", "base_url": rejecting.base_url, "api_key_env": TEST_KEY_ENV},
                {"id": "acme/no-such-model", "base_url": unknowing.base_url, "api_key_env": TEST_KEY_ENV},
                {"id": "baseline/random", "kind": "baseline"},
            ],
        )
        fresh_env.set("OABENCH_MODELS_FILE", path)
        stopped = fresh_env.cli(
            "run", "--models", f"{metered},acme/bad-key,acme/no-such-model,baseline/random",
            "--editions", EDITION, "--concurrency", "1",
        )  # fmt: skip
        assert stopped.exit_code == 1, stopped.output
        # At most the requests already in flight when the first refusal arrived.
        assert 1 <= rejecting.stats.total_requests <= 2
        assert 1 <= unknowing.stats.total_requests <= 2

        # The budget: four answers paid, kept in the log; the cell's table partition not written.
        assert "reached max_cost_usd $1.0" in stopped.output
        assert server.stats.total_requests == 4
        kept = log_of(fresh_env, metered)
        assert len(kept) == 4 and all(r.ok for r in kept)
        assert not cell_written(fresh_env, metered), "an unfinished cell keeps its last good rows (none)"

        # The rejected key and the unknown model: stopped at once, named, nothing written or logged.
        output = " ".join(stopped.output.split())  # the progress console may wrap long lines
        assert "HTTP 401 authentication rejected" in output and "'acme/bad-key'" in output
        assert "HTTP 404 unknown model" in output and "'acme/no-such-model'" in output
        assert TEST_KEY not in stopped.output
        assert not cell_written(fresh_env, "acme/bad-key") and not cell_written(
            fresh_env, "acme/no-such-model"
        )
        assert log_of(fresh_env, "acme/bad-key") == [] and log_of(fresh_env, "acme/no-such-model") == []
        # The other cell still ran and the leaderboard was rebuilt with it.
        assert cell_written(fresh_env, "baseline/random")
        assert fresh_env.warehouse.read("leaderboard")["model_key"].to_list() == ["baseline/random"]

        # Every cell stopped again, nothing written that the analysis reads: the tables and the report are
        # left as they are (no rebuild), and the command says so; it still fails.
        store = fresh_env.warehouse
        board = [store.partition_path(t) for t in ANALYSIS_TABLES] + [
            store.root / "reports" / "leaderboard.html"
        ]
        built = {path: path.stat().st_mtime_ns for path in board}
        again = fresh_env.cli("run", "--models", "acme/bad-key,acme/no-such-model", "--editions", EDITION)
        assert again.exit_code == 1 and "2 of 2 cell(s) not complete" in again.output, again.output
        assert (
            "leaderboard current: no cell changed its scores; `oabench leaderboard` prints it" in again.output
        )
        assert "leaderboard rebuilt" not in again.output
        assert {path: path.stat().st_mtime_ns for path in board} == built

        use_replay_models(fresh_env, server.base_url, [metered], max_cost_usd=100.0)
        resumed = fresh_env.cli("run", "--models", metered, "--editions", EDITION)
        assert resumed.exit_code == 0, resumed.output
        assert "leaderboard rebuilt: 1 model key(s) × 1 edition(s), 1 cell(s) run" in resumed.output
        assert all(path.stat().st_mtime_ns > built[path] for path in board)
        stats = server.stats
    assert stats.total_requests == 80 and set(stats.requests_per_prompt.values()) == {1}
    rows = fresh_env.warehouse.read("inferences", str(cell_partition_key(metered, EDITION)))
    assert rows.height == 80 and rows["error"].null_count() == 80
    assert rows["cost_usd"].sum() == 20.0
    assert set(rows.filter(pl.col("qid").is_in([r.qid for r in kept]))["raw_response"]) == {"B"}


MISSING_ENV = "OABENCH_TEST_KEY_NOBODY_SET"


def use_registry_needing_a_missing_key(env: PipelineEnv) -> None:
    env.monkeypatch.delenv(MISSING_ENV, raising=False)
    entries = [
        {"id": "acme/needs-key", "base_url": "http://127.0.0.1:9/v1", "api_key_env": MISSING_ENV},
        {"id": "baseline/random", "kind": "baseline"},
    ]
    env.set("OABENCH_MODELS_FILE", write_models_file(env.root / "models.toml", entries))


def test_missing_key_for_a_named_model_is_a_usage_error(fresh_env: PipelineEnv) -> None:
    use_registry_needing_a_missing_key(fresh_env)
    result = fresh_env.cli("run", "--models", "acme/needs-key", "--editions", EDITION)
    assert result.exit_code == 2, result.output
    assert "acme/needs-key" in result.output and MISSING_ENV in result.output
    assert not cell_written(fresh_env, "acme/needs-key")


def test_models_without_credentials_are_skipped_with_the_reason(fresh_env: PipelineEnv) -> None:
    use_registry_needing_a_missing_key(fresh_env)
    result = fresh_env.cli("run", "--editions", EDITION, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"skipping acme/needs-key: {MISSING_ENV} is not set" in result.output
    assert "baseline/random × 45: 0 call(s)" in result.output
    assert "acme/needs-key × 45" not in result.output


@pytest.mark.slow
def test_an_endpoint_answering_500_to_everything_stops_its_cell_after_the_first_round(
    stopped_cells: StoppedCells, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every question × 7 attempts (84 s at the shipped backoff) before the cell failed. Now the first
    round (`concurrency` requests) exhausting its attempts on HTTP 500 stops the cell, in one line."""
    env = stopped_cells.saved.restore(monkeypatch)
    result, host = stopped_cells.run, stopped_cells.host_500
    assert result.exit_code == 1, result.output
    # the first round's 4 requests × 7 attempts; the other 76 questions never sent
    assert stopped_cells.sent[DOWN_500] == 4 * 7
    [line] = [text for text in result.output.splitlines() if "keeps answering" in text]
    assert line.startswith(
        f"  {DOWN_500} × {EDITION}: POST http://{host}/v1/chat/completions: {host} keeps answering HTTP 500: "
        "every request of the first round (4) got it on all 7 attempts and none was answered"
    ), line
    assert not cell_written(env, DOWN_500)


@pytest.mark.slow
def test_max_cost_usd_is_held_before_each_request_so_replies_in_flight_cannot_pass_it(
    stopped_cells: StoppedCells, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`max_cost_usd = 2`, concurrency 4, and a server that reports $1 a reply (the price snapshot says far
    less): before, the 4 requests in flight were all paid before the first cost was known ($4-5). Now each
    request holds its worst case first and, until one reply's cost is known, one is sent at a time."""
    env = stopped_cells.saved.restore(monkeypatch)
    result = stopped_cells.run
    assert result.exit_code == 1, result.output
    # $2 exactly: the bound (one reply beyond its hold) is not even used
    assert stopped_cells.sent[DOLLAR] == 2, result.output
    assert "past max_cost_usd $2" in result.output or "reached max_cost_usd $2" in result.output
    assert sum(r.total_cost_usd or 0 for r in log_of(env, DOLLAR)) == 2.0


@pytest.mark.slow
def test_unverifiable_certificate_unresolvable_host_and_redirect_each_stop_their_cell_with_a_reason(
    stopped_cells: StoppedCells, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three endpoints that cannot work, one cell each, in the module's one `oabench run`: every cell stops
    with its own reason, and none is retried into error rows."""
    env = stopped_cells.saved.restore(monkeypatch)
    result = stopped_cells.run
    assert result.exit_code != 0
    # The certificate nobody trusts: stopped at once, certificate in the message, not a single result.
    assert stopped_cells.sent[UNTRUSTED] == 0
    assert "certificate" in result.output and "SSL_CERT_FILE" in result.output
    for model in (UNTRUSTED, UNRESOLVABLE, REDIRECTED):
        assert not cell_written(env, model), model
    assert log_of(env, UNTRUSTED) == []  # not retried into error rows
    # The host that does not resolve, named.
    assert "does not resolve" in result.output and "no-such-host.invalid" in result.output
    # The redirect: the status and where it pointed, the first wave at most (concurrency 20), no retry.
    assert "HTTP 301" in result.output
    assert "https://moved.example/v1/chat/completions" in result.output
    assert stopped_cells.sent[REDIRECTED] <= 20
